"""Status reporting, the pure part: the MachineConfiguration conditions and the ClusterOperator.

(`status_writer.StatusWriter` writes them.)

- Pure summaries. `PassSummary` counts a pass's outcomes per kind; `progressing_condition` and
  `degraded_condition` turn it into `BootImageUpdateProgressing` / `BootImageUpdateDegraded` with
  the Machine Config Operator's message wording (`Reconciled 3 of 4 MAPI MachineSets (1 skipped) |
  Reconciled 0 of 0 ControlPlaneMachineSets`); `ClusterOperatorStatus.build` derives the
  ClusterOperator's conditions, versions and related objects.

Deliberate differences from the Machine Config Operator (reference section 10):
- `lastTransitionTime` changes only when a condition's status flips (the usual Kubernetes
  convention). The MCO bumps it whenever any field, the message included, changes.
- Both kinds are summarised from one pass, so a ControlPlaneMachineSet error is never masked by
  a clean MachineSet loop (the MCO's Degraded masking quirk).
- Conditions owned by others are never touched or removed; the MCO overwrites the whole status
  on a conflict retry. Missing condition types are added (the MCO adds nothing to a list that
  lacks them).
- Every skip except "not enrolled" counts as skipped (the MCO leaves out some, reference 16.3):
  the administrator sees every MachineSet that was looked at and not updated.
- No CAPI parts in the messages: this controller does not reconcile CAPI resources.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from enum import Enum
from typing import TYPE_CHECKING, Any, Literal, Protocol

from .. import __version__
from ..constants import (
    BOOTIMAGES_CONFIGMAP,
    CAPI_KINDS,
    CAPI_MACHINEDEPLOYMENT,
    CAPI_MACHINEDEPLOYMENTS_LABEL,
    CAPI_MACHINESET,
    CAPI_MACHINESETS_LABEL,
    CO_AVAILABLE,
    CO_DEGRADED,
    CO_PROGRESSING,
    CO_UPGRADEABLE,
    CONDITION_DEGRADED,
    CONDITION_MESSAGE_MAX,
    CONDITION_PROGRESSING,
    CPMS_KIND,
    CPMS_LABEL,
    CPMS_NAME,
    CPMS_PLURAL,
    MACHINE_API_GROUP,
    MACHINECONFIGURATION_NAME,
    MACHINECONFIGURATION_PLURAL,
    MACHINESET_PLURAL,
    MAPI_MACHINESETS_LABEL,
    MAPI_NAMESPACE,
    MCO_NAMESPACE,
    OPERATOR_GROUP,
    Action,
    ConditionReason,
    Reason,
)
from .times import format_time

if TYPE_CHECKING:
    pass


ConditionStatus = Literal["True", "False", "Unknown"]
# How many error texts a Degraded message lists before summarising the rest.
MAX_LISTED_ERRORS = 10


def _truncate(message: str, limit: int = CONDITION_MESSAGE_MAX) -> str:
    if len(message) <= limit:
        return message
    marker = "... (truncated)"
    return message[: limit - len(marker)] + marker


# --- conditions ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Condition:
    """One `metav1.Condition` (or ClusterOperator condition): what we write, what we read back."""

    type: str
    status: ConditionStatus
    reason: str
    message: str
    last_transition_time: str

    @property
    def is_true(self) -> bool:
        return str(self.status) == "True"  # a condition, not an HTTP status

    @property
    def state(self) -> tuple[str, str, str, str]:
        """Everything but the transition time: two conditions in the same state need no write."""
        return (self.type, self.status, self.reason, self.message)

    def to_dict(self) -> dict[str, str]:
        return {
            "type": self.type,
            "status": self.status,
            "reason": self.reason,
            "message": self.message,
            "lastTransitionTime": self.last_transition_time,
        }

    @classmethod
    def from_dict(cls, obj: Any) -> Condition | None:
        """Lenient parse of a condition read from the cluster; None when it has no type."""
        if not isinstance(obj, Mapping) or not isinstance(obj.get("type"), str):
            return None
        status = obj.get("status")
        return cls(
            type=obj["type"],
            status=status if status in ("True", "False") else "Unknown",
            reason=str(obj.get("reason") or ""),
            message=str(obj.get("message") or ""),
            last_transition_time=str(obj.get("lastTransitionTime") or ""),
        )

    def keeping_transition_of(self, previous: Condition | None) -> Condition:
        """This condition, with `previous`'s transition time when the status did not flip."""
        if previous is not None and (previous.type, previous.status) == (self.type, self.status) and previous.last_transition_time:
            return replace(self, last_transition_time=previous.last_transition_time)
        return self


