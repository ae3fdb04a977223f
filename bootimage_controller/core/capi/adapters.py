"""The platform rules, applied to CAPI infrastructure templates.

The rules (`providers/`) read a Machine API providerSpec. Each adapter shows them a providerSpec
built from the template's `spec.template.spec` (and, where the template has no such field, the
cluster's: the AWS region from the Infrastructure, the zone from the MachineSet's failureDomain),
and carries the rules' change back into the template's own field and shape. So one set of rules
decides for both APIs (SPEC section 2 rule 6, "Cluster API").
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..model import JsonPath, is_mapping

PlatformRelPath = JsonPath  # a path inside providerSpec.value
TemplateRelPath = JsonPath  # a path inside the template's spec.template.spec


@dataclass(frozen=True)
class Adapter:
    template_kind: str
    provider_kind: str

    def provider_spec(self, spec: Mapping[str, Any], failure_domain: str | None, region: str | None) -> dict[str, Any]:
        raise NotImplementedError

    def to_template(self, rel: PlatformRelPath, value: Any) -> tuple[TemplateRelPath, Any]:
        """The template field (and its value) the rules' change at `rel` becomes."""
        return rel, value

    def field_of(self, rel: PlatformRelPath) -> TemplateRelPath:
        return self.to_template(rel, None)[0]


class AwsAdapter(Adapter):
    def provider_spec(self, spec: Mapping[str, Any], failure_domain: str | None, region: str | None) -> dict[str, Any]:
        placement = {k: v for k, v in (("region", region), ("availabilityZone", failure_domain)) if v}
        return {"kind": self.provider_kind, "ami": spec.get("ami"), "placement": placement}


class GcpAdapter(Adapter):
    def provider_spec(self, spec: Mapping[str, Any], failure_domain: str | None, region: str | None) -> dict[str, Any]:
        image = spec.get("image")
        disks = [{"boot": True, "image": image}] if image is not None else []
        return {"kind": self.provider_kind, "disks": disks, "zone": failure_domain, "region": region}

    def to_template(self, rel: PlatformRelPath, value: Any) -> tuple[TemplateRelPath, Any]:
        if rel[:1] == ("disks",):  # the boot disk's image is the template's `image`
            return ("image",), value
        return rel, value


class AzureAdapter(Adapter):
    """CAPZ `image.marketplace {publisher, offer, sku, version, thirdPartyImage}` (or `image.id`)
    against the Machine API's `image {publisher, offer, sku, version, resourceID, type}`."""

    def provider_spec(self, spec: Mapping[str, Any], failure_domain: str | None, region: str | None) -> dict[str, Any]:
        out: dict[str, Any] = {"kind": self.provider_kind, "image": _mapi_image(spec.get("image"))}
        security = spec.get("securityProfile")
        if is_mapping(security) and security.get("securityType"):
            out["securityProfile"] = {"settings": {"securityType": security["securityType"]}}
        return out

    def to_template(self, rel: PlatformRelPath, value: Any) -> tuple[TemplateRelPath, Any]:
        if rel[:1] == ("image",) and is_mapping(value):
            market = {k: value.get(k, "") for k in ("publisher", "offer", "sku", "version")}
            market["thirdPartyImage"] = value.get("type") == "MarketplaceWithPlan"
            return ("image",), {"marketplace": market}
        return rel, value


def _mapi_image(image: Any) -> Any:
    if not is_mapping(image):
        return image
    market = image.get("marketplace")
    if is_mapping(market):
        return {
            **{k: market.get(k, "") for k in ("publisher", "offer", "sku", "version")},
            "resourceID": "",
            "type": "MarketplaceWithPlan" if market.get("thirdPartyImage") else "MarketplaceNoPlan",
        }
    if isinstance(image.get("id"), str):
        return {"publisher": "", "offer": "", "sku": "", "version": "", "resourceID": image["id"]}
    return {"publisher": "", "offer": "", "sku": "", "version": "", "resourceID": "computeGallery"}


class VSphereAdapter(Adapter):
    def provider_spec(self, spec: Mapping[str, Any], failure_domain: str | None, region: str | None) -> dict[str, Any]:
        workspace = {k: spec.get(k) for k in ("server", "datacenter", "folder", "datastore", "resourcePool") if spec.get(k)}
        return {"kind": self.provider_kind, "template": spec.get("template"), "workspace": workspace,
                "network": spec.get("network")}


ADAPTERS: Mapping[str, Adapter] = {
    "AWSMachineTemplate": AwsAdapter("AWSMachineTemplate", "AWSMachineProviderConfig"),
    "GCPMachineTemplate": GcpAdapter("GCPMachineTemplate", "GCPMachineProviderSpec"),
    "AzureMachineTemplate": AzureAdapter("AzureMachineTemplate", "AzureMachineProviderSpec"),
    "VSphereMachineTemplate": VSphereAdapter("VSphereMachineTemplate", "VSphereMachineProviderSpec"),
}
