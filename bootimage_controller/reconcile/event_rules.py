"""Which Event an outcome deserves, the object it goes on, and where it is sent (`EventSink`)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from ..constants import (
    ACTIONABLE_SKIPS,
    EVENT_CANARY_NOT_RUN,
    EVENT_CANARY_STARTED,
    EVENT_DEPRECATED,
    EVENT_DISAGREEMENT,
    EVENT_FAILED,
    EVENT_FIRST_BOOT_FAILED,
    EVENT_HOT_LOOP,
    EVENT_PROPOSED,
    EVENT_ROLLED_BACK,
    EVENT_SKIPPED,
    EVENT_TYPE_NORMAL,
    EVENT_TYPE_WARNING,
    EVENT_UPDATED,
    EVENT_VERIFIED,
    EVENT_WRITER_CONFLICT,
    MACHINE_API_GROUP,
    MACHINESET_KIND,
    MACHINESET_VERSION,
    Action,
    Manager,
    Reason,
)
from ..core.capi.planner import ROLLOUT_NOTE
from ..core.companion import hive_proposal_message, proposal_message
from ..core.verification import Verdict, VerificationOutcome
from .state import MachineSetState

Notice = tuple[str, str, str]  # (type, reason, message)


@dataclass(frozen=True)
class InvolvedObject:
    kind: str
    namespace: str
    name: str
    uid: str
    api_version: str = field(default=f"{MACHINE_API_GROUP}/{MACHINESET_VERSION}")


class EventSink(Protocol):
    """Where Events go (events.EventLane): posted in the background, or written and awaited."""

    def post(self, involved: InvolvedObject, type: str, reason: str, message: str) -> None: ...

    async def emit_now(self, involved: InvolvedObject, type: str, reason: str, message: str) -> None: ...


def involved(obj: Mapping[str, Any]) -> InvolvedObject:
    meta = obj.get("metadata") or {}
    return InvolvedObject(
        kind=str(obj.get("kind", MACHINESET_KIND)),
        namespace=str(meta.get("namespace", "")),
        name=str(meta.get("name", "")),
        uid=str(meta.get("uid", "")),
        api_version=str(obj.get("apiVersion", f"{MACHINE_API_GROUP}/{MACHINESET_VERSION}")),
    )


def says_nothing_new(previous: MachineSetState | None, state: MachineSetState) -> bool:
    """A decision worth only a debug line: the same outcome again (a resync, an unrelated edit),
    or the no-op that follows our own patch (the patch's line said it all)."""
    if previous is None or state.updated:
        return False
    d, p = state.decision, previous.decision
    same = (d.action, d.reason, state.error) == (p.action, p.reason, previous.error)
    return same or (previous.patched and d.action is Action.NOOP)


def event_for(previous: MachineSetState | None, state: MachineSetState) -> Notice | None:
    """(type, reason, message) of the event an outcome deserves: every patch, and a Warning when a
    failure or an actionable skip is new (the same outcome again says nothing new)."""
    d = state.decision
    if state.patched:
        message = f"boot image updated to {d.target_release or d.target}"
        if d.capi is not None:
            message += f" (infrastructure template {d.capi.old_name} -> {d.capi.new_name})"
            if d.capi.rollout:
                message += f"; a rollout follows: {ROLLOUT_NOTE}"
        return EVENT_TYPE_NORMAL, EVENT_UPDATED, message
    if state.refreshed is not None and state.refreshed.result != "current":
        was = f" (was {state.refreshed.previous_release})" if state.refreshed.previous_release else ""
        verb = "replaced" if state.refreshed.result == "replaced" else "created"
        return EVENT_TYPE_NORMAL, EVENT_UPDATED, f"vSphere template {state.refreshed.name} {verb}: RHCOS {d.target_release}{was}"
    if d.manager is not Manager.OURS:
        return companion_event(previous, state)
    if previous is not None and (previous.decision.reason, previous.error) == (d.reason, state.error):
        return None
    if state.error is not None:
        if state.error_reason is Reason.HOT_LOOP:
            return EVENT_TYPE_WARNING, EVENT_HOT_LOOP, state.error
        return EVENT_TYPE_WARNING, EVENT_FAILED, state.error_text or state.error
    if d.action is Action.ERROR:
        return EVENT_TYPE_WARNING, EVENT_FAILED, d.message
    if d.action is Action.SKIP and d.reason in ACTIONABLE_SKIPS:
        return EVENT_TYPE_WARNING, EVENT_SKIPPED, d.message
    return None


def companion_event(previous: MachineSetState | None, state: MachineSetState) -> Notice | None:
    """Another manager's MachineSet: a GitOps or `external` one gets the patch we would send, once per target; an
    MCO one a Warning when a disagreement becomes lasting. Its skips and errors are that manager's
    to report, not ours."""
    d, before = state.decision, previous.decision if previous is not None else None
    if d.manager in (Manager.GITOPS, Manager.EXTERNAL, Manager.HIVE) and d.action is Action.PATCH:
        if before is None or (before.manager, before.action, before.target) != (d.manager, d.action, d.target):
            message = hive_proposal_message(d) if d.manager is Manager.HIVE else proposal_message(d)
            return EVENT_TYPE_NORMAL, EVENT_PROPOSED, message
        return None
    found = state.disagreement
    if found is not None and found.lasting:
        was = previous.disagreement if previous is not None else None
        if was is None or not was.lasting or (before is not None and before.target != d.target):
            return EVENT_TYPE_WARNING, EVENT_DISAGREEMENT, found.message
    return None


def conflict_event(previous: MachineSetState | None, state: MachineSetState) -> Notice | None:
    """`BootImageWriterConflict`, once per target: two writers of one boot image (the MCO and GitOps
    or Hive), both named with the fix. The same conflict again (a resync, the no-op after the MCO's
    patch) says nothing new."""
    found = state.conflict
    if found is None:
        return None
    was = previous.conflict if previous is not None else None
    if was is not None and was.target == found.target:
        return None
    return EVENT_TYPE_WARNING, EVENT_WRITER_CONFLICT, found.message()


def deprecated_event(previous: MachineSetState | None, state: MachineSetState) -> Notice | None:
    """`BootImageDeprecated`, once per deprecated current image, whoever manages the MachineSet:
    scale-up boots that image, and a cloud may refuse new machines from it."""
    why = state.decision.current_deprecated
    if why is None or (previous is not None and previous.decision.current_deprecated == why):
        return None
    d = state.decision
    fix = (f"this controller will move it to {d.target_release or 'the golden image'}" if d.action is Action.PATCH
           else f"it is not updated now ({d.action} {d.reason})")
    return EVENT_TYPE_WARNING, EVENT_DEPRECATED, f"the boot image is deprecated: {why}; scale-up may fail; {fix}"


def new_first_boot_failure(previous: MachineSetState | None, state: MachineSetState) -> bool:
    """A failed first boot not said before: by this process (the previous outcome) or in the
    record it found (a restart). A roll back is always new: it just happened."""
    found = state.verification
    if found is None or found.verdict.verdict is not Verdict.FAILED or found.rollback_pending:
        return False  # (a roll back still to be written says it when it is)
    if found.rolled_back_to is not None:
        return True
    v = found.verdict
    before = previous.verification if previous is not None else None
    seen = [w for w in (before.verdict if before is not None else None, found.recorded_before) if w is not None]
    return not any((w.verdict, w.image, w.machine) == (v.verdict, v.image, v.machine) for w in seen)


def verification_events(previous: MachineSetState | None, state: MachineSetState) -> list[Notice]:
    """SPEC section 3b, whoever manages the MachineSet: `BootImageFirstBootFailed` once per failed
    image and Machine, `BootImageRolledBack` for each roll back, `BootImageVerified` once per image
    (a verdict already recorded, or said by this process, is not said again)."""
    found = state.verification
    if found is None:
        return []
    v, before = found.verdict, previous.verification if previous is not None else None
    notices: list[Notice] = []
    if v.verdict is Verdict.FAILED:
        if new_first_boot_failure(previous, state):
            machine = f"Machine {state.decision.namespace}/{v.machine}" if v.machine else "a Machine"
            notices.append((EVENT_TYPE_WARNING, EVENT_FIRST_BOOT_FAILED,
                            f"{machine} from boot image {v.image} did not join: {found.failure_text()}"))
        if found.rolled_back_to is not None:
            notices.append((EVENT_TYPE_NORMAL, EVENT_ROLLED_BACK,
                            f"boot image {v.image} failed its first boot; rolled back to {found.rolled_back_to} "
                            "(not written again while the golden data names it)"))
    elif v.verdict is Verdict.VERIFIED:
        said = [w for w in (found.recorded_before, before.verdict if before is not None else None) if w is not None]
        if not any(w.verdict is Verdict.VERIFIED and w.image == v.image for w in said):
            notices.append((EVENT_TYPE_NORMAL, EVENT_VERIFIED,
                            f"boot image {v.image} verified: {v.reason}"))
    return [*notices, *_canary_events(before, found)]


def _canary_events(before: VerificationOutcome | None, found: VerificationOutcome) -> list[Notice]:
    notices: list[Notice] = []
    if found.canary_created is not None:
        notices.append((EVENT_TYPE_NORMAL, EVENT_CANARY_STARTED,
                        f"canary Machine {found.canary_created} created to prove boot image {found.verdict.image}; "
                        "it is deleted once its verdict is recorded"))
    if found.canary_error is not None and (before is None or before.canary_error != found.canary_error):
        notices.append((EVENT_TYPE_WARNING, EVENT_CANARY_NOT_RUN, found.canary_error))
    return notices
