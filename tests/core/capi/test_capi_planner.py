"""CAPI decisions: the same rules as the Machine API, through the template (issue 16)."""

from __future__ import annotations

from typing import Any

import pytest

from bootimage_controller.constants import CAPI_MACHINEDEPLOYMENT, CAPI_MACHINESET, Action, Reason
from bootimage_controller.core.capi.planner import plan_capi
from bootimage_controller.core.capi.resources import new_template_name
from bootimage_controller.core.context import ClusterFacts
from bootimage_controller.core.enrollment import Enrollment
from bootimage_controller.core.model import FieldChange
from bootimage_controller.data import bundled_index
from core.planner.support import golden, machineset, plan

from .objects import capi_object, cluster_owner, managers, template

PSP = ("spec", "template", "spec", "providerSpec", "value")
AWS_416 = "ami-05483066c3caaccf5"
G = golden("cm-4.22")


def enrollment(*resources: str) -> Enrollment:
    return Enrollment.from_machine_configuration({"spec": managers(*resources)}, "AWS")


def mapi_target(fixture: str) -> Any:
    """What the Machine API planner decides for the same boot image: the CAPI target must match."""
    return plan(machineset(fixture), "cm-4.22", facts=ClusterFacts(published=bundled_index(), platform="AWS")).target


def aws(name: str = "aws-tmpl", ami: str = AWS_416) -> dict[str, Any]:
    return template("AWSMachineTemplate", name, {"ami": {"id": ami}, "instanceType": "m6i.xlarge"})


def decide(obj: dict[str, Any], tmpl: dict[str, Any] | None, *resources: str, **kw: Any) -> Any:
    facts = ClusterFacts(published=bundled_index(), platform=kw.pop("platform", "AWS"), region=kw.pop("region", "us-east-1"))
    return plan_capi(obj, tmpl, G, facts, enrollment(*resources or ("machinesets",)), **kw)


def test_a_stale_aws_template_is_copied_with_only_the_ami_changed() -> None:
    obj = capi_object("MachineSet", "workers", "AWSMachineTemplate", "aws-tmpl")
    d = decide(obj, aws())
    assert (d.kind, d.action, d.reason) == (CAPI_MACHINESET, Action.PATCH, Reason.BOOT_IMAGE_OUTDATED)
    target_ami = mapi_target("aws-x86_64-us-east-1a-4.16.yaml")
    new_name = d.capi.new_name
    assert d.current == {"template": "AWSMachineTemplate/aws-tmpl", "image": {"id": AWS_416}}
    assert d.target == {"template": f"AWSMachineTemplate/{new_name}", "image": target_ami}
    assert d.field == "spec.template.spec.ami"
    assert d.changes == (FieldChange(("spec", "template", "spec", "infrastructureRef", "name"), "aws-tmpl", new_name),)
    body = d.capi.new_template
    assert body["spec"]["template"]["spec"] == {"ami": target_ami, "instanceType": "m6i.xlarge"}
    assert body["metadata"]["name"] == new_name and "uid" not in body["metadata"]
    assert body["metadata"]["annotations"]["machineconfiguration.openshift.io/boot-image-replaces"] == "aws-tmpl"
    # Named as the MCO names the templates of a CAPI pool: the pool's name and the FNV-1a 32 of the
    # whole spec's JSON after CAPA's types have read it (an empty metadata, cloudInit and the rest of
    # what has no omitempty), computed here from the documented algorithm.
    typed = {"template": {"metadata": {}, "spec": {"ami": target_ami, "cloudInit": {}, "instanceType": "m6i.xlarge"}}}
    assert new_name == f"workers-{_fnv1a32_hex(typed)}"
    assert new_name == new_template_name("workers", "AWSMachineTemplate", body["spec"])


def test_an_up_to_date_template_is_a_noop() -> None:
    target_ami = mapi_target("aws-x86_64-us-east-1a-4.16.yaml")["id"]
    d = decide(capi_object("MachineSet", "w", "AWSMachineTemplate", "t"), aws("t", target_ami))
    assert (d.action, d.reason) == (Action.NOOP, Reason.UP_TO_DATE) and d.capi is None


