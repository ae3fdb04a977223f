"""What happens next: who writes each boot image, and when (SPEC sections 3 and 4). Pure.

On a modern cluster the Machine Config Operator writes most MachineSets and this controller the rest,
so what the project says is most of what it does. Every report reads this one model, none recounts
the decisions itself: `plan`'s summary, table, Details and JSON (`gate`, `nextWrite`,
`alsoWrittenBy`), the daemon's Events (a proposal says the MCO writes the MachineSet too) and
`fleet`'s rows.

The rules, from a decision, its managers and the upgrade gate:
- nothing to change (noop, skip, error): nobody writes;
- this controller's or the MCO's: it writes now, or once the upgrade completes while ClusterVersion
  is not Completed (both wait: the MCO's `isClusterStable`, reference section 3);
- a skip only because the cloud was not asked (an AMI nobody knows offline): `unknown`, with what
  decides it (`because`) and how to ask;
- a GitOps, Hive or `external` MachineSet the MCO covers too: the MCO writes it (it reads none of
  those marks), a writer conflict; so is an opted-out one (`boot-image-updates: Disabled`, which only
  this controller reads): the planner gives the MCO's decision, marked `opted_out`;
- any other GitOps, Hive or `external` MachineSet: written when someone changes its source (Git, the
  hub's MachinePool, the policy); this controller proposes the change.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from ..constants import Action, ConditionReason, Manager
from .cluster import upgrade_blocker
from .companion import hive_change
from .conflicts import WriterConflict, writer_conflict
from .model import BootImageDecision


class Writer(StrEnum):
    """Who sends (or must make) the next write of a boot image."""

    OURS = "bootimage-controller"
    MCO = "mco"
    GITOPS = "gitops"
    HIVE = "hive"
    EXTERNAL = "external"  # a policy or other writer that keeps the field (SPEC rule 2b)
    NOBODY = "nobody"


class When(StrEnum):
    NOW = "now"
    AFTER_UPGRADE = "after-upgrade"  # ClusterVersion is not Completed: written once it is
    ON_CHANGE = "on-source-change"  # when someone changes Git or the hub's MachinePool
    NEVER = "never"
    UNKNOWN = "unknown"  # it depends on what only the cloud can tell, and it was not asked (`because`)


_WRITER_OF = {Manager.OURS: Writer.OURS, Manager.MCO: Writer.MCO, Manager.GITOPS: Writer.GITOPS,
              Manager.HIVE: Writer.HIVE, Manager.EXTERNAL: Writer.EXTERNAL}


@dataclass(frozen=True, slots=True)
class UpgradeGate:
    """Whether boot images may be written now (SPEC section 3: never while ClusterVersion is not
    Completed, or missing). The same function decides for `plan` and the daemon."""

    open: bool
    reason: str
    message: str
    # What a closed gate waits for, in the plan's summary: "the upgrade completes", or "a
    # ClusterVersion is found" where there is none (no upgrade at all: an object is missing).
    until: str = "the upgrade completes"

    @classmethod
    def from_cluster_version(cls, cluster_version: Mapping[str, Any] | None) -> UpgradeGate:
        blocker = upgrade_blocker(cluster_version)
        if blocker is None:
            return OPEN_GATE
        until = "a ClusterVersion is found" if cluster_version is None else "the upgrade completes"
        return cls(False, ConditionReason.CLUSTER_NOT_STABLE, blocker, until)

    def to_json(self) -> dict[str, Any]:
        return {"open": self.open, "reason": str(self.reason), "message": self.message}


OPEN_GATE = UpgradeGate(True, ConditionReason.AS_EXPECTED,
                        "ClusterVersion is Completed and not Progressing: boot images are written as planned")


@dataclass(frozen=True, slots=True)
class NextWrite:
    """The next write of one object's boot image: who, when, and whether two writers collide."""

    decision: BootImageDecision
    writer: Writer
    when: When
    conflict: WriterConflict | None = None
    because: str | None = None  # with `when: unknown`: what decides it, and how to ask

    @property
    def changes(self) -> bool:
        """Whether the boot image changes (or may: `unknown` is listed with the rest, and says why)."""
        return self.writer is not Writer.NOBODY

    @property
    def certain(self) -> bool:
        return self.when is not When.UNKNOWN

    @property
    def label(self) -> str:
        """The table's ACTION cell: `patch` only for what this controller writes now."""
        if self.conflict is not None:
            return "conflict"  # two writers, whatever the next write: Git or the MCO puts theirs back
        if self.when is When.UNKNOWN:
            return "unknown"  # the cloud decides; Details say what and how to ask
        if self.writer is Writer.NOBODY:
            return str(self.decision.action)
        later = self.when is When.AFTER_UPGRADE
        back = self.decision.downgrade  # a step back to an older build: said in the cell, not hidden in Details
        if self.writer is Writer.OURS:
            return "after-upgrade" if later else "downgrade" if back else "patch"
        if self.writer is Writer.MCO:
            return "mco-after-upgrade" if later else "mco-downgrade" if back else "mco-patch"
        return "propose"

    def sentence(self) -> str:
        """Who writes it and when, for Details and Events."""
        d = self.decision
        what = f"{d.current_release or 'unknown release'} -> {d.target_release or 'the golden image'}"
        if d.downgrade:
            what += " (back to an older build)"
        if d.warning:
            what += f"; warning: {d.warning}"
        if self.when is When.UNKNOWN:
            who = "the Machine Config Operator" if self.writer is Writer.MCO else "this controller"
            return f"whether {who} patches it ({what}) depends on {self.because}"
        when = " once the upgrade completes" if self.when is When.AFTER_UPGRADE else " now"
        if self.writer is Writer.OURS:
            return f"this controller patches it{when}: {what}"
        if self.writer is Writer.MCO:
            text = f"the Machine Config Operator patches it{when}: {what}"
            if self.conflict is not None:
                text += f"; a writer conflict: {self.conflict.summary()}"
            return text
        if self.writer is Writer.GITOPS:
            return (f"Git must carry {what} ({d.manager_why}); this controller proposes the patch "
                    "(`plan --write-patched DIR`, Event BootImageUpdateProposed)")
        if self.writer is Writer.HIVE:
            return f"the Hive MachinePool on the hub must be changed: {what} ({d.manager_why}): {hive_change(d)}"
        if self.writer is Writer.EXTERNAL:
            return f"the writer that keeps the field must change it: {what} ({d.manager_why})"
        return f"nothing is written: {d.action} {d.reason}"

    def to_json(self) -> dict[str, Any]:
        # `action`: the table's ACTION word, the one vocabulary of plan, fleet and the page (issue 47).
        out = {"writer": str(self.writer), "when": str(self.when), "action": self.label}
        if self.because is not None:
            out["because"] = self.because
        return out


