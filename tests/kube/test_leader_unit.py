"""Leader election logic against an in-memory Lease with optimistic concurrency.

The same behaviour against the real API server: tests/integration/test_leader.py.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Callable, Iterator
from dataclasses import replace
from datetime import UTC, datetime, timedelta, timezone

import pytest

from bootimage_controller.kube.fence import NotLeader
from bootimage_controller.kube.leader import (
    OPENSHIFT_TIMINGS,
    SINGLE_NODE_TIMINGS,
    AlwaysLeader,
    Conflict,
    LeaderElector,
    LeadershipLost,
    LeaseHeldElsewhere,
    LeaseRecord,
    LeaseTimings,
    WorkCancelled,
    format_micro_time,
)

WAIT = 5.0


class FakeLeaseStore:
    def __init__(self) -> None:
        self.record: LeaseRecord | None = None
        self.rv = 0
        self.failing = False
        self.writes = 0

    def _check(self) -> None:
        if self.failing:
            raise ConnectionError("apiserver unreachable")

    def put(self, record: LeaseRecord) -> LeaseRecord:
        """Store `record` as the API server would (a new resourceVersion): the tests' own writes too."""
        self.rv += 1
        self.writes += 1
        self.record = replace(record, resource_version=str(self.rv))
        return self.record

    async def get(self) -> LeaseRecord | None:
        self._check()
        return self.record

    async def create(self, record: LeaseRecord) -> LeaseRecord:
        self._check()
        if self.record is not None:
            raise Conflict("exists")
        return self.put(record)

    async def update(self, record: LeaseRecord) -> LeaseRecord:
        self._check()
        if self.record is None or record.resource_version != self.record.resource_version:
            raise Conflict("stale")
        return self.put(record)


def elector(store: FakeLeaseStore, identity: str, **kw: float | Callable[[], float]) -> LeaderElector:
    params: dict[str, float | Callable[[], float]] = {
        "lease_duration": 2.0,
        "renew_deadline": 0.5,
        "retry_period": 0.05,
    }
    params.update(kw)
    return LeaderElector(None, identity, "ns", store=store, **params)  # type: ignore[arg-type]


async def eventually(pred: Callable[[], bool], timeout: float = WAIT) -> None:
    async with asyncio.timeout(timeout):
        while not pred():
            await asyncio.sleep(0.005)


class Work:
    """on_started_leading / on_stopped_leading that record what happened."""

    def __init__(self) -> None:
        self.started = 0
        self.cancelled = 0
        self.stopped = 0

    async def lead(self) -> None:
        self.started += 1
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            self.cancelled += 1
            raise

    async def stop(self) -> None:
        self.stopped += 1


async def test_two_candidates_one_leader_and_release_hands_over_at_once() -> None:
    store = FakeLeaseStore()
    a, b = elector(store, "a"), elector(store, "b")
    wa, wb = Work(), Work()
    ta = asyncio.create_task(a.run(wa.lead, wa.stop))
    tb = asyncio.create_task(b.run(wb.lead, wb.stop))
    try:
        await eventually(lambda: a.is_leader or b.is_leader)
        for _ in range(20):  # across many renewals, never two leaders
            assert a.is_leader + b.is_leader == 1
            await asyncio.sleep(0.01)
        leader, follower = (a, b) if a.is_leader else (b, a)
        lw, fw = (wa, wb) if leader is a else (wb, wa)
        assert store.record is not None and store.record.holder == leader.identity
        assert follower.leader == leader.identity
        assert await leader.release()
        assert not leader.is_leader and not leader.running
        assert (lw.started, lw.cancelled, lw.stopped) == (1, 1, 1)
        # Released: the follower takes over at its next retry, far sooner than the 2 s lease.
        await eventually(lambda: follower.is_leader, timeout=1.0)
        assert store.record.holder == follower.identity
        assert store.record.transitions == 1
        # Its work starts a loop turn after it leads (a task of its own): wait for it, not assume it.
        await eventually(lambda: fw.started == 1, timeout=1.0)
    finally:
        for t in (ta, tb):
            t.cancel()
        await asyncio.gather(ta, tb, return_exceptions=True)


async def test_release_writes_an_empty_holder_and_a_short_duration() -> None:
    store = FakeLeaseStore()
    e = elector(store, "me")
    task = asyncio.create_task(e.run(Work().lead))
    await eventually(lambda: e.is_leader)
    assert await e.release()
    assert task.done()
    assert store.record is not None
    assert store.record.holder == "" and store.record.duration_seconds == 1


async def test_release_does_nothing_to_someone_elses_lease() -> None:
    store = FakeLeaseStore()
    store.put(LeaseRecord("other", 15, "t", "t", 3))
    e = elector(store, "me")
    assert not await e.release()
    assert store.record is not None and store.record.holder == "other"


