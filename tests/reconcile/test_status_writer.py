"""The StatusWriter: coalescing, rate, skipping unchanged states, merging, conflicts, retries.

Time is a fake clock: no test sleeps for real, and timing is asserted on the fake clock.
"""

from __future__ import annotations

import itertools
from datetime import UTC, datetime
from typing import Any

import pytest
import structlog

from bootimage_controller.constants import (
    CLUSTEROPERATOR_PLURAL,
    CO_AVAILABLE,
    CONDITION_DEGRADED,
    CONDITION_PROGRESSING,
    DEFAULT_CLUSTER_OPERATOR,
    MACHINECONFIGURATION_NAME,
    MACHINECONFIGURATION_PLURAL,
)
from bootimage_controller.core.status import ClusterOperatorStatus, Condition
from bootimage_controller.kube.fence import NotLeader
from bootimage_controller.reconcile.status_clock import StatusClock
from bootimage_controller.reconcile.status_writer import StatusWriter

from .fakes import FakeClock, FakeCustomObjects, api_error, settle

MC = (MACHINECONFIGURATION_PLURAL, MACHINECONFIGURATION_NAME)
T0S, T1S = "2026-01-01T12:00:00Z", "2026-01-01T12:05:00Z"
FOREIGN = {
    "type": "MachineConfigurationSomethingDegraded",
    "status": "False",
    "reason": "AsExpected",
    "message": "owned by the MCO",
    "lastTransitionTime": T0S,
}


def conditions(i: int, *, degraded: bool = False, ltt: str = T1S) -> list[Condition]:
    return [
        Condition(
            CONDITION_PROGRESSING, "True", "Reconciling", f"Reconciled {i} of 100 MAPI MachineSets", ltt
        ),
        Condition(CONDITION_DEGRADED, "True" if degraded else "False", "AsExpected", "0 Degraded", ltt),
    ]


def messages(api: FakeCustomObjects) -> dict[str, str]:
    return {c["type"]: c["message"] for c in api.status(*MC).get("conditions", [])}


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def api() -> FakeCustomObjects:
    fake = FakeCustomObjects()
    fake.put(
        *MC,
        {
            "apiVersion": "operator.openshift.io/v1",
            "kind": "MachineConfiguration",
            "spec": {},
            "status": {"conditions": [FOREIGN]},
        },
    )
    return fake


@pytest.fixture
def writer(api: FakeCustomObjects, clock: FakeClock) -> StatusWriter:
    return StatusWriter(api, cluster_operator="", clock=StatusClock(clock), sleep=clock.sleep)


async def test_a_burst_of_updates_is_coalesced_and_the_last_state_wins(
    writer: StatusWriter, api: FakeCustomObjects, clock: FakeClock
) -> None:
    for i in range(100):  # 100 updates over 3 seconds
        writer.set_machineconfiguration(conditions(i), None)
        await clock.advance(0.03)
    await writer.flush()
    assert 1 <= len(api.patches) <= 5
    assert writer.writes == len(api.patches)
    assert messages(api)[CONDITION_PROGRESSING] == "Reconciled 99 of 100 MAPI MachineSets"
    assert api.status(*MC)["conditions"][0] == FOREIGN


async def test_writes_are_at_least_the_interval_apart(
    writer: StatusWriter, api: FakeCustomObjects, clock: FakeClock
) -> None:
    times: list[float] = []
    original = api.patch_cluster_custom_object_status

    async def timed(*args: Any, **kw: Any) -> Any:
        times.append(clock.now)
        return await original(*args, **kw)

    api.patch_cluster_custom_object_status = timed  # type: ignore[method-assign]
    for i in range(60):
        writer.set_machineconfiguration(conditions(i), None)
        await clock.advance(0.1)
    await clock.advance(2.0)
    assert len(times) >= 5
    assert all(b - a >= 1.0 for a, b in itertools.pairwise(times))
    assert messages(api)[CONDITION_PROGRESSING] == "Reconciled 59 of 100 MAPI MachineSets"


async def test_first_write_after_a_quiet_period_goes_out_at_once(
    writer: StatusWriter, api: FakeCustomObjects, clock: FakeClock
) -> None:
    writer.set_machineconfiguration(conditions(1), None)
    await settle()
    assert len(api.patches) == 1
    await clock.advance(0.2)
    writer.set_machineconfiguration(conditions(2), None)
    await settle()
    assert len(api.patches) == 1  # within the interval: waits
    await clock.advance(0.8)
    assert len(api.patches) == 2
    await clock.advance(30)
    writer.set_machineconfiguration(conditions(3), None)
    await settle()  # no time passes
    assert len(api.patches) == 3
    assert messages(api)[CONDITION_PROGRESSING] == "Reconciled 3 of 100 MAPI MachineSets"


