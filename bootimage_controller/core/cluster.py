"""The cluster objects the planner's context comes from, and pure facts read off them.

`CLUSTER_READS` is the one table of what is read: the daemon's informers and `plan --from-cluster`
are both built from it, so neither can read something the other does not. `ClusterObjects` holds
what was found (any of it may be missing); `context.planning_context` turns it into the planner's
inputs.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from ..constants import (
    BOOTIMAGES_CONFIGMAP,
    CAPI_GROUP,
    CAPI_KINDS,
    CAPI_MACHINE_KIND,
    CAPI_MACHINE_PLURAL,
    CAPI_NAMESPACE,
    CAPI_VERSIONS,
    CLUSTEROPERATOR_PLURAL,
    CLUSTERVERSION_NAME,
    CLUSTERVERSION_PLURAL,
    CONFIG_GROUP,
    CONFIG_VERSION,
    CONTROL_PLANE_NODE_LABELS,
    CPMS_KIND,
    CPMS_NAME,
    CPMS_PLURAL,
    CPMS_PROVIDER_SPEC_PATH,
    CPMS_VERSION,
    FEATUREGATE_NAME,
    FEATUREGATE_PLURAL,
    INFRA_MACHINES,
    INFRA_TEMPLATES,
    INFRASTRUCTURE_GROUP,
    INFRASTRUCTURE_NAME,
    INFRASTRUCTURE_PLURAL,
    KUBE_TO_RPM_ARCH,
    LABEL_ARCH,
    MACHINE_API_GROUP,
    MACHINE_KIND,
    MACHINE_PLURAL,
    MACHINE_VERSION,
    MACHINECONFIGURATION_KIND,
    MACHINECONFIGURATION_NAME,
    MACHINECONFIGURATION_PLURAL,
    MACHINESET_KIND,
    MACHINESET_PLURAL,
    MACHINESET_PROVIDER_SPEC_PATH,
    MACHINESET_VERSION,
    MAPI_NAMESPACE,
    MCO_CLUSTER_OPERATOR,
    MCO_NAMESPACE,
    OPERATOR_GROUP,
    OPERATOR_VERSION,
    PLATFORM_TEMPLATE_KIND,
    PROVIDER_KIND_PLATFORM,
    RPM_ARCHES,
)
from .model import get_path, is_mapping


@dataclass(frozen=True)
class ClusterRead:
    """One kind of object the planner's context (or the work itself) is read from."""

    role: str  # the informer's name, and the `ClusterObjects` field for single objects
    group: str  # "" for the core API
    version: str
    kind: str
    plural: str
    namespace: str | None = None  # None: cluster-scoped
    name: str | None = None  # None: every object (of `label_selector`)
    label_selector: str | None = None
    used_for: str = ""

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version


