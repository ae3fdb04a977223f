"""`bootimage-controller run`, `release-claims` and `rollback`: wiring, start-up and shutdown.

Every replica runs the informers (followers keep warm caches); only the leader runs the workers
and writes. SIGTERM stops the workers, flushes the last status, releases the Lease so a follower
takes over at once, and exits 0.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import gc
import math
import signal
import time
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any, cast

import structlog
from kubernetes_asyncio.client import CoreV1Api, CustomObjectsApi
from kubernetes_asyncio.client.exceptions import ApiException

from . import observability as obs

# The cloud and stub-Ignition modules import no SDK (each cloud SDK is imported only when its
# credentials exist, see cloud.verifier); imported here, not in the first reconcile, they do not
# delay the first patch.
from .cloud.queries import image_queries, verify_decisions
from .cloud.verifier import CloudVerifier
from .cluster import control_plane_topology
from .constants import (
    AWS_CREDENTIALS_SECRET,
    AZURE_CREDENTIALS_SECRET,
    CO_PROGRESSING,
    CONDITION_DEGRADED,
    CONDITION_PROGRESSING,
    CONFIG_GROUP,
    CONFIG_VERSION,
    CPMS_KIND,
    GCP_CREDENTIALS_SECRET,
    INFRASTRUCTURE_NAME,
    INFRASTRUCTURE_PLURAL,
    MAPI_NAMESPACE,
    SINGLE_REPLICA_TOPOLOGY,
    Action,
    ConditionReason,
    Platform,
    Reason,
    SkewMode,
)
from .controller import CLAIMS_KEY, Controller, ControllerOptions, MachineSetState, Refusal
from .errors import BootImageControllerError
from .events import EventLane, EventRecorder
from .kube.client import ClientConfigError, current_namespace, make_api_client
from .kube.fence import WriteFence
from .kube.leader import (
    OPENSHIFT_TIMINGS,
    SINGLE_NODE_TIMINGS,
    AlwaysLeader,
    Elector,
    LeaderElector,
    LeadershipLost,
    LeaseHeldElsewhere,
    LeaseTimings,
    default_identity,
)
from .kube.retry import describe, is_retryable, with_retries
from .kube.workqueue import WorkQueue, run_workers
from .model import MachineResource
from .skew.assess import PassResult, assess_skew
from .skew.verdict import SkewLimits, SkewVerdict
from .status import (
    ClusterOperatorStatus,
    Outcome,
    PassSummary,
    Result,
    StatusWriter,
    degraded_condition,
    find_condition,
    progressing_condition,
)
from .stub_ignition import StubOutcome, ensure_stub_ignition_v3
from .supervision import Supervisor

log = structlog.get_logger(__name__)

SYNC_TIMEOUT = 120.0
# On SIGTERM the leader drains its queue and writes its last status and events within this.
SHUTDOWN_GRACE = 20.0
EVENT_FLUSH_MIN = 30.0


def run_daemon(args: argparse.Namespace) -> int:
    # Everything allocated so far (the interpreter, ~80 MB of imports, the flags) lives as long as
    # the process: out of the cyclic GC's sight, a full collection walks the caches only. In a
    # 1,000-MachineSet pass, full collections went from 0.10 s to 0.02 s of CPU.
    gc.freeze()
    try:
        return asyncio.run(_run(args))
    except ClientConfigError as exc:
        print(f"error: {exc}")
        return 1


# The ClusterOperator shows Progressing=True only for a pass longer than this, and then refreshes
# its counts this often; the MachineConfiguration carries the live counts (SPEC section 3).
CO_PROGRESS_INTERVAL = 10.0


class PassReporter:
    """Recomputes conditions, skew and metrics from every MachineSet's last outcome."""

    def __init__(self, writer: StatusWriter | None, limits: SkewLimits, *, clock: Any = time.monotonic) -> None:
        self.writer = writer
        self.limits = limits
        self.summary: PassSummary = PassSummary()
        self.verdict: SkewVerdict | None = None
        self._clock = clock
        self._co_shape: tuple[tuple[str, str, str], ...] | None = None
        self._co_offered_at = -math.inf
        self._progress_since: float | None = None

    def __call__(self, controller: Controller) -> None:
        now = datetime.now(UTC)
        inputs = controller.inputs()
        states = list(controller.states.values())
        unplanned = controller.unplanned()
        self.summary = self._summary(controller, states, unplanned)
        mc = inputs.objects.machine_configuration
        previous = ((mc or {}).get("status") or {}).get("conditions") or []
        progressing = progressing_condition(self.summary, now, find_condition(previous, CONDITION_PROGRESSING))
        degraded = degraded_condition(self.summary, now, find_condition(previous, CONDITION_DEGRADED))
        skew_status = self._skew(controller, states, complete=not unplanned)
        self._metrics(states)
        if self.writer is None:
            return
        self.writer.set_machineconfiguration([progressing, degraded], skew_status)
        co = ClusterOperatorStatus.build(
            synced=controller.synced(),
            progressing=progressing,
            degraded=degraded,
            verdict=self.verdict,
            now=now,
        )
        if self._co_due(co):
            self.writer.set_cluster_operator(co)

    def _co_due(self, co: ClusterOperatorStatus) -> bool:
        """Whether to hand this ClusterOperator status to the writer now.

        Settled states (and a change of Available, Degraded or Upgradeable) at once; while a pass
        progresses, nothing for its first CO_PROGRESS_INTERVAL seconds (a short pass does not flap
        Progressing, as the cluster-version operator's monitors expect) and then the counts every
        CO_PROGRESS_INTERVAL seconds. A long pass thus writes the MachineConfiguration about once a
        second and the ClusterOperator rarely, not both every second.
        """
        now = self._clock()
        others = tuple((c.type, c.status, c.reason) for c in co.conditions if c.type != CO_PROGRESSING)
        progressing = co.condition(CO_PROGRESSING)
        if progressing is None or progressing.status != "True":
            self._progress_since = None
        elif self._progress_since is None:
            self._progress_since = now
        if self._progress_since is not None:
            if self._co_shape is None:
                self._co_shape = others  # the first report: a baseline to tell changes from
            changed = others != self._co_shape
            long_pass = now - self._progress_since >= CO_PROGRESS_INTERVAL
            if not changed and not (long_pass and now - self._co_offered_at >= CO_PROGRESS_INTERVAL):
                return False
        self._co_shape, self._co_offered_at = others, now
        return True

    def _summary(
        self, controller: Controller, states: list[MachineSetState], unplanned: list[tuple[str, str, str]]
    ) -> PassSummary:
        inputs = controller.inputs()
        if inputs.problem is not None:
            return PassSummary.blocked(ConditionReason.BOOT_IMAGES_CONFIGMAP_INVALID, inputs.problem, degrading=True)
        gate = controller.upgrade_gate()
        if gate is not None:
            return PassSummary.blocked(ConditionReason.CLUSTER_NOT_STABLE, str(gate), degrading=False)
        outcomes = [Outcome.from_decision(s.decision, patched=s.patched, error=s.error_text) for s in states]
        # Not reconciled yet in this pass: pending, so the counts cover the whole fleet mid-pass.
        outcomes += [Outcome(kind, namespace, name, Result.PENDING) for kind, namespace, name in unplanned]
        return PassSummary.from_outcomes(outcomes)

    def _skew(self, controller: Controller, states: list[MachineSetState], *, complete: bool) -> dict[str, Any] | None:
        inputs = controller.inputs()
        if inputs.context is None:
            self.verdict = None
            return None
        machines = [
            (s.decision, controller.informers[s.decision.kind].get(f"{s.decision.namespace}/{s.decision.name}"))
            for s in states
        ]
        try:
            assessment = assess_skew(
                inputs.objects,
                inputs.context.enrollment,
                machines,
                self.limits,
                degraded=self.summary.degraded,
                degraded_message=self.summary.degraded_message(),
                golden=inputs.context.golden,
                facts=inputs.context.facts,
                after_pass=_pass_result(states) if complete else None,
            )
        except BootImageControllerError as exc:
            log.error("skew enforcement setting is invalid", error=str(exc))
            self.verdict = None
            return None
        self.verdict = assessment.verdict
        obs.SKEW_UPGRADEABLE.set(1 if assessment.verdict.upgradeable else 0)
        obs.SKEW_ENFORCEMENT_NONE.set(1 if assessment.verdict.mode is SkewMode.NONE else 0)
        image = assessment.verdict.cluster_boot_image
        if image is not None:
            obs.set_cluster_boot_image(image.value, str(image.source))
        previous = ((inputs.objects.machine_configuration or {}).get("status") or {}).get(
            "bootImageSkewEnforcementStatus"
        )
        patch = assessment.status.to_merge_patch(previous)
        if patch is None:
            log.debug("skew status not written: its record is unknown", explanation=assessment.status.explanation)
        return patch

    def _metrics(self, states: list[MachineSetState]) -> None:
        counts: dict[tuple[str, str], int] = {}
        for s in states:
            action = "error" if s.error else str(s.decision.action)
            reason = (s.error_reason or Reason.PATCH_FAILED) if s.error else s.decision.reason
            counts[(action, str(reason))] = counts.get((action, str(reason)), 0) + 1
        obs.MACHINESETS.clear()
        for (action, reason), n in counts.items():
            obs.MACHINESETS.labels(action=action, reason=reason).set(n)


