"""The daemon's reconcile loop: caches that watch, a queue of keys, workers that reconcile one key.

The controller only fetches, calls the planner and writes. Each MachineSet key is reconciled
idempotently from the informer cache: plan, then (leader only) act on the decision. Cluster-wide
inputs (golden data, MachineConfiguration, Infrastructure, ClusterVersion, Nodes) are parsed once
per change into a `PlanningContext`; a change to any of them re-queues every MachineSet. Status
(conditions, ClusterOperator, skew) is recomputed from the last outcome of every MachineSet under
one key, so a pass over 5,000 MachineSets writes status a handful of times, not 5,000.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

import structlog
from kubernetes_asyncio.client import CoreV1Api, CustomObjectsApi
from kubernetes_asyncio.client.exceptions import ApiException

from . import observability as obs
from .capi.planner import ROLLOUT_NOTE, plan_capi
from .capi.resources import INFRA_REF_PATH, CapiObject, capi_kind_key
from .capi.work import CapiWork
from .claims import HotLoopRecord, hot_loop_check, hot_loop_key, is_our_reference, record_annotations
from .cloud.facts import CloudFacts
from .cluster import (
    CAPI_READS,
    CLUSTER_READS,
    MACHINE_READS,
    NODE_READS,
    TEMPLATE_READS,
    ClusterObjects,
    ClusterRead,
    provider_spec_platforms,
    upgrade_blocker,
    with_capi_version,
)
from .companion import (
    Disagreement,
    DisagreementClock,
    McoPass,
    claim_hold_warning,
    proposal_message,
)
from .constants import (
    ACTIONABLE_SKIPS,
    ANNOTATION_HOT_LOOP,
    ANNOTATION_REPLACES,
    CAPI_GROUP,
    CAPI_KINDS,
    CAPI_MACHINESET,
    CAPI_NAMESPACE,
    CAPI_VERSIONS,
    CLAIM_FINALIZER,
    CLAIM_HOLDER_NAME,
    CLAIM_HOLDER_NAMESPACE,
    CPMS_KIND,
    CPMS_NAME,
    CPMS_PLURAL,
    CPMS_VERSION,
    DEFAULT_DISAGREEMENT_GRACE,
    EVENT_CLAIM_HOLDS_UPGRADES,
    EVENT_DISAGREEMENT,
    EVENT_FAILED,
    EVENT_HOT_LOOP,
    EVENT_PROPOSED,
    EVENT_SKIPPED,
    EVENT_TYPE_NORMAL,
    EVENT_TYPE_WARNING,
    EVENT_UPDATED,
    HOT_LOOP_KEY_PREFIX,
    MACHINE_API_GROUP,
    MACHINESET_KIND,
    MACHINESET_PLURAL,
    MACHINESET_VERSION,
    MAPI_NAMESPACE,
    Action,
    Manager,
    Reason,
)
from .context import ClusterFacts, PlanningContext, planning_context
from .errors import BootImageControllerError
from .events import EventLane
from .kube.errors import ApiError
from .kube.fence import NotLeader, UpgradeGateClosed, WriteRefused, write_preconditions
from .kube.informer import Informer, ListWatch
from .kube.workqueue import DONE, ReconcileResult
from .model import BootImageDecision, MachineResource, Refusal, get_path
from .planner import authoritative_api, is_our_owner_reference, plan_machine
from .skew.policy import install_version_from_cluster_version
from .skew.record import BootImageRelease, ReleaseSource, machineset_boot_image, min_aleph
from .skew.verdict import SkewLimits
from .vsphere.ova import OvaError
from .vsphere.refresh import Guard, RefreshOutcome
from .vsphere.topology import TemplateRefresh
from .vsphere.vcenter import VCenterError
from .writer import Holder, MachineSetWriter, WriteResult, now_utc

log = structlog.get_logger(__name__)

STATUS_KEY = "@status"
CAPI_HOLDER = "holder:capi"  # the informer of the Cluster API's claim holder
CLAIMS_KEY = "@claims"
MAX_CONFLICT_REPLANS = 5


@dataclass
class ControllerOptions:
    dry_run: bool = False
    cluster_operator: str = "machine-config-bootimages"
    concurrency: int = 4
    # Mid-pass progress reports (conditions recomputed from every outcome); the queue's status key
    # reports whenever it drains.
    progress_interval: float = 2.0
    # Companion rules (SPEC section 3): how long an MCO-managed MachineSet may stay on another
    # image than ours after the MCO's pass before it is a disagreement; labels that mark GitOps.
    disagreement_grace: float = DEFAULT_DISAGREEMENT_GRACE
    gitops_labels: tuple[str, ...] = ()
    skew_limits: SkewLimits = field(default_factory=SkewLimits)


# Mid-pass reports cost O(MachineSets) on the event loop (0.1 s at 5,000): spaced to 25 times their
# cost, at most 4% of a long pass goes to them (10 times cost a 5,000-MachineSet pass 10%), and the
# Progressing counts still move every few seconds.
REPORT_SPACING = 25


@dataclass(slots=True)
class MachineSetState:
    """The last outcome for one MachineSet: what we decided and whether it is done.

    `error` (a write failure or a refusal: hot loop, unusable user data) wins over the decision;
    `error_reason` says which, typed, for events, metrics and the Degraded message. Both are set
    or neither: build failures with `failed`.
    """

    decision: BootImageDecision
    patched: bool = False
    error: str | None = None
    error_reason: Reason | None = None
    refreshed: RefreshOutcome | None = None  # vSphere: the template this reconcile built or replaced
    disagreement: Disagreement | None = None  # MCO-managed: on another image than our target

    @classmethod
    def failed(cls, decision: BootImageDecision, reason: Reason, message: str) -> MachineSetState:
        return cls(decision, error=message, error_reason=reason)

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


class ClaimGate:
    """Claim writes (shared) against the release of every claim (exclusive), within one process.

    A release lists the MachineSets, removes our references, then drops the holder's finalizer. A
    claim written between that list and the finalizer removal would point at a holder about to
    disappear, and the garbage collector would delete that MachineSet. So claim writes wait while
    a release runs, and a release waits for the claim writes in flight.
    """

    def __init__(self) -> None:
        self._cond = asyncio.Condition()
        self._writers = 0
        self._releasing = False

    @contextlib.asynccontextmanager
    async def claiming(self) -> AsyncIterator[None]:
        async with self._cond:
            await self._cond.wait_for(lambda: not self._releasing)
            self._writers += 1
        try:
            yield
        finally:
            async with self._cond:
                self._writers -= 1
                self._cond.notify_all()

    @contextlib.asynccontextmanager
    async def releasing(self) -> AsyncIterator[None]:
        async with self._cond:
            await self._cond.wait_for(lambda: not self._releasing)
            self._releasing = True
            await self._cond.wait_for(lambda: self._writers == 0)
        try:
            yield
        finally:
            async with self._cond:
                self._releasing = False
                self._cond.notify_all()


@dataclass
class ClusterInputs:
    """Parsed cluster-wide inputs, rebuilt when any of their objects change."""

    context: PlanningContext | None
    problem: str | None  # why nothing can be planned (bad golden data, bad enrollment)
    objects: ClusterObjects


IsLeader = Callable[[], bool]
SecretCheck = Callable[[MachineResource], Awaitable[Refusal | None]]
# Rule 9: given an offline decision, the cloud's answers and the platforms they cover (None: offline).
CloudLookup = Callable[[BootImageDecision], Awaitable[tuple[CloudFacts, frozenset[str]] | None]]
# vSphere: build or replace a template in vCenter (vsphere.checks.VSphereChecks.refresh).
TemplateRefreshHook = Callable[[TemplateRefresh, Guard], Awaitable[RefreshOutcome]]
# Failures retried with backoff (the others wait for the next change or resync).
RETRIED_FAILURES = frozenset({Reason.PATCH_FAILED, Reason.TEMPLATE_REFRESH_FAILED})
# Decisions that say an outage, not the MachineSet: planned again on a backoff of their own (no error
# logged, `--once` unaffected) until the cloud or vCenter answers, so an outage that ends is noticed
# without an edit (issue 24). The resync (`run --resync-period`) is the slower net under everything.
TRANSIENT_DECISIONS = frozenset({Reason.CLOUD_UNAVAILABLE, Reason.VCENTER_UNAVAILABLE})
TRANSIENT_FIRST_RETRY = 5.0
TRANSIENT_MAX_RETRY = 300.0


class Controller:
    def __init__(
        self,
        api_client: Any,
        options: ControllerOptions,
        *,
        is_leader: IsLeader = lambda: True,
        before_patch: SecretCheck | None = None,
        on_pass: Callable[[Controller], None] | None = None,
        cloud: CloudLookup | None = None,
        templates: TemplateRefreshHook | None = None,
        capi_version: str = CAPI_VERSIONS[-1],
    ) -> None:
        self.options = options
        self.api_client = api_client
        self.custom = CustomObjectsApi(api_client)
        self.core = CoreV1Api(api_client)
        self.writer = MachineSetWriter(self.custom, self.core)
        # The Cluster API's objects are claimed by a holder in their own namespace (docs/capi.md).
        self.capi_writer = MachineSetWriter(self.custom, self.core, CAPI_NAMESPACE)
        self.capi_version = capi_version
        self.is_leader = is_leader
        self.before_patch = before_patch
        self.on_pass = on_pass
        self.cloud = cloud
        self.templates = templates
        self.states: dict[str, MachineSetState] = {}
        self.claims_gate = ClaimGate()
        # key -> the resourceVersion our last patch replaced (see `reconcile`).
        self._superseded: dict[str, str] = {}
        self._last_report = -math.inf
        self._report_cost = 0.0
        # Our last boot image write per MachineSet uid: still counts a hot loop when a writer that
        # replaces the whole object (PUT of an old copy) wipes the persisted record with it.
        self._hot_loops: dict[str, HotLoopRecord] = {}
        self._inputs: ClusterInputs | None = None
        self._enqueue: Callable[[str], None] = lambda key: None
        self._enqueue_after: Callable[[str, float], None] = lambda key, delay: None
        self.disagreements = DisagreementClock(options.disagreement_grace)
        self._outages: dict[str, int] = {}  # key -> transient decisions in a row
        # key -> why claiming it makes the MCO hold upgrades (our ClusterOperator says so too).
        self.claim_warnings: dict[str, str] = {}
        self.informers = self._make_informers(api_client)
        # Set by the daemon once the lane exists (it needs `event_summary_target` of this object).
        self.events: EventLane | None = None

    # ---- informers ------------------------------------------------------------------------------
    def _make_informers(self, api: Any) -> dict[str, Informer]:
        reads = with_capi_version(CLUSTER_READS, self.capi_version)
        # The Cluster API's reads may be refused (403) where its optional rights are not installed
        # (manifests/components/capi): they then count as empty. No other read may: a refused read
        # of the MCO's version or gates would otherwise be taken for "no MCO" and let us write.
        optional = {r.role for r in (*CAPI_READS, *TEMPLATE_READS)}
        informers = {read.role: Informer(_list_watch(api, read), absent_ok=read.group != "",
                                         forbidden_ok=read.role in optional) for read in reads}
        informers["holder"] = Informer(ListWatch.config_maps(api, CLAIM_HOLDER_NAMESPACE, name=CLAIM_HOLDER_NAME))
        informers[CAPI_HOLDER] = Informer(ListWatch.config_maps(api, CAPI_NAMESPACE, name=CLAIM_HOLDER_NAME),
                                          forbidden_ok=True)
        for read in (*MACHINE_READS, *CAPI_READS):
            informers[read.role].add_handler(
                on_add=self._machine_added, on_update=self._machine_updated, on_delete=self._machine_deleted
            )
        for read in TEMPLATE_READS:
            informers[read.role].add_handler(
                on_add=self._template_changed, on_update=self._template_updated, on_delete=self._template_changed
            )
        for name in ("bootimages", "infrastructure", *(r.role for r in NODE_READS)):
            informers[name].add_handler(
                on_add=self._cluster_changed, on_update=self._cluster_updated, on_delete=self._cluster_changed
            )
        informers["machineconfiguration"].add_handler(
            on_add=self._cluster_changed, on_update=self._machineconfiguration_updated, on_delete=self._cluster_changed
        )
        for name in ("mco_operator", "feature_gate"):
            informers[name].add_handler(
                on_add=self._cluster_changed, on_update=self._mco_updated, on_delete=self._cluster_changed
            )
        informers["clusterversion"].add_handler(
            on_add=self._cluster_changed, on_update=self._clusterversion_updated, on_delete=self._cluster_changed
        )
        for holder in ("holder", CAPI_HOLDER):
            informers[holder].add_handler(
                on_add=self._holder_event, on_update=self._holder_updated, on_delete=self._holder_deleted
            )
        return informers

    def bind_queue(
        self, enqueue: Callable[[str], None], enqueue_after: Callable[[str, float], None] | None = None
    ) -> None:
        self._enqueue = enqueue
        if enqueue_after is not None:
            self._enqueue_after = enqueue_after

    async def wait_synced(self, timeout: float | None = None) -> bool:
        results = await asyncio.gather(*(i.wait_synced(timeout) for i in self.informers.values()))
        return all(results)

    def sync_errors(self) -> dict[str, str]:
        """The last error of each informer that has not listed yet (why the caches are not synced)."""
        return {
            name: informer.last_error or "no answer yet"
            for name, informer in self.informers.items()
            if not informer.has_synced.is_set()
        }

    def synced(self) -> bool:
        return all(i.has_synced.is_set() for i in self.informers.values())

    def access_notes(self) -> list[str]:
        """What the daemon may not read (optional kinds answered 403), for the ClusterOperator: the
        Cluster API's rights come in an optional part of the install (manifests/components/capi)."""
        refused = sorted({i.source.resource for i in self.informers.values() if i.forbidden})
        if not refused:
            return []
        return [f"no rights to list {', '.join(refused)}: Cluster API objects are not managed (add the "
                "manifests/components/capi kustomize component to manage them)"]

    # ---- event handlers: what makes a key worth reconciling -------------------------------------------
    @staticmethod
    def machine_key(obj: Mapping[str, Any]) -> str:
        """`<informer role>/<namespace>/<name>`: the role is the kind, `Kind.cluster.x-k8s.io` for CAPI."""
        meta = obj.get("metadata") or {}
        role = capi_kind_key(obj) or obj.get("kind", MACHINESET_KIND)
        return f"{role}/{meta.get('namespace', '')}/{meta.get('name', '')}"

    def _machine_added(self, obj: dict[str, Any]) -> None:
        self._platform_evidence_changed()
        self._enqueue(self.machine_key(obj))

    def _machine_updated(self, old: dict[str, Any], new: dict[str, Any]) -> None:
        # Only what the planner reads: replicas, status and our own resourceVersion bumps do not count
        # (the MCO's filter: labels, annotations, owner references, providerSpec).
        if relevant_view(old) != relevant_view(new):
            if provider_spec_platforms([old]) != provider_spec_platforms([new]):
                self._platform_evidence_changed()
            self._enqueue(self.machine_key(new))
            if authoritative_api(old) != authoritative_api(new) and new.get("kind") == MACHINESET_KIND:
                # A Machine API pool changed sides: its CAPI mirror's decision changes with it.
                self._enqueue(f"{CAPI_MACHINESET}/{CAPI_NAMESPACE}/{(new.get('metadata') or {}).get('name', '')}")

    def _template_changed(self, _obj: dict[str, Any]) -> None:
        self._enqueue_capi()

    def _template_updated(self, old: dict[str, Any], new: dict[str, Any]) -> None:
        if _rv(old) != _rv(new):
            self._enqueue_capi()

    def _enqueue_capi(self) -> None:
        for read in CAPI_READS:
            for obj in self.informers[read.role].list():
                self._enqueue(self.machine_key(obj))

    def _platform_evidence_changed(self) -> None:
        # Without an Infrastructure platform the MachineSets' providerSpec kinds name it
        # (`context.platform_fact`): adding, removing or re-kinding one can change it.
        ctx = self._inputs.context if self._inputs is not None else None
        if ctx is not None and ctx.platform_from_machines:
            self._cluster_changed()

    def _machine_deleted(self, obj: dict[str, Any]) -> None:
        self._platform_evidence_changed()
        self.states.pop(self.machine_key(obj), None)
        self.disagreements.forget(self.machine_key(obj))
        self._outages.pop(self.machine_key(obj), None)
        self.claim_warnings.pop(self.machine_key(obj), None)
        self._superseded.pop(self.machine_key(obj), None)
        self._hot_loops.pop(str((obj.get("metadata") or {}).get("uid", "")), None)
        self._enqueue(STATUS_KEY)
        self._enqueue(CLAIMS_KEY)

    def _cluster_changed(self, *_objs: Any) -> None:
        self._inputs = None
        self.enqueue_all()

    def _cluster_updated(self, old: dict[str, Any], new: dict[str, Any]) -> None:
        if _rv(old) != _rv(new):
            self._cluster_changed()

    def _machineconfiguration_updated(self, old: dict[str, Any], new: dict[str, Any]) -> None:
        # Our own status writes must not re-trigger a pass: only spec (and metadata) matter, and
        # the MCO's report of its own pass, which MCO-managed MachineSets are compared after.
        if old.get("spec") != new.get("spec"):
            self._cluster_changed()
        elif McoPass.from_machine_configuration(old) != McoPass.from_machine_configuration(new):
            for key, state in list(self.states.items()):
                if state.decision.manager is Manager.MCO:
                    self._enqueue(key)

    def _mco_updated(self, old: dict[str, Any], new: dict[str, Any]) -> None:
        # The MCO's version (ClusterOperator) or its gates (FeatureGate) decide who manages what;
        # its conditions change all the time and decide nothing here.
        keys = (("status", "versions"), ("status", "featureGates"))
        if any(get_path(old, k) != get_path(new, k) for k in keys):
            self._cluster_changed()

    def _clusterversion_updated(self, old: dict[str, Any], new: dict[str, Any]) -> None:
        # The gate itself is read live at every write (`upgrade_gate`); this only re-plans when the
        # gate opens or shuts, or the release changes, not on every progress message.
        desired = (old.get("status") or {}).get("desired") != (new.get("status") or {}).get("desired")
        if desired or (upgrade_blocker(old) is None) != (upgrade_blocker(new) is None):
            self._cluster_changed()

    def _holder_event(self, _obj: dict[str, Any]) -> None:
        self._enqueue(CLAIMS_KEY)

    def _holder_updated(self, old: dict[str, Any], new: dict[str, Any]) -> None:
        old_meta, new_meta = old.get("metadata") or {}, new.get("metadata") or {}
        if new_meta.get("deletionTimestamp") or old_meta.get("finalizers") != new_meta.get("finalizers"):
            self._enqueue(CLAIMS_KEY)

    def _holder_deleted(self, _obj: dict[str, Any]) -> None:
        # Patches held back while the old holder was being deleted go ahead now; the first one
        # creates a new holder.
        self.enqueue_all()

    def enqueue_all(self) -> None:
        for kind in (MACHINESET_KIND, CPMS_KIND, *CAPI_KINDS):
            for obj in self.informers[kind].list():
                self._enqueue(self.machine_key(obj))
        self._enqueue(STATUS_KEY)
        self._enqueue(CLAIMS_KEY)

    # ---- cluster-wide inputs --------------------------------------------------------------------------
    def upgrade_gate(self) -> UpgradeGateClosed | None:
        """None while boot images may be written; else why not. Read from the ClusterVersion as the
        watch has it now (not from the inputs parsed at the last change), at plan time and again
        when each patch is sent (a `write_preconditions` check)."""
        items = self.informers["clusterversion"].list()
        blocker = upgrade_blocker(items[0] if items else None)
        return None if blocker is None else UpgradeGateClosed(blocker)

    def cluster_objects(self) -> ClusterObjects:
        def one(name: str) -> dict[str, Any] | None:
            items = self.informers[name].list()
            return items[0] if items else None

        # Control-plane Nodes carry the master label, the control-plane label, or both.
        nodes = {
            (n.get("metadata") or {}).get("name"): n for read in NODE_READS for n in self.informers[read.role].list()
        }
        return ClusterObjects(
            bootimages=one("bootimages"),
            machine_configuration=one("machineconfiguration"),
            infrastructure=one("infrastructure"),
            cluster_version=one("clusterversion"),
            mco_operator=one("mco_operator"),
            feature_gate=one("feature_gate"),
            nodes=tuple(nodes.values()),
        )

    def inputs(self) -> ClusterInputs:
        if self._inputs is None:
            objects = self.cluster_objects()
            # The MachineSets are handed to the context (platform from their providerSpec kinds when
            # Infrastructure says none) but not kept: the inputs live until a cluster-wide change,
            # and holding the cache's objects of the moment would keep every replaced version of
            # every MachineSet alive after a pass (5,000 of them: +20 MiB).
            machines = tuple(o for read in MACHINE_READS for o in self.informers[read.role].list())
            try:
                ctx = planning_context(replace(objects, machines=machines), gitops_labels=self.options.gitops_labels)
                self._inputs = ClusterInputs(ctx, None, objects)
            except BootImageControllerError as exc:
                log.error("cannot plan: bad cluster input", error=str(exc))
                self._inputs = ClusterInputs(None, str(exc), objects)
        return self._inputs

    # ---- reconcile ------------------------------------------------------------------------------------
    async def reconcile(self, key: str) -> ReconcileResult:
        """Reconcile one key. Expected failures come back as a result, never as an exception."""
        result = await self._reconcile_guarded(key)
        if result.error is not None:
            obs.RECONCILE_ERRORS.labels(reason=result.reason or "Unknown").inc()
        return result

    async def _reconcile_guarded(self, key: str) -> ReconcileResult:
        try:
            return await self._reconcile(key)
        except NotLeader as exc:
            # The process is about to exit (the elector lost the Lease): nothing more to do here.
            log.info("write not sent: not the leader", key=key, why=str(exc))
            return DONE
        except (ApiError, ApiException) as exc:
            error = exc if isinstance(exc, ApiError) else ApiError.from_exception(key, exc)
            return ReconcileResult(error=f"{error.what}: {error.describe()}", reason=error.reason or f"HTTP{error.status}")

    async def _reconcile(self, key: str) -> ReconcileResult:
        if key == STATUS_KEY:
            self._report()
            return DONE
        if key == CLAIMS_KEY:
            return await self.reconcile_claims()
        kind, _, rest = key.partition("/")
        informer = self.informers.get(kind)
        obj = informer.get(rest) if informer is not None else None
        if obj is None:
            self.states.pop(key, None)
        elif _rv(obj) == self._superseded.get(key):
            # The cache still shows a version our own patch replaced: planning it would only send a
            # patch doomed to fail its resourceVersion test. The watch event of our write follows.
            pass
        else:
            await self.reconcile_object(key, obj)
        self._enqueue(STATUS_KEY)
        # The status key waits behind every MachineSet queued before it: during a long pass report
        # progress from here too, at most once per progress interval, counted from the first
        # reconcile (a short pass then writes its status once, at the end: a restart on a settled
        # fleet writes nothing, where a report at its first key showed a transient Progressing).
        if self._last_report == -math.inf:
            self._last_report = time.monotonic()
        if time.monotonic() - self._last_report >= max(self.options.progress_interval, REPORT_SPACING * self._report_cost):
            self._report()
        state = self.states.get(key)
        if state is not None and state.error is not None and state.error_reason in RETRIED_FAILURES:
            return ReconcileResult(error=state.error_text, reason=str(state.error_reason))  # retried with backoff
        return self._retry_outage(key, state)

    def _retry_outage(self, key: str, state: MachineSetState | None) -> ReconcileResult:
        """Plan again soon (5 s, doubling to 5 min) while the cloud or vCenter does not answer."""
        d = state.decision if state is not None else None
        if d is None or d.reason not in TRANSIENT_DECISIONS or d.manager is not Manager.OURS:
            self._outages.pop(key, None)
            return DONE
        tries = self._outages.get(key, 0)
        self._outages[key] = tries + 1
        return ReconcileResult(requeue_after=min(TRANSIENT_MAX_RETRY, TRANSIENT_FIRST_RETRY * 2**min(tries, 16)))

    def _report(self) -> None:
        """Recompute status from every outcome. It runs on the event loop, so mid-pass reports are
        spaced to at least REPORT_SPACING times their own cost."""
        started = time.monotonic()
        if self.on_pass is not None:
            self.on_pass(self)
        self._last_report = time.monotonic()
        self._report_cost = self._last_report - started

    def unplanned(self) -> list[tuple[str, str, str]]:
        """(kind, namespace, name) of the cached MachineSets not reconciled yet (pending in a pass)."""
        out = []
        for kind in (MACHINESET_KIND, CPMS_KIND, *CAPI_KINDS):
            for obj in self.informers[kind].list():
                if self.machine_key(obj) not in self.states:
                    meta = obj.get("metadata") or {}
                    out.append((kind, str(meta.get("namespace", "")), str(meta.get("name", ""))))
        return out

    async def reconcile_object(self, key: str, obj: dict[str, Any]) -> None:
        inputs = self.inputs()
        if inputs.context is None:
            return  # the status key reports the problem; nothing is written
        if self.upgrade_gate() is not None:
            return  # upgrade in progress or state unknown: the status key says why (SPEC section 3)
        started = time.monotonic()
        decision = await self.plan(obj, inputs.context)
        state = await self._act(key, obj, decision, inputs.context)
        previous = self.states.get(key)
        self.states[key] = state
        obs.RECONCILE_DURATION.observe(time.monotonic() - started)
        log.log(
            logging.DEBUG if _says_nothing_new(previous, state) else logging.INFO,
            "decision",
            namespace=decision.namespace,
            name=decision.name,
            kind=decision.kind,
            action=str(decision.action),
            reason=decision.reason,
            patched=state.patched,
            template_refreshed=state.refreshed.result if state.refreshed is not None else None,
            error=state.error,
            error_reason=state.error_reason,
        )
        self._emit_events(obj, previous, state)

    async def plan(self, obj: dict[str, Any], ctx: PlanningContext) -> BootImageDecision:
        """Plan offline; where the cloud can confirm the target or identify the current image, ask it
        and plan again with its answers (rule 9: never patch to an image the cloud does not have)."""
        decision = self._plan_offline(obj, ctx, ctx.facts)
        wants_cloud = decision.action is Action.PATCH or decision.reason == Reason.UNKNOWN_BOOT_IMAGE
        # vSphere: offline, every template is "unknown"; vCenter says what it holds.
        wants_cloud |= decision.reason == Reason.VCENTER_UNAVAILABLE and decision.template is not None
        if self.cloud is None or not wants_cloud:
            return decision
        answer = await self.cloud(decision)
        if answer is None:
            return decision
        facts = replace(ctx.facts, cloud=answer[0], cloud_platforms=answer[1])
        return self._plan_offline(obj, ctx, facts)

    def _plan_offline(self, obj: dict[str, Any], ctx: PlanningContext, facts: ClusterFacts) -> BootImageDecision:
        if capi_kind_key(obj) is None:
            return plan_machine(obj, ctx.golden, facts, ctx.enrollment)
        return plan_capi(obj, self._template_of(obj), ctx.golden, facts, ctx.enrollment,
                         mapi_authority=self._mapi_authority(obj))

    def _template_of(self, obj: Mapping[str, Any]) -> dict[str, Any] | None:
        """The infrastructure template a CAPI object names, from the watch cache."""
        ref = get_path(obj, INFRA_REF_PATH) or {}
        informer = self.informers.get(str(ref.get("kind"))) if isinstance(ref, Mapping) else None
        if informer is None or not isinstance(ref.get("name"), str):
            return None
        return informer.get(f"{(obj.get('metadata') or {}).get('namespace', '')}/{ref['name']}")

    def _mapi_authority(self, obj: Mapping[str, Any]) -> str | None:
        """For a CAPI MachineSet: the authoritativeAPI of the Machine API MachineSet of the same
        name ("" when it has none), None when there is no such MachineSet."""
        if obj.get("kind") != MACHINESET_KIND:
            return None
        twin = self.informers[MACHINESET_KIND].get(f"{MAPI_NAMESPACE}/{(obj.get('metadata') or {}).get('name', '')}")
        return None if twin is None else (authoritative_api(twin) or "")

    async def _act(
        self, key: str, obj: dict[str, Any], decision: BootImageDecision, ctx: PlanningContext
    ) -> MachineSetState:
        if decision.action is Action.SKIP and decision.reason in (Reason.NOT_ENROLLED, Reason.NOT_AUTHORITATIVE):
            # Opting out is also how an admin ends a hot loop: forget our counts (with the claim,
            # when it left enrollment). A pool that moved to the other API starts afresh there.
            uid = str((obj.get("metadata") or {}).get("uid", ""))
            self._hot_loops.pop(uid, None)
            await self._forget_kept_hot_loops([uid], self._writer_for(obj))
            if decision.reason == Reason.NOT_ENROLLED:
                await self._release_if_claimed(obj, ctx)
            return MachineSetState(decision)
        self._claim_hold(key, decision, ctx)
        if decision.manager is not Manager.OURS:
            return self._delegated(key, decision)
        self.disagreements.forget(key)
        if self.options.dry_run or not self.is_leader():
            return MachineSetState(decision)
        if decision.taken_from_mco and decision.action in (Action.NOOP, Action.SKIP) and not _claimed(obj):
            # Handed over from the MCO: claim it now, so the MCO leaves it alone before the next
            # golden data change rather than racing us to it (a broken object is never written).
            await self._claim_from_mco(obj)
            return MachineSetState(decision)
        if decision.action is not Action.PATCH:
            return MachineSetState(decision)
        refresh = decision.template.refresh if decision.template is not None else None
        if refresh is not None:
            built = await self._refresh_template(key, obj, decision, refresh)
            if built.refreshed is None or not decision.changes:
                return built  # failed, skipped, or nothing to patch (the template kept its name)
        for _ in range(MAX_CONFLICT_REPLANS):
            try:
                state, fresh = await self._patch_once(obj, decision)
            except UpgradeGateClosed as exc:
                # The ClusterVersion changed while the patch waited to be sent: nothing was written.
                log.info("boot image patch not sent: upgrade gate closed", key=key, why=str(exc))
                return MachineSetState(decision)
            except ApiError as exc:
                return MachineSetState.failed(decision, Reason.PATCH_FAILED, exc.describe())
            if fresh is None:
                return state
            # Someone wrote between our read and our patch: re-read and re-plan (never overwrite).
            obj = fresh
            decision = await self.plan(obj, ctx)
            if decision.action is not Action.PATCH:
                return MachineSetState(decision)
        return MachineSetState.failed(
            decision, Reason.PATCH_FAILED, "kept conflicting with other writers; will retry on their next change"
        )

    def _delegated(self, key: str, decision: BootImageDecision) -> MachineSetState:
        """Another manager's MachineSet: nothing is written (SPEC rule 2b). GitOps gets a proposal
        (an Event, `_event_for`); an MCO-managed one is compared with our target once the MCO says
        its pass is done, and a disagreement that outlasts the grace is reported."""
        if decision.manager is not Manager.MCO:
            self.disagreements.forget(key)
            return MachineSetState(decision)
        # From the watch as it is now: the parsed inputs are rebuilt on spec changes only.
        found_mc = self.informers["machineconfiguration"].list()
        mco_pass = McoPass.from_machine_configuration(found_mc[0] if found_mc else None)
        found = self.disagreements.observe(key, decision, mco_pass, time.monotonic())
        if found is not None and not found.lasting:
            self._enqueue_after(key, found.wait)  # looked at again when the grace is over
        return MachineSetState(decision, disagreement=found)

    def _claim_hold(self, key: str, decision: BootImageDecision, ctx: PlanningContext) -> None:
        """Keep why claiming this MachineSet makes the MCO hold upgrades (dropped when it does not),
        for the Warning before the claim and our ClusterOperator's Upgradeable message after it."""
        if not decision.taken_from_mco:
            self.claim_warnings.pop(key, None)
            return
        objects = self.inputs().objects
        warning = claim_hold_warning(
            decision, ctx.facts.managers.mco, objects.machine_configuration,
            install_version_from_cluster_version(objects.cluster_version),
            self._boot_images_after(key, decision), self.options.skew_limits,
        )
        if warning is None:
            self.claim_warnings.pop(key, None)
        else:
            self.claim_warnings[key] = warning.message

    def _boot_images_after(self, key: str, decision: BootImageDecision) -> list[BootImageRelease]:
        """Every known MachineSet's boot image once this patch is written (for the Manual value)."""
        objects = self.inputs().objects
        aleph = min_aleph((n.get("metadata") or {}).get("annotations") or {} for n in objects.nodes)
        install = install_version_from_cluster_version(objects.cluster_version)
        out = []
        if decision.target_release:
            out.append(BootImageRelease.rhcos(decision.target_release, ReleaseSource.GOLDEN_DATA))
        for other_key, state in self.states.items():
            d = state.decision
            if other_key == key:
                continue
            if state.updated and d.target_release:
                out.append(BootImageRelease.rhcos(d.target_release, ReleaseSource.MACHINESET_RECORD))
                continue
            kind, _, rest = other_key.partition("/")
            cached = self.informers[kind].get(rest) if kind in self.informers else None
            found = machineset_boot_image(((cached or {}).get("metadata") or {}).get("annotations") or {},
                                          d.current_release, d.current_release_source, aleph, install)
            if found is not None:
                out.append(found)
        return out

    async def _refresh_template(
        self, key: str, obj: dict[str, Any], decision: BootImageDecision, work: TemplateRefresh
    ) -> MachineSetState:
        """vSphere: build or replace the template in vCenter, stub Ignition first (as before any
        patch). Every vCenter write is fenced like a Kubernetes write (`_vcenter_guard`)."""
        if self.templates is None:
            return MachineSetState(decision)
        if self.before_patch is not None:
            refusal = await self.before_patch(MachineResource.from_object(obj))
            if refusal is not None:
                return MachineSetState.failed(decision, refusal.reason, refusal.message)
        try:
            outcome = await self.templates(work, self._vcenter_guard)
        except UpgradeGateClosed as exc:
            log.info("template refresh stopped: upgrade gate closed", key=key, why=str(exc))
            return MachineSetState(decision)
        except OvaError as exc:
            if exc.reason is Reason.OVA_UNAVAILABLE:
                return MachineSetState(replace(decision, action=Action.SKIP, reason=exc.reason, message=f"{decision.message}: {exc}"))
            return MachineSetState.failed(decision, exc.reason, str(exc))
        except VCenterError as exc:
            return MachineSetState.failed(decision, Reason.TEMPLATE_REFRESH_FAILED, f"template {work.name}: {exc}")
        # The template now holds the target: what this MachineSet boots from here on (skew reads
        # it; no watch event will re-plan it, the MachineSet itself did not change).
        done = replace(decision, current=decision.target, current_release=decision.target_release,
                       current_release_source=str(ReleaseSource.CLOUD))
        return MachineSetState(done, refreshed=outcome)

    def _vcenter_guard(self) -> None:
        """Raise `WriteRefused` when a vCenter write must not be sent now: the same checks as a
        boot image patch (the Lease, via the client's fence, and the upgrade gate)."""
        fence = getattr(self.api_client, "fence", None)
        refusal: WriteRefused | None = fence.refusal("vsphere-templates") if fence is not None else None
        if refusal is None and not self.is_leader():
            refusal = NotLeader("not the leader")
        refusal = refusal or self.upgrade_gate()
        if refusal is not None:
            raise refusal

    def _writer_for(self, obj: Mapping[str, Any]) -> MachineSetWriter:
        """The writer of the object's API: each claims with the holder in its own namespace."""
        return self.capi_writer if capi_kind_key(obj) is not None else self.writer

    def _holder_role(self, writer: MachineSetWriter) -> str:
        return CAPI_HOLDER if writer is self.capi_writer else "holder"

    async def _patch_once(
        self, obj: dict[str, Any], decision: BootImageDecision
    ) -> tuple[MachineSetState, dict[str, Any] | None]:
        writer = self._writer_for(obj)
        role = self._holder_role(writer)
        resource: MachineResource | CapiObject = (
            CapiObject.from_object(obj) if writer is self.capi_writer else MachineResource.from_object(obj)
        )
        hot = hot_loop_check(
            resource.annotations, decision, self._hot_loops.get(resource.uid), self._kept_hot_loop(resource.uid, role)
        )
        if hot is None:
            message = (
                f"refusing to write the same boot image a 4th time: something keeps reverting "
                f"{resource.display}; opt it out, fix the other writer, then remove annotation "
                f"{ANNOTATION_HOT_LOOP} and opt it back in"
            )
            obs.PATCHES.labels(result="hot_loop").inc()
            return MachineSetState.failed(decision, Reason.HOT_LOOP, message), None
        if self.before_patch is not None and isinstance(resource, MachineResource):
            refusal = await self.before_patch(resource)
            if refusal is not None:
                obs.PATCHES.labels(result="blocked").inc()
                return MachineSetState.failed(decision, refusal.reason, refusal.message), None
        if not any(is_our_owner_reference(o.api_version, o.kind, o.name) for o in resource.owner_references):
            await self._warn_before_claim(obj)
        if decision.capi is not None:
            # The new template first: the patch that points at it may only go once it exists.
            with write_preconditions(self.upgrade_gate):
                await writer.create_template(decision.capi.new_template)
        async with self.claims_gate.claiming():
            holder = self._cached_holder(role) or await writer.ensure_holder()
            if holder.deleting:
                # Claims are being released: not an error. This MachineSet is patched (and claimed
                # under a new holder) once the old holder is gone (`_holder_deleted`).
                self._enqueue(CLAIMS_KEY)
                return MachineSetState(decision), None
            if hot.count > 1:
                # A repeat: some other writer reverted us. Count it where no writer of the
                # MachineSet can erase it, before the patch goes (a crash between the two then
                # over-counts by one, never under-counts).
                await writer.keep_hot_loop({hot_loop_key(resource.uid): hot.to_annotation()})
            annotations = record_annotations(decision, hot, now_utc())
            with write_preconditions(self.upgrade_gate):
                result = await writer.patch_boot_image(obj, decision, annotations, holder)
        obs.PATCHES.labels(result=result.value).inc()
        if result is WriteResult.APPLIED:
            self._hot_loops[resource.uid] = hot
            self._superseded[self.machine_key(obj)] = resource.resource_version
            if decision.capi is not None:
                await self._retire_template_quietly(decision.capi)
            return MachineSetState(decision, patched=True), None
        if result is WriteResult.CONFLICT:
            fresh = await self._read_fresh(writer, obj)
            if fresh is not None:
                return MachineSetState(decision), fresh
            return MachineSetState(decision), None
        return MachineSetState(decision), None  # GONE: deleted meanwhile

    async def _claim_from_mco(self, obj: dict[str, Any]) -> None:
        await self._warn_before_claim(obj)
        async with self.claims_gate.claiming():
            holder = self._cached_holder() or await self.writer.ensure_holder()
            if holder.deleting:
                self._enqueue(CLAIMS_KEY)  # claimed under the next holder
                return
            try:
                with write_preconditions(self.upgrade_gate):
                    result = await self.writer.claim(obj, holder)
            except UpgradeGateClosed as exc:
                log.info("claim not sent: upgrade gate closed", key=self.machine_key(obj), why=str(exc))
                return
        log.info("claimed a MachineSet handed over from the Machine Config Operator", key=self.machine_key(obj),
                 result=result.value)

    async def _warn_before_claim(self, obj: Mapping[str, Any]) -> None:
        """The admin hears that the MCO will hold upgrades before the claim is written, not after:
        the Warning is written (awaited) first, and our ClusterOperator's message follows."""
        key = self.machine_key(obj)
        message = self.claim_warnings.get(key)
        if message is None or self.events is None:
            return
        log.warning("claim makes the Machine Config Operator hold upgrades", key=key, message=message)
        await self.events.recorder.emit(_involved(obj), EVENT_TYPE_WARNING, EVENT_CLAIM_HOLDS_UPGRADES, message)

    @staticmethod
    async def _read_fresh(writer: MachineSetWriter, obj: Mapping[str, Any]) -> dict[str, Any] | None:
        """The object as the API server has it now (None: gone)."""
        meta = obj.get("metadata") or {}
        namespace, name = str(meta.get("namespace", "")), str(meta.get("name", ""))
        capi = capi_kind_key(obj)
        if capi is None:
            return await writer.get(str(obj.get("kind", MACHINESET_KIND)), namespace, name)
        return await writer.get(capi, namespace, name, str(obj.get("apiVersion") or "").partition("/")[2] or None)

    async def _retire_template_quietly(self, work: CapiWork) -> None:
        """The patch is written: a cleanup that fails now is retried after the next update."""
        try:
            await self._retire_template(work)
        except (ApiError, ApiException) as exc:
            log.warning("old infrastructure template not deleted; tried again after the next update",
                        kind=work.template_kind, namespace=work.namespace, error=str(exc))

    async def _retire_template(self, work: CapiWork) -> None:
        """After a successful CAPI update: the template two generations old (the one the previous
        template replaced, when this controller wrote that one) goes, once nothing references it.
        Exactly one previous template is kept, for rollback."""
        old = self.informers[work.template_kind].get(f"{work.namespace}/{work.old_name}")
        retire = ((old or {}).get("metadata") or {}).get("annotations", {}).get(ANNOTATION_REPLACES)
        if not retire or retire in (work.old_name, work.new_name):
            return
        target = self.informers[work.template_kind].get(f"{work.namespace}/{retire}")
        if target is None:
            return
        # A live list, not the cache: a reference written a moment ago must keep the template.
        for obj in await fresh_capi(self.custom, self.capi_version):
            ref = get_path(obj, INFRA_REF_PATH) or {}
            if ref.get("kind") == work.template_kind and ref.get("name") == retire:
                return
        meta = target.get("metadata") or {}
        with write_preconditions(self.upgrade_gate):
            await self.capi_writer.delete_template(work.template_kind, str(target.get("apiVersion")), work.namespace,
                                                   retire, str(meta.get("uid", "")))

    def _holder_object(self, role: str = "holder") -> dict[str, Any] | None:
        """A claim holder ConfigMap as the watch cache has it (None: there is none)."""
        items = self.informers[role].list()
        return items[0] if items else None

    def _kept_hot_loop(self, uid: str, role: str = "holder") -> HotLoopRecord | None:
        """The hot-loop count the claim holder keeps for this MachineSet (watch cache)."""
        data = (self._holder_object(role) or {}).get("data") or {}
        return HotLoopRecord.from_annotation(data.get(hot_loop_key(uid)))

    def _cached_holder(self, role: str = "holder") -> Holder | None:
        """The holder as the watch cache has it, when usable as is: finalizer on, not being deleted.

        This saves a read per patch and is safe: the finalizer only goes in a release, which runs
        under the claims gate on a live list, so a claim written on a stale view of the holder is
        released with the rest (and when `release-claims` removed it by hand, `reconcile_claims`
        puts it back for claims written meanwhile). Anything else takes the live path.
        """
        meta = (self._holder_object(role) or {}).get("metadata") or {}
        if not meta.get("uid") or meta.get("deletionTimestamp") or CLAIM_FINALIZER not in (meta.get("finalizers") or []):
            return None
        return Holder(str(meta["uid"]), deleting=False)

    async def _forget_kept_hot_loops(self, uids: list[str], writer: MachineSetWriter | None = None) -> None:
        """Drop the holder's counts for these MachineSets (opted out, or gone), if it has any."""
        if self.options.dry_run or not self.is_leader():
            return
        writer = writer or self.writer
        stale = [uid for uid in uids if self._kept_hot_loop(uid, self._holder_role(writer)) is not None]
        if stale:
            await writer.keep_hot_loop(dict.fromkeys((hot_loop_key(uid) for uid in stale), None))

    async def _release_if_claimed(self, obj: dict[str, Any], ctx: PlanningContext) -> None:
        """A MachineSet left enrollment: remove our owner reference (and nothing else)."""
        if self.options.dry_run or not self.is_leader():
            return
        for _ in range(MAX_CONFLICT_REPLANS):
            if not _claimed(obj):
                return
            writer = self._writer_for(obj)
            result = await writer.release(obj)  # ApiError: the key's result says it, retried
            if result in (WriteResult.APPLIED, WriteResult.GONE):
                log.info("claim released", key=self.machine_key(obj), result=result.value)
                self._enqueue(CLAIMS_KEY)
                return
            # A conflict: the cache was stale or someone wrote meanwhile. Release only what is
            # still out of enrollment on a fresh read (a status-only change never re-queues us).
            fresh = await self._read_fresh(writer, obj)
            if fresh is None:
                return
            obj = fresh
            if (await self.plan(obj, ctx)).reason != Reason.NOT_ENROLLED:
                return
        raise ApiError(f"release claim on {self.machine_key(obj)}", 409, "Conflict", "kept conflicting with other writers")

    async def reconcile_claims(self) -> ReconcileResult:
        """For each claim holder (the Machine API's, the Cluster API's): being deleted, release every
        claim, then drop its finalizer. Otherwise make sure the finalizer is there while any claim
        exists (someone may have removed it by hand)."""
        if self.options.dry_run or not self.is_leader():
            return DONE
        scopes = (
            (self.writer, "holder", lambda: fresh_machines(self.custom), MACHINE_READS),
            (self.capi_writer, CAPI_HOLDER, lambda: fresh_capi(self.custom, self.capi_version), CAPI_READS),
        )
        for writer, role, listing, reads in scopes:
            result = await self._reconcile_holder(writer, role, listing, reads)
            if result.error is not None:
                return result
        return DONE

    async def _reconcile_holder(
        self, writer: MachineSetWriter, role: str, listing: Callable[[], Awaitable[list[dict[str, Any]]]],
        reads: tuple[ClusterRead, ...],
    ) -> ReconcileResult:
        holder = self._holder_object(role)
        if holder is None:
            return DONE
        meta = holder.get("metadata") or {}
        if meta.get("deletionTimestamp"):
            async with self.claims_gate.releasing():
                if not await release_all_claims(writer, listing):
                    return ReconcileResult(error="claims remain while the holder is being deleted; retrying",
                                           reason="ClaimsRemain")
            log.info("every claim released; the claim holder can go", holder=role)
            return DONE
        if CLAIM_FINALIZER not in (meta.get("finalizers") or []) and any(_claimed(o) for o in await listing()):
            await writer.ensure_holder()  # restores the finalizer
        # Hot-loop counts of MachineSets that are gone (their delete re-queued this key).
        known = {str((o.get("metadata") or {}).get("uid", "")) for read in reads for o in self.informers[read.role].list()}
        kept = [k.removeprefix(HOT_LOOP_KEY_PREFIX) for k in (holder.get("data") or {}) if k.startswith(HOT_LOOP_KEY_PREFIX)]
        await self._forget_kept_hot_loops([uid for uid in kept if uid not in known], writer)
        return DONE

    def _emit_events(self, obj: dict[str, Any], previous: MachineSetState | None, state: MachineSetState) -> None:
        """Hand this outcome's event (if it has one) to the event lane, which writes it in the
        background: events are reports, and a worker should not wait for the API server to store
        one before it reconciles the next MachineSet."""
        if self.events is None or self.options.dry_run or not self.is_leader():
            return
        event = _event_for(previous, state)
        if event is not None:
            self.events.post(_involved(obj), *event)
        if event is not None and state.refreshed is not None and state.refreshed.result != "current":
            self._tell_template_sharers(obj, state, event)

    def _tell_template_sharers(self, obj: Mapping[str, Any], state: MachineSetState, event: tuple[str, str, str]) -> None:
        """vSphere: the other MachineSets that boot the replaced template get the Event too (they
        were not written, and their next decision is a quiet no-op)."""
        work = state.decision.template
        assert work is not None and state.refreshed is not None
        me = self.machine_key(obj)
        for key, other in self.states.items():
            theirs = other.decision.template
            if key == me or theirs is None or theirs.placement.server != work.placement.server:
                continue
            if theirs.placement.datacenter == work.placement.datacenter and state.refreshed.name in theirs.names:
                kind, _, rest = key.partition("/")
                shared = self.informers[kind].get(rest) if kind in self.informers else None
                if shared is not None:
                    assert self.events is not None
                    self.events.post(_involved(shared), *event)

    def event_summary_target(self) -> _InvolvedObject | None:
        """The object summary Events go on (events.EventLane): our claim holder, in the MachineSets'
        namespace, where the Events RBAC allows and an admin looks; None while there is none."""
        holder = self._holder_object()
        return _involved({"apiVersion": "v1", "kind": "ConfigMap", **holder}) if holder is not None else None

    async def flush_events(self, timeout: float = 30.0) -> None:
        """Write (bounded) the events still pending, before exiting."""
        if self.events is not None:
            await self.events.flush(timeout)


