"""The fleet view (SPEC section 4, `fleet`): one row per cluster, built from what `plan` decides for
it, and one row per HyperShift HostedCluster with its NodePools. Pure: `bootimage_controller/fleet/`
reads the clusters and hands in plain data.

What a row says, and where it comes from:
- pools: every MachineSet, ControlPlaneMachineSet and Cluster API pool of the cluster, with the
  decision `plan` makes for it (the same function, so a fleet row never disagrees with `plan`), its
  boot image's age (RHCOS build ids carry their build date) and the OpenShift release that shipped it;
- skew: the verdict `plan` reaches, and the pools that would hold the next upgrade (below the limit,
  on the wrong RHEL stream, or in error while enforcement is Automatic);
- HostedClusters: HyperShift picks a NodePool's boot image from the release's stream metadata, per
  stream (`spec.osImageStream.name`, default rhel-9 before OpenShift 5.0 and rhel-10 from it),
  architecture and region; a stream with no image there is what makes HyperShift set
  `ValidPlatformImage=False`, so the row says so and names the missing key.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from ..constants import NODE_POOL_KIND, Action
from ..errors import VersionError
from .golden import GoldenBootImages
from .index import PublishedImageIndex
from .model import BootImageDecision
from .skew.verdict import SkewVerdict
from .skew.versions import OcpVersion, parse_rhcos_version

# Fleet-only reasons for NodePools (HyperShift, not this controller, writes their images).
REASON_MANAGED_BY_HYPERSHIFT = "ManagedByHyperShift"
REASON_NO_PLATFORM_IMAGE = "NoPlatformImage"
REASON_IMAGE_SET_BY_NODE_POOL = "ImageSetByNodePool"
# NodePool `spec.arch` (Go names) -> stream metadata architecture.
NODE_POOL_ARCHES = {"amd64": "x86_64", "arm64": "aarch64", "ppc64le": "ppc64le", "s390x": "s390x"}
_RELEASE_TAG = re.compile(r":(\d+\.\d+\.\d+(?:-[0-9A-Za-z.]+?)?)(?:-(?:x86_64|aarch64|ppc64le|s390x|multi))?$")


@dataclass(frozen=True)
class PoolRow:
    """One pool of a cluster: a MachineSet (or CPMS, CAPI pool) or a HyperShift NodePool."""

    namespace: str
    name: str
    kind: str
    stream: str | None
    architecture: str | None
    manager: str | None
    current_release: str | None  # the RHCOS build it boots (plan's `currentRelease`)
    target_release: str | None
    boot_image_age_days: int | None
    action: str
    reason: str
    message: str = ""
    current_openshift: str | None = None  # the OpenShift release that shipped the current build
    target_openshift: str | None = None
    # The boot image field's value, as in plan (`current`/`target`; a NodePool: the image id).
    current: Any = None
    target: Any = None
    # NodePools only: its OpenShift release, and does its stream have an image for its platform,
    # arch and region?
    release: str | None = None
    valid_platform_image: bool | None = None
    missing_platform_image: str | None = None

    def to_json(self, node_pool: bool = False) -> dict[str, Any]:
        out: dict[str, Any] = {
            "namespace": self.namespace,
            "name": self.name,
            "kind": self.kind,
            "stream": self.stream,
            "architecture": self.architecture,
            "manager": self.manager,
            "currentRelease": self.current_release,
            "targetRelease": self.target_release,
            "bootImageAge": self.boot_image_age_days,
            "action": self.action,
            "reason": self.reason,
            "current": self.current,
            "target": self.target,
        }
        if node_pool:
            out["release"] = self.release
            out["validPlatformImage"] = self.valid_platform_image
            out["missingPlatformImage"] = self.missing_platform_image
        return out


@dataclass(frozen=True)
class ClusterRow:
    """One cluster of the fleet (or one HostedCluster of a management cluster)."""

    name: str
    source: str
    platform: str | None = None
    release: str | None = None
    install_release: str | None = None
    error: str | None = None
    skew: Mapping[str, Any] | None = None
    held_by: tuple[str, ...] = ()
    pools: tuple[PoolRow, ...] = ()
    node_pools: tuple[PoolRow, ...] | None = None  # HostedCluster rows only
    management_cluster: str | None = None

    @property
    def upgrades_held(self) -> bool:
        return self.skew is not None and self.skew.get("upgradeable") is False

    @property
    def every_pool(self) -> tuple[PoolRow, ...]:
        return self.pools + (self.node_pools or ())

    @property
    def oldest_age_days(self) -> int | None:
        ages = [p.boot_image_age_days for p in self.every_pool if p.boot_image_age_days is not None]
        return max(ages) if ages else None

    @property
    def status(self) -> str:
        """One word for the table and the page, worst first: error, held, invalid-image, degraded,
        outdated, ok."""
        if self.error is not None:
            return "error"
        if self.upgrades_held:
            return "held"
        pools = self.every_pool
        if any(p.valid_platform_image is False for p in pools):
            return "invalid-image"
        if any(p.action == Action.ERROR for p in pools):
            return "degraded"
        if any(p.action == Action.PATCH for p in pools):
            return "outdated"
        return "ok"

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "name": self.name,
            "source": self.source,
            "platform": self.platform,
            "release": self.release,
            "installRelease": self.install_release,
            "error": self.error,
            "status": self.status,
            "skew": dict(self.skew) if self.skew is not None else None,
            "heldBy": list(self.held_by),
            "pools": [p.to_json() for p in self.pools],
        }
        if self.node_pools is not None:
            out["managementCluster"] = self.management_cluster
            out["nodePools"] = [p.to_json(node_pool=True) for p in self.node_pools]
        return out


STATUS_ORDER = ("error", "held", "invalid-image", "degraded", "outdated", "ok")


def worst_first(rows: Iterable[ClusterRow]) -> list[ClusterRow]:
    """Errors, then held upgrades, then the rest; within each, the oldest boot image first."""
    return sorted(rows, key=lambda r: (STATUS_ORDER.index(r.status), -(r.oldest_age_days or -1), r.name))


def failed_cluster(name: str, source: str, error: str) -> ClusterRow:
    return ClusterRow(name=name, source=source, error=error)


# ---- a standalone cluster, from plan's decisions ------------------------------------------------


def boot_image_age_seconds(build: str | None, now: datetime) -> float | None:
    """Seconds since the RHCOS build `build` was made (None: not a build id we can date)."""
    if not build:
        return None
    try:
        built = parse_rhcos_version(build).built
    except VersionError:
        return None
    return max(0.0, (now - built).total_seconds()) if built is not None else None


def age_days(build: str | None, now: datetime) -> int | None:
    seconds = boot_image_age_seconds(build, now)
    return int(seconds // 86400) if seconds is not None else None


def releases_behind(current: str | None, target: str | None) -> int | None:
    """OpenShift minor releases from `current` to `target` (`4.16`, `4.22`: 6); None unless both are
    releases of one major."""
    try:
        a, b = OcpVersion.parse(current or ""), OcpVersion.parse(target or "")
    except VersionError:
        return None
    return max(0, b.minor - a.minor) if a.major == b.major else None


def pool_row(d: BootImageDecision, index: PublishedImageIndex, now: datetime) -> PoolRow:
    shown = d.to_json()  # `current`/`target` exactly as plan prints them
    return PoolRow(
        namespace=d.namespace,
        name=d.name,
        kind=d.kind,
        stream=d.stream,
        architecture=d.architecture,
        manager=str(d.manager),
        current_release=d.current_release,
        target_release=d.target_release,
        boot_image_age_days=age_days(d.current_release, now),
        action=str(d.action),
        reason=d.reason,
        message=d.message,
        current_openshift=index.openshift_release(d.current_release) if d.current_release else None,
        target_openshift=index.openshift_release(d.target_release) if d.target_release else None,
        current=shown["current"],
        target=shown["target"],
    )


def held_by(verdict: SkewVerdict, decisions: Sequence[BootImageDecision]) -> tuple[str, ...]:
    """The pools that would hold the next upgrade, as `namespace/name`."""
    if verdict.upgradeable:
        return ()
    named = [*verdict.below_limit, *verdict.offenders]
    if not named:  # held because boot image updates are degraded (Automatic): the pools in error
        named = [d.key for d in decisions if d.action is Action.ERROR]
    return tuple(dict.fromkeys(named))


@dataclass(frozen=True)
class ClusterFactsForFleet:
    """What a fleet row says of the cluster itself."""

    platform: str | None
    release: str | None
    install_release: str | None


def cluster_row(
    name: str,
    source: str,
    facts: ClusterFactsForFleet,
    decisions: Sequence[BootImageDecision],
    verdict: SkewVerdict,
    index: PublishedImageIndex,
    now: datetime,
) -> ClusterRow:
    return ClusterRow(
        name=name,
        source=source,
        platform=facts.platform,
        release=facts.release,
        install_release=facts.install_release,
        skew=verdict.to_json(),
        held_by=held_by(verdict, decisions),
        pools=tuple(pool_row(d, index, now) for d in decisions),
    )


def cluster_releases(cluster_version: Mapping[str, Any] | None) -> tuple[str | None, str | None]:
    """(current, install) from a ClusterVersion: the desired version, and the oldest history entry."""
    status = (cluster_version or {}).get("status") or {}
    desired = (status.get("desired") or {}).get("version") if isinstance(status, Mapping) else None
    history = status.get("history") if isinstance(status, Mapping) else None
    entries = [h for h in history if isinstance(h, Mapping)] if isinstance(history, list) else []
    current = desired if isinstance(desired, str) else None
    if current is None:
        completed = [h.get("version") for h in entries if h.get("state") == "Completed"]
        current = next((v for v in completed if isinstance(v, str)), None)
    install = entries[-1].get("version") if entries else None
    return current, install if isinstance(install, str) else None


# ---- HyperShift ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class PlatformImage:
    """The image HyperShift would boot, or the key it would miss."""

    image: str | None
    missing: str | None = None  # `aws/us-east-9/x86_64 in rhel-10 of 4.22`, when there is none
    unknown: str | None = None  # why no answer can be given (no golden data for the release)


class PlatformImageCatalog:
    """Which platform images each release ships, per stream and architecture: from `--bootimages`
    (one golden data for every release) or the bundled index's `release-streams`."""

    def __init__(self, releases: Mapping[str, Mapping[str, Mapping[str, Mapping[str, Any]]]],
                 override: Mapping[str, Mapping[str, Mapping[str, Any]]] | None = None,
                 override_source: str = "") -> None:
        self._releases = releases
        self._override = override
        self._override_source = override_source

    def find(self, release: str | None, stream: str, arch: str, platform: str, region: str | None) -> PlatformImage:
        if self._override is not None:
            streams, where = self._override, self._override_source
        else:
            minor = _minor(release)
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


