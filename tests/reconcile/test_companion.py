"""The companion rules' pure parts: the GitOps proposal, the disagreement clock, the warning before
a claim that would make the MCO hold upgrades (SPEC section 3)."""

from __future__ import annotations

import json
from typing import Any

from harness.objects import machine_configuration, mco_cluster_operator

from bootimage_controller.constants import MAX_EVENT_MESSAGE, Action, Manager
from bootimage_controller.core.companion import (
    DisagreementClock,
    McoPass,
    claim_hold_warning,
    mco_skew_mode,
    proposal_message,
)
from bootimage_controller.core.manager import MachineConfigOperator
from bootimage_controller.core.model import BootImageDecision, FieldChange
from bootimage_controller.core.patching import apply_changes
from bootimage_controller.core.skew.record import BootImageRelease, ReleaseSource
from bootimage_controller.core.skew.verdict import SkewLimits
from bootimage_controller.core.skew.versions import OcpVersion

PSP = ("spec", "template", "spec", "providerSpec", "value")
OLD, NEW = {"id": "ami-old"}, {"id": "ami-new"}


def decision(**kw: Any) -> BootImageDecision:
    base: dict[str, Any] = dict(
        kind="MachineSet", namespace="openshift-machine-api", name="workers", action=Action.PATCH,
        reason="BootImageOutdated", message="boot image 416.94.202405291527-0 -> 9.6.20251212-1",
        current=OLD, target=NEW, current_release="416.94.202405291527-0", target_release="9.6.20251212-1",
        changes=(FieldChange((*PSP, "ami"), OLD, NEW),), manager=Manager.GITOPS,
        manager_why="applied from Git (Argo CD, annotation argocd.argoproj.io/tracking-id=apps:x)",
    )
    base.update(kw)
    return BootImageDecision(**base)


def machineset(ami: dict[str, str]) -> dict[str, Any]:
    return {"spec": {"template": {"spec": {"providerSpec": {"value": {"ami": ami, "keep": {"me": 1}}}}}}}


def test_the_proposal_carries_a_json_patch_that_makes_exactly_the_change() -> None:
    message = proposal_message(decision())
    patch = json.loads(message.split("JSON patch: ", 1)[1])
    assert [op["op"] for op in patch] == ["test", "replace"]
    # RFC 6902 applied by hand: the test holds on the planned-from object, the replace lands.
    assert patch[0]["path"] == "/spec/template/spec/providerSpec/value/ami" and patch[0]["value"] == OLD
    assert apply_changes(machineset(OLD), decision().changes) == machineset(NEW)
    assert patch[1]["value"] == NEW


def test_a_proposal_too_long_for_an_event_points_at_plan_instead_of_cutting_the_patch() -> None:
    huge = {"id": "ami-" + "0" * 2000}
    message = proposal_message(decision(target=huge, changes=(FieldChange((*PSP, "ami"), OLD, huge),)))
    assert len(message) <= MAX_EVENT_MESSAGE and "--write-patched" in message and "[" not in message


def test_a_disagreement_is_lasting_only_after_the_grace_and_only_once_the_mco_says_done() -> None:
    clock = DisagreementClock(grace=60)
    mco = decision(manager=Manager.MCO)
    working, done = McoPass(False, "Reconciled 1 of 3"), McoPass(True, "Reconciled 3 of 3")
    assert clock.observe("k", mco, working, now=0) is None  # the MCO's pass is not over
    first = clock.observe("k", mco, done, now=10)
    assert first is not None and not first.lasting and first.wait == 60
    later = clock.observe("k", mco, done, now=69)
    assert later is not None and not later.lasting and later.wait == 1
    lasting = clock.observe("k", mco, done, now=70)
    assert lasting is not None and lasting.lasting
    assert "ami-old" in lasting.message and "ami-new" in lasting.message and "Reconciled 3 of 3" in lasting.message
    # Another pair of images (new golden data) starts the clock again; agreement clears it.
    moved = clock.observe("k", decision(manager=Manager.MCO, target={"id": "ami-newer"}), done, now=80)
    assert moved is not None and not moved.lasting
    assert clock.observe("k", decision(manager=Manager.MCO, action=Action.NOOP, target=OLD), done, now=90) is None
    assert list(clock.keys()) == []


def test_the_mcos_pass_is_read_from_its_conditions() -> None:
    mc = machine_configuration(status={"conditions": [
        {"type": "BootImageUpdateProgressing", "status": "False", "message": "Reconciled 2 of 2 MAPI MachineSets"},
        {"type": "BootImageUpdateDegraded", "status": "False", "message": "0 Degraded MAPI MachineSets"}]})
    assert McoPass.from_machine_configuration(mc) == McoPass(
        True, "Reconciled 2 of 2 MAPI MachineSets; 0 Degraded MAPI MachineSets")
    assert not McoPass.from_machine_configuration(machine_configuration()).done


MCO_422 = MachineConfigOperator.from_objects(mco_cluster_operator("4.22.0"), None, None)
AFTER = [BootImageRelease.rhcos("9.6.20251212-1", ReleaseSource.GOLDEN_DATA),
         BootImageRelease.rhcos("9.4.20250101-0", ReleaseSource.CLOUD)]