def test_gcp_and_azure_templates_get_the_machine_api_targets() -> None:
    gcp_image = machineset("gcp-x86_64-us-central1-a-4.16.yaml")["spec"]["template"]["spec"]["providerSpec"]["value"]["disks"][0]["image"]
    d = decide(capi_object("MachineSet", "g", "GCPMachineTemplate", "gt", failure_domain="us-central1-a"),
               template("GCPMachineTemplate", "gt", {"image": gcp_image, "instanceType": "n2-standard-4"}), platform="GCP")
    expected = plan(machineset("gcp-x86_64-us-central1-a-4.16.yaml"), "cm-4.22").target
    assert d.action is Action.PATCH and d.capi.new_template["spec"]["template"]["spec"]["image"] == expected
    assert d.field == "spec.template.spec.image" and d.location == "us-central1-a"

    mapi = machineset("azure-x86_64-marketplace-noplan-4.20.yaml")
    image = mapi["spec"]["template"]["spec"]["providerSpec"]["value"]["image"]
    image["version"] = "9.6.20250101"  # an older marketplace version, on both sides
    market = {k: image[k] for k in ("publisher", "offer", "sku", "version")}
    d = decide(capi_object("MachineSet", "a", "AzureMachineTemplate", "at"),
               template("AzureMachineTemplate", "at", {"image": {"marketplace": {**market, "thirdPartyImage": False}}}),
               platform="Azure")
    mapi_d = plan(mapi, "cm-4.22")
    assert mapi_d.action is Action.PATCH
    new = d.capi.new_template["spec"]["template"]["spec"]["image"]["marketplace"]
    assert new == {**{k: mapi_d.target[k] for k in ("publisher", "offer", "sku", "version")}, "thirdPartyImage": False}


def test_vsphere_templates_are_planned_not_written() -> None:
    spec = {"template": "old-rhcos", "server": "vc.example.com", "datacenter": "DC1"}
    d = decide(capi_object("MachineSet", "v", "VSphereMachineTemplate", "vt"), template("VSphereMachineTemplate", "vt", spec),
               platform="VSphere")
    assert d.action is Action.SKIP and d.capi is None
    assert d.current["template"] == "VSphereMachineTemplate/vt"


def test_capi_is_opt_in_and_machinedeployments_need_their_own_entry() -> None:
    ms = capi_object("MachineSet", "w", "AWSMachineTemplate", "t")
    d = plan_capi(ms, aws("t"), G, ClusterFacts(published=bundled_index(), platform="AWS", region="us-east-1"),
                  Enrollment.from_machine_configuration(None, "AWS"))
    assert d.reason == Reason.NOT_ENROLLED
    assert "for Cluster API MachineSets" in d.message and "x-k8s.ios" not in d.message
    md = capi_object("MachineDeployment", "d", "AWSMachineTemplate", "t")
    d = decide(md, aws("t"), "machinesets")
    assert (d.kind, d.reason) == (CAPI_MACHINEDEPLOYMENT, Reason.NOT_ENROLLED) and "rolls out" in d.message
    d = decide(md, aws("t"), "machinedeployments")
    assert d.action is Action.PATCH and d.capi.rollout and "rolls out new Machines" in d.message


def test_owners_a_cluster_is_expected_a_machinedeployment_defers_anything_else_is_other() -> None:
    ms = capi_object("MachineSet", "w", "AWSMachineTemplate", "t", owners=[cluster_owner()])
    assert decide(ms, aws("t")).action is Action.PATCH
    owned = capi_object("MachineSet", "w", "AWSMachineTemplate", "t", owners=[
        {"apiVersion": "cluster.x-k8s.io/v1beta1", "kind": "MachineDeployment", "name": "d", "uid": "1", "controller": True}])
    assert decide(owned, aws("t")).reason == Reason.OWNED_BY_MACHINE_DEPLOYMENT
    other = capi_object("MachineSet", "w", "AWSMachineTemplate", "t", owners=[
        {"apiVersion": "example.com/v1", "kind": "Pool", "name": "p", "uid": "2"}])
    assert decide(other, aws("t")).reason == Reason.OWNED_BY_OTHER


