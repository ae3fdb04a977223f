"""From the cluster's objects to the planner's inputs. Pure: used by the daemon and by `plan`.

The daemon's caches and `plan`'s files both hold raw objects; this module turns them into the
typed `PlanningContext` once per change, so a pass over 5,000 MachineSets parses the golden data
and the enrollment once, not 5,000 times.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from .cloud.facts import CloudFacts
from .constants import (
    CONTROL_PLANE_NODE_LABELS,
    KUBE_TO_RPM_ARCH,
    LABEL_ARCH,
    RPM_ARCHES,
)
from .enrollment import Enrollment
from .golden import GoldenBootImages
from .model import get_path, is_mapping
from .planner import ClusterFacts


@dataclass(frozen=True)
class ClusterObjects:
    """The raw objects the planner's inputs come from (any may be missing)."""

    bootimages: Mapping[str, Any] | None = None
    machine_configuration: Mapping[str, Any] | None = None
    infrastructure: Mapping[str, Any] | None = None
    cluster_version: Mapping[str, Any] | None = None
    nodes: Sequence[Mapping[str, Any]] = field(default_factory=tuple)


@dataclass(frozen=True)
class PlanningContext:
    golden: GoldenBootImages
    enrollment: Enrollment
    facts: ClusterFacts


def platform_of(infrastructure: Mapping[str, Any] | None) -> str | None:
    status = (infrastructure or {}).get("status") or {}
    platform_status = status.get("platformStatus") or {}
    value = platform_status.get("type") or status.get("platform")
    return value if isinstance(value, str) and value else None


def control_plane_topology(infrastructure: Mapping[str, Any] | None) -> str | None:
    value = ((infrastructure or {}).get("status") or {}).get("controlPlaneTopology")
    return value if isinstance(value, str) else None


def is_control_plane_node(node: Mapping[str, Any]) -> bool:
    labels = (node.get("metadata") or {}).get("labels") or {}
    return any(label in labels for label in CONTROL_PLANE_NODE_LABELS)


def control_plane_arch(nodes: Iterable[Mapping[str, Any]]) -> str | None:
    """RPM arch of the control-plane Nodes (`kubernetes.io/arch` label), if any says."""
    for node in nodes:
        if not is_control_plane_node(node):
            continue
        value = ((node.get("metadata") or {}).get("labels") or {}).get(LABEL_ARCH)
        if isinstance(value, str) and value in KUBE_TO_RPM_ARCH:
            return KUBE_TO_RPM_ARCH[value]
    return None


def normalise_arch(value: str) -> str | None:
    """Accept either naming (`amd64` or `x86_64`); None when it is neither."""
    if value in RPM_ARCHES:
        return value
    return KUBE_TO_RPM_ARCH.get(value)


def is_multi_arch(cluster_version: Mapping[str, Any] | None) -> bool:
    desired = ((cluster_version or {}).get("status") or {}).get("desired") or {}
    return desired.get("architecture") == "Multi"


def upgrade_blocker(cluster_version: Mapping[str, Any] | None) -> str | None:
    """Why no boot image may be written now, or None when the cluster is known to be stable.

    Judged from the ClusterVersion's whole status as it is now (SPEC section 3): the newest history
    entry must be Completed and the `Progressing` condition must not be True. A missing
    ClusterVersion, or one without history, means the upgrade state is unknown: that is a reason
    to write nothing, never a licence to write.
    """
    if cluster_version is None:
        return "ClusterVersion version not found: the upgrade state is unknown; writing nothing"
    newest = get_path(cluster_version, ("status", "history", 0))
    if not is_mapping(newest):
        return "ClusterVersion version has no status.history: an install may be in progress; writing nothing"
    if newest.get("state") != "Completed":
        return (
            f"ClusterVersion status.history[0] is {newest.get('state') or 'unset'} for version "
            f"{newest.get('version') or 'unknown'}: an install or upgrade is in progress; writing nothing"
        )
    conditions = get_path(cluster_version, ("status", "conditions"))
    for condition in conditions if isinstance(conditions, list) else []:
        if isinstance(condition, Mapping) and condition.get("type") == "Progressing" and condition.get("status") == "True":
            message = condition.get("message") or "no message"
            return f"ClusterVersion is Progressing ({message}): an upgrade is in progress; writing nothing"
    return None


def current_version(cluster_version: Mapping[str, Any] | None) -> str | None:
    history = ((cluster_version or {}).get("status") or {}).get("history") or []
    if history and isinstance(history[0], Mapping) and isinstance(history[0].get("version"), str):
        return str(history[0]["version"])
    return None


def planning_context(
    objects: ClusterObjects,
    *,
    arch_override: str | None = None,
    cloud: CloudFacts | None = None,
    cloud_platforms: frozenset[str] = frozenset(),
    golden: GoldenBootImages | None = None,
) -> PlanningContext:
    """Raises the project's InputError subclasses (golden data, enrollment) naming object and field."""
    if golden is None:
        if objects.bootimages is None:
            from .errors import GoldenDataError

            raise GoldenDataError("ConfigMap openshift-machine-config-operator/coreos-bootimages", None, "not found")
        golden = GoldenBootImages.from_configmap(objects.bootimages)
    platform = platform_of(objects.infrastructure)
    enrollment = Enrollment.from_machine_configuration(objects.machine_configuration, platform)
    facts = ClusterFacts(
        platform=platform,
        control_plane_arch=arch_override or control_plane_arch(objects.nodes) or "x86_64",
        multi_arch=is_multi_arch(objects.cluster_version),
        cloud=cloud,
        cloud_platforms=cloud_platforms,
    )
    return PlanningContext(golden, enrollment, facts)
