"""Who writes each boot image next, and when (core.forecast), and the writer conflicts it names
(core.conflicts): the one model `plan`, Events and `fleet` read (issue 32)."""

from __future__ import annotations

import json
from typing import Any

from harness.mco import FIXTURE_BY_PLATFORM
from harness.objects import cluster_version, machineset_from_fixture

from bootimage_controller.constants import (
    ANNOTATION_ARGOCD_TRACKING_ID,
    ANNOTATION_BOOT_IMAGE_UPDATES,
    ANNOTATION_LAST_APPLIED,
    BOOT_IMAGE_UPDATES_DISABLED,
    FLUX_LABELS,
    LABEL_BOOT_IMAGE_WRITER,
    LABEL_HIVE_MACHINE_POOL,
    LABEL_OSSTREAM,
    MAX_EVENT_MESSAGE,
    Action,
    Manager,
    Reason,
)
from bootimage_controller.core.conflicts import exclude_from_mco, writer_conflict
from bootimage_controller.core.enrollment import Enrollment
from bootimage_controller.core.forecast import OPEN_GATE, Forecast, UpgradeGate, When, Writer
from bootimage_controller.data import bundled_index

from .test_manager import decide

AWS = FIXTURE_BY_PLATFORM["AWS"]


def _argo(ms: dict[str, Any]) -> dict[str, Any]:
    ms["metadata"].setdefault("annotations", {})[ANNOTATION_ARGOCD_TRACKING_ID] = "infra:machine.openshift.io/MachineSet:x"
    return ms


def test_the_mco_writes_a_plain_machineset_and_this_controller_a_rhel10_one() -> None:
    plain = decide(machineset_from_fixture(AWS), "AWS", "4.22.0")
    rhel10 = machineset_from_fixture(AWS)
    rhel10["metadata"].setdefault("labels", {})[LABEL_OSSTREAM] = "rhel-10"
    rhel10["metadata"]["name"] += "-rhel10"
    ours = decide(rhel10, "AWS", "4.22.0")
    forecast = Forecast.build([plain, ours], OPEN_GATE)
    assert (forecast.of(plain).writer, forecast.of(plain).when, forecast.of(plain).label) == (Writer.MCO, When.NOW, "mco-patch")
    assert (forecast.of(ours).writer, forecast.of(ours).label) == (Writer.OURS, "patch")
    assert forecast.summary() == "this controller patches 1 now, the MCO 1"
    assert [w.writer for w in forecast.changing()] == [Writer.OURS, Writer.MCO]


def test_a_closed_gate_delays_every_write_and_says_why() -> None:
    cv = cluster_version((("4.22.0", "Partial"), ("4.16.0", "Completed")))
    gate = UpgradeGate.from_cluster_version(cv)
    assert not gate.open and gate.to_json()["reason"] == "ClusterNotStable" and "Partial" in gate.message
    assert not UpgradeGate.from_cluster_version(None).open
    assert UpgradeGate.from_cluster_version(cluster_version()).open
    plain = decide(machineset_from_fixture(AWS), "AWS", "4.22.0")
    forecast = Forecast.build([plain], gate)
    assert (forecast.of(plain).when, forecast.of(plain).label) == (When.AFTER_UPGRADE, "mco-after-upgrade")
    assert forecast.summary() == "nothing is patched until the upgrade completes (then this controller 0 and the MCO 1)"


def test_without_a_clusterversion_the_plan_says_the_object_is_missing_not_that_an_upgrade_runs() -> None:
    """Issue 47, item 3: no ClusterVersion is no upgrade, only a missing object."""
    gate = UpgradeGate.from_cluster_version(None)
    forecast = Forecast.build([decide(machineset_from_fixture(AWS), "AWS", "4.22.0")], gate)
    assert forecast.summary() == "nothing is patched until a ClusterVersion is found (then this controller 0 and the MCO 1)"
    assert "ClusterVersion version not found" in gate.message


