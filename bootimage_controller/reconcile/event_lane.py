"""Kubernetes Events on the objects we act on (SPEC section 3, Events).

`EventRecorder.emit` creates a core/v1 Event in the object's namespace. Like client-go's
`EventCorrelator`:
- a repeat (same object, type, reason and message within `window` seconds) patches the existing
  Event's `count` and `lastTimestamp` instead of creating another one;
- a per-object token bucket (burst 25, one more every 5 minutes) drops floods.
Unlike client-go, messages that differ are never merged into "(combined from similar events)":
our messages name the image and the fix, and merging would hide them.

Events are best effort: `emit` never raises (errors are logged and the event dropped), so a
failing Events API can never fail a reconcile.

`EventLane` is how the controller hands events over: it returns at once, and writes them in the
background, Normal events only once the MachineSet work is done (see its docstring). A fleet-wide
pass patches thousands of MachineSets: past `AGGREGATE_AFTER` Normal events of one reason in
`AGGREGATE_WINDOW` seconds, the rest are folded into one summary Event on the controller's own
claim holder ConfigMap in openshift-machine-api, beside the MachineSets' Events (its message names
how many and which), instead of one Event each. Warnings are never folded.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import time
from collections import OrderedDict, deque
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Protocol

import structlog

from .. import observability as obs
from ..constants import (
    CONFIG_GROUP,
    CONFIG_VERSION,
    CPMS_KIND,
    CPMS_VERSION,
    EVENT_COMPONENT,
    EVENT_TYPE_NORMAL,
    EVENT_TYPE_WARNING,
    MACHINE_API_GROUP,
    MACHINECONFIGURATION_KIND,
    MACHINESET_KIND,
    MACHINESET_VERSION,
    MAX_EVENT_MESSAGE,
    MERGE_PATCH,
    OPERATOR_GROUP,
    OPERATOR_VERSION,
)
from ..core.model import first_names
from ..core.times import format_time
from ..kube.api_errors import NotFound
from ..kube.client import send_and_discard
from ..kube.retry import Sleep, api_call, describe

log = structlog.get_logger(__name__)

# Per reason: this many Normal events in the window go out one per MachineSet; the rest of the
# window's are folded into one summary Event per reason (each MachineSet's record annotations
# still say what was done to it). 100 keeps `oc get events` readable and etcd light in a
# 5,000-MachineSet pass, where one Event each would be 5,000 objects kept for an hour.
AGGREGATE_AFTER = 100
AGGREGATE_WINDOW = 600.0
# Names listed in a summary Event's message; the count says how many there were.
SUMMARY_NAMES = 20

# Events of cluster-scoped objects go to `default`, as client-go does.
CLUSTER_SCOPED_EVENT_NAMESPACE = "default"

# apiVersion by kind, for objects that do not carry one.
_API_VERSIONS = {
    MACHINESET_KIND: f"{MACHINE_API_GROUP}/{MACHINESET_VERSION}",
    CPMS_KIND: f"{MACHINE_API_GROUP}/{CPMS_VERSION}",
    MACHINECONFIGURATION_KIND: f"{OPERATOR_GROUP}/{OPERATOR_VERSION}",
    "ClusterOperator": f"{CONFIG_GROUP}/{CONFIG_VERSION}",
    "ConfigMap": "v1",
    "Node": "v1",
    "Secret": "v1",
}


class Involved(Protocol):
    """The object an Event is about; `model.MachineResource` has these."""

    @property
    def kind(self) -> str: ...
    @property
    def namespace(self) -> str: ...
    @property
    def name(self) -> str: ...
    @property
    def uid(self) -> str: ...


class EventsApi(Protocol):
    """What the recorder calls: `kube.core_api.CoreApi` in the daemon, a fake in the tests."""

    def create_namespaced_event(self, namespace: str, body: Any, *, _preload_content: bool) -> Awaitable[Any]: ...
    def patch_namespaced_event(
        self, name: str, namespace: str, body: Any, *, _content_type: str, _preload_content: bool
    ) -> Awaitable[Any]: ...


@dataclass(frozen=True, slots=True)
class ObjectRef:
    """An `involvedObject`: the parts the aggregation key uses."""

    kind: str
    namespace: str
    name: str
    uid: str
    api_version: str

    @classmethod
    def of(cls, obj: Involved) -> ObjectRef:
        api_version = getattr(obj, "api_version", None) or getattr(obj, "apiVersion", None)
        return cls(
            kind=obj.kind,
            namespace=obj.namespace or "",
            name=obj.name,
            uid=obj.uid or "",
            api_version=str(api_version or _API_VERSIONS.get(obj.kind, "")),
        )

    def to_dict(self) -> dict[str, str]:
        out = {"kind": self.kind, "name": self.name}
        if self.namespace:
            out["namespace"] = self.namespace
        if self.uid:
            out["uid"] = self.uid
        if self.api_version:
            out["apiVersion"] = self.api_version
        return out


@dataclass(slots=True)
class _Recorded:
    namespace: str
    name: str
    count: int
    seen_at: float  # monotonic


class _SpamFilter:
    """One token bucket per object: `burst` events, refilled at `per_second`; over it, drop."""

    def __init__(self, burst: int, per_second: float, clock: Callable[[], float], size: int) -> None:
        self._burst = float(burst)
        self._rate = per_second
        self._clock = clock
        self._size = size
        self._buckets: OrderedDict[ObjectRef, tuple[float, float]] = OrderedDict()

    def allow(self, ref: ObjectRef) -> bool:
        now = self._clock()
        tokens, last = self._buckets.pop(ref, (self._burst, now))
        tokens = min(self._burst, tokens + (now - last) * self._rate)
        allowed = tokens >= 1.0
        self._buckets[ref] = (tokens - 1.0 if allowed else tokens, now)
        while len(self._buckets) > self._size:
            self._buckets.popitem(last=False)
        return allowed


def _now() -> datetime:
    return datetime.now(UTC)


class EventRecorder:
    """Creates and aggregates core/v1 Events. Counters `created`, `aggregated`, `dropped`."""

    def __init__(
        self,
        core_api: EventsApi,
        component: str = EVENT_COMPONENT,
        host: str | None = None,
        *,
        window: float = 600.0,
        burst: int = 25,
        refill_per_second: float = 1.0 / 300.0,
        cache_size: int = 4096,
        attempts: int = 2,
        clock: Callable[[], float] = time.monotonic,
        wall: Callable[[], datetime] = _now,
        sleep: Sleep = asyncio.sleep,
    ) -> None:
        self._api = core_api
        self.component = component
        self.host = host if host is not None else socket.gethostname()
        self._window = window
        self._cache_size = cache_size
        self._attempts = attempts
        self._clock = clock
        self._wall = wall
        self._sleep = sleep
        self._spam = _SpamFilter(burst, refill_per_second, clock, cache_size)
        self._recent: OrderedDict[tuple[ObjectRef, str, str, str], _Recorded] = OrderedDict()
        # One lock per (object, type, reason, message) in flight: two repeats must not both create,
        # while different events go out concurrently (a fleet-wide pass emits thousands).
        self._inflight: dict[tuple[ObjectRef, str, str, str], tuple[asyncio.Lock, list[int]]] = {}
        self.created = 0
        self.aggregated = 0
        self.dropped = 0
        self._last_ns = 0

    def reference(self, involved: Involved, reason: str) -> ObjectRef | None:
        """`involved` as an event's object reference; None (the event dropped, and logged) if it is not one."""
        try:
            return ObjectRef.of(involved)
        except Exception as exc:
            self.dropped += 1
            log.warning("event dropped: not an object reference", reason=reason, error=describe(exc))
            return None

    async def emit(self, involved: Involved, type: str, reason: str, message: str) -> None:
        """Record an Event about `involved`. Never raises."""
        ref = self.reference(involved, reason)
        if ref is None:
            return
        if type not in (EVENT_TYPE_NORMAL, EVENT_TYPE_WARNING):
            self.dropped += 1
            log.warning("event dropped: unsupported type", type=type, reason=reason, object=ref.name)
            return
        message = message if len(message) <= MAX_EVENT_MESSAGE else message[: MAX_EVENT_MESSAGE - 3] + "..."
        if not self._spam.allow(ref):
            self.dropped += 1
            log.debug("event dropped by rate limit", kind=ref.kind, name=ref.name, reason=reason)
            return
        key = (ref, str(type), str(reason), message)
        lock, users = self._inflight.setdefault(key, (asyncio.Lock(), [0]))
        users[0] += 1
        try:
            async with lock:
                await self._record(ref, str(type), str(reason), message)
        except Exception as exc:
            self.dropped += 1
            log.warning(
                "event dropped",
                kind=ref.kind,
                namespace=ref.namespace,
                name=ref.name,
                reason=reason,
                error=describe(exc),
            )
        finally:
            users[0] -= 1
            if users[0] == 0:
                self._inflight.pop(key, None)

    async def _record(self, ref: ObjectRef, type_: str, reason: str, message: str) -> None:
        key = (ref, type_, reason, message)
        now_mono = self._clock()
        stamp = format_time(self._wall())
        seen = self._recent.get(key)
        fresh = seen is not None and now_mono - seen.seen_at <= self._window
        if seen is not None and fresh and await self._bump(seen, stamp):
            seen.seen_at = now_mono
            self._recent.move_to_end(key)
            return
        namespace = ref.namespace or CLUSTER_SCOPED_EVENT_NAMESPACE
        name = f"{ref.name}.{self._unique_ns():x}"
        body = {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"name": name, "namespace": namespace},
            "involvedObject": ref.to_dict(),
            "type": type_,
            "reason": reason,
            "message": message,
            "source": {"component": self.component, "host": self.host},
            "reportingComponent": self.component,
            "reportingInstance": self.host,
            "firstTimestamp": stamp,
            "lastTimestamp": stamp,
            "count": 1,
        }
        await api_call(
            # Raw responses: the answer is not read, and building a V1Event model from it (dates
            # parsed with dateutil) cost a millisecond of CPU per event.
            lambda: send_and_discard(self._api.create_namespaced_event(namespace, body, _preload_content=False)),
            what=f"create event {namespace}/{name}",
            attempts=self._attempts,
            sleep=self._sleep,
        )
        self.created += 1
        self._remember(key, _Recorded(namespace, name, 1, now_mono))

    async def _bump(self, seen: _Recorded, stamp: str) -> bool:
        """Count a repeat on the existing Event; False if it is gone (expired: create anew)."""
        body = {"count": seen.count + 1, "lastTimestamp": stamp}
        try:
            await api_call(
                lambda: send_and_discard(
                    self._api.patch_namespaced_event(
                        seen.name, seen.namespace, body, _content_type=MERGE_PATCH, _preload_content=False
                    )
                ),
                what=f"patch event {seen.namespace}/{seen.name}",
                attempts=self._attempts,
                sleep=self._sleep,
            )
        except NotFound:
            return False
        seen.count += 1
        self.aggregated += 1
        return True

    def _unique_ns(self) -> int:
        """client-go names Events `<object>.<unix nanoseconds in hex>`; never reuse one."""
        self._last_ns = max(time.time_ns(), self._last_ns + 1)
        return self._last_ns

    def _remember(self, key: tuple[ObjectRef, str, str, str], rec: _Recorded) -> None:
        self._recent[key] = rec
        while len(self._recent) > self._cache_size:
            self._recent.popitem(last=False)


