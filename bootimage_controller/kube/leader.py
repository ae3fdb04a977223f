"""Leader election on a coordination.k8s.io/v1 Lease (client-go's leaderelection, trimmed).

Written here rather than wrapping `kubernetes_asyncio.leaderelection` because that one never
releases the Lease on shutdown (a restart then waits a whole lease duration with nobody
writing) and builds its timestamps from naive local time with "Z" appended (wrong unless
TZ=UTC).

Rules, as in client-go:
- A Lease held by someone else is valid until `leaseDurationSeconds` after the moment *we* last
  saw its record change, measured on our monotonic clock: clocks of different hosts never
  have to agree, and a wall-clock jump cannot hand the Lease to two holders.
- Writes are PUTs carrying the resourceVersion read (409: someone else won the race).
- The leader renews every `retry_period`; if it cannot renew for `renew_deadline`, or sees
  another holder, it stops leading: its work task is cancelled and `run()` raises
  `LeadershipLost`. It does not campaign again: the process exits non-zero and restarts clean, as
  client-go's and library-go's controllers do (`OnStoppedLeading` -> fatal), so no state built
  while leading (caches of our own writes, hot-loop counts, queued events) outlives leadership.
- `write_refusal()` is the write fence (kube/fence.py): a write may be sent only while this
  process leads *and* less than `renew_deadline` has passed since the start of the last
  successful acquire or renew. Measured from the start of that request, the window closes before
  any other candidate can see the Lease expire (`lease_duration` after it saw the renewal arrive),
  with `lease_duration - renew_deadline` to spare for in-flight requests and clock rate drift.
  A process frozen past that point (SIGSTOP, a stalled VM) sends nothing when it thaws.
- `release()` stops leading, then writes an empty holder with a 1 s duration so a follower
  takes over at its next retry instead of after a full lease duration.
Timestamps written to the Lease are UTC whatever TZ says.

Timings are library-go's (`LeaderElectionDefaulting`: 137 s lease, 107 s renew deadline, 26 s
retry), which ride out a 60 s kube-apiserver rollout, and its single-node profile (270/240/60 s)
when Infrastructure `status.controlPlaneTopology` is `SingleReplica`.
"""

from __future__ import annotations

import asyncio
import os
import random
import socket
import time
import uuid
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any, Protocol, TypeVar

import structlog
from kubernetes_asyncio.client import CoordinationV1Api
from kubernetes_asyncio.client.exceptions import ApiException

from ..constants import LEASE_NAME
from .client import read_json
from .fence import NotLeader
from .retry import describe

log = structlog.get_logger(__name__)


def format_micro_time(dt: datetime) -> str:
    """`metav1.MicroTime` (the Lease's acquire and renew times): `2026-01-02T03:04:05.000000Z`, in UTC
    (a naive datetime is taken to be UTC). Not `datetime.isoformat()`: it drops a zero fraction,
    which MicroTime refuses, and says `+00:00`."""
    utc = dt.replace(tzinfo=UTC) if dt.tzinfo is None else dt.astimezone(UTC)
    return utc.strftime("%Y-%m-%dT%H:%M:%S.%fZ")

T = TypeVar("T")
Callback = Callable[[], Coroutine[Any, Any, None]]
Work = Callable[[], Coroutine[Any, Any, T]]
Clock = Callable[[], float]
WallClock = Callable[[], datetime]

# Retry periods are stretched by up to this factor (client-go JitterFactor) so candidates desync.
JITTER = 1.2


@dataclass(frozen=True)
class LeaseTimings:
    """How long a Lease lasts, how long a leader may fail to renew it, how often it tries."""

    lease_duration: float
    renew_deadline: float
    retry_period: float

    def __post_init__(self) -> None:
        if self.retry_period <= 0 or self.lease_duration < 1:
            raise ValueError(
                "retry_period must be > 0 and lease_duration >= 1s (Lease durations are whole seconds)"
            )
        if not self.lease_duration > self.renew_deadline > JITTER * self.retry_period:
            raise ValueError(
                "need lease_duration > renew_deadline > 1.2 * retry_period, got "
                f"{self.lease_duration}, {self.renew_deadline}, {self.retry_period}"
            )


# library-go's LeaderElectionDefaulting and LeaderElectionSNOConfig.
OPENSHIFT_TIMINGS = LeaseTimings(137.0, 107.0, 26.0)
SINGLE_NODE_TIMINGS = LeaseTimings(270.0, 240.0, 60.0)


class LeadershipLost(Exception):
    """This process stopped holding the Lease: it could not renew in time, or another took it."""


class WorkCancelled(Exception):
    """The leader's work task was cancelled from outside while this process led."""