def test_an_argo_cd_machineset_the_mco_covers_is_written_by_the_mco_a_conflict() -> None:
    ms = _argo(machineset_from_fixture(AWS))
    d = decide(ms, "AWS", "4.22.0")
    assert d.manager is Manager.GITOPS and d.also_written_by == (Manager.MCO,)
    assert d.to_json()["alsoWrittenBy"] == ["mco"]
    forecast = Forecast.build([d], OPEN_GATE, lambda *_: ms, None)
    write = forecast.of(d)
    assert (write.writer, write.label) == (Writer.MCO, "conflict")
    assert forecast.summary() == "this controller patches 0 now, the MCO 1; 1 writer conflict"


def test_without_the_mco_a_gitops_machineset_waits_for_git_and_no_conflict() -> None:
    ms = _argo(machineset_from_fixture(AWS))
    d = decide(ms, "AWS", None)
    assert d.manager is Manager.GITOPS and d.also_written_by == ()
    forecast = Forecast.build([d], OPEN_GATE, lambda *_: ms)
    assert (forecast.of(d).writer, forecast.of(d).when, forecast.of(d).label) == (Writer.GITOPS, When.ON_CHANGE, "propose")
    assert forecast.conflicts == ()
    assert forecast.summary() == "this controller patches 0 now; GitOps must carry 1 (plan --write-patched DIR)"


def test_a_hive_machineset_the_mco_covers_is_a_conflict_excluded_by_its_pool_label() -> None:
    ms = machineset_from_fixture(AWS)
    ms["metadata"].setdefault("labels", {})[LABEL_HIVE_MACHINE_POOL] = "worker"
    d = decide(ms, "AWS", "4.22.0")
    conflict = writer_conflict(d, ms, None)
    assert conflict is not None and conflict.writers == (Manager.MCO, Manager.HIVE)
    assert conflict.exclusion.key == LABEL_HIVE_MACHINE_POOL and conflict.exclusion.add_first is None
    assert conflict.ignore_rule.startswith("make the two agree: set spec.platform.aws.amiID: ")


def test_the_fix_keeps_every_other_manager_and_adds_one_requirement_to_a_partial_selector() -> None:
    ms = _argo(machineset_from_fixture(AWS))
    ms["metadata"].setdefault("labels", {})["team"] = "a"
    managed = [
        {"resource": "controlplanemachinesets", "apiGroup": "machine.openshift.io", "selection": {"mode": "All"}},
        {"resource": "machinesets", "apiGroup": "machine.openshift.io",
         "selection": {"mode": "Partial", "partial": {"machineResourceSelector": {"matchLabels": {"team": "a"}}}}},
    ]
    mc = {"spec": {"managedBootImages": {"machineManagers": managed}}}
    d = decide(ms, "AWS", "4.22.0", managed=managed)
    conflict = writer_conflict(d, ms, mc)
    assert conflict is not None
    patch = conflict.machine_configuration_patch
    entries = patch["spec"]["managedBootImages"]["machineManagers"]
    assert entries[0] == managed[0]
    selector = entries[1]["selection"]["partial"]["machineResourceSelector"]
    assert selector == {"matchLabels": {"team": "a"},
                        "matchExpressions": [{"key": LABEL_BOOT_IMAGE_WRITER, "operator": "DoesNotExist"}]}
    assert conflict.exclusion.add_first == f"label it {LABEL_BOOT_IMAGE_WRITER}=gitops in Git"
    # The patched spec, as our enrollment reads it: the MachineSet once labelled is out, the rest stay in.
    patched = Enrollment.from_machine_configuration(patch, "AWS")
    labelled = {"team": "a", LABEL_BOOT_IMAGE_WRITER: "gitops"}
    assert patched.mco_selects("MachineSet", {"team": "a"}, True)
    assert not patched.mco_selects("MachineSet", labelled, True)
    # Applying the fix twice adds nothing.
    again = exclude_from_mco(patch, conflict.exclusion)
    assert again == patch


def test_the_fix_for_an_all_cluster_and_a_flux_machineset_uses_the_flux_label() -> None:
    ms = machineset_from_fixture(AWS)
    ms["metadata"].setdefault("labels", {})[FLUX_LABELS[0]] = "infra"
    d = decide(ms, "AWS", "4.22.0")
    conflict = writer_conflict(d, ms, None)
    assert conflict is not None
    selector = conflict.machine_configuration_patch["spec"]["managedBootImages"]["machineManagers"][0]
    assert selector["selection"] == {"mode": "Partial", "partial": {"machineResourceSelector": {
        "matchExpressions": [{"key": FLUX_LABELS[0], "operator": "DoesNotExist"}]}}}
    assert "kustomize.toolkit.fluxcd.io/ssa=IfNotPresent" in conflict.ignore_rule