def _says_nothing_new(previous: MachineSetState | None, state: MachineSetState) -> bool:
    """A decision worth only a debug line: the same outcome again (a resync, an unrelated edit),
    or the no-op that follows our own patch (the patch's line said it all)."""
    if previous is None or state.updated:
        return False
    d, p = state.decision, previous.decision
    same = (d.action, d.reason, state.error) == (p.action, p.reason, previous.error)
    return same or (previous.patched and d.action is Action.NOOP)


def _event_for(previous: MachineSetState | None, state: MachineSetState) -> tuple[str, str, str] | None:
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
        return _companion_event(previous, state)
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


def _companion_event(previous: MachineSetState | None, state: MachineSetState) -> tuple[str, str, str] | None:
    """Another manager's MachineSet: a GitOps one gets the patch we would send, once per target; an
    MCO one a Warning when a disagreement becomes lasting. Its skips and errors are that manager's
    to report, not ours."""
    d, before = state.decision, previous.decision if previous is not None else None
    if d.manager is Manager.GITOPS and d.action is Action.PATCH:
        if before is None or (before.manager, before.action, before.target) != (d.manager, d.action, d.target):
            return EVENT_TYPE_NORMAL, EVENT_PROPOSED, proposal_message(d)
        return None
    found = state.disagreement
    if found is not None and found.lasting:
        was = previous.disagreement if previous is not None else None
        if was is None or not was.lasting or (before is not None and before.target != d.target):
            return EVENT_TYPE_WARNING, EVENT_DISAGREEMENT, found.message
    return None