async def test_identical_states_write_nothing(
    writer: StatusWriter, api: FakeCustomObjects, clock: FakeClock
) -> None:
    writer.set_machineconfiguration(conditions(7), None)
    await clock.advance(2)
    assert len(api.patches) == 1
    gets = api.gets
    for _ in range(50):
        # the controller recomputes the same state, with a fresh transition time each pass
        writer.set_machineconfiguration(conditions(7, ltt="2026-01-01T13:00:00Z"), None)
        await clock.advance(0.5)
    await writer.flush()
    assert len(api.patches) == 1
    assert api.gets == gets  # not even a read


async def test_state_already_in_the_cluster_is_not_written(api: FakeCustomObjects, clock: FakeClock) -> None:
    api.put(*MC, {"status": {"conditions": [FOREIGN, *(c.to_dict() for c in conditions(4))]}})
    writer = StatusWriter(api, cluster_operator="", clock=StatusClock(clock), sleep=clock.sleep)
    writer.set_machineconfiguration(conditions(4, ltt="2026-02-02T00:00:00Z"), None)
    await writer.flush()
    assert api.patches == []
    assert writer.writes == 0


async def test_only_our_conditions_change_and_transition_time_survives(
    writer: StatusWriter, api: FakeCustomObjects, clock: FakeClock
) -> None:
    writer.set_machineconfiguration(conditions(1, ltt=T0S), None)
    await clock.advance(1)
    writer.set_machineconfiguration(conditions(2, ltt=T1S), None)  # same statuses, new message
    await clock.advance(1)
    conds = api.status(*MC)["conditions"]
    assert conds[0] == FOREIGN
    progressing = next(c for c in conds if c["type"] == CONDITION_PROGRESSING)
    assert (progressing["message"], progressing["lastTransitionTime"]) == (
        "Reconciled 2 of 100 MAPI MachineSets",
        T0S,
    )
    writer.set_machineconfiguration(conditions(2, degraded=True, ltt=T1S), None)  # Degraded flips
    await clock.advance(1)
    degraded = next(c for c in api.status(*MC)["conditions"] if c["type"] == CONDITION_DEGRADED)
    assert (degraded["status"], degraded["lastTransitionTime"]) == ("True", T1S)
    # the patch carries resourceVersion and the full conditions list
    body = api.patches[-1][2]
    assert body["metadata"]["resourceVersion"]
    assert [c["type"] for c in body["status"]["conditions"]] == [
        FOREIGN["type"],
        CONDITION_PROGRESSING,
        CONDITION_DEGRADED,
    ]


async def test_skew_status_is_replaced_whole_and_left_alone_when_none(
    writer: StatusWriter, api: FakeCustomObjects, clock: FakeClock
) -> None:
    writer.set_machineconfiguration(
        conditions(1), {"mode": "Automatic", "automatic": {"ocpVersion": "4.16.0"}}
    )
    await clock.advance(1)
    new = {"mode": "Automatic", "automatic": {"rhcosVersion": "9.6.20251212-1"}}
    writer.set_machineconfiguration(conditions(1), new)
    await clock.advance(1)
    assert api.status(*MC)["bootImageSkewEnforcementStatus"] == new  # no stale ocpVersion
    writer.set_machineconfiguration(conditions(2), None)
    await clock.advance(1)
    assert api.status(*MC)["bootImageSkewEnforcementStatus"] == new
    assert "bootImageSkewEnforcementStatus" not in api.patches[-1][2]["status"]


async def test_conflict_rereads_and_keeps_the_other_writers_change(
    writer: StatusWriter, api: FakeCustomObjects, clock: FakeClock
) -> None:
    added = {
        "type": "AddedMeanwhile",
        "status": "True",
        "reason": "R",
        "message": "m",
        "lastTransitionTime": T0S,
    }

    def concurrent_writer() -> None:
        api.put(*MC, {"status": {"conditions": [FOREIGN, added]}})

    api.before_patch = concurrent_writer
    writer.set_machineconfiguration(conditions(1), None)
    await writer.flush()
    types = [c["type"] for c in api.status(*MC)["conditions"]]
    assert types == [FOREIGN["type"], "AddedMeanwhile", CONDITION_PROGRESSING, CONDITION_DEGRADED]
    assert len(api.patches) == 2  # the 409, then the write on the fresh read


