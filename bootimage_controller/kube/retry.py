"""Backoff, token buckets and retries of transient Kubernetes API failures.

What is transient: 429 (the server asks us to slow down, usually with `Retry-After`), 500, 502,
503, 504 and broken connections. What is not: 409 Conflict is the caller's signal to re-read and
re-plan (retrying the same write would only conflict again, or worse, overwrite someone else's
change), 4xx are our bugs or missing objects, 410 is the informer's re-list path.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TypeVar

import aiohttp
import structlog
from kubernetes_asyncio.client.exceptions import ApiException

from .api_errors import ApiError, Conflict, conflict, describe_status, status_of

log = structlog.get_logger(__name__)

T = TypeVar("T")
S = TypeVar("S")
P = TypeVar("P")
Sleep = Callable[[float], Awaitable[None]]
Clock = Callable[[], float]

RETRYABLE_STATUS = frozenset({429, 500, 502, 503, 504})
# Connection-level failures: refused, reset, DNS, TLS, a body cut off mid-read, client timeouts.
CONNECTION_ERRORS: tuple[type[BaseException], ...] = (
    aiohttp.ClientConnectionError,
    aiohttp.ClientPayloadError,
    ConnectionError,
    asyncio.TimeoutError,
)
# Everything a request can end in once retried: the server's refusal, or no answer at all.
REQUEST_FAILURES: tuple[type[BaseException], ...] = (ApiError, *CONNECTION_ERRORS)


@dataclass(frozen=True)
class Backoff:
    """Capped exponential backoff with downward jitter.

    `delay(n)` is `min(cap, base * factor**n)` scaled by `1 - jitter*rand`, so it never exceeds
    the cap and many clients failing together do not retry in lockstep.
    """

    base: float = 0.2
    cap: float = 30.0
    factor: float = 2.0
    jitter: float = 0.2

    def delay(self, attempt: int, rng: Callable[[], float] = random.random) -> float:
        raw = self.cap if attempt >= 64 else min(self.cap, self.base * self.factor**attempt)
        return raw * (1.0 - self.jitter * rng())


class TokenBucket:
    """A token bucket (client-go's `flowcontrol` / `rate.Limiter` with `Reserve`).

    `burst` tokens at most, refilled at `qps` per second. `reserve()` takes one token now and
    returns how long the caller must wait before using it; reservations queue up fairly because
    the token count may go negative.
    """

    def __init__(self, qps: float, burst: int, clock: Clock = time.monotonic) -> None:
        if qps <= 0 or burst < 1:
            raise ValueError(f"token bucket needs qps > 0 and burst >= 1, got qps={qps} burst={burst}")
        self.qps = qps
        self.burst = burst
        self._clock = clock
        self._tokens = float(burst)
        self._last = clock()

    def reserve(self) -> float:
        now = self._clock()
        self._tokens = min(float(self.burst), self._tokens + (now - self._last) * self.qps)
        self._last = now
        self._tokens -= 1.0
        return 0.0 if self._tokens >= 0 else -self._tokens / self.qps

    async def acquire(self, sleep: Sleep = asyncio.sleep) -> None:
        wait = self.reserve()
        if wait > 0:
            await sleep(wait)


def is_retryable(exc: BaseException) -> bool:
    if isinstance(exc, ApiException):
        return exc.status in RETRYABLE_STATUS
    return isinstance(exc, CONNECTION_ERRORS)


def retry_after(exc: BaseException) -> float | None:
    """Seconds from a `Retry-After` header (delta-seconds form; the apiserver never sends dates)."""
    if not isinstance(exc, ApiException) or not exc.headers:
        return None
    value = exc.headers.get("Retry-After")
    if value is None:
        return None
    try:
        seconds = float(value)
    except ValueError:
        return None
    return seconds if seconds >= 0 else None


def describe(exc: BaseException) -> str:
    """One line for a log or a condition: for an API error, the status and the server's own reason
    and message (`422 Invalid: ... metadata.annotations: Too long ...`), not only `422 Unprocessable Entity`."""
    if isinstance(exc, ApiException):
        return describe_status(exc.status, *status_of(exc))
    if isinstance(exc, ApiError):
        return exc.describe()
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__


async def with_retries(
    fn: Callable[[], Awaitable[T]],
    *,
    what: str,
    attempts: int = 5,
    base_delay: float = 0.2,
    max_delay: float = 10.0,
    sleep: Sleep = asyncio.sleep,
    rng: Callable[[], float] = random.random,
) -> T:
    """Call `fn` until it succeeds, a non-transient error occurs, or `attempts` calls were made.

    A `Retry-After` header wins over the computed backoff (the server knows best when it can
    take more), but is capped at `max(max_delay, 60)` so a bogus header cannot stall a worker.
    The last error propagates unchanged.
    """
    if attempts < 1:
        raise ValueError("attempts must be >= 1")
    backoff = Backoff(base=base_delay, cap=max_delay)
    for attempt in range(attempts):
        try:
            return await fn()
        except Exception as exc:
            if not is_retryable(exc) or attempt == attempts - 1:
                raise
            hinted = retry_after(exc)
            delay = min(hinted, max(max_delay, 60.0)) if hinted is not None else backoff.delay(attempt, rng)
            # Info, not warning: a retry that then succeeds needs no one's attention, and one that
            # does not ends in the caller's error (a condition, a row, a command's `error:` line).
            log.info(
                "transient API error, retrying",
                what=what,
                error=describe(exc),
                attempt=attempt + 1,
                attempts=attempts,
                delay=round(delay, 3),
            )
            await sleep(delay)
    raise AssertionError("unreachable")  # pragma: no cover


async def api_call(
    fn: Callable[[], Awaitable[T]],
    *,
    what: str,
    attempts: int = 5,
    base_delay: float = 0.2,
    max_delay: float = 10.0,
    sleep: Sleep = asyncio.sleep,
) -> T:
    """`with_retries`, and a refusal raised as the typed `ApiError` (`NotFound`, `Conflict`,
    `Invalid`, ...) naming `what`: the one way a request's failure leaves `kube/`."""
    try:
        return await with_retries(fn, what=what, attempts=attempts, base_delay=base_delay, max_delay=max_delay,
                                  sleep=sleep)
    except ApiException as exc:
        raise ApiError.from_exception(what, exc) from None


# Writes of one object before a run of conflicts is given up (the caller's key is retried later).
CONFLICT_ATTEMPTS = 5


async def retry_on_conflict(
    read: Callable[[], Awaitable[S | None]],
    plan: Callable[[S], Awaitable[P | None]],
    write: Callable[[S, P], Awaitable[T]],
    *,
    what: str,
    current: S | None = None,
    attempts: int = CONFLICT_ATTEMPTS,
) -> T | None:
    """Plan from the object and write; on `Conflict` (someone wrote first) read it again and plan
    again, never resend the same write. client-go's `retry.RetryOnConflict`, with the re-read and
    re-plan made explicit.

    `current`: the object as already read (a cache): the first write starts from it. `read`
    returning None (the object is gone) or `plan` returning None (nothing to write any more)
    ends it with None. A run of `attempts` conflicts raises `Conflict`.
    """
    obj = current if current is not None else await read()
    for _ in range(attempts):
        if obj is None:
            return None
        intent = await plan(obj)
        if intent is None:
            return None
        try:
            return await write(obj, intent)
        except Conflict:
            obj = await read()
    raise gave_up_on_conflicts(what, attempts)


def gave_up_on_conflicts(what: str, attempts: int) -> Conflict:
    """The `Conflict` of a write given up after `attempts` conflicts in a row (the key is retried later)."""
    return conflict(what, f"kept conflicting with other writers ({attempts} attempts); will retry")