class LeaseHeldElsewhere(Exception):
    """A single acquisition attempt (`run --once --leader-elect`) found the Lease held."""

    def __init__(self, holder: str, detail: str = "", lease: str = "") -> None:
        self.holder = holder  # "": unknown, the attempt itself failed (`detail` says how)
        self.detail = detail
        self.lease = lease  # namespace/name
        super().__init__(f"lease held by {holder or 'an unknown holder'}{': ' + detail if detail else ''}")


def utc_now() -> datetime:
    return datetime.now(UTC)


def default_identity() -> str:
    """`$POD_NAME` (unique within the namespace) or `hostname_uuid` (unique per process)."""
    pod = os.environ.get("POD_NAME")
    return pod if pod else f"{socket.gethostname()}_{uuid.uuid4()}"


@dataclass(frozen=True)
class LeaseRecord:
    """The Lease spec fields leader election uses, plus the resourceVersion they were read at."""

    holder: str
    duration_seconds: int
    acquire_time: str | None
    renew_time: str | None
    transitions: int
    resource_version: str | None = None

    @classmethod
    def from_lease(cls, lease: dict[str, Any]) -> LeaseRecord:
        spec = lease.get("spec") or {}
        return cls(
            holder=str(spec.get("holderIdentity") or ""),
            duration_seconds=int(spec.get("leaseDurationSeconds") or 0),
            acquire_time=spec.get("acquireTime"),
            renew_time=spec.get("renewTime"),
            transitions=int(spec.get("leaseTransitions") or 0),
            resource_version=(lease.get("metadata") or {}).get("resourceVersion"),
        )

    def spec(self) -> dict[str, Any]:
        return {
            "holderIdentity": self.holder or None,
            "leaseDurationSeconds": self.duration_seconds,
            "acquireTime": self.acquire_time,
            "renewTime": self.renew_time,
            "leaseTransitions": self.transitions,
        }

    def same_record(self, other: LeaseRecord | None) -> bool:
        return other is not None and replace(self, resource_version=None) == replace(
            other, resource_version=None
        )


class Conflict(Exception):
    """The Lease changed (or appeared) since it was read."""


class LeaseStore(Protocol):
    async def get(self) -> LeaseRecord | None: ...

    async def create(self, record: LeaseRecord) -> LeaseRecord: ...

    async def update(self, record: LeaseRecord) -> LeaseRecord:
        """Write `record` if the Lease is still at `record.resource_version`, else raise Conflict."""
        ...


class KubeLeaseStore:
    """A `LeaseStore` on the API server (raw JSON so MicroTime strings round-trip untouched)."""

    def __init__(
        self, api: Any, namespace: str, name: str = LEASE_NAME, request_timeout: float = 10.0
    ) -> None:
        self.api = CoordinationV1Api(api)
        self.namespace = namespace
        self.name = name
        self.request_timeout = request_timeout

    async def get(self) -> LeaseRecord | None:
        try:
            lease = await read_json(
                await self.api.read_namespaced_lease(
                    self.name, self.namespace, _preload_content=False, _request_timeout=self.request_timeout
                )
            )
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise
        return LeaseRecord.from_lease(lease)

    def _body(self, record: LeaseRecord) -> Any:  # a dict; the typed API only says V1Lease
        meta: dict[str, Any] = {"name": self.name, "namespace": self.namespace}
        if record.resource_version:
            meta["resourceVersion"] = record.resource_version
        return {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": meta,
            "spec": record.spec(),
        }

    async def create(self, record: LeaseRecord) -> LeaseRecord:
        try:
            lease = await read_json(
                await self.api.create_namespaced_lease(
                    self.namespace,
                    self._body(replace(record, resource_version=None)),
                    _preload_content=False,
                    _request_timeout=self.request_timeout,
                )
            )
        except ApiException as exc:
            if exc.status == 409:
                raise Conflict("lease was created by someone else") from exc
            raise
        return LeaseRecord.from_lease(lease)

    async def update(self, record: LeaseRecord) -> LeaseRecord:
        try:
            lease = await read_json(
                await self.api.replace_namespaced_lease(
                    self.name,
                    self.namespace,
                    self._body(record),
                    _preload_content=False,
                    _request_timeout=self.request_timeout,
                )
            )
        except ApiException as exc:
            if exc.status in (404, 409):
                raise Conflict(f"lease changed: {exc.status}") from exc
            raise
        return LeaseRecord.from_lease(lease)


