"""The daemon under injected API faults: errors, resets, stalls, cut watches, 410 after compaction.

Each scenario runs the upgrade of `scenario.py` (20 MachineSets, 16 to patch, a concurrent writer)
with the daemon in this process talking to the API server through the fault proxy, then checks
convergence and every SPEC section 7 invariant. Counts are printed at the end of the run.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any

import pytest
from harness.cluster import ClusterFactory, TestCluster
from harness.objects import api_client_for
from integration.daemon_helpers import daemon_task

from bootimage_controller.kube import client as kube_client

from .proxy import FaultPlan, FaultProxy
from .scenario import (
    REPORTS,
    ConcurrentWriter,
    Member,
    ScenarioReport,
    check_fleet,
    check_wire,
    fleet,
    setup_cluster,
    upgrade_golden_data,
    wait_converged,
    wait_quiet,
    wait_settled_on_416,
)

pytestmark = [pytest.mark.integration, pytest.mark.reliability, pytest.mark.heavy]

During = Callable[[FaultProxy, TestCluster, "asyncio.Task[float]"], Awaitable[dict[str, Any]]]


async def run_scenario(
    name: str,
    cluster: TestCluster,
    api: Any,
    tmp_path: Path,
    plan: FaultPlan,
    *,
    members: Sequence[Member] | None = None,
    before_upgrade: Callable[[FaultProxy], None] | None = None,
    during: During | None = None,
) -> ScenarioReport:
    """Set up, start the daemon through the proxy, upgrade the golden data with a concurrent
    writer running, wait for convergence (running `during` alongside), then check everything."""
    members = tuple(members or fleet())
    started = time.monotonic()
    before = await setup_cluster(api, members)
    extra: dict[str, Any] = {}
    async with FaultProxy(cluster.server, cluster.ca_file, plan) as proxy:
        kubeconfig = proxy.kubeconfig(tmp_path / "via-proxy.kubeconfig", cluster.admin_token)
        async with daemon_task(kubeconfig) as daemon:
            await wait_settled_on_416(api, proxy)
            writer = ConcurrentWriter(api, [m.name for m in members], seed=plan.seed)
            writer.start()
            converging: asyncio.Task[float] | None = None
            try:
                if before_upgrade is not None:
                    before_upgrade(proxy)
                golden = await upgrade_golden_data(api)
                converging = asyncio.create_task(wait_converged(api, members, golden))
                if during is not None:
                    extra = await during(proxy, cluster, converging)
                extra["converged_in"] = f"{await converging:.1f}s"
            finally:
                if converging is not None:
                    converging.cancel()
                await writer.stop()
            await wait_quiet(proxy)
            assert not daemon.done(), daemon
        stats = proxy.stats
    check_wire(stats, members, golden)
    await check_fleet(api, members, before, golden, writer)
    report = ScenarioReport(
        name,
        time.monotonic() - started,
        stats.summary(),
        writer.writes,
        sum(stats.applied_spec_patches().values()),
        extra,
    )
    REPORTS.append(report)
    return report


async def test_api_errors_500_503_429(kube_cluster: TestCluster, kube_api: Any, tmp_path: Path) -> None:
    """20% of non-watch requests answered 500, 503 or 429 (Retry-After: 1) without reaching the server."""
    report = await run_scenario(
        "errors", kube_cluster, kube_api, tmp_path, FaultPlan(seed=1, error_rate=0.20)
    )
    assert all(report.stats["faults"].get(code, 0) > 0 for code in ("500", "503", "429")), report.stats


async def test_connection_resets(kube_cluster: TestCluster, kube_api: Any, tmp_path: Path) -> None:
    """10% of non-watch requests reset: half before the server saw them, half after it acted
    (writes that landed but whose answer was lost must not be written again). The first three
    reads of the AWS credentials Secret are always reset: a failed credentials read must be
    retried, not leave the daemon unable to plan any patch for a minute. The first boot image
    PATCH of two MachineSets always lands with its answer lost: the retry must not write again."""
    forced = (
        ("get", "/secrets/aws-cloud-credentials", "reset-request", 3),
        ("patch", "/machinesets/aws-e1-0", "reset-response", 1),
        ("patch", "/machinesets/gcp-0", "reset-response", 1),
    )
    plan = FaultPlan(seed=2, reset_rate=0.10, first=forced)
    report = await run_scenario("resets", kube_cluster, kube_api, tmp_path, plan)
    assert report.stats["faults"].get("reset-request", 0) > 0, report.stats
    assert report.stats["machineset_patches_answer_lost"] >= 2, report.stats


HANG_TIMEOUT = 3.0


async def test_stalls(
    kube_cluster: TestCluster, kube_api: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """10% of requests (watches included) wait 2 s before they are forwarded, and the first boot
    image PATCH of one MachineSet is never answered at all (a half-open connection): the daemon
    must give up on it after its request timeout (shortened here from 60 s) and retry."""
    monkeypatch.setattr(kube_client, "DEFAULT_REQUEST_TIMEOUT", HANG_TIMEOUT)
    plan = FaultPlan(seed=3, stall_rate=0.10, watch_stall_rate=0.10, first=(("patch", "/machinesets/aws-e1-1", "hang", 1),))
    report = await run_scenario("stalls", kube_cluster, kube_api, tmp_path, plan)
    assert report.stats["faults"].get("stall", 0) > 0, report.stats
    (hang,) = report.stats["hangs_ended_after"]
    assert HANG_TIMEOUT - 0.5 <= hang <= HANG_TIMEOUT + 2, report.stats


WATCH_CUTS = 12
MAX_RECONNECT_GAP = 2.0


async def _until_many_cuts(proxy: FaultProxy, _cluster: TestCluster, converging: asyncio.Task[float]) -> dict[str, Any]:
    """Keep the concurrent writer (hence watch events, hence cuts) going until WATCH_CUTS cuts."""
    await converging
    await proxy.wait_until(lambda: proxy.stats.faults["watch-cut"] >= WATCH_CUTS, 30, f"{WATCH_CUTS} watch cuts")
    return {}


async def test_watch_streams_cut_mid_event(kube_cluster: TestCluster, kube_api: Any, tmp_path: Path) -> None:
    """Every watch stream is cut in the middle of a JSON line after 1 to 3 events. The daemon must
    converge and keep watching: a stream that delivered events and then broke is reconnected
    promptly, not after a backoff that grows with every cut (its cache would lag by up to 30 s)."""
    report = await run_scenario(
        "watch-cuts",
        kube_cluster,
        kube_api,
        tmp_path,
        FaultPlan(seed=4, watch_cut=(1, 3)),
        during=_until_many_cuts,
    )
    assert report.stats["faults"]["watch-cut"] >= WATCH_CUTS, report.stats
    assert report.stats["max_watch_reconnect_gap"] <= MAX_RECONNECT_GAP, report.stats


def _break_watches(proxy: FaultProxy) -> None:
    proxy.hold_watches()
    proxy.cut_watches()


async def _compact_while_converging(
    proxy: FaultProxy, cluster: TestCluster, converging: asyncio.Task[float]
) -> dict[str, Any]:
    """Rounds of: park watch reconnects, cut every watch, let changes happen, compact etcd, let the
    watches resume from their (now compacted) resourceVersions: each must get 410 and re-list."""
    rounds = 0
    while not converging.done() and rounds < 12:
        if rounds:
            _break_watches(proxy)  # the first round's break came before the golden data changed
        await asyncio.sleep(0.5)  # the concurrent writer and the daemon keep writing meanwhile
        cluster.compact_etcd()
        proxy.release_watches()
        rounds += 1
        await asyncio.wait({converging}, timeout=1.5)
    return {"compactions": rounds}


async def test_etcd_compaction_forces_410_relists(fresh_cluster: ClusterFactory, tmp_path: Path) -> None:
    """A cluster without the watch cache, so watches read etcd directly: compaction while the daemon
    runs and while the upgrade and the concurrent writer change objects. The first round happens
    right after the golden data changed, so the daemon can only learn of it through a re-list."""
    cluster = fresh_cluster(extra_apiserver_args=("--watch-cache=false",), with_controller_manager=False)
    async with await api_client_for(cluster.kubeconfig) as api:
        report = await run_scenario(
            "compaction-410",
            cluster,
            api,
            tmp_path,
            FaultPlan(seed=5),
            before_upgrade=_break_watches,
            during=_compact_while_converging,
        )
    gone = report.stats["gone_410"]
    assert gone.get("configmaps", 0) >= 1 and gone.get("machinesets", 0) >= 1, report.stats