def test_the_conflict_names_the_image_git_holds_and_fits_an_event() -> None:
    ms = _argo(machineset_from_fixture(AWS))
    applied = json.loads(json.dumps(ms))
    applied["spec"]["template"]["spec"]["providerSpec"]["value"]["ami"] = {"id": "ami-0fromgit"}
    ms["metadata"]["annotations"][ANNOTATION_LAST_APPLIED] = json.dumps(applied)
    d = decide(ms, "AWS", "4.22.0")
    conflict = writer_conflict(d, ms, None)
    assert conflict is not None and conflict.git_image == {"id": "ami-0fromgit"}
    message = conflict.message()
    assert len(message) <= MAX_EVENT_MESSAGE
    assert "the Machine Config Operator and GitOps both write" in message
    assert "Git holds ami-0fromgit" in message
    assert "oc patch machineconfiguration cluster --type=merge" in message
    # Without the Git image the message has room for the Argo CD way out too (plan prints both always).
    del ms["metadata"]["annotations"][ANNOTATION_LAST_APPLIED]
    message = writer_conflict(d, ms, None).message()  # type: ignore[union-attr]
    assert len(message) <= MAX_EVENT_MESSAGE
    assert "ignoreDifferences" in message and "/spec/template/spec/providerSpec/value/ami" in message


def test_no_conflict_for_the_mcos_own_or_a_skipped_machineset() -> None:
    ms = machineset_from_fixture(AWS)
    assert writer_conflict(decide(ms, "AWS", "4.22.0"), ms, None) is None
    custom = _argo(machineset_from_fixture(AWS))
    custom["spec"]["template"]["spec"]["providerSpec"]["value"]["ami"] = {"id": "ami-0a1b2c3d4e5f67890"}
    d = decide(custom, "AWS", "4.22.0")
    assert d.action == "skip" and writer_conflict(d, custom, None) is None


def test_with_automatic_skew_the_fix_moves_to_manual_first_and_the_event_keeps_the_exact_patch() -> None:
    """OpenShift refuses a Partial MachineSet selection while the MCO enforces Automatic (found on the
    API server with openshift/api's CRD): the fix says so, and the Event still carries the patch."""
    ms = _argo(machineset_from_fixture(AWS, "prod-east-8h2kq-worker-argo-us-east-1b"))
    applied = json.loads(json.dumps(ms))
    applied["spec"]["template"]["spec"]["providerSpec"]["value"]["ami"] = {"id": "ami-0fromgit000000000"}
    ms["metadata"]["annotations"][ANNOTATION_LAST_APPLIED] = json.dumps(applied)
    mc = {"status": {"bootImageSkewEnforcementStatus": {"mode": "Automatic", "automatic": {"ocpVersion": "4.12.0"}}}}
    conflict = writer_conflict(decide(ms, "AWS", "4.22.0"), ms, mc)
    assert conflict is not None and conflict.automatic_skew
    assert "move skew enforcement to Manual first" in conflict.fixes()[0]
    assert '"bootImageSkewEnforcement":{"mode":"Manual"' in conflict.fixes()[0], "plan prints the example"
    message = conflict.message()
    assert len(message) <= MAX_EVENT_MESSAGE
    assert "move skew enforcement to Manual first" in message
    assert json.dumps(conflict.machine_configuration_patch, separators=(",", ":"), sort_keys=True) in message


