"""Retries of transient API failures, backoff and the token bucket (no real time passes)."""

from __future__ import annotations

import aiohttp
import pytest
from kubernetes_asyncio.client.exceptions import ApiException
from multidict import CIMultiDict, CIMultiDictProxy

from bootimage_controller.kube.retry import Backoff, TokenBucket, with_retries


class Script:
    """An awaitable callable that raises the scripted errors in order, then returns 'ok'."""

    def __init__(self, *errors: BaseException) -> None:
        self.errors = list(errors)
        self.calls = 0

    async def __call__(self) -> str:
        self.calls += 1
        if self.errors:
            raise self.errors.pop(0)
        return "ok"


class Sleeps:
    def __init__(self) -> None:
        self.delays: list[float] = []

    async def __call__(self, delay: float) -> None:
        self.delays.append(delay)


def api_error(status: int, retry_after: str | None = None) -> ApiException:
    exc = ApiException(status=status, reason="test")
    exc.headers = CIMultiDictProxy(
        CIMultiDict({"Retry-After": retry_after} if retry_after is not None else {})
    )
    return exc


@pytest.mark.parametrize("status", [429, 500, 502, 503, 504])
async def test_transient_status_is_retried_until_success(status: int) -> None:
    fn, sleep = Script(api_error(status), api_error(status)), Sleeps()
    assert await with_retries(fn, what="t", attempts=5, sleep=sleep, rng=lambda: 0.0) == "ok"
    assert fn.calls == 3
    assert len(sleep.delays) == 2


@pytest.mark.parametrize("status", [400, 403, 404, 409, 410, 422])
async def test_non_transient_status_propagates_at_once(status: int) -> None:
    fn, sleep = Script(api_error(status)), Sleeps()
    with pytest.raises(ApiException) as info:
        await with_retries(fn, what="t", sleep=sleep)
    assert info.value.status == status
    assert fn.calls == 1
    assert sleep.delays == []


async def test_connection_errors_are_retried() -> None:
    fn = Script(aiohttp.ServerDisconnectedError(), aiohttp.ClientConnectionError("refused"), TimeoutError())
    assert await with_retries(fn, what="t", attempts=4, sleep=Sleeps()) == "ok"
    assert fn.calls == 4


async def test_other_exceptions_propagate() -> None:
    fn = Script(ValueError("bug"))
    with pytest.raises(ValueError):
        await with_retries(fn, what="t", sleep=Sleeps())
    assert fn.calls == 1


async def test_backoff_grows_exponentially_and_is_capped() -> None:
    fn, sleep = Script(*(api_error(503) for _ in range(6))), Sleeps()
    await with_retries(fn, what="t", attempts=7, base_delay=0.1, max_delay=1.0, sleep=sleep, rng=lambda: 0.0)
    assert sleep.delays == pytest.approx([0.1, 0.2, 0.4, 0.8, 1.0, 1.0])


async def test_jitter_only_shortens_delays() -> None:
    fn, sleep = Script(api_error(503), api_error(503)), Sleeps()
    await with_retries(fn, what="t", base_delay=1.0, max_delay=1.0, sleep=sleep, rng=lambda: 1.0)
    assert all(0.5 <= d < 1.0 for d in sleep.delays)


async def test_retry_after_header_is_honoured() -> None:
    fn, sleep = Script(api_error(429, retry_after="7")), Sleeps()
    await with_retries(fn, what="t", max_delay=1.0, sleep=sleep)
    assert sleep.delays == [7.0]


async def test_unparseable_retry_after_falls_back_to_backoff() -> None:
    fn, sleep = Script(api_error(503, retry_after="Wed, 21 Oct 2015 07:28:00 GMT")), Sleeps()
    await with_retries(fn, what="t", base_delay=0.3, sleep=sleep, rng=lambda: 0.0)
    assert sleep.delays == [pytest.approx(0.3)]


async def test_gives_up_after_attempts_with_the_last_error() -> None:
    fn, sleep = Script(api_error(500), api_error(502), api_error(503)), Sleeps()
    with pytest.raises(ApiException) as info:
        await with_retries(fn, what="t", attempts=3, sleep=sleep)
    assert info.value.status == 503
    assert fn.calls == 3
    assert len(sleep.delays) == 2


def test_backoff_delay_bounds() -> None:
    b = Backoff(base=0.5, cap=30.0, jitter=0.2)
    assert b.delay(0, rng=lambda: 0.0) == 0.5
    assert b.delay(3, rng=lambda: 0.0) == 4.0
    assert b.delay(100, rng=lambda: 0.0) == 30.0
    assert b.delay(100, rng=lambda: 1.0) == pytest.approx(24.0)


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_token_bucket_allows_burst_then_spaces_requests() -> None:
    clock = FakeClock()
    bucket = TokenBucket(qps=10, burst=3, clock=clock)
    assert [bucket.reserve() for _ in range(3)] == [0.0, 0.0, 0.0]
    # Reservations queue: the 4th waits one interval, the 5th two.
    assert bucket.reserve() == pytest.approx(0.1)
    assert bucket.reserve() == pytest.approx(0.2)


def test_token_bucket_refills_up_to_burst_only() -> None:
    clock = FakeClock()
    bucket = TokenBucket(qps=2, burst=2, clock=clock)
    bucket.reserve()
    bucket.reserve()
    clock.now += 3600  # an idle hour earns no more than `burst` tokens
    assert [bucket.reserve() for _ in range(2)] == [0.0, 0.0]
    assert bucket.reserve() == pytest.approx(0.5)


def test_token_bucket_rejects_nonsense() -> None:
    with pytest.raises(ValueError):
        TokenBucket(qps=0, burst=1)
    with pytest.raises(ValueError):
        TokenBucket(qps=1, burst=0)