async def test_transient_errors_are_retried_and_counted(
    writer: StatusWriter, api: FakeCustomObjects, clock: FakeClock
) -> None:
    api.patch_errors = [api_error(503), api_error(429)]
    writer.set_machineconfiguration(conditions(1), None)
    await clock.advance(5)
    assert messages(api)[CONDITION_PROGRESSING] == "Reconciled 1 of 100 MAPI MachineSets"
    assert writer.writes == 3


async def test_a_failed_write_is_retried_after_a_backoff(
    writer: StatusWriter, api: FakeCustomObjects, clock: FakeClock
) -> None:
    api.patch_errors = [api_error(403)]
    writer.set_machineconfiguration(conditions(1), None)
    await settle()
    assert len(api.patches) == 1 and CONDITION_PROGRESSING not in messages(api)
    await clock.advance(1.0)
    assert messages(api)[CONDITION_PROGRESSING] == "Reconciled 1 of 100 MAPI MachineSets"


async def test_a_write_refused_by_the_fence_is_said_without_a_traceback_and_tried_again(
    writer: StatusWriter, api: FakeCustomObjects, clock: FakeClock
) -> None:
    # The last status write of a shutdown races the end of the leader's work: the fence refuses it.
    api.patch_errors = [NotLeader("not running the controller's work")]
    with structlog.testing.capture_logs() as logs:
        writer.set_machineconfiguration(conditions(1), None)
        await settle()
    assert CONDITION_PROGRESSING not in messages(api)
    said = [e for e in logs if e["event"] == "status not written"]
    assert len(said) == 1 and said[0]["log_level"] == "info" and "exc_info" not in said[0]
    assert not [e for e in logs if e["log_level"] == "error"]
    await clock.advance(1.0)  # leading again (or the next process): the state still goes out
    assert messages(api)[CONDITION_PROGRESSING] == "Reconciled 1 of 100 MAPI MachineSets"


async def test_missing_machineconfiguration_is_not_a_failure(clock: FakeClock) -> None:
    api = FakeCustomObjects()
    writer = StatusWriter(api, cluster_operator="", clock=StatusClock(clock), sleep=clock.sleep)
    with structlog.testing.capture_logs() as logs:
        for _ in range(3):
            writer.set_machineconfiguration(conditions(1), None)
            await clock.advance(2)
    assert api.patches == []
    assert sum("not found" in e["event"] for e in logs) == 1  # said once
    api.put(*MC, {"spec": {}})
    writer.set_machineconfiguration(conditions(1), None)  # the controller calls again
    await clock.advance(1)
    assert messages(api)[CONDITION_PROGRESSING] == "Reconciled 1 of 100 MAPI MachineSets"


async def test_a_rewritten_status_is_written_back_when_observed(
    writer: StatusWriter, api: FakeCustomObjects, clock: FakeClock
) -> None:
    writer.set_machineconfiguration(conditions(1), None)
    await clock.advance(1)
    api.put(*MC, {"status": {"conditions": [FOREIGN]}})  # someone dropped our conditions
    writer.observe_machineconfiguration(api.objects[MC])
    await clock.advance(1)
    assert messages(api)[CONDITION_PROGRESSING] == "Reconciled 1 of 100 MAPI MachineSets"
    patches = len(api.patches)
    writer.observe_machineconfiguration(api.objects[MC])  # our own write coming back: nothing to do
    await clock.advance(5)
    assert len(api.patches) == patches


# --- ClusterOperator -----------------------------------------------------------------------------


def co(available: bool, version: str = "0.1.0") -> ClusterOperatorStatus:
    return ClusterOperatorStatus.build(
        synced=available,
        progressing=None,
        degraded=None,
        verdict=None,
        now=datetime(2026, 1, 1, tzinfo=UTC),
        version=version,
    )


async def test_cluster_operator_is_created_then_updated(api: FakeCustomObjects, clock: FakeClock) -> None:
    writer = StatusWriter(api, clock=StatusClock(clock), sleep=clock.sleep)
    assert writer.cluster_operator == DEFAULT_CLUSTER_OPERATOR
    writer.set_cluster_operator(co(False))
    await clock.advance(1)
    key = (CLUSTEROPERATOR_PLURAL, DEFAULT_CLUSTER_OPERATOR)
    assert len(api.creates) == 1 and "status" not in api.creates[0]
    status = api.status(*key)
    assert status["versions"] == [{"name": "operator", "version": "0.1.0"}]
    assert {c["type"]: c["status"] for c in status["conditions"]}[CO_AVAILABLE] == "False"
    writer.set_cluster_operator(co(True))
    await clock.advance(1)
    assert {c["type"]: c["status"] for c in api.status(*key)["conditions"]}[CO_AVAILABLE] == "True"
    writes = writer.writes
    writer.set_cluster_operator(co(True))
    await writer.flush()
    assert writer.writes == writes == 3  # create, status, status
    assert len(api.creates) == 1