def next_write(decision: BootImageDecision, gate: UpgradeGate, conflict: WriterConflict | None = None) -> NextWrite:
    if decision.action is Action.SKIP and decision.ask_cloud is not None:
        return _depends_on_cloud(decision, conflict)
    if decision.action is not Action.PATCH:
        return NextWrite(decision, Writer.NOBODY, When.NEVER, conflict)
    when = When.NOW if gate.open else When.AFTER_UPGRADE
    if Manager.MCO in decision.also_written_by or decision.manager is Manager.MCO:
        return NextWrite(decision, Writer.MCO, when, conflict)
    writer = _WRITER_OF.get(decision.manager, Writer.OURS)
    if writer is Writer.OURS:
        return NextWrite(decision, writer, when, conflict)
    return NextWrite(decision, writer, When.ON_CHANGE, conflict)


def _depends_on_cloud(decision: BootImageDecision, conflict: WriterConflict | None) -> NextWrite:
    """A skip only because the cloud was not asked (an AMI neither the golden data nor the bundled
    index knows): the MCO, or this controller, writes it if the cloud says it is RHCOS. Said as
    `unknown`, never as a confident `nobody, never` (measured beside the MCO: it asked EC2 and wrote
    both such AMIs of the run)."""
    if decision.manager is Manager.MCO or Manager.MCO in decision.also_written_by:
        writer = Writer.MCO
    elif decision.manager is Manager.OURS:
        writer = Writer.OURS
    else:
        return NextWrite(decision, Writer.NOBODY, When.NEVER, conflict)  # Git or Hive carries what it carries
    return NextWrite(decision, writer, When.UNKNOWN, conflict, because=decision.ask_cloud)