@pytest.mark.parametrize(("authority", "reason"), [("MachineAPI", Reason.NOT_AUTHORITATIVE), ("", Reason.NOT_AUTHORITATIVE),
                                                    ("ClusterAPI", Reason.BOOT_IMAGE_OUTDATED),
                                                    (None, Reason.BOOT_IMAGE_OUTDATED)])
def test_the_mirror_of_an_authoritative_machine_api_machineset_is_left_alone(authority: str | None, reason: Reason) -> None:
    d = decide(capi_object("MachineSet", "w", "AWSMachineTemplate", "t"), aws("t"), mapi_authority=authority)
    assert d.reason == reason


def test_the_machine_api_side_of_a_migrated_pool_is_not_authoritative() -> None:
    obj = machineset("aws-x86_64-us-east-1a-4.16.yaml")
    obj["status"] = {"authoritativeAPI": "ClusterAPI"}
    assert plan(obj, "cm-4.22").reason == Reason.NOT_AUTHORITATIVE
    obj["status"] = {"authoritativeAPI": "MachineAPI"}
    assert plan(obj, "cm-4.22").reason == Reason.BOOT_IMAGE_OUTDATED


def test_a_machinedeployment_mid_rollout_is_not_touched() -> None:
    md = capi_object("MachineDeployment", "d", "AWSMachineTemplate", "t", replicas=3)
    md["metadata"]["generation"] = 2
    md["status"] = {"observedGeneration": 2, "replicas": 4, "updatedReplicas": 2}
    d = decide(md, aws("t"), "machinedeployments")
    assert d.reason == Reason.ROLLOUT_IN_PROGRESS and "2 of 3" in d.message
    md["status"] = {"observedGeneration": 2, "replicas": 3, "updatedReplicas": 3}
    assert decide(md, aws("t"), "machinedeployments").action is Action.PATCH


def test_a_missing_or_unknown_template() -> None:
    ms = capi_object("MachineSet", "w", "AWSMachineTemplate", "t")
    assert decide(ms, None).reason == Reason.TEMPLATE_NOT_FOUND
    odd = capi_object("MachineSet", "w", "MetalMachineTemplate", "t")
    assert decide(odd, None).reason == Reason.UNSUPPORTED_PLATFORM


def test_skew_judges_the_pool_once_whichever_side_is_authoritative() -> None:
    from bootimage_controller.core.skew.assess import judged_for_skew, skew_evidence

    mapi = machineset("aws-x86_64-us-east-1a-4.16.yaml")
    mapi["status"] = {"authoritativeAPI": "ClusterAPI"}
    d = plan(mapi, "cm-4.22")
    # The Machine API side is still identified (its providerSpec follows the pool) ...
    assert judged_for_skew(d) and skew_evidence(d, mapi, G, ClusterFacts(published=bundled_index())).current_release == "416.94.202405291527-0"
    # ... and a CAPI object counts only when it is planned: not when opt-in left it out.
    capi = decide(capi_object("MachineSet", "w", "AWSMachineTemplate", "t"), aws("t"))
    assert judged_for_skew(capi) and capi.current_release == "416.94.202405291527-0"
    not_enrolled = plan_capi(capi_object("MachineSet", "w", "AWSMachineTemplate", "t"), aws("t"), G, ClusterFacts(published=bundled_index()),
                             Enrollment.from_machine_configuration(None, "AWS"))
    assert not judged_for_skew(not_enrolled)