def make_condition(
    type_: str,
    status: ConditionStatus,
    reason: str,
    message: str,
    now: datetime,
    previous: Condition | None,
) -> Condition:
    """A condition whose `lastTransitionTime` is `now` only if the status flipped from `previous`."""
    fresh = Condition(type_, status, str(reason), _truncate(message), format_time(now))
    return fresh.keeping_transition_of(previous)


def find_condition(conditions: Iterable[Any], type_: str) -> Condition | None:
    """The condition of `type_` in a list of dicts (from the API) or `Condition`s; the first wins."""
    for item in conditions or ():
        cond = item if isinstance(item, Condition) else Condition.from_dict(item)
        if cond is not None and cond.type == type_:
            return cond
    return None


def merge_conditions(current: Sequence[Any], ours: Sequence[Condition]) -> list[Any]:
    """`current` with our condition types replaced in place and missing ones appended.

    Conditions of other types are kept exactly as read (other controllers own them). A duplicate
    of one of our types is dropped. Our transition time yields to the cluster's when the status
    did not flip, so a restart or a stale `previous` never moves it.
    """
    by_type = {c.type: c for c in ours}
    out: list[Any] = []
    placed: set[str] = set()
    for item in current or ():
        kind = item.get("type") if isinstance(item, Mapping) else None
        if kind not in by_type:
            out.append(item)
            continue
        if kind in placed:
            continue
        placed.add(kind)
        out.append(by_type[kind].keeping_transition_of(Condition.from_dict(item)).to_dict())
    out.extend(c.to_dict() for c in ours if c.type not in placed)
    return out


# --- pass summaries ------------------------------------------------------------------------------


class Result(Enum):
    """What became of one MachineSet in a pass."""

    RECONCILED = "reconciled"  # up to date, or patched
    SKIPPED = "skipped"
    ERRORED = "errored"
    PENDING = "pending"  # a patch is planned and not written yet
    UNMANAGED = "unmanaged"  # not enrolled: not counted at all


class DecisionLike(Protocol):
    """What `Outcome.from_decision` reads; `model.BootImageDecision` has it."""

    @property
    def kind(self) -> str: ...
    @property
    def namespace(self) -> str: ...
    @property
    def name(self) -> str: ...
    @property
    def action(self) -> str: ...
    @property
    def reason(self) -> str: ...
    @property
    def message(self) -> str: ...


@dataclass(frozen=True)
class Outcome:
    kind: str  # MachineSet or ControlPlaneMachineSet
    namespace: str
    name: str
    result: Result
    message: str = ""  # the error text for ERRORED

    @classmethod
    def from_decision(
        cls, decision: DecisionLike, *, patched: bool = False, error: str | None = None
    ) -> Outcome:
        """The outcome of a planner decision, after the writer did (or did not) act on it.

        `patched=True`: the patch was written. `error`: the write failed (or the hot-loop guard
        refused it); this wins over the decision's own action.
        """
        # Built once, not with dataclasses.replace: every report makes one per MachineSet.
        result, message = Result.PENDING, ""
        action = str(decision.action)
        if error is not None:
            result, message = Result.ERRORED, error
        elif action == Action.ERROR:
            result, message = Result.ERRORED, decision.message
        elif action == Action.SKIP:
            result = Result.UNMANAGED if str(decision.reason) == Reason.NOT_ENROLLED else Result.SKIPPED
        elif action == Action.NOOP or patched:
            result = Result.RECONCILED
        return cls(decision.kind, decision.namespace, decision.name, result, message)

    @property
    def error_text(self) -> str:
        return f"{self.kind} {self.namespace}/{self.name}: {self.message}"


