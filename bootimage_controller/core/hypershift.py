"""HyperShift in the fleet view: a HostedCluster's row and its NodePools' (SPEC section 4, `fleet`).

HyperShift, not this controller, picks a NodePool's boot image: from its release's stream metadata,
per OS stream (`spec.osImageStream.name`, default rhel-9 before OpenShift 5.0 and rhel-10 from it),
architecture (`spec.arch`) and the HostedCluster's region. A stream with no image there is what
makes HyperShift set `ValidPlatformImage=False`; the row says so and names the missing key.
Pure: the fleet readers hand in the objects.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from ..constants import NODE_POOL_KIND, Action
from ..errors import VersionError
from .cluster import normalise_arch
from .fleet import ClusterRow, PoolRow, age_days
from .golden import GoldenBootImages
from .index import PublishedImageIndex
from .model import get_path
from .skew.versions import OcpVersion

# Fleet-only reasons for NodePools (HyperShift, not this controller, writes their images).
REASON_MANAGED_BY_HYPERSHIFT = "ManagedByHyperShift"
REASON_NO_PLATFORM_IMAGE = "NoPlatformImage"
REASON_IMAGE_SET_BY_NODE_POOL = "ImageSetByNodePool"
_RELEASE_TAG = re.compile(r":(\d+\.\d+\.\d+(?:-[0-9A-Za-z.]+?)?)(?:-(?:x86_64|aarch64|ppc64le|s390x|multi))?$")


@dataclass(frozen=True)
class PlatformImage:
    """The image HyperShift would boot, or the key it would miss."""

    image: str | None
    missing: str | None = None  # `aws/us-east-9/x86_64 in rhel-10 of 4.22`, when there is none
    unknown: str | None = None  # why no answer can be given (no golden data for the release)


class PlatformImageCatalog:
    """Which platform images each release ships, per stream and architecture: from `--bootimages`
    (one golden data for every release), `--bootimages RELEASE=FILE` (one release's own), or the
    bundled index's `release-streams`."""

    def __init__(self, releases: Mapping[str, Mapping[str, Mapping[str, Mapping[str, Any]]]],
                 override: Mapping[str, Mapping[str, Mapping[str, Any]]] | None = None,
                 override_source: str = "",
                 given: Mapping[str, Mapping[str, Mapping[str, Mapping[str, Any]]]] | None = None) -> None:
        self._releases = releases
        self._override = override
        self._override_source = override_source
        self._given = given or {}

    def newest_with(self, stream: str) -> str | None:
        """The newest bundled release that ships `stream` (for a forecast past the bundled data)."""
        if self._override is not None:
            return None
        having = [r for r, streams in self._releases.items() if stream in streams and minor_of(r) is not None]
        return max(having, key=lambda r: OcpVersion.parse(r)) if having else None

    def knows_exactly(self, release: str | None) -> bool:
        """Whether the images of `release` itself (`4.16.3`, not only its minor's newest build) are
        known: given for it, `--bootimages` (taken to be the release's own), or bundled (`.0`s)."""
        return (release is not None and release in self._given) or self._override is not None or (
            release is not None and release in self._releases)

    def find(self, release: str | None, stream: str, arch: str, platform: str, region: str | None,
             *, exact: bool = False) -> PlatformImage:
        """The image of `stream`/`arch` on `platform` that `release` ships. The data given for that
        very release wins; by default the newest build of its minor the data knows (HyperShift
        NodePools follow their minor's newest); `exact`: the release's own images, from data keyed by
        the whole release."""
        if release is not None and release in self._given:
            streams, where = self._given[release], f"--bootimages {release}="
        elif self._override is not None:
            streams, where = self._override, self._override_source
        elif exact and release in self._releases:
            streams, where = self._releases[str(release)], f"OpenShift {release}"
        else:
            minor = minor_of(release)
            if minor is None:
                return PlatformImage(None, unknown="the NodePool's release is unknown")
            if minor not in self._releases:
                return PlatformImage(None, unknown=f"no bundled stream data for OpenShift {minor}: pass --bootimages")
            streams, where = self._releases[minor], f"OpenShift {minor}"
        archs = streams.get(stream)
        if archs is None:
            return PlatformImage(None, missing=f"stream {stream} in {where}")
        images = archs.get(arch)
        if images is None:
            return PlatformImage(None, missing=f"{arch} in stream {stream} of {where}")
        key = platform.lower()
        if key == "aws":
            ami = (images.get("aws") or {}).get(region or "")
            return PlatformImage(ami) if ami else PlatformImage(
                None, missing=f"aws/{region or '(no region)'}/{arch} in stream {stream} of {where}")
        if key == "gcp":
            name = images.get("gcp")
            return PlatformImage(name) if name else PlatformImage(None, missing=f"gcp/{arch} in stream {stream} of {where}")
        if key == "azure":
            return PlatformImage("marketplace") if images.get("azure") else PlatformImage(
                None, missing=f"azure marketplace/{arch} in stream {stream} of {where}")
        return PlatformImage(None, unknown=f"HyperShift picks no cloud image for platform {platform}")


def catalog_from_golden(golden: GoldenBootImages) -> dict[str, dict[str, dict[str, Any]]]:
    """`--bootimages` as the catalog's per-stream form: stream -> arch -> platform images."""
    out: dict[str, dict[str, dict[str, Any]]] = {}
    for stream in golden.all_streams():
        name = f"rhel-{stream.rhel_major}" if stream.rhel_major else stream.name
        out.setdefault(name, {arch: {
            "aws": {r: e.image for r, e in (images.aws_regions or {}).items()},
            **({"gcp": images.gcp.name} if images.gcp else {}),
            **({"azure": True} if images.azure_marketplace else {}),
        } for arch, images in stream.architectures.items()})
    return out


def minor_of(release: str | None) -> str | None:
    """`4.16` of `4.16.3` (None when it is no OpenShift version)."""
    try:
        v = OcpVersion.parse(release or "")
    except VersionError:
        return None
    return f"{v.major}.{v.minor}"


def release_of_image(pullspec: Any) -> str | None:
    """`quay.io/openshift-release-dev/ocp-release:4.21.3-x86_64` -> `4.21.3` (None: a digest, or
    not a string at all in a hand-edited object)."""
    found = _RELEASE_TAG.search(pullspec) if isinstance(pullspec, str) else None
    return found.group(1) if found else None


def default_stream(release: str | None) -> str:
    """HyperShift's default OS stream: rhel-9 before OpenShift 5.0, rhel-10 from it."""
    try:
        return "rhel-10" if OcpVersion.parse(release or "") >= OcpVersion(5, 0) else "rhel-9"
    except VersionError:
        return "rhel-9"


def _region(hosted: Mapping[str, Any], platform: str) -> str | None:
    platform_spec = get_path(hosted, ("spec", "platform")) or {}
    for key in ("aws", "gcp"):
        region = get_path(platform_spec, (key, "region"))
        if isinstance(region, str) and platform.lower() == key:
            return region
    location = get_path(platform_spec, ("azure", "location"))
    return location if isinstance(location, str) else None


def hosted_release(hosted: Mapping[str, Any]) -> str | None:
    desired = get_path(hosted, ("status", "version", "desired", "version"))
    if isinstance(desired, str):
        return desired
    return release_of_image(get_path(hosted, ("spec", "release", "image")))


def node_pool_row(
    pool: Mapping[str, Any],
    hosted: Mapping[str, Any],
    catalog: PlatformImageCatalog,
    index: PublishedImageIndex,
    now: datetime,
) -> PoolRow:
    meta = pool.get("metadata") or {}
    release = get_path(pool, ("status", "version")) or release_of_image(get_path(pool, ("spec", "release", "image"))) \
        or hosted_release(hosted)
    release = release if isinstance(release, str) else None
    stream = get_path(pool, ("spec", "osImageStream", "name")) or default_stream(release)
    spec_arch = str(get_path(pool, ("spec", "arch")) or "amd64")  # Go names (amd64), as Nodes say them
    arch = normalise_arch(spec_arch) or spec_arch
    platform = str(get_path(pool, ("spec", "platform", "type")) or get_path(hosted, ("spec", "platform", "type")) or "")
    found = catalog.find(release, str(stream), arch, platform, _region(hosted, platform))
    explicit = get_path(pool, ("spec", "platform", "aws", "ami")) if platform.lower() == "aws" else None
    booted = explicit if isinstance(explicit, str) and explicit else found.image
    current_build, target_build = _build_of(platform, booted, index), _build_of(platform, found.image, index)
    valid: bool | None = None if found.unknown else found.image is not None
    if explicit:
        action, reason, message = str(Action.SKIP), REASON_IMAGE_SET_BY_NODE_POOL, f"the NodePool names {explicit}"
    elif valid is False:
        action, reason = str(Action.ERROR), REASON_NO_PLATFORM_IMAGE
        message = f"ValidPlatformImage=False: no image for {found.missing}"
    else:
        action, reason = str(Action.NOOP), REASON_MANAGED_BY_HYPERSHIFT
        message = found.unknown or "HyperShift boots the release's image for this stream"
    pinned = get_path(pool, ("spec", "osImageStream", "name"))
    after = None if pinned else stream_after_upgrade(release, arch, platform, _region(hosted, platform), catalog)
    return PoolRow(
        namespace=str(meta.get("namespace", "")),
        name=str(meta.get("name", "")),
        kind=NODE_POOL_KIND,
        stream=str(stream),
        architecture=arch,
        manager="hypershift",
        current_release=current_build,
        target_release=target_build,
        boot_image_age_days=age_days(current_build, now),
        action=action,
        reason=reason,
        message=message,
        current_openshift=index.openshift_release(current_build) if current_build else None,
        target_openshift=index.openshift_release(target_build) if target_build else None,
        current=booted,
        target=found.image,
        release=release,
        valid_platform_image=None if explicit else valid,
        missing_platform_image=found.missing if valid is False and not explicit else None,
        stream_after_upgrade=None if explicit else after,
    )


def stream_after_upgrade(release: str | None, arch: str, platform: str, region: str | None,
                         catalog: PlatformImageCatalog) -> dict[str, Any] | None:
    """A NodePool not pinned by `spec.osImageStream` moves to HyperShift's new default stream at the
    next major release (rhel-10 at 5.0, HyperShift #9328/#9372): that stream, and whether it has an
    image for the pool's platform, architecture and region (looked up in the newest bundled release
    that ships the stream, or `--bootimages`). None when the next upgrade keeps the stream."""
    now = default_stream(release)
    later = default_stream(NEXT_MAJOR)
    if now == later:
        return None
    data = catalog.newest_with(later)
    found = catalog.find(data or release, later, arch, platform, region)
    valid = None if found.unknown else found.image is not None
    return {"stream": later, "at": NEXT_MAJOR, "validPlatformImage": valid,
            "missingPlatformImage": found.missing if valid is False else None}


# The next major release, where HyperShift's default OS stream changes.
NEXT_MAJOR = "5.0.0"


def _build_of(platform: str, image: str | None, index: PublishedImageIndex) -> str | None:
    """The RHCOS build of a published AWS AMI or GCP image (None: another platform, or unknown)."""
    if not image:
        return None
    key = platform.lower()
    return index.aws_release(image) if key == "aws" else index.gcp_release(image) if key == "gcp" else None


def hosted_cluster_rows(
    management: str,
    source: str,
    hosted_clusters: Sequence[Mapping[str, Any]],
    node_pools: Sequence[Mapping[str, Any]],
    catalog: PlatformImageCatalog,
    index: PublishedImageIndex,
    now: datetime,
) -> list[ClusterRow]:
    """A row per HostedCluster, with the NodePools that name it (`spec.clusterName`, same namespace)."""
    rows = []
    for hosted in hosted_clusters:
        meta = hosted.get("metadata") or {}
        namespace, name = str(meta.get("namespace", "")), str(meta.get("name", ""))
        pools = [p for p in node_pools
                 if get_path(p, ("metadata", "namespace")) == namespace and get_path(p, ("spec", "clusterName")) == name]
        release = hosted_release(hosted)
        rows.append(ClusterRow(
            name=f"{management}/{namespace}/{name}",
            source=source,
            platform=get_path(hosted, ("spec", "platform", "type")),
            release=release,
            install_release=_install(hosted),
            node_pools=tuple(node_pool_row(p, hosted, catalog, index, now)
                             for p in sorted(pools, key=lambda p: str(get_path(p, ("metadata", "name"))))),
            management_cluster=management,
        ))
    return rows


def _install(hosted: Mapping[str, Any]) -> str | None:
    history = get_path(hosted, ("status", "version", "history"))
    if isinstance(history, list) and history and isinstance(history[-1], Mapping):
        version = history[-1].get("version")
        return version if isinstance(version, str) else None
    return None
