"""A machine object's outcome, the way it travels back from its reconcile, and what the machine
reconciler remembers between keys.

One way back: the machine reconciler returns a `kube.workqueue.ReconcileResult` whose `state` is
the key's `MachineSetState`; the loop hands that state to the status reconciler, which keeps every
key's last outcome and lends it out read-only (`StatusReconciler.outcomes`). The reconcilers' own
memories (`WriteMemory`, the companion rules' `DisagreementClock`) are private to the one that
writes them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ..constants import EVENT_FIRST_BOOT_FAILED, Action, Reason
from ..core.claims import HotLoopRecord, LedgerEntry
from ..core.companion import Disagreement
from ..core.conflicts import WriterConflict
from ..core.context import ClusterFacts, PlanningContext
from ..core.model import BootImageDecision
from ..core.verification import VerificationOutcome
from ..kube.informer import resource_version
from ..vsphere.template_refresh import RefreshOutcome
from .keys import uid_of

# Failures retried with backoff when the API server's answer allows it (the others wait for the
# next change or resync).
RETRIED_FAILURES = frozenset({Reason.PATCH_FAILED, Reason.TEMPLATE_REFRESH_FAILED})


@dataclass(frozen=True, slots=True)
class MachineSetState:
    """The last outcome for one MachineSet: what we decided and whether it is done. Immutable: a
    step that adds to it (the claim warning, the boot verdict) makes a new one.

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
    # Why claiming it makes the MCO hold upgrades (a MachineSet handed over from the MCO): the
    # Warning before the claim says it, and our ClusterOperator's Upgradeable message after it.
    claim_warning: str | None = None
    # Boot verification (SPEC section 3b): the verdict on the image it boots, and what was done.
    verification: VerificationOutcome | None = None

    @classmethod
    def failed(cls, decision: BootImageDecision, reason: Reason, message: str, *, permanent: bool = False) -> MachineSetState:
        return cls(decision, error=message, error_reason=reason, permanent=permanent)

    @property
    def updated(self) -> bool:
        """The boot image was brought to the target: the MachineSet patched, or (vSphere) its
        template rebuilt in vCenter under the same name."""
        return self.patched or (self.refreshed is not None and self.error is None)

    @property
    def boot_failure(self) -> str | None:
        """A boot image that failed its first boot here, as the Degraded condition says it: the
        image it boots failed (not rolled back), or it was rolled back from the golden image,
        which stays unwritten until the golden data names another (SPEC section 3b)."""
        v = self.verification
        if v is not None and v.failed:
            return f"{EVENT_FIRST_BOOT_FAILED}: {v.failure_text()}"
        if self.decision.reason == Reason.TARGET_IMAGE_FAILED_FIRST_BOOT:
            return f"{EVENT_FIRST_BOOT_FAILED}: {self.decision.message}"
        return None

    @property
    def error_text(self) -> str | None:
        """The error as conditions and events show it: `Reason: message`."""
        if self.error is None:
            return None
        return f"{self.error_reason or Reason.PATCH_FAILED}: {self.error}"

    @property
    def settled(self) -> bool:
        """Current, or not ours to write, and nothing wrong: what every MachineSet of a settled
        fleet reports. A pass of nothing but these changes no status, so no mid-pass report is
        made for it (SPEC section 7, invariant 5, however long the pass takes)."""
        return (
            self.decision.action in (Action.NOOP, Action.SKIP)
            and not self.updated
            and self.error is None
            and self.boot_failure is None
        )

    @property
    def retried(self) -> bool:
        """A failure the queue retries with backoff (transient)."""
        return self.error is not None and self.error_reason in RETRIED_FAILURES and not self.permanent


@dataclass(frozen=True, slots=True)
class PlannedAhead:
    """An offline decision and exactly what it was made from: the cached object (by identity; a new
    version is a new object) and the planning inputs (by identity; they are rebuilt on any
    cluster-wide change). Only for objects whose plan reads nothing else (Machine API kinds)."""

    obj: Mapping[str, Any]
    context: PlanningContext
    facts: ClusterFacts
    decision: BootImageDecision

    def answers(self, obj: Mapping[str, Any], context: PlanningContext, facts: ClusterFacts) -> bool:
        return self.obj is obj and self.context is context and self.facts is facts


@dataclass
class WriteMemory:
    """What the machine reconciler remembers between reconciles of a key, for its own writes only
    (no report reads it)."""

    # key -> the resourceVersion our last patch replaced (the cache may still show it).
    superseded: dict[str, str] = field(default_factory=dict)
    # key -> the resourceVersion a patch being sent tests (its watch event may come before its answer).
    sending: dict[str, str] = field(default_factory=dict)
    # uid -> our last boot image write: still counts a hot loop when a writer that replaces the
    # whole object (PUT of an old copy) wipes the persisted record with it.
    hot_loops: dict[str, HotLoopRecord] = field(default_factory=dict)
    # uid -> the holder's count of a write the API server then refused: not counted twice.
    unsent: dict[str, LedgerEntry] = field(default_factory=dict)
    # uid -> a count counted ahead in a holder write not answered yet.
    counting: dict[str, LedgerEntry] = field(default_factory=dict)
    outages: dict[str, int] = field(default_factory=dict)  # key -> transient decisions in a row
    uids: dict[str, str] = field(default_factory=dict)  # key -> the uid last seen under it
    # uid -> an offline decision made ahead of the object's own reconcile (see `PlannedAhead`).
    planned: dict[str, PlannedAhead] = field(default_factory=dict)

    def wrote(self, key: str, old: dict[str, Any]) -> bool:
        """Whether a change of `key` from `old` is our own patch landing (the triggers' `OwnWrites`):
        our patches test the resourceVersion they replace, so the version after `old` is ours when
        `old` is the one our last patch of this key replaced, or the one a patch still waiting for
        its answer tests (a fifth of the watch events came first). The triggers put these echoes
        behind the keys still to be written. A patch in flight that loses to another writer fails
        its test and is planned again from a fresh read at once, so that writer's change is never
        left unanswered."""
        rv = resource_version(old)
        return rv is not None and rv in (self.superseded.get(key), self.sending.get(key))

    def observe(self, key: str, obj: dict[str, Any]) -> bool:
        """Remember the uid under `key` (counts kept for an object of that name deleted and created
        again belong to the old uid and are dropped); True when `obj` is worth planning: not a
        version our own patch already replaced, which the cache may still show. Planning that one
        would only send a patch doomed to fail its resourceVersion test, and the watch event of our
        write follows."""
        uid = uid_of(obj)
        old = self.uids.get(key)
        if old != uid:
            if old is not None:
                self._forget_uid(old)
            self.uids[key] = uid
        return resource_version(obj) != self.superseded.get(key)

    def forget(self, key: str) -> None:
        """The object is gone: nothing about it is kept."""
        self.superseded.pop(key, None)
        self.outages.pop(key, None)
        uid = self.uids.pop(key, None)
        if uid is not None:
            self._forget_uid(uid)

    def _forget_uid(self, uid: str) -> None:
        self.hot_loops.pop(uid, None)
        self.unsent.pop(uid, None)
        self.planned.pop(uid, None)
