"""Azure (`AzureMachineProviderSpec`): the `image` object (reference section 6, Azure).

The image set comes from the current image: a legacy uploaded image (`resourceID` set: an image
gallery or managed image from installers <= 4.19) or the unpaid ARO image (publisher
`azureopenshift`) moves to the `no-purchase-plan` marketplace image; paid images keep their offer
(`redhat` -> ocp/opp/oke, `redhat-limited` -> the EMEA sets). The Hyper-V generation is kept:
legacy images by `gen2` in the resource id, no-plan images by `v2` or `gen2` in the SKU (aarch64 is
always Gen2; `gen2` is our addition: the RHEL 10 SKU `aro_5-0_x64_gen2` has no `v2`, so the MCO's
rule would flip a MachineSet it just moved to Gen2 back to Gen1), paid images by the absence of
`gen1` in the SKU. All these matches ignore case (Azure
resource ids are case-insensitive; the MCO matches case-sensitively, which only differs for
hand-written values).

Comparison: the whole `image` object, read as the Machine API's typed struct reads it (the six
string fields, a missing one read as ""). So an image without `resourceID` equals a target with
`resourceID: ""`, while a missing `type` differs from `MarketplaceNoPlan` (the MCO's DeepEqual on
the typed struct behaves the same). `current` in the decision is that normalised object; the
change's `old` value is the object exactly as stored. The patch replaces `image` as a whole.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import Any

from ...constants import Platform, Reason
from ..golden import ArchBootImages, AzureMarketplaceImage
from ..model import FieldChange
from ._common import ReleaseSource, SpecReader, verify_target
from .base import RuleContext, RuleOutcome, Skip, Target, invalid_golden

IMAGE_FIELDS = ("publisher", "offer", "sku", "version", "resourceID", "type")
NO_PURCHASE_PLAN = "no-purchase-plan"
UNPAID_PUBLISHER = "azureopenshift"
TYPE_NO_PLAN = "MarketplaceNoPlan"
TYPE_WITH_PLAN = "MarketplaceWithPlan"
GEN1, GEN2 = "hyperVGen1", "hyperVGen2"
UNSUPPORTED_ARCHES = frozenset({"ppc64le", "s390x"})

# (publisher, offer) of paid images -> marketplace image set.
_PAID_VARIANTS = {
    (publisher, f"rh-{product}-worker"): f"{product}{suffix}"
    for publisher, suffix in (("redhat", ""), ("redhat-limited", "-emea"))
    for product in ("ocp", "opp", "oke")
}


@dataclass(frozen=True)
class _Image:
    raw: Any  # as stored in the providerSpec
    fields: dict[str, str]  # the six API fields, missing ones ""

    def get(self, name: str) -> str:
        return self.fields[name]


class AzureRules:
    platform: Platform = Platform.AZURE

    def evaluate(self, ctx: RuleContext) -> RuleOutcome:
        read = SpecReader(ctx)
        who = ctx.resource.display
        location = read.string("location")
        if ctx.arch in UNSUPPORTED_ARCHES:
            return Skip(
                Reason.UNSUPPORTED_ARCHITECTURE,
                f"{who}: Azure boot images are not managed for {ctx.arch}",
                location=location,
            )
        security_type = read.string("securityProfile", "settings", "securityType")
        if security_type:
            return _security_type_skip(ctx, read, security_type, location)
        image = _read_image(read)
        field = read.path("image")
        variant = _variant(image)
        if variant is None:
            return Skip(
                Reason.CUSTOM_BOOT_IMAGE,
                f"{who}: image publisher {image.get('publisher')!r} offer {image.get('offer')!r} is not an "
                "RHCOS marketplace image or a legacy uploaded image; custom boot images are left alone",
                field=field,
                current=image.fields,
                location=location,
            )
        generation, gen_why = _generation(image, variant, ctx.arch)
        release, source = _current_release(ctx, image)

        def missing(what: str) -> Skip:
            return Skip(
                Reason.MARKETPLACE_DATA_MISSING,
                f"{who}: stream {ctx.stream.name} has {what} for {ctx.arch}; needed for the {variant} "
                f"{generation} image ({gen_why})",
                field=field,
                current=image.fields,
                current_release=release,
                current_release_source=str(source) if source else None,
                location=location,
            )

        broken = invalid_golden(ctx, field, "azure", f"azure/{variant}/{generation}")
        if broken is not None:
            return broken
        if ctx.images.azure_marketplace is None:
            return missing("no rhel-coreos-extensions.marketplace.azure data")
        found = ctx.images.azure_image(variant, generation)
        if found is None:
            return missing(f"no marketplace.azure.{variant}.{generation} image")
        new = _target_image(found, variant)
        target = Target(
            field=field,
            current=image.fields,
            target=new,
            changes=(FieldChange(field, image.raw, new),),
            target_release=found.version,
            current_release=release,
            current_release_source=str(source) if source else None,
            location=location,
        )
        return verify_target(ctx, Platform.AZURE, replace(target, warning=_not_the_installers(image)), urn(found))


def _security_type_skip(ctx: RuleContext, read: SpecReader, security_type: str, location: str | None) -> Skip:
    """Trusted Launch and confidential VMs: left alone, counted as skipped (the MCO since #6404).

    The skew verdict then judges the image such a MachineSet keeps, so say what it is when the
    marketplace data or the bundled index knows it (a gallery image says nothing).
    """
    image = _read_image(read) if read.mapping("image") is not None else None
    release, source = _current_release(ctx, image) if image is not None else (None, None)
    return Skip(
        Reason.UNSUPPORTED_SECURITY_TYPE,
        f"{ctx.resource.display}: securityType {security_type} (Trusted Launch / confidential VMs) needs images "
        "the marketplace data does not name; boot images of such MachineSets are left alone",
        field=read.path("image") if image is not None else None,
        current=image.fields if image is not None else None,
        current_release=release,
        current_release_source=str(source) if source else None,
        location=location,
    )


def urn(image: AzureMarketplaceImage) -> str:
    return f"{image.publisher}:{image.offer}:{image.sku}:{image.version}"


def _read_image(read: SpecReader) -> _Image:
    raw = read.mapping("image")
    if raw is None:
        raise read.error(("image",), "missing")
    fields = {name: read.string("image", name) or "" for name in IMAGE_FIELDS}
    return _Image(raw, fields)


# The images the installer uploaded (<= 4.19): `gallery_<infraID>/images/<infraID>[-gen2]/versions/latest`,
# or a managed image `.../Microsoft.Compute/images/<infraID>[-gen2]` (openshift/installer machines.go).
_INSTALLER_UPLOAD = re.compile(r"/galleries/gallery_[^/]+/images/[^/]+/versions/latest$|"
                               r"/providers/Microsoft\.Compute/images/[^/]+$", re.IGNORECASE)


def _not_the_installers(image: _Image) -> str | None:
    """A `resourceID` that is not the installer's upload: a customer's gallery image, replaced all
    the same (the MCO takes any resourceID for a legacy upload, and so do we, to agree with it).
    Said as a warning with the fix (issue 49), not decided otherwise."""
    resource_id = image.get("resourceID")
    if not resource_id or _INSTALLER_UPLOAD.search(resource_id):
        return None
    return (f"image.resourceID {resource_id} is not the installer's upload (gallery_<infraID>/.../versions/latest): "
            "if it is your own image, it is replaced all the same (the Machine Config Operator takes any "
            "resourceID for a legacy upload); to keep it, leave the MachineSet out of managedBootImages (a label and "
            "a Partial machineResourceSelector)")


def _variant(image: _Image) -> str | None:
    if image.get("resourceID") or image.get("publisher") == UNPAID_PUBLISHER:
        return NO_PURCHASE_PLAN
    return _PAID_VARIANTS.get((image.get("publisher"), image.get("offer")))


def _generation(image: _Image, variant: str, arch: str) -> tuple[str, str]:
    """The Hyper-V generation to keep, and why (for messages)."""
    resource_id = image.get("resourceID")
    sku = image.get("sku").lower()
    if resource_id:
        gen2 = "gen2" in resource_id.lower()
        return (GEN2, "'gen2' in image.resourceID") if gen2 else (GEN1, "no 'gen2' in image.resourceID")
    if variant == NO_PURCHASE_PLAN:
        if arch == "aarch64":
            return GEN2, "aarch64 is Gen2 only"
        # The MCO looks for "v2" only (`420-v2`); the RHEL 10 SKUs spell it `aro_5-0_x64_gen2`, which
        # it would read as Gen1 right after moving a Gen2 MachineSet there.
        if "v2" in sku or "gen2" in sku:
            return GEN2, "'v2' or 'gen2' in image.sku"
        return GEN1, "no 'v2' or 'gen2' in image.sku"
    return (GEN1, "'gen1' in image.sku") if "gen1" in sku else (GEN2, "no 'gen1' in image.sku")


def _target_image(found: AzureMarketplaceImage, variant: str) -> dict[str, str]:
    return {
        "publisher": found.publisher,
        "offer": found.offer,
        "sku": found.sku,
        "version": found.version,
        "resourceID": "",
        "type": TYPE_NO_PLAN if variant == NO_PURCHASE_PLAN else TYPE_WITH_PLAN,
    }


def _current_release(ctx: RuleContext, image: _Image) -> tuple[str | None, ReleaseSource | None]:
    if image.get("resourceID") or not image.get("version"):
        return None, None  # an uploaded image says nothing about its release
    golden = ctx.golden.known_release(lambda images: _release_in(images, image))
    if golden:
        return golden, ReleaseSource.GOLDEN_DATA
    indexed = ctx.facts.published.azure_release(
        image.get("publisher"), image.get("offer"), image.get("sku"), image.get("version")
    )
    if indexed:
        return indexed, ReleaseSource.BUNDLED_INDEX
    return None, None


def _release_in(images: ArchBootImages, image: _Image) -> str | None:
    for gens in (images.azure_marketplace or {}).values():
        for m in gens.values():
            if (m.publisher, m.offer, m.sku, m.version) == (
                image.get("publisher"),
                image.get("offer"),
                image.get("sku"),
                image.get("version"),
            ):
                return m.version
    return None
