"""The planner's context, built one way for the daemon and for `plan` (SPEC sections 1 and 2).

`planning_context` takes the cluster's objects (from the daemon's caches, or from `plan`'s files or
live reads) and returns the golden data, the enrollment and the cluster facts, each fact with the
sentence saying where it came from. Both callers use this one function, so the same objects give
the same decisions.

On partial input it infers only what the objects themselves say, never a default dressed up as a
fact:
- platform: Infrastructure `status.platformStatus.type`; without it, the one platform the
  MachineSets' providerSpec kinds name (so a MachineSet with a broken providerSpec on an AWS fleet
  is an `error`, not `NotEnrolled` because enrollment had no platform); none or several: unknown.
- control-plane architecture: `--control-plane-arch` (`plan` only), else the most common
  `kubernetes.io/arch` of the control-plane Nodes (ties: the first by name), else x86_64 (SPEC rule
  5), and the explanation says it is a default.
- install version: `skew.policy.install_version_from_cluster_version`; without a ClusterVersion it
  is unknown and said so, never `0.0.0`.

Pure: no I/O. It runs once per change of a cluster-wide object, not per MachineSet.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..errors import GoldenDataError, InputError
from .cloud.facts import CloudFacts
from .cluster import (
    ClusterObjects,
    control_plane_arches,
    is_multi_arch,
    platform_of,
    provider_spec_platforms,
    region_of,
)
from .enrollment import Enrollment
from .golden import GoldenBootImages
from .index import PublishedImageIndex
from .manager import MachineConfigOperator, ManagerFacts
from .vsphere.topology import VSphereTopology

DEFAULT_CONTROL_PLANE_ARCH = "x86_64"


@dataclass(frozen=True)
class ClusterFacts:
    """What the planner knows about the cluster besides the MachineSet itself."""

    platform: str | None = None  # Infrastructure status.platformStatus.type (or inferred, see above)
    control_plane_arch: str = DEFAULT_CONTROL_PLANE_ARCH  # RPM name
    multi_arch: bool = False  # ClusterVersion status.desired.architecture == Multi
    # The published images this controller knows (`bootimage_controller.data.bundled_index()`, read
    # by the caller: core/ does no I/O). Empty by default: nothing is known to be RHCOS offline.
    published: PublishedImageIndex = field(default_factory=PublishedImageIndex)
    # Cloud answers (rule 9). None: offline planning. `cloud_platforms` lists the platforms whose
    # lookups were made, so a missing answer means "not found" only for those.
    cloud: CloudFacts | None = None
    cloud_platforms: frozenset[str] = frozenset()
    # vSphere: Infrastructure spec.platformSpec.vsphere (None: there is none to resolve against).
    vsphere: VSphereTopology | None = None
    # Infrastructure status.platformStatus.{aws.region,gcp.region}: where CAPI templates' images live
    # (an AWSMachineTemplate names no region of its own).
    region: str | None = None
    # Who else updates boot images (SPEC rule 2b): the MCO's version and gates, GitOps markers.
    managers: ManagerFacts = field(default_factory=ManagerFacts)


@dataclass(frozen=True)
class Fact:
    """A value and the sentence saying where it came from."""

    value: Any
    origin: str


@dataclass(frozen=True)
class PlanningContext:
    golden: GoldenBootImages
    enrollment: Enrollment
    facts: ClusterFacts
    # One line per input, saying what was used and where it came from (`plan`'s "Inputs", logs).
    explanation: tuple[str, ...] = ()
    # True when the platform came from the MachineSets (no Infrastructure): a MachineSet added or
    # removed can change it, so the daemon rebuilds the context on those events too.
    platform_from_machines: bool = False


def planning_context(
    objects: ClusterObjects,
    *,
    golden: GoldenBootImages | None = None,
    golden_origin: str | None = None,
    arch_override: str | None = None,
    cloud: CloudFacts | None = None,
    cloud_platforms: frozenset[str] = frozenset(),
    gitops_labels: tuple[str, ...] = (),
    published: PublishedImageIndex,
) -> PlanningContext:
    """Raises the project's `InputError` subclasses, naming the object (and its file) and field.
    `published`: the index of published images (`bootimage_controller.data.bundled_index()`)."""
    golden, golden_origin = _golden(objects, golden, golden_origin)
    platform = platform_fact(objects)
    arch = control_plane_arch_fact(objects, arch_override)
    multi = is_multi_arch(objects.cluster_version)
    mco = MachineConfigOperator.from_objects(objects.mco_operator, objects.feature_gate, objects.infrastructure)
    try:
        enrollment = Enrollment.from_machine_configuration(objects.machine_configuration, platform.value)
    except InputError as exc:
        raise exc.located(objects.origins.get("machineconfiguration")) from None
    facts = ClusterFacts(
        platform=platform.value,
        control_plane_arch=arch.value,
        multi_arch=multi,
        cloud=cloud,
        cloud_platforms=cloud_platforms,
        vsphere=VSphereTopology.from_infrastructure(objects.infrastructure),
        region=region_of(objects.infrastructure),
        managers=ManagerFacts(mco, gitops_labels),
        published=published,
    )
    explanation = (
        f"golden boot images: {golden_origin}; {_streams_summary(golden)}",
        f"platform: {platform.value or 'unknown'} ({platform.origin})",
        f"control-plane architecture: {arch.value} ({arch.origin})"
        + ("; multi-architecture cluster (ClusterVersion status.desired.architecture Multi)" if multi else ""),
        f"enrollment: MachineSets {enrollment.machinesets.mode}, ControlPlaneMachineSet {enrollment.cpms.mode} "
        f"({enrollment.source})",
        f"other boot image managers: {_managers_summary(mco, objects, gitops_labels)}",
    )
    inferred = platform_of(objects.infrastructure) is None
    return PlanningContext(golden, enrollment, facts, explanation, platform_from_machines=inferred)


def _golden(
    objects: ClusterObjects, golden: GoldenBootImages | None, origin: str | None
) -> tuple[GoldenBootImages, str]:
    if golden is not None:
        return golden, origin or "given"
    where = golden_origin(objects)
    if objects.bootimages is None:
        raise GoldenDataError(where, None, "not found")
    try:
        return GoldenBootImages.from_configmap(objects.bootimages), where
    except InputError as exc:
        raise exc.located(objects.origins.get("bootimages")) from None


def platform_fact(objects: ClusterObjects) -> Fact:
    """Infrastructure's platform; without it, the one platform the providerSpec kinds name."""
    platform = platform_of(objects.infrastructure)
    if platform:
        return Fact(platform, _named("Infrastructure cluster", objects, "infrastructure"))
    platforms = provider_spec_platforms(objects.machines)
    missing = "Infrastructure cluster has no platform" if objects.infrastructure else "no Infrastructure cluster"
    if len(platforms) == 1:
        return Fact(platforms.pop(), f"{missing}; taken from the MachineSets' providerSpec kind")
    several = f" (they name {', '.join(sorted(platforms))})" if platforms else ""
    return Fact(None, f"unknown: {missing} and no single platform in the MachineSets' providerSpec kinds{several}")