@dataclass(frozen=True)
class KindSummary:
    """The counts of one kind in a pass (the MCO's `MachineResourceStats`)."""

    label: str
    total: int = 0
    reconciled: int = 0
    skipped: int = 0
    errored: int = 0
    errors: tuple[str, ...] = ()

    @property
    def pending(self) -> int:
        return self.total - self.reconciled - self.skipped - self.errored

    def progress_text(self) -> str:
        text = f"Reconciled {self.reconciled} of {self.total} {self.label}"
        return f"{text} ({self.skipped} skipped)" if self.skipped else text

    def degraded_text(self) -> str:
        return f"{self.errored} Degraded {self.label}"

    @classmethod
    def count(cls, label: str, outcomes: Iterable[Outcome]) -> KindSummary:
        managed = [o for o in outcomes if o.result is not Result.UNMANAGED]
        errored = [o for o in managed if o.result is Result.ERRORED]
        return cls(
            label=label,
            total=len(managed),
            reconciled=sum(o.result is Result.RECONCILED for o in managed),
            skipped=sum(o.result is Result.SKIPPED for o in managed),
            errored=len(errored),
            errors=tuple(o.error_text for o in errored),
        )


@dataclass(frozen=True)
class PassProblem:
    """Something that stopped the whole pass: bad golden data, an upgrade in progress."""

    reason: str  # a ConditionReason
    message: str
    degrading: bool  # True: Degraded=True; False: Degraded keeps its previous state


@dataclass(frozen=True)
class PassSummary:
    machinesets: KindSummary = field(default_factory=lambda: KindSummary(MAPI_MACHINESETS_LABEL))
    control_plane: KindSummary = field(default_factory=lambda: KindSummary(CPMS_LABEL))
    problem: PassProblem | None = None
    # Cluster API kinds: in the messages only when the cluster has some enrolled.
    capi_machinesets: KindSummary = field(default_factory=lambda: KindSummary(CAPI_MACHINESETS_LABEL))
    capi_machinedeployments: KindSummary = field(default_factory=lambda: KindSummary(CAPI_MACHINEDEPLOYMENTS_LABEL))

    @classmethod
    def from_outcomes(cls, outcomes: Iterable[Outcome], problem: PassProblem | None = None) -> PassSummary:
        items = list(outcomes)
        return cls(
            machinesets=KindSummary.count(
                MAPI_MACHINESETS_LABEL, (o for o in items if o.kind not in (CPMS_KIND, *CAPI_KINDS))
            ),
            control_plane=KindSummary.count(CPMS_LABEL, (o for o in items if o.kind == CPMS_KIND)),
            problem=problem,
            capi_machinesets=KindSummary.count(CAPI_MACHINESETS_LABEL, (o for o in items if o.kind == CAPI_MACHINESET)),
            capi_machinedeployments=KindSummary.count(
                CAPI_MACHINEDEPLOYMENTS_LABEL, (o for o in items if o.kind == CAPI_MACHINEDEPLOYMENT)
            ),
        )

    @classmethod
    def blocked(cls, reason: str, message: str, *, degrading: bool) -> PassSummary:
        """A pass that reconciled nothing (ClusterNotStable, BootImagesConfigMapInvalid)."""
        return cls(problem=PassProblem(str(reason), message, degrading))

    @property
    def kinds(self) -> tuple[KindSummary, ...]:
        capi = tuple(k for k in (self.capi_machinesets, self.capi_machinedeployments) if k.total)
        return (self.machinesets, self.control_plane, *capi)

    @property
    def pending(self) -> int:
        return sum(k.pending for k in self.kinds)

    @property
    def errors(self) -> tuple[str, ...]:
        problem = (self.problem.message,) if self.problem is not None and self.problem.degrading else ()
        return problem + tuple(e for k in self.kinds for e in k.errors)

    @property
    def degraded(self) -> bool:
        return bool(self.errors)

    def progress_message(self) -> str:
        return " | ".join(k.progress_text() for k in self.kinds)

    def degraded_message(self) -> str:
        counts = " | ".join(k.degraded_text() for k in self.kinds)
        errors = self.errors
        if not errors:
            return counts
        listed = "; ".join(errors[:MAX_LISTED_ERRORS])
        more = len(errors) - MAX_LISTED_ERRORS
        if more > 0:
            listed += f"; and {more} more"
        return f"{counts} | Error(s): {listed}"