def _pass_result(states: list[MachineSetState]) -> PassResult | None:
    """A finished pass (nothing left to patch) moves the Automatic record; otherwise keep it."""
    machinesets = [s for s in states if s.decision.kind != CPMS_KIND]
    if any(s.decision.action is Action.PATCH and not s.patched and s.error is None for s in machinesets):
        return None
    skipped = sum(1 for s in machinesets if s.decision.action is Action.SKIP and s.decision.reason != Reason.NOT_ENROLLED)
    errors = sum(1 for s in machinesets if s.decision.action is Action.ERROR or s.error is not None)
    releases = tuple(
        s.decision.target_release
        for s in machinesets
        if s.decision.target_release and (s.patched or s.decision.action is Action.NOOP)
    )
    return PassResult(skipped, errors, releases)


async def _run(args: argparse.Namespace) -> int:
    api = await make_api_client(args.kubeconfig, qps=args.qps, burst=args.burst)
    identity = default_identity()
    namespace = current_namespace()
    supervisor = Supervisor()
    # A dry run writes nothing, the Lease included: campaigning would take leadership away from
    # the replica that does the work.
    elector: Elector = (
        LeaderElector(api, identity, namespace, **vars(await lease_timings(api, args)))
        if args.leader_elect and not args.dry_run
        else AlwaysLeader(identity)
    )
    # Every write this process sends, of any kind, is checked against the Lease when it is sent.
    api.fence = WriteFence(elector.write_refusal)
    writer = None if args.dry_run else StatusWriter(CustomObjectsApi(api), cluster_operator=args.cluster_operator)
    limits = SkewLimits.from_flags(args.ocp_skew_limit, args.rhel_skew_limit)
    reporter = PassReporter(writer, limits)
    core = CoreV1Api(api)
    cloud = CloudChecks(core, args.gcp_endpoint, args.azure_endpoint)
    controller = Controller(
        api,
        ControllerOptions(dry_run=args.dry_run, cluster_operator=args.cluster_operator, concurrency=args.concurrency),
        is_leader=lambda: elector.is_leader,
        before_patch=StubIgnitionChecks(core),
        on_pass=reporter,
        cloud=cloud,
    )
    queue = WorkQueue("bootimage")
    pass_done = asyncio.Event()  # --once: the single pass is over
    if not args.dry_run:
        # Normal events wait while MachineSets are queued or being reconciled (see EventLane).
        busy = (lambda: not pass_done.is_set()) if args.once else (lambda: queue.busy)
        controller.events = EventLane(
            EventRecorder(cast(Any, core)), busy=busy, concurrency=args.concurrency, spawn=supervisor.spawn
        )
    controller.bind_queue(queue.add)
    for name, informer in controller.informers.items():
        supervisor.watch(informer.start(), f"informer-{name}")
    supervisor.spawn(cloud.prime(), "cloud-credentials", finite=True)  # reads only: every replica may
    health = obs.HealthServer(
        args.health_addr,
        args.metrics_addr,
        lambda: {
            "informers-synced": controller.synced(),
            "leader-election": elector.running or args.once,
            "tasks": supervisor.healthy,
        },
    )
    await health.start()
    log.info("started", identity=identity, namespace=namespace, dry_run=args.dry_run, once=args.once)
    try:
        if args.once:
            return await _once(controller, reporter, writer, elector, args, pass_done)
        return await _serve(controller, queue, elector, writer, supervisor, args.concurrency)
    finally:
        supervisor.stopping()
        queue.shutdown()
        # Whatever the leader's last flush did not write is dropped (and counted): we may no
        # longer hold the Lease, and the fence would refuse it anyway.
        await controller.flush_events(timeout=0)
        if writer is not None:
            await writer.discard()
        for informer in controller.informers.values():
            await informer.stop()
        await health.stop()
        cloud.close()
        await api.close()


