"""SPEC section 2 rules 1-5, 7 and 8 through `plan_machine`, on real fixtures."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from bootimage_controller.constants import (
    ANNOTATION_AUTOSCALER_LABELS,
    ANNOTATION_BOOT_IMAGE_UPDATES,
    LABEL_OS_ID,
    LABEL_OSSTREAM,
    Action,
    Reason,
)
from bootimage_controller.core.context import ClusterFacts
from bootimage_controller.core.enrollment import Enrollment
from bootimage_controller.core.golden import GoldenBootImages
from bootimage_controller.core.index import PublishedImageIndex
from bootimage_controller.core.planner import plan_all
from bootimage_controller.data import bundled_index

from .support import PSP, configmap, configmap_with, facts_with, machineset, plan

AWS_USE1 = "aws-x86_64-us-east-1a-4.16.yaml"
AWS_RHEL10 = "aws-x86_64-rhel-10-stream.yaml"
AWS_ARM = "aws-aarch64-us-east-2a-4.16.yaml"
GCP = "gcp-x86_64-us-central1-a-4.16.yaml"
PSP_FIELD = "spec.template.spec.providerSpec.value"


def _mc(*managers: dict[str, Any]) -> dict[str, Any]:
    return {"spec": {"managedBootImages": {"machineManagers": list(managers)}}}


def _manager(mode: str, resource: str = "machinesets", **partial: Any) -> dict[str, Any]:
    selection: dict[str, Any] = {"mode": mode}
    if partial:
        selection["partial"] = partial
    return {"resource": resource, "apiGroup": "machine.openshift.io", "selection": selection}


# --- rule 1: enrollment ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("mc", "platform", "enrolled"),
    [
        (None, "AWS", True),  # no machinesets entry: All on AWS, GCP, Azure, vSphere
        (None, "GCP", True),
        (None, "VSphere", True),
        (None, "BareMetal", False),  # ... None elsewhere
        (None, None, False),
        (_mc(_manager("All")), "AWS", True),
        (_mc(_manager("All")), "BareMetal", True),  # an explicit All wins over the platform default
        (_mc(_manager("None")), "AWS", False),
        (_mc(), "AWS", False),  # machineManagers: [] is the full opt-out
        (_mc(_manager("All", resource="controlplanemachinesets")), "AWS", True),  # CPMS entry only: MS default
    ],
)
def test_enrollment_modes(mc: Any, platform: str | None, enrolled: bool) -> None:
    d = plan(machineset(AWS_USE1), enrollment=Enrollment.from_machine_configuration(mc, platform))
    if enrolled:
        assert d.action is Action.PATCH
    else:
        assert (d.action, d.reason) == (Action.SKIP, Reason.NOT_ENROLLED)
        assert "not enrolled" in d.message


def test_partial_enrollment_matches_the_machineset_own_labels() -> None:
    selector = {"matchLabels": {"machine.openshift.io/cluster-api-cluster": "mycluster-7xk2p"}}
    enrollment = Enrollment.from_machine_configuration(
        _mc(_manager("Partial", machineResourceSelector=selector)), "AWS"
    )
    assert plan(machineset(AWS_USE1), enrollment=enrollment).action is Action.PATCH
    other = machineset(GCP)  # labelled mycluster-4kqzx
    d = plan(other, enrollment=enrollment)
    assert (d.action, d.reason) == (Action.SKIP, Reason.NOT_ENROLLED)
    assert "Partial" in d.message


def test_partial_selector_ignores_template_labels() -> None:
    obj = machineset(AWS_USE1)
    obj["spec"]["template"]["metadata"]["labels"]["pool"] = "gpu"
    selector = {"matchExpressions": [{"key": "pool", "operator": "In", "values": ["gpu"]}]}
    enrollment = Enrollment.from_machine_configuration(
        _mc(_manager("Partial", machineResourceSelector=selector)), "AWS"
    )
    assert plan(obj, enrollment=enrollment).reason == Reason.NOT_ENROLLED
    obj["metadata"]["labels"]["pool"] = "gpu"
    assert plan(obj, enrollment=enrollment).action is Action.PATCH


def test_disabled_annotation_opts_one_machineset_out() -> None:
    obj = machineset(AWS_USE1)
    obj["metadata"]["annotations"][ANNOTATION_BOOT_IMAGE_UPDATES] = "Disabled"
    d = plan(obj)
    assert (d.action, d.reason) == (Action.SKIP, Reason.NOT_ENROLLED)
    assert ANNOTATION_BOOT_IMAGE_UPDATES in d.message
    obj["metadata"]["annotations"][ANNOTATION_BOOT_IMAGE_UPDATES] = "Enabled"
    assert plan(obj).action is Action.PATCH


def test_cpms_is_enrolled_only_when_listed() -> None:
    cpms = _cpms()
    d = plan(cpms)
    assert (d.action, d.reason) == (Action.SKIP, Reason.NOT_ENROLLED)
    listed = Enrollment.from_machine_configuration(_mc(_manager("All", resource="controlplanemachinesets")), "AWS")
    d = plan(cpms, enrollment=listed)
    assert d.action is Action.PATCH
    cpms_psp = ("spec", "template", "machines_v1beta1_machine_openshift_io", "spec", "providerSpec", "value")
    assert [c.path for c in d.changes] == [(*cpms_psp, "ami")]
    assert d.field == "spec.template.machines_v1beta1_machine_openshift_io.spec.providerSpec.value.ami"


def _cpms() -> dict[str, Any]:
    ms = machineset(AWS_USE1)
    return {
        "apiVersion": "machine.openshift.io/v1",
        "kind": "ControlPlaneMachineSet",
        "metadata": {"name": "cluster", "namespace": "openshift-machine-api"},
        "spec": {
            "template": {
                "machineType": "machines_v1beta1_machine_openshift_io",
                "machines_v1beta1_machine_openshift_io": ms["spec"]["template"],
            }
        },
    }


def test_cpms_on_vsphere_is_unsupported() -> None:
    cpms = _cpms()
    cpms["spec"]["template"]["machines_v1beta1_machine_openshift_io"] = machineset("vsphere-x86_64-4.16.yaml")[
        "spec"
    ]["template"]
    listed = Enrollment.from_machine_configuration(_mc(_manager("All", resource="controlplanemachinesets")), "VSphere")
    d = plan(cpms, enrollment=listed)
    assert (d.action, d.reason) == (Action.SKIP, Reason.UNSUPPORTED_PLATFORM)


# --- rule 2: ownership -------------------------------------------------------------------------


def _owner(kind: str, name: str, api_version: str = "v1", uid: str = "u-1") -> dict[str, Any]:
    return {"apiVersion": api_version, "kind": kind, "name": name, "uid": uid}


@pytest.mark.parametrize(
    "owners",
    [
        [_owner("ConfigMap", "machineset-boot-image-controller", uid="any-uid")],
        [_owner("ConfigMap", "machineset-boot-image-controller", uid="stale-uid-from-a-deleted-holder")],
    ],
)
def test_our_holder_configmap_with_any_uid_is_ours(owners: list[dict[str, Any]]) -> None:
    obj = machineset(AWS_USE1)
    obj["metadata"]["ownerReferences"] = owners
    assert plan(obj).action is Action.PATCH


@pytest.mark.parametrize(
    "owner",
    [
        _owner("ClusterDeployment", "hive-cd", api_version="hive.openshift.io/v1"),
        _owner("ConfigMap", "someone-else"),  # another ConfigMap is not ours
        _owner("ConfigMap", "machineset-boot-image-controller", api_version="example.com/v1"),
        _owner("Secret", "machineset-boot-image-controller"),
    ],
)
def test_any_other_owner_means_hands_off(owner: dict[str, Any]) -> None:
    obj = machineset(AWS_USE1)
    obj["metadata"]["ownerReferences"] = [
        _owner("ConfigMap", "machineset-boot-image-controller"),
        owner,
    ]
    d = plan(obj)
    assert (d.action, d.reason) == (Action.SKIP, Reason.OWNED_BY_OTHER)
    assert owner["name"] in d.message


# --- rule 3: Windows ---------------------------------------------------------------------------


def test_windows_machinesets_are_skipped() -> None:
    obj = machineset(AWS_USE1)
    obj["spec"]["template"]["metadata"]["labels"][LABEL_OS_ID] = "Windows"
    assert (plan(obj).action, plan(obj).reason) == (Action.SKIP, Reason.WINDOWS)
    # Only the template label counts (the MachineSet's own labels are for selection).
    obj = machineset(AWS_USE1)
    obj["metadata"]["labels"][LABEL_OS_ID] = "Windows"
    assert plan(obj).action is Action.PATCH


# --- rule 4: streams ---------------------------------------------------------------------------


def test_rhel10_label_reads_data_streams() -> None:
    obj = machineset(AWS_RHEL10)
    obj["spec"]["template"]["spec"]["providerSpec"]["value"]["ami"]["id"] = "ami-06a6b025350ff1e23"  # rhel-9
    d = plan(obj, "cm-4.22")
    assert (d.action, d.reason, d.stream) == (Action.PATCH, Reason.BOOT_IMAGE_OUTDATED, "rhel-10")
    assert d.target == {"id": "ami-04b3d999e39d62c5b"}  # rhel-10 us-east-1 (fixture header)
    assert d.current_release_source == "GoldenData"


def test_unlabelled_machineset_reports_the_default_stream_name() -> None:
    assert plan(machineset(AWS_USE1), "cm-4.22").stream == "rhel-9"
    assert plan(machineset(AWS_USE1), "cm-hs-4.10").stream == "rhel-8"


def test_rhel9_label_resolves_to_data_stream_when_streams_is_absent() -> None:
    obj = machineset(AWS_USE1)
    obj["metadata"]["labels"][LABEL_OSSTREAM] = "rhel-9"
    d = plan(obj, "cm-4.18")  # single stream, RHEL 9.4 build ids
    assert (d.action, d.stream) == (Action.PATCH, "rhel-9")


def test_unknown_stream_label_is_not_available() -> None:
    obj = machineset(AWS_USE1)
    obj["metadata"]["labels"][LABEL_OSSTREAM] = "centos-10"
    d = plan(obj, "cm-4.22")
    assert (d.action, d.reason) == (Action.SKIP, Reason.STREAM_NOT_AVAILABLE)
    assert "rhel-10" in d.message and "rhel-9" in d.message


def test_stream_variant_label_boots_the_base_stream() -> None:
    obj = machineset(AWS_RHEL10)
    obj["metadata"]["labels"][LABEL_OSSTREAM] = "rhel-10-nvidia"
    assert plan(obj, "cm-4.22").action is Action.NOOP


def test_unlabelled_rhel10_image_with_rhel9_default_needs_a_label() -> None:
    obj = machineset(AWS_RHEL10)
    del obj["metadata"]["labels"][LABEL_OSSTREAM]
    d = plan(obj, "cm-4.22")
    assert (d.action, d.reason) == (Action.SKIP, Reason.STREAM_CHANGE_REQUIRES_LABEL)
    assert d.current_release == "10.2.20260405-0"
    assert d.target == {"id": "ami-06a6b025350ff1e23"}
    assert d.changes == ()
    assert f"{LABEL_OSSTREAM}=rhel-9" in d.message and "rhel-10" in d.message
    # An explicit label moves it.
    obj["metadata"]["labels"][LABEL_OSSTREAM] = "rhel-9"
    assert plan(obj, "cm-4.22").action is Action.PATCH


def test_rhel8_to_rhel9_stays_automatic() -> None:
    obj = machineset(AWS_USE1)
    obj["spec"]["template"]["spec"]["providerSpec"]["value"]["ami"]["id"] = "ami-0713d9bcf78401cd1"
    # The 4.10 AMI is not in the bundled stream files: tell the planner it is RHCOS 4.10.
    facts = facts_with(published=PublishedImageIndex(aws={"ami-0713d9bcf78401cd1": "410.84.202111111322-0"}))
    d = plan(obj, "cm-4.22", facts)
    assert (d.action, d.reason) == (Action.PATCH, Reason.BOOT_IMAGE_OUTDATED)
    assert d.current_release == "410.84.202111111322-0"


def test_broken_rhel10_stream_errors_only_rhel10_machinesets() -> None:
    cm = copy.deepcopy(dict(configmap("cm-4.22")))
    streams = json.loads(cm["data"]["streams"])
    streams["rhel-10"] = {"architectures": "not an object"}
    cm["data"] = {**cm["data"], "streams": json.dumps(streams)}
    g = GoldenBootImages.from_configmap(cm)
    d10 = plan(machineset(AWS_RHEL10), g)
    assert (d10.action, d10.reason) == (Action.ERROR, Reason.INVALID_STREAM_DATA)
    assert "architectures" in d10.message
    assert plan(machineset(AWS_USE1), g).action is Action.PATCH
    labelled9 = machineset(AWS_USE1)
    labelled9["metadata"]["labels"][LABEL_OSSTREAM] = "rhel-9"
    assert plan(labelled9, g).action is Action.PATCH


def test_unparseable_streams_key_errors_labelled_machinesets_only() -> None:
    data = dict(configmap("cm-4.22")["data"])
    data["streams"] = "{not json"
    g = GoldenBootImages.from_configmap(configmap_with(data))
    assert plan(machineset(AWS_RHEL10), g).reason == Reason.INVALID_STREAM_DATA
    assert plan(machineset(AWS_USE1), g).action is Action.PATCH


# --- rule 5: architecture ----------------------------------------------------------------------


def test_arm64_annotation_means_aarch64() -> None:
    d = plan(machineset(AWS_ARM))
    assert d.architecture == "aarch64"
    assert d.target == {"id": "ami-0bd8dcdde4641811e"}


def test_annotation_with_other_labels() -> None:
    obj = machineset(AWS_ARM)
    obj["metadata"]["annotations"][ANNOTATION_AUTOSCALER_LABELS] = (
        "topology.ebs.csi.aws.com/zone=us-east-2a, kubernetes.io/arch=arm64"
    )
    assert plan(obj).architecture == "aarch64"


def test_invalid_arch_value_is_an_error() -> None:
    obj = machineset(AWS_USE1)
    obj["metadata"]["annotations"][ANNOTATION_AUTOSCALER_LABELS] = "kubernetes.io/arch=x86_64"
    d = plan(obj)
    assert (d.action, d.reason) == (Action.ERROR, Reason.INVALID_ARCHITECTURE)
    assert "x86_64" in d.message and d.field is not None and ANNOTATION_AUTOSCALER_LABELS in d.field


def test_multi_arch_cluster_without_annotation_is_unknown() -> None:
    obj = machineset(AWS_USE1)
    del obj["metadata"]["annotations"][ANNOTATION_AUTOSCALER_LABELS]
    d = plan(obj, facts=ClusterFacts(published=bundled_index(), multi_arch=True))
    assert (d.action, d.reason) == (Action.SKIP, Reason.ARCHITECTURE_UNKNOWN)
    # With the annotation the multi-arch cluster is fine.
    assert plan(machineset(AWS_USE1), facts=ClusterFacts(published=bundled_index(), multi_arch=True)).action is Action.PATCH


def test_no_annotation_uses_the_control_plane_arch() -> None:
    obj = machineset(AWS_ARM)
    del obj["metadata"]["annotations"][ANNOTATION_AUTOSCALER_LABELS]
    assert plan(obj).architecture == "x86_64"  # default control plane
    d = plan(obj, facts=ClusterFacts(published=bundled_index(), control_plane_arch="aarch64"))
    assert (d.architecture, d.target) == ("aarch64", {"id": "ami-0bd8dcdde4641811e"})


def test_arch_missing_from_the_stream() -> None:
    obj = machineset(AWS_USE1)
    obj["metadata"]["annotations"][ANNOTATION_AUTOSCALER_LABELS] = "kubernetes.io/arch=s390x"
    d = plan(obj, "cm-hs-5.0")  # trimmed payload: x86_64, aarch64, ppc64le only
    assert (d.action, d.reason) == (Action.SKIP, Reason.ARCHITECTURE_NOT_IN_STREAM)
    assert "s390x" in d.message


# --- rule 6 dispatch: platform -------------------------------------------------------------------


def test_unknown_provider_kind_is_unsupported() -> None:
    obj = machineset(AWS_USE1)
    obj["spec"]["template"]["spec"]["providerSpec"]["value"]["kind"] = "OpenstackProviderSpec"
    d = plan(obj)
    assert (d.action, d.reason) == (Action.SKIP, Reason.UNSUPPORTED_PLATFORM)


def test_infrastructure_platform_decides_when_kind_is_missing() -> None:
    obj = machineset(AWS_USE1)
    del obj["spec"]["template"]["spec"]["providerSpec"]["value"]["kind"]
    assert plan(obj, facts=ClusterFacts(published=bundled_index(), platform="AWS")).action is Action.PATCH
    assert plan(obj, facts=ClusterFacts(published=bundled_index(), platform="BareMetal")).reason == Reason.UNSUPPORTED_PLATFORM
    assert plan(obj, facts=ClusterFacts(published=bundled_index(), platform=None)).reason == Reason.UNSUPPORTED_PLATFORM


# --- rule 8: bad input -----------------------------------------------------------------------------


@pytest.mark.parametrize(("value", "word"), [("ami-123", "str"), (None, "missing"), ([{"ami": {}}], "list")])
def test_provider_spec_that_is_not_an_object(value: Any, word: str) -> None:
    obj = machineset(AWS_USE1)
    obj["spec"]["template"]["spec"]["providerSpec"]["value"] = value
    d = plan(obj)
    assert (d.action, d.reason, d.field) == (Action.ERROR, Reason.INVALID_PROVIDER_SPEC, PSP_FIELD)
    assert word in d.message


@pytest.mark.parametrize("placement", [{"availabilityZone": "us-east-1a"}, {"region": 7}, "us-east-1", None])
def test_missing_or_mistyped_region_names_the_field(placement: Any) -> None:
    obj = machineset(AWS_USE1)
    psp = obj["spec"]["template"]["spec"]["providerSpec"]["value"]
    if placement is None:
        del psp["placement"]
    else:
        psp["placement"] = placement
    d = plan(obj)
    assert (d.action, d.reason) == (Action.ERROR, Reason.INVALID_PROVIDER_SPEC)
    wanted = f"{PSP_FIELD}.placement" if isinstance(placement, str) else f"{PSP_FIELD}.placement.region"
    assert d.field == wanted
    assert wanted in d.message


def test_one_bad_machineset_does_not_stop_the_others() -> None:
    bad = machineset(GCP)
    bad["spec"]["template"]["spec"]["providerSpec"]["value"]["disks"] = {"boot": True}
    not_a_machineset = {"kind": "MachineSet", "metadata": {"namespace": "openshift-machine-api"}}
    decisions = plan_all(
        [machineset(AWS_USE1), bad, not_a_machineset, machineset(GCP)],
        GoldenBootImages.from_configmap(configmap("cm-4.22")),
        ClusterFacts(published=bundled_index()),
        Enrollment.from_machine_configuration(None, "AWS"),
    )
    assert [(d.action, d.reason) for d in decisions] == [
        (Action.PATCH, Reason.BOOT_IMAGE_OUTDATED),
        (Action.ERROR, Reason.INVALID_PROVIDER_SPEC),
        (Action.ERROR, Reason.INVALID_OBJECT),
        (Action.PATCH, Reason.BOOT_IMAGE_OUTDATED),
    ]
    assert decisions[1].field == f"{PSP_FIELD}.disks"


# --- rule 7: equality, never version order ---------------------------------------------------------


def test_an_older_looking_golden_image_is_still_the_target() -> None:
    # 4.21's 9.6.20251212-1 is older by build date than 4.19's 9.6.20260112-0, and 418.94 > 9.6
    # numerically: the golden data wins either way.
    obj = machineset(AWS_USE1)
    obj["spec"]["template"]["spec"]["providerSpec"]["value"]["ami"]["id"] = "ami-0e0850e74100f0f31"  # 4.19
    d = plan(obj, "4.21")
    assert (d.action, d.target) == (Action.PATCH, {"id": "ami-04018496b0a1da2d2"})
    me = machineset("aws-x86_64-me-south-1a-4.21.yaml")  # 9.6.20251212-1 -> 418.94.202602022246-0
    assert plan(me, "cm-4.18").action is Action.PATCH


def test_boot_image_field_path_is_from_the_object_root() -> None:
    d = plan(machineset(AWS_USE1))
    assert [c.path for c in d.changes] == [(*PSP, "ami")]
