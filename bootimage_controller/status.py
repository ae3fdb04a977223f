"""Status reporting: the MachineConfiguration conditions, the ClusterOperator, and their writer.

Three layers:

- Pure summaries. `PassSummary` counts a pass's outcomes per kind; `progressing_condition` and
  `degraded_condition` turn it into `BootImageUpdateProgressing` / `BootImageUpdateDegraded` with
  the Machine Config Operator's message wording (`Reconciled 3 of 4 MAPI MachineSets (1 skipped) |
  Reconciled 0 of 0 ControlPlaneMachineSets`); `ClusterOperatorStatus.build` derives the
  ClusterOperator's conditions, versions and related objects.
- `StatusWriter`: the only thing that writes these statuses. The controller tells it the desired
  state as often as it likes; it coalesces (latest wins), writes at most once per `min_interval`
  per object, and writes nothing when the cluster already holds the desired state.

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

import asyncio
import json
import math
import time
from collections.abc import Awaitable, Callable, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from enum import Enum
from typing import TYPE_CHECKING, Any, Generic, Literal, Protocol, TypeVar, cast

import structlog
from kubernetes_asyncio.client.exceptions import ApiException

from . import __version__
from .constants import (
    BOOTIMAGES_CONFIGMAP,
    CLUSTEROPERATOR_PLURAL,
    CO_AVAILABLE,
    CO_DEGRADED,
    CO_PROGRESSING,
    CO_UPGRADEABLE,
    CONDITION_DEGRADED,
    CONDITION_MESSAGE_MAX,
    CONDITION_PROGRESSING,
    CONFIG_GROUP,
    CONFIG_VERSION,
    CPMS_KIND,
    CPMS_LABEL,
    CPMS_NAME,
    CPMS_PLURAL,
    DEFAULT_CLUSTER_OPERATOR,
    MACHINE_API_GROUP,
    MACHINECONFIGURATION_NAME,
    MACHINECONFIGURATION_PLURAL,
    MACHINESET_PLURAL,
    MAPI_MACHINESETS_LABEL,
    MAPI_NAMESPACE,
    MCO_NAMESPACE,
    OPERATOR_GROUP,
    OPERATOR_VERSION,
    Action,
    ConditionReason,
    Reason,
)
from .kube.retry import Backoff, Sleep, describe, with_retries
from .kube.times import format_time

if TYPE_CHECKING:
    from kubernetes_asyncio.client import CustomObjectsApi

log = structlog.get_logger(__name__)

ConditionStatus = Literal["True", "False", "Unknown"]
MERGE_PATCH = "application/merge-patch+json"
# How many error texts a Degraded message lists before summarising the rest.
MAX_LISTED_ERRORS = 10
# 409 Conflict: re-read and retry this many times before giving up until the next change.
MAX_CONFLICT_RETRIES = 5


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
        if previous is not None and previous.status == self.status and previous.last_transition_time:
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

    @classmethod
    def from_outcomes(cls, outcomes: Iterable[Outcome], problem: PassProblem | None = None) -> PassSummary:
        items = list(outcomes)
        return cls(
            machinesets=KindSummary.count(MAPI_MACHINESETS_LABEL, (o for o in items if o.kind != CPMS_KIND)),
            control_plane=KindSummary.count(CPMS_LABEL, (o for o in items if o.kind == CPMS_KIND)),
            problem=problem,
        )

    @classmethod
    def blocked(cls, reason: str, message: str, *, degrading: bool) -> PassSummary:
        """A pass that reconciled nothing (ClusterNotStable, BootImagesConfigMapInvalid)."""
        return cls(problem=PassProblem(str(reason), message, degrading))

    @property
    def kinds(self) -> tuple[KindSummary, KindSummary]:
        return (self.machinesets, self.control_plane)

    @property
    def pending(self) -> int:
        return sum(k.pending for k in self.kinds)

    @property
    def errors(self) -> tuple[str, ...]:
        problem = (self.problem.message,) if self.problem is not None and self.problem.degrading else ()
        return problem + self.machinesets.errors + self.control_plane.errors

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
    ) -> ClusterOperatorStatus:
        """Derive the ClusterOperator from our MachineConfiguration conditions and the skew verdict.

        - Available: True once the controller's caches synced.
        - Progressing: mirrors `BootImageUpdateProgressing` (patches of a pass are pending).
        - Degraded: mirrors `BootImageUpdateDegraded`, reason and message included.
        - Upgradeable: the skew verdict (SPEC section 5); Unknown until a verdict exists, which the
          cluster-version operator does not treat as a block.
        `previous`: the ClusterOperator's current conditions, for the transition times.
        """
        prior = list(previous)

        def cond(type_: str, status: ConditionStatus, reason: str, message: str) -> Condition:
            return make_condition(type_, status, reason, message, now, find_condition(prior, type_))

        if synced:
            available = cond(
                CO_AVAILABLE, "True", ConditionReason.AS_EXPECTED, "The boot image controller is running"
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
                verdict.message,
            )
        return cls(
            conditions=(available, co_progressing, co_degraded, upgradeable),
            versions=(("operator", version),),
            related_objects=default_related_objects(operator_namespace),
        )


# --- the writer ----------------------------------------------------------------------------------


class WriteResult(Enum):
    WRITTEN = "written"  # the cluster now holds the desired state
    UNCHANGED = "unchanged"  # it already did: nothing was written
    DEFERRED = "deferred"  # the object is missing; write when the controller calls again
    FAILED = "failed"  # retry with backoff


T = TypeVar("T")
Clock = Callable[[], float]


class _Channel(Generic[T]):
    """Latest-wins coalescing of one object's desired status, at most one write per interval.

    `offer` never blocks: it records the state and makes sure a drain task runs. The drain
    writes at once after a quiet period, else waits until `interval` after the previous write;
    states offered meanwhile replace each other. A state equal to what the cluster is known to
    hold (last written, or read) is not written.
    """

    def __init__(
        self,
        name: str,
        write: Callable[[T], Awaitable[WriteResult]],
        *,
        interval: float,
        clock: Clock,
        sleep: Sleep,
    ) -> None:
        self.name = name
        self._write = write
        self._interval = interval
        self._clock = clock
        self._sleep = sleep
        self._backoff = Backoff(base=max(interval, 1.0), cap=60.0)
        self._desired: T | None = None
        self._desired_key: Hashable = None
        self._synced_key: Hashable = None  # what the cluster is known to hold
        self._inflight_key: Hashable = None
        self._dirty = False
        self._next_allowed = -math.inf
        self._failures = 0
        self._flushing = False
        self._task: asyncio.Task[None] | None = None
        self._wake = asyncio.Event()

    def offer(self, desired: T, key: Hashable) -> None:
        self._desired, self._desired_key = desired, key
        settled = self._inflight_key is None and key == self._synced_key
        if settled or (self._inflight_key is not None and key == self._inflight_key):
            self._dirty = False
            return
        self._dirty = True
        self._start()

    def observed(self, key: Hashable) -> None:
        """The cluster was seen holding `key` (a watch event): write again if that is not ours."""
        if self._inflight_key is not None:
            return  # the event races our own write; the write compares against a fresh read
        self._synced_key = key
        if self._desired is not None and key != self._desired_key:
            self._dirty = True
            self._start()

    def _start(self) -> None:
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._drain(), name=f"status-{self.name}")

    async def _pause(self, delay: float) -> None:
        """Sleep `delay`, or less if `flush` wakes us."""
        sleeper = asyncio.ensure_future(self._sleep(delay))
        waker = asyncio.ensure_future(self._wake.wait())
        try:
            await asyncio.wait({sleeper, waker}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            sleeper.cancel()
            waker.cancel()
        self._wake.clear()

    async def _drain(self) -> None:
        while self._dirty and self._desired is not None:
            delay = self._next_allowed - self._clock()
            if delay > 0 and not self._flushing:
                await self._pause(delay)
                continue
            desired, key = self._desired, self._desired_key
            self._dirty = False
            self._inflight_key = key
            started = self._clock()
            try:
                result = await self._write(desired)
            except ApiException as exc:  # 403, 422, retries exhausted: try again after a backoff
                log.error("status write failed", object=self.name, error=describe(exc))
                result = WriteResult.FAILED
            except Exception as exc:  # connection errors after retries, or a bug: keep the loop alive
                log.error("status write failed", object=self.name, error=describe(exc), exc_info=True)
                result = WriteResult.FAILED
            finally:
                self._inflight_key = None
            self._next_allowed = started + self._interval
            if result in (WriteResult.WRITTEN, WriteResult.UNCHANGED):
                self._synced_key = key
                self._failures = 0
            elif result is WriteResult.DEFERRED:
                self._synced_key = None
            else:
                self._dirty = True
                if self._flushing:
                    return
                delay = self._backoff.delay(self._failures)
                self._failures += 1
                self._next_allowed = max(self._next_allowed, self._clock() + delay)

    async def flush(self) -> None:
        """Write the latest state now, ignoring the interval (shutdown); one attempt on failure."""
        self._flushing = True
        try:
            if self._dirty:
                self._start()
            self._wake.set()
            if self._task is not None:
                await self._task
        finally:
            self._flushing = False
            self._wake.clear()

    async def aclose(self) -> None:
        try:
            await self.flush()
        finally:
            if self._task is not None and not self._task.done():
                self._task.cancel()

    async def discard(self) -> None:
        self._dirty = False
        if self._task is not None and not self._task.done():
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)


class CustomObjectsApiLike(Protocol):
    """The subset of `kubernetes_asyncio.client.CustomObjectsApi` the writer calls.

    The real class qualifies at run time; its bundled stubs leave out `_content_type`, so the
    writer also accepts it by name.
    """

    def get_cluster_custom_object(
        self, group: str, version: str, plural: str, name: str
    ) -> Awaitable[Any]: ...
    def create_cluster_custom_object(
        self, group: str, version: str, plural: str, body: Any
    ) -> Awaitable[Any]: ...
    def patch_cluster_custom_object_status(
        self, group: str, version: str, plural: str, name: str, body: Any, *, _content_type: str
    ) -> Awaitable[Any]: ...


@dataclass(frozen=True)
class _McDesired:
    conditions: tuple[Condition, ...]
    skew_status: Mapping[str, Any] | None


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), default=str)


def _mc_key(conditions: Iterable[Condition], skew_status: Mapping[str, Any] | None) -> Hashable:
    return (tuple(sorted(c.state for c in conditions)), _canonical(skew_status))


def _co_key(status: ClusterOperatorStatus) -> Hashable:
    return (
        tuple(sorted(c.state for c in status.conditions)),
        _canonical(status.versions_list()),
        _canonical(status.related_list()),
    )


_SAME = object()


def _without_nulls(value: Mapping[str, Any]) -> dict[str, Any]:
    return {k: _without_nulls(v) if isinstance(v, Mapping) else v for k, v in value.items() if v is not None}


def merge_patch_diff(old: Any, new: Any) -> Any:
    """An RFC 7386 merge patch turning `old` into `new`, or `_SAME` (module private) if equal.

    Keys of `old` missing from `new` become explicit nulls: a merge patch merges objects, so
    without them a stale `automatic.ocpVersion` would survive a switch to `rhcosVersion`.
    """
    if isinstance(old, Mapping) and isinstance(new, Mapping):
        out: dict[str, Any] = {k: None for k in old if k not in new}
        for k, v in new.items():
            if k not in old:
                out[k] = v
                continue
            sub = merge_patch_diff(old[k], v)
            if sub is not _SAME:
                out[k] = sub
        return out if out else _SAME
    return _SAME if old == new else new


class StatusWriter:
    """Writes the MachineConfiguration `cluster` status and our ClusterOperator, batched.

    Call `set_machineconfiguration` / `set_cluster_operator` (plain methods, they never block)
    as often as convenient, from inside the event loop; `flush()` (or `aclose()`) on shutdown.
    Every write request sent is counted in `writes` (and per object in `writes_by_object`).
    """

    def __init__(
        self,
        custom_api: CustomObjectsApi | CustomObjectsApiLike,
        *,
        cluster_operator: str = DEFAULT_CLUSTER_OPERATOR,
        min_interval: float = 1.0,
        clock: Clock = time.monotonic,
        sleep: Sleep = asyncio.sleep,
        retry_attempts: int = 5,
    ) -> None:
        self._api = cast(CustomObjectsApiLike, custom_api)
        self.cluster_operator = cluster_operator
        self._sleep = sleep
        self._attempts = retry_attempts
        self.writes = 0
        self.writes_by_object: dict[str, int] = {}
        self._mc_missing_logged = False
        self._mc = _Channel[_McDesired](
            f"machineconfiguration/{MACHINECONFIGURATION_NAME}",
            self._write_machineconfiguration,
            interval=min_interval,
            clock=clock,
            sleep=sleep,
        )
        self._co = _Channel[ClusterOperatorStatus](
            f"clusteroperator/{cluster_operator}",
            self._write_cluster_operator,
            interval=min_interval,
            clock=clock,
            sleep=sleep,
        )

    # -- what the controller calls

    def set_machineconfiguration(
        self, conditions: Sequence[Condition], skew_status: Mapping[str, Any] | None = None
    ) -> None:
        """Desired `status.conditions` (only these types are touched) and, when given,
        `status.bootImageSkewEnforcementStatus` (replaced whole; None leaves it alone). Null
        values in `skew_status` mean "absent", so a full object and a merge patch both work."""
        desired = _McDesired(
            tuple(conditions), _without_nulls(skew_status) if skew_status is not None else None
        )
        self._mc.offer(desired, _mc_key(desired.conditions, desired.skew_status))

    def set_cluster_operator(self, status: ClusterOperatorStatus) -> None:
        if not self.cluster_operator:
            return  # --cluster-operator "" disables it
        self._co.offer(status, _co_key(status))

    def observe_machineconfiguration(self, obj: Mapping[str, Any]) -> None:
        """Optional: feed watch events so a status someone else rewrote is written back.

        Only our condition types (the ones last set) and the skew status are compared.
        """
        desired = self._mc._desired
        if desired is None:
            return
        status = obj.get("status") or {}
        ours = [find_condition(status.get("conditions") or (), c.type) for c in desired.conditions]
        held = tuple(c for c in ours if c is not None)
        skew = status.get("bootImageSkewEnforcementStatus") if desired.skew_status is not None else None
        self._mc.observed(_mc_key(held, skew))

    async def flush(self) -> None:
        await asyncio.gather(self._mc.flush(), self._co.flush())

    async def aclose(self) -> None:
        await asyncio.gather(self._mc.aclose(), self._co.aclose())

    async def discard(self) -> None:
        """Stop without writing what is pending (the leader's last flush already ran, or this
        process no longer leads and must not write)."""
        await asyncio.gather(self._mc.discard(), self._co.discard())

    # -- the writes

    def _count(self, what: str) -> None:
        self.writes += 1
        self.writes_by_object[what] = self.writes_by_object.get(what, 0) + 1

    async def _call(self, what: str, fn: Callable[[], Awaitable[Any]]) -> Any:
        return await with_retries(fn, what=what, attempts=self._attempts, sleep=self._sleep)

    async def _patch_status(self, group: str, version: str, plural: str, name: str, body: Any) -> Any:
        what = f"{plural}/{name}/status"

        async def call() -> Any:
            self._count(what)
            return await self._api.patch_cluster_custom_object_status(
                group, version, plural, name, body, _content_type=MERGE_PATCH
            )

        return await self._call(f"patch {what}", call)

    async def _get(self, group: str, version: str, plural: str, name: str) -> Any:
        return await self._call(
            f"get {plural}/{name}",
            lambda: self._api.get_cluster_custom_object(group, version, plural, name),
        )

    async def _write_machineconfiguration(self, desired: _McDesired) -> WriteResult:
        g, v, p, n = OPERATOR_GROUP, OPERATOR_VERSION, MACHINECONFIGURATION_PLURAL, MACHINECONFIGURATION_NAME
        for _ in range(MAX_CONFLICT_RETRIES):
            try:
                obj = await self._get(g, v, p, n)
            except ApiException as exc:
                if exc.status == 404:
                    return self._machineconfiguration_missing()
                raise
            self._mc_missing_logged = False
            body = self._machineconfiguration_patch(obj, desired)
            if body is None:
                return WriteResult.UNCHANGED
            try:
                await self._patch_status(g, v, p, n, body)
            except ApiException as exc:
                if exc.status == 409:
                    log.debug("MachineConfiguration status conflict, re-reading")
                    continue
                if exc.status == 404:
                    return self._machineconfiguration_missing()
                raise
            log.debug(
                "MachineConfiguration status written", conditions=[c.state[:2] for c in desired.conditions]
            )
            return WriteResult.WRITTEN
        log.warning("MachineConfiguration status kept conflicting; will retry", attempts=MAX_CONFLICT_RETRIES)
        return WriteResult.FAILED

    def _machineconfiguration_missing(self) -> WriteResult:
        if not self._mc_missing_logged:
            log.warning(
                "MachineConfiguration not found; its status will be written when it exists",
                name=MACHINECONFIGURATION_NAME,
            )
            self._mc_missing_logged = True
        return WriteResult.DEFERRED

    @staticmethod
    def _machineconfiguration_patch(obj: Mapping[str, Any], desired: _McDesired) -> dict[str, Any] | None:
        status = obj.get("status") or {}
        current = status.get("conditions") or []
        patch: dict[str, Any] = {}
        merged = merge_conditions(current, desired.conditions)
        if merged != list(current):
            patch["conditions"] = merged  # lists are replaced whole by a merge patch
        if desired.skew_status is not None:
            diff = merge_patch_diff(status.get("bootImageSkewEnforcementStatus"), desired.skew_status)
            if diff is not _SAME:
                patch["bootImageSkewEnforcementStatus"] = diff
        if not patch:
            return None
        rv = (obj.get("metadata") or {}).get("resourceVersion")
        return {"metadata": {"resourceVersion": rv}, "status": patch}

    async def _write_cluster_operator(self, desired: ClusterOperatorStatus) -> WriteResult:
        g, v, p, n = CONFIG_GROUP, CONFIG_VERSION, CLUSTEROPERATOR_PLURAL, self.cluster_operator
        for _ in range(MAX_CONFLICT_RETRIES):
            try:
                obj = await self._get(g, v, p, n)
            except ApiException as exc:
                if exc.status != 404:
                    raise
                obj = await self._create_cluster_operator()
                if obj is None:
                    continue  # someone created it meanwhile: read theirs
            body = self._cluster_operator_patch(obj, desired)
            if body is None:
                return WriteResult.UNCHANGED
            try:
                await self._patch_status(g, v, p, n, body)
            except ApiException as exc:
                if exc.status in (404, 409):
                    continue  # conflict, or deleted under us: re-read (and re-create)
                raise
            log.debug("ClusterOperator status written", name=n)
            return WriteResult.WRITTEN
        log.warning("ClusterOperator status kept conflicting; will retry", name=n)
        return WriteResult.FAILED

    async def _create_cluster_operator(self) -> Any:
        """Create our ClusterOperator (status is ignored on create: it is a subresource)."""
        body = {
            "apiVersion": f"{CONFIG_GROUP}/{CONFIG_VERSION}",
            "kind": "ClusterOperator",
            "metadata": {"name": self.cluster_operator},
            "spec": {},
        }
        what = f"{CLUSTEROPERATOR_PLURAL}/{self.cluster_operator}"

        async def call() -> Any:
            self._count(what)
            return await self._api.create_cluster_custom_object(
                CONFIG_GROUP, CONFIG_VERSION, CLUSTEROPERATOR_PLURAL, body
            )

        try:
            created = await self._call(f"create {what}", call)
        except ApiException as exc:
            if exc.status == 409:
                return None
            raise
        log.info("ClusterOperator created", name=self.cluster_operator)
        return created

    @staticmethod
    def _cluster_operator_patch(
        obj: Mapping[str, Any], desired: ClusterOperatorStatus
    ) -> dict[str, Any] | None:
        status = obj.get("status") or {}
        patch: dict[str, Any] = {}
        current = status.get("conditions") or []
        merged = merge_conditions(current, desired.conditions)
        if merged != list(current):
            patch["conditions"] = merged
        if status.get("versions") != desired.versions_list():
            patch["versions"] = desired.versions_list()
        if status.get("relatedObjects") != desired.related_list():
            patch["relatedObjects"] = desired.related_list()
        if not patch:
            return None
        rv = (obj.get("metadata") or {}).get("resourceVersion")
        return {"metadata": {"resourceVersion": rv}, "status": patch}
