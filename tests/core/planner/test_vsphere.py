"""vSphere rules: the template VM in vCenter, its failure domain, and what the controller must do."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from bootimage_controller.constants import Action, Reason
from bootimage_controller.core.cloud.facts import CloudFacts, TemplateKey, TemplateVm
from bootimage_controller.core.model import FieldChange
from bootimage_controller.core.vsphere.topology import VSphereTopology

from .support import PSP, facts_with, machineset, plan

MS = "vsphere-x86_64-4.16.yaml"
TEMPLATE = "mycluster-l2vzr-rhcos-generated-region-generated-zone"  # the installer's name
COMPUTED = "mycluster-l2vzr-rhcos-generated-failure-domain"  # <infraID>-rhcos-<failure domain>
FOLDER = "/DC1/vm/mycluster-l2vzr"
TARGET_RELEASE = "9.8.20260403-0"  # cm-4.22 x86_64 artifacts.vmware.release
OLD_RELEASE = "416.94.202405291527-0"


def infrastructure(**fd_changes: Any) -> dict[str, Any]:
    domain = {
        "name": "generated-failure-domain",
        "region": "generated-region",
        "zone": "generated-zone",
        "server": "vcenter.example.com",
        "topology": {
            "datacenter": "DC1",
            "computeCluster": "/DC1/host/Cluster1",
            "datastore": "/DC1/datastore/datastore1",
            "networks": ["VM Network"],
            "resourcePool": "/DC1/host/Cluster1/Resources",
            "folder": FOLDER,
        },
    }
    domain["topology"].update(fd_changes)  # type: ignore[attr-defined]
    return {
        "apiVersion": "config.openshift.io/v1",
        "kind": "Infrastructure",
        "metadata": {"name": "cluster"},
        "spec": {"platformSpec": {"type": "VSphere", "vsphere": {
            "vcenters": [{"server": "vcenter.example.com", "port": 443, "datacenters": ["DC1"]}],
            "failureDomains": [domain],
        }}},
        "status": {"infrastructureName": "mycluster-l2vzr", "platformStatus": {"type": "VSphere"}},
    }


TOPOLOGY = VSphereTopology.from_infrastructure(infrastructure())


def key(name: str) -> TemplateKey:
    return TemplateKey("vcenter.example.com", "DC1", FOLDER, name)


def vm(name: str, release: str | None, *, in_folder: bool = True) -> TemplateVm:
    return TemplateVm(name, in_folder, FOLDER if in_folder else "/DC1/vm/elsewhere", True, release, "record")


def vcenter(*vms: TemplateVm | tuple[str, None], errors: dict[str, str] | None = None, unavailable: str | None = None) -> Any:
    templates: dict[TemplateKey, TemplateVm | None] = {key(TEMPLATE): None, key(COMPUTED): None}
    for v in vms:
        templates[key(v[0] if isinstance(v, tuple) else v.name)] = None if isinstance(v, tuple) else v
    cloud = CloudFacts(
        templates=templates,
        template_errors={key(n): e for n, e in (errors or {}).items()},
        vcenters_unavailable={"vcenter.example.com": unavailable} if unavailable else {},
    )
    return facts_with(cloud, platforms=["VSphere"], vsphere=TOPOLOGY)


def test_offline_the_plan_still_shows_the_target_and_what_to_look_up() -> None:
    d = plan(machineset(MS), facts=facts_with(vsphere=TOPOLOGY))
    assert (d.action, d.reason) == (Action.SKIP, Reason.VCENTER_UNAVAILABLE)
    assert d.current == {"template": TEMPLATE, "release": None}
    assert d.target == {"template": TEMPLATE, "release": TARGET_RELEASE}
    assert (d.target_release, d.location) == (TARGET_RELEASE, "vcenter.example.com")
    assert d.changes == () and d.template is not None
    assert d.template.names == (TEMPLATE, COMPUTED)
    p = d.template.placement
    assert (p.datacenter, p.folder, p.datastore, p.resource_pool, p.failure_domain) == (
        "DC1", FOLDER, "/DC1/datastore/datastore1", "/DC1/host/Cluster1/Resources", "generated-failure-domain",
    )


def test_without_an_infrastructure_vsphere_spec_nothing_can_be_resolved() -> None:
    d = plan(machineset(MS))
    assert (d.action, d.reason) == (Action.SKIP, Reason.VCENTER_UNAVAILABLE)
    assert "spec.platformSpec.vsphere" in d.message and d.template is None


def test_a_template_at_the_target_is_up_to_date_whatever_its_name() -> None:
    # MCO PR 6354: a current custom-named template is kept, no patch.
    d = plan(machineset(MS), facts=vcenter(vm(TEMPLATE, TARGET_RELEASE)))
    assert (d.action, d.reason) == (Action.NOOP, Reason.UP_TO_DATE)
    assert d.current == d.target == {"template": TEMPLATE, "release": TARGET_RELEASE}
    assert d.current_release_source == "Cloud"


def test_an_outdated_template_builds_the_computed_one_and_repoints_the_machineset() -> None:
    d = plan(machineset(MS), facts=vcenter(vm(TEMPLATE, OLD_RELEASE)))
    assert (d.action, d.reason) == (Action.PATCH, Reason.BOOT_IMAGE_OUTDATED)
    assert d.current == {"template": TEMPLATE, "release": OLD_RELEASE}
    assert d.target == {"template": COMPUTED, "release": TARGET_RELEASE}
    assert d.changes == (FieldChange((*PSP, "template"), TEMPLATE, COMPUTED),)
    assert d.template is not None and d.template.refresh is not None
    r = d.template.refresh
    assert (r.name, r.ova.release, r.infrastructure_name, r.network) == (COMPUTED, TARGET_RELEASE, "mycluster-l2vzr", "VM Network")
    assert r.ova.url.endswith("rhcos-9.8.20260403-0-vmware.x86_64.ova") and r.ova.sha256


def test_an_outdated_custom_template_is_pointed_at_a_current_computed_one_without_a_rebuild() -> None:
    d = plan(machineset(MS), facts=vcenter(vm(TEMPLATE, OLD_RELEASE), vm(COMPUTED, TARGET_RELEASE)))
    assert (d.action, d.reason) == (Action.PATCH, Reason.BOOT_IMAGE_OUTDATED)
    assert d.changes == (FieldChange((*PSP, "template"), TEMPLATE, COMPUTED),)
    assert d.template is not None and d.template.refresh is None


def test_the_computed_template_outdated_is_rebuilt_in_place_with_no_machineset_patch() -> None:
    obj = machineset(MS)
    obj["spec"]["template"]["spec"]["providerSpec"]["value"]["template"] = COMPUTED
    d = plan(obj, facts=vcenter(vm(COMPUTED, OLD_RELEASE)))
    assert (d.action, d.reason) == (Action.PATCH, Reason.BOOT_IMAGE_OUTDATED)
    assert d.changes == ()
    assert d.template is not None and d.template.refresh is not None and d.template.refresh.name == COMPUTED


def test_a_missing_template_is_built() -> None:
    d = plan(machineset(MS), facts=vcenter())
    assert (d.action, d.reason) == (Action.PATCH, Reason.BOOT_IMAGE_OUTDATED)
    assert d.current == {"template": TEMPLATE, "release": None}
    assert d.template is not None and d.template.refresh is not None


def test_a_template_outside_the_workspace_folder_is_the_customers() -> None:
    d = plan(machineset(MS), facts=vcenter(vm(TEMPLATE, OLD_RELEASE, in_folder=False)))
    assert (d.action, d.reason) == (Action.SKIP, Reason.CUSTOM_BOOT_IMAGE)
    assert "/DC1/vm/elsewhere" in d.message and FOLDER in d.message


def test_a_template_without_a_release_is_unknown() -> None:
    d = plan(machineset(MS), facts=vcenter(vm(TEMPLATE, None)))
    assert (d.action, d.reason) == (Action.SKIP, Reason.UNKNOWN_BOOT_IMAGE)


def test_vcenter_errors_and_missing_credentials_are_retry_later_skips() -> None:
    d = plan(machineset(MS), facts=vcenter(errors={TEMPLATE: "login failed"}))
    assert (d.action, d.reason) == (Action.SKIP, Reason.CLOUD_UNAVAILABLE)
    assert "login failed" in d.message
    d = plan(machineset(MS), facts=vcenter(unavailable="Secret x/y has no vcenter.example.com.username"))
    assert (d.action, d.reason) == (Action.SKIP, Reason.VCENTER_UNAVAILABLE)
    assert "vcenter.example.com.username" in d.message


@pytest.mark.parametrize(
    ("field", "value", "where"),
    [
        ("server", "other.example.com", "workspace.server"),
        ("datastore", "/DC1/datastore/other", "workspace"),
        ("datacenter", "DC9", "workspace"),
    ],
)
def test_a_workspace_matching_no_failure_domain_is_an_error_naming_the_field(field: str, value: str, where: str) -> None:
    obj = machineset(MS)
    obj["spec"]["template"]["spec"]["providerSpec"]["value"]["workspace"][field] = value
    d = plan(obj, facts=facts_with(vsphere=TOPOLOGY))
    assert (d.action, d.reason) == (Action.ERROR, Reason.FAILURE_DOMAIN_NOT_FOUND)
    assert d.field == f"spec.template.spec.providerSpec.value.{where}"
    assert value in d.message


def test_a_datastore_named_without_its_path_still_matches() -> None:
    obj = machineset(MS)
    obj["spec"]["template"]["spec"]["providerSpec"]["value"]["workspace"]["datastore"] = "datastore1"
    d = plan(obj, facts=facts_with(vsphere=TOPOLOGY))
    assert d.reason == Reason.VCENTER_UNAVAILABLE


def test_a_malformed_infrastructure_is_an_error_naming_its_field() -> None:
    infra = infrastructure()
    infra["spec"]["platformSpec"]["vsphere"]["failureDomains"][0]["topology"]["datastore"] = 5
    d = plan(machineset(MS), facts=facts_with(vsphere=VSphereTopology.from_infrastructure(infra)))
    assert (d.action, d.reason) == (Action.ERROR, Reason.FAILURE_DOMAIN_NOT_FOUND)
    assert "failureDomains[0].topology.datastore" in d.message


def test_template_names_over_80_characters_are_an_error() -> None:
    infra = copy.deepcopy(infrastructure())
    infra["status"]["infrastructureName"] = "x" * 70
    d = plan(machineset(MS), facts=facts_with(vsphere=VSphereTopology.from_infrastructure(infra)))
    assert (d.action, d.reason) == (Action.ERROR, Reason.TEMPLATE_NAME_TOO_LONG)


def test_missing_template_is_invalid() -> None:
    obj = machineset(MS)
    del obj["spec"]["template"]["spec"]["providerSpec"]["value"]["template"]
    d = plan(obj)
    assert (d.action, d.reason, d.field) == (
        Action.ERROR,
        Reason.INVALID_PROVIDER_SPEC,
        "spec.template.spec.providerSpec.value.template",
    )


def test_stream_without_a_vmware_ova() -> None:
    d = plan(machineset(MS), "cm-hs-5.0")
    assert (d.action, d.reason) == (Action.SKIP, Reason.IMAGE_NOT_IN_STREAM)
