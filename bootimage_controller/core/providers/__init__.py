"""Platform rules, one module per platform, behind `providers.base.PlatformRules`."""

from __future__ import annotations

from ...constants import Platform
from .aws import AwsRules
from .azure import AzureRules
from .base import PlatformRules
from .gcp import GcpRules
from .vsphere import VSphereRules

_RULES: dict[str, PlatformRules] = {
    Platform.AWS: AwsRules(),
    Platform.GCP: GcpRules(),
    Platform.AZURE: AzureRules(),
    Platform.VSPHERE: VSphereRules(),
}


def rules_for_platform(platform: str | None) -> PlatformRules | None:
    return _RULES.get(platform) if platform else None
