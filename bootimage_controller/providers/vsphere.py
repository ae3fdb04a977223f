"""vSphere (`VSphereMachineProviderSpec`): the VM template named by `template` (decision only).

On vSphere the boot image is the template VM itself: the Machine Config Operator compares the
template VM's vApp product version with `architectures[arch].artifacts.vmware.release` and, when
they differ, imports the stream's OVA and swaps the template in vCenter. The providerSpec usually
keeps its `template` name. This controller only decides:

* without vCenter access (`ClusterFacts.vcenter_available` False, the default): `skip
  VCenterUnavailable`, with current/target filled so `plan` still shows the target release;
* with vCenter access, the template VM's release comes from the vCenter answer recorded in
  `ClusterFacts.cloud` under `ImageKey("VSphere", workspace.server, template)` (`CloudImage.release`):
  equal to the target -> `noop UpToDate`; different -> `skip TemplateRefreshRequired` (the refresh is
  an OVA import this controller does not perform, so it never claims a patch it cannot make); no
  answer -> `skip VCenterUnavailable`, a failed lookup -> `skip CloudUnavailable`.

`current`/`target` are `{"template": <name>, "release": <build id or null>}`.
"""

from __future__ import annotations

from typing import Any

from ..constants import Platform, Reason
from ._common import ReleaseSource, SpecReader, image_key
from .base import RuleContext, RuleOutcome, Skip, Target


class VSphereRules:
    platform: Platform = Platform.VSPHERE

    def evaluate(self, ctx: RuleContext) -> RuleOutcome:
        read = SpecReader(ctx)
        who = ctx.resource.display
        template = read.string("template", required=True)
        assert template is not None
        server = read.string("workspace", "server")
        field = read.path("template")
        vmware = ctx.images.vmware
        if vmware is None or not vmware.release:
            return Skip(
                Reason.IMAGE_NOT_IN_STREAM,
                f"{who}: stream {ctx.stream.name} publishes no vmware OVA for {ctx.arch}",
                field=field,
                current=_value(template, None),
                location=server,
            )
        release = vmware.release
        known, error = self._template_release(ctx, server, template)

        def skip(reason: Reason, message: str) -> Skip:
            return Skip(
                reason,
                f"{who}: {message}",
                field=field,
                current=_value(template, known),
                current_release=known,
                current_release_source=str(ReleaseSource.CLOUD) if known else None,
                target=_value(template, release),
                target_release=release,
                location=server,
            )

        if not ctx.facts.vcenter_available:
            return skip(
                Reason.VCENTER_UNAVAILABLE,
                f"template {template} should hold RHCOS {release}; checking and refreshing it needs vCenter "
                "access (secret kube-system/vsphere-creds), which this run does not have",
            )
        if error is not None:
            return skip(Reason.CLOUD_UNAVAILABLE, f"could not read template {template} from vCenter: {error}; will retry")
        if known is None:
            return skip(
                Reason.VCENTER_UNAVAILABLE,
                f"vCenter gave no product version for template {template}; cannot tell whether it holds "
                f"RHCOS {release}",
            )
        if known != release:
            return skip(
                Reason.TEMPLATE_REFRESH_REQUIRED,
                f"template {template} holds RHCOS {known}, the stream says {release}; refresh the template "
                f"from the stream's OVA ({vmware.location or 'artifacts.vmware.formats.ova'}) in vCenter",
            )
        return Target(
            field=field,
            current=_value(template, known),
            target=_value(template, release),
            changes=(),
            target_release=release,
            current_release=known,
            current_release_source=str(ReleaseSource.CLOUD),
            location=server,
        )

    @staticmethod
    def _template_release(ctx: RuleContext, server: str | None, template: str) -> tuple[str | None, str | None]:
        cloud = ctx.facts.cloud
        if cloud is None:
            return None, None
        key = image_key(Platform.VSPHERE, server, template)
        found = cloud.image(key)
        release = found.release if found is not None and found.exists else None
        return release, cloud.error(key)


def _value(template: str, release: str | None) -> dict[str, Any]:
    return {"template": template, "release": release}
