"""vSphere (`VSphereMachineProviderSpec`): the boot image is the template VM named by `template`.

The rules are the Machine Config Operator's (reference section 6, docs/vsphere.md):

* the template lives in the vCenter and failure domain the providerSpec's `workspace` names in the
  Infrastructure (`vsphere.topology.resolve_placement`); no match is `error FailureDomainNotFound`;
* the template VM's release (vApp product version, else our record on it) equal to
  `architectures[arch].artifacts.vmware.release` -> `noop UpToDate`, whatever the template is called
  (a current custom-named template is kept: MCO PR 6354);
* a template VM outside the workspace folder is the customer's: `skip CustomBootImage`;
* otherwise `patch BootImageOutdated`: the computed template `<infrastructureName>-rhcos-<failure
  domain>` is built from the stream's OVA (or, when it already holds the target, reused) and the
  providerSpec's `template` is patched only when it named another template. The decision carries a
  `TemplateWork` for the controller: which names to look up, what to build.

Without vCenter answers (offline `plan`, no credentials for that vCenter): `skip VCenterUnavailable`
with current/target filled, so `plan` still shows the target release. `current`/`target` are
`{"template": <name>, "release": <build id or null>}`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ...constants import Platform, Reason
from ..cloud.facts import TemplateKey, TemplateVm
from ..model import FieldChange
from ..vsphere.topology import (
    MAX_VM_NAME,
    OvaSource,
    PlacementError,
    TemplateRefresh,
    TemplateWork,
    Workspace,
    resolve_placement,
)
from ._common import ReleaseSource, SpecReader
from .base import Failure, RuleContext, RuleOutcome, Skip, Target, invalid_golden


class VSphereRules:
    platform: Platform = Platform.VSPHERE

    def evaluate(self, ctx: RuleContext) -> RuleOutcome:
        read = SpecReader(ctx)
        who = ctx.resource.display
        template = read.string("template", required=True)
        assert template is not None
        field = read.path("template")
        workspace = Workspace(
            server=read.string("workspace", "server"),
            datacenter=read.string("workspace", "datacenter"),
            folder=read.string("workspace", "folder"),
            datastore=read.string("workspace", "datastore"),
            resource_pool=read.string("workspace", "resourcePool"),
            vm_group=read.string("workspace", "vmGroup"),
        )
        vmware = ctx.images.vmware
        broken = invalid_golden(ctx, field, "vmware")
        if broken is not None:
            return broken
        if vmware is None or not vmware.release:
            return Skip(
                Reason.IMAGE_NOT_IN_STREAM,
                f"{who}: stream {ctx.stream.name} publishes no vmware OVA for {ctx.arch}",
                field=field,
                current=_value(template, None),
                location=workspace.server,
            )
        release = vmware.release
        topology = ctx.facts.vsphere
        if topology is None:
            return _offline(who, field, template, release, workspace.server, None, "the Infrastructure names no "
                            "vCenters or failure domains (spec.platformSpec.vsphere)")
        placement = resolve_placement(topology, workspace)
        if isinstance(placement, PlacementError):
            return Failure(Reason.FAILURE_DOMAIN_NOT_FOUND, f"{who}: {placement.message}", read.path(*placement.field.split(".")))
        name = placement.computed_name or template
        if len(name) > MAX_VM_NAME:
            return Failure(
                Reason.TEMPLATE_NAME_TOO_LONG,
                f"{who}: template name {name} is {len(name)} characters; vCenter allows {MAX_VM_NAME}",
                field,
            )
        ova = OvaSource(vmware.location, vmware.sha256 or None, release)
        refresh = TemplateRefresh(
            placement=placement,
            name=name,
            ova=ova,
            infrastructure_name=topology.infrastructure_name,
            tag_ids=tuple(t for t in (read.items("tagIDs") or []) if isinstance(t, str) and t),
            network=read.string("network", "devices", 0, "networkName"),
        )
        work = TemplateWork(placement, tuple(dict.fromkeys((template, name))))
        return _Decide(ctx, who, field, template, release, work, refresh,
                       lambda what: read.path("workspace", what)).outcome()


class _Decide:
    """The decision once the placement is known, from what vCenter said (if it was asked)."""

    def __init__(
        self, ctx: RuleContext, who: str, field: Any, template: str, release: str, work: TemplateWork,
        refresh: TemplateRefresh, workspace_path: Callable[[str], Any],
    ) -> None:
        self.ctx, self.who, self.field, self.template, self.release = ctx, who, field, template, release
        self.work, self.refresh, self.p = work, refresh, work.placement
        self.workspace_path = workspace_path

    def outcome(self) -> RuleOutcome:
        cloud = self.ctx.facts.cloud
        server = self.p.server
        if cloud is None or Platform.VSPHERE not in self.ctx.facts.cloud_platforms:
            return _offline(self.who, self.field, self.template, self.release, server, self.work,
                            "this run has no vCenter access")
        if server in cloud.vcenters_unavailable:
            return _offline(self.who, self.field, self.template, self.release, server, self.work,
                            cloud.vcenters_unavailable[server])
        missing = cloud.inventory_missing.get(self._key(self.template))
        if missing is not None:
            what, path = missing
            return Failure(
                Reason.INVALID_PROVIDER_SPEC,
                f"{self.who}: {self.p.field_of(what)} {path} names nothing in vCenter {server}: no template "
                "can be looked up or built there",
                self.workspace_path(what),
            )
        for name in self.work.names:
            error = cloud.template_errors.get(self._key(name))
            if error is not None:
                return self._skip(Reason.CLOUD_UNAVAILABLE, None, f"could not read template {name} from vCenter "
                                  f"{server}: {error}; will retry")
        vm = cloud.templates.get(self._key(self.template))
        if vm is not None and not vm.in_folder:
            return self._skip(
                Reason.CUSTOM_BOOT_IMAGE, vm,
                f"template {self.template} is in {vm.folder or 'another folder'}, outside the workspace folder "
                f"{self.p.folder}: a template of your own, left alone",
            )
        if vm is not None and vm.release is None:
            return self._skip(
                Reason.UNKNOWN_BOOT_IMAGE, vm,
                f"template {self.template} carries no vApp product version and no record of ours: cannot tell "
                f"whether it holds RHCOS {self.release}",
            )
        if vm is not None and vm.release == self.release:
            return self._target(vm, self.template, refresh=False)
        computed = self.refresh.name
        if computed != self.template:
            other = cloud.templates.get(self._key(computed))
            if other is not None and other.in_folder and other.release == self.release:
                return self._target(vm, computed, refresh=False)
        return self._target(vm, computed, refresh=True)

    def _key(self, name: str) -> TemplateKey:
        return TemplateKey(self.p.server, self.p.datacenter, self.p.folder, name)

    def _current(self, vm: TemplateVm | None) -> dict[str, Any]:
        return _value(self.template, vm.release if vm is not None else None)

    def _skip(self, reason: Reason, vm: TemplateVm | None, message: str) -> Skip:
        known = vm.release if vm is not None else None
        return Skip(
            reason,
            f"{self.who}: {message}",
            field=self.field,
            current=self._current(vm),
            current_release=known,
            current_release_source=str(ReleaseSource.CLOUD) if known else None,
            target=_value(self.refresh.name, self.release),
            target_release=self.release,
            location=self.p.server,
            template=self.work,
        )

    def _target(self, vm: TemplateVm | None, name: str, *, refresh: bool) -> Target:
        known = vm.release if vm is not None else None
        changes = () if name == self.template else (FieldChange(self.field, self.template, name),)
        return Target(
            field=self.field,
            current=self._current(vm),
            target=_value(name, self.release),
            changes=changes,
            target_release=self.release,
            current_release=known,
            current_release_source=str(ReleaseSource.CLOUD) if known else None,
            location=self.p.server,
            template=TemplateWork(self.p, self.work.names, self.refresh if refresh else None),
        )


def _offline(
    who: str, field: Any, template: str, release: str, server: str | None, work: TemplateWork | None, why: str
) -> Skip:
    return Skip(
        Reason.VCENTER_UNAVAILABLE,
        f"{who}: template {template} should hold RHCOS {release}; checking and refreshing it needs vCenter "
        f"{server or '(no workspace.server)'}, and {why}",
        field=field,
        current=_value(template, None),
        target=_value(template, release),
        target_release=release,
        location=server,
        template=work,
    )


def _value(template: str, release: str | None) -> dict[str, Any]:
    return {"template": template, "release": release}


__all__ = ["VSphereRules"]