async def fresh_machines(custom: Any) -> list[dict[str, Any]]:
    """Live lists (not a cache) of MachineSets and ControlPlaneMachineSets, for claim decisions: a
    stale cache must not let the garbage collector see a reference whose owner is gone."""
    ms = await custom.list_namespaced_custom_object(
        MACHINE_API_GROUP, MACHINESET_VERSION, MAPI_NAMESPACE, MACHINESET_PLURAL
    )
    try:
        # By name: the only ControlPlaneMachineSet is `cluster`, and RBAC grants list by that name only.
        cp = await custom.list_namespaced_custom_object(
            MACHINE_API_GROUP, CPMS_VERSION, MAPI_NAMESPACE, CPMS_PLURAL, field_selector=f"metadata.name={CPMS_NAME}"
        )
    except ApiException as exc:
        if exc.status != 404:  # no ControlPlaneMachineSet CRD on this cluster
            raise
        cp = {}
    return list(ms.get("items", [])) + list(cp.get("items", []))


async def fresh_capi(custom: Any, version: str) -> list[dict[str, Any]]:
    """Live lists of the Cluster API's MachineSets and MachineDeployments (none without the CRDs)."""
    out: list[dict[str, Any]] = []
    for plural in CAPI_KINDS.values():
        try:
            found = await custom.list_namespaced_custom_object(CAPI_GROUP, version, CAPI_NAMESPACE, plural)
        except ApiException as exc:
            if exc.status != 404:
                raise
            continue
        out.extend(found.get("items", []))
    return out