# (kind, namespace, name) -> the object planned, for what the decision alone does not carry.
ObjectLookup = Callable[[str, str, str], Mapping[str, Any] | None]


@dataclass(frozen=True)
class Forecast:
    """What happens next on one cluster: the gate and every object's next write."""

    gate: UpgradeGate
    writes: tuple[NextWrite, ...]
    _by_key: Mapping[tuple[str, str, str], NextWrite] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def build(
        cls,
        decisions: Iterable[BootImageDecision],
        gate: UpgradeGate,
        lookup: ObjectLookup | None = None,
        machine_configuration: Mapping[str, Any] | None = None,
        gitops_labels: Sequence[str] = (),
    ) -> Forecast:
        writes = []
        for d in decisions:
            two_writers = bool(d.also_written_by) or d.opted_out
            obj = lookup(d.kind, d.namespace, d.name) if lookup is not None and two_writers else None
            conflict = writer_conflict(d, obj or {}, machine_configuration, gitops_labels) if two_writers else None
            writes.append(next_write(d, gate, conflict))
        return cls(gate, tuple(writes), {(w.decision.kind, w.decision.namespace, w.decision.name): w for w in writes})

    def of(self, decision: BootImageDecision) -> NextWrite:
        found = self._by_key.get((decision.kind, decision.namespace, decision.name))
        return found if found is not None else next_write(decision, self.gate)

    def count(self, writer: Writer) -> int:
        """The writes `writer` will certainly make (not those the cloud decides: `unknown`)."""
        return sum(1 for w in self.writes if w.writer is writer and w.certain)

    @property
    def unknown(self) -> int:
        return sum(1 for w in self.writes if not w.certain)

    @property
    def conflicts(self) -> tuple[WriterConflict, ...]:
        return tuple(w.conflict for w in self.writes if w.conflict is not None)

    def changing(self) -> tuple[NextWrite, ...]:
        """Every object whose boot image will change, this controller's first, then by writer."""
        order = list(Writer)
        return tuple(sorted((w for w in self.writes if w.changes), key=lambda w: order.index(w.writer)))

    def summary(self) -> str:
        """`this controller patches 1 now, the MCO 3; GitOps must carry 1; 1 writer conflict`."""
        ours, mco = self.count(Writer.OURS), self.count(Writer.MCO)
        if self.gate.open:
            parts = [f"this controller patches {ours} now" + (f", the MCO {mco}" if mco else "")]
        else:
            then = f"then this controller {ours}" + (f" and the MCO {mco}" if mco else "")
            parts = [f"nothing is patched until {self.gate.until} ({then})"]
        if self.count(Writer.GITOPS):
            parts.append(f"GitOps must carry {self.count(Writer.GITOPS)} (plan --write-patched DIR)")
        if self.count(Writer.HIVE):
            parts.append(f"Hive holds {self.count(Writer.HIVE)} (change its MachinePools)")
        if self.count(Writer.EXTERNAL):
            parts.append(f"a policy or other writer holds {self.count(Writer.EXTERNAL)}")
        back = sum(1 for w in self.writes if w.decision.downgrade and w.changes and w.certain)
        if back:
            parts.append(f"{back} of them back to an older build (downgrade: the golden data is older)")
        if self.unknown:
            parts.append(f"{self.unknown} depend{'s' if self.unknown == 1 else ''} on what only the cloud can tell "
                         "(plan --cloud-verify)")
        conflicts = len(self.conflicts)
        if conflicts:
            parts.append(f"{conflicts} writer conflict{'s' if conflicts != 1 else ''}")
        return "; ".join(parts)


__all__ = ["OPEN_GATE", "Forecast", "NextWrite", "UpgradeGate", "When", "Writer", "next_write"]