async def test_leader_that_cannot_renew_stops_writing_and_ends_instead_of_campaigning() -> None:
    store = FakeLeaseStore()
    e = elector(store, "me", renew_deadline=0.3, retry_period=0.05)
    work = Work()
    task = asyncio.create_task(e.run(work.lead, work.stop))
    await eventually(lambda: e.is_leader)
    assert e.write_refusal() is None
    store.failing = True
    with pytest.raises(LeadershipLost, match="renew deadline"):
        await asyncio.wait_for(task, 2.0)
    assert not e.is_leader and not e.running, "no second campaign: the process exits and restarts clean"
    assert isinstance(e.write_refusal(), NotLeader)
    assert (work.cancelled, work.stopped) == (1, 1), "the leader's work is cancelled when leadership is lost"


async def test_leader_ends_when_another_holder_appears() -> None:
    store = FakeLeaseStore()
    e = elector(store, "me")
    work = Work()
    task = asyncio.create_task(e.run(work.lead, work.stop))
    await eventually(lambda: e.is_leader)
    assert store.record is not None
    store.put(replace(store.record, holder="intruder"))
    with pytest.raises(LeadershipLost, match="intruder"):
        await asyncio.wait_for(task, 1.0)
    assert work.stopped == 1 and e.write_refusal() is not None


async def test_writes_are_refused_past_the_renew_deadline_even_before_the_renewal_loop_notices() -> None:
    """A frozen process (SIGSTOP) thaws with its renewal loop asleep: the fence is judged by the
    clock, so the first write after the thaw is refused before any renewal attempt runs."""
    store = FakeLeaseStore()
    clock = FakeClock()
    e = elector(store, "me", clock=clock, lease_duration=15, renew_deadline=10, retry_period=2)
    # Leading after one attempt; its renewal loop sleeps 2 s of real time, longer than this test.
    task = asyncio.create_task(e.run(Work().lead, campaign=False))
    try:
        await eventually(lambda: e.is_leader)
        assert e.write_refusal() is None
        clock.now += 9.9
        assert e.write_refusal() is None
        clock.now += 0.2
        refusal = e.write_refusal()
        assert isinstance(refusal, NotLeader) and "renew deadline" in str(refusal)
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


async def test_validity_counts_from_the_start_of_the_renewal_request() -> None:
    """The server may store a renewal any time after it was sent; counting from its answer would
    let a slow answer stretch the window past what the other candidates see."""
    clock = FakeClock()

    class SlowStore(FakeLeaseStore):
        async def update(self, record: LeaseRecord) -> LeaseRecord:
            clock.now += 4.0  # the answer takes 4 s
            return await super().update(record)

    store = SlowStore()
    store.put(LeaseRecord("me", 15, "t", "t", 0))
    e = elector(store, "me", clock=clock, lease_duration=15, renew_deadline=10, retry_period=2)
    started = clock.now
    task = asyncio.create_task(e.run(Work().lead, campaign=False))
    try:
        await eventually(lambda: e.is_leader)
        assert clock.now == started + 4.0  # the renewal's answer came 4 s after it was sent
        clock.now = started + 10.0
        assert e.write_refusal() is not None
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


async def test_a_single_attempt_names_the_holder_when_the_lease_is_taken() -> None:
    store = FakeLeaseStore()
    store.put(LeaseRecord("replica-b", 137, "t", "t", 0))
    e = elector(store, "me")
    work = Work()
    with pytest.raises(LeaseHeldElsewhere, match="replica-b") as caught:
        await e.run(work.lead, campaign=False)
    assert caught.value.holder == "replica-b"
    assert work.started == 0 and store.record is not None and store.record.holder == "replica-b"


async def test_run_returns_what_the_work_returns_and_a_failing_work_propagates() -> None:
    store = FakeLeaseStore()

    async def finishes() -> int:
        return 7

    async def breaks() -> int:
        raise RuntimeError("worker bug")

    assert await elector(store, "me").run(finishes, campaign=False) == 7
    e = elector(store, "me")
    with pytest.raises(RuntimeError, match="worker bug"):
        await e.run(breaks)
    assert not e.is_leader


async def test_work_cancelled_from_outside_ends_leading_with_an_error() -> None:
    store = FakeLeaseStore()
    e = elector(store, "me")
    work = Work()
    task = asyncio.create_task(e.run(work.lead))
    await eventually(lambda: work.started == 1)
    [leader_work] = [t for t in asyncio.all_tasks() if t.get_name() == "leader-work"]
    leader_work.cancel()
    with pytest.raises(WorkCancelled):
        await asyncio.wait_for(task, 1.0)


async def test_cancelling_run_stops_leading_without_releasing() -> None:
    store = FakeLeaseStore()
    e = elector(store, "me")
    work = Work()
    task = asyncio.create_task(e.run(work.lead, work.stop))
    await eventually(lambda: e.is_leader)
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    assert (work.cancelled, work.stopped) == (1, 1)
    assert store.record is not None and store.record.holder == "me", "a crash leaves the lease to expire"


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


