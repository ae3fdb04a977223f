"""One skew assessment from a cluster's objects and the planner's decisions (SPEC section 5).

Shared by the daemon (after every pass) and `plan` (once), so both reach the same verdict on the
same objects. Pure: the caller supplies objects and decisions, and writes the results.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from ...constants import CAPI_KINDS, CPMS_KIND, LABEL_OSSTREAM, MACHINESET_KIND, Action, Reason, SkewMode
from ..cluster import ClusterObjects, control_plane_topology, is_control_plane_node, platform_of
from ..context import ClusterFacts
from ..enrollment import Enrollment, SelectionMode
from ..golden import GoldenBootImages
from ..model import BootImageDecision, InputNote, get_path
from ..planner import identify_boot_image
from .policy import (
    SkewEnforcementStatus,
    SkewSetting,
    cluster_version_minor,
    effective_skew_mode,
    install_version_from_cluster_version,
    previous_status_of,
)
from .record import machineset_boot_image, min_aleph
from .verdict import MachineSetSkewInput, SkewLimits, SkewVerdict, evaluate_skew
from .versions import OcpVersion


@dataclass(frozen=True)
class SkewAssessment:
    status: SkewEnforcementStatus  # what to write to status.bootImageSkewEnforcementStatus
    verdict: SkewVerdict
    notes: tuple[InputNote, ...] = ()  # values passed over on the way, for the caller to log


@dataclass(frozen=True)
class PassResult:
    """What the daemon achieved in a pass, for the Automatic record (reference 11.3)."""

    skipped: int
    errors: int
    target_releases: tuple[str, ...]  # releases of the images the enrolled MachineSets now boot

    @classmethod
    def counted(cls, outcomes: Iterable[tuple[BootImageDecision, bool, bool]]) -> PassResult:
        """From (decision, written, failed) per object, as the daemon's pass and `plan`'s "after
        the writes planned now" both count it: skips but NotEnrolled, errors, and the target
        releases of the MachineSets written or already up to date (ControlPlaneMachineSets aside)."""
        sets = [(d, written, failed) for d, written, failed in outcomes if d.kind != CPMS_KIND]
        return cls(
            skipped=sum(1 for d, _, _ in sets if d.action is Action.SKIP and d.reason != Reason.NOT_ENROLLED),
            errors=sum(1 for d, _, failed in sets if d.action is Action.ERROR or failed),
            target_releases=tuple(d.target_release for d, written, _ in sets
                                  if d.target_release and (written or d.action is Action.NOOP)),
        )


def assess_skew(
    cluster: ClusterObjects,
    enrollment: Enrollment,
    machines: Sequence[tuple[BootImageDecision, Mapping[str, Any] | None]],
    limits: SkewLimits,
    *,
    degraded: bool,
    degraded_message: str,
    golden: GoldenBootImages | None = None,
    facts: ClusterFacts | None = None,
    after_pass: PassResult | None = None,
) -> SkewAssessment:
    """Raises the project's InputError when `spec.bootImageSkewEnforcement` is invalid."""
    mc = cluster.machine_configuration
    setting = SkewSetting.from_machine_configuration(mc)
    notes: list[InputNote] = []
    install_version = install_version_from_cluster_version(cluster.cluster_version, notes)
    status = effective_skew_mode(
        setting,
        # The planner's platform (Infrastructure's, or the one the providerSpecs name without it).
        platform=facts.platform if facts is not None else platform_of(cluster.infrastructure),
        control_plane_topology=control_plane_topology(cluster.infrastructure),
        all_machinesets_enrolled=enrollment.machinesets.mode is SelectionMode.ALL,
        install_version=install_version,
        previous_status=previous_status_of(mc, notes),
    )
    opted_out, mco_writes = _opted_out(enrollment, machines)
    if status.mode is SkewMode.AUTOMATIC and (opted_out or mco_writes):
        # "Every MachineSet is enrolled" speaks of the machinesets manager's mode (openshift/api's
        # rule for Automatic); say which ones an annotation opts out: they are judged by their own
        # image, unless the MCO (which reads no such annotation) writes them all the same.
        parts = [status.explanation]
        if opted_out:
            parts.append("opted out by annotation (judged by their own boot image): " + ", ".join(opted_out))
        if mco_writes:
            parts.append("opted out by annotation but written by the Machine Config Operator all the same (it reads "
                         "no such annotation; see the writer conflict): " + ", ".join(mco_writes))
        status = replace(status, explanation="; ".join(parts))
    if after_pass is not None:
        status = status.after_pass(
            skipped=after_pass.skipped,
            errors=after_pass.errors,
            target_releases=after_pass.target_releases,
            configmap_release_version=golden.release_version if golden else None,
            install_version=install_version,
            notes=notes,
        )
    aleph = install_aleph(cluster.nodes, notes)
    inputs = [
        _skew_input(skew_evidence(decision, obj, golden, facts), obj, aleph, install_version, notes)
        for decision, obj in machines
        if judged_for_skew(decision)
    ]
    verdict = evaluate_skew(
        status, inputs, limits, degraded, degraded_message, cluster_version_minor(cluster.cluster_version)
    )
    return SkewAssessment(status, verdict, tuple(dict.fromkeys(notes)))


