"""GCP (`GCPMachineProviderSpec`): `disks[i].image` of every boot disk (reference section 6).

The target is `projects/<images.gcp.project>/global/images/<images.gcp.name>`, the form the
installer writes. Only RHCOS images (`projects/rhcos-cloud/global/images/...`) are moved; one custom
boot disk leaves the whole MachineSet alone. Non-boot disks are never read or written.

`current`/`target` in the decision are image strings. With several boot disks (unusual) the
decision shows the first one that differs from the target, and there is one change per differing
boot disk.
"""

from __future__ import annotations

from dataclasses import dataclass

from ...constants import GCP_RHCOS_IMAGE_PREFIX, Platform, Reason
from ..cloud.releases import release_in_text
from ..golden import ArchBootImages
from ..model import FieldChange, JsonPath, is_mapping
from ._common import ReleaseSource, SpecReader, verify_target
from .base import RuleContext, RuleOutcome, Skip, Target, invalid_golden


@dataclass(frozen=True)
class _BootDisk:
    index: int
    image: str
    path: JsonPath  # of the disk's `image`, from the object root


class GcpRules:
    platform: Platform = Platform.GCP

    def evaluate(self, ctx: RuleContext) -> RuleOutcome:
        read = SpecReader(ctx)
        who = ctx.resource.display
        zone = read.string("zone")
        disks = _boot_disks(read)
        if not disks:
            return Skip(
                Reason.UNSUPPORTED_IMAGE_REFERENCE,
                f"{who}: {read.field('disks')} has no disk with boot: true and an image",
                location=zone,
            )
        gcp = ctx.images.gcp
        first = disks[0]
        broken = invalid_golden(ctx, first.path, "gcp")
        if broken is not None:
            return broken
        if gcp is None:
            return Skip(
                Reason.IMAGE_NOT_IN_STREAM,
                f"{who}: stream {ctx.stream.name} publishes no GCP image for {ctx.arch}",
                field=first.path,
                current=first.image,
                location=zone,
            )
        target = gcp.path
        custom = [d for d in disks if d.image != target and not d.image.startswith(GCP_RHCOS_IMAGE_PREFIX)]
        if custom:
            d = custom[0]
            return Skip(
                Reason.CUSTOM_BOOT_IMAGE,
                f"{who}: boot disk {dotted_disk(d)} uses {d.image}, not an RHCOS image from "
                f"{GCP_RHCOS_IMAGE_PREFIX}; custom boot images are left alone",
                field=d.path,
                current=d.image,
                target=target,
                target_release=gcp.release,
                location=zone,
            )
        outdated = [d for d in disks if d.image != target]
        shown = outdated[0] if outdated else first
        release, source = _current_release(ctx, shown.image)
        result = Target(
            field=shown.path,
            current=shown.image,
            target=target,
            changes=tuple(FieldChange(d.path, d.image, target) for d in outdated),
            target_release=gcp.release,
            current_release=release,
            current_release_source=str(source) if source else None,
            location=zone,
        )
        return verify_target(ctx, Platform.GCP, result, target, shown.image)


def dotted_disk(disk: _BootDisk) -> str:
    return f"disks[{disk.index}]"


def _boot_disks(read: SpecReader) -> list[_BootDisk]:
    disks = read.items("disks") or []
    found = []
    for i, disk in enumerate(disks):
        if not is_mapping(disk):
            raise read.error(("disks", i), "expected an object")
        if read.boolean("disks", i, "boot") is not True:
            continue
        image = read.string("disks", i, "image")
        if image:
            found.append(_BootDisk(i, image, read.path("disks", i, "image")))
    return found


def _current_release(ctx: RuleContext, image: str) -> tuple[str | None, ReleaseSource | None]:
    golden = ctx.golden.known_release(lambda images: _release_in(images, image))
    if golden:
        return golden, ReleaseSource.GOLDEN_DATA
    if image.startswith(GCP_RHCOS_IMAGE_PREFIX):
        indexed = ctx.facts.published.gcp_release(image)
        if indexed:
            return indexed, ReleaseSource.BUNDLED_INDEX
        # RHCOS image names spell the build id (`rhcos-9-6-20260112-0-gcp-x86-64`): the "GCP image
        # name" evidence of SPEC section 5, readable without asking the cloud.
        named = release_in_text(image.rsplit("/", 1)[-1])
        if named:
            return named, ReleaseSource.CLOUD
    return None, None


def _release_in(images: ArchBootImages, image: str) -> str | None:
    return images.gcp.release if images.gcp is not None and images.gcp.path == image else None
