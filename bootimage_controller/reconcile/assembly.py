"""Putting the loop together from the parts `daemon/run.py` builds (sample-controller's
`NewController(clients, informers)`): the informers' store, the writers, and the hooks to the
cloud, vCenter, the stub-Ignition check, the Event lane and the status reporter."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import partial

from ..constants import CAPI_KINDS, CPMS_KIND, DEFAULT_DISAGREEMENT_GRACE, MACHINESET_KIND
from ..core.cluster import CAPI_READS, MACHINE_READS
from ..core.skew.verdict import SkewLimits
from ..kube.fence import WriteRefused
from .claim_reconciler import ClaimGate, ClaimScope, ClaimsReconciler, Holders, fresh_capi, fresh_machines
from .delegation import Delegation
from .event_rules import EventSink, InvolvedObject, involved
from .keys import CLAIMS_KEY
from .kinds import ClusterApiKind, MachineApiKind, MachineKind, SecretCheck
from .ledger import HotLoopLedger
from .loop import KeySink, Loop
from .machines import CloudLookup, Collaborators, MachineReconciler
from .status_clock import StatusClock
from .status_reconciler import StatusReconciler, StatusView
from .store import CAPI_HOLDER, MAPI_HOLDER, ClusterView, InformerStore
from .templates import FencedTemplateRefresh, TemplateRefreshHook
from .triggers import Triggers
from .verification import BootVerification, VerificationOptions
from .writer import MachineSetWriter, now_utc

MACHINE_KINDS = (MACHINESET_KIND, CPMS_KIND, *CAPI_KINDS)


@dataclass(frozen=True)
class ReconcileOptions:
    dry_run: bool = False
    # Companion rules (SPEC section 3): how long an MCO-managed MachineSet may stay on another
    # image than ours after the MCO's pass before it is a disagreement; labels that mark GitOps.
    disagreement_grace: float = DEFAULT_DISAGREEMENT_GRACE
    gitops_labels: tuple[str, ...] = ()
    skew_limits: SkewLimits = field(default_factory=SkewLimits)
    verification: VerificationOptions = field(default_factory=VerificationOptions)


@dataclass(frozen=True)
class Writers:
    """The Machine API's objects and holder, and the Cluster API's (`daemon/run.py` builds them)."""

    machine_api: MachineSetWriter
    cluster_api: MachineSetWriter
    capi_version: str


def always_leading() -> bool:
    """`Hooks.is_leader` without an election (tests, `run --once` takes the Lease itself)."""
    return True


def no_fence(_what: str) -> WriteRefused | None:
    """`Hooks.fence` without a Lease: no write is refused."""
    return None


@dataclass(frozen=True)
class MayWrite:
    """Whether a reconcile may write now: not a dry run, and the leader (`Collaborators.may_write`)."""

    dry_run: bool
    is_leader: Callable[[], bool]

    def __call__(self) -> bool:
        return not self.dry_run and self.is_leader()


@dataclass(frozen=True)
class Hooks:
    is_leader: Callable[[], bool] = always_leading
    fence: Callable[[str], WriteRefused | None] = no_fence  # the API client's write fence
    stub_check: SecretCheck | None = None
    cloud: CloudLookup | None = None
    templates: TemplateRefreshHook | None = None
    events: EventSink | None = None
    on_pass: Callable[[StatusView], None] | None = None
    # When mid-pass reports are due; the daemon gives the status writer's, so one clock times them all.
    status_clock: StatusClock = field(default_factory=StatusClock)


@dataclass(frozen=True)
class Reconcilers:
    """The assembled loop and what the daemon (and tests) reach into: the store, the status
    reconciler (every key's last outcome: `status.outcomes`)."""

    store: InformerStore
    cluster: ClusterView
    sink: KeySink
    loop: Loop
    triggers: Triggers
    machines: MachineReconciler
    claims: ClaimsReconciler
    status: StatusReconciler
    kinds: Mapping[str, MachineKind]


def assemble(store: InformerStore, writers: Writers, options: ReconcileOptions, hooks: Hooks,
             sink: KeySink) -> Reconcilers:
    """`sink`: where keys go (the daemon's work queue, or `run --once`'s `KeyList`)."""
    cluster = ClusterView(store, options.gitops_labels)
    may_write = MayWrite(options.dry_run, hooks.is_leader)
    mapi = writers.machine_api
    capi = writers.cluster_api
    mapi_scope = ClaimScope(mapi, MAPI_HOLDER, partial(fresh_machines, mapi.custom), MACHINE_READS,
                            HotLoopLedger(mapi.keep_hot_loop))
    capi_scope = ClaimScope(capi, CAPI_HOLDER, partial(fresh_capi, capi.custom, writers.capi_version), CAPI_READS,
                            HotLoopLedger(capi.keep_hot_loop))
    holders = Holders(store, ClaimGate())
    machine_api_kind = MachineApiKind(mapi_scope, hooks.stub_check)
    cluster_api_kind = ClusterApiKind(capi_scope, store, writers.capi_version, cluster.upgrade_gate)
    kinds: dict[str, MachineKind] = {MACHINESET_KIND: machine_api_kind, CPMS_KIND: machine_api_kind,
                                     **dict.fromkeys(CAPI_KINDS, cluster_api_kind)}
    templates = None
    if hooks.templates is not None:
        templates = FencedTemplateRefresh(hooks.templates, stub_check=hooks.stub_check, fence=hooks.fence,
                                      is_leader=hooks.is_leader, upgrade_gate=cluster.upgrade_gate)
    status = StatusReconciler(store, cluster, MACHINE_KINDS, hooks.on_pass, hooks.status_clock)
    delegation = Delegation(store, cluster, status.outcomes, options.skew_limits, hooks.events, sink.add_after,
                            options.disagreement_grace)
    verification = BootVerification(store, holders, options.verification, cluster.upgrade_gate, now_utc)
    machines = MachineReconciler(kinds, Collaborators(
        store=store, cluster=cluster, outcomes=status.outcomes, holders=holders, delegation=delegation, may_write=may_write,
        enqueue=sink.add, cloud=hooks.cloud, templates=templates, events=hooks.events, verification=verification,
    ))
    claims = ClaimsReconciler(holders, (mapi_scope, capi_scope), may_write)
    loop = Loop(store, status, sink)
    loop.register_machines(MACHINE_KINDS, machines.reconcile)
    loop.register([CLAIMS_KEY], claims.reconcile)
    triggers = Triggers(store, cluster, status.outcomes, sink, loop.enqueue_all, own_writes=machines.memory)
    triggers.attach(store.informers)
    return Reconcilers(store, cluster, sink, loop, triggers, machines, claims, status, kinds)


def event_summary_target(store: InformerStore) -> InvolvedObject | None:
    """The object summary Events go on (events.EventLane): our claim holder, in the MachineSets'
    namespace, where the Events RBAC allows and an admin looks; None while there is none."""
    holder = store.one(MAPI_HOLDER)
    return involved({"apiVersion": "v1", "kind": "ConfigMap", **holder}) if holder is not None else None


__all__ = ["Hooks", "MayWrite", "ReconcileOptions", "Reconcilers", "Writers", "always_leading", "assemble",
           "event_summary_target", "no_fence"]
