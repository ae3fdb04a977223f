"""The companion rules (SPEC rule 2b) as the machine reconciler applies them: another manager's
MachineSet is never written; an MCO-managed one is compared with our target after the MCO's pass;
a MachineSet handed over from the MCO is claimed only after the admin hears whether the claim
makes the MCO hold upgrades."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any

import structlog

from ..constants import EVENT_CLAIM_HOLDS_UPGRADES, EVENT_TYPE_WARNING, Manager
from ..core.companion import (
    DisagreementClock,
    MachineSetAfter,
    McoPass,
    boot_images_after,
    claim_hold_warning,
)
from ..core.conflicts import writer_conflict
from ..core.context import PlanningContext
from ..core.model import BootImageDecision
from ..core.skew.assess import install_aleph
from ..core.skew.policy import install_version_from_cluster_version
from ..core.skew.record import BootImageRelease, ReleaseSource
from ..core.skew.verdict import SkewLimits
from .event_rules import EventSink, involved
from .keys import machine_key, split_key
from .state import MachineSetState
from .store import ClusterView, InformerStore

log = structlog.get_logger(__name__)


class Delegation:
    """`outcomes`: every key's last outcome, read-only (the status reconciler's). The disagreement
    clock is this class's own memory."""

    def __init__(
        self, store: InformerStore, cluster: ClusterView, outcomes: Mapping[str, MachineSetState],
        skew_limits: SkewLimits, events: EventSink | None, enqueue_after: Callable[[str, float], None],
        disagreement_grace: float,
    ) -> None:
        self.store = store
        self.cluster = cluster
        self.outcomes = outcomes
        self.skew_limits = skew_limits
        self.events = events
        self.enqueue_after = enqueue_after
        self.disagreements = DisagreementClock(disagreement_grace)

    def forget(self, key: str) -> None:
        """The object is gone, or ours again: no disagreement is timed for it."""
        self.disagreements.forget(key)

    def delegated(self, key: str, obj: Mapping[str, Any], decision: BootImageDecision,
                  gitops_labels: tuple[str, ...] = ()) -> MachineSetState:
        """Another manager's MachineSet: nothing is written. GitOps gets a proposal (an Event,
        `notices.companion_event`); a GitOps or Hive one the MCO writes too is a writer conflict
        (core.conflicts); an MCO-managed one is compared with our target once the MCO says its pass
        is done, and a disagreement that outlasts the grace is reported."""
        if decision.manager is not Manager.MCO or decision.opted_out:
            # (An opted-out MachineSet the MCO writes is a conflict with the admin's pin: said, not timed.)
            self.disagreements.forget(key)
            mc = self.store.one("machineconfiguration") if decision.also_written_by or decision.opted_out else None
            return MachineSetState(decision, conflict=writer_conflict(decision, obj, mc, gitops_labels))
        # From the watch as it is now: the parsed inputs are rebuilt on spec changes only.
        mco_pass = McoPass.from_machine_configuration(self.store.one("machineconfiguration"))
        found = self.disagreements.observe(key, decision, mco_pass, time.monotonic())
        if found is not None and not found.lasting:
            self.enqueue_after(key, found.wait)  # looked at again when the grace is over
        return MachineSetState(decision, disagreement=found)

    def claim_warning(self, key: str, decision: BootImageDecision, ctx: PlanningContext) -> str | None:
        """Why claiming this MachineSet makes the MCO hold upgrades (None: it does not), for the
        Warning before the claim and, on its outcome, our ClusterOperator's Upgradeable message."""
        if not decision.taken_from_mco:
            return None
        objects = self.cluster.inputs().objects
        warning = claim_hold_warning(
            decision, ctx.facts.managers.mco, objects.machine_configuration,
            install_version_from_cluster_version(objects.cluster_version),
            self._boot_images_after(key, decision), self.skew_limits,
        )
        return warning.message if warning is not None else None

    def _boot_images_after(self, key: str, decision: BootImageDecision) -> list[BootImageRelease]:
        """Every known MachineSet's boot image once this patch is written (for the Manual value)."""
        objects = self.cluster.inputs().objects
        aleph = install_aleph(objects.nodes)
        install = install_version_from_cluster_version(objects.cluster_version)
        machines = [MachineSetAfter(decision, {}, ReleaseSource.GOLDEN_DATA)]
        for other_key, state in self.outcomes.items():
            if other_key == key:
                continue
            cached = self.store.get(*split_key(other_key))
            machines.append(MachineSetAfter(state.decision, ((cached or {}).get("metadata") or {}).get("annotations") or {},
                                            ReleaseSource.MACHINESET_RECORD if state.updated else None))
        return boot_images_after(machines, aleph, install)

    async def warn_before_claim(self, obj: Mapping[str, Any], message: str | None) -> None:
        """The admin hears that the MCO will hold upgrades before the claim is written, not after:
        the Warning (`message`, from `claim_warning`) is written (awaited) first, and our
        ClusterOperator's message follows."""
        if message is None or self.events is None:
            return
        key = machine_key(obj)
        log.warning("claim makes the Machine Config Operator hold upgrades", key=key, message=message)
        await self.events.emit_now(involved(obj), EVENT_TYPE_WARNING, EVENT_CLAIM_HOLDS_UPGRADES, message)