async def release_all_claims(
    writer: MachineSetWriter, list_machines: Callable[[], Awaitable[list[dict[str, Any]]]], attempts: int = 5
) -> bool:
    """Remove our owner reference from every MachineSet, then (only when a fresh list shows none
    left) the holder's finalizer. False when claims kept changing under us: call again."""
    for _ in range(attempts):
        claimed = [m for m in await list_machines() if _claimed(m)]
        if not claimed:
            if await writer.remove_holder_finalizer():
                return True
            continue
        for obj in claimed:
            result = await writer.release(obj)  # a conflict is retried on the next fresh list
            log.info("claim released", name=(obj.get("metadata") or {}).get("name"), result=result.value)
    return False


def relevant_view(obj: Mapping[str, Any]) -> tuple[Any, ...]:
    meta = obj.get("metadata") or {}
    spec = obj.get("spec") or {}
    template = spec.get("template") or {}
    if capi_kind_key(obj) is not None:
        # The template it names, its failure domain, and (MachineDeployments) the rollout's progress.
        inner = template.get("spec") or {}
        rollout = (meta.get("generation"), obj.get("status"))
        return (meta.get("labels"), meta.get("annotations"), meta.get("ownerReferences"),
                inner.get("infrastructureRef"), inner.get("failureDomain"), template.get("metadata"), rollout)
    provider = (
        ((template.get("machines_v1beta1_machine_openshift_io") or {}).get("spec") or {}).get("providerSpec")
        if obj.get("kind") == CPMS_KIND
        else (template.get("spec") or {}).get("providerSpec")
    )
    return (meta.get("labels"), meta.get("annotations"), meta.get("ownerReferences"), provider, template.get("metadata"),
            authoritative_api(obj))


