"""A work queue of object keys with client-go's semantics, and the worker pool that drains it.

Semantics (k8s.io/client-go/util/workqueue):
- A key is queued at most once: adding a key that is already waiting does nothing.
- A key is never processed by two workers at once: adding a key while it is being processed marks
  it dirty, and `done(key)` queues it again, so the change that arrived is not lost.
- `add_after` delays an add (the earliest pending time wins); `add_rate_limited` delays by the
  larger of a per-key exponential backoff (reset by `forget`) and an overall token bucket.
- `shutdown()` stops accepting keys; keys already queued are still handed out (drain), then
  `get()` returns None.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar

import structlog

from .retry import Clock, TokenBucket

log = structlog.get_logger(__name__)

State = TypeVar("State")


class RateLimiter(Protocol):
    def when(self, key: str) -> float:
        """Delay before `key` may be retried; counts one more failure."""
        ...

    def forget(self, key: str) -> None: ...

    def num_requeues(self, key: str) -> int: ...


class ItemExponentialBackoff:
    """Per-key `base * 2**failures`, capped (client-go `ItemExponentialFailureRateLimiter`)."""

    def __init__(self, base_delay: float = 0.005, max_delay: float = 1000.0) -> None:
        self.base_delay = base_delay
        self.max_delay = max_delay
        self._failures: dict[str, int] = {}

    def when(self, key: str) -> float:
        n = self._failures.get(key, 0)
        self._failures[key] = n + 1
        if n >= 64:  # 2**64 * base overflows any sensible cap
            return self.max_delay
        return float(min(self.max_delay, self.base_delay * 2**n))

    def forget(self, key: str) -> None:
        self._failures.pop(key, None)

    def num_requeues(self, key: str) -> int:
        return self._failures.get(key, 0)


class BucketLimiter:
    """Overall retry rate across all keys (client-go `BucketRateLimiter`)."""

    def __init__(self, bucket: TokenBucket) -> None:
        self.bucket = bucket

    def when(self, key: str) -> float:
        return self.bucket.reserve()

    def forget(self, key: str) -> None:
        return None

    def num_requeues(self, key: str) -> int:
        return 0


class MaxOfLimiter:
    """The longest delay any of the limiters asks for (client-go `MaxOfRateLimiter`)."""

    def __init__(self, *limiters: RateLimiter) -> None:
        self.limiters = limiters

    def when(self, key: str) -> float:
        return max(limiter.when(key) for limiter in self.limiters)

    def forget(self, key: str) -> None:
        for limiter in self.limiters:
            limiter.forget(key)

    def num_requeues(self, key: str) -> int:
        return max(limiter.num_requeues(key) for limiter in self.limiters)


def default_rate_limiter(
    base_delay: float = 0.005,
    max_delay: float = 1000.0,
    qps: float = 10.0,
    burst: int = 100,
    clock: Clock = time.monotonic,
) -> MaxOfLimiter:
    """client-go's `DefaultControllerRateLimiter`: 5 ms doubling to 1000 s per key, 10 qps/100 burst overall."""
    return MaxOfLimiter(
        ItemExponentialBackoff(base_delay, max_delay), BucketLimiter(TokenBucket(qps, burst, clock))
    )


class QueueMetrics(Protocol):
    """What a queue reports (client-go's `workqueue.MetricsProvider`; observability implements it)."""

    def added(self) -> None: ...
    def retried(self) -> None: ...
    def waited(self, seconds: float) -> None: ...  # queued -> handed to a worker
    def worked(self, seconds: float) -> None: ...  # handed to a worker -> done