async def lease_timings(api: Any, args: argparse.Namespace) -> LeaseTimings:
    """The flags where given; else library-go's profile for the cluster's control-plane topology."""
    profile = OPENSHIFT_TIMINGS
    flags = (args.leader_elect_lease_duration, args.leader_elect_renew_deadline, args.leader_elect_retry_period)
    if None in flags:
        topology = await _control_plane_topology(api)
        if topology == SINGLE_REPLICA_TOPOLOGY:
            profile = SINGLE_NODE_TIMINGS
        log.info("leader election timings", topology=topology or "unknown", profile="single-node" if profile is SINGLE_NODE_TIMINGS else "HA")
    return LeaseTimings(
        flags[0] if flags[0] is not None else profile.lease_duration,
        flags[1] if flags[1] is not None else profile.renew_deadline,
        flags[2] if flags[2] is not None else profile.retry_period,
    )


async def _control_plane_topology(api: Any) -> str | None:
    try:
        infra = await with_retries(
            lambda: CustomObjectsApi(api).get_cluster_custom_object(
                CONFIG_GROUP, CONFIG_VERSION, INFRASTRUCTURE_PLURAL, INFRASTRUCTURE_NAME
            ),
            what="get infrastructure",
            attempts=3,
        )
    except Exception as exc:  # library-go does the same: HA timings when the topology is unknown
        log.warning("cannot read the control-plane topology; using HA leader election timings", error=describe(exc))
        return None
    return control_plane_topology(infra)