def test_rollout_is_read_where_each_api_version_keeps_it() -> None:
    """v1beta2 has no `updatedReplicas` (issue 24): `upToDateReplicas`, its deprecated copy, and the
    RollingOut condition say where a rollout stands; v1beta1 keeps `updatedReplicas`."""
    md = capi_object("MachineDeployment", "d", "AWSMachineTemplate", "t", replicas=3)
    md["apiVersion"] = "cluster.x-k8s.io/v1beta2"
    md["metadata"]["generation"] = 2
    md["status"] = {"observedGeneration": 2, "replicas": 3, "upToDateReplicas": 1}
    d = decide(md, aws("t"), "machinedeployments")
    assert d.reason == Reason.ROLLOUT_IN_PROGRESS and "upToDateReplicas" in d.message
    md["status"] = {"observedGeneration": 2, "replicas": 3, "deprecated": {"v1beta1": {"updatedReplicas": 2}}}
    assert decide(md, aws("t"), "machinedeployments").reason == Reason.ROLLOUT_IN_PROGRESS
    md["status"] = {"observedGeneration": 2, "replicas": 3, "upToDateReplicas": 3,
                    "conditions": [{"type": "RollingOut", "status": "True", "reason": "RollingOut", "message": "1 old"}]}
    assert decide(md, aws("t"), "machinedeployments").reason == Reason.ROLLOUT_IN_PROGRESS
    # Settled: every replica up to date, no RollingOut. The landed code read `updatedReplicas`,
    # which v1beta2 never has, and held every such MachineDeployment forever.
    md["status"] = {"observedGeneration": 2, "replicas": 3, "upToDateReplicas": 3, "readyReplicas": 3,
                    "conditions": [{"type": "RollingOut", "status": "False", "reason": "NotRollingOut"}]}
    assert decide(md, aws("t"), "machinedeployments").action is Action.PATCH
    v1 = capi_object("MachineDeployment", "d", "AWSMachineTemplate", "t", replicas=3)
    v1["metadata"]["generation"] = 2
    v1["status"] = {"observedGeneration": 2, "replicas": 3, "upToDateReplicas": 3}  # not a v1beta1 field
    assert decide(v1, aws("t"), "machinedeployments").reason == Reason.ROLLOUT_IN_PROGRESS


# ---- the MCO on Cluster API (openshift/api #2990, MCO #6447): who writes a CAPI pool --------------


@pytest.mark.parametrize("gates_on", [(True, True), (True, False), (False, True)])
@pytest.mark.parametrize("platform", ["AWS", "GCP"])
@pytest.mark.parametrize("kind", ["MachineSet", "MachineDeployment"])
@pytest.mark.parametrize("listed", [True, False])
def test_the_mco_writes_aws_capi_pools_behind_its_gates_when_listed(gates_on: tuple[bool, bool], platform: str,
                                                                   kind: str, listed: bool) -> None:
    """Both gates: `ManagedBootImagesAWSCAPI`, and `ClusterAPIMachineManagement`, without which the
    MCO never starts its Cluster API informers (#6447, `Run()`): nobody but us writes the pool."""
    from bootimage_controller.constants import Manager
    from bootimage_controller.core.manager import (
        GATE_AWS_CAPI,
        GATE_CAPI_MACHINE_MANAGEMENT,
        MachineConfigOperator,
        ManagerFacts,
    )
    from bootimage_controller.core.skew.versions import OcpVersion

    gate_on = all(gates_on)
    gates = frozenset(g for g, on in zip((GATE_AWS_CAPI, GATE_CAPI_MACHINE_MANAGEMENT), gates_on, strict=True) if on)
    mco = MachineConfigOperator("4.23.0", OcpVersion.parse("4.23.0", "test"), gates)
    facts = ClusterFacts(published=bundled_index(), platform=platform, region="us-east-1", managers=ManagerFacts(mco=mco))
    resource = "machinedeployments" if kind == "MachineDeployment" else "machinesets"
    # Listed for both: the MCO and this controller read the same managedBootImages.
    enrolled = enrollment(resource) if listed else enrollment()
    obj = capi_object(kind, "pool", "AWSMachineTemplate", "aws-tmpl", owners=[cluster_owner()])
    got = plan_capi(obj, aws(), G, facts, enrolled)
    mco_writes = gate_on and platform == "AWS" and listed
    # Not listed: not enrolled for either, so nobody's.
    assert got.manager == (Manager.MCO if mco_writes else Manager.OURS if listed else Manager.NOBODY), got.manager_why
    if mco_writes:
        assert "ManagedBootImagesAWSCAPI" in got.manager_why