class WorkQueue:
    """De-duplicating, rate-limited queue of string keys for one event loop."""

    def __init__(
        self, name: str = "", rate_limiter: RateLimiter | None = None, metrics: QueueMetrics | None = None
    ) -> None:
        self.name = name
        self.rate_limiter: RateLimiter = rate_limiter or default_rate_limiter()
        self.metrics = metrics
        self._queue: deque[str] = deque()
        self._dirty: set[str] = set()
        self._processing: set[str] = set()
        self._waiting: dict[str, tuple[float, asyncio.TimerHandle]] = {}
        self._shutting_down = False
        self._wakeup = asyncio.Event()
        self._queued_at: dict[str, float] = {}
        self._started_at: dict[str, float] = {}

    def unfinished_seconds(self) -> tuple[float, float]:
        """(sum, longest) of how long the keys being processed have been at it (client-go's
        unfinished_work_seconds and longest_running_processor_seconds: a stuck worker shows)."""
        now = time.monotonic()
        ages = [now - t for t in self._started_at.values()]
        return sum(ages), max(ages, default=0.0)

    def __len__(self) -> int:
        return len(self._queue)

    @property
    def busy(self) -> bool:
        """Keys queued or being processed (delayed adds not counted until they fire)."""
        return bool(self._queue or self._processing)

    @property
    def processing(self) -> frozenset[str]:
        return frozenset(self._processing)

    def add(self, key: str) -> None:
        if self._shutting_down or key in self._dirty:
            return
        self._dirty.add(key)
        if self.metrics is not None:
            self.metrics.added()
        self._queued_at.setdefault(key, time.monotonic())
        if key in self._processing:
            return  # done(key) queues it again
        self._queue.append(key)
        self._wakeup.set()

    def add_after(self, key: str, delay: float) -> None:
        """Add `key` after `delay` seconds; an earlier pending add of the same key wins."""
        if self._shutting_down:
            return
        if delay <= 0:
            self.add(key)
            return
        loop = asyncio.get_running_loop()
        ready_at = loop.time() + delay
        pending = self._waiting.get(key)
        if pending is not None:
            if pending[0] <= ready_at:
                return
            pending[1].cancel()
        handle = loop.call_at(ready_at, self._fire, key)
        self._waiting[key] = (ready_at, handle)

    def _fire(self, key: str) -> None:
        self._waiting.pop(key, None)
        self.add(key)

    def add_rate_limited(self, key: str) -> float:
        """Re-add `key` after its backoff; returns the delay chosen."""
        delay = self.rate_limiter.when(key)
        if self.metrics is not None:
            self.metrics.retried()
        self.add_after(key, delay)
        return delay

    def forget(self, key: str) -> None:
        """`key` succeeded: its next failure starts again at the base delay."""
        self.rate_limiter.forget(key)

    def num_requeues(self, key: str) -> int:
        return self.rate_limiter.num_requeues(key)

    async def get(self) -> str | None:
        """The next key, marked as processing; None once shut down and drained."""
        while not self._queue:
            if self._shutting_down:
                return None
            self._wakeup.clear()
            await self._wakeup.wait()
        key = self._queue.popleft()
        self._processing.add(key)
        self._dirty.discard(key)
        now = time.monotonic()
        queued = self._queued_at.pop(key, now)
        self._started_at[key] = now
        if self.metrics is not None:
            self.metrics.waited(now - queued)
        return key

    def done(self, key: str) -> None:
        """Processing of `key` finished; if it was added meanwhile, queue it again."""
        self._processing.discard(key)
        started = self._started_at.pop(key, None)
        if self.metrics is not None and started is not None:
            self.metrics.worked(time.monotonic() - started)
        if key in self._dirty:
            self._queue.append(key)
            self._wakeup.set()

    def shutdown(self, *, drain: bool = True) -> None:
        """Accept no more keys, drop delayed adds, wake getters. Queued keys still drain, unless
        `drain` is False (SIGTERM: only the keys being processed finish; the rest are the next
        leader's, which plans every key on start)."""
        self._shutting_down = True
        if not drain:
            self._queue.clear()
            self._dirty.clear()
            self._queued_at.clear()
        for _, handle in self._waiting.values():
            handle.cancel()
        self._waiting.clear()
        self._wakeup.set()


