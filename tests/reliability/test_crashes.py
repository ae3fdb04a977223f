"""The daemon killed with SIGKILL in the middle of a pass: restarted, or replaced by a waiting replica.

Real subprocesses with leader election, talking through the proxy (no random faults: the kill is
the fault). The proxy lets the first KILL_AFTER boot image patches through, then parks every
further MachineSet PATCH, so the kill lands mid-pass with writes in flight. Those parked writes
are forwarded only after the next daemon (restarted, or the new leader) has sent its own patches
for the same MachineSets: the dead process's writes land late, under the live one's feet, as a
request already on the wire would. Exactly one boot image write per MachineSet must succeed.
"""

from __future__ import annotations

import asyncio
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from harness.cluster import TestCluster
from integration.daemon_helpers import start_daemon_process

from bootimage_controller.constants import LEASE_NAME, MCO_NAMESPACE

from .proxy import FaultProxy, ProxyStats
from .scenario import (
    REPORTS,
    ConcurrentWriter,
    ScenarioReport,
    check_fleet,
    check_wire,
    fleet,
    get_or_none,
    setup_cluster,
    upgrade_golden_data,
    wait_converged,
    wait_for,
    wait_quiet,
    wait_settled_on_416,
)

pytestmark = [pytest.mark.integration, pytest.mark.reliability, pytest.mark.heavy]

KILL_AFTER = 5  # boot image patches let through before the kill
LEASE_PATH = f"/apis/coordination.k8s.io/v1/namespaces/{MCO_NAMESPACE}/leases/{LEASE_NAME}"
# The daemon's LeaderElector defaults: 15 s lease, a candidate retries every 2 s (+20% jitter).
LEASE_DURATION = 15.0
RETRY_SLACK = 2 * 2.0 * 1.2 + 1.0


class Daemons:
    """Daemon subprocesses of one test; whatever is still running at the end is stopped."""

    def __init__(self, kubeconfig: Path, logs: Path) -> None:
        self.kubeconfig = kubeconfig
        self.logs = logs
        self.procs: dict[str, subprocess.Popen[bytes]] = {}
        self._starts = 0

    def start(self, identity: str) -> subprocess.Popen[bytes]:
        self._starts += 1
        proc = start_daemon_process(self.kubeconfig, identity, self.logs / f"{self._starts}-{identity}.log")
        self.procs[identity] = proc
        return proc

    # Waits run in a thread: the proxy serving these daemons lives on this event loop.
    async def kill(self, identity: str) -> None:
        proc = self.procs.pop(identity)
        proc.send_signal(signal.SIGKILL)
        await asyncio.to_thread(proc.wait, 10)

    async def terminate(self, identity: str) -> int:
        proc = self.procs.pop(identity)
        proc.send_signal(signal.SIGTERM)
        return await asyncio.to_thread(proc.wait, 20)

    def stop_all(self) -> None:
        for proc in self.procs.values():
            if proc.poll() is None:
                proc.kill()
                proc.wait(10)
        self.procs.clear()

    def iter_logs(self) -> Iterator[Path]:
        return iter(sorted(self.logs.glob("*.log")))


async def lease_holder(api: Any) -> str:
    lease = await get_or_none(api, LEASE_PATH)
    return str(((lease or {}).get("spec") or {}).get("holderIdentity") or "")


def late_outcomes(stats: ProxyStats) -> dict[str, int]:
    late = [p for p in stats.patches if p.late]
    landed = {p.name for p in late if p.applied}
    # The successor's own patches for a MachineSet a late write had just changed: refused, re-planned.
    refused_after_late = {
        p.name for i, p in enumerate(stats.patches) if p.name in landed and not p.late and p.status in (409, 422)
        and any(q.name == p.name and q.late and q.applied for q in stats.patches[:i])
    }
    return {
        "late_writes": len(late),
        "late_applied": len(landed),
        "late_conflicted": sum(1 for p in late if p.status in (409, 422)),
        "successor_refused_after_late_write": len(refused_after_late),
    }