@dataclass(frozen=True, slots=True)  # one per patch, pending until the pass ends
class PendingEvent:
    """An event handed over and not written yet: a reference, not the object (the cache has
    moved on to the version our patch wrote; keeping the old one alive would double memory)."""

    involved: ObjectRef
    type: str
    reason: str
    message: str
    queued_at: float  # monotonic


class Spawn(Protocol):
    def __call__(self, coro: Coroutine[Any, Any, Any], name: str, *, finite: bool) -> asyncio.Task[Any]: ...


def _create_task(coro: Coroutine[Any, Any, Any], name: str, *, finite: bool) -> asyncio.Task[Any]:
    return asyncio.get_running_loop().create_task(coro, name=name)


class EventLane:
    """Writes events in the background, behind the work they report.

    client-go's controllers hand events to a broadcaster that writes them from its own goroutine
    while the controller goes on; this is the same hand-over, with one priority rule:

    - Warning events (a failure, a hot loop, a skip an admin can act on) go out at once: they are
      few, one per change of outcome, and an admin is waiting for them.
    - Normal events (`BootImageUpdated`, one per patched MachineSet: thousands in a fleet-wide
      pass) wait while `busy()` says MachineSet work is queued or in flight, and at most
      `max_delay` seconds. The API server and etcd are shared with everyone: an event write
      that a boot image patch has to queue behind delays the patch, and the patch is the work.
      The record annotations and the MachineConfiguration conditions say what was patched as
      it happens; the events follow when the pass is done.

    Up to `concurrency` events are written at once. `flush()` writes what is left without
    waiting for the work to end (shutdown, `--once`); events still pending when it times out
    are dropped and logged, never waited for forever.
    """

    def __init__(
        self,
        recorder: EventRecorder,
        *,
        busy: Callable[[], bool] = lambda: False,
        concurrency: int = 4,
        max_delay: float = 60.0,
        poll: float = 0.1,
        clock: Callable[[], float] = time.monotonic,
        spawn: Spawn | None = None,
        summary_target: Callable[[], Involved | None] = lambda: None,
        aggregate_after: int = AGGREGATE_AFTER,
        aggregate_window: float = AGGREGATE_WINDOW,
    ) -> None:
        self.recorder = recorder
        # Where summary Events go (the claim holder); None: no summaries, one Event each.
        self._summary_target = summary_target
        self._aggregate_after = aggregate_after
        self._aggregate_window = aggregate_window
        self._normal_sent: dict[str, deque[float]] = {}  # reason -> post times in the window
        self._folded: dict[str, list[PendingEvent]] = {}  # reason -> events folded into its next summary
        self.folded = 0  # events folded into summaries, for the exit log
        self._spawn = spawn
        self._busy = busy
        self._concurrency = max(1, concurrency)
        self._max_delay = max_delay
        self._poll = poll
        self._clock = clock
        self._urgent: deque[PendingEvent] = deque()
        self._deferred: deque[PendingEvent] = deque()
        self._writing = 0
        self._flushing = False
        self._wakeup = asyncio.Event()
        self._idle = asyncio.Event()
        self._idle.set()
        self._writers: list[asyncio.Task[None]] = []

    @property
    def pending(self) -> int:
        """Events handed over and not written (or dropped) yet; a pending summary counts as one."""
        return len(self._urgent) + len(self._deferred) + self._writing + len(self._folded)

    async def emit_now(self, involved: Involved, type: str, reason: str, message: str) -> None:
        """Write one event now and wait for it (a Warning the admin must see before a write)."""
        await self.recorder.emit(involved, type, reason, message)

    def post(self, involved: Involved, type: str, reason: str, message: str) -> None:
        """Hand an event over; returns at once. Never raises for a bad reference (it is dropped)."""
        ref = self.recorder.reference(involved, reason)
        if ref is None:
            return
        event = PendingEvent(ref, str(type), str(reason), message, self._clock())
        if type == EVENT_TYPE_NORMAL and self._fold(event):
            return
        (self._deferred if type == EVENT_TYPE_NORMAL else self._urgent).append(event)
        self._changed()
        self._wakeup.set()
        if not self._writers:
            # Through the daemon's supervisor when given: a writer that died would leave every
            # later event queued forever. They end (cancelled) at `flush`, so they are finite.
            spawn = self._spawn or _create_task
            self._writers = [spawn(self._write_loop(), f"events-{i}", finite=True) for i in range(self._concurrency)]

    def _fold(self, event: PendingEvent) -> bool:
        """True when this Normal event goes into its reason's summary instead of out on its own."""
        sent = self._normal_sent.setdefault(event.reason, deque())
        while sent and event.queued_at - sent[0] > self._aggregate_window:
            sent.popleft()
        if len(sent) < self._aggregate_after:
            sent.append(event.queued_at)
            return False
        self._folded.setdefault(event.reason, []).append(event)
        self._changed()
        return True

    def _summary(self) -> PendingEvent | None:
        """The next summary Event, for the reason that has waited longest. Without an object to
        put it on (no claim holder), its events go out one each after all."""
        reason, events = next(iter(self._folded.items()))
        del self._folded[reason]
        target = self._summary_target()
        ref = self.recorder.reference(target, reason) if target is not None else None
        if ref is None:
            self._deferred.extend(events)
            return self._deferred.popleft()
        self.folded += len(events)
        names = [f"{e.involved.namespace}/{e.involved.name}" if e.involved.namespace else e.involved.name for e in events]
        shown = first_names(names, SUMMARY_NAMES)
        message = (
            f"{reason} for {len(names)} more MachineSets, summarised here rather than one Event each "
            f"(more than {self._aggregate_after} in {self._aggregate_window / 60:g} minutes); each "
            f"MachineSet's boot-image annotations say what was done: {shown}"
        )
        return PendingEvent(ref, EVENT_TYPE_NORMAL, reason, message, self._clock())

    async def flush(self, timeout: float = 30.0) -> None:
        """Write everything pending now (within `timeout`), then stop the writers."""
        self._flushing = True
        self._wakeup.set()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._idle.wait(), timeout)
        left = self.pending  # queued, and cut off mid-write (cancelled: never counted by emit)
        if left:
            log.warning("events dropped at shutdown: not written in time", pending=left, timeout=timeout)
        log.info(
            "events flushed",
            created=self.recorder.created,
            repeats_counted=self.recorder.aggregated,
            folded_into_summaries=self.folded,
            dropped=self.recorder.dropped + left,
        )
        for task in self._writers:
            task.cancel()
        await asyncio.gather(*self._writers, return_exceptions=True)
        self._writers = []
        self.recorder.dropped += left
        self._urgent.clear()
        self._deferred.clear()
        self._folded.clear()
        self._writing = 0
        self._flushing = False
        self._changed()

    def _next(self) -> PendingEvent | None:
        if self._urgent:
            return self._urgent.popleft()
        if self._deferred:
            oldest = self._deferred[0]
            if self._flushing or self._clock() - oldest.queued_at >= self._max_delay or not self._busy():
                return self._deferred.popleft()
            return None
        if self._folded and (self._flushing or not self._busy()):
            return self._summary()
        return None

    async def _write_loop(self) -> None:
        while True:
            event = self._next()
            if event is None:
                # Nothing, or only Normal events while the work goes on: look again when something
                # is posted, or (deferred events waiting on `busy`) after a short poll.
                self._wakeup.clear()
                # (`asyncio.timeout`, not `wait_for`: a cancellation must end this loop; see kube/leader.)
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(self._poll if self._deferred or self._folded else None):
                        await self._wakeup.wait()
                continue
            self._writing += 1
            try:
                await self.recorder.emit(event.involved, event.type, event.reason, event.message)
            finally:
                self._writing -= 1
                self._changed()

    def _changed(self) -> None:
        pending = self.pending
        obs.EVENTS_PENDING.set(pending)
        if pending:
            self._idle.clear()
        else:
            self._idle.set()
