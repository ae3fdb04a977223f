"""EventLane: events written in the background, Normal ones only after the work they report."""

from __future__ import annotations

import asyncio
from typing import Any

from bootimage_controller import observability as obs
from bootimage_controller.constants import EVENT_FAILED, EVENT_TYPE_NORMAL, EVENT_TYPE_WARNING, EVENT_UPDATED
from bootimage_controller.reconcile.event_lane import EventLane, EventRecorder

from .fakes import FakeEvents
from .test_events import machineset


class SlowEvents(FakeEvents):
    """Creates take `delay` seconds; records how many were in flight at once."""

    def __init__(self, delay: float = 0.01) -> None:
        super().__init__()
        self.delay = delay
        self.in_flight = 0
        self.most_in_flight = 0

    async def create_namespaced_event(self, namespace: str, body: Any, **kw: Any) -> Any:
        self.in_flight += 1
        self.most_in_flight = max(self.most_in_flight, self.in_flight)
        try:
            await asyncio.sleep(self.delay)
            return await super().create_namespaced_event(namespace, body, **kw)
        finally:
            self.in_flight -= 1


def reasons(api: FakeEvents) -> list[str]:
    return [e["reason"] for e in api.events.values()]


def lane(api: FakeEvents, **kw: Any) -> EventLane:
    return EventLane(EventRecorder(api, host="pod-a"), poll=0.01, **kw)  # type: ignore[arg-type]


async def settle(seconds: float = 0.1) -> None:
    await asyncio.sleep(seconds)


async def test_normal_events_wait_for_the_work_and_warnings_do_not() -> None:
    api, busy = FakeEvents(), [True]
    events = lane(api, busy=lambda: busy[0])
    events.post(machineset("a", "uid-a"), EVENT_TYPE_NORMAL, EVENT_UPDATED, "boot image updated to x")
    events.post(machineset("b", "uid-b"), EVENT_TYPE_WARNING, EVENT_FAILED, "403 forbidden")
    await settle()
    assert reasons(api) == [EVENT_FAILED]
    assert events.pending == 1
    assert obs.REGISTRY.get_sample_value("bootimage_controller_events_pending") == 1
    busy[0] = False
    await settle()
    assert sorted(reasons(api)) == sorted([EVENT_FAILED, EVENT_UPDATED])
    assert events.pending == 0
    assert obs.REGISTRY.get_sample_value("bootimage_controller_events_pending") == 0
    await events.flush()


async def test_a_normal_event_waits_at_most_max_delay() -> None:
    api = FakeEvents()
    events = lane(api, busy=lambda: True, max_delay=0.05)
    events.post(machineset(), EVENT_TYPE_NORMAL, EVENT_UPDATED, "boot image updated to x")
    await asyncio.sleep(0.01)
    assert not api.events
    await settle(0.2)
    assert reasons(api) == [EVENT_UPDATED]
    await events.flush()


async def test_flush_writes_deferred_events_while_busy_and_stops_the_writers() -> None:
    api = FakeEvents()
    events = lane(api, busy=lambda: True)
    for i in range(10):
        events.post(machineset(f"ms-{i}", f"uid-{i}"), EVENT_TYPE_NORMAL, EVENT_UPDATED, "boot image updated to x")
    await events.flush(timeout=5)
    assert len(api.events) == 10 and events.pending == 0
    assert events.recorder.created == 10 and events.recorder.dropped == 0
    # Posting after a flush starts new writers.
    events.post(machineset("late", "uid-late"), EVENT_TYPE_WARNING, EVENT_FAILED, "m")
    await events.flush(timeout=5)
    assert len(api.events) == 11


async def test_flush_is_bounded_and_counts_what_it_drops() -> None:
    api = SlowEvents(delay=0.5)
    events = lane(api, busy=lambda: True, concurrency=1)
    for i in range(5):
        events.post(machineset(f"ms-{i}", f"uid-{i}"), EVENT_TYPE_NORMAL, EVENT_UPDATED, "m")
    await events.flush(timeout=0.1)
    assert events.pending == 0
    assert events.recorder.dropped == 5 and events.recorder.created == 0


