"""The reconciler of machine objects: Machine API MachineSets and the ControlPlaneMachineSet,
Cluster API MachineSets and MachineDeployments (what differs is in `kinds`).

Read the object from the store, plan it (asking the cloud where rule 9 says so), act on the
decision through its kind's writer, and return the outcome to the loop: a `ReconcileResult` whose
`state` is the key's `MachineSetState` and whose other fields say what the queue does next. A failed
write is an outcome, never an exception: transient failures are retried by the queue with backoff; a
permanent refusal (422 Invalid, 403) waits for a change of the object or an input, or the slow resync.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any

import structlog

from .. import observability as obs
from ..constants import ANNOTATION_HOT_LOOP, MACHINESET_KIND, Action, Manager, Reason
from ..core.claims import hot_loop_check
from ..core.cloud.facts import CloudFacts
from ..core.context import ClusterFacts, PlanningContext
from ..core.lookups import plan_object, wants_cloud, with_cloud_answer
from ..core.model import BootImageDecision
from ..core.planner import is_our_owner_reference
from ..core.verification import VerificationOutcome
from ..kube.api_errors import ApiError, Conflict, NotFound
from ..kube.fence import UpgradeGateClosed, write_preconditions
from ..kube.retry import CONFLICT_ATTEMPTS, CONNECTION_ERRORS, describe, gave_up_on_conflicts
from ..kube.workqueue import DONE, ReconcileResult
from .claim_reconciler import Holders
from .counting import HotLoopCounts
from .delegation import Delegation
from .event_rules import (
    EventSink,
    conflict_event,
    deprecated_event,
    event_for,
    involved,
    new_first_boot_failure,
    says_nothing_new,
    verification_events,
)
from .keys import CLAIMS_KEY, is_claimed, machine_key, split_key, uid_of
from .kinds import MachineKind
from .ledger import LedgerWriteFailed
from .state import MachineSetState, WriteMemory
from .store import ClusterView, InformerStore
from .templates import FencedTemplateRefresh, tell_template_sharers
from .verification import BootVerification

log = structlog.get_logger(__name__)

# Given an offline decision: the cloud's answers and the platforms they cover (None: offline).
CloudLookup = Callable[[BootImageDecision], Awaitable[tuple[CloudFacts, frozenset[str]] | None]]
# Decisions that say an outage, not the MachineSet: planned again on a backoff of their own (no error
# logged, `--once` unaffected) until the cloud or vCenter answers, so an outage that ends is noticed
# without an edit (issue 24). The resync (`run --resync-period`) is the slower net under everything.
TRANSIENT_DECISIONS = frozenset({Reason.CLOUD_UNAVAILABLE, Reason.VCENTER_UNAVAILABLE})
TRANSIENT_FIRST_RETRY = 5.0
TRANSIENT_MAX_RETRY = 300.0


@dataclass(frozen=True)
class Collaborators:
    """What the machine reconciler reads, asks and tells (built and handed in by `daemon/run.py`)."""

    store: InformerStore
    cluster: ClusterView
    outcomes: Mapping[str, MachineSetState]  # every key's last outcome, read-only (the status reconciler's)
    holders: Holders
    delegation: Delegation
    may_write: Callable[[], bool]  # not a dry run, and the leader
    enqueue: Callable[[str], None]
    cloud: CloudLookup | None = None
    templates: FencedTemplateRefresh | None = None
    events: EventSink | None = None
    verification: BootVerification | None = None


class MachineReconciler:
    def __init__(self, kinds: Mapping[str, MachineKind], collaborators: Collaborators) -> None:
        self.kinds = kinds  # by the key's kind (the informer role)
        self.c = collaborators  # short: it is on every other line
        self.memory = WriteMemory()
        self.counts = HotLoopCounts(collaborators.store, collaborators.cluster, collaborators.holders, self.memory)

    async def reconcile(self, key: str) -> ReconcileResult[MachineSetState]:
        kind_name, namespace, name = split_key(key)
        kind = self.kinds[kind_name]
        obj = self.c.store.get(kind_name, namespace, name)
        state = self.c.outcomes.get(key)
        if obj is None:
            self.memory.forget(key)
            self.c.delegation.forget(key)
            if self.c.verification is not None and kind_name == MACHINESET_KIND and self.c.may_write():
                await self.c.verification.orphaned_canaries(kind, namespace, name)
            return DONE  # no state: the status reconciler drops the key's outcome
        if self.memory.observe(key, obj):
            state = await self._reconcile_object(key, kind, obj, state) or state
        return replace(self._queue_result(key, state), state=state)

    def judge_again(self) -> None:
        """Queue the MachineSets planned before boot verification's caches had listed, to be judged
        now. Not those whose write was refused for good: they wait for a change of their own (or the
        resync), and a queued key would send that write again."""
        for key, state in list(self.c.outcomes.items()):
            if split_key(key)[0] == MACHINESET_KIND and state.verification is None and not state.permanent:
                self.c.enqueue(key)

    def _queue_result(self, key: str, state: MachineSetState | None) -> ReconcileResult[MachineSetState]:
        if state is not None and state.error is not None and (state.retried or state.permanent):
            reason = str(state.error_reason)
            error = state.error_text or state.error
            return ReconcileResult.waiting(reason, error) if state.permanent else ReconcileResult.transient(reason, error)
        result = self._retry_outage(key, state)
        recheck = state.verification.recheck_after if state is not None and state.verification is not None else None
        if recheck is not None and (result.requeue_after is None or recheck < result.requeue_after):
            # A Machine's first-boot timeout runs out then: judge it again, without a watch event.
            return ReconcileResult(requeue_after=max(recheck, 0.0) + 1.0)
        return result

    def _retry_outage(self, key: str, state: MachineSetState | None) -> ReconcileResult[MachineSetState]:
        """Plan again soon (5 s, doubling to 5 min) while the cloud or vCenter does not answer."""
        d = state.decision if state is not None else None
        outages = self.memory.outages
        if d is None or d.reason not in TRANSIENT_DECISIONS or d.manager is not Manager.OURS:
            outages.pop(key, None)
            return DONE
        tries = outages.get(key, 0)
        outages[key] = tries + 1
        return ReconcileResult(requeue_after=min(TRANSIENT_MAX_RETRY, TRANSIENT_FIRST_RETRY * 2**min(tries, 16)))

    async def _reconcile_object(self, key: str, kind: MachineKind, obj: dict[str, Any],
                                previous: MachineSetState | None) -> MachineSetState | None:
        """The new outcome (None: not planned now, `previous` stands)."""
        ctx = self.c.cluster.context_to_plan()
        if ctx is None:
            return None  # bad cluster inputs, or an upgrade: the status key says why; nothing is written
        started = time.monotonic()
        decision = await self.plan(obj, ctx)
        # Said before a claim (the Warning) and after it (our ClusterOperator), from one computation.
        warning = self.c.delegation.claim_warning(key, decision, ctx)
        try:
            state = await self._act(key, kind, obj, decision, ctx, warning)
        except ApiError as exc:
            # A write on the way (a claim, a release, the holder's counts) refused: this key's
            # outcome, reported like a refused patch, retried or waiting as the refusal says.
            state = MachineSetState.failed(decision, Reason.PATCH_FAILED, f"{exc.what}: {exc.describe()}",
                                           permanent=exc.permanent)
        state = replace(state, claim_warning=warning, verification=await self._verify(kind, obj, decision, state))
        obs.RECONCILE_DURATION.observe(time.monotonic() - started)
        log.log(
            logging.DEBUG if says_nothing_new(previous, state) else logging.INFO,
            "decision", namespace=decision.namespace, name=decision.name, kind=decision.kind,
            action=str(decision.action), reason=decision.reason, patched=state.patched,
            template_refreshed=state.refreshed.result if state.refreshed is not None else None,
            error=state.error, error_reason=state.error_reason,
        )
        if new_first_boot_failure(previous, state):
            d = state.decision
            obs.FIRST_BOOT_FAILURES.labels(namespace=d.namespace, name=d.name, kind=d.kind).inc()
        self._post_events(obj, previous, state)
        return state

    async def _verify(self, kind: MachineKind, obj: dict[str, Any], decision: BootImageDecision,
                      state: MachineSetState) -> VerificationOutcome | None:
        """Boot verification (SPEC section 3b), after the write: a MachineSet patched now boots an
        image nobody has tried, and the watch event of the patch brings it back here."""
        checks = self.c.verification
        if checks is None or state.patched or not checks.applies_to(decision):
            return None
        return await checks.verify(obj, decision, kind, self.c.may_write())

    async def plan(self, obj: Mapping[str, Any], ctx: PlanningContext) -> BootImageDecision:
        """Offline, then again with the cloud's answers where they can change the decision (rule 9:
        never patch to an image the cloud does not have)."""
        decision = self._plan_offline(obj, ctx, ctx.facts)
        if self.c.cloud is None or not wants_cloud(decision):
            return decision
        answer = await self.c.cloud(decision)
        if answer is None:
            return decision
        return self._plan_offline(obj, ctx, with_cloud_answer(ctx.facts, answer))

    def _plan_offline(self, obj: Mapping[str, Any], ctx: PlanningContext, facts: ClusterFacts) -> BootImageDecision:
        """The offline decision, taken from `_counts_ahead` when it planned this very version with
        these very inputs. A pass's first write plans every other object; without this each one
        was planned twice (about 50 of the 1,100 µs of CPU a patched MachineSet costs, issue 36)."""
        ahead = self.memory.planned.pop(uid_of(obj), None)
        if ahead is not None and ahead.answers(obj, ctx, facts):
            return ahead.decision
        return plan_object(obj, self.c.store, ctx, facts)

    async def _act(self, key: str, kind: MachineKind, obj: dict[str, Any], decision: BootImageDecision,
                   ctx: PlanningContext, claim_warning: str | None) -> MachineSetState:
        if decision.action is Action.SKIP and decision.reason in (Reason.NOT_ENROLLED, Reason.NOT_AUTHORITATIVE):
            # Opting out is also how an admin ends a hot loop: forget our counts (with the claim,
            # when it left enrollment). A pool that moved to the other API starts afresh there.
            self.memory.hot_loops.pop(uid_of(obj), None)
            if self.c.may_write():
                await self.c.holders.forget_hot_loops([uid_of(obj)], kind.scope)
                if decision.reason == Reason.NOT_ENROLLED:
                    await self._release_if_claimed(kind, obj, ctx)
            return MachineSetState(decision)
        if decision.manager is not Manager.OURS:
            return self.c.delegation.delegated(key, obj, decision, ctx.facts.managers.gitops_labels)
        self.c.delegation.forget(key)
        if not self.c.may_write():
            return MachineSetState(decision)
        if decision.taken_from_mco and decision.action in (Action.NOOP, Action.SKIP) and not is_claimed(obj):
            # Handed over from the MCO: claim it now, so the MCO leaves it alone before the next
            # golden data change rather than racing us to it (a broken object is never written).
            await self._claim_from_mco(kind, obj, claim_warning)
            return MachineSetState(decision)
        if decision.action is not Action.PATCH:
            return MachineSetState(decision)
        refresh = decision.template.refresh if decision.template is not None else None
        if refresh is not None:
            if self.c.templates is None:
                return MachineSetState(decision)
            built = await self.c.templates.refresh(key, obj, decision, refresh)
            if built.refreshed is None or not decision.changes:
                return built  # failed, skipped, or nothing to patch (the template kept its name)
        return await self._patch(key, kind, obj, decision, ctx, claim_warning)

    async def _patch(self, key: str, kind: MachineKind, obj: dict[str, Any], decision: BootImageDecision,
                     ctx: PlanningContext, claim_warning: str | None) -> MachineSetState:
        """Write the decision. Someone writing first (our patch tests the resourceVersion it
        replaces: a Conflict) makes us read the object again and plan it again, never resend the
        same write: client-go's RetryOnConflict, as a loop here. Every failure is the outcome."""
        current, planned = obj, decision
        try:
            for _ in range(CONFLICT_ATTEMPTS):
                try:
                    return await self._patch_once(key, kind, current, planned, claim_warning)
                except Conflict:
                    fresh = await kind.read(obj)
                if fresh is None:
                    return MachineSetState(planned)  # deleted meanwhile
                current = fresh
                planned = await self.plan(current, ctx)
                if planned.action is not Action.PATCH:
                    return MachineSetState(planned)  # the other writer's change needs nothing more
            return MachineSetState.failed(planned, Reason.PATCH_FAILED,
                                          "kept conflicting with other writers; will retry on their next change")
        except UpgradeGateClosed as exc:
            # The ClusterVersion changed while the patch waited to be sent: nothing was written.
            log.info("boot image patch not sent: upgrade gate closed", key=key, why=str(exc))
            return MachineSetState(planned)
        except NotFound:
            return MachineSetState(planned)  # deleted meanwhile
        except ApiError as exc:
            return MachineSetState.failed(planned, Reason.PATCH_FAILED, exc.describe(), permanent=exc.permanent)
        except CONNECTION_ERRORS as exc:
            # No answer at all once `api_call` gave up (reset, refused, timed out): not known to be
            # written; the key's outcome like a 503's, retried with its backoff (issue 46).
            return MachineSetState.failed(planned, Reason.PATCH_FAILED, f"no answer from the API server: {describe(exc)}")

    async def _patch_once(self, key: str, kind: MachineKind, obj: dict[str, Any],
                          decision: BootImageDecision, claim_warning: str | None) -> MachineSetState:
        """One attempt, in SPEC section 3's order: refuse a 4th write of one target and what the
        kind refuses (its stub Ignition) or needs first (its new template); warn before a claim
        that makes the MCO hold upgrades; then, under the claim gate, the holder, this write's
        hot-loop count kept in it, and the one JSON patch (claim, boot image, record) under the
        Lease and the upgrade gate; last what the kind does after a write."""
        resource = kind.resource(obj)
        holders, scope, memory = self.c.holders, kind.scope, self.memory
        kept = holders.kept_hot_loop(resource.uid, scope)
        hot = hot_loop_check(resource.annotations, decision, memory.hot_loops.get(resource.uid),
                             kept, memory.unsent.get(resource.uid))
        if hot is None:
            message = (
                f"refusing to write the same boot image a 4th time: something keeps reverting "
                f"{resource.display}; opt it out, fix the other writer, then remove annotation "
                f"{ANNOTATION_HOT_LOOP} and opt it back in"
            )
            obs.PATCHES.labels(result="hot_loop").inc()
            return MachineSetState.failed(decision, Reason.HOT_LOOP, message)
        refusal = await kind.before_write(resource, decision)
        if refusal is not None:
            obs.PATCHES.labels(result="blocked").inc()
            return MachineSetState.failed(decision, refusal.reason, refusal.message)
        if not any(is_our_owner_reference(o.api_version, o.kind, o.name) for o in resource.owner_references):
            await self.c.delegation.warn_before_claim(obj, claim_warning)
        async with holders.claiming(scope) as holder:
            if holder.deleting:
                # Claims are being released: not an error. This MachineSet is patched (and claimed
                # under a new holder) once the old holder is gone (the triggers re-queue it).
                self.c.enqueue(CLAIMS_KEY)
                return MachineSetState(decision)
            entry = hot.ledger_entry()
            if entry != kept:
                # Counted where no writer of the MachineSet can erase it, before it is sent, the
                # first one included (a crash between the two over-counts by one, never under).
                refused = await self.counts.keep(key, resource.uid, entry, scope)
                if refused is not None:
                    # Refused or cut off: this MachineSet's outcome. `NotLeader` and the like go
                    # up as a refused patch would (the loop writes nothing more and says why).
                    return self._not_counted(decision, refused)
            memory.sending[key] = resource.resource_version
            try:
                with write_preconditions(self.c.cluster.upgrade_gate):
                    await scope.writer.patch_boot_image(obj, decision, hot, holder)
            except Exception as exc:
                # Not known to be applied: the next attempt reuses the count kept for this one
                # rather than counting again, so an API server outage or a run of conflicts never
                # adds up to a false hot loop. If it was applied after all (its answer lost), the
                # object shows our record with that count and the next write counts from there;
                # only a whole-object writer wiping it before we read it again hides it (one write
                # uncounted; docs/claims.md, "Hot loop").
                memory.unsent[resource.uid] = entry
                obs.PATCHES.labels(result=_refusal_label(exc)).inc()
                raise
            finally:
                memory.sending.pop(key, None)
        memory.unsent.pop(resource.uid, None)
        obs.PATCHES.labels(result="applied").inc()
        memory.hot_loops[resource.uid] = hot
        memory.superseded[key] = resource.resource_version
        await kind.after_write(decision)
        return MachineSetState(decision, patched=True)

    @staticmethod
    def _not_counted(decision: BootImageDecision, exc: ApiError | LedgerWriteFailed) -> MachineSetState:
        message = f"not sent: the hot-loop count could not be kept in the claim holder: {describe(exc)}"
        permanent = isinstance(exc, ApiError) and exc.permanent
        return MachineSetState.failed(decision, Reason.PATCH_FAILED, message, permanent=permanent)

    async def _claim_from_mco(self, kind: MachineKind, obj: dict[str, Any], claim_warning: str | None) -> None:
        await self.c.delegation.warn_before_claim(obj, claim_warning)
        holders = self.c.holders
        async with holders.claiming(kind.scope) as holder:
            if holder.deleting:
                self.c.enqueue(CLAIMS_KEY)  # claimed under the next holder
                return
            try:
                with write_preconditions(self.c.cluster.upgrade_gate):
                    claimed = await kind.scope.writer.claim(obj, holder)
            except UpgradeGateClosed as exc:
                log.info("claim not sent: upgrade gate closed", key=machine_key(obj), why=str(exc))
                return
            except (Conflict, NotFound) as exc:
                log.info("claim not written; the object changed, planned again on its watch event",
                         key=machine_key(obj), why=exc.describe())
                return
        log.info("claimed a MachineSet handed over from the Machine Config Operator", key=machine_key(obj),
                 result="applied" if claimed else "already ours")

    async def _release_if_claimed(self, kind: MachineKind, obj: dict[str, Any], ctx: PlanningContext) -> None:
        """A MachineSet left enrollment: remove our owner reference (and nothing else). After a
        conflict, release only what a fresh read still shows claimed and out of enrollment."""
        current: dict[str, Any] | None = obj
        for _ in range(CONFLICT_ATTEMPTS):
            if current is None or not is_claimed(current):
                return
            if current is not obj and (await self.plan(current, ctx)).reason != Reason.NOT_ENROLLED:
                return
            try:
                await kind.scope.writer.release(current)
            except Conflict:
                current = await kind.read(obj)
                continue
            except NotFound:
                return
            log.info("claim released", key=machine_key(current))
            self.c.enqueue(CLAIMS_KEY)
            return
        raise gave_up_on_conflicts(f"release claim on {machine_key(obj)}", CONFLICT_ATTEMPTS)

    def _post_events(self, obj: dict[str, Any], previous: MachineSetState | None, state: MachineSetState) -> None:
        """Hand this outcome's event (if it has one) to the event lane, which writes it in the
        background: a worker does not wait for the API server to store a report."""
        events = self.c.events
        if events is None or not self.c.may_write():
            return
        for notice in (conflict_event(previous, state), deprecated_event(previous, state),
                       *verification_events(previous, state)):
            if notice is not None:
                events.post(involved(obj), *notice)
        event = event_for(previous, state)
        if event is None:
            return
        events.post(involved(obj), *event)
        if state.refreshed is not None and state.refreshed.result != "current":
            tell_template_sharers(obj, state, event, self.c.outcomes, self.c.store, events)


def _refusal_label(exc: Exception) -> str:
    if isinstance(exc, Conflict):
        return "conflict"
    if isinstance(exc, NotFound):
        return "gone"
    return "failed"