async def test_expiry_is_judged_by_when_we_saw_the_record_change_not_its_timestamps() -> None:
    store = FakeLeaseStore()
    # renewTime 20 years ago, as written by a host with a broken clock
    store.put(LeaseRecord("old", 10, "2006-01-02T15:04:05.000000Z", "2006-01-02T15:04:05.000000Z", 0))
    clock = FakeClock()
    e = elector(store, "me", clock=clock)
    assert not await e.try_acquire_or_renew(), "first sight of a record: it is valid for its duration"
    clock.now += 9.9
    assert not await e.try_acquire_or_renew()
    clock.now += 0.2  # 10.1 s without change
    assert await e.try_acquire_or_renew()
    assert store.record is not None
    assert (store.record.holder, store.record.transitions, store.record.duration_seconds) == ("me", 1, 2)


async def test_a_renewing_holder_keeps_the_lease() -> None:
    store = FakeLeaseStore()
    store.put(LeaseRecord("other", 10, "a", "r0", 0))
    clock = FakeClock()
    e = elector(store, "me", clock=clock)
    for i in range(1, 5):
        assert not await e.try_acquire_or_renew()
        clock.now += 8
        assert store.record is not None
        store.put(replace(store.record, renew_time=f"r{i}"))  # the holder renews
    assert store.record is not None and store.record.holder == "other"


@pytest.fixture
def tokyo_tz() -> Iterator[None]:
    old = os.environ.get("TZ")
    os.environ["TZ"] = "Asia/Tokyo"
    time.tzset()
    yield
    if old is None:
        os.environ.pop("TZ", None)
    else:
        os.environ["TZ"] = old
    time.tzset()


async def test_lease_times_are_utc_whatever_tz_says(tokyo_tz: None) -> None:
    assert time.localtime().tm_gmtoff == 9 * 3600
    store = FakeLeaseStore()
    e = elector(store, "me")
    assert await e.try_acquire_or_renew()
    assert store.record is not None and store.record.renew_time is not None
    written = datetime.strptime(store.record.renew_time, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=UTC)
    assert abs(written - datetime.now(UTC)) < timedelta(seconds=30)


def test_micro_time_format() -> None:
    assert format_micro_time(datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)) == "2026-01-02T03:04:05.000000Z"
    east = timezone(timedelta(hours=5, minutes=30))
    assert format_micro_time(datetime(2026, 1, 2, 9, 0, 0, 123, tzinfo=east)) == "2026-01-02T03:30:00.000123Z"


@pytest.mark.parametrize(
    ("duration", "deadline", "retry"),
    [(10, 10, 2), (10, 2, 2), (0.5, 0.2, 0.1), (10, 5, 0)],
)
def test_invalid_timings_are_refused(duration: float, deadline: float, retry: float) -> None:
    with pytest.raises(ValueError):
        LeaderElector(None, "me", "ns", duration, deadline, retry, store=FakeLeaseStore())
    with pytest.raises(ValueError):
        LeaseTimings(duration, deadline, retry)


def test_default_timings_are_library_gos() -> None:
    """OpenShift operators ride out a 60 s kube-apiserver rollout with these; 15/10/2 s did not."""
    assert LeaseTimings(137.0, 107.0, 26.0) == OPENSHIFT_TIMINGS
    assert LeaseTimings(270.0, 240.0, 60.0) == SINGLE_NODE_TIMINGS
    e = LeaderElector(None, "me", "ns", store=FakeLeaseStore())
    assert (e.lease_duration, e.renew_deadline, e.retry_period) == (137.0, 107.0, 26.0)


async def test_always_leader_leads_while_its_work_runs() -> None:
    work = Work()
    e = AlwaysLeader()
    task = asyncio.create_task(e.run(work.lead, work.stop))
    await eventually(lambda: e.is_leader and work.started == 1)
    assert e.running and e.write_refusal() is None
    await e.release()
    assert task.done() and not e.is_leader and not e.running
    assert (work.cancelled, work.stopped) == (1, 1)
    assert e.write_refusal() is not None


async def test_a_cancelled_candidate_stops_campaigning_whenever_the_cancel_lands() -> None:
    """A cancellation landing as a Lease request completes must end the campaign. On Python 3.11
    `asyncio.wait_for` could swallow it (CPython gh-86296): the elector then campaigned on forever
    and a test fixture waiting for it hung the suite. Cancelled at every point of the loop in turn."""
    store = FakeLeaseStore()
    store.record = LeaseRecord("someone-else", 3600, format_micro_time(datetime.now(UTC)),
                               format_micro_time(datetime.now(UTC)), 0)
    for steps in range(200):
        candidate = elector(store, "late", retry_period=0.001)
        task = asyncio.create_task(candidate.run(Work().lead))
        for _ in range(steps % 7):
            await asyncio.sleep(0)
        task.cancel()
        done, _ = await asyncio.wait({task}, timeout=WAIT)
        assert done, f"still campaigning after a cancel at step {steps % 7}"
        assert task.cancelled()
