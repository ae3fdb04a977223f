"""EventRecorder: Events on MachineSets, aggregation of repeats, rate limit, never failing the caller."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import yaml

from bootimage_controller.constants import (
    EVENT_COMPONENT,
    EVENT_FAILED,
    EVENT_HOT_LOOP,
    EVENT_TYPE_NORMAL,
    EVENT_TYPE_WARNING,
    EVENT_UPDATED,
    MAPI_NAMESPACE,
)
from bootimage_controller.core.model import MachineResource
from bootimage_controller.reconcile.event_lane import EventRecorder

from .fakes import FakeEvents, api_error

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "machinesets" / "aws-x86_64-us-east-1a-4.16.yaml"


def machineset(name: str = "worker-a", uid: str = "uid-1") -> MachineResource:
    obj = yaml.safe_load(FIXTURE.read_text())
    obj["metadata"].update(name=name, uid=uid)
    return MachineResource.from_object(obj)


class Times:
    """Fake monotonic and wall clocks moved together."""

    def __init__(self) -> None:
        self.mono = 0.0
        self.start = datetime(2026, 1, 1, 12, 0, 0, tzinfo=UTC)

    def clock(self) -> float:
        return self.mono

    def wall(self) -> datetime:
        return self.start + timedelta(seconds=self.mono)


def recorder(api: FakeEvents, times: Times, **kw: object) -> EventRecorder:
    return EventRecorder(api, host="pod-a", clock=times.clock, wall=times.wall, **kw)  # type: ignore[arg-type]


async def test_event_is_created_on_the_machineset() -> None:
    api, times = FakeEvents(), Times()
    rec = recorder(api, times)
    ms = machineset()
    await rec.emit(ms, EVENT_TYPE_NORMAL, EVENT_UPDATED, "Updated boot image to ami-0123")
    [(key, event)] = api.events.items()
    assert key[0] == MAPI_NAMESPACE and key[1].startswith("worker-a.")
    assert event["involvedObject"] == {
        "kind": "MachineSet",
        "namespace": MAPI_NAMESPACE,
        "name": "worker-a",
        "uid": "uid-1",
        "apiVersion": "machine.openshift.io/v1beta1",
    }
    assert (event["type"], event["reason"], event["message"], event["count"]) == (
        "Normal",
        EVENT_UPDATED,
        "Updated boot image to ami-0123",
        1,
    )
    assert event["source"] == {"component": EVENT_COMPONENT, "host": "pod-a"}
    assert event["firstTimestamp"] == event["lastTimestamp"] == "2026-01-01T12:00:00Z"


async def test_repeats_are_aggregated_into_one_event() -> None:
    api, times = FakeEvents(), Times()
    rec = recorder(api, times)
    ms = machineset()
    for _ in range(3):
        await rec.emit(ms, EVENT_TYPE_WARNING, EVENT_HOT_LOOP, "reverted 4 times")
        times.mono += 30
    [event] = api.events.values()
    assert event["count"] == 3
    assert event["firstTimestamp"] == "2026-01-01T12:00:00Z"
    assert event["lastTimestamp"] == "2026-01-01T12:01:00Z"
    assert api.calls == ["create", "patch", "patch"]
    assert (rec.created, rec.aggregated) == (1, 2)


async def test_different_message_object_or_expired_window_creates_a_new_event() -> None:
    api, times = FakeEvents(), Times()
    rec = recorder(api, times, window=600.0)
    await rec.emit(machineset(), EVENT_TYPE_WARNING, EVENT_FAILED, "409 twice")
    await rec.emit(machineset(), EVENT_TYPE_WARNING, EVENT_FAILED, "403 forbidden")
    await rec.emit(machineset("worker-b", "uid-2"), EVENT_TYPE_WARNING, EVENT_FAILED, "409 twice")
    times.mono += 601
    await rec.emit(machineset(), EVENT_TYPE_WARNING, EVENT_FAILED, "409 twice")
    assert len(api.events) == 4
    assert all(e["count"] == 1 for e in api.events.values())


async def test_an_expired_event_is_recreated() -> None:
    api, times = FakeEvents(), Times()
    rec = recorder(api, times)
    await rec.emit(machineset(), EVENT_TYPE_NORMAL, EVENT_UPDATED, "m")
    api.events.clear()  # the API server's event TTL removed it
    await rec.emit(machineset(), EVENT_TYPE_NORMAL, EVENT_UPDATED, "m")
    assert [e["count"] for e in api.events.values()] == [1]
    assert api.calls == ["create", "patch", "create"]


async def test_errors_never_reach_the_caller() -> None:
    api, times = FakeEvents(), Times()
    rec = recorder(api, times, attempts=1)
    api.create_errors = [api_error(403), RuntimeError("boom")]
    await rec.emit(machineset(), EVENT_TYPE_NORMAL, EVENT_UPDATED, "a")
    await rec.emit(machineset(), EVENT_TYPE_NORMAL, EVENT_UPDATED, "b")
    await rec.emit(machineset(), "Bogus", EVENT_UPDATED, "c")
    assert api.events == {}
    assert rec.dropped == 3
    await rec.emit(machineset(), EVENT_TYPE_NORMAL, EVENT_UPDATED, "d")  # and it keeps working
    assert len(api.events) == 1


async def test_transient_errors_are_retried() -> None:
    api, times = FakeEvents(), Times()

    async def no_sleep(_: float) -> None:
        return None

    rec = recorder(api, times, sleep=no_sleep)
    api.create_errors = [api_error(503)]
    await rec.emit(machineset(), EVENT_TYPE_NORMAL, EVENT_UPDATED, "a")
    assert len(api.events) == 1


async def test_floods_on_one_object_are_rate_limited() -> None:
    api, times = FakeEvents(), Times()
    rec = recorder(api, times, burst=5, refill_per_second=1.0 / 60)
    for i in range(20):
        await rec.emit(machineset(), EVENT_TYPE_WARNING, EVENT_FAILED, f"error {i}")
    assert len(api.events) == 5 and rec.dropped == 15
    await rec.emit(machineset("other", "uid-9"), EVENT_TYPE_WARNING, EVENT_FAILED, "x")  # others unaffected
    assert len(api.events) == 6
    times.mono += 60
    await rec.emit(machineset(), EVENT_TYPE_WARNING, EVENT_FAILED, "after a minute")
    assert len(api.events) == 7


async def test_long_messages_are_truncated() -> None:
    api, times = FakeEvents(), Times()
    await recorder(api, times).emit(machineset(), EVENT_TYPE_NORMAL, EVENT_UPDATED, "y" * 5000)
    [event] = api.events.values()
    assert len(event["message"]) == 1024 and event["message"].endswith("...")