def progressing_condition(summary: PassSummary, now: datetime, previous: Condition | None) -> Condition:
    """`BootImageUpdateProgressing`: True while patches of the pass are still to be written."""
    if summary.problem is not None:
        return make_condition(
            CONDITION_PROGRESSING, "False", summary.problem.reason, summary.problem.message, now, previous
        )
    if summary.pending > 0:
        status: ConditionStatus = "True"
        reason = ConditionReason.RECONCILING
    else:
        status, reason = "False", ConditionReason.RECONCILED
    return make_condition(CONDITION_PROGRESSING, status, reason, summary.progress_message(), now, previous)


def degraded_condition(summary: PassSummary, now: datetime, previous: Condition | None) -> Condition:
    """`BootImageUpdateDegraded`: True when any MachineSet errored or the pass could not run.

    A non-degrading problem (an upgrade in progress) says nothing new about the MachineSets, so
    the previous verdict stands.
    """
    problem = summary.problem
    if problem is not None and not problem.degrading and previous is not None:
        return previous
    if problem is not None and problem.degrading:
        return make_condition(
            CONDITION_DEGRADED, "True", problem.reason, summary.degraded_message(), now, previous
        )
    if summary.degraded:
        return make_condition(
            CONDITION_DEGRADED,
            "True",
            ConditionReason.MACHINE_SET_ERRORS,
            summary.degraded_message(),
            now,
            previous,
        )
    return make_condition(
        CONDITION_DEGRADED, "False", ConditionReason.AS_EXPECTED, summary.degraded_message(), now, previous
    )


# --- ClusterOperator -----------------------------------------------------------------------------


class UpgradeVerdict(Protocol):
    """What the ClusterOperator needs of a skew verdict; `skew.verdict.SkewVerdict` has it."""

    @property
    def upgradeable(self) -> bool: ...
    @property
    def reason(self) -> str: ...
    @property
    def message(self) -> str: ...


@dataclass(frozen=True)
class RelatedObject:
    group: str
    resource: str
    name: str
    namespace: str = ""

    def to_dict(self) -> dict[str, str]:
        out = {"group": self.group, "resource": self.resource, "name": self.name}
        if self.namespace:
            out["namespace"] = self.namespace
        return out


def default_related_objects(operator_namespace: str | None = None) -> tuple[RelatedObject, ...]:
    """What `oc adm must-gather` and `oc adm inspect co/<name>` should collect."""
    namespaces = [MCO_NAMESPACE, MAPI_NAMESPACE]
    if operator_namespace and operator_namespace not in namespaces:
        namespaces.append(operator_namespace)
    return (
        *(RelatedObject("", "namespaces", ns) for ns in namespaces),
        RelatedObject("", "configmaps", BOOTIMAGES_CONFIGMAP, MCO_NAMESPACE),
        RelatedObject(OPERATOR_GROUP, MACHINECONFIGURATION_PLURAL, MACHINECONFIGURATION_NAME),
        # An empty name means every object of the resource in the namespace.
        RelatedObject(MACHINE_API_GROUP, MACHINESET_PLURAL, "", MAPI_NAMESPACE),
        RelatedObject(MACHINE_API_GROUP, CPMS_PLURAL, CPMS_NAME, MAPI_NAMESPACE),
    )


