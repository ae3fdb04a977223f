"""Status from every MachineSet's last outcome: conditions, ClusterOperator, skew and metrics.

`PassReporter` is called by the status reconciler (`status_reconciler`) with a `StatusView` when
the status key comes up (and during a long pass); it decides what the status should say and hands
it to the `StatusWriter`, which decides when to write it.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

import structlog

from .. import observability as obs
from ..constants import (
    ANNOTATION_RELEASE,
    CONDITION_DEGRADED,
    CONDITION_PROGRESSING,
    CPMS_KIND,
    Action,
    ConditionReason,
    Manager,
    Reason,
    SkewMode,
)
from ..core.conflicts import conflicts_note
from ..core.fleet import boot_image_age_seconds, releases_behind
from ..core.manager import MachineConfigOperator
from ..core.skew.assess import PassResult, assess_skew
from ..core.skew.verdict import SkewLimits, SkewVerdict
from ..core.status import (
    ClusterOperatorStatus,
    Outcome,
    PassSummary,
    Result,
    degraded_condition,
    find_condition,
    progressing_condition,
)
from ..core.verification import VERDICT_VALUES
from ..data import bundled_index
from ..errors import BootImageControllerError
from .state import MachineSetState
from .status_reconciler import StatusView
from .status_writer import StatusWriter

log = structlog.get_logger(__name__)


def boot_image_verified_value(state: MachineSetState) -> int | None:
    """`bootimage_controller_boot_image_verified` of one MachineSet (None: not judged). -1 while a
    failure stands: the image it boots failed, or the golden image did and was rolled back (it
    stays unwritten until the golden data names another)."""
    if state.verification is None:
        return None
    return -1 if state.boot_failure is not None else VERDICT_VALUES[state.verification.verdict.verdict]


class PassReporter:
    """Recomputes conditions, skew and metrics from every MachineSet's last outcome."""

    def __init__(self, writer: StatusWriter | None, limits: SkewLimits) -> None:
        self.writer = writer
        self.limits = limits
        self.summary: PassSummary = PassSummary()
        self.verdict: SkewVerdict | None = None

    def __call__(self, view: StatusView) -> None:
        now = datetime.now(UTC)
        inputs = view.inputs
        states = view.states
        unplanned = view.unplanned
        self.summary = self._summary(view)
        mc = inputs.objects.machine_configuration
        previous = ((mc or {}).get("status") or {}).get("conditions") or []
        progressing = progressing_condition(self.summary, now, find_condition(previous, CONDITION_PROGRESSING))
        degraded = degraded_condition(self.summary, now, find_condition(previous, CONDITION_DEGRADED))
        skew_status = self._skew(view, complete=not unplanned)
        self._metrics(states)
        if self.writer is None:
            return
        # Where the MCO's own controller runs, the MachineConfiguration's boot image conditions (and,
        # with its skew enforcement, the skew status) are the MCO's: ours go to our ClusterOperator.
        mco, platform = _mco_and_platform(view)
        mine = [] if mco is not None and mco.writes_conditions(platform) else [progressing, degraded]
        self.writer.set_machineconfiguration(mine, None if mco is not None and mco.runs_skew_enforcement else skew_status)
        co = ClusterOperatorStatus.build(
            synced=view.synced,
            progressing=progressing,
            degraded=degraded,
            verdict=self.verdict,
            now=now,
            notes=view.claim_warnings,
            available_notes=(*view.access_notes, *_conflict_notes(states)),
        )
        self.writer.set_cluster_operator(co)  # the writer decides when (its Progressing hold-off)

    def _summary(self, view: StatusView) -> PassSummary:
        inputs = view.inputs
        if inputs.problem is not None:
            return PassSummary.blocked(ConditionReason.BOOT_IMAGES_CONFIGMAP_INVALID, inputs.problem, degrading=True)
        gate = view.upgrade_gate
        if gate is not None:
            return PassSummary.blocked(ConditionReason.CLUSTER_NOT_STABLE, str(gate), degrading=False)
        # Another manager's MachineSets are not ours to count (SPEC rule 2b): like the unenrolled.
        # A boot image that failed its first boot degrades, whoever wrote it (SPEC section 3b): the
        # message names the image, its writer and the fix.
        outcomes = [
            Outcome.from_decision(s.decision, patched=s.updated, error=s.error_text or s.boot_failure)
            if s.decision.manager is Manager.OURS or s.boot_failure is not None
            else Outcome(s.decision.kind, s.decision.namespace, s.decision.name, Result.UNMANAGED)
            for s in view.states
        ]
        # Not reconciled yet in this pass: pending, so the counts cover the whole fleet mid-pass.
        outcomes += [Outcome(kind, namespace, name, Result.PENDING) for kind, namespace, name in view.unplanned]
        return PassSummary.from_outcomes(outcomes)

    def _skew(self, view: StatusView, *, complete: bool) -> dict[str, Any] | None:
        inputs, states = view.inputs, view.states
        if inputs.context is None:
            self.verdict = None
            return None
        machines = [
            (s.decision, as_written(s, view.lookup(s.decision.kind, s.decision.namespace, s.decision.name)))
            for s in states
        ]
        try:
            assessment = assess_skew(
                inputs.objects,
                inputs.context.enrollment,
                machines,
                self.limits,
                degraded=self.summary.degraded,
                degraded_message=self.summary.degraded_message(),
                golden=inputs.context.golden,
                facts=inputs.context.facts,
                after_pass=_pass_result(states) if complete else None,
            )
        except BootImageControllerError as exc:
            log.error("skew enforcement setting is invalid", error=str(exc))
            self.verdict = None
            return None
        obs.log_input_notes(assessment.notes)
        self.verdict = assessment.verdict
        obs.SKEW_UPGRADEABLE.set(1 if assessment.verdict.upgradeable else 0)
        obs.SKEW_ENFORCEMENT_NONE.set(1 if assessment.verdict.mode is SkewMode.NONE else 0)
        image = assessment.verdict.cluster_boot_image
        if image is not None:
            obs.set_cluster_boot_image(image.value, str(image.source))
        previous = ((inputs.objects.machine_configuration or {}).get("status") or {}).get(
            "bootImageSkewEnforcementStatus"
        )
        patch = assessment.status.to_merge_patch(previous)
        if patch is None:
            log.debug("skew status not written: its record is unknown", explanation=assessment.status.explanation)
        return patch

    def _metrics(self, states: list[MachineSetState]) -> None:
        counts: dict[tuple[str, str, str], int] = {}
        for s in states:
            action = "error" if s.error else str(s.decision.action)
            reason = (s.error_reason or Reason.PATCH_FAILED) if s.error else s.decision.reason
            key = (s.decision.kind, action, str(reason))
            counts[key] = counts.get(key, 0) + 1
        obs.MACHINESETS.clear()
        for (kind, action, reason), n in counts.items():
            obs.MACHINESETS.labels(kind=kind, action=action, reason=reason).set(n)
        obs.DISAGREEMENTS.clear()
        for s in states:
            if s.disagreement is not None and s.disagreement.lasting:
                obs.DISAGREEMENTS.labels(namespace=s.decision.namespace, name=s.decision.name).set(1)
        obs.DEPRECATED.clear()
        for s in states:
            if s.decision.current_deprecated is not None:
                obs.DEPRECATED.labels(namespace=s.decision.namespace, name=s.decision.name, kind=s.decision.kind).set(1)
        obs.BOOT_IMAGE_VERIFIED.clear()
        for s in states:
            value = boot_image_verified_value(s)
            if value is not None:
                obs.BOOT_IMAGE_VERIFIED.labels(namespace=s.decision.namespace, name=s.decision.name,
                                               kind=s.decision.kind).set(value)
        obs.WRITER_CONFLICTS.clear()
        for s in states:
            if s.conflict is not None:
                obs.WRITER_CONFLICTS.labels(namespace=s.decision.namespace, name=s.decision.name).set(1)
        shown = tuple(s for s in states if s.decision.action is not Action.ERROR)

        def pools() -> list[obs.PoolBootImage]:  # built when scraped: ages are as of the scrape
            now = datetime.now(UTC)
            return [pool_boot_image(s, now) for s in shown]

        obs.POOLS.show(pools)


