"""Who updates each boot image (SPEC section 2 rule 2b): the MCO, Hive, GitOps or this controller.

The expectations are the reference's (mco-boot-image-controller.md sections 1, 5, 13 and 15) and the
issue's summary, written out here by hand: AWS and GCP MachineSets are the MCO's by default from 4.19,
Azure and vSphere from 4.22; before that only behind their feature gates and an explicit
`managedBootImages` entry; the ControlPlaneMachineSet behind ManagedBootImagesCPMS.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest
from harness.mco import FIXTURE_BY_PLATFORM, MCO_DEFAULT_FROM
from harness.objects import feature_gate, infrastructure, machine_configuration, machineset_from_fixture
from harness.objects import mco_cluster_operator as mco_co

from bootimage_controller.constants import (
    ANNOTATION_ARGOCD_TRACKING_ID,
    ANNOTATION_BOOT_IMAGE_MANAGER,
    CLAIM_HOLDER_NAME,
    LABEL_HIVE_MACHINE_POOL,
    LABEL_OSSTREAM,
    Manager,
)
from bootimage_controller.core.cluster import ClusterObjects
from bootimage_controller.core.context import planning_context
from bootimage_controller.core.golden import GoldenBootImages
from bootimage_controller.core.manager import MachineConfigOperator
from bootimage_controller.core.model import BootImageDecision
from bootimage_controller.core.planner import plan_machine
from bootimage_controller.data import bundled_index

from .support import golden

FIXTURE = FIXTURE_BY_PLATFORM
RELEASES = range(16, 23)
OUR_CLAIM = {"apiVersion": "v1", "kind": "ConfigMap", "name": CLAIM_HOLDER_NAME, "uid": "u-1", "controller": True,
             "blockOwnerDeletion": False}


def decide(ms: dict[str, Any], platform: str, version: str | None, *, gates: list[str] | None = None,
           managed: list[dict[str, Any]] | None = None, gitops_labels: tuple[str, ...] = ()) -> BootImageDecision:
    objects = ClusterObjects(
        machine_configuration=machine_configuration(managed),
        infrastructure=infrastructure(platform),
        mco_operator=mco_co(version) if version is not None else None,
        feature_gate=feature_gate(version, gates) if version is not None and gates is not None else None,
    )
    ctx = planning_context(objects, golden=golden("cm-4.22"), gitops_labels=gitops_labels,
                           published=bundled_index())
    return plan_machine(copy.deepcopy(ms), ctx.golden, ctx.facts, ctx.enrollment)


@pytest.mark.parametrize("platform", sorted(FIXTURE))
@pytest.mark.parametrize("minor", RELEASES)
def test_a_plain_machineset_is_the_mcos_from_the_release_that_turned_its_platform_on(platform: str, minor: int) -> None:
    ms = machineset_from_fixture(FIXTURE[platform])
    got = decide(ms, platform, f"4.{minor}.3")
    assert got.manager == (Manager.MCO if minor >= MCO_DEFAULT_FROM[platform] else Manager.OURS), got.manager_why


@pytest.mark.parametrize("platform", sorted(FIXTURE))
def test_without_a_machine_config_operator_nothing_is_the_mcos(platform: str) -> None:
    assert decide(machineset_from_fixture(FIXTURE[platform]), platform, None).manager == Manager.OURS


def test_the_decision_is_the_same_whoever_manages() -> None:
    """Rules 3-7 decide the same for every manager: `plan` shows what each MachineSet needs."""
    ms = machineset_from_fixture(FIXTURE["AWS"])
    ours, theirs = decide(ms, "AWS", None), decide(ms, "AWS", "4.22.0")
    assert (theirs.manager, ours.manager) == (Manager.MCO, Manager.OURS)
    assert (theirs.action, theirs.reason, theirs.target) == (ours.action, ours.reason, ours.target)
    assert theirs.to_json()["manager"] == "mco" and ours.to_json()["manager"] == "bootimage-controller"


@pytest.mark.parametrize(("minor", "gate", "platform"), [(20, "ManagedBootImagesvSphere", "VSphere"),
                                                          (21, "ManagedBootImagesAzure", "Azure")])
def test_a_tech_preview_platform_is_the_mcos_only_with_its_gate_and_an_explicit_entry(
    minor: int, gate: str, platform: str
) -> None:
    ms = machineset_from_fixture(FIXTURE[platform])
    explicit = [{"resource": "machinesets", "apiGroup": "machine.openshift.io", "selection": {"mode": "All"}}]
    version = f"4.{minor}.0"
    assert decide(ms, platform, version, gates=[gate]).manager == Manager.OURS  # no entry: not on by default
    assert decide(ms, platform, version, gates=[], managed=explicit).manager == Manager.OURS  # gate off
    assert decide(ms, platform, version, gates=[gate], managed=explicit).manager == Manager.MCO


def test_before_4_19_the_mco_needs_the_admins_entry_and_a_partial_selection_is_honoured() -> None:
    ms = machineset_from_fixture(FIXTURE["AWS"], labels={"pool": "a"})
    partial = [{"resource": "machinesets", "apiGroup": "machine.openshift.io",
                "selection": {"mode": "Partial", "partial": {"machineResourceSelector": {"matchLabels": {"pool": "a"}}}}}]
    assert decide(ms, "AWS", "4.18.0", gates=["ManagedBootImagesAWS"]).manager == Manager.OURS
    assert decide(ms, "AWS", "4.18.0", gates=["ManagedBootImagesAWS"], managed=partial).manager == Manager.MCO
    other = machineset_from_fixture(FIXTURE["AWS"], labels={"pool": "b"})
    # Outside the Partial selection: enrolled for neither the MCO nor this controller.
    assert decide(other, "AWS", "4.18.0", gates=["ManagedBootImagesAWS"], managed=partial).manager == Manager.NOBODY


def test_the_mco_skips_other_streams_from_4_22_windows_and_owned_machinesets() -> None:
    rhel10 = machineset_from_fixture(FIXTURE["AWS"], labels={LABEL_OSSTREAM: "rhel-10"})
    assert decide(rhel10, "AWS", "4.22.0").manager == Manager.OURS
    # Before 4.22 the MCO knows no stream label: it would update the MachineSet with the default stream.
    assert decide(rhel10, "AWS", "4.21.0").manager == Manager.MCO
    rhel9 = machineset_from_fixture(FIXTURE["AWS"], labels={LABEL_OSSTREAM: "rhel-9"})
    assert decide(rhel9, "AWS", "4.22.0").manager == Manager.MCO
    windows = machineset_from_fixture(FIXTURE["AWS"], merge={"spec": {"template": {"metadata": {"labels": {
        "machine.openshift.io/os-id": "Windows"}}}}})
    assert decide(windows, "AWS", "4.22.0").manager == Manager.OURS
    owned = machineset_from_fixture(FIXTURE["AWS"], owner_references=[
        {"apiVersion": "example.com/v1", "kind": "Pool", "name": "p", "uid": "x"}])
    got = decide(owned, "AWS", "4.22.0")
    assert (got.manager, got.reason) == (Manager.OURS, "OwnedByOther")


def test_precedence_claim_and_annotation_then_hive_then_gitops_then_mco() -> None:
    claimed = machineset_from_fixture(FIXTURE["AWS"], owner_references=[OUR_CLAIM],
                                      labels={LABEL_HIVE_MACHINE_POOL: "worker"})
    got = decide(claimed, "AWS", "4.22.0")
    assert (got.manager, got.taken_from_mco) == (Manager.OURS, True)
    handed = machineset_from_fixture(FIXTURE["AWS"], annotations={ANNOTATION_BOOT_IMAGE_MANAGER: "bootimage-controller",
                                                                    ANNOTATION_ARGOCD_TRACKING_ID: "app:x/MachineSet:y"})
    got = decide(handed, "AWS", "4.22.0")
    assert (got.manager, got.taken_from_mco) == (Manager.OURS, True)
    assert decide(handed, "AWS", None).taken_from_mco is False
    hive = machineset_from_fixture(FIXTURE["AWS"], labels={LABEL_HIVE_MACHINE_POOL: "worker"},
                                   annotations={ANNOTATION_ARGOCD_TRACKING_ID: "app:x/MachineSet:y"})
    assert decide(hive, "AWS", "4.22.0").manager == Manager.HIVE
    argo = machineset_from_fixture(FIXTURE["AWS"], annotations={ANNOTATION_ARGOCD_TRACKING_ID: "app:x/MachineSet:y"})
    assert decide(argo, "AWS", "4.22.0").manager == Manager.GITOPS
    flux = machineset_from_fixture(FIXTURE["AWS"], labels={"kustomize.toolkit.fluxcd.io/name": "workers"})
    assert decide(flux, "AWS", None).manager == Manager.GITOPS
    ignored = machineset_from_fixture(FIXTURE["AWS"], annotations={ANNOTATION_BOOT_IMAGE_MANAGER: "someone-else"})
    got = decide(ignored, "AWS", "4.22.0")
    assert got.manager == Manager.MCO and "ignored" in got.manager_why


def test_argo_cd_label_tracking_counts_only_when_named() -> None:
    ms = machineset_from_fixture(FIXTURE["AWS"], labels={"app.kubernetes.io/instance": "workers"})
    assert decide(ms, "AWS", None).manager == Manager.OURS  # Helm sets that label too
    assert decide(ms, "AWS", None, gitops_labels=("app.kubernetes.io/instance",)).manager == Manager.GITOPS


def test_the_control_plane_machine_set_is_the_mcos_behind_its_gate() -> None:
    from harness.objects import control_plane_machine_set

    spec = machineset_from_fixture(FIXTURE["AWS"])["spec"]["template"]["spec"]["providerSpec"]["value"]
    cpms = control_plane_machine_set(spec)
    enrolled = [{"resource": "controlplanemachinesets", "apiGroup": "machine.openshift.io", "selection": {"mode": "All"}}]
    assert decide(cpms, "AWS", "4.22.0", managed=enrolled).manager == Manager.MCO  # default-on in 4.22
    assert decide(cpms, "AWS", "4.22.0", gates=[], managed=enrolled).manager == Manager.OURS
    assert decide(cpms, "AWS", "4.21.0", managed=enrolled).manager == Manager.OURS  # Tech Preview in 4.21
    assert decide(cpms, "AWS", "4.21.0", gates=["ManagedBootImagesCPMS", "ManagedBootImages", "ManagedBootImagesAWS"],
                  managed=enrolled).manager == Manager.MCO


def test_what_the_cluster_says_about_the_mco() -> None:
    assert MachineConfigOperator.from_objects(None, None, None) is None
    unknown = MachineConfigOperator.from_objects({"kind": "ClusterOperator", "status": {}}, None, None)
    assert unknown is not None and unknown.version is None
    assert unknown.covered_platforms() == {"AWS", "GCP", "Azure", "VSphere"}  # unsure: the widest coverage
    stack = MachineConfigOperator.from_objects(
        mco_co("4.22.1"), None, {"status": {"platformStatus": {"azure": {"cloudName": "AzureStackCloud"}}}})
    assert stack is not None and "Azure" not in stack.covered_platforms()
    old = MachineConfigOperator.from_objects(mco_co("4.15.9"), None, None)
    assert old is not None and old.covered_platforms() == frozenset()
    # The FeatureGate entry of the MCO's own version counts, not another version's.
    fg = feature_gate("4.22.0", ["BootImageSkewEnforcement"])
    fg["status"]["featureGates"].insert(0, {"version": "4.21.5", "enabled": []})
    now = MachineConfigOperator.from_objects(mco_co("4.22.0"), fg, None)
    assert now is not None and now.runs_skew_enforcement
    lagging = MachineConfigOperator.from_objects(mco_co("4.21.5"), fg, None)
    assert lagging is not None and not lagging.runs_skew_enforcement


def test_plan_explains_who_else_manages() -> None:
    objects = ClusterObjects(infrastructure=infrastructure("AWS"), mco_operator=mco_co("4.22.0"))
    ctx = planning_context(objects, golden=GoldenBootImages.from_configmap(_cm()), published=bundled_index())
    line = next(e for e in ctx.explanation if e.startswith("other boot image managers"))
    assert "Machine Config Operator 4.22.0" in line and "AWS" in line


def _cm() -> dict[str, Any]:
    from harness.objects import bootimages_configmap

    return bootimages_configmap("coreos-bootimages-4.22-multistream.yaml")


# ---- `external`: another writer keeps the boot image field (metadata.managedFields) -------------

AMI_FIELDS = {"f:spec": {"f:template": {"f:spec": {"f:providerSpec": {"f:value": {"f:ami": {"f:id": {}}}}}}}}
OTHER_FIELDS = {"f:spec": {"f:template": {"f:spec": {"f:providerSpec": {"f:value": {"f:instanceType": {}}}}}}}


def _kept_by(manager: str, operation: str, fields: dict[str, Any] = AMI_FIELDS) -> dict[str, Any]:
    ms = machineset_from_fixture(FIXTURE["AWS"])
    ms["metadata"]["managedFields"] = [
        {"manager": "cluster-bootstrap", "operation": "Update", "apiVersion": "machine.openshift.io/v1beta1",
         "fieldsType": "FieldsV1", "fieldsV1": {"f:metadata": {}, **AMI_FIELDS}},
        {"manager": manager, "operation": operation, "apiVersion": "machine.openshift.io/v1beta1",
         "fieldsType": "FieldsV1", "fieldsV1": fields},
    ]
    return ms


def test_an_acm_policy_that_keeps_the_ami_makes_the_machineset_external_and_the_mco_writes_it_too() -> None:
    got = decide(_kept_by("config-policy-controller", "Update"), "AWS", "4.22.0")
    assert got.manager == Manager.EXTERNAL, got.manager_why
    assert "config-policy-controller" in got.manager_why and "providerSpec.value.ami" in got.manager_why
    assert got.also_written_by == (Manager.MCO,), "the MCO reads no managedFields: a writer conflict"
    assert decide(_kept_by("config-policy-controller", "Update"), "AWS", None).also_written_by == ()


def test_any_server_side_apply_of_the_field_by_an_unknown_writer_is_external() -> None:
    assert decide(_kept_by("release-pipeline", "Apply"), "AWS", "4.22.0").manager == Manager.EXTERNAL


@pytest.mark.parametrize("manager, operation", [
    ("cluster-bootstrap", "Update"),  # the installer created it: it does not come back
    ("some-script", "Update"),
    ("kubectl-edit", "Update"), ("kubectl-client-side-apply", "Update"), ("kubectl", "Apply"),  # a person
    ("mco-bootimage-controller-7ff337a", "Update"), ("machine-config-controller", "Update"),  # the MCO
    ("bootimage-controller", "Update"), ("argocd-controller", "Apply"), ("kustomize-controller", "Apply"),
])
def test_known_writers_people_and_one_off_updates_are_not_external(manager: str, operation: str) -> None:
    got = decide(_kept_by(manager, operation), "AWS", "4.22.0")
    assert got.manager == Manager.MCO, got.manager_why


def test_a_policy_that_keeps_another_field_is_not_external() -> None:
    got = decide(_kept_by("config-policy-controller", "Update", OTHER_FIELDS), "AWS", "4.22.0")
    assert got.manager == Manager.MCO, got.manager_why


def test_gitops_wins_over_external_and_a_claim_over_both() -> None:
    ms = _kept_by("config-policy-controller", "Update")
    ms["metadata"].setdefault("annotations", {})[ANNOTATION_ARGOCD_TRACKING_ID] = "apps:x"
    assert decide(ms, "AWS", "4.22.0").manager == Manager.GITOPS
    ms = _kept_by("config-policy-controller", "Update")
    ms["metadata"]["ownerReferences"] = [OUR_CLAIM]
    assert decide(ms, "AWS", "4.22.0").manager == Manager.OURS
