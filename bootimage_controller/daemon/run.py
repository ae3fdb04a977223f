"""`bootimage-controller run`: wiring, start-up and shutdown. Nothing here decides anything.

Every replica runs the informers (followers keep warm caches); only the leader runs the workers
and writes. SIGTERM stops the workers, flushes the last status, releases the Lease so a follower
takes over at once, and exits 0.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import signal
import ssl
import sys
from collections.abc import Awaitable, Callable
from typing import Any

import structlog
from kubernetes_asyncio.client import CustomObjectsApi, VersionApi

from .. import observability as obs
from ..cloud.image_checks import CloudChecks
from ..constants import (
    CAPI_NAMESPACE,
    CONFIG_GROUP,
    CONFIG_VERSION,
    DEFAULT_RESYNC_PERIOD,
    INFRASTRUCTURE_NAME,
    INFRASTRUCTURE_PLURAL,
    SINGLE_REPLICA_TOPOLOGY,
)
from ..core.cluster import control_plane_topology, platform_of
from ..core.skew.verdict import SkewLimits

# The cloud and stub-Ignition modules import no SDK (each cloud SDK is imported only when its
# credentials exist, see cloud.verifier); imported here, not in the first reconcile, they do not
# delay the first patch.
from ..kube.capi_discovery import discover_capi_version
from ..kube.client import ClientConfigError, current_namespace, make_api_client
from ..kube.core_api import CoreApi
from ..kube.fence import WriteFence
from ..kube.informer import Informer
from ..kube.kubeconfig import target_of
from ..kube.leader import (
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
from ..kube.retry import describe, with_retries
from ..kube.workqueue import ReconcileResult, WorkQueue, run_workers
from ..reconcile.assembly import Hooks, ReconcileOptions, Reconcilers, Writers, assemble, event_summary_target
from ..reconcile.event_lane import EventLane, EventRecorder
from ..reconcile.keys import CLAIMS_KEY
from ..reconcile.loop import KeyList, KeySink
from ..reconcile.reporting import PassReporter
from ..reconcile.status_clock import StatusClock
from ..reconcile.status_writer import StatusWriter
from ..reconcile.store import DEFERRED_ROLES, ON_DEMAND_ROLES, InformerStore, build_informers
from ..reconcile.stub_ignition import StubIgnitionChecks
from ..reconcile.verification import VerificationOptions
from ..reconcile.writer import MachineSetWriter
from ..vsphere.template_checks import VSphereChecks, VSphereOptions
from .caches import SYNC_TIMEOUT, CacheStarts, judge_after_first_pass
from .metrics_security import MetricsAuthorizer, ReloadingTls
from .proxy import ProxyEnvironment, ProxySettings
from .serving import HealthServer
from .supervision import Supervisor

log = structlog.get_logger(__name__)

# SIGTERM to exit, within Kubernetes' patience and well within a drain's: the reconciles in flight
# finish (or are abandoned: a JSON patch carries its resourceVersion test, so it landed whole or not
# at all), then the last status and Events, then the Lease is released. Under 10 s in all.
IN_FLIGHT_GRACE = 4.0
LAST_WORDS_GRACE = 3.0
SHUTDOWN_GRACE = IN_FLIGHT_GRACE + LAST_WORDS_GRACE + 1.0
EVENT_FLUSH_MIN = 30.0


def run_daemon(args: argparse.Namespace) -> int:
    # Everything allocated so far (the interpreter, ~80 MB of imports, the flags) lives as long as
    # the process: out of the cyclic GC's sight, a full collection walks the caches only. In a
    # 1,000-MachineSet pass, full collections went from 0.10 s to 0.02 s of CPU.
    gc.freeze()
    try:
        return asyncio.run(run_async(args))
    except ClientConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1


async def run_async(args: argparse.Namespace) -> int:
    api = await make_api_client(args.kubeconfig, qps=args.qps, burst=args.burst)
    if args.once:
        # Before anything else reads: a dead server is one `error:` line, not a log line per
        # informer and lookup first (issue 33). The long-running daemon waits for it instead.
        unreachable = await _unreachable(api)
        if unreachable is not None:
            await api.close()
            where = target_of(args.kubeconfig)
            return _once_failed(f"{where}: cannot reach the Kubernetes API server: {unreachable}; wrote nothing")
    identity = default_identity()
    namespace = current_namespace()
    supervisor = Supervisor()
    # Read once, before the informers: the platform decides which template kind they watch (and
    # which cloud credentials are read), the control-plane topology the Lease timings. Discovery
    # goes out at the same time.
    infrastructure, capi_version = await asyncio.gather(read_infrastructure(api), discover_capi_version(api))
    platform = platform_of(infrastructure)
    # A dry run writes nothing, the Lease included: campaigning would take leadership away from
    # the replica that does the work.
    elector: Elector = (
        LeaderElector(api, identity, namespace, **vars(lease_timings(infrastructure, args)))
        if args.leader_elect and not args.dry_run
        else AlwaysLeader(identity)
    )
    # Every write this process sends, of any kind, is checked against the Lease when it is sent.
    api.fence = WriteFence(elector.write_refusal)
    obs.LEADER.set_function(lambda: 1.0 if elector.is_leader else 0.0)  # read at scrape time
    # One clock times the mid-pass reports and the status writes (reconcile/status_clock.py).
    status_clock = StatusClock()
    writer = (None if args.dry_run else
              StatusWriter(CustomObjectsApi(api), cluster_operator=args.cluster_operator, clock=status_clock))
    limits = SkewLimits.from_flags(args.ocp_skew_limit, args.rhel_skew_limit)
    reporter = PassReporter(writer, limits)
    core = CoreApi(api)
    vsphere = VSphereChecks.for_core_api(VSphereOptions.from_args(args), core)
    cloud = CloudChecks(core, args.gcp_endpoint, args.azure_endpoint, vsphere, platform,
                        azure_authority=args.azure_authority)
    informers = build_informers(api, capi_version, platform)
    store = InformerStore(informers, DEFERRED_ROLES, ON_DEMAND_ROLES)
    custom = CustomObjectsApi(api)
    queue_metrics = obs.QueueMetrics("bootimage")
    queue = WorkQueue("bootimage", metrics=queue_metrics)
    queue_metrics.watch(lambda: len(queue), queue.unfinished_seconds)
    pass_done = asyncio.Event()  # --once: the single pass is over
    events = None
    if not args.dry_run:
        # Normal events wait while MachineSets are queued or being reconciled (see EventLane).
        busy = (lambda: not pass_done.is_set()) if args.once else (lambda: queue.busy)
        events = EventLane(
            EventRecorder(core),
            busy=busy,
            concurrency=args.concurrency,
            spawn=supervisor.spawn,
            summary_target=lambda: event_summary_target(store),
        )
    # Where keys go: the work queue, or for `--once` one ordered list of every key (no workers).
    sink: KeySink = KeyList() if args.once else queue
    parts = assemble(
        store,
        Writers(MachineSetWriter(custom, core), MachineSetWriter(custom, core, CAPI_NAMESPACE), capi_version),
        ReconcileOptions(dry_run=args.dry_run, disagreement_grace=args.disagreement_grace,
                         gitops_labels=tuple(args.gitops_label), skew_limits=limits,
                         verification=VerificationOptions(args.first_boot_timeout, args.rollback_on_failed_boot)),
        Hooks(is_leader=lambda: elector.is_leader, fence=api.fence.refusal, stub_check=StubIgnitionChecks(core),
              cloud=cloud, templates=vsphere.refresh, events=events, on_pass=reporter,
              status_clock=status_clock),
        sink,
    )
    if writer is not None:
        # A status someone else rewrote (our conditions dropped) is written back; our own writes
        # coming back through the watch are recognised and cost nothing.
        informers["machineconfiguration"].add_handler(
            on_add=writer.observe_machineconfiguration,
            on_update=lambda _old, new: writer.observe_machineconfiguration(new),
        )
    watch_cluster_proxy(informers, cloud)
    caches = CacheStarts(informers, supervisor)
    caches.start(with_deferred=args.once)  # `--once` judges in its one pass: it lists them all
    supervisor.spawn(cloud.prime(), "cloud-credentials", finite=True)  # reads only: every replica may
    tls = secure_metrics(args)
    health = HealthServer(
        args.health_addr,
        args.metrics_addr,
        lambda: {
            "informers-synced": store.synced(),
            "leader-election": elector.running or args.once,
            "tasks": supervisor.healthy,
        },
        metrics_ssl=tls.context if tls is not None else None,
        metrics_middlewares=[MetricsAuthorizer(api).middleware] if tls is not None else [],
    )
    if tls is not None:
        supervisor.spawn(tls.watch(), "metrics-certificate")
    await health.start()
    log.info("started", identity=identity, namespace=namespace, dry_run=args.dry_run, once=args.once)
    try:
        if args.once:
            return await _once(api, parts, reporter, writer, events, elector, args, pass_done)
        return await _serve(parts, queue, elector, writer, events, supervisor, args.concurrency, args.resync_period,
                            caches)
    finally:
        supervisor.stopping()
        queue.shutdown()
        # Whatever the leader's last flush did not write is dropped (and counted): we may no
        # longer hold the Lease, and the fence would refuse it anyway.
        if events is not None:
            await events.flush(0)
        if writer is not None:
            await writer.discard()
        for informer in informers.values():
            await informer.stop()
        await health.stop()
        cloud.close()
        await api.close()


def watch_cluster_proxy(informers: dict[str, Informer], cloud: CloudChecks) -> None:
    """Keep the cloud, vCenter and OVA clients on the cluster-wide proxy (cluster_proxy)."""
    environment = ProxyEnvironment()

    def changed(*objs: dict[str, Any]) -> None:
        settings = ProxySettings.from_object(informers["proxy"].get("cluster"))
        if environment.apply(settings):
            log.info("cluster-wide proxy applied to cloud clients", http_proxy=bool(settings.http),
                     https_proxy=bool(settings.https), no_proxy=settings.no_proxy)
            cloud.reset()

    informers["proxy"].add_handler(on_add=changed, on_update=changed, on_delete=changed)


def secure_metrics(args: argparse.Namespace) -> ReloadingTls | None:
    """TLS (and with it scraper authentication) for /metrics when a certificate is given."""
    cert, key = getattr(args, "metrics_cert_file", None), getattr(args, "metrics_key_file", None)
    if cert is None and key is None:
        return None
    if cert is None or key is None:
        raise ClientConfigError("--metrics-cert-file and --metrics-key-file go together")
    if args.metrics_addr == args.health_addr:
        raise ClientConfigError("--metrics-addr must differ from --health-addr when /metrics is served over TLS")
    try:
        return ReloadingTls(cert, key)
    except (OSError, ssl.SSLError) as exc:
        raise ClientConfigError(f"--metrics-cert-file {cert} / --metrics-key-file {key}: {exc}") from None


def lease_timings(infrastructure: dict[str, Any] | None, args: argparse.Namespace) -> LeaseTimings:
    """The flags where given; else library-go's profile for the cluster's control-plane topology
    (HA when the Infrastructure could not be read, as library-go does)."""
    profile = OPENSHIFT_TIMINGS
    flags = (args.leader_elect_lease_duration, args.leader_elect_renew_deadline, args.leader_elect_retry_period)
    if None in flags:
        topology = control_plane_topology(infrastructure)
        if topology == SINGLE_REPLICA_TOPOLOGY:
            profile = SINGLE_NODE_TIMINGS
        log.info("leader election timings", topology=topology or "unknown", profile="single-node" if profile is SINGLE_NODE_TIMINGS else "HA")
    return LeaseTimings(
        flags[0] if flags[0] is not None else profile.lease_duration,
        flags[1] if flags[1] is not None else profile.renew_deadline,
        flags[2] if flags[2] is not None else profile.retry_period,
    )


async def read_infrastructure(api: Any) -> dict[str, Any] | None:
    """The Infrastructure `cluster`, or None when it cannot be read (the daemon then watches every
    template kind and uses the HA Lease timings; its informer reports the read's failure)."""
    try:
        infra = await with_retries(
            lambda: CustomObjectsApi(api).get_cluster_custom_object(
                CONFIG_GROUP, CONFIG_VERSION, INFRASTRUCTURE_PLURAL, INFRASTRUCTURE_NAME
            ),
            what="get infrastructure",
            attempts=3,
        )
    except Exception as exc:  # any failure: the defaults above, as library-go does for the timings
        log.warning("cannot read the Infrastructure; using HA leader election timings and watching every "
                    "Cluster API template kind", error=describe(exc))
        return None
    return infra if isinstance(infra, dict) else None


async def _flush(writer: StatusWriter | None, events: EventLane | None, qps: float) -> None:
    """`--once`'s last writes: the status, then every pending Event within the QPS budget. Each
    has a bound: `--once` ends, with what it could not write said in a warning."""
    if writer is not None:
        try:
            await asyncio.wait_for(writer.flush(), STATUS_FLUSH_TIMEOUT)
        except TimeoutError:
            log.warning("last status not written in time", timeout=STATUS_FLUSH_TIMEOUT)
    if events is None:
        return
    # Time enough to write each pending Event at the client's rate, and then some: dropping
    # events at exit is what --once used to do at the default --qps.
    budget = EVENT_FLUSH_MIN + (events.pending / qps * 1.5 if qps > 0 else 0.0)
    await events.flush(budget)


# `--once`: how long the last status write may take (the writer's own retries fit well within it).
STATUS_FLUSH_TIMEOUT = 90.0


async def _last_words(writer: StatusWriter | None, events: EventLane | None, budget: float) -> None:
    """SIGTERM: the last status and the pending Events, within `budget` seconds; what does not
    fit is dropped (and counted by the Event lane), never waited for."""
    deadline = asyncio.get_running_loop().time() + budget
    if writer is not None:
        try:
            await asyncio.wait_for(writer.flush(), budget)
        except TimeoutError:
            log.warning("last status not written within the shutdown budget", budget=budget)
    if events is not None:
        await events.flush(max(0.0, deadline - asyncio.get_running_loop().time()))


async def _once(
    api: Any,
    parts: Reconcilers,
    reporter: PassReporter,
    writer: StatusWriter | None,
    events: EventLane | None,
    elector: Elector,
    args: argparse.Namespace,
    pass_done: asyncio.Event,
) -> int:
    store, loop = parts.store, parts.loop  # the API server answered: run_async asked it first
    refused = await _synced_or_refused(store)
    if refused is not None:
        log.error("not allowed to read; writing nothing", refused=refused)
        return _once_failed(f"{refused}; wrote nothing")
    if not store.synced(deferred=True):
        log.error("caches did not sync; writing nothing", timeout=SYNC_TIMEOUT, errors=store.sync_errors())
        errors = "; ".join(f"{k}: {v}" for k, v in sorted(store.sync_errors().items()))
        return _once_failed(f"the caches did not sync within {SYNC_TIMEOUT:g}s ({errors}); wrote nothing")

    assert isinstance(parts.sink, KeyList), "run --once assembles with a KeyList"
    sink = parts.sink

    async def work() -> int:
        sink.keys.clear()  # what the caches' first events asked for, enqueue_all asks again
        loop.enqueue_all()
        keys = sink.keys  # ordered and de-duplicated; a key the pass adds lands here too
        # Claims first: a holder deleted while the daemon was down is released before any patch
        # needs a holder (the patches then claim under a new one).
        failed = await _reconcile_keys(loop.reconcile, [CLAIMS_KEY], args.concurrency)
        failed += await _reconcile_keys(loop.reconcile, [k for k in keys if not k.startswith("@")], args.concurrency)
        if CLAIMS_KEY in keys:  # re-queued by the pass (a claim released on leaving enrollment)
            failed += await _reconcile_keys(loop.reconcile, [CLAIMS_KEY], args.concurrency)
        pass_done.set()
        reporter(parts.status.view())
        await _flush(writer, events, args.qps)
        summary = reporter.summary
        ok = not summary.degraded and summary.pending == 0 and not failed
        log.info("pass finished", degraded=summary.degraded, pending=summary.pending, failed=failed, ok=ok)
        if ok:
            return 0
        why = [summary.degraded_message()] if summary.degraded else []
        why += [f"{summary.pending} patches not written"] if summary.pending else []
        why += [f"{failed} reconciles failed"] if failed else []
        return _once_failed(f"the pass did not complete cleanly: {'; '.join(why)}")

    try:
        return await elector.run(work, campaign=False)
    except LeaseHeldElsewhere as exc:
        if not exc.holder:
            # No holder was read: the attempt itself got no answer (the API server stopped between
            # writing the Lease and answering). Name the Lease and the server, as a lost Lease does.
            log.error("could not take the lease; writing nothing", error=str(exc))
            server = await _reachable_within(api, LOST_LEASE_PROBE)
            return _once_failed(f"not the leader: could not take the Lease {exc.lease}: {exc.detail or 'no answer'}"
                                f"{server}; wrote nothing")
        log.error("not the leader: another replica holds the lease; writing nothing", holder=exc.holder, error=str(exc))
        return _once_failed(f"not the leader: {exc}; wrote nothing")
    except LeadershipLost as exc:
        log.error("lost the lease during the pass; stopped writing", reason=str(exc))
        # Why it was lost, in the same line: most often the API server stopped answering.
        server = await _reachable_within(api, LOST_LEASE_PROBE)
        return _once_failed(f"lost the Lease during the pass and stopped writing: {exc}{server}")
    finally:
        await elector.release()


async def _synced_or_refused(store: Any) -> str | None:
    """Wait for the caches; `--once` stops at the first 403 (the long-running daemon retries, as
    RBAC may be fixed meanwhile) and returns the refusal in one sentence naming the role."""
    from ..kube.forbidden import Refusal, refused_sentence

    deadline = asyncio.get_running_loop().time() + SYNC_TIMEOUT
    # Every cache, the deferred ones too: the one pass judges boot verdicts as well.
    while not await store.wait_synced(min(0.5, max(0.0, deadline - asyncio.get_running_loop().time())),
                                      deferred=True):
        refusals = [r for r in map(Refusal.from_message, store.sync_errors().values()) if r is not None]
        if refusals:
            return refused_sentence(refusals, "run")
        if asyncio.get_running_loop().time() >= deadline:
            return None
    return None


# How long `--once` asks the API server, after losing the Lease, whether it still answers.
LOST_LEASE_PROBE = 5.0


def _once_failed(message: str) -> int:
    """`run --once`'s one `error:` line for every way it fails (issue 24), then exit 1."""
    print(f"error: {message}", file=sys.stderr)
    return 1


async def _reachable_within(api: Any, seconds: float) -> str:
    """`; the API server <host> does not answer: <cause>` (or did not within `seconds`), else ``."""
    server = str(getattr(api.configuration, "host", ""))
    try:
        found = await asyncio.wait_for(_unreachable(api), seconds)
    except TimeoutError:
        return f"; the API server {server} did not answer within {seconds:g}s"
    return "" if found is None else f"; the API server {server} does not answer: {found}"


async def _unreachable(api: Any) -> str | None:
    """Why the API server does not answer `GET /version` after a few quick retries (None: it
    does): `--once` then says so in seconds instead of waiting out the cache sync timeout."""
    try:
        await with_retries(lambda: VersionApi(api).get_code(), what="get /version", attempts=4)
    except Exception as exc:  # any failure to get an answer is the answer here
        return describe(exc)
    return None


async def _reconcile_keys(reconcile: Callable[[str], Awaitable[ReconcileResult[Any]]], keys: list[str],
                          concurrency: int) -> int:
    """Reconcile `keys` with at most `concurrency` at once; returns how many failed."""
    semaphore = asyncio.Semaphore(concurrency)
    results = await asyncio.gather(*(_reconcile_once(reconcile, key, semaphore) for key in keys))
    return results.count(False)


async def _reconcile_once(reconcile: Callable[[str], Awaitable[ReconcileResult[Any]]], key: str,
                          semaphore: asyncio.Semaphore) -> bool:
    """`run --once`'s worker for one key: the same `Loop.reconcile` and result as the daemon's
    (`kube.workqueue.WorkerPool`); False when it failed."""
    async with semaphore:
        result = await reconcile(key)
    if result.error is not None:
        log.error("reconcile failed", key=key, error=result.error)
        return False
    return True


async def _resync(enqueue_all: Callable[[], None], period: float) -> None:
    """Every key again each `period`: nothing a watch says is missed for longer (issue 24)."""
    while True:
        await asyncio.sleep(period)
        log.debug("resync: planning every MachineSet again", period=period)
        enqueue_all()


async def _serve(
    parts: Reconcilers,
    queue: WorkQueue,
    elector: Elector,
    writer: StatusWriter | None,
    events: EventLane | None,
    supervisor: Supervisor,
    concurrency: int,
    resync_period: float = DEFAULT_RESYNC_PERIOD,
    caches: CacheStarts | None = None,
) -> int:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)

    async def campaign() -> None:
        # No write before the caches' first lists are answered. Since Kubernetes 1.31 a list is
        # served from the watch cache once that cache has caught up with etcd; a write to another
        # resource (the Lease) leaves every other cache behind until etcd's next progress
        # notification, so each list sent after it waited about 100 ms (measured on 1.34: 97 ms
        # against 3 ms). Campaigning from the start made 2 in 8 continuous runs at N = 100 start
        # their workers 80-100 ms late (issue 36); the Lease round trips after the lists cost 3-5 ms.
        if not await parts.store.wait_synced(SYNC_TIMEOUT):
            raise CachesNotSynced(f"caches did not sync within {SYNC_TIMEOUT:g}s")
        await elector.run(lead)

    async def lead() -> None:
        log.info("leading: reconciling every MachineSet")
        parts.loop.enqueue_all()
        # Finite: it is cancelled when the workers stop; an exception from it is still a failure.
        resync = supervisor.spawn(_resync(parts.loop.enqueue_all, resync_period), "resync", finite=True)
        judging = supervisor.spawn(judge_after_first_pass(parts.store, queue, caches, parts.machines.judge_again),
                                   "deferred-caches", finite=True)
        workers = loop.create_task(run_workers(queue, parts.loop.reconcile, concurrency), name="workers")
        try:
            await asyncio.wait({workers, stopped}, return_when=asyncio.FIRST_COMPLETED)
            if not workers.done():
                # SIGTERM: the keys not started are the next leader's; the ones in flight get
                # IN_FLIGHT_GRACE, then are cancelled.
                queue.shutdown(drain=False)
                await asyncio.wait({workers}, timeout=IN_FLIGHT_GRACE)
                if not workers.done():
                    log.warning("reconciles still in flight at shutdown; abandoned", grace=IN_FLIGHT_GRACE)
                    workers.cancel()
                await asyncio.gather(workers, return_exceptions=True)
            else:
                workers.result()  # an exception from the workers is the election's end, and the exit code
        finally:
            resync.cancel()
            judging.cancel()
            workers.cancel()
        # The last words, while still leading.
        await _last_words(writer, events, LAST_WORDS_GRACE)

    stopped = loop.create_task(stop.wait(), name="signal-wait")
    election = loop.create_task(campaign(), name="leader-election")
    failed = loop.create_task(supervisor.failed.wait(), name="supervision-wait")
    try:
        await asyncio.wait({election, stopped, failed}, return_when=asyncio.FIRST_COMPLETED)
    except asyncio.CancelledError:
        # Cancelled from outside (an embedding program, the tests), not SIGTERM: the workers stop
        # before the caller closes the API client under them.
        for task in (election, stopped, failed):
            task.cancel()
        await asyncio.gather(election, stopped, failed, return_exceptions=True)
        raise
    supervisor.stopping()
    code = 0
    if election.done():
        code = 1
        _log_election_end(election)
    elif failed.done():
        code = 1  # the supervisor logged which task ended and why
    else:
        log.info("shutting down")
        if elector.is_leader:
            await asyncio.wait({election}, timeout=SHUTDOWN_GRACE)
        queue.shutdown()
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


__all__ = ["lease_timings", "read_infrastructure", "run_daemon"]
