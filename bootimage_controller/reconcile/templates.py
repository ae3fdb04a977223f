"""vSphere: a boot image is a template in vCenter, shared by every MachineSet that names it.

A decision to patch a vSphere MachineSet carries the template work (`TemplateRefresh`): the
template is built or replaced in vCenter under the same name, and the MachineSet itself needs no
write. Every vCenter write is fenced like a Kubernetes write: sent only while this replica holds
the Lease and the upgrade gate is open.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import replace
from typing import Any

import structlog

from ..constants import Action, Reason
from ..core.model import BootImageDecision, MachineResource
from ..core.skew.record import ReleaseSource
from ..core.vsphere.topology import TemplateRefresh
from ..kube.fence import NotLeader, UpgradeGateClosed, WriteRefused
from ..vsphere.ova import OvaError
from ..vsphere.template_refresh import Guard, RefreshOutcome
from ..vsphere.vcenter import VCenterError
from .event_rules import EventSink, Notice, involved
from .keys import machine_key, split_key
from .kinds import SecretCheck, UpgradeGate
from .state import MachineSetState
from .store import InformerStore

log = structlog.get_logger(__name__)

# Build or replace a template in vCenter (vsphere.checks.VSphereChecks.refresh).
TemplateRefreshHook = Callable[[TemplateRefresh, Guard], Awaitable[RefreshOutcome]]
# Why a write must not be sent now (the Lease, via the API client's fence), None when it may.
FenceCheck = Callable[[str], WriteRefused | None]


class FencedTemplateRefresh:
    """The vSphere step of a MachineSet reconcile: the template refresh (`vsphere.refresh.TemplateRefresher`
    does the vCenter work) behind the stub-Ignition check and the same fence as a Kubernetes write."""

    def __init__(
        self, templates: TemplateRefreshHook, *, stub_check: SecretCheck | None, fence: FenceCheck,
        is_leader: Callable[[], bool], upgrade_gate: UpgradeGate,
    ) -> None:
        self.templates = templates
        self.stub_check = stub_check
        self.fence = fence
        self.is_leader = is_leader
        self.upgrade_gate = upgrade_gate

    async def refresh(self, key: str, obj: Mapping[str, Any], decision: BootImageDecision,
                      work: TemplateRefresh) -> MachineSetState:
        """Build or replace the template, stub Ignition first (as before any patch)."""
        if self.stub_check is not None:
            refusal = await self.stub_check(MachineResource.from_object(obj))
            if refusal is not None:
                return MachineSetState.failed(decision, refusal.reason, refusal.message)
        try:
            outcome = await self.templates(work, self.guard)
        except UpgradeGateClosed as exc:
            log.info("template refresh stopped: upgrade gate closed", key=key, why=str(exc))
            return MachineSetState(decision)
        except OvaError as exc:
            if exc.reason is Reason.OVA_UNAVAILABLE:
                skipped = replace(decision, action=Action.SKIP, reason=exc.reason, message=f"{decision.message}: {exc}")
                return MachineSetState(skipped)
            return MachineSetState.failed(decision, exc.reason, str(exc))
        except VCenterError as exc:
            return MachineSetState.failed(decision, Reason.TEMPLATE_REFRESH_FAILED, f"template {work.name}: {exc}")
        # The template now holds the target: what this MachineSet boots from here on (skew reads
        # it; no watch event will re-plan it, the MachineSet itself did not change).
        done = replace(decision, current=decision.target, current_release=decision.target_release,
                       current_release_source=str(ReleaseSource.CLOUD))
        return MachineSetState(done, refreshed=outcome)

    def guard(self) -> None:
        """Raise `WriteRefused` when a vCenter write must not be sent now: the same checks as a
        boot image patch (the Lease, via the client's fence, and the upgrade gate)."""
        refusal = self.fence("vsphere-templates")
        if refusal is None and not self.is_leader():
            refusal = NotLeader("not the leader")
        refusal = refusal or self.upgrade_gate()
        if refusal is not None:
            raise refusal


def tell_template_sharers(
    obj: Mapping[str, Any], state: MachineSetState, event: Notice, outcomes: Mapping[str, MachineSetState],
    store: InformerStore,
    events: EventSink,
) -> None:
    """The other MachineSets that boot the replaced template get the Event too (they were not
    written, and their next decision is a quiet no-op)."""
    work = state.decision.template
    if work is None or state.refreshed is None:
        return
    me = machine_key(obj)
    for key, other in outcomes.items():
        theirs = other.decision.template
        if key == me or theirs is None or theirs.placement.server != work.placement.server:
            continue
        if theirs.placement.datacenter == work.placement.datacenter and state.refreshed.name in theirs.names:
            shared = store.get(*split_key(key))
            if shared is not None:
                events.post(involved(shared), *event)