def _minor(release: str | None) -> str | None:
    try:
        v = OcpVersion.parse(release or "")
    except VersionError:
        return None
    return f"{v.major}.{v.minor}"


def release_of_image(pullspec: str | None) -> str | None:
    """`quay.io/openshift-release-dev/ocp-release:4.21.3-x86_64` -> `4.21.3` (None: a digest)."""
    found = _RELEASE_TAG.search(pullspec or "")
    return found.group(1) if found else None


def default_stream(release: str | None) -> str:
    """HyperShift's default OS stream: rhel-9 before OpenShift 5.0, rhel-10 from it."""
    try:
        return "rhel-10" if OcpVersion.parse(release or "") >= OcpVersion(5, 0) else "rhel-9"
    except VersionError:
        return "rhel-9"


def _get(obj: Mapping[str, Any] | None, *path: str) -> Any:
    for key in path:
        if not isinstance(obj, Mapping):
            return None
        obj = obj.get(key)
    return obj


def _region(hosted: Mapping[str, Any], platform: str) -> str | None:
    platform_spec = _get(hosted, "spec", "platform") or {}
    for key in ("aws", "gcp"):
        region = _get(platform_spec, key, "region")
        if isinstance(region, str) and platform.lower() == key:
            return region
    location = _get(platform_spec, "azure", "location")
    return location if isinstance(location, str) else None