def test_a_capi_machineset_its_machinedeployment_owns_is_not_the_mcos_own_pool() -> None:
    from bootimage_controller.constants import Manager
    from bootimage_controller.core.manager import GATE_AWS_CAPI, MachineConfigOperator, ManagerFacts
    from bootimage_controller.core.skew.versions import OcpVersion

    mco = MachineConfigOperator("4.23.0", OcpVersion.parse("4.23.0", "test"),
                                frozenset({GATE_AWS_CAPI, "ClusterAPIMachineManagement"}))
    facts = ClusterFacts(published=bundled_index(), platform="AWS", region="us-east-1", managers=ManagerFacts(mco=mco))
    owned = capi_object("MachineSet", "pool-abc", "AWSMachineTemplate", "aws-tmpl", owners=[
        {"apiVersion": "cluster.x-k8s.io/v1beta1", "kind": "MachineDeployment", "name": "pool", "uid": "md-1"}])
    assert plan_capi(owned, aws(), G, facts, enrollment("machinesets")).manager is not Manager.MCO


def _fnv1a32_hex(spec: Any) -> str:
    """GenerateInfraMachineTemplateNameWithSpecHash's hash, written out: FNV-1a 32 (offset basis
    2166136261, prime 16777619) over the spec as Go's json.Marshal writes an unstructured map (keys
    sorted, no spaces, <, > and & escaped), as 8 hex digits."""
    import json

    text = json.dumps(spec, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    text = text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
    h = 2166136261
    for byte in text.encode():
        h = ((h ^ byte) * 16777619) % 2**32
    return f"{h:08x}"


def test_the_fnv_hash_is_go_s_and_go_escapes_html_characters() -> None:
    from bootimage_controller.core.capi.resources import fnv1a32, go_json

    assert fnv1a32(b"Hello world") == 1498229191  # Hugo's hash.FNV32a documentation, Go's hash/fnv
    assert fnv1a32(b"") == 2166136261
    assert go_json({"b": "<a&b>", "a": 1}) == b'{"a":1,"b":"\\u003ca\\u0026b\\u003e"}'
    # The kinds the MCO does not write are hashed as they are, without a typed round trip.
    spec = {"template": {"spec": {"image": "rhcos-<&>"}}}
    assert new_template_name("w", "GCPMachineTemplate", spec) == f"w-{_fnv1a32_hex(spec)}"
    assert len(new_template_name("x" * 300, "GCPMachineTemplate", {})) == 253


def test_the_copy_keeps_its_owner_references_without_block_owner_deletion() -> None:
    owner = {**cluster_owner(), "controller": True, "blockOwnerDeletion": True}
    tmpl = template("AWSMachineTemplate", "aws-tmpl", {"ami": {"id": AWS_416}, "instanceType": "m6i.xlarge"},
                    owners=[owner])
    d = decide(capi_object("MachineSet", "workers", "AWSMachineTemplate", "aws-tmpl"), tmpl)
    refs = d.capi.new_template["metadata"]["ownerReferences"]
    assert refs == [{k: v for k, v in owner.items() if k != "blockOwnerDeletion"}]


def test_old_templates_go_when_nothing_uses_them_any_more() -> None:
    from bootimage_controller.core.capi.retire import templates_to_retire

    def t(name: str, replaces: str | None = None) -> dict[str, Any]:
        annotations = {"machineconfiguration.openshift.io/boot-image-replaces": replaces} if replaces else {}
        return {"metadata": {"name": name, "annotations": annotations}}

    def machine(cloned_from: str) -> dict[str, Any]:
        return {"metadata": {"annotations": {"cluster.x-k8s.io/cloned-from-name": cloned_from}}}

    chain = {"t0": t("t0"), "w-1": t("w-1", "t0"), "w-2": t("w-2", "w-1"), "w-3": t("w-3", "w-2"),
             "other": t("other")}
    # Current w-3; w-2 kept for rollback; t0 and w-1 go; a template nobody here made stays.
    assert templates_to_retire(chain, {"w-3"}, []) == ["t0", "w-1"]
    # A machine still running from t0 (of any MachineSet) keeps it; another pool's current one is kept.
    assert templates_to_retire(chain, {"w-3", "w-1"}, [machine("t0")]) == []
    # The first naming scheme is recognised: an old `-bic-` template no longer in use goes.
    old = {**chain, "t0-bic-0123abcd": t("t0-bic-0123abcd")}
    assert "t0-bic-0123abcd" in templates_to_retire(old, {"w-3"}, [])