def test_claiming_from_the_mco_on_an_old_install_warns_with_the_matching_manual_setting() -> None:
    taken = decision(manager=Manager.OURS, taken_from_mco=True)
    hold = claim_hold_warning(taken, MCO_422, machine_configuration(), OcpVersion(4, 12, 0), AFTER, SkewLimits())
    assert hold is not None and hold.manual is not None
    assert hold.manual.to_dict() == {"mode": "RHCOSVersion", "rhcosVersion": "9.4.20250101-0"}  # the real oldest
    assert "4.12.0" in hold.message and "workers" in hold.message
    assert '{"mode":"Manual","manual":{"mode":"RHCOSVersion","rhcosVersion":"9.4.20250101-0"}}' in hold.message


def test_no_warning_where_the_mco_would_not_hold() -> None:
    taken = decision(manager=Manager.OURS, taken_from_mco=True)
    limits = SkewLimits()
    assert claim_hold_warning(taken, MCO_422, machine_configuration(), OcpVersion(4, 14, 0), AFTER, limits) is None
    manual = machine_configuration(skew={"mode": "Manual", "manual": {"mode": "OCPVersion", "ocpVersion": "4.16.0"}})
    assert mco_skew_mode(manual) == "Manual"
    assert claim_hold_warning(taken, MCO_422, manual, OcpVersion(4, 12, 0), AFTER, limits) is None
    old_mco = MachineConfigOperator.from_objects(mco_cluster_operator("4.21.0"), None, None)  # no skew code
    assert claim_hold_warning(taken, old_mco, machine_configuration(), OcpVersion(4, 12, 0), AFTER, limits) is None
    ours = decision(manager=Manager.OURS, taken_from_mco=False)
    assert claim_hold_warning(ours, MCO_422, machine_configuration(), OcpVersion(4, 12, 0), AFTER, limits) is None
    # An unknown install version is 0.0.0 to the MCO: it holds.
    assert claim_hold_warning(taken, MCO_422, machine_configuration(), None, AFTER, limits) is not None


def test_a_writer_conflict_is_an_event_once_per_target_and_the_proposal_names_the_mco() -> None:
    from bootimage_controller.core.conflicts import writer_conflict
    from bootimage_controller.reconcile.event_rules import conflict_event
    from bootimage_controller.reconcile.state import MachineSetState

    tracked = decision(also_written_by=(Manager.MCO,))
    obj = {"metadata": {"name": "workers", "annotations": {"argocd.argoproj.io/tracking-id": "apps:x"}}}
    state = MachineSetState(tracked, conflict=writer_conflict(tracked, obj, None))
    first = conflict_event(None, state)
    assert first is not None and first[:2] == ("Warning", "BootImageWriterConflict")
    assert "the Machine Config Operator and GitOps both write" in first[2]
    assert conflict_event(state, state) is None, "the same target again says nothing new"
    # After the MCO's patch the decision is a no-op with the same target: still nothing new.
    after = decision(also_written_by=(Manager.MCO,), action=Action.NOOP, reason="UpToDate", current=NEW)
    assert conflict_event(state, MachineSetState(after, conflict=writer_conflict(after, obj, None))) is None
    moved = decision(also_written_by=(Manager.MCO,), target={"id": "ami-newer"},
                     changes=(FieldChange((*PSP, "ami"), OLD, {"id": "ami-newer"}),))
    assert conflict_event(state, MachineSetState(moved, conflict=writer_conflict(moved, obj, None))) is not None
    assert "the Machine Config Operator writes this MachineSet too" in proposal_message(tracked)
    assert "Machine Config Operator" not in proposal_message(decision())


def test_boot_images_after_counts_each_machineset_by_its_best_evidence() -> None:
    """One rule for the daemon (before a claim) and `hand-over` (before handing over): the target
    where it is written, else our record, the planner's current image, aleph, the install version."""
    from bootimage_controller.constants import ANNOTATION_RELEASE
    from bootimage_controller.core.companion import MachineSetAfter, boot_images_after

    written = decision(name="a", target_release="9.6.20251212-1")
    recorded = decision(name="b", current_release=None)
    golden = decision(name="c", current_release="418.94.202501221327-0", current_release_source="GoldenData")
    unknown = decision(name="d", current_release=None, current_release_source=None)
    found = boot_images_after([
        MachineSetAfter(written, {}, ReleaseSource.GOLDEN_DATA),
        MachineSetAfter(recorded, {ANNOTATION_RELEASE: "9.6.20250402-0"}),
        MachineSetAfter(golden, {}),
        MachineSetAfter(unknown, {}),
    ], aleph_min="415.92.202402130021-0", install=OcpVersion(4, 15, 0))
    assert [(r.value, r.source) for r in found] == [
        ("9.6.20251212-1", ReleaseSource.GOLDEN_DATA),
        ("9.6.20250402-0", ReleaseSource.MACHINESET_RECORD),
        ("418.94.202501221327-0", ReleaseSource.GOLDEN_DATA),
        ("415.92.202402130021-0", ReleaseSource.ALEPH),  # never updated: the install image, from aleph
    ]
    assert boot_images_after([MachineSetAfter(unknown, {})], None, OcpVersion(4, 15, 0))[0].source is ReleaseSource.INSTALL_VERSION