def test_a_policy_kept_machineset_waits_for_the_policy_or_is_a_conflict_where_the_mco_covers_it() -> None:
    from .test_manager import _kept_by

    ms = _kept_by("config-policy-controller", "Update")
    alone = decide(ms, "AWS", None)
    forecast = Forecast.build([alone], OPEN_GATE, lambda *_: ms)
    assert (forecast.of(alone).writer, forecast.of(alone).label) == (Writer.EXTERNAL, "propose")
    assert forecast.summary() == "this controller patches 0 now; a policy or other writer holds 1"
    # The row names the writer (issue 49: it named none), in JSON too.
    row = alone.to_json()
    assert row["fieldManager"] == "config-policy-controller" and "config-policy-controller" in row["managerWhy"]
    # And `fleet` names it the same way (its JSON, and the page's Manager cell).
    from datetime import UTC, datetime

    from bootimage_controller.core.fleet import pool_row

    pool = pool_row(alone, bundled_index(), datetime.now(UTC), forecast)
    assert pool.writer_name == "config-policy-controller"
    assert pool.to_json()["fieldManager"] == "config-policy-controller" and pool.to_json()["managerWhy"] == alone.manager_why
    covered = decide(ms, "AWS", "4.22.0")
    conflict = writer_conflict(covered, ms, None)
    assert conflict is not None and conflict.writers == (Manager.MCO, Manager.EXTERNAL)
    assert conflict.exclusion.add_first is not None and "boot-image-writer=external" in conflict.exclusion.add_first
    assert "take the boot image field out of what that writer enforces" in conflict.ignore_rule


def test_a_hive_pool_names_the_machinepool_field_to_set_on_the_hub() -> None:
    from bootimage_controller.core.companion import hive_change, hive_proposal_message

    ms = machineset_from_fixture(AWS)
    ms["metadata"].setdefault("labels", {})[LABEL_HIVE_MACHINE_POOL] = "worker"
    alone = decide(ms, "AWS", None)
    assert alone.manager is Manager.HIVE and alone.action == "patch"
    target = alone.target["id"]
    assert hive_change(alone).startswith(f"set spec.platform.aws.amiID: {target} on the hub")
    # The MachinePool, its field and the value to set, in JSON too (issue 49).
    assert alone.to_json()["hiveMachinePool"] == {"name": "worker", "field": "spec.platform.aws.amiID", "value": target}
    forecast = Forecast.build([alone], OPEN_GATE, lambda *_: ms)
    assert f"spec.platform.aws.amiID: {target}" in forecast.of(alone).sentence()
    message = hive_proposal_message(alone)
    assert "Hive MachinePool worker" in message and target in message
    # Beside the MCO: a conflict whose second way out is to make Hive's value the MCO's.
    conflict = writer_conflict(decide(ms, "AWS", "4.22.0"), ms, None)
    assert conflict is not None and f"make the two agree: set spec.platform.aws.amiID: {target}" in conflict.ignore_rule
    gcp = machineset_from_fixture(FIXTURE_BY_PLATFORM["GCP"])
    gcp["metadata"].setdefault("labels", {})[LABEL_HIVE_MACHINE_POOL] = "worker"
    assert "Hive has no MachinePool boot image field on GCP" in hive_change(decide(gcp, "GCP", None))


def _opted_out(ms: dict[str, Any]) -> dict[str, Any]:
    ms["metadata"].setdefault("annotations", {})[ANNOTATION_BOOT_IMAGE_UPDATES] = BOOT_IMAGE_UPDATES_DISABLED
    return ms


def test_an_opted_out_machineset_the_mco_covers_is_written_by_the_mco_and_said_with_the_fix() -> None:
    """Issue 49: the MCO reads no opt-out annotation (it wrote one 4.16 -> 4.22 within a minute beside
    this controller): the forecast is its write, a conflict with the admin's pin, with the way out."""
    ms = _opted_out(machineset_from_fixture(AWS))
    d = decide(ms, "AWS", "4.22.0")
    assert (d.action, d.reason, d.manager, d.opted_out) == (Action.PATCH, Reason.BOOT_IMAGE_OUTDATED, Manager.MCO, True)
    assert "opts it out of this controller only" in d.message and "reads no such annotation" in d.message
    forecast = Forecast.build([d], OPEN_GATE, lambda *_: ms, None)
    write = forecast.of(d)
    assert (write.writer, write.when, write.label) == (Writer.MCO, When.NOW, "conflict")
    assert write.to_json() == {"writer": "mco", "when": "now", "action": "conflict"}
    conflict = write.conflict
    assert conflict is not None and conflict.pinned and conflict.writers == (Manager.MCO,)
    assert "although annotation" in conflict.summary()
    fixes = conflict.fixes()
    assert f"{LABEL_BOOT_IMAGE_WRITER}=pinned" in fixes[0] and '"operator":"DoesNotExist"' in fixes[0]
    assert "nothing writes its boot image from then on" in fixes[0]
    assert forecast.summary() == "this controller patches 0 now, the MCO 1; 1 writer conflict"


