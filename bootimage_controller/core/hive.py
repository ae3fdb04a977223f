"""The fleet view of a Hive hub (SPEC section 4, `fleet`): a row per ClusterDeployment with its
MachinePools, read only. Pure: `bootimage_controller/fleet/` reads the hub and hands in plain data.

Hive's MachinePool sets a spoke pool's boot image with `spec.platform.aws.amiID` (hive #2935); it
wins over Hive's AMI override annotation and over the MCO's write on the spoke (each puts its own
back). A MachinePool whose `amiID` is not the golden image of its ClusterDeployment's release keeps
the spoke's pool on an old boot image: the row says so, with the value to set. A MachinePool without
`amiID` boots its release's image (Hive's default), which is current by construction.

A spoke is judged by its own release's image (issue 49), known exactly for `.0` releases the bundled
data has the GA installer data of, or with `--bootimages 4.16.3=FILE` (that release's own data: no
bundled source says which build each z-release shipped); otherwise by its minor's newest build only
where that cannot mislead (an amiID of an older minor is outdated whatever its z-release shipped),
else `skip ReleaseBootImageUnknown`.

Where the sources are silent (written down here and in docs/install.md): the release is the spoke's
current version, Hive's `hive.openshift.io/version-major-minor-patch` label, else the
ClusterDeployment's `status.installVersion`; the stream is the release's default; the architecture
is x86_64 unless the MachinePool's instance type is an AWS Graviton one (`m7g.large`: aarch64).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from ..constants import LABEL_HIVE_VERSION, MACHINE_POOL_KIND, Action, Reason
from ..errors import VersionError
from .fleet import ClusterRow, PoolRow, age_days
from .hypershift import PlatformImageCatalog, default_stream, minor_of
from .index import PublishedImageIndex
from .model import get_path
from .planner import is_downgrade
from .skew.versions import OcpVersion

REASON_RELEASE_IMAGE = "BootsReleaseImage"
REASON_AMI_ID_OUTDATED = "AmiIdOutdated"
REASON_RELEASE_IMAGE_UNKNOWN = "ReleaseBootImageUnknown"  # which image the spoke's own release shipped
# AWS Graviton instance families: a `g` after the generation digit (m7g, c6gn, r8g, t4g, im4gn...).
_GRAVITON = re.compile(r"^[a-z]+\d+g[a-z]*\.", re.ASCII)


def cluster_deployment_rows(
    hub: str,
    source: str,
    deployments: Sequence[Mapping[str, Any]],
    machine_pools: Sequence[Mapping[str, Any]],
    catalog: PlatformImageCatalog,
    index: PublishedImageIndex,
    now: datetime,
) -> list[ClusterRow]:
    """A row per ClusterDeployment, with the MachinePools that name it (`spec.clusterDeploymentRef`)."""
    rows = []
    for cd in deployments:
        namespace, name = str(get_path(cd, ("metadata", "namespace")) or ""), str(get_path(cd, ("metadata", "name")) or "")
        pools = [p for p in machine_pools if get_path(p, ("metadata", "namespace")) == namespace
                 and get_path(p, ("spec", "clusterDeploymentRef", "name")) == name]
        release = _release(cd)
        platform = "AWS" if get_path(cd, ("spec", "platform", "aws")) is not None else _platform_word(cd)
        rows.append(ClusterRow(
            name=f"{namespace}/{name}", source=source, platform=platform, release=release,
            install_release=_str(get_path(cd, ("status", "installVersion"))), management_cluster=hub,
            pools=tuple(machine_pool_row(p, cd, release, catalog, index, now) for p in pools),
        ))
    return rows


def machine_pool_row(
    pool: Mapping[str, Any],
    cd: Mapping[str, Any],
    release: str | None,
    catalog: PlatformImageCatalog,
    index: PublishedImageIndex,
    now: datetime,
) -> PoolRow:
    aws = get_path(pool, ("spec", "platform", "aws"))
    ami_id = _str(get_path(aws, ("amiID",)))
    instance = _str(get_path(aws, ("type",))) or ""
    arch = "aarch64" if _GRAVITON.match(instance) else "x86_64"
    stream = default_stream(release)
    region = _str(get_path(cd, ("spec", "platform", "aws", "region")))
    exact = catalog.knows_exactly(release)
    found = catalog.find(release, stream, arch, "AWS", region, exact=exact) if aws is not None else None
    target = found.image if found is not None else None
    current_build = index.aws_release(ami_id) if ami_id else None
    target_build = index.aws_release(target) if target else None
    action, reason, message = _verdict(aws is not None, ami_id, target, found.unknown or found.missing if found else None,
                                       current_build)
    if action == str(Action.PATCH) and is_downgrade(current_build, target_build):
        action, reason, message = str(Action.NOOP), str(Reason.UP_TO_DATE), (
            f"amiID {ami_id} ({current_build}) is newer than its release's golden image {target} ({target_build})")
    elif action == str(Action.PATCH) and not exact:
        action, reason, message = _judged_by_minor(release, current_build, target_build, target, index, message)
    return PoolRow(
        namespace=str(get_path(pool, ("metadata", "namespace")) or ""),
        name=str(get_path(pool, ("metadata", "name")) or ""),
        kind=MACHINE_POOL_KIND,
        stream=stream,
        architecture=arch,
        manager="hive",
        current_release=current_build,
        target_release=target_build,
        boot_image_age_days=age_days(current_build, now),
        action=action,
        reason=reason,
        message=message,
        current_openshift=index.openshift_release(current_build) if current_build else None,
        target_openshift=index.openshift_release(target_build) if target_build else None,
        current=ami_id,
        target=target,
        release=release,
    )


def _verdict(on_aws: bool, ami_id: str | None, target: str | None, why_none: str | None,
             current_build: str | None) -> tuple[str, str, str]:
    if not on_aws:
        return str(Action.SKIP), str(Reason.UNSUPPORTED_PLATFORM), "Hive has a MachinePool boot image field on AWS only"
    if not ami_id:
        return str(Action.NOOP), REASON_RELEASE_IMAGE, "no amiID: the pool boots its release's image"
    if target is None:
        return str(Action.SKIP), str(Reason.REGION_NOT_IN_STREAM), f"no golden image to compare with: {why_none}"
    if ami_id == target:
        return str(Action.NOOP), str(Reason.UP_TO_DATE), "amiID is the golden image of its release"
    if current_build is None:
        return str(Action.SKIP), str(Reason.UNKNOWN_BOOT_IMAGE), (
            f"amiID {ami_id} is not a published RHCOS AMI this controller knows; the release's is {target}")
    return str(Action.PATCH), REASON_AMI_ID_OUTDATED, (
        f"amiID {ami_id} ({current_build}) is not its release's golden image {target}: the spoke's pool stays on it; "
        f"set spec.platform.aws.amiID: {target}")


def _judged_by_minor(release: str | None, current_build: str | None, target_build: str | None, target: str | None,
                     index: PublishedImageIndex, message: str) -> tuple[str, str, str]:
    """A patch judged against the newest build of the spoke's minor, which its own z-release may not
    have shipped (issue 49: a 4.16.3 spoke, from July 2024, was flagged against an October 2025
    build). It stands only where any build of that minor is newer: an amiID of an older minor. Else
    the spoke's own release decides, and the bundled data does not know its images."""
    current_minor = index.openshift_release(current_build) if current_build else None
    if current_minor is not None and _older_minor(current_minor, release):
        return str(Action.PATCH), REASON_AMI_ID_OUTDATED, (
            f"{message} ({target_build or target} is the newest {minor_of(release)} build the bundled data knows; "
            f"{release} may have shipped an earlier one: its own coreos-bootimages ConfigMap names it)")
    return str(Action.SKIP), REASON_RELEASE_IMAGE_UNKNOWN, (
        f"the bundled data does not know which boot image OpenShift {release} shipped (only its minor's newest, "
        f"{target_build or target}, and the .0 releases of some minors); compare amiID with the spoke's "
        f"coreos-bootimages ConfigMap, or pass it with --bootimages {release}=FILE")


def _older_minor(minor: str, release: str | None) -> bool:
    try:
        return OcpVersion.parse(minor) < OcpVersion.parse(minor_of(release) or "")
    except VersionError:
        return False


def _release(cd: Mapping[str, Any]) -> str | None:
    return _str(get_path(cd, ("metadata", "labels", LABEL_HIVE_VERSION))) or _str(get_path(cd, ("status", "installVersion")))


def _platform_word(cd: Mapping[str, Any]) -> str | None:
    platform = get_path(cd, ("spec", "platform"))
    keys = [k for k in platform if isinstance(k, str)] if isinstance(platform, Mapping) else []
    return keys[0] if keys else None


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


__all__ = ["cluster_deployment_rows", "machine_pool_row"]