async def _flush(controller: Controller, writer: StatusWriter | None, qps: float) -> None:
    """The leader's last writes: the status, then every pending Event within the QPS budget."""
    if writer is not None:
        await writer.flush()
    pending = controller.events.pending if controller.events is not None else 0
    # Time enough to write each pending Event at the client's rate, and then some: dropping
    # events at exit is what --once used to do at the default --qps.
    budget = EVENT_FLUSH_MIN + (pending / qps * 1.5 if qps > 0 else 0.0)
    await controller.flush_events(timeout=budget)


async def _once(
    controller: Controller,
    reporter: PassReporter,
    writer: StatusWriter | None,
    elector: Elector,
    args: argparse.Namespace,
    pass_done: asyncio.Event,
) -> int:
    if not await controller.wait_synced(SYNC_TIMEOUT):
        log.error("caches did not sync; writing nothing", timeout=SYNC_TIMEOUT)
        return 1

    async def work() -> int:
        keys: dict[str, None] = {}  # ordered and de-duplicated
        controller.bind_queue(lambda key: keys.setdefault(key))
        controller.enqueue_all()
        # Claims first: a holder deleted while the daemon was down is released before any patch
        # needs a holder (the patches then claim under a new one).
        failed = await _reconcile_keys(controller, [CLAIMS_KEY], args.concurrency)
        failed += await _reconcile_keys(controller, [k for k in keys if not k.startswith("@")], args.concurrency)
        if CLAIMS_KEY in keys:  # re-queued by the pass (a claim released on leaving enrollment)
            failed += await _reconcile_keys(controller, [CLAIMS_KEY], args.concurrency)
        pass_done.set()
        reporter(controller)
        await _flush(controller, writer, args.qps)
        summary = reporter.summary
        ok = not summary.degraded and summary.pending == 0 and not failed
        log.info("pass finished", degraded=summary.degraded, pending=summary.pending, failed=failed, ok=ok)
        return 0 if ok else 1

    try:
        return await elector.run(work, campaign=False)
    except LeaseHeldElsewhere as exc:
        log.error("not the leader: another replica holds the lease; writing nothing", holder=exc.holder, error=str(exc))
        return 1
    except LeadershipLost as exc:
        log.error("lost the lease during the pass; stopped writing", reason=str(exc))
        return 1
    finally:
        await elector.release()


async def _reconcile_keys(controller: Controller, keys: list[str], concurrency: int) -> int:
    """Reconcile `keys` with at most `concurrency` at once; returns how many failed."""
    semaphore = asyncio.Semaphore(concurrency)

    async def one(key: str) -> bool:
        async with semaphore:
            result = await controller.reconcile(key)
        if result.error is not None:
            log.error("reconcile failed", key=key, error=result.error)
            return False
        return True

    results = await asyncio.gather(*(one(k) for k in keys))
    return results.count(False)