@dataclass(frozen=True, slots=True)
class ReconcileResult(Generic[State]):
    """What reconciling one key came to: the one answer every reconcile gives (sample-controller's
    error return, made explicit).

    For the queue: done (the default), come back after `requeue_after` seconds, or failed with
    `error` (a reason and message an admin can read). A failure is transient (retried with the
    key's backoff: the server was busy, someone wrote first) or `permanent` (asking again cannot
    help until something changes: a 422 Invalid, a 403, input we cannot use): the key then waits
    for a change of the object or of an input, or the slow resync, and no backoff timer runs.
    `run_workers` and `run --once` map it the same way; an exception escaping a reconcile is a
    bug, not a result.

    For whoever reports on the key: `state`, the key's outcome as its reconciler says it (a machine
    key's `reconcile.state.MachineSetState`: the decision, what was written, the failure; None when
    the object is gone or the reconciler keeps no outcome). The queue never reads it.
    """

    requeue_after: float | None = None
    error: str | None = None
    reason: str = ""  # a short, bounded name for the error (metrics label): an API reason, a Reason
    permanent: bool = False
    state: State | None = None

    @classmethod
    def transient(cls, reason: str, error: str) -> ReconcileResult[State]:
        return cls(error=error, reason=reason)

    @classmethod
    def waiting(cls, reason: str, error: str) -> ReconcileResult[State]:
        """A permanent failure: no retry until a change."""
        return cls(error=error, reason=reason, permanent=True)


DONE: ReconcileResult[Any] = ReconcileResult()


class WorkerCancelled(Exception):
    """A worker was cancelled while the queue was still running."""


Reconcile = Callable[[str], Awaitable[ReconcileResult[Any] | None]]


async def run_workers(
    queue: WorkQueue,
    reconcile: Reconcile,
    concurrency: int,
    *,
    observe_duration: Callable[[float], None] | None = None,
) -> None:
    """Run `concurrency` workers until `queue` is shut down and drained.

    Success forgets the key's backoff (and re-adds it after `requeue_after` when asked); a failed
    result is logged and the key re-added rate-limited. A worker cancelled from outside ends
    the whole group with `WorkerCancelled` rather than vanish.
    `observe_duration` receives each reconcile's wall time (e.g. a Histogram's `observe`).
    Cancelling this coroutine cancels the workers mid-reconcile.
    """
    if concurrency < 1:
        raise ValueError("concurrency must be >= 1")
    pool = WorkerPool(queue, reconcile, observe_duration, asyncio.current_task())
    async with asyncio.TaskGroup() as group:
        for i in range(concurrency):
            group.create_task(pool.work(i), name=f"{queue.name or 'workqueue'}-worker-{i}")


class WorkerPool:
    """What each of `run_workers`' workers does: take a key, reconcile it, map the result."""

    def __init__(self, queue: WorkQueue, reconcile: Reconcile, observe_duration: Callable[[float], None] | None,
                 parent: asyncio.Task[Any] | None) -> None:
        self.queue = queue
        self.reconcile = reconcile
        self.observe_duration = observe_duration
        self.parent = parent  # the task running `run_workers`: its cancellation is a shutdown

    async def work(self, index: int) -> None:
        queue = self.queue
        try:
            while (key := await queue.get()) is not None:
                started = time.monotonic()
                try:
                    result = await self.reconcile_one(key)
                finally:
                    queue.done(key)
                    if self.observe_duration is not None:
                        self.observe_duration(time.monotonic() - started)
                self.requeue(key, result)
        except asyncio.CancelledError:
            if self.parent is not None and self.parent.cancelling() == 0:
                # Cancelled from outside, not by shutdown: TaskGroup ignores a cancelled child, and
                # a worker gone quietly leaves its share of the keys unprocessed. End the group so
                # that the daemon sees it and exits.
                raise WorkerCancelled(f"{queue.name or 'workqueue'} worker {index} was cancelled") from None
            raise

    async def reconcile_one(self, key: str) -> ReconcileResult[Any]:
        try:
            return await self.reconcile(key) or DONE
        except Exception as exc:  # a bug: logged with its traceback, retried like a failure
            log.error("reconcile raised", queue=self.queue.name, key=key, exc_info=exc)
            return ReconcileResult(error=f"{type(exc).__name__}: {exc}")

    def requeue(self, key: str, result: ReconcileResult[Any]) -> None:
        queue = self.queue
        if result.error is not None and result.permanent:
            queue.forget(key)
            log.warning("reconcile failed; waiting for a change before trying again", queue=queue.name, key=key,
                        error=result.error, reason=result.reason)
            return
        if result.error is not None:
            delay = queue.add_rate_limited(key)
            log.error(
                "reconcile failed, will retry",
                queue=queue.name,
                key=key,
                error=result.error,
                retry_in=round(delay, 3),
                requeues=queue.num_requeues(key),
            )
            return
        queue.forget(key)
        if result.requeue_after is not None:
            queue.add_after(key, result.requeue_after)