def test_an_opted_out_machineset_nobody_else_covers_stays_skipped() -> None:
    # Without the MCO, or one it skips (a rhel-10 stream label), the annotation is the whole story.
    for ms, version in ((_opted_out(machineset_from_fixture(AWS)), None),
                        (_opted_out(machineset_from_fixture(AWS)), "4.22.0")):
        if version is not None:
            ms["metadata"].setdefault("labels", {})[LABEL_OSSTREAM] = "rhel-10"
        d = decide(ms, "AWS", version)
        assert (d.action, d.reason, d.opted_out) == (Action.SKIP, Reason.NOT_ENROLLED, False)
        write = Forecast.build([d], OPEN_GATE, lambda *_, obj=ms: obj).of(d)
        assert (write.writer, write.when) == (Writer.NOBODY, When.NEVER)


def _unknown_ami(ms: dict[str, Any]) -> dict[str, Any]:
    ms["spec"]["template"]["spec"]["providerSpec"]["value"]["ami"]["id"] = "ami-0a1b2c3d4e5f67890"
    return ms


def test_an_ami_nobody_knows_offline_is_unknown_because_ec2_decides_not_never() -> None:
    """Issue 49: offline `plan` said `nobody, never` for two Red Hat AMIs outside the bundled index;
    the MCO asked EC2 and wrote both. The cloud was not asked, so `when` is `unknown`, `because` says
    what decides it and how to ask; nothing is counted as a certain write."""
    mco_pool = decide(_unknown_ami(machineset_from_fixture(AWS)), "AWS", "4.22.0")
    ours = _unknown_ami(machineset_from_fixture(AWS))
    ours["metadata"].setdefault("labels", {})[LABEL_OSSTREAM] = "rhel-10"
    ours["metadata"]["name"] += "-rhel10"
    our_pool = decide(ours, "AWS", "4.22.0")
    forecast = Forecast.build([mco_pool, our_pool], OPEN_GATE)
    for d, writer in ((mco_pool, Writer.MCO), (our_pool, Writer.OURS)):
        assert (d.action, d.reason) == (Action.SKIP, Reason.UNKNOWN_BOOT_IMAGE)
        write = forecast.of(d)
        assert (write.writer, write.when, write.label) == (writer, When.UNKNOWN, "unknown")
        because = write.to_json()["because"]
        assert "531415883065" in because and "--cloud-verify" in because
    assert forecast.summary() == ("this controller patches 0 now; 2 depend on what only the cloud can tell "
                                  "(plan --cloud-verify)")
    # Without the MCO nor our management (GitOps alone), Git carries what it carries: no guess either way.
    argo = decide(_argo(_unknown_ami(machineset_from_fixture(AWS))), "AWS", None)
    assert Forecast.build([argo], OPEN_GATE).of(argo).when is When.NEVER


def test_a_patch_to_an_older_golden_build_is_a_downgrade_said_in_the_table_json_and_summary() -> None:
    """SPEC section 4 (issue 49): the MCO moved a newer image back to the older golden one; so would
    this controller (rule 7 decides by equality). It is written, and said: `downgrade: true`."""
    from .support import plan

    ms = machineset_from_fixture(AWS)
    newer = plan(ms).target  # the 4.22 (RHEL 9.8) AMI of the MachineSet's region
    ms["spec"]["template"]["spec"]["providerSpec"]["value"]["ami"] = newer
    d = plan(ms, "cm-4.18")  # golden data of 4.18: a RHEL 9.4 build, older
    assert (d.action, d.downgrade) == (Action.PATCH, True) and "back to an older build" in d.message
    assert d.to_json()["downgrade"] is True
    write = Forecast.build([d], OPEN_GATE).of(d)
    assert write.label == "downgrade" and "(back to an older build)" in write.sentence()
    assert "1 of them back to an older build" in Forecast.build([d], OPEN_GATE).summary()
    # The usual direction is no downgrade.
    up = plan(machineset_from_fixture(AWS))
    assert (up.action, up.downgrade, up.to_json()["downgrade"]) == (Action.PATCH, False, False)