def as_written(state: MachineSetState, obj: Mapping[str, Any] | None) -> Mapping[str, Any] | None:
    """The object as our patch left it, whether or not the watch has brought the write back yet:
    with the boot-image-release record we wrote. The report at the end of a pass comes a few
    milliseconds after its last patch; without this it judged the last MachineSets by their old
    image and the next pass, reading our record, wrote the ClusterOperator again (issue 36: a
    settled fleet must see no write)."""
    release = state.decision.target_release
    # `patched`, not `updated`: a vSphere template rebuilt in vCenter writes no record on the
    # MachineSet, and the report must not claim one the cache will never show.
    if not state.patched or obj is None or not release:
        return obj
    meta = obj.get("metadata") or {}
    if (meta.get("annotations") or {}).get(ANNOTATION_RELEASE) == release:
        return obj  # the watch brought our write back: no copy (5,000 of them were 4 MiB a report)
    annotations = {**(meta.get("annotations") or {}), ANNOTATION_RELEASE: release}
    return {**obj, "metadata": {**meta, "annotations": annotations}}


def pool_boot_image(state: MachineSetState, now: datetime) -> obs.PoolBootImage:
    """The per-pool series of one state: once patched, the pool boots the target."""
    d = state.decision
    current = d.target_release if state.updated and d.target_release else d.current_release
    index = bundled_index()
    return obs.PoolBootImage(
        namespace=d.namespace, name=d.name, kind=d.kind, stream=d.stream or "", arch=d.architecture or "",
        release=current or "", target_release=d.target_release or "", manager=str(d.manager),
        age_seconds=boot_image_age_seconds(current, now),
        releases_behind=releases_behind(index.openshift_release(current) if current else None,
                                        index.openshift_release(d.target_release) if d.target_release else None),
    )


def _conflict_notes(states: list[MachineSetState]) -> tuple[str, ...]:
    note = conflicts_note([s.conflict for s in states if s.conflict is not None])
    return (note,) if note is not None else ()


def _mco_and_platform(view: StatusView) -> tuple[MachineConfigOperator | None, str | None]:
    ctx = view.inputs.context
    return (ctx.facts.managers.mco, ctx.facts.platform) if ctx is not None else (None, None)


def _pass_result(states: list[MachineSetState]) -> PassResult | None:
    """A finished pass (nothing left to patch) moves the Automatic record; otherwise keep it."""
    machinesets = [s for s in states if s.decision.kind != CPMS_KIND]
    if any(s.decision.action is Action.PATCH and not s.updated and s.error is None for s in machinesets):
        return None
    return PassResult.counted((s.decision, s.updated, s.error is not None) for s in machinesets)
