"""The loop: hands each key to the reconciler of its kind and maps what comes back.

It owns nothing else. The queue and its workers are `kube.workqueue`'s; what makes a key worth
reconciling is `triggers`; what a key's reconcile does is its reconciler's (`machines`, `claims`,
`status`). A reconciler returns a `ReconcileResult`; an API refusal that escapes one is mapped here
to a transient or a permanent failure (kube.errors: `permanent`).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Mapping

import structlog

from .. import observability as obs
from ..kube.api_errors import ApiError
from ..kube.fence import NotLeader
from ..kube.workqueue import DONE, ReconcileResult
from .keys import CLAIMS_KEY, STATUS_KEY, machine_key, split_key
from .status_reconciler import StatusReconciler
from .store import InformerStore

log = structlog.get_logger(__name__)

Reconcile = Callable[[str], Awaitable[ReconcileResult]]


class KeySink:
    """Where reconcilers and triggers put keys: the work queue, or `run --once`'s list of keys."""

    def __init__(self) -> None:
        self._add: Callable[[str], None] = lambda key: None
        self._add_after: Callable[[str, float], None] = lambda key, delay: None

    def bind(self, add: Callable[[str], None], add_after: Callable[[str, float], None] | None = None) -> None:
        self._add = add
        self._add_after = add_after or (lambda key, delay: None)

    def add(self, key: str) -> None:
        self._add(key)

    def add_after(self, key: str, delay: float) -> None:
        self._add_after(key, delay)


class Loop:
    def __init__(
        self, store: InformerStore, machines: Reconcile, machine_kinds: Iterable[str], claims: Reconcile,
        status: StatusReconciler, sink: KeySink,
    ) -> None:
        self.store = store
        self.machine_kinds = tuple(machine_kinds)
        self.status = status
        self.sink = sink
        self._by_kind: Mapping[str, Reconcile] = {
            STATUS_KEY: status.reconcile, CLAIMS_KEY: claims, **dict.fromkeys(self.machine_kinds, machines)
        }

    async def reconcile(self, key: str) -> ReconcileResult:
        """Reconcile one key. Expected failures come back as a result, never as an exception."""
        try:
            result = await self._dispatch(key)
        except NotLeader as exc:
            # The process is about to exit (the elector lost the Lease): nothing more to do here.
            log.info("write not sent: not the leader", key=key, why=str(exc))
            return DONE
        except ApiError as exc:
            result = ReconcileResult(error=f"{exc.what}: {exc.describe()}", reason=exc.reason or f"HTTP{exc.status}",
                                     permanent=exc.permanent)
        if result.error is not None:
            obs.RECONCILE_ERRORS.labels(reason=result.reason or "Unknown").inc()
        return result

    async def _dispatch(self, key: str) -> ReconcileResult:
        kind = key if key.startswith("@") else split_key(key)[0]
        reconcile = self._by_kind.get(kind)
        if reconcile is None:
            log.warning("no reconciler for this key; dropped", key=key)
            return DONE
        result = await reconcile(key)
        if kind in self.machine_kinds:
            self.sink.add(STATUS_KEY)
            self.status.after_machine_key()
        return result

    def enqueue_all(self) -> None:
        for kind in self.machine_kinds:
            for obj in self.store.list(kind):
                self.sink.add(machine_key(obj))
        self.sink.add(STATUS_KEY)
        self.sink.add(CLAIMS_KEY)