class LeaderElector:
    """Campaign for the Lease; while leading, run `on_started_leading` as a task.

    Typical wiring: informers run on every replica (followers keep caches warm); the controller
    starts its workers in `on_started_leading`, and its writers also check `is_leader`. On
    shutdown call `await elector.release()` from outside the leading task.
    """

    def __init__(
        self,
        api: Any,
        identity: str,
        namespace: str,
        lease_duration: float = OPENSHIFT_TIMINGS.lease_duration,
        renew_deadline: float = OPENSHIFT_TIMINGS.renew_deadline,
        retry_period: float = OPENSHIFT_TIMINGS.retry_period,
        *,
        name: str = LEASE_NAME,
        store: LeaseStore | None = None,
        clock: Clock = time.monotonic,
        wall_clock: WallClock = utc_now,
    ) -> None:
        if not identity:
            raise ValueError("leader election identity must not be empty")
        LeaseTimings(lease_duration, renew_deadline, retry_period)  # validates
        self.identity = identity
        self.namespace = namespace
        self.name = name
        self.lease_duration = lease_duration
        self.renew_deadline = renew_deadline
        self.retry_period = retry_period
        self.store: LeaseStore = store if store is not None else KubeLeaseStore(api, namespace, name)
        self._clock = clock
        self._wall = wall_clock
        self._observed: LeaseRecord | None = None
        self._observed_at = 0.0
        # Monotonic time until which writes may be sent (see write_refusal).
        self._valid_until = -float("inf")
        self._last_error = ""
        self._leading = asyncio.Event()
        self._lost_reason = ""
        self._running = False
        self._run_task: asyncio.Task[None] | None = None
        self._log = log.bind(lease=f"{namespace}/{name}", identity=identity)

    # --- state for callers ------------------------------------------------------------------------

    @property
    def is_leader(self) -> bool:
        return self._leading.is_set()

    @property
    def running(self) -> bool:
        """True while `run()` is campaigning or leading (for `/readyz`)."""
        return self._running

    def write_refusal(self) -> NotLeader | None:
        """None while a write may be sent (the write fence's check); else why not."""
        if not self._leading.is_set():
            return NotLeader(f"not the leader (lease {self.namespace}/{self.name} held by {self.leader or 'nobody'})")
        if self._clock() >= self._valid_until:
            return NotLeader(
                f"lease {self.namespace}/{self.name} not renewed within the {self.renew_deadline:g}s renew deadline"
            )
        return None

    @property
    def leader(self) -> str:
        """The holder last observed ('' when unknown or released)."""
        return self._observed.holder if self._observed else ""

    # --- main loop --------------------------------------------------------------------------------

    async def run(self, work: Work[T], on_stopped_leading: Callback | None = None, *, campaign: bool = True) -> T:
        """Acquire the Lease, then run `work` while renewing it; returns what `work` returns.

        `campaign=False` makes one attempt and raises `LeaseHeldElsewhere` when it fails (`--once`).
        Losing the Lease cancels `work` and raises `LeadershipLost`; `work` failing ends leading and
        its exception propagates. Cancelling this coroutine stops leading without releasing the
        Lease (a crash, as far as the other candidates can tell: they take over when it expires).
        """
        self._running = True
        self._run_task = asyncio.current_task()
        try:
            if campaign:
                await self._acquire()
            elif not await self.attempt(self.renew_deadline):
                raise LeaseHeldElsewhere(self.leader, self._last_error, f"{self.namespace}/{self.name}")
            return await self._lead(work, on_stopped_leading)
        finally:
            self._running = False

    async def _acquire(self) -> None:
        self._log.info("campaigning for leadership")
        while not await self.attempt(self.retry_period):
            await asyncio.sleep(self._jittered())

    async def _lead(self, work: Work[T], on_stopped_leading: Callback | None) -> T:
        self._leading.set()
        self._log.info("started leading")
        loop = asyncio.get_running_loop()
        work_task = loop.create_task(work(), name="leader-work")
        renewal = loop.create_task(self._renew_until_lost(), name="lease-renewal")
        try:
            await asyncio.wait({work_task, renewal}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            self._leading.clear()
            for task in (work_task, renewal):
                task.cancel()
            await asyncio.gather(work_task, renewal, return_exceptions=True)
            self._log.info("stopped leading")
            if on_stopped_leading is not None:
                await on_stopped_leading()
        if renewal.done() and not renewal.cancelled() and renewal.exception() is None:
            raise LeadershipLost(self._lost_reason)
        if work_task.cancelled():  # by someone else: we did not cancel it before it ended
            raise WorkCancelled("the leader's work was cancelled")
        return work_task.result()  # its value, or its exception

    async def _renew_until_lost(self) -> None:
        """Renew every retry period; returns (with `_lost_reason` set) once the Lease is lost."""
        last_renew = self._clock()
        while True:
            await asyncio.sleep(self.retry_period)
            budget = last_renew + self.renew_deadline - self._clock()
            if budget > 0 and await self.attempt(budget):
                last_renew = self._clock()
                continue
            if self._observed is not None and self._observed.holder not in ("", self.identity):
                self._lost(f"lease taken by {self._observed.holder}")
                return
            if self._clock() - last_renew >= self.renew_deadline:
                self._lost(f"failed to renew the lease within the {self.renew_deadline:g}s renew deadline")
                return

    def _lost(self, reason: str) -> None:
        # The fence closes here, before any other task runs again.
        self._leading.clear()
        self._valid_until = -float("inf")
        self._lost_reason = reason
        self._log.warning("leadership lost", reason=reason)

    def _jittered(self) -> float:
        return self.retry_period * (1.0 + (JITTER - 1.0) * random.random())

    async def attempt(self, timeout: float) -> bool:
        """One acquire-or-renew bounded by `timeout`; True when this process holds the Lease after it."""
        started = self._clock()
        try:
            # `asyncio.timeout`, not `wait_for`: on Python 3.11 `wait_for` can swallow a cancellation
            # that lands as the request completes (CPython gh-86296), and this runs in the campaign
            # loop: a cancelled elector then campaigned on forever (a test fixture hung on it).
            async with asyncio.timeout(timeout):
                acquired = await self.try_acquire_or_renew()
        except asyncio.CancelledError:
            raise
        except Conflict as exc:
            self._last_error = str(exc)
            return False
        except Exception as exc:
            self._last_error = describe(exc)
            self._log.warning("lease request failed", error=self._last_error)
            return False
        if acquired:
            # From the start of the request: the server may have stored it any time after that.
            self._valid_until = started + self.renew_deadline
        return acquired

    def _observe(self, record: LeaseRecord) -> None:
        if not record.same_record(self._observed):
            self._observed_at = self._clock()
        self._observed = record

    def _held_by_other(self, record: LeaseRecord) -> bool:
        return (
            record.holder not in ("", self.identity)
            and self._observed_at + record.duration_seconds > self._clock()
        )

    async def try_acquire_or_renew(self) -> bool:
        """client-go's `tryAcquireOrRenew`: read the Lease, take it when free or expired (as this
        process's clock saw its renewals), renew it when ours; True when ours after."""
        now = format_micro_time(self._wall())
        duration = int(-(-self.lease_duration // 1))  # ceil: the Lease stores whole seconds
        current = await self.store.get()
        if current is None:
            mine = LeaseRecord(self.identity, duration, now, now, 0)
            self._observe(await self.store.create(mine))
            return True
        self._observe(current)
        if self._held_by_other(current):
            return False
        if current.holder == self.identity:
            wanted = replace(current, duration_seconds=duration, renew_time=now)
        else:
            wanted = replace(
                current,
                holder=self.identity,
                duration_seconds=duration,
                acquire_time=now,
                renew_time=now,
                transitions=current.transitions + 1,
            )
        self._observe(await self.store.update(wanted))
        return True

    # --- shutdown ---------------------------------------------------------------------------------

    async def release(self) -> bool:
        """Stop campaigning and leading, then give the Lease up if we hold it.

        Returns True when the Lease was released. Must not be awaited from the leading task
        (it waits for that task to end).
        """
        task = self._run_task
        if task is not None and not task.done() and task is not asyncio.current_task():
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
        try:
            current = await self.store.get()
            if current is None or current.holder != self.identity:
                return False
            now = format_micro_time(self._wall())
            await self.store.update(
                replace(current, holder="", duration_seconds=1, acquire_time=now, renew_time=now)
            )
        except Exception as exc:
            self._log.warning(
                "could not release lease; followers take over when it expires", error=describe(exc)
            )
            return False
        self._log.info("released lease")
        return True


class AlwaysLeader:
    """The `LeaderElector` interface for `--no-leader-elect`: leads at once, for as long as the work
    runs. The admin who turned leader election off vouches that this is the only writer."""

    def __init__(self, identity: str = "") -> None:
        self.identity = identity or default_identity()
        self._leading = asyncio.Event()
        self._running = False
        self._run_task: asyncio.Task[Any] | None = None

    @property
    def is_leader(self) -> bool:
        return self._leading.is_set()

    @property
    def running(self) -> bool:
        return self._running

    @property
    def leader(self) -> str:
        return self.identity if self.is_leader else ""

    def write_refusal(self) -> NotLeader | None:
        return None if self.is_leader else NotLeader("not running the controller's work")

    async def run(self, work: Work[T], on_stopped_leading: Callback | None = None, *, campaign: bool = True) -> T:
        self._running = True
        self._run_task = asyncio.current_task()
        self._leading.set()
        try:
            return await work()
        finally:
            self._leading.clear()
            self._running = False
            if on_stopped_leading is not None:
                await on_stopped_leading()

    async def release(self) -> bool:
        task = self._run_task
        if task is not None and not task.done() and task is not asyncio.current_task():
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
        return False


Elector = LeaderElector | AlwaysLeader