def hosted_release(hosted: Mapping[str, Any]) -> str | None:
    desired = _get(hosted, "status", "version", "desired", "version")
    if isinstance(desired, str):
        return desired
    return release_of_image(_get(hosted, "spec", "release", "image"))


def node_pool_row(
    pool: Mapping[str, Any],
    hosted: Mapping[str, Any],
    catalog: PlatformImageCatalog,
    index: PublishedImageIndex,
    now: datetime,
) -> PoolRow:
    meta = pool.get("metadata") or {}
    release = _get(pool, "status", "version") or release_of_image(_get(pool, "spec", "release", "image")) \
        or hosted_release(hosted)
    release = release if isinstance(release, str) else None
    stream = _get(pool, "spec", "osImageStream", "name") or default_stream(release)
    arch = NODE_POOL_ARCHES.get(str(_get(pool, "spec", "arch") or "amd64"), str(_get(pool, "spec", "arch")))
    platform = str(_get(pool, "spec", "platform", "type") or _get(hosted, "spec", "platform", "type") or "")
    found = catalog.find(release, str(stream), arch, platform, _region(hosted, platform))
    explicit = _get(pool, "spec", "platform", "aws", "ami") if platform.lower() == "aws" else None
    booted = explicit if isinstance(explicit, str) and explicit else found.image
    current_build = index.aws_release(booted) if platform.lower() == "aws" and booted else None
    if platform.lower() == "gcp" and booted:
        current_build = index.gcp_release(booted)
    target_build = index.aws_release(found.image) if platform.lower() == "aws" and found.image else current_build
    valid: bool | None = None if found.unknown else found.image is not None
    if explicit:
        action, reason, message = str(Action.SKIP), REASON_IMAGE_SET_BY_NODE_POOL, f"the NodePool names {explicit}"
    elif valid is False:
        action, reason = str(Action.ERROR), REASON_NO_PLATFORM_IMAGE
        message = f"ValidPlatformImage=False: no image for {found.missing}"
    else:
        action, reason = str(Action.NOOP), REASON_MANAGED_BY_HYPERSHIFT
        message = found.unknown or "HyperShift boots the release's image for this stream"
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
    )


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
                 if _get(p, "metadata", "namespace") == namespace and _get(p, "spec", "clusterName") == name]
        release = hosted_release(hosted)
        rows.append(ClusterRow(
            name=f"{management}/{namespace}/{name}",
            source=source,
            platform=_get(hosted, "spec", "platform", "type"),
            release=release,
            install_release=_install(hosted),
            node_pools=tuple(node_pool_row(p, hosted, catalog, index, now)
                             for p in sorted(pools, key=lambda p: str(_get(p, "metadata", "name")))),
            management_cluster=management,
        ))
    return rows


def _install(hosted: Mapping[str, Any]) -> str | None:
    history = _get(hosted, "status", "version", "history")
    if isinstance(history, list) and history and isinstance(history[-1], Mapping):
        version = history[-1].get("version")
        return version if isinstance(version, str) else None
    return None