@dataclass(frozen=True)
class ClusterOperatorStatus:
    """The `status` of our ClusterOperator: conditions, versions, related objects."""

    conditions: tuple[Condition, ...]
    versions: tuple[tuple[str, str], ...] = (("operator", __version__),)
    related_objects: tuple[RelatedObject, ...] = field(default_factory=default_related_objects)

    def condition(self, type_: str) -> Condition | None:
        return find_condition(self.conditions, type_)

    def versions_list(self) -> list[dict[str, str]]:
        return [{"name": n, "version": v} for n, v in self.versions]

    def related_list(self) -> list[dict[str, str]]:
        return [r.to_dict() for r in self.related_objects]

    @classmethod
    def build(
        cls,
        *,
        synced: bool,
        progressing: Condition | None,
        degraded: Condition | None,
        verdict: UpgradeVerdict | None,
        now: datetime,
        previous: Iterable[Any] = (),
        version: str = __version__,
        operator_namespace: str | None = None,
        notes: Sequence[str] = (),
        available_notes: Sequence[str] = (),
    ) -> ClusterOperatorStatus:
        """Derive the ClusterOperator from our MachineConfiguration conditions and the skew verdict.

        - Available: True once the controller's caches synced.
        - Progressing: mirrors `BootImageUpdateProgressing` (patches of a pass are pending).
        - Degraded: mirrors `BootImageUpdateDegraded`, reason and message included.
        - Upgradeable: the skew verdict (SPEC section 5); Unknown until a verdict exists, which the
          cluster-version operator does not treat as a block.
        `previous`: the ClusterOperator's current conditions, for the transition times. `notes`:
        what the admin must hear about upgrades besides our verdict (a claim that makes the Machine
        Config Operator hold them), added to the Upgradeable message.
        """
        prior = list(previous)

        def cond(type_: str, status: ConditionStatus, reason: str, message: str) -> Condition:
            return make_condition(type_, status, reason, message, now, find_condition(prior, type_))

        if synced:
            available = cond(
                CO_AVAILABLE, "True", ConditionReason.AS_EXPECTED,
                "; ".join(("The boot image controller is running", *available_notes)),
            )
        else:
            available = cond(
                CO_AVAILABLE,
                "False",
                ConditionReason.INITIALIZING,
                "Waiting for the first sync of watched objects",
            )
        if progressing is not None:
            co_progressing = cond(CO_PROGRESSING, progressing.status, progressing.reason, progressing.message)
        else:
            co_progressing = cond(CO_PROGRESSING, "False", ConditionReason.AS_EXPECTED, "No pass has run yet")
        if degraded is not None:
            co_degraded = cond(CO_DEGRADED, degraded.status, degraded.reason, degraded.message)
        else:
            co_degraded = cond(CO_DEGRADED, "False", ConditionReason.AS_EXPECTED, "No pass has run yet")
        if verdict is None:
            upgradeable = cond(
                CO_UPGRADEABLE,
                "Unknown",
                ConditionReason.NOT_EVALUATED,
                "Boot image skew has not been evaluated yet",
            )
        else:
            upgradeable = cond(
                CO_UPGRADEABLE,
                "True" if verdict.upgradeable else "False",
                str(verdict.reason),
                " | ".join((verdict.message, *(f"Machine Config Operator: {n}" for n in notes))),
            )
        return cls(
            conditions=(available, co_progressing, co_degraded, upgradeable),
            versions=(("operator", version),),
            related_objects=default_related_objects(operator_namespace),
        )