# What is read, for both the daemon and `plan` (SPEC section 1 has the same table in prose).
_CORE_READS: tuple[ClusterRead, ...] = (
    ClusterRead(MACHINESET_KIND, MACHINE_API_GROUP, MACHINESET_VERSION, MACHINESET_KIND, MACHINESET_PLURAL,
                MAPI_NAMESPACE, used_for="what is reconciled; their providerSpec kinds name the platform "
                "when Infrastructure does not"),
    ClusterRead(CPMS_KIND, MACHINE_API_GROUP, CPMS_VERSION, CPMS_KIND, CPMS_PLURAL, MAPI_NAMESPACE, CPMS_NAME,
                used_for="reconciled like a MachineSet when enrolled"),
    ClusterRead("bootimages", "", "v1", "ConfigMap", "configmaps", MCO_NAMESPACE, BOOTIMAGES_CONFIGMAP,
                used_for="the golden boot images"),
    ClusterRead("machineconfiguration", OPERATOR_GROUP, OPERATOR_VERSION, MACHINECONFIGURATION_KIND,
                MACHINECONFIGURATION_PLURAL, None, MACHINECONFIGURATION_NAME,
                used_for="enrollment and the skew setting"),
    ClusterRead("infrastructure", CONFIG_GROUP, CONFIG_VERSION, "Infrastructure", INFRASTRUCTURE_PLURAL, None,
                INFRASTRUCTURE_NAME, used_for="platform and control-plane topology"),
    ClusterRead("clusterversion", CONFIG_GROUP, CONFIG_VERSION, "ClusterVersion", CLUSTERVERSION_PLURAL, None,
                CLUSTERVERSION_NAME, used_for="the upgrade gate, install version, multi-architecture"),
    ClusterRead("mco_operator", CONFIG_GROUP, CONFIG_VERSION, "ClusterOperator", CLUSTEROPERATOR_PLURAL, None,
                MCO_CLUSTER_OPERATOR, used_for="whether the Machine Config Operator runs, and its version (rule 2b)"),
    ClusterRead("feature_gate", CONFIG_GROUP, CONFIG_VERSION, "FeatureGate", FEATUREGATE_PLURAL, None,
                FEATUREGATE_NAME, used_for="the feature gates enabled at the MCO's version (rule 2b)"),
    ClusterRead("proxy", CONFIG_GROUP, CONFIG_VERSION, "Proxy", "proxies", None, "cluster",
                used_for="the cluster-wide proxy for cloud, vCenter and OVA traffic (cluster_proxy)"),
    *(
        ClusterRead(f"nodes:{label}", "", "v1", "Node", "nodes", label_selector=label,
                    used_for="control-plane architecture and aleph annotations")
        for label in CONTROL_PLANE_NODE_LABELS
    ),
)
# Cluster API (opt-in; a cluster without the CRDs simply has none): the objects reconciled, and the
# infrastructure templates their boot images live in. `with_capi_version` sets the version the
# server serves (v1beta2 or v1beta1), found by discovery.
CAPI_READS: tuple[ClusterRead, ...] = tuple(
    ClusterRead(key, CAPI_GROUP, CAPI_VERSIONS[-1], key.partition(".")[0], plural, CAPI_NAMESPACE,
                used_for="Cluster API objects reconciled when enrolled")
    for key, plural in CAPI_KINDS.items()
)
TEMPLATE_READS: tuple[ClusterRead, ...] = tuple(
    ClusterRead(kind, INFRASTRUCTURE_GROUP, version, kind, plural, CAPI_NAMESPACE,
                used_for="the boot images of Cluster API objects")
    for kind, (version, plural) in INFRA_TEMPLATES.items()
)
CLUSTER_READS: tuple[ClusterRead, ...] = (*_CORE_READS, *CAPI_READS, *TEMPLATE_READS)
# Boot verification (SPEC section 3b): the Machines of the Machine API and every Node's Ready
# condition. The daemon's only: it records each verdict on the MachineSet (`boot-image-verified`),
# which is what `plan` and `fleet` read, so they need not list every Machine and Node of a cluster.
VERIFICATION_READS: tuple[ClusterRead, ...] = (
    ClusterRead("machines", MACHINE_API_GROUP, MACHINE_VERSION, MACHINE_KIND, MACHINE_PLURAL, MAPI_NAMESPACE,
                used_for="boot verification: the Machines of every MachineSet, their phase, Node and boot image"),
    ClusterRead("nodes", "", "v1", "Node", "nodes",
                used_for="boot verification: whether a Machine's Node is Ready"),
)
# Boot verification of Cluster API pools (docs/capi.md): their Machines, and the infrastructure
# machines that hold each one's boot image and the cloud's error (of the platform's kind only, like
# the templates; none for vSphere, whose CAPI pools are not judged). Optional, like every CAPI read.
CAPI_MACHINE_READ = ClusterRead(
    "capi-machines", CAPI_GROUP, CAPI_VERSIONS[-1], CAPI_MACHINE_KIND, CAPI_MACHINE_PLURAL, CAPI_NAMESPACE,
    used_for="boot verification: the Machines of every Cluster API pool, their phase, Node and failure")
INFRA_MACHINE_READS: tuple[ClusterRead, ...] = tuple(
    ClusterRead(f"infra-machines:{template.removesuffix('Template')}", INFRASTRUCTURE_GROUP, version,
                template.removesuffix("Template"), plural, CAPI_NAMESPACE,
                used_for="boot verification: the boot image and cloud error of each CAPI Machine")
    for template, (version, plural) in INFRA_MACHINES.items() if template != PLATFORM_TEMPLATE_KIND.get("VSphere")
)
CAPI_VERIFICATION_READS: tuple[ClusterRead, ...] = (CAPI_MACHINE_READ, *INFRA_MACHINE_READS)
MACHINE_READS = tuple(r for r in CLUSTER_READS if r.group == MACHINE_API_GROUP and r.kind in (MACHINESET_KIND, CPMS_KIND))
NODE_READS = tuple(r for r in CLUSTER_READS if r.kind == "Node")


def with_capi_version(reads: tuple[ClusterRead, ...], version: str) -> tuple[ClusterRead, ...]:
    return tuple(replace(r, version=version) if r.group == CAPI_GROUP else r for r in reads)


def daemon_reads(platform: str | None) -> tuple[ClusterRead, ...]:
    """What the daemon watches on a cluster of `platform`: of the templates, only that platform's.

    A cluster has one platform, and OpenShift installs only its provider's template CRD: watching
    the other three kinds listed them again every 30 s for nothing (the CRD absent), and cost three
    connections at start. A platform without templates we manage (BareMetal, None, ...) watches
    none; an unknown platform (the Infrastructure could not be read) watches all four, as before.
    Boot verification's Cluster API Machines and infrastructure machines follow the same rule (none
    on vSphere, whose Cluster API pools are not judged).
    """
    if platform is None:
        return (*CLUSTER_READS, *VERIFICATION_READS, *CAPI_VERIFICATION_READS)
    kind = PLATFORM_TEMPLATE_KIND.get(platform)
    infra = tuple(r for r in INFRA_MACHINE_READS if kind is not None and r.kind == kind.removesuffix("Template"))
    return (*_CORE_READS, *CAPI_READS, *(r for r in TEMPLATE_READS if r.kind == kind), *VERIFICATION_READS,
            *((CAPI_MACHINE_READ, *infra) if infra else ()))


