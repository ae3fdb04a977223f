"""The fleet view (SPEC section 4, `fleet`): one row per cluster, built from what `plan` decides for
it, and one row per HyperShift HostedCluster with its NodePools. Pure: `bootimage_controller/fleet/`
reads the clusters and hands in plain data.

What a row says, and where it comes from:
- pools: every MachineSet, ControlPlaneMachineSet and Cluster API pool of the cluster, with the
  decision `plan` makes for it (the same function, so a fleet row never disagrees with `plan`), its
  boot image's age (RHCOS build ids carry their build date) and the OpenShift release that shipped it;
- skew: the verdict `plan` reaches, and the pools that would hold the next upgrade (below the limit,
  on the wrong RHEL stream, or in error while enforcement is Automatic);
- verified: per pool `plan`'s `verified` (the verdict recorded on the MachineSet, SPEC section 3b),
  and per cluster the oldest boot image no joined node has proven (`oldestUnverified`);
- HostedClusters and their NodePools: `core/hypershift.py`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from ..constants import Action
from ..errors import VersionError
from .forecast import Forecast
from .index import PublishedImageIndex
from .model import BootImageDecision
from .skew.verdict import SkewVerdict
from .skew.versions import OcpVersion, parse_rhcos_version


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
    action: str | None  # None: not known (rows read from Prometheus carry no decision)
    reason: str | None
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
    # Who writes it next and when (core.forecast, as plan says it); None for NodePools.
    next_write: Mapping[str, str] | None = None
    also_written_by: tuple[str, ...] = ()
    current_deprecated: str | None = None  # the cloud says the current image is deprecated (plan's)
    # NodePools: the stream it moves to at the next major release, and whether that has its image.
    stream_after_upgrade: Mapping[str, Any] | None = None
    # Machine pools: plan's `verified` (SPEC section 3b): has a node booted from its image and joined?
    verified: Mapping[str, Any] | None = None
    # Machine pools: plan's `managerWhy`, and the writer a manager kind stands for (`fieldManager`,
    # `hiveMachinePool`), so that `fleet` names every writer as `plan` does (issue 49).
    manager_why: str = ""
    named_writer: Mapping[str, Any] | None = None

    @property
    def writer_name(self) -> str | None:
        """The field manager or Hive MachinePool the manager stands for (the page's Manager cell)."""
        named = self.named_writer or {}
        if named.get("fieldManager"):
            return str(named["fieldManager"])
        pool = named.get("hiveMachinePool")
        return f"MachinePool {pool['name']}" if isinstance(pool, Mapping) and pool.get("name") else None

    @property
    def verdict(self) -> str | None:
        return str(self.verified.get("verdict")) if self.verified is not None else None

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
        if not node_pool:
            out["nextWrite"] = dict(self.next_write) if self.next_write is not None else None
            out["alsoWrittenBy"] = list(self.also_written_by)
            out["currentDeprecated"] = self.current_deprecated
            out["verified"] = dict(self.verified) if self.verified is not None else None
            out["managerWhy"] = self.manager_why
            out.update(self.named_writer or {})
        if node_pool:
            out["release"] = self.release
            out["validPlatformImage"] = self.valid_platform_image
            out["missingPlatformImage"] = self.missing_platform_image
            out["streamAfterUpgrade"] = dict(self.stream_after_upgrade) if self.stream_after_upgrade else None
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
    gate: Mapping[str, Any] | None = None  # plan's `gate`: may boot images be written now?
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
    def oldest_unverified(self) -> PoolRow | None:
        """The pool whose boot image is the oldest not proven by a node that joined (`unverified` or
        `failed`; SPEC section 3b): the image a scale-up is likeliest to find broken."""
        pools = [p for p in self.pools if p.verified is not None and p.verdict != "verified"]
        return max(pools, key=lambda p: (p.boot_image_age_days or -1, p.namespace, p.name), default=None)

    @property
    def boot_failures(self) -> tuple[PoolRow, ...]:
        return tuple(p for p in self.pools if p.verdict == "failed")

    @property
    def status(self) -> str:
        """One word for the table and the page, worst first: error, held, invalid-image, degraded,
        outdated, ok. A boot image that failed its first boot is `degraded`, as the cluster's
        ClusterOperator says it."""
        if self.error is not None:
            return "error"
        if self.upgrades_held:
            return "held"
        pools = self.every_pool
        if any(p.valid_platform_image is False for p in pools):
            return "invalid-image"
        if any(p.action == Action.ERROR for p in pools) or self.boot_failures:
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
            "gate": dict(self.gate) if self.gate is not None else None,
            "heldBy": list(self.held_by),
            "pools": [p.to_json() for p in self.pools],
            "oldestUnverified": _unverified_json(self.oldest_unverified),
        }
        if self.management_cluster is not None or self.node_pools is not None:
            out["managementCluster"] = self.management_cluster  # a HostedCluster's, or a Hive spoke's hub
        if self.node_pools is not None:
            out["nodePools"] = [p.to_json(node_pool=True) for p in self.node_pools]
        return out


def _unverified_json(pool: PoolRow | None) -> dict[str, Any] | None:
    """`oldestUnverified`: the pool, its image and verdict, and how old its build is."""
    if pool is None or pool.verified is None:
        return None
    return {"namespace": pool.namespace, "name": pool.name, "kind": pool.kind,
            "image": pool.verified.get("image"), "verdict": pool.verdict, "currentRelease": pool.current_release,
            "bootImageAge": pool.boot_image_age_days}


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


def pool_row(d: BootImageDecision, index: PublishedImageIndex, now: datetime, forecast: Forecast | None = None) -> PoolRow:
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
        next_write=forecast.of(d).to_json() if forecast is not None else None,
        also_written_by=tuple(shown["alsoWrittenBy"]),
        current_deprecated=d.current_deprecated,
        verified=shown["verified"],
        manager_why=d.manager_why,
        named_writer={k: shown[k] for k in ("fieldManager", "hiveMachinePool") if k in shown} or None,
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
    forecast: Forecast | None = None,
    skew: Mapping[str, Any] | None = None,
) -> ClusterRow:
    """`forecast`: plan's model of the next writes on the same input (its gate and writers);
    `skew`: plan's `skew` object for it (`verdict`'s, with what the planned writes change)."""
    return ClusterRow(
        name=name,
        source=source,
        platform=facts.platform,
        release=facts.release,
        install_release=facts.install_release,
        skew=dict(skew) if skew is not None else verdict.to_json(),
        gate=forecast.gate.to_json() if forecast is not None else None,
        held_by=held_by(verdict, decisions),
        pools=tuple(pool_row(d, index, now, forecast) for d in decisions),
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
