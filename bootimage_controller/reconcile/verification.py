"""Boot verification in the daemon (SPEC section 3b): a step of the machine reconcile.

After a MachineSet is planned (and not patched in this reconcile: a patched one boots a new image
nobody has tried yet, and the watch event of the patch brings it back here), its verdict is judged
from the Machine and Node caches (`core/verification.judge_machine_set`, pure). Then, in order:
- a `failed` image this controller wrote is rolled back at once, in one JSON patch that keeps the
  failed image in the record (`core/rollback.failed_image_rollback`); the planner then never writes
  it again while the golden data names it (`TargetImageFailedFirstBoot`);
- else a verdict that says something new is recorded (`boot-image-verified`) on a MachineSet this
  controller manages. Another manager's MachineSet (the MCO's, GitOps', Hive's) is never written:
  its verdict is reported (Events, metrics, the ClusterOperator), naming the writer and the fix;
- then the canary step (`reconcile/canary.py`): a MachineSet annotated `boot-image-canary: Enabled`
  gets one canary Machine after our write, recorded, then deleted.
Every write is a JSON patch that tests the resourceVersion the verdict was judged from, sent through
the same fenced client as every other write (only the leader, and never while the upgrade gate is
closed); a conflict means the object changed, and its watch event brings it back here.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, replace
from datetime import datetime, timedelta

import structlog

from ..constants import (
    CAPI_MACHINEDEPLOYMENT,
    CAPI_MACHINESET,
    DEFAULT_FIRST_BOOT_TIMEOUT,
    MACHINESET_KIND,
    Action,
    Manager,
    Platform,
    Reason,
)
from ..core.canary import canary_enabled
from ..core.capi.resources import INFRA_REF_NAME_PATH
from ..core.capi.verification import CapiMachineIndex, infra_image_path, judge_capi_object
from ..core.cluster import CAPI_MACHINE_READ, INFRA_MACHINE_READS
from ..core.model import BootImageDecision, dotted, get_path, image_label
from ..core.rollback import failed_image_rollback, verdict_patch, wrote_current
from ..core.verification import (
    BootVerdict,
    Judgement,
    MachineIndex,
    NodeFacts,
    Verdict,
    VerificationInputs,
    VerificationOutcome,
    judge_machine_set,
    node_facts,
)
from ..errors import InputError
from ..kube.fence import UpgradeGateClosed
from .canary import Canaries, CanaryInputs
from .claim_reconciler import Holders
from .kinds import MachineKind
from .store import InformerStore
from .writer import guarded_patch

log = structlog.get_logger(__name__)

MACHINES_ROLE = "machines"
NODES_ROLE = "nodes"
CAPI_MACHINES_ROLE = CAPI_MACHINE_READ.role
_CAPI_KINDS = frozenset({CAPI_MACHINESET, CAPI_MACHINEDEPLOYMENT})
# Decisions whose MachineSet is not ours to record on even when we manage its kind: opted out,
# another owner, the other API's side, Windows, unparseable (never write what was not fully parsed).
_NOT_RECORDED = frozenset({Reason.NOT_ENROLLED, Reason.OWNED_BY_OTHER, Reason.NOT_AUTHORITATIVE, Reason.WINDOWS})


@dataclass(frozen=True)
class VerificationOptions:
    """`run --first-boot-timeout` and `--no-rollback-on-failed-boot`."""

    first_boot_timeout: float = DEFAULT_FIRST_BOOT_TIMEOUT
    rollback: bool = True


class BootVerification:
    """Judges, records and rolls back (see the module docstring). Built by `assembly.assemble`."""

    def __init__(self, store: InformerStore, holders: Holders, options: VerificationOptions,
                 upgrade_gate: Callable[[], UpgradeGateClosed | None], clock: Callable[[], datetime]) -> None:
        self.store = store
        self.holders = holders
        self.options = options
        self.upgrade_gate = upgrade_gate
        self.clock = clock
        self.canaries = Canaries(options.first_boot_timeout, upgrade_gate, clock)
        # Rebuilt on the next verdict after a change: one pass over the Machines per batch of
        # changes, not one per MachineSet judged. (Nodes are looked up by name: `NodesInCache`.)
        self._index: MachineIndex | None = None
        self._capi_index: CapiMachineIndex | None = None
        self._infra_roles = [r.role for r in INFRA_MACHINE_READS if r.role in store.informers]
        machines = store.informers.get(MACHINES_ROLE)
        if machines is not None:
            machines.add_handler(on_add=self._forget_machines, on_update=self._machine_updated,
                                 on_delete=self._forget_machines)
        for role in (CAPI_MACHINES_ROLE, *self._infra_roles):
            informer = store.informers.get(role)
            if informer is not None:
                informer.add_handler(on_add=self._forget_capi, on_update=self._capi_updated,
                                     on_delete=self._forget_capi)

    def _forget_machines(self, _obj: object) -> None:
        self._index = None

    def _machine_updated(self, _old: object, _new: object) -> None:
        self._index = None

    def _forget_capi(self, _obj: object) -> None:
        self._capi_index = None

    def _capi_updated(self, _old: object, _new: object) -> None:
        self._capi_index = None

    def applies_to(self, decision: BootImageDecision) -> bool:
        """MachineSets of either API, and enrolled CAPI MachineDeployments, whose boot image is
        known. Not judged (docs/install.md says so): the ControlPlaneMachineSet (its Machines are the
        control plane's); vSphere, whose template is refreshed in place under the same name, so a
        Machine's template name does not tell which build it booted. Nothing is judged before the
        Machines (of its API) and Nodes have listed (a verdict from half a list could start a canary
        a Machine not yet seen makes needless); the daemon queues them again then (judge_again)."""
        if decision.platform == Platform.VSPHERE or decision.field is None or decision.current is None:
            return False
        if not self.store.role_synced(NODES_ROLE):
            return False
        if decision.kind == MACHINESET_KIND:
            return self.store.role_synced(MACHINES_ROLE)
        return (decision.kind in _CAPI_KINDS and self.store.role_synced(CAPI_MACHINES_ROLE)
                and all(self.store.role_synced(r) for r in self._infra_roles))

    def inputs(self) -> VerificationInputs:
        if self._index is None:
            self._index = MachineIndex.build(self.store.list(MACHINES_ROLE))
        return VerificationInputs(self._index, NodesInCache(self.store))

    def capi_index(self) -> CapiMachineIndex:
        if self._capi_index is None:
            infra = [m for role in self._infra_roles for m in self.store.list(role)]
            self._capi_index = CapiMachineIndex.build(self.store.list(CAPI_MACHINES_ROLE), infra)
        return self._capi_index

    def _judge(self, obj: dict[str, object], decision: BootImageDecision, recorded: BootVerdict | None,
               now: datetime) -> Judgement:
        timeout = timedelta(seconds=self.options.first_boot_timeout)
        if decision.kind in _CAPI_KINDS:
            return judge_capi_object(obj, decision.field, decision.current, self.capi_index(), NodesInCache(self.store),
                                     recorded, now, timeout)
        return judge_machine_set(obj, decision.field, decision.current, self.inputs(), recorded, now, timeout)

    async def verify(self, obj: dict[str, object], decision: BootImageDecision, kind: MachineKind,
                     may_write: bool) -> VerificationOutcome:
        now = self.clock()
        annotations = _annotations(obj)
        recorded = BootVerdict.from_annotations(annotations)
        judgement = self._judge(obj, decision, recorded, now)
        verdict = judgement.verdict
        ours = decision.manager is Manager.OURS
        outcome = VerificationOutcome(
            verdict, recorded, decision.manager, ours and wrote_current(annotations, decision.current),
            failed_machine=judgement.failed_machine,
            recheck_after=(judgement.recheck_at - now).total_seconds() if judgement.recheck_at is not None else None,
        )
        recordable = ours and decision.action is not Action.ERROR and decision.reason not in _NOT_RECORDED
        if not may_write:
            return outcome
        if recordable:
            outcome = await self._record(obj, decision, kind, outcome, now)
        if decision.kind in _CAPI_KINDS:
            return self._no_capi_canary(obj, outcome)
        return await self._canary(obj, decision, kind, judgement, outcome, recordable, now)

    @staticmethod
    def _no_capi_canary(obj: dict[str, object], outcome: VerificationOutcome) -> VerificationOutcome:
        """A canary is a Machine API Machine (docs/capi.md): a Cluster API one would also need its
        infrastructure machine and bootstrap config made and deleted with it. An annotated CAPI
        pool is told so (Warning BootImageCanaryNotRun), never given half a canary."""
        if not canary_enabled(obj):
            return outcome
        return replace(outcome, canary_error="canaries are made for Machine API MachineSets only; this Cluster API "
                                             "pool is verified by the Machines its scale-ups create")

    async def _record(self, obj: dict[str, object], decision: BootImageDecision, kind: MachineKind,
                      outcome: VerificationOutcome, now: datetime) -> VerificationOutcome:
        verdict = outcome.verdict
        if verdict.verdict is Verdict.FAILED and self.options.rollback and outcome.ours_to_roll_back:
            return await self._roll_back(obj, decision, kind, outcome, now)
        if verdict.verdict is Verdict.UNVERIFIED or verdict.same_evidence(outcome.recorded_before):
            # Only evidence is recorded: an unverified verdict is said (metrics, `plan`) but never
            # written, so a pass over a fleet without new Machines costs no write.
            return outcome
        _, error = await guarded_patch(kind.scope.writer, self.upgrade_gate, obj, verdict_patch(obj, verdict),
                                       "record boot image verdict")
        return outcome if error is None else replace(outcome, write_error=error)

    async def _canary(self, obj: dict[str, object], decision: BootImageDecision, kind: MachineKind,
                      judgement: Judgement, outcome: VerificationOutcome, recordable: bool,
                      now: datetime) -> VerificationOutcome:
        """The daemon's canary step (reconcile/canary.py), after the record: a canary's verdict is
        recorded before the canary is deleted."""
        inputs = self.inputs()
        canaries = inputs.index.by_canary.get((decision.namespace, decision.name), ())
        if not canaries and not canary_enabled(obj):
            return outcome
        peers = [ms for ms in self.store.list(MACHINESET_KIND)
                 if get_path(ms, ("metadata", "namespace")) == decision.namespace]
        report = await self.canaries.step(kind.scope.writer, CanaryInputs(
            obj, peers, decision.field, decision.current, judgement.verdict, outcome.recorded_before,
            outcome.ours_to_roll_back, recordable and outcome.rolled_back_to is None, judgement.machines,
            canaries, inputs.nodes))
        if report.error is not None:
            log.warning("canary not run", namespace=decision.namespace, name=decision.name, error=report.error)
        recheck = outcome.recheck_after
        if report.recheck_at is not None:
            after = (report.recheck_at - now).total_seconds()
            recheck = after if recheck is None else min(recheck, after)
        return replace(outcome, canary=report.running, canary_created=report.created, canary_deleted=report.deleted,
                       canary_error=report.error, recheck_after=recheck)

    async def orphaned_canaries(self, kind: MachineKind, namespace: str, name: str) -> None:
        """The MachineSet `namespace/name` is gone: its daemon canaries go too."""
        if not self.store.role_synced(MACHINES_ROLE):
            return
        canaries = self.inputs().index.by_canary.get((namespace, name), ())
        if canaries:
            await self.canaries.orphaned(kind.scope.writer, canaries)

    async def _roll_back(self, obj: dict[str, object], decision: BootImageDecision, kind: MachineKind,
                         outcome: VerificationOutcome, now: datetime) -> VerificationOutcome:
        assert decision.field is not None  # applies_to
        holders = self.holders
        # The patch re-asserts our claim: under the claims gate, never to a holder being deleted,
        # like every other claim (machines.py). A release in progress: the next event rolls back.
        async with holders.claiming(kind.scope) as holder:
            if holder.deleting:
                return replace(outcome, rollback_pending=True)
            # A CAPI object is rolled back as `rollback` does: infrastructureRef.name to the previous template.
            field = dotted(INFRA_REF_NAME_PATH) if decision.kind in _CAPI_KINDS else decision.field
            try:
                ops, previous = failed_image_rollback(dict(obj), field, outcome.verdict, holder.uid, now)
            except InputError as exc:
                # No record to roll back to (a hand edit removed it): reported, never guessed.
                return replace(outcome, write_error=f"cannot roll back: {exc}")
            applied, error = await guarded_patch(kind.scope.writer, self.upgrade_gate, obj, ops,
                                                 "roll back failed boot image")
        if error is not None:
            return replace(outcome, write_error=error)
        if not applied:
            # The MachineSet changed first: nothing was written; its watch event judges it again.
            return replace(outcome, rollback_pending=True)
        restored = image_label(previous) if decision.kind not in _CAPI_KINDS else self._template_image(decision, previous)
        log.warning("rolled back a boot image that failed its first boot", namespace=decision.namespace,
                    name=decision.name, image=outcome.verdict.image, restored=restored)
        return replace(outcome, verdict=outcome.verdict.with_failed(str(outcome.verdict.image)),
                       rolled_back_to=restored, recheck_after=None)


    def _template_image(self, decision: BootImageDecision, template_name: object) -> str:
        """The boot image the previous template names, as `rolled_back_to` says it (the template's
        name when its cache does not hold it)."""
        kind = str(decision.current.get("template", "")).partition("/")[0] if isinstance(decision.current, dict) else ""
        template = self.store.get(kind, decision.namespace, str(template_name))
        path = infra_image_path(decision.field)
        image = image_label(get_path(template, ("spec", "template", *path))) if template and path else None
        return f"{image} (template {kind}/{template_name})" if image else f"template {kind}/{template_name}"


class NodesInCache(Mapping[str, NodeFacts]):
    """The Nodes' facts by name, read from the Node cache as a verdict asks for one: a verdict reads
    the Nodes of its MachineSet's few Machines, never all of them (a copy of every Node's facts
    was 3 MiB at 15,000 Nodes)."""

    __slots__ = ("_store",)

    def __init__(self, store: InformerStore) -> None:
        self._store = store

    def __getitem__(self, name: str) -> NodeFacts:
        node = self._store.get(NODES_ROLE, "", name)
        if node is None:
            raise KeyError(name)
        return node_facts(node)

    def __iter__(self) -> Iterator[str]:
        return (str(get_path(n, ("metadata", "name"))) for n in self._store.list(NODES_ROLE))

    def __len__(self) -> int:
        return len(self._store.list(NODES_ROLE))


def _annotations(obj: dict[str, object]) -> dict[str, str]:
    meta = obj.get("metadata")
    annotations = meta.get("annotations") if isinstance(meta, dict) else None
    return annotations if isinstance(annotations, dict) else {}