async def _serve(
    controller: Controller,
    queue: WorkQueue,
    elector: Elector,
    writer: StatusWriter | None,
    supervisor: Supervisor,
    concurrency: int,
) -> int:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)

    async def lead() -> None:
        # Campaigning does not wait for the caches (client-go does the same): the Lease round
        # trips overlap the initial lists. Workers start only on synced caches.
        if not await controller.wait_synced(SYNC_TIMEOUT):
            raise CachesNotSynced(f"caches did not sync within {SYNC_TIMEOUT:g}s")
        log.info("leading: reconciling every MachineSet")
        controller.enqueue_all()
        await run_workers(queue, controller.reconcile, concurrency)
        # The queue was shut down (SIGTERM) and drained: the last words, while still leading.
        # No rate-based extension of the Event budget here (qps 0.0): SHUTDOWN_GRACE bounds it.
        await _flush(controller, writer, 0.0)

    election = loop.create_task(elector.run(lead), name="leader-election")
    stopped = loop.create_task(stop.wait(), name="signal-wait")
    failed = loop.create_task(supervisor.failed.wait(), name="supervision-wait")
    await asyncio.wait({election, stopped, failed}, return_when=asyncio.FIRST_COMPLETED)
    supervisor.stopping()
    code = 0
    if election.done():
        code = 1
        _log_election_end(election)
    elif failed.done():
        code = 1  # the supervisor logged which task ended and why
    else:
        log.info("shutting down")
        queue.shutdown()
        if elector.is_leader:
            await asyncio.wait({election}, timeout=SHUTDOWN_GRACE)
    await elector.release()  # cancels the election if it still runs
    for task in (election, stopped, failed):
        task.cancel()
    await asyncio.gather(election, stopped, failed, return_exceptions=True)
    return code


def _log_election_end(election: asyncio.Task[None]) -> None:
    exc = None if election.cancelled() else election.exception()
    if isinstance(exc, LeadershipLost):
        log.error("leadership lost; stopped writing, exiting so the pod restarts clean", reason=str(exc))
    else:
        cause = "cancelled" if exc is None else f"{type(exc).__name__}: {exc}"
        log.error("the controller's work ended; exiting", cause=cause)


class CachesNotSynced(Exception):
    """The informers did not list everything in time: the workers must not start on partial caches."""


class CloudChecks:
    """Cloud verification for the daemon: on by default, used when credentials exist (SPEC 2 rule 9).

    The credentials Secrets are read by name (RBAC grants `get` on those names only, so they cannot
    be watched) and re-read at most once a minute; the verifier rebuilds its clients when one changes.
    A platform without credentials is reported once by the verifier and planned with offline rules.
    """

    REFRESH_SECONDS = 60.0

    def __init__(self, core: CoreV1Api, gcp_endpoint: str | None, azure_endpoint: str | None) -> None:
        self.core: Any = core
        self.gcp_endpoint = gcp_endpoint
        self.azure_endpoint = azure_endpoint
        self.verifier: Any = None
        self._loaded_at = float("-inf")
        self._lock = asyncio.Lock()

    _SECRETS = (
        (Platform.AWS, AWS_CREDENTIALS_SECRET),
        (Platform.GCP, GCP_CREDENTIALS_SECRET),
        (Platform.AZURE, AZURE_CREDENTIALS_SECRET),
    )

    async def prime(self) -> None:
        """Read the credentials while the caches sync: the first reconcile need not wait for them.
        A failure is left to that reconcile, which reads them again."""
        try:
            await self._refresh()
        except ApiException as exc:
            log.debug("cloud credentials not read yet", code=exc.status)

    async def _refresh(self) -> None:
        async with self._lock:
            now = asyncio.get_running_loop().time()
            if now - self._loaded_at < self.REFRESH_SECONDS:
                return
            read = await asyncio.gather(*(self._read(name) for _, name in self._SECRETS), return_exceptions=True)
            for answer in read:
                if isinstance(answer, BaseException):
                    raise answer
            secrets: dict[Platform | str, Any] = {platform: answer for (platform, _), answer in zip(self._SECRETS, read, strict=True)}
            if self.verifier is None:
                self.verifier = CloudVerifier.from_secrets(
                    secrets, gcp_endpoint=self.gcp_endpoint, azure_endpoint=self.azure_endpoint
                )
            else:
                for platform, secret in secrets.items():
                    self.verifier.update_secret(platform, secret)
            self._loaded_at = now

    async def _read(self, name: str) -> Any:
        """The Secret, or None when it does not exist or is not ours to read."""
        try:
            return await with_retries(
                functools.partial(self.core.read_namespaced_secret, name, MAPI_NAMESPACE), what=f"get secret {name}"
            )
        except ApiException as exc:
            # Still failing after retries: not knowing whether credentials exist is no reason to
            # plan offline (or to drop working ones): fail this reconcile, it is retried, and so
            # is this read (the minute in _refresh only starts after success).
            if is_retryable(exc):
                raise
            if exc.status not in (403, 404):
                log.warning("cannot read cloud credentials", secret_name=name, code=exc.status)
            return None

    async def __call__(self, decision: Any) -> tuple[Any, frozenset[str]] | None:
        await self._refresh()
        platforms = frozenset(str(p) for p in self.verifier.platforms)
        if decision.platform not in platforms or not image_queries([decision]):
            return None
        return await verify_decisions(self.verifier, [decision]), platforms

    def close(self) -> None:
        if self.verifier is not None:
            self.verifier.close()


