"""Pure status builders: pass summaries, condition messages, transition times, the ClusterOperator."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from bootimage_controller.constants import (
    CO_AVAILABLE,
    CO_DEGRADED,
    CO_PROGRESSING,
    CO_UPGRADEABLE,
    CONDITION_DEGRADED,
    CONDITION_MESSAGE_MAX,
    CONDITION_PROGRESSING,
    CPMS_KIND,
    MACHINESET_KIND,
    MAPI_NAMESPACE,
    MCO_NAMESPACE,
    Action,
    ConditionReason,
    Reason,
    SkewMode,
    SkewReason,
)
from bootimage_controller.core.model import BootImageDecision
from bootimage_controller.core.skew.verdict import SkewLimits, SkewVerdict
from bootimage_controller.core.status import (
    ClusterOperatorStatus,
    Condition,
    Outcome,
    PassSummary,
    Result,
    degraded_condition,
    find_condition,
    merge_conditions,
    progressing_condition,
)

T0 = datetime(2026, 1, 1, 12, 0, 0, tzinfo=UTC)
T1 = T0 + timedelta(minutes=5)
T0S, T1S = "2026-01-01T12:00:00Z", "2026-01-01T12:05:00Z"


def decision(
    action: Action, reason: Reason, name: str = "ms", kind: str = MACHINESET_KIND, msg: str = ""
) -> BootImageDecision:
    return BootImageDecision(kind, MAPI_NAMESPACE, name, action, reason, msg or f"{reason} message")


def outcome(result: Result, name: str = "ms", kind: str = MACHINESET_KIND, message: str = "") -> Outcome:
    return Outcome(kind, MAPI_NAMESPACE, name, result, message)


# --- outcomes from decisions ---------------------------------------------------------------------


def test_outcome_from_decision_maps_every_action() -> None:
    assert Outcome.from_decision(decision(Action.NOOP, Reason.UP_TO_DATE)).result is Result.RECONCILED
    assert Outcome.from_decision(decision(Action.SKIP, Reason.WINDOWS)).result is Result.SKIPPED
    assert Outcome.from_decision(decision(Action.SKIP, Reason.NOT_ENROLLED)).result is Result.UNMANAGED
    patch = decision(Action.PATCH, Reason.BOOT_IMAGE_OUTDATED)
    assert Outcome.from_decision(patch).result is Result.PENDING
    assert Outcome.from_decision(patch, patched=True).result is Result.RECONCILED
    failed = Outcome.from_decision(patch, error="409 twice")
    assert (failed.result, failed.message) == (Result.ERRORED, "409 twice")
    err = Outcome.from_decision(decision(Action.ERROR, Reason.INVALID_PROVIDER_SPEC, msg="ami: missing"))
    assert (err.result, err.message) == (Result.ERRORED, "ami: missing")


# --- Progressing ---------------------------------------------------------------------------------


def test_progressing_message_counts_like_the_mco() -> None:
    summary = PassSummary.from_outcomes(
        [
            outcome(Result.RECONCILED, "a"),
            outcome(Result.RECONCILED, "b"),
            outcome(Result.RECONCILED, "c"),
            outcome(Result.SKIPPED, "d"),
            outcome(Result.UNMANAGED, "not-enrolled"),
        ]
    )
    cond = progressing_condition(summary, T0, None)
    assert (
        cond.message
        == "Reconciled 3 of 4 MAPI MachineSets (1 skipped) | Reconciled 0 of 0 ControlPlaneMachineSets"
    )
    assert (cond.type, cond.status, cond.reason) == (
        CONDITION_PROGRESSING,
        "False",
        ConditionReason.RECONCILED,
    )
    assert cond.last_transition_time == T0S


def test_progressing_is_true_while_patches_are_pending() -> None:
    outcomes = [
        outcome(Result.PENDING, "a"),
        outcome(Result.RECONCILED, "b"),
        outcome(Result.RECONCILED, "cp", CPMS_KIND),
    ]
    cond = progressing_condition(PassSummary.from_outcomes(outcomes), T0, None)
    assert (cond.status, cond.reason) == ("True", ConditionReason.RECONCILING)
    assert cond.message == "Reconciled 1 of 2 MAPI MachineSets | Reconciled 1 of 1 ControlPlaneMachineSets"


def test_capi_objects_are_counted_apart_and_only_when_there_are_some() -> None:
    outcomes = [
        outcome(Result.RECONCILED, "a"),
        outcome(Result.RECONCILED, "c1", "MachineSet.cluster.x-k8s.io"),
        outcome(Result.ERRORED, "c2", "MachineSet.cluster.x-k8s.io", message="boom"),
        outcome(Result.PENDING, "d", "MachineDeployment.cluster.x-k8s.io"),
    ]
    summary = PassSummary.from_outcomes(outcomes)
    assert summary.progress_message() == (
        "Reconciled 1 of 1 MAPI MachineSets | Reconciled 0 of 0 ControlPlaneMachineSets | "
        "Reconciled 1 of 2 CAPI MachineSets | Reconciled 0 of 1 CAPI MachineDeployments"
    )
    assert summary.degraded and "1 Degraded CAPI MachineSets" in summary.degraded_message()


def test_errored_machinesets_do_not_keep_progressing_true() -> None:
    summary = PassSummary.from_outcomes(
        [outcome(Result.ERRORED, "a", message="boom"), outcome(Result.RECONCILED, "b")]
    )
    assert progressing_condition(summary, T0, None).status == "False"


# --- Degraded ------------------------------------------------------------------------------------


def test_degraded_message_names_counts_and_errors() -> None:
    summary = PassSummary.from_outcomes(
        [
            outcome(Result.ERRORED, "worker-a", message="invalid providerSpec: ami missing"),
            outcome(Result.RECONCILED, "b"),
        ]
    )
    cond = degraded_condition(summary, T0, None)
    assert (cond.type, cond.status, cond.reason) == (
        CONDITION_DEGRADED,
        "True",
        ConditionReason.MACHINE_SET_ERRORS,
    )
    assert cond.message == (
        "1 Degraded MAPI MachineSets | 0 Degraded ControlPlaneMachineSets | Error(s): "
        f"MachineSet {MAPI_NAMESPACE}/worker-a: invalid providerSpec: ami missing"
    )


def test_clean_pass_is_not_degraded() -> None:
    cond = degraded_condition(PassSummary.from_outcomes([outcome(Result.RECONCILED)]), T0, None)
    assert (cond.status, cond.reason) == ("False", ConditionReason.AS_EXPECTED)
    assert cond.message == "0 Degraded MAPI MachineSets | 0 Degraded ControlPlaneMachineSets"


def test_cpms_error_is_not_masked_by_clean_machinesets() -> None:
    """The MCO lets a clean MAPI loop overwrite a CPMS error (reference section 10); we do not."""
    summary = PassSummary.from_outcomes(
        [
            outcome(Result.ERRORED, "cluster", CPMS_KIND, "hot loop"),
            outcome(Result.RECONCILED, "a"),
            outcome(Result.RECONCILED, "b"),
        ]
    )
    cond = degraded_condition(summary, T0, None)
    assert cond.status == "True"
    assert cond.message.startswith(
        "0 Degraded MAPI MachineSets | 1 Degraded ControlPlaneMachineSets | Error(s): "
    )
    assert f"ControlPlaneMachineSet {MAPI_NAMESPACE}/cluster: hot loop" in cond.message


def test_long_error_lists_are_summarised() -> None:
    summary = PassSummary.from_outcomes(
        [outcome(Result.ERRORED, f"ms-{i:02d}", message="bad") for i in range(13)]
    )
    message = degraded_condition(summary, T0, None).message
    assert message.startswith("13 Degraded MAPI MachineSets")
    assert "ms-09: bad" in message and "ms-10" not in message
    assert message.endswith("; and 3 more")


def test_huge_messages_are_truncated_to_the_api_limit() -> None:
    summary = PassSummary.from_outcomes([outcome(Result.ERRORED, "a", message="x" * 50_000)])
    message = degraded_condition(summary, T0, None).message
    assert len(message) == CONDITION_MESSAGE_MAX
    assert message.endswith("(truncated)")


def test_invalid_configmap_degrades_and_stops_progress() -> None:
    summary = PassSummary.blocked(
        ConditionReason.BOOT_IMAGES_CONFIGMAP_INVALID,
        "coreos-bootimages: data.stream: Expecting value",
        degrading=True,
    )
    degraded = degraded_condition(summary, T0, None)
    assert (degraded.status, degraded.reason) == ("True", "BootImagesConfigMapInvalid")
    assert degraded.message.endswith("| Error(s): coreos-bootimages: data.stream: Expecting value")
    progressing = progressing_condition(summary, T0, None)
    assert (progressing.status, progressing.reason) == ("False", "BootImagesConfigMapInvalid")


def test_unstable_cluster_keeps_the_previous_degraded_verdict() -> None:
    previous = degraded_condition(
        PassSummary.from_outcomes([outcome(Result.ERRORED, message="boom")]), T0, None
    )
    blocked = PassSummary.blocked(
        ConditionReason.CLUSTER_NOT_STABLE, "ClusterVersion is Partial", degrading=False
    )
    assert degraded_condition(blocked, T1, previous) == previous
    first = degraded_condition(blocked, T1, None)
    assert (first.status, first.reason) == ("False", ConditionReason.AS_EXPECTED)
    progressing = progressing_condition(blocked, T1, None)
    assert (progressing.status, progressing.reason, progressing.message) == (
        "False",
        "ClusterNotStable",
        "ClusterVersion is Partial",
    )


# --- lastTransitionTime --------------------------------------------------------------------------


def test_transition_time_moves_only_when_status_flips() -> None:
    """Kubernetes convention; the MCO moves it on any change, message included."""
    pending = PassSummary.from_outcomes([outcome(Result.PENDING, "a"), outcome(Result.PENDING, "b")])
    half = PassSummary.from_outcomes([outcome(Result.RECONCILED, "a"), outcome(Result.PENDING, "b")])
    done = PassSummary.from_outcomes([outcome(Result.RECONCILED, "a"), outcome(Result.RECONCILED, "b")])
    first = progressing_condition(pending, T0, None)
    second = progressing_condition(half, T1, first)
    assert second.message != first.message
    assert second.last_transition_time == T0S
    third = progressing_condition(done, T1 + timedelta(seconds=1), second)
    assert third.status == "False"
    assert third.last_transition_time == "2026-01-01T12:05:01Z"


def test_merge_keeps_foreign_conditions_and_cluster_transition_time() -> None:
    foreign = {
        "type": "SomethingElseDegraded",
        "status": "True",
        "reason": "X",
        "message": "m",
        "lastTransitionTime": T0S,
    }
    current = [
        {
            "type": CONDITION_PROGRESSING,
            "status": "False",
            "reason": "Reconciled",
            "message": "old",
            "lastTransitionTime": T0S,
        },
        foreign,
    ]
    ours = [
        Condition(CONDITION_PROGRESSING, "False", "Reconciled", "new", T1S),
        Condition(CONDITION_DEGRADED, "False", "AsExpected", "ok", T1S),
    ]
    merged = merge_conditions(current, ours)
    assert [c["type"] for c in merged] == [CONDITION_PROGRESSING, "SomethingElseDegraded", CONDITION_DEGRADED]
    assert merged[0]["message"] == "new"
    assert merged[0]["lastTransitionTime"] == T0S  # status unchanged: the cluster's time stands
    assert merged[1] is foreign
    assert merged[2]["lastTransitionTime"] == T1S
    assert find_condition(merged, CONDITION_DEGRADED) == ours[1]


# --- ClusterOperator -----------------------------------------------------------------------------


def verdict(upgradeable: bool, reason: SkewReason, message: str) -> SkewVerdict:
    return SkewVerdict(
        mode=SkewMode.AUTOMATIC,
        upgradeable=upgradeable,
        reason=reason,
        message=message,
        cluster_boot_image=None,
        limits=SkewLimits(),
    )


def co_status(**kw: object) -> ClusterOperatorStatus:
    args: dict[str, object] = {
        "synced": True,
        "progressing": None,
        "degraded": None,
        "verdict": None,
        "now": T0,
    }
    args.update(kw)
    return ClusterOperatorStatus.build(**args)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("upgradeable", "reason", "status"),
    [
        (True, SkewReason.AS_EXPECTED, "True"),
        (False, SkewReason.CLUSTER_BOOT_IMAGE_SKEW_ERROR, "False"),
        (False, SkewReason.BOOT_IMAGE_UPDATE_DEGRADED, "False"),
    ],
)
def test_upgradeable_follows_the_skew_verdict(upgradeable: bool, reason: SkewReason, status: str) -> None:
    message = f"verdict says {reason}"
    cond = co_status(verdict=verdict(upgradeable, reason, message)).condition(CO_UPGRADEABLE)
    assert cond is not None
    assert (cond.status, cond.reason, cond.message) == (status, str(reason), message)


def test_upgradeable_is_unknown_before_a_verdict() -> None:
    cond = co_status().condition(CO_UPGRADEABLE)
    assert cond is not None and cond.status == "Unknown"


def test_cluster_operator_mirrors_machineconfiguration_conditions() -> None:
    summary = PassSummary.from_outcomes(
        [outcome(Result.PENDING, "a"), outcome(Result.ERRORED, "b", message="boom")]
    )
    mc_progressing = progressing_condition(summary, T0, None)
    mc_degraded = degraded_condition(summary, T0, None)
    status = co_status(progressing=mc_progressing, degraded=mc_degraded)
    progressing, degraded = status.condition(CO_PROGRESSING), status.condition(CO_DEGRADED)
    assert progressing is not None and degraded is not None
    assert (progressing.status, progressing.message) == ("True", mc_progressing.message)
    assert (degraded.status, degraded.reason, degraded.message) == (
        "True",
        mc_degraded.reason,
        mc_degraded.message,
    )


def test_available_once_synced_and_transition_times_from_previous() -> None:
    before = co_status(synced=False)
    available = before.condition(CO_AVAILABLE)
    assert available is not None and available.status == "False"
    previous = [c.to_dict() for c in before.conditions]
    after = co_status(synced=True, now=T1, previous=previous)
    available, degraded = after.condition(CO_AVAILABLE), after.condition(CO_DEGRADED)
    assert available is not None and (available.status, available.last_transition_time) == ("True", T1S)
    assert degraded is not None and degraded.last_transition_time == T0S  # still False: unchanged


def test_versions_and_related_objects() -> None:
    status = co_status(version="1.2.3", operator_namespace="bootimage-system")
    assert status.versions_list() == [{"name": "operator", "version": "1.2.3"}]
    related = status.related_list()
    for ns in (MCO_NAMESPACE, MAPI_NAMESPACE, "bootimage-system"):
        assert {"group": "", "resource": "namespaces", "name": ns} in related
    assert {
        "group": "",
        "resource": "configmaps",
        "name": "coreos-bootimages",
        "namespace": MCO_NAMESPACE,
    } in related
    assert {
        "group": "operator.openshift.io",
        "resource": "machineconfigurations",
        "name": "cluster",
    } in related
    assert {
        "group": "machine.openshift.io",
        "resource": "machinesets",
        "name": "",
        "namespace": MAPI_NAMESPACE,
    } in related


def test_the_final_report_judges_a_just_patched_machineset_by_what_was_written() -> None:
    """The report at the end of a pass comes milliseconds after its last patch, before the watch
    brings the write back: it must see our record anyway, or the next pass writes the status again
    (issue 36; tests/integration/test_settled.py caught it in CI)."""
    from dataclasses import replace

    from bootimage_controller.constants import ANNOTATION_RELEASE
    from bootimage_controller.reconcile.reporting import as_written
    from bootimage_controller.reconcile.state import MachineSetState

    d = replace(decision("w1", Action.PATCH, Reason.BOOT_IMAGE_OUTDATED), target_release="9.6.20251212-1")
    cached = {"metadata": {"name": "w1", "annotations": {"other": "kept"}}}
    seen = as_written(MachineSetState(d, patched=True), cached)
    assert seen is not None and seen["metadata"]["annotations"] == {"other": "kept", ANNOTATION_RELEASE: "9.6.20251212-1"}
    assert cached["metadata"]["annotations"] == {"other": "kept"}  # the cache's object is not changed
    assert as_written(MachineSetState(d), cached) is cached  # not written: as the cache has it
    # The watch has brought the write back: the cached object itself, not a copy per report.
    assert as_written(MachineSetState(d, patched=True), seen) is seen