# The cluster-wide single objects by the role they are read under (`daemon_reads`, plan's inputs) and
# the `ClusterObjects` field that holds each.
SINGLE_ROLES: Mapping[str, str] = {
    "bootimages": "bootimages",
    "machineconfiguration": "machine_configuration",
    "infrastructure": "infrastructure",
    "clusterversion": "cluster_version",
    "mco_operator": "mco_operator",
    "feature_gate": "feature_gate",
}


@dataclass(frozen=True)
class ClusterObjects:
    """The raw objects the planner's inputs come from (any may be missing).

    `origins` says where each single object came from (a file for `plan`), by role, for messages.
    """

    bootimages: Mapping[str, Any] | None = None
    machine_configuration: Mapping[str, Any] | None = None
    infrastructure: Mapping[str, Any] | None = None
    cluster_version: Mapping[str, Any] | None = None
    mco_operator: Mapping[str, Any] | None = None  # ClusterOperator machine-config
    feature_gate: Mapping[str, Any] | None = None  # FeatureGate cluster
    nodes: Sequence[Mapping[str, Any]] = field(default_factory=tuple)
    machines: Sequence[Mapping[str, Any]] = field(default_factory=tuple)
    origins: Mapping[str, str] = field(default_factory=dict)

    @classmethod
    def from_roles(
        cls,
        one: Callable[[str], Mapping[str, Any] | None],
        nodes: Sequence[Mapping[str, Any]],
        machines: Sequence[Mapping[str, Any]] = (),
        origins: Mapping[str, str] | None = None,
    ) -> ClusterObjects:
        """The one assembly, for the daemon's store and `plan`'s inputs alike: `one(role)` gives
        the single object of each role in `SINGLE_ROLES` (the roles of `daemon_reads`)."""
        return cls(**{field_name: one(role) for role, field_name in SINGLE_ROLES.items()}, nodes=tuple(nodes),
                   machines=tuple(machines), origins=dict(origins or {}))


def region_of(infrastructure: Mapping[str, Any] | None) -> str | None:
    """Infrastructure status.platformStatus.<aws|gcp>.region, when given."""
    status = ((infrastructure or {}).get("status") or {}).get("platformStatus") or {}
    for platform in ("aws", "gcp"):
        region = (status.get(platform) or {}).get("region") if isinstance(status.get(platform), Mapping) else None
        if isinstance(region, str) and region:
            return region
    return None


def platform_of(infrastructure: Mapping[str, Any] | None) -> str | None:
    status = (infrastructure or {}).get("status") or {}
    platform_status = status.get("platformStatus") or {}
    value = platform_status.get("type") or status.get("platform")
    return value if isinstance(value, str) and value else None


def provider_spec_platforms(machines: Iterable[Mapping[str, Any]]) -> set[str]:
    """The platforms the machines' providerSpec kinds name (kinds we do not know are left out)."""
    out: set[str] = set()
    for m in machines:
        path = CPMS_PROVIDER_SPEC_PATH if m.get("kind") == CPMS_KIND else MACHINESET_PROVIDER_SPEC_PATH
        kind = get_path(m, (*path, "kind"))
        if isinstance(kind, str) and kind in PROVIDER_KIND_PLATFORM:
            out.add(str(PROVIDER_KIND_PLATFORM[kind]))
    return out


def control_plane_topology(infrastructure: Mapping[str, Any] | None) -> str | None:
    value = ((infrastructure or {}).get("status") or {}).get("controlPlaneTopology")
    return value if isinstance(value, str) else None


def is_control_plane_node(node: Mapping[str, Any]) -> bool:
    labels = (node.get("metadata") or {}).get("labels") or {}
    return any(label in labels for label in CONTROL_PLANE_NODE_LABELS)


def control_plane_arches(nodes: Iterable[Mapping[str, Any]]) -> dict[str, list[str]]:
    """RPM arch -> names of the control-plane Nodes whose `kubernetes.io/arch` label says it.

    A value that is neither naming is kept as given, so a message can show it.
    """
    out: dict[str, list[str]] = {}
    for node in nodes:
        if not is_control_plane_node(node):
            continue
        value = (get_path(node, ("metadata", "labels")) or {}).get(LABEL_ARCH)
        if isinstance(value, str) and value:
            out.setdefault(normalise_arch(value) or value, []).append(str(get_path(node, ("metadata", "name"))))
    return out


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