async def test_at_most_concurrency_writes_at_once() -> None:
    api = SlowEvents(delay=0.02)
    events = lane(api, concurrency=3)
    for i in range(12):
        events.post(machineset(f"ms-{i}", f"uid-{i}"), EVENT_TYPE_WARNING, EVENT_FAILED, "m")
    await events.flush(timeout=5)
    assert len(api.events) == 12
    assert api.most_in_flight == 3


async def test_a_bad_reference_is_dropped_without_raising() -> None:
    api = FakeEvents()
    events = lane(api)
    events.post(object(), EVENT_TYPE_WARNING, EVENT_FAILED, "m")  # type: ignore[arg-type]
    await events.flush(timeout=1)
    assert not api.events and events.recorder.dropped == 1


# ---- a fleet-wide pass: past the limit, Normal events fold into one summary per reason ------------


class Holder:
    kind = "ConfigMap"
    namespace = "openshift-machine-api"
    name = "machineset-boot-image-controller"
    uid = "holder-uid"
    api_version = "v1"


async def test_normal_events_past_the_limit_fold_into_one_summary_on_the_holder() -> None:
    api = FakeEvents()
    events = lane(api, busy=lambda: True, summary_target=Holder, aggregate_after=3)
    for i in range(10):
        events.post(machineset(f"ms-{i}", f"uid-{i}"), EVENT_TYPE_NORMAL, EVENT_UPDATED, f"boot image updated to {i}")
    events.post(machineset("bad", "uid-bad"), EVENT_TYPE_WARNING, EVENT_FAILED, "never folded")
    assert events.pending == 3 + 1 + 1  # three one each, the warning, one summary
    await events.flush(timeout=5)
    written = list(api.events.values())
    per_machineset = [e for e in written if e["involvedObject"]["kind"] == "MachineSet"]
    summaries = [e for e in written if e["involvedObject"]["kind"] == "ConfigMap"]
    assert sorted(e["involvedObject"]["name"] for e in per_machineset) == ["bad", "ms-0", "ms-1", "ms-2"]
    assert len(summaries) == 1 and summaries[0]["reason"] == EVENT_UPDATED
    assert summaries[0]["metadata"]["namespace"] == "openshift-machine-api"
    assert summaries[0]["message"].startswith(f"{EVENT_UPDATED} for 7 more MachineSets")
    assert all(f"ms-{i}" in summaries[0]["message"] for i in range(3, 10))
    assert events.folded == 7 and events.recorder.dropped == 0


async def test_without_a_summary_target_every_event_goes_out_on_its_own() -> None:
    api = FakeEvents()
    events = lane(api, busy=lambda: True, summary_target=lambda: None, aggregate_after=3)
    for i in range(6):
        events.post(machineset(f"ms-{i}", f"uid-{i}"), EVENT_TYPE_NORMAL, EVENT_UPDATED, "m")
    await events.flush(timeout=5)
    assert len(api.events) == 6 and events.folded == 0


async def test_the_limit_is_per_window() -> None:
    api, now = FakeEvents(), [0.0]
    events = lane(api, busy=lambda: False, summary_target=Holder, aggregate_after=2, aggregate_window=10.0,
                  clock=lambda: now[0])
    for i in range(2):
        events.post(machineset(f"a-{i}", f"uid-a-{i}"), EVENT_TYPE_NORMAL, EVENT_UPDATED, "m")
    now[0] = 11.0  # the window has moved on: two more go out on their own
    for i in range(2):
        events.post(machineset(f"b-{i}", f"uid-b-{i}"), EVENT_TYPE_NORMAL, EVENT_UPDATED, "m")
    await events.flush(timeout=5)
    assert len(api.events) == 4 and events.folded == 0
