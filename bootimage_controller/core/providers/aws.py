"""AWS (`AWSMachineProviderConfig`): the `ami` field (SPEC section 2 rule 6, reference section 6).

The target is `architectures[arch].images.aws.regions[placement.region].image`. Only an AMI known to
be RHCOS is moved: one in any stream of the ConfigMap, in the bundled index of published images, or
owned by Red Hat per EC2. AWS Marketplace AMIs resolve to the newest marketplace AMI of the same
product whose RHEL major.minor is at most the stream's. The patch replaces the whole `ami` object
with `{"id": <new>}`: `id`, `arn` and `filters` are mutually exclusive.

Checks run stream side first (images.aws, region) so a MachineSet the golden data cannot update is
reported as such, whatever its image; a Marketplace AMI (known only from cloud answers) is resolved
from the cloud instead and does not need its region in the stream.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from ...constants import AWS_MARKETPLACE_OWNER, AWS_RED_HAT_OWNER, Platform, Reason
from ..cloud.facts import CloudImage
from ..cloud.marketplace import image_release, marketplace_product_id, pick_marketplace_image, version_token
from ..cloud.releases import release_in_text
from ..model import FieldChange
from ._common import ReleaseSource, SpecReader, image_key, verify_target
from .base import RuleContext, RuleOutcome, Skip, Target, invalid_golden


@dataclass(frozen=True)
class _Ami:
    """The parsed `ami` field."""

    raw: Any  # the `ami` object as it is in the providerSpec
    id: str
    region: str


@dataclass(frozen=True)
class _Known:
    release: str | None
    source: ReleaseSource


class AwsRules:
    platform: Platform = Platform.AWS

    def evaluate(self, ctx: RuleContext) -> RuleOutcome:
        read = SpecReader(ctx)
        ami_obj = read.mapping("ami")
        ami_id = read.string("ami", "id")
        if not ami_id:
            given = ", ".join(sorted(ami_obj)) if ami_obj else "nothing"
            return Skip(
                Reason.UNSUPPORTED_IMAGE_REFERENCE,
                f"{ctx.resource.display}: {read.field('ami')} gives {given} but no id; only AMIs "
                "referenced by id are updated (AMIs found by filters or ARN are left alone)",
                field=read.path("ami"),
                current=ami_obj,
            )
        region = read.string("placement", "region", required=True)
        assert region is not None
        ami = _Ami(ami_obj, ami_id, region)
        cloud = _cloud_image(ctx, ami)
        if cloud is not None and cloud.exists and cloud.owner == AWS_MARKETPLACE_OWNER:
            return _Marketplace(ctx, read, ami, cloud).resolve()
        return _standard(ctx, read, ami, cloud)


def _cloud_image(ctx: RuleContext, ami: _Ami) -> CloudImage | None:
    if ctx.facts.cloud is None:
        return None
    return ctx.facts.cloud.image(image_key(Platform.AWS, ami.region, ami.id))


def _standard(ctx: RuleContext, read: SpecReader, ami: _Ami, cloud: CloudImage | None) -> RuleOutcome:
    who = ctx.resource.display
    field = read.path("ami")
    regions = ctx.images.aws_regions
    broken = invalid_golden(ctx, field, "aws", f"aws/{ami.region}")
    if broken is not None:
        return broken
    if regions is None:
        return Skip(
            Reason.IMAGE_NOT_IN_STREAM,
            f"{who}: stream {ctx.stream.name} publishes no AWS images for {ctx.arch}",
            field=field,
            current=ami.raw,
            location=ami.region,
        )
    entry = regions.get(ami.region)
    known = _known_rhcos(ctx, ami.id, cloud)
    if entry is None:
        return Skip(
            Reason.REGION_NOT_IN_STREAM,
            f"{who}: stream {ctx.stream.name} publishes no {ctx.arch} AMI in region {ami.region}; "
            "copy an RHCOS AMI into the region and reference it by filters, or move the MachineSet",
            field=field,
            current=ami.raw,
            current_release=known.release if known else None,
            current_release_source=str(known.source) if known else None,
            location=ami.region,
        )
    target = Target(
        field=field,
        current=ami.raw,
        target={"id": entry.image},
        changes=(FieldChange(field, ami.raw, {"id": entry.image}),),
        target_release=entry.release,
        location=ami.region,
    )
    if ami.id == entry.image:
        # The golden AMI itself: nothing to classify.
        return _with_release(target, _Known(entry.release, ReleaseSource.GOLDEN_DATA))
    winli = _winli_skip(ctx, ami, target)
    if winli is not None:
        return winli
    if known is not None:
        return verify_target(ctx, Platform.AWS, _with_release(target, known), entry.image, ami.id)
    return _not_known(ctx, read, ami, cloud, target)


def _with_release(target: Target, known: _Known) -> Target:
    return replace(target, current_release=known.release, current_release_source=str(known.source))


def _winli_skip(ctx: RuleContext, ami: _Ami, target: Target) -> Skip | None:
    release = ctx.facts.published.aws_winli_release(ami.id)
    if release is None:
        return None
    # Red Hat owns these too, but moving one to the plain AMI would drop its Windows licence.
    return Skip(
        Reason.CUSTOM_BOOT_IMAGE,
        f"{ctx.resource.display}: AMI {ami.id} is a Windows License Included RHCOS AMI ({release}); "
        "those are not moved to the stream's regular AMI",
        field=target.field,
        current=ami.raw,
        current_release=release,
        current_release_source=str(ReleaseSource.BUNDLED_INDEX),
        location=ami.region,
        target=target.target,
        target_release=target.target_release,
    )


def _known_rhcos(ctx: RuleContext, ami_id: str, cloud: CloudImage | None) -> _Known | None:
    """Evidence that `ami_id` is an RHCOS AMI, best first: golden data, bundled index, EC2 owner."""
    golden = ctx.golden.aws_release(ami_id)
    if golden:
        return _Known(golden, ReleaseSource.GOLDEN_DATA)
    indexed = ctx.facts.published.aws_release(ami_id)
    if indexed:
        return _Known(indexed, ReleaseSource.BUNDLED_INDEX)
    if cloud is not None and cloud.exists and cloud.owner == AWS_RED_HAT_OWNER:
        release = cloud.release or release_in_text(cloud.name) or release_in_text(cloud.description)
        return _Known(release, ReleaseSource.CLOUD)
    return None


# Why an unknown AMI's next write depends on EC2 (MCO main's owner-based rule, which ours follows).
ASK_EC2_OWNER = (f"whether EC2 says Red Hat ({AWS_RED_HAT_OWNER}) or the AWS Marketplace ({AWS_MARKETPLACE_OWNER}) "
                 "owns the AMI: the Machine Config Operator and this controller write an AMI they do not know "
                 "only then")


def _not_known(ctx: RuleContext, read: SpecReader, ami: _Ami, cloud: CloudImage | None, target: Target) -> Skip:
    who = f"{ctx.resource.display}: AMI {ami.id} in {ami.region}"
    ask: str | None = None  # EC2 was asked, or not: set below where it was not
    field = read.path("ami")
    if cloud is not None and cloud.exists and cloud.owner:
        return Skip(
            Reason.CUSTOM_BOOT_IMAGE,
            f"{who} is owned by AWS account {cloud.owner}, not Red Hat ({AWS_RED_HAT_OWNER}) or the "
            f"AWS Marketplace ({AWS_MARKETPLACE_OWNER}); custom boot images are left alone",
            field=field,
            current=ami.raw,
            location=ami.region,
            target=target.target,
            target_release=target.target_release,
        )
    error = ctx.facts.cloud.error(image_key(Platform.AWS, ami.region, ami.id)) if ctx.facts.cloud else None
    if error is not None:
        return Skip(
            Reason.CLOUD_UNAVAILABLE,
            f"{who} is not a published RHCOS AMI the controller knows, and EC2 could not be asked: "
            f"{error}; will retry",
            field=field,
            current=ami.raw,
            location=ami.region,
        )
    if cloud is not None and not cloud.exists:
        why = "does not exist in EC2 (deregistered?), so it cannot be identified as RHCOS"
    elif ctx.facts.cloud is not None and Platform.AWS in ctx.facts.cloud_platforms:
        why = "is not a published RHCOS AMI the controller knows, and EC2 gave no owner for it"
    elif ctx.facts.cloud is not None:
        # Cloud verification ran, without AWS credentials: advising to run it would go in circles.
        ask = ASK_EC2_OWNER + " (this run had no AWS credentials to ask with)"
        why = (
            "is not in the golden data or the bundled index of published RHCOS AMIs, and cloud "
            "verification had no AWS credentials to ask EC2 with (give the aws-cloud-credentials Secret, "
            f"or AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY); or check that Red Hat ({AWS_RED_HAT_OWNER}) "
            "owns the AMI and set it to the stream's AMI by hand"
        )
    else:
        ask = ASK_EC2_OWNER + ": run plan --cloud-verify (or give the daemon AWS credentials) to ask"
        why = (
            "is not in the golden data or the bundled index of published RHCOS AMIs; run with cloud "
            "verification (plan --cloud-verify, or AWS credentials for the daemon) so EC2 can tell "
            f"whether Red Hat ({AWS_RED_HAT_OWNER}) owns it, or check the AMI and set it to the "
            "stream's AMI by hand"
        )
    return Skip(
        Reason.UNKNOWN_BOOT_IMAGE,
        f"{who} {why}",
        field=field,
        current=ami.raw,
        location=ami.region,
        target=target.target,
        target_release=target.target_release,
        ask_cloud=ask,
    )


# --- AWS Marketplace ---------------------------------------------------------------------------




class _Marketplace:
    """Reference section 6, AWS main: newest Marketplace AMI of the product, RHEL <= the stream's."""

    def __init__(self, ctx: RuleContext, read: SpecReader, ami: _Ami, current: CloudImage) -> None:
        self.ctx = ctx
        self.ami = ami
        self.current = current
        self.field = read.path("ami")
        self.who = f"{ctx.resource.display}: Marketplace AMI {ami.id} in {ami.region}"

    def skip(self, reason: Reason, message: str) -> Skip:
        return Skip(
            reason,
            f"{self.who} {message}",
            field=self.field,
            current=self.ami.raw,
            current_release=image_release(self.current),
            current_release_source=str(ReleaseSource.CLOUD),
            location=self.ami.region,
        )

    def resolve(self) -> RuleOutcome:
        product = marketplace_product_id(self.current.name)
        if product is None:
            return self.skip(
                Reason.UNKNOWN_BOOT_IMAGE,
                f"has no product id (trailing UUID) in its name {self.current.name!r}; cannot find its successor",
            )
        wanted_release = self._wanted_release()
        wanted = version_token(wanted_release)
        if wanted is None:
            return self.skip(
                Reason.MARKETPLACE_IMAGE_NOT_FOUND,
                f"cannot be resolved: stream {self.ctx.stream.name} gives no AWS release for {self.ctx.arch}",
            )
        cloud = self.ctx.facts.cloud
        assert cloud is not None  # a Marketplace AMI is known only from cloud answers
        error = cloud.marketplace_errors.get((self.ami.region, product))
        if error is not None:
            return self.skip(
                Reason.CLOUD_UNAVAILABLE, f"could not list Marketplace AMIs of product {product}: {error}; will retry"
            )
        listing = cloud.marketplace.get((self.ami.region, product))
        if listing is None:
            return self.skip(
                Reason.UNKNOWN_BOOT_IMAGE,
                f"belongs to product {product}, whose Marketplace AMIs were not looked up; run with "
                "cloud verification to resolve it",
            )
        best = pick_marketplace_image(listing.images, wanted_release)
        if best is None:
            return self.skip(
                Reason.MARKETPLACE_IMAGE_NOT_FOUND,
                f"has no available successor in product {product} with RHEL {wanted[0]}.{wanted[1]} or "
                f"older ({len(listing.images)} Marketplace AMIs listed)",
            )
        new = {"id": best.key.image}
        # No generic rule 9 check: the candidate list is the cloud's own answer, and only
        # available AMIs were considered.
        return Target(
            field=self.field,
            current=self.ami.raw,
            target=new,
            changes=(FieldChange(self.field, self.ami.raw, new),),
            target_release=image_release(best),
            current_release=image_release(self.current),
            current_release_source=str(ReleaseSource.CLOUD),
            location=self.ami.region,
        )

    def _wanted_release(self) -> str | None:
        release = self.ctx.images.artifact_releases.get("aws")
        if version_token(release) is not None:
            return release
        entry = (self.ctx.images.aws_regions or {}).get(self.ami.region)
        if entry is None and self.ctx.images.aws_regions:
            entry = next(iter(self.ctx.images.aws_regions.values()))
        return entry.release if entry else None


