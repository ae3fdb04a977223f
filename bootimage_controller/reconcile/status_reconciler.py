"""The `@status` key: conditions, ClusterOperator, skew and metrics recomputed from every outcome.

What the status says is decided by the reporter (`reporting.PassReporter`), from a `StatusView`;
when it is written is the status writer's business. This reconciler only decides when to ask for a
report: when the queue reaches the status key (after the keys queued before it), and during a long
pass, when the status clock (`status_clock`) says a mid-pass report is due.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from ..kube.fence import UpgradeGateClosed
from ..kube.workqueue import DONE, ReconcileResult
from .keys import machine_key, split_key
from .state import MachineSetState
from .status_clock import StatusClock
from .store import ClusterInputs, ClusterView, InformerStore


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


class StatusReconciler:
    def __init__(
        self, store: InformerStore, cluster: ClusterView, machine_kinds: tuple[str, ...],
        on_pass: Callable[[StatusView], None] | None, clock: StatusClock,
    ) -> None:
        self.store = store
        self.cluster = cluster
        self._states: dict[str, MachineSetState] = {}
        # Every machine key's last outcome, read-only: the reconcilers and triggers that need
        # another key's outcome read it here; only `record` (the loop's hand-over) writes it.
        self.outcomes: Mapping[str, MachineSetState] = MappingProxyType(self._states)
        self.machine_kinds = machine_kinds
        self.on_pass = on_pass
        self.clock = clock
        self._unsettled = 0  # outcomes that are not `settled`: kept as they are recorded

    async def reconcile(self, _key: str) -> ReconcileResult[None]:
        self.report()
        return DONE

    def record(self, key: str, state: MachineSetState | None) -> None:
        """A machine key's outcome, handed over by the loop (None: the object is gone)."""
        before = self._states.get(key)
        if before is not None and not before.settled:
            self._unsettled -= 1
        if state is None:
            self._states.pop(key, None)
        else:
            self._states[key] = state  # in place: the reports list outcomes in a stable order
            self._unsettled += not state.settled

    def after_machine_key(self) -> None:
        """The status key waits behind every key queued before it: during a long pass report
        progress from here too, when the status clock says a mid-pass report is due and the pass
        has something to say. Until an outcome is not `settled` (a patch, an error), a mid-pass
        report could only say "Progressing" for the keys not reached yet, and the report at the
        end would take it back: two status writes on a fleet with nothing to do."""
        if self.clock.report_due() and self._unsettled:
            self.report()

    def report(self) -> None:
        """Recompute status from every outcome (on the event loop: see status_clock.REPORT_SPACING)."""
        started = self.clock.now()
        if self.on_pass is not None:
            self.on_pass(self.view())
        self.clock.reported(started)

    def view(self) -> StatusView:
        states = self._states
        warnings = sorted((key, s.claim_warning) for key, s in states.items() if s.claim_warning is not None)
        return StatusView(
            inputs=self.cluster.inputs(),
            states=list(states.values()),
            unplanned=self.unplanned(),
            synced=self.store.synced(),
            upgrade_gate=self.cluster.upgrade_gate(),
            claim_warnings=tuple(message for _, message in warnings),
            access_notes=tuple(self.store.access_notes()),
            lookup=self.store.get,
        )

    def unplanned(self) -> list[tuple[str, str, str]]:
        """(kind, namespace, name) of the cached objects not reconciled yet (pending in a pass)."""
        states = self._states
        return [split_key(key) for kind in self.machine_kinds for obj in self.store.list(kind)
                if (key := machine_key(obj)) not in states]