def _rv(obj: Mapping[str, Any]) -> Any:
    return (obj.get("metadata") or {}).get("resourceVersion")


def _claimed(obj: Mapping[str, Any]) -> bool:
    return any(is_our_reference(r) for r in (obj.get("metadata") or {}).get("ownerReferences") or [])


@dataclass(frozen=True)
class _InvolvedObject:
    kind: str
    namespace: str
    name: str
    uid: str
    api_version: str = field(default=f"{MACHINE_API_GROUP}/{MACHINESET_VERSION}")


def _involved(obj: Mapping[str, Any]) -> _InvolvedObject:
    meta = obj.get("metadata") or {}
    return _InvolvedObject(
        kind=str(obj.get("kind", MACHINESET_KIND)),
        namespace=str(meta.get("namespace", "")),
        name=str(meta.get("name", "")),
        uid=str(meta.get("uid", "")),
        api_version=str(obj.get("apiVersion", f"{MACHINE_API_GROUP}/{MACHINESET_VERSION}")),
    )


__all__ = [
    "ClaimGate",
    "Controller",
    "ControllerOptions",
    "Holder",
    "MachineSetState",
    "fresh_machines",
    "release_all_claims",
]


def _list_watch(api: Any, read: ClusterRead) -> ListWatch:
    """The informer's list/watch for one row of `CLUSTER_READS`."""
    if read.kind == "ConfigMap":
        assert read.namespace is not None
        return ListWatch.config_maps(api, read.namespace, name=read.name)
    if read.kind == "Node":
        return ListWatch.nodes(api, label_selector=read.label_selector)
    # absent_ok (above): a cluster without one of these CRDs (e.g. no ControlPlaneMachineSet) must
    # not keep the daemon unready forever; the kind simply has no objects.
    return ListWatch.custom_objects(
        api, read.group, read.version, read.plural, read.namespace, name=read.name, label_selector=read.label_selector
    )
