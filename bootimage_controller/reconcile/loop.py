"""The loop: hands each key to the reconciler of its kind and maps what comes back.

It owns nothing else. The queue and its workers are `kube.workqueue`'s; what makes a key worth
reconciling is `triggers`; what a key's reconcile does is its reconciler's (`machines`, `claims`,
`status`). Every reconciler returns what happened as one `ReconcileResult`: what the queue does
next, and for a machine key its `state` (a `MachineSetState`), which the loop hands to the status
reconciler (the one way back). An API refusal that escapes one is mapped here to a
transient or a permanent failure (`kube.api_errors`: `ApiError.permanent`); no answer at all
(`kube.retry.CONNECTION_ERRORS`) is a transient one.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable
from typing import Any, Protocol

import structlog

from .. import observability as obs
from ..constants import RECONCILE_REASON_UNREACHABLE
from ..kube.api_errors import ApiError
from ..kube.fence import NotLeader
from ..kube.retry import CONNECTION_ERRORS, describe
from ..kube.workqueue import DONE, ReconcileResult
from .keys import CLAIMS_KEY, STATUS_KEY, machine_key, split_key
from .state import MachineSetState
from .status_reconciler import StatusReconciler
from .store import InformerStore

log = structlog.get_logger(__name__)

# A machine reconciler's results carry its key's `MachineSetState` (`ReconcileResult[MachineSetState]`);
# the others' carry none (`ReconcileResult[None]`).
Reconcile = Callable[[str], Awaitable[ReconcileResult[Any]]]
# How soon a key comes back when a cache it may read has not listed yet (`Loop._dispatch`).
CACHE_WAIT = 0.5


class KeySink(Protocol):
    """Where triggers and reconcilers put keys. `kube.workqueue.WorkQueue` is one (the daemon);
    `KeyList` is `run --once`'s. Passed to `assemble`, never rebound."""

    def add(self, key: str) -> None: ...

    def add_after(self, key: str, delay: float) -> None: ...


class KeyList:
    """`run --once`'s sink: every key once, in the order first added. Nothing is delayed: a pass
    that asks to come back later is not complete, and the run says so."""

    def __init__(self) -> None:
        self.keys: dict[str, None] = {}

    def add(self, key: str) -> None:
        self.keys.setdefault(key)

    def add_after(self, key: str, delay: float) -> None:
        pass


class Loop:
    """Reconcilers are registered by kind, in one table: `register_machines` for the machine objects
    (the state of their results goes to the status reconciler), `register` for the others;
    `_dispatch` picks by the key's kind."""

    def __init__(self, store: InformerStore, status: StatusReconciler, sink: KeySink) -> None:
        self.store = store
        self.status = status
        self.sink = sink
        self.machine_kinds: tuple[str, ...] = ()
        self._by_kind: dict[str, Reconcile] = {STATUS_KEY: status.reconcile}

    def register(self, kinds: Iterable[str], reconcile: Reconcile) -> None:
        """`reconcile` for keys of `kinds`."""
        for kind in kinds:
            self._by_kind[kind] = reconcile

    def register_machines(self, kinds: Iterable[str], reconcile: Reconcile) -> None:
        """`reconcile` for machine objects of `kinds`: the state of every result goes to the status
        reconciler, and a pass over them is reported (`@status`)."""
        kinds = tuple(kinds)
        self.register(kinds, reconcile)
        self.machine_kinds += kinds

    async def reconcile(self, key: str) -> ReconcileResult[Any]:
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
        except CONNECTION_ERRORS as exc:
            # No answer at all once `api_call` gave up (the server went away, a reset mid-read): the
            # key's failure, retried with its backoff, said in one line. Not a bug, so no traceback
            # from the workqueue, and `run --once` counts it as a failed reconcile (issue 46).
            result = ReconcileResult.transient(RECONCILE_REASON_UNREACHABLE, f"no answer from the API server: {describe(exc)}")
        if result.error is not None:
            obs.RECONCILE_ERRORS.labels(reason=result.reason or "Unknown").inc()
        return result

    async def _dispatch(self, key: str) -> ReconcileResult[Any]:
        if not self.store.synced():
            # A cache started on demand (the Cluster API's, as its first pool appeared) has not
            # listed yet: nothing is planned or claimed on a partial cache. Its list's events
            # queue what it concerns; this key comes back after a short wait too.
            return ReconcileResult(requeue_after=CACHE_WAIT)
        kind = key if key.startswith("@") else split_key(key)[0]
        reconcile = self._by_kind.get(kind)
        if reconcile is None:
            log.warning("no reconciler for this key; dropped", key=key)
            return DONE
        result = await reconcile(key)
        if kind in self.machine_kinds:
            state: MachineSetState | None = result.state
            self.status.record(key, state)
            self.sink.add(STATUS_KEY)
            self.status.after_machine_key()
        return result

    def enqueue_all(self) -> None:
        for kind in self.machine_kinds:
            for obj in self.store.list(kind):
                self.sink.add(machine_key(obj))
        self.sink.add(STATUS_KEY)
        self.sink.add(CLAIMS_KEY)