def control_plane_arch_fact(objects: ClusterObjects, override: str | None = None) -> Fact:
    """`--control-plane-arch`, then the control-plane Nodes' `kubernetes.io/arch`, then x86_64."""
    if override:
        return Fact(override, "--control-plane-arch")
    arches = control_plane_arches(objects.nodes)
    if not arches:
        return Fact(
            DEFAULT_CONTROL_PLANE_ARCH,
            "default: no control-plane Node with a kubernetes.io/arch label",
        )
    # The most common one (ties: by name, so the answer does not depend on listing order); a mixed
    # control plane is unusual enough to say so.
    arch = max(sorted(arches), key=lambda a: len(arches[a]))
    origin = f"kubernetes.io/arch of control-plane Nodes {', '.join(sorted(arches[arch]))}"
    others = [a for a in sorted(arches) if a != arch]
    if others:
        origin += f" (other control-plane Nodes report {', '.join(others)})"
    return Fact(arch, origin)


def golden_origin(objects: ClusterObjects) -> str:
    """Where the golden boot images come from, as the explanation and errors name it."""
    return _named("ConfigMap openshift-machine-config-operator/coreos-bootimages", objects, "bootimages")


def _named(what: str, objects: ClusterObjects, role: str) -> str:
    origin = objects.origins.get(role)
    return f"{what} ({origin})" if origin else what


def _streams_summary(golden: GoldenBootImages) -> str:
    names = [f"{golden.default.name} (default)"] + [n for n in sorted(golden.streams) if n != golden.default.name]
    names += [f"{n} (invalid)" for n in sorted(golden.invalid_streams)]
    release = f"release {golden.release_version}, " if golden.release_version else ""
    return f"{release}streams {', '.join(names)}"


def _managers_summary(mco: MachineConfigOperator | None, objects: ClusterObjects, gitops_labels: tuple[str, ...]) -> str:
    where = _named("ClusterOperator machine-config", objects, "mco_operator")
    text = f"{mco.describe()} ({where})" if mco is not None else f"no Machine Config Operator ({where} not found)"
    extra = f", label {', '.join(gitops_labels)}" if gitops_labels else ""
    return f"{text}; GitOps: Argo CD annotation, Flux labels{extra}; Hive: its machine-pool label"