class StubIgnitionChecks:
    """Before a boot image patch: the user-data secret must hold Ignition spec 3 (SPEC section 3).

    Every worker MachineSet of a cluster usually shares one secret (`worker-user-data`): once it is
    known to hold spec 3, it is not read again for `ttl` seconds, so a pass over 1,000 MachineSets
    reads it once, not 1,000 times. A per-secret lock makes concurrent workers wait for one read.
    """

    def __init__(self, core: CoreV1Api, ttl: float = 60.0) -> None:
        self.core = core
        self.ttl = ttl
        self._verified: dict[tuple[str, str], float] = {}
        self._locks: dict[tuple[str, str], asyncio.Lock] = {}

    async def __call__(self, resource: MachineResource) -> Refusal | None:
        spec = resource.provider_spec if isinstance(resource.provider_spec, Mapping) else {}
        ref = spec.get("userDataSecret")
        secret = ref.get("name") if isinstance(ref, Mapping) else None
        if not secret:
            return None
        key = (resource.namespace, str(secret))
        async with self._locks.setdefault(key, asyncio.Lock()):
            loop = asyncio.get_running_loop()
            if loop.time() - self._verified.get(key, float("-inf")) < self.ttl:
                return None
            result = await ensure_stub_ignition_v3(self.core, resource.namespace, str(secret), now=datetime.now(UTC))
            if result.ok:
                self._verified[key] = loop.time()
                return None
        # INVALID: missing secret or a config spec 3 cannot express (the admin must fix it);
        # FAILED: the API refused or kept failing (tried again when the MachineSet or an input changes).
        reason = Reason.USER_DATA_INVALID if result.outcome is StubOutcome.INVALID else Reason.PATCH_FAILED
        return Refusal(reason, result.message)


# ---- release-claims and rollback ----------------------------------------------------------------


def release_claims(args: argparse.Namespace) -> int:
    return asyncio.run(_release_claims(args))


async def _release_claims(args: argparse.Namespace) -> int:
    """Every owner reference of ours first, then the holder's finalizer (SPEC section 3).

    A running daemon claims again on its next patch: stop it (or opt the MachineSets out) first
    when the point is to hand the MachineSets over for good.
    """
    from .controller import fresh_machines, release_all_claims
    from .writer import MachineSetWriter

    api = await make_api_client(args.kubeconfig)
    try:
        custom = CustomObjectsApi(api)
        writer = MachineSetWriter(custom, CoreV1Api(api))
        if await release_all_claims(writer, lambda: fresh_machines(custom)):
            print("released all claims; finalizer removed from the holder")
            return 0
        print("error: claims kept changing under us; run release-claims again")
        return 1
    finally:
        await api.close()


def rollback(args: argparse.Namespace) -> int:
    return asyncio.run(_rollback(args))


async def _rollback(args: argparse.Namespace) -> int:
    from .rollback import rollback_machineset

    api = await make_api_client(args.kubeconfig)
    try:
        return await rollback_machineset(api, args.namespace, args.name, dry_run=args.dry_run)
    finally:
        await api.close()


__all__ = ["PassReporter", "release_claims", "rollback", "run_daemon"]