async def kill_mid_pass(
    name: str,
    cluster: TestCluster,
    api: Any,
    tmp_path: Path,
    identities: tuple[str, ...],
) -> ScenarioReport:
    """Start a daemon per identity, upgrade the golden data, SIGKILL the leader once KILL_AFTER
    patches went through (more in flight), then: with one identity restart it; with two let the
    other take over. Parked writes of the dead leader are released after its successor's."""
    members = fleet()
    started = time.monotonic()
    before = await setup_cluster(api, members)
    extra: dict[str, Any] = {}
    async with FaultProxy(cluster.server, cluster.ca_file) as proxy:
        kubeconfig = proxy.kubeconfig(tmp_path / "via-proxy.kubeconfig", cluster.admin_token)
        (tmp_path / "logs").mkdir()
        daemons = Daemons(kubeconfig, tmp_path / "logs")
        writer = ConcurrentWriter(api, [m.name for m in members], seed=len(identities))
        try:
            for identity in identities:
                daemons.start(identity)

            async def has_leader() -> bool:
                return await lease_holder(api) in identities

            await wait_for(has_leader, 30, "a leader")
            leader = await lease_holder(api)
            await wait_settled_on_416(api, proxy, timeout=40)
            writer.start()
            proxy.hold_patches_after(KILL_AFTER)
            golden = await upgrade_golden_data(api)
            await proxy.wait_until(
                lambda: proxy.held >= 1 and bool(proxy.stats.applied_spec_patches()), 30, "a patch in flight"
            )
            await daemons.kill(leader)
            killed_at = time.monotonic()
            in_flight = proxy.held
            applied_at_kill = sum(proxy.stats.applied_spec_patches().values())
            assert 0 < applied_at_kill < sum(m.patched for m in members), "the kill must land mid-pass"
            if len(identities) == 1:
                daemons.start(leader)  # the same pod name: a container restart
                successor = leader
            else:
                successor = next(i for i in identities if i != leader)

                async def taken_over() -> bool:
                    return await lease_holder(api) == successor

                await wait_for(taken_over, LEASE_DURATION + RETRY_SLACK + 5, "the waiting replica to take the lease")
                extra["takeover"] = f"{time.monotonic() - killed_at:.1f}s"
                assert time.monotonic() - killed_at <= LEASE_DURATION + RETRY_SLACK, extra
            await proxy.wait_until(lambda: proxy.held > in_flight, 45, "the successor's own patches")
            extra.update(killed_after_applied=applied_at_kill, in_flight_at_kill=in_flight)
            extra["released"] = await proxy.release_held()
            extra["converged_in"] = f"{await wait_converged(api, members, golden):.1f}s"
            await writer.stop()
            await wait_quiet(proxy)
            assert await lease_holder(api) == successor
            # SIGTERM: the successor releases the lease and exits 0.
            assert await daemons.terminate(successor) == 0
            assert await lease_holder(api) == ""
        finally:
            await writer.stop()
            daemons.stop_all()
        stats = proxy.stats
    extra.update(late_outcomes(stats))
    check_wire(stats, members, golden)
    await check_fleet(api, members, before, golden, writer, crashed=True)
    for log in daemons.iter_logs():
        assert "Traceback" not in log.read_text(errors="replace"), f"{log.name} has a traceback"
    report = ScenarioReport(
        name, time.monotonic() - started, stats.summary(), writer.writes, sum(stats.applied_spec_patches().values()), extra
    )
    REPORTS.append(report)
    return report


async def test_kill_9_mid_pass_then_restart(kube_cluster: TestCluster, kube_api: Any, tmp_path: Path) -> None:
    """SIGKILL mid-pass with writes in flight, then the same pod restarts: it converges, and the
    dead process's writes that land late never make a second boot image write succeed."""
    report = await kill_mid_pass("kill-9-restart", kube_cluster, kube_api, tmp_path, ("bootimage-controller-0",))
    assert report.extra["late_writes"] >= 1, report.extra


async def test_leader_killed_mid_pass_replica_takes_over(
    kube_cluster: TestCluster, kube_api: Any, tmp_path: Path
) -> None:
    """Two replicas; SIGKILL the leader mid-pass: the other takes the lease within its duration
    (plus retry jitter) and finishes the pass, and the deposed leader's late writes change nothing."""
    report = await kill_mid_pass(
        "leader-killed", kube_cluster, kube_api, tmp_path, ("bootimage-controller-a", "bootimage-controller-b")
    )
    assert report.extra["late_writes"] >= 1, report.extra