async def test_empty_cluster_operator_name_disables_it(api: FakeCustomObjects, clock: FakeClock) -> None:
    writer = StatusWriter(api, cluster_operator="", clock=StatusClock(clock), sleep=clock.sleep)
    writer.set_cluster_operator(co(True))
    await writer.flush()
    assert api.creates == [] and api.gets == 0 and writer.writes == 0


async def test_flush_writes_the_pending_state_without_waiting(
    writer: StatusWriter, api: FakeCustomObjects, clock: FakeClock
) -> None:
    writer.set_machineconfiguration(conditions(1), None)
    await settle()
    writer.set_machineconfiguration(conditions(2), None)
    await settle()
    assert len(api.patches) == 1
    await writer.aclose()  # shutdown: no clock advance needed
    assert messages(api)[CONDITION_PROGRESSING] == "Reconciled 2 of 100 MAPI MachineSets"


async def test_skew_status_given_as_a_merge_patch_converges(
    writer: StatusWriter, api: FakeCustomObjects, clock: FakeClock
) -> None:
    """`SkewEnforcementStatus.to_merge_patch` output (explicit nulls) is accepted and settles."""
    api.put(
        *MC,
        {
            "status": {
                "bootImageSkewEnforcementStatus": {"mode": "Automatic", "automatic": {"ocpVersion": "4.16.0"}}
            }
        },
    )
    manual = {"mode": "Manual", "manual": {"mode": "OCPVersion", "ocpVersion": "4.14.0"}}
    writer.set_machineconfiguration(conditions(1), {**manual, "automatic": None})
    await clock.advance(1)
    assert api.status(*MC)["bootImageSkewEnforcementStatus"] == manual
    patches = len(api.patches)
    writer.observe_machineconfiguration(api.objects[MC])
    for _ in range(5):
        writer.set_machineconfiguration(conditions(1), {**manual, "automatic": None})
        await clock.advance(1)
    fresh = StatusWriter(api, cluster_operator="", clock=StatusClock(clock), sleep=clock.sleep)  # after a restart
    fresh.set_machineconfiguration(conditions(1), {**manual, "automatic": None})
    await fresh.flush()
    assert len(api.patches) == patches


async def test_an_automatic_skew_status_brings_the_boot_image_config_openshift_requires(
    writer: StatusWriter, api: FakeCustomObjects, clock: FakeClock
) -> None:
    """OpenShift refuses Automatic on a MachineConfiguration with neither spec.managedBootImages nor
    status.managedBootImagesStatus (its CEL rule, now in the test CRD too): the default we act on
    goes with it, once, and never over one that is there."""
    automatic = {"mode": "Automatic", "automatic": {"ocpVersion": "4.16.0"}}
    writer.set_machineconfiguration(conditions(1), automatic)
    await clock.advance(1)
    assert api.status(*MC)["managedBootImagesStatus"] == {"machineManagers": [
        {"resource": "machinesets", "apiGroup": "machine.openshift.io", "selection": {"mode": "All"}}]}
    mcos_own = {"machineManagers": [{"resource": "machinesets", "apiGroup": "machine.openshift.io",
                                     "selection": {"mode": "All"}},
                                    {"resource": "controlplanemachinesets", "apiGroup": "machine.openshift.io",
                                     "selection": {"mode": "None"}}]}
    api.status(*MC)["managedBootImagesStatus"] = mcos_own
    writer.set_machineconfiguration(conditions(2), {"mode": "Automatic", "automatic": {"ocpVersion": "4.22.0"}})
    await clock.advance(1)
    assert api.status(*MC)["managedBootImagesStatus"] == mcos_own
    assert "managedBootImagesStatus" not in api.patches[-1][2]["status"]
    writer.set_machineconfiguration(conditions(3), {"mode": "Manual", "manual": {"mode": "OCPVersion", "ocpVersion": "4.16.0"}})
    await clock.advance(1)
    assert "managedBootImagesStatus" not in api.patches[-1][2]["status"]
