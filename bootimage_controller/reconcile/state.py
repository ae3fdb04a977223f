"""Every machine object's last outcome, and what the reconcilers remember between keys.

`Outcomes` is the one place the reconcilers share: the machine reconcilers write a key's outcome,
the status reconciler reads them all, the triggers forget a key when its object goes.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..constants import DEFAULT_DISAGREEMENT_GRACE, Reason
from ..core.claims import HotLoopRecord, LedgerEntry
from ..core.companion import Disagreement, DisagreementClock
from ..core.conflicts import WriterConflict
from ..core.model import BootImageDecision
from ..vsphere.template_refresh import RefreshOutcome

# Failures retried with backoff when the API server's answer allows it (the others wait for the
# next change or resync).
RETRIED_FAILURES = frozenset({Reason.PATCH_FAILED, Reason.TEMPLATE_REFRESH_FAILED})


@dataclass(slots=True)
class MachineSetState:
    """The last outcome for one MachineSet: what we decided and whether it is done.

    `error` (a write failure or a refusal: hot loop, unusable user data) wins over the decision;
    `error_reason` says which, typed, for events, metrics and the Degraded message. Both are set
    or neither: build failures with `failed`. `permanent`: the write was refused for good (422,
    403): it waits for a change rather than a backoff timer.
    """

    decision: BootImageDecision
    patched: bool = False
    error: str | None = None
    error_reason: Reason | None = None
    refreshed: RefreshOutcome | None = None  # vSphere: the template this reconcile built or replaced
    disagreement: Disagreement | None = None  # MCO-managed: on another image than our target
    conflict: WriterConflict | None = None  # GitOps or Hive, and the MCO writes it too
    permanent: bool = False

    @classmethod
    def failed(cls, decision: BootImageDecision, reason: Reason, message: str, *, permanent: bool = False) -> MachineSetState:
        return cls(decision, error=message, error_reason=reason, permanent=permanent)

    @property
    def updated(self) -> bool:
        """The boot image was brought to the target: the MachineSet patched, or (vSphere) its
        template rebuilt in vCenter under the same name."""
        return self.patched or (self.refreshed is not None and self.error is None)

    @property
    def error_text(self) -> str | None:
        """The error as conditions and events show it: `Reason: message`."""
        if self.error is None:
            return None
        return f"{self.error_reason or Reason.PATCH_FAILED}: {self.error}"

    @property
    def retried(self) -> bool:
        """A failure the queue retries with backoff (transient)."""
        return self.error is not None and self.error_reason in RETRIED_FAILURES and not self.permanent


@dataclass
class Outcomes:
    """Per key: the last outcome, and what the next reconcile of that key must remember."""

    disagreement_grace: float = DEFAULT_DISAGREEMENT_GRACE
    states: dict[str, MachineSetState] = field(default_factory=dict)
    # key -> the resourceVersion our last patch replaced (the cache may still show it).
    superseded: dict[str, str] = field(default_factory=dict)
    # uid -> our last boot image write: still counts a hot loop when a writer that replaces the
    # whole object (PUT of an old copy) wipes the persisted record with it.
    hot_loops: dict[str, HotLoopRecord] = field(default_factory=dict)
    # uid -> the holder's count of a write the API server then refused: not counted twice.
    unsent: dict[str, LedgerEntry] = field(default_factory=dict)
    outages: dict[str, int] = field(default_factory=dict)  # key -> transient decisions in a row
    # key -> why claiming it makes the MCO hold upgrades (our ClusterOperator says so too).
    claim_warnings: dict[str, str] = field(default_factory=dict)
    disagreements: DisagreementClock = field(init=False)

    def __post_init__(self) -> None:
        self.disagreements = DisagreementClock(self.disagreement_grace)

    def forget(self, key: str, uid: str) -> None:
        """The object is gone: nothing about it is kept."""
        self.states.pop(key, None)
        self.disagreements.forget(key)
        self.outages.pop(key, None)
        self.claim_warnings.pop(key, None)
        self.superseded.pop(key, None)
        self.hot_loops.pop(uid, None)
        self.unsent.pop(uid, None)
