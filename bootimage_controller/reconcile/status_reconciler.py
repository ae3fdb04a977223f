"""The `@status` key: conditions, ClusterOperator, skew and metrics recomputed from every outcome.

What the status says is decided by the reporter (`reporting.PassReporter`), from a `StatusView`;
when it is written is the status writer's business. This reconciler only decides when to ask for a
report: when the queue reaches the status key (after the keys queued before it), and during a long
pass, spaced so the report's own cost stays a small share of the pass.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from ..kube.fence import UpgradeGateClosed
from ..kube.workqueue import DONE, ReconcileResult
from .keys import machine_key, split_key
from .state import MachineSetState, Outcomes
from .store import ClusterInputs, ClusterView, InformerStore

# Mid-pass reports cost O(MachineSets) on the event loop (0.1 s at 5,000): spaced to 25 times their
# cost, at most 4% of a long pass goes to them (10 times cost a 5,000-MachineSet pass 10%), and the
# Progressing counts still move every few seconds.
REPORT_SPACING = 25


@dataclass(frozen=True)
class StatusView:
    """Everything the status is computed from, at one moment."""

    inputs: ClusterInputs
    states: list[MachineSetState]
    unplanned: list[tuple[str, str, str]]  # (kind, namespace, name) not reconciled yet in this pass
    synced: bool
    upgrade_gate: UpgradeGateClosed | None
    claim_warnings: tuple[str, ...]
    access_notes: tuple[str, ...]
    lookup: Callable[[str, str, str], Mapping[str, Any] | None]  # (kind, namespace, name) -> cached object


# Mid-pass progress reports at most this often (seconds); the status key reports whenever the queue
# reaches it. The one place this is set (ReconcileOptions defaults to it).
PROGRESS_INTERVAL = 2.0


class StatusReconciler:
    def __init__(
        self, store: InformerStore, cluster: ClusterView, outcomes: Outcomes, machine_kinds: tuple[str, ...],
        on_pass: Callable[[StatusView], None] | None, progress_interval: float = PROGRESS_INTERVAL,
    ) -> None:
        self.store = store
        self.cluster = cluster
        self.outcomes = outcomes
        self.machine_kinds = machine_kinds
        self.on_pass = on_pass
        self.progress_interval = progress_interval
        self._last_report = -math.inf
        self._report_cost = 0.0

    async def reconcile(self, _key: str) -> ReconcileResult:
        self.report()
        return DONE

    def after_machine_key(self) -> None:
        """The status key waits behind every key queued before it: during a long pass report
        progress from here too, at most once per progress interval, counted from the first
        reconcile (a short pass then writes its status once, at the end: a restart on a settled
        fleet writes nothing, where a report at its first key showed a transient Progressing)."""
        now = time.monotonic()
        if self._last_report == -math.inf:
            self._last_report = now
        if now - self._last_report >= max(self.progress_interval, REPORT_SPACING * self._report_cost):
            self.report()

    def report(self) -> None:
        """Recompute status from every outcome (on the event loop: see REPORT_SPACING)."""
        started = time.monotonic()
        if self.on_pass is not None:
            self.on_pass(self.view())
        self._last_report = time.monotonic()
        self._report_cost = self._last_report - started

    def view(self) -> StatusView:
        warnings = self.outcomes.claim_warnings
        return StatusView(
            inputs=self.cluster.inputs(),
            states=list(self.outcomes.states.values()),
            unplanned=self.unplanned(),
            synced=self.store.synced(),
            upgrade_gate=self.cluster.upgrade_gate(),
            claim_warnings=tuple(warnings[k] for k in sorted(warnings)),
            access_notes=tuple(self.store.access_notes()),
            lookup=self.store.get,
        )

    def unplanned(self) -> list[tuple[str, str, str]]:
        """(kind, namespace, name) of the cached objects not reconciled yet (pending in a pass)."""
        states = self.outcomes.states
        return [split_key(key) for kind in self.machine_kinds for obj in self.store.list(kind)
                if (key := machine_key(obj)) not in states]
