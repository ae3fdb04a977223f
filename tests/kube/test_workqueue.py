"""WorkQueue: client-go semantics (dedupe, no concurrent processing of a key, backoff, drain)."""

from __future__ import annotations

import asyncio
from collections import Counter

import pytest

from bootimage_controller.kube.workqueue import (
    ItemExponentialBackoff,
    WorkQueue,
    default_rate_limiter,
    run_workers,
)

WAIT = 5.0  # generous upper bound for conditions that should hold within milliseconds


def fast_queue(name: str = "test") -> WorkQueue:
    return WorkQueue(name, default_rate_limiter(base_delay=0.001, max_delay=0.05))


async def test_a_queued_key_is_not_added_twice() -> None:
    q = fast_queue()
    for key in ("a", "b", "a", "a", "b"):
        q.add(key)
    assert len(q) == 2
    assert [await q.get(), await q.get()] == ["a", "b"]
    assert len(q) == 0


async def test_key_added_while_processing_is_requeued_on_done_not_before() -> None:
    q = fast_queue()
    q.add("a")
    assert await q.get() == "a"
    q.add("a")
    q.add("a")
    assert len(q) == 0, "a key being processed must not be handed to a second worker"
    q.done("a")
    assert len(q) == 1
    assert await q.get() == "a"
    q.done("a")
    assert len(q) == 0


async def test_done_without_readd_does_not_requeue() -> None:
    q = fast_queue()
    q.add("a")
    await q.get()
    q.done("a")
    assert len(q) == 0


async def test_workers_never_process_one_key_concurrently() -> None:
    q = fast_queue()
    active: Counter[str] = Counter()
    runs: Counter[str] = Counter()
    overlap: list[str] = []
    gate = asyncio.Event()

    async def reconcile(key: str) -> None:
        active[key] += 1
        if active[key] > 1:
            overlap.append(key)
        runs[key] += 1
        if key == "x" and runs[key] == 1:
            for _ in range(5):
                q.add("x")  # changes arriving while x is being reconciled
            await gate.wait()
        await asyncio.sleep(0)
        active[key] -= 1

    for key in ("x", "y", "z"):
        q.add(key)
    workers = asyncio.create_task(run_workers(q, reconcile, concurrency=4))
    async with asyncio.timeout(WAIT):
        while runs["y"] < 1 or runs["z"] < 1:
            await asyncio.sleep(0.001)
    assert runs["x"] == 1
    gate.set()
    async with asyncio.timeout(WAIT):
        while runs["x"] < 2 or "x" in q.processing:
            await asyncio.sleep(0.001)
    q.shutdown()
    await asyncio.wait_for(workers, WAIT)
    assert overlap == []
    # the five adds during the first run collapse into exactly one more run
    assert runs == Counter({"x": 2, "y": 1, "z": 1})


def test_item_backoff_doubles_per_failure_is_capped_and_reset_by_forget() -> None:
    rl = ItemExponentialBackoff(base_delay=0.005, max_delay=1000.0)
    delays = [rl.when("k") for _ in range(20)]
    assert delays[:4] == pytest.approx([0.005, 0.01, 0.02, 0.04])
    assert delays[-1] == 1000.0
    assert max(delays) == 1000.0
    assert rl.num_requeues("k") == 20
    assert rl.when("other") == pytest.approx(0.005), "backoff is per key"
    rl.forget("k")
    assert rl.num_requeues("k") == 0
    assert rl.when("k") == pytest.approx(0.005)


def test_default_limiter_adds_the_overall_bucket() -> None:
    now = [0.0]
    rl = default_rate_limiter(qps=10, burst=100, clock=lambda: now[0])
    # 100 different keys fail once: all within the burst, so each waits only its own 5 ms.
    assert [rl.when(f"k{i}") for i in range(100)] == pytest.approx([0.005] * 100)
    # The 101st failure in the same instant waits for the bucket (1/10 s), not 5 ms.
    assert rl.when("k100") == pytest.approx(0.1)


async def test_add_after_delays_and_the_earliest_pending_add_wins() -> None:
    q = fast_queue()
    loop = asyncio.get_running_loop()
    start = loop.time()
    q.add_after("a", 30.0)
    q.add_after("a", 0.02)  # earlier: replaces the 30 s add
    q.add_after("a", 10.0)  # later: ignored
    assert len(q) == 0
    assert await asyncio.wait_for(q.get(), WAIT) == "a"
    assert loop.time() - start >= 0.015
    q.done("a")
    q.shutdown()
    assert await asyncio.wait_for(q.get(), WAIT) is None, "the ignored 10 s add must not linger"


async def test_failures_are_retried_with_backoff_and_success_forgets() -> None:
    q = fast_queue()
    attempts: Counter[str] = Counter()
    requeues_seen: list[int] = []
    succeeded = asyncio.Event()

    async def reconcile(key: str) -> None:
        attempts[key] += 1
        requeues_seen.append(q.num_requeues(key))
        if attempts[key] < 4:
            raise RuntimeError("transient")
        succeeded.set()

    q.add("k")
    workers = asyncio.create_task(run_workers(q, reconcile, concurrency=2))
    await asyncio.wait_for(succeeded.wait(), WAIT)
    async with asyncio.timeout(WAIT):
        while "k" in q.processing:
            await asyncio.sleep(0.001)
    assert requeues_seen == [0, 1, 2, 3]
    assert q.num_requeues("k") == 0, "a success resets the key's backoff"
    q.shutdown()
    await asyncio.wait_for(workers, WAIT)


async def test_shutdown_drains_queued_keys_then_workers_exit() -> None:
    q = fast_queue()
    done: list[str] = []

    async def reconcile(key: str) -> None:
        await asyncio.sleep(0)
        done.append(key)

    for key in ("a", "b", "c"):
        q.add(key)
    q.shutdown()
    q.add("late")  # refused after shutdown
    await asyncio.wait_for(run_workers(q, reconcile, concurrency=2), WAIT)
    assert sorted(done) == ["a", "b", "c"]


async def test_shutdown_wakes_idle_getters() -> None:
    q = fast_queue()
    getter = asyncio.create_task(q.get())
    await asyncio.sleep(0)
    assert not getter.done()
    q.shutdown()
    assert await asyncio.wait_for(getter, WAIT) is None


async def test_shutdown_drops_pending_delayed_and_rate_limited_adds() -> None:
    q = fast_queue()
    q.add_after("later", 0.01)
    q.add_rate_limited("retry")
    q.shutdown()
    await asyncio.sleep(0.05)
    assert len(q) == 0
    assert await q.get() is None


async def test_failure_during_shutdown_does_not_keep_workers_alive() -> None:
    q = fast_queue()

    async def reconcile(key: str) -> None:
        q.shutdown()
        raise RuntimeError("boom")

    q.add("a")
    await asyncio.wait_for(run_workers(q, reconcile, concurrency=1), WAIT)
    assert len(q) == 0


async def test_observe_duration_gets_every_run() -> None:
    q = fast_queue()
    seen: list[float] = []

    async def reconcile(key: str) -> None:
        if key == "bad":
            raise RuntimeError("x")

    q.add("good")
    q.add("bad")
    q.shutdown()
    await asyncio.wait_for(run_workers(q, reconcile, 1, observe_duration=seen.append), WAIT)
    assert len(seen) == 2
    assert all(d >= 0 for d in seen)


async def test_concurrency_must_be_positive() -> None:
    with pytest.raises(ValueError):
        await run_workers(fast_queue(), lambda key: asyncio.sleep(0), 0)
