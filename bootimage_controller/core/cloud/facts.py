"""What the cloud said about images, as plain data the planner can read.

The planner stays pure: the controller (or `plan --cloud-verify`) asks the cloud about the images
an offline plan names, collects the answers here, and plans again with them. A lookup that failed
(throttled, timed out, no permission) is recorded as an error, which the planner turns into a
`skip` with a reason and a retry later: never a crash and never a patch.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field


@dataclass(frozen=True)
class ImageKey:
    """One image in one place: (platform, region/location, image id, AMI id, GCP path or Azure URN)."""

    platform: str
    location: str
    image: str


def image_key(platform: str, location: str | None, image: str) -> ImageKey:
    """The cloud lookup key of an image at a MachineSet's location.

    `image` is the AMI id (AWS), the `projects/<p>/global/images/<name>` path (GCP) or the
    `publisher:offer:sku:version` URN (Azure); `location` is the decision's `location` (AWS region,
    GCP zone, Azure location), "" when the providerSpec names none.
    """
    return ImageKey(platform, location or "", image)


@dataclass(frozen=True)
class CloudImage:
    key: ImageKey
    exists: bool
    available: bool = False  # AWS `available`, GCP `READY`, Azure: the version exists
    owner: str | None = None  # AWS OwnerId
    name: str | None = None
    description: str | None = None
    release: str | None = None  # RHCOS build id read from the name/description/version
    creation_date: str | None = None
    # Why the cloud calls it deprecated (AWS DeprecationTime in the past, GCP deprecated.state), or None.
    deprecated: str | None = None


@dataclass(frozen=True)
class MarketplaceCandidates:
    """AWS Marketplace AMIs of one product in one region (for marketplace resolution)."""

    region: str
    product_id: str
    images: tuple[CloudImage, ...]


@dataclass(frozen=True)
class TemplateKey:
    """One VM (template) name looked up in one datacenter of one vCenter."""

    server: str
    datacenter: str
    folder: str  # the workspace folder (inventory path): a VM elsewhere is the customer's
    name: str


@dataclass(frozen=True)
class TemplateVm:
    """What vCenter says about a VM of that name (the one in the folder when there are several)."""

    name: str
    in_folder: bool
    folder: str | None  # where it is (inventory path), for messages
    is_template: bool
    release: str | None  # vApp product version, else our record on the VM (see vsphere.vcenter)
    release_from: str | None = None  # "product version" or "record"


@dataclass(frozen=True)
class CloudFacts:
    images: Mapping[ImageKey, CloudImage] = field(default_factory=dict)
    errors: Mapping[ImageKey, str] = field(default_factory=dict)
    marketplace: Mapping[tuple[str, str], MarketplaceCandidates] = field(default_factory=dict)
    marketplace_errors: Mapping[tuple[str, str], str] = field(default_factory=dict)
    # vSphere: every name looked up (None: no VM of that name in the datacenter), failed lookups,
    # and the vCenters that could not be asked at all (no credentials for that server), with why.
    templates: Mapping[TemplateKey, TemplateVm | None] = field(default_factory=dict)
    template_errors: Mapping[TemplateKey, str] = field(default_factory=dict)
    vcenters_unavailable: Mapping[str, str] = field(default_factory=dict)
    # A placement's datacenter or folder that vCenter does not have: (what, path), e.g. ("folder", "/DC0/vm/x").
    inventory_missing: Mapping[TemplateKey, tuple[str, str]] = field(default_factory=dict)

    def image(self, key: ImageKey) -> CloudImage | None:
        return self.images.get(key)

    def error(self, key: ImageKey) -> str | None:
        return self.errors.get(key)