def skew_evidence(
    decision: BootImageDecision,
    obj: Mapping[str, Any] | None,
    golden: GoldenBootImages | None,
    facts: ClusterFacts | None,
) -> BootImageDecision:
    """Opted-out and foreign-owned MachineSets still scale up: identify what they boot anyway."""
    if decision.kind != MACHINESET_KIND:
        return decision
    if decision.reason not in _IDENTIFIED_ANYWAY or None in (obj, golden, facts):
        return decision
    assert golden is not None and facts is not None
    return identify_boot_image(obj, golden, facts)


def _opted_out(
    enrollment: Enrollment, machines: Sequence[tuple[BootImageDecision, Mapping[str, Any] | None]]
) -> tuple[list[str], list[str]]:
    """MachineSets a per-object annotation opts out while the manager's mode is All: those left
    alone, and those the MCO writes all the same (`BootImageDecision.opted_out`)."""
    if enrollment.machinesets.mode is not SelectionMode.ALL:
        return [], []
    ours = [d for d, _ in machines if d.kind == MACHINESET_KIND]
    return (sorted(d.key for d in ours if d.reason == Reason.NOT_ENROLLED),
            sorted(d.key for d in ours if d.opted_out))


# Machine API MachineSets judged by their own boot image although not planned: opted out, owned
# by someone else, or the Machine API side of a migrated pool (the migration keeps its providerSpec
# in step with the Cluster API side).
_IDENTIFIED_ANYWAY = frozenset({Reason.NOT_ENROLLED, Reason.OWNED_BY_OTHER, Reason.NOT_AUTHORITATIVE})
# Cluster API objects whose pool is judged elsewhere: not enrolled (CAPI is opt-in; the Machine
# API twin, if any, speaks for it), not authoritative, or managed by a judged MachineDeployment.
_CAPI_NOT_JUDGED = frozenset({Reason.NOT_ENROLLED, Reason.NOT_AUTHORITATIVE, Reason.OWNED_BY_MACHINE_DEPLOYMENT})


def judged_for_skew(decision: BootImageDecision) -> bool:
    """Whether this object's boot image counts for skew (SPEC section 5)."""
    if _unmanaged(decision):
        return False
    if decision.kind == MACHINESET_KIND:
        return True
    return decision.kind in CAPI_KINDS and decision.reason not in _CAPI_NOT_JUDGED


def _unmanaged(decision: BootImageDecision) -> bool:
    # Windows MachineSets boot no RHCOS: they cannot hold upgrades for RHCOS skew.
    return decision.action is Action.SKIP and decision.reason == Reason.WINDOWS


def install_aleph(nodes: Iterable[Mapping[str, Any]], notes: list[InputNote] | None = None) -> str | None:
    """The oldest control-plane Node's aleph build: what MachineSets never updated still boot (SPEC
    section 5, the third evidence). None when no control-plane Node carries one."""
    return min_aleph((_annotations(n) for n in nodes if is_control_plane_node(n)), notes)


def _annotations(obj: Mapping[str, Any] | None) -> Mapping[str, str]:
    value = get_path(obj, ("metadata", "annotations")) if obj is not None else None
    return {k: v for k, v in value.items() if isinstance(v, str)} if isinstance(value, Mapping) else {}


def _skew_input(
    d: BootImageDecision, obj: Mapping[str, Any] | None, aleph: str | None, install_version: OcpVersion | None,
    notes: list[InputNote],
) -> MachineSetSkewInput:
    labels = get_path(obj, ("metadata", "labels")) if obj is not None else None
    label = labels.get(LABEL_OSSTREAM) if isinstance(labels, Mapping) else None
    release = machineset_boot_image(_annotations(obj), d.current_release, d.current_release_source, aleph,
                                    install_version, notes)
    skipped = str(d.reason) if d.action is Action.SKIP and d.reason in LEFT_BEHIND else None
    return MachineSetSkewInput(d.key, label if isinstance(label, str) else None, release, skipped)


# Skips of an enrolled MachineSet this controller would keep current but cannot: it stays at the
# image it has, which the verdict judges and names with the reason (the MCO counts the Azure ones
# as skipped since #6404). Choices (NotEnrolled, OwnedByOther, CustomBootImage, Windows) are not here.
LEFT_BEHIND = frozenset(
    {
        Reason.UNSUPPORTED_SECURITY_TYPE,
        Reason.MARKETPLACE_DATA_MISSING,
        Reason.MARKETPLACE_IMAGE_NOT_FOUND,
        Reason.UNSUPPORTED_ARCHITECTURE,
        Reason.ARCHITECTURE_NOT_IN_STREAM,
        Reason.REGION_NOT_IN_STREAM,
        Reason.IMAGE_NOT_IN_STREAM,
        Reason.STREAM_NOT_AVAILABLE,
        Reason.UNSUPPORTED_IMAGE_REFERENCE,
        Reason.TARGET_IMAGE_NOT_FOUND,
        Reason.TARGET_IMAGE_DEPRECATED,
        Reason.FAILURE_DOMAIN_NOT_FOUND,
    }
)
