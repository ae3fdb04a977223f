#!/usr/bin/env python3
"""What boot verification's Machine and Node informers cost the daemon (issue 45, SPEC section 3b).

    python benchmarks/verification_bench.py                    # 5,000 MachineSets x 3 Machines, 3 rounds
    python benchmarks/verification_bench.py --machinesets 1000 --rounds 1

On one loopback control plane (no controller manager: nothing else writes), N stale MachineSets, and
the continuous daemon (`run`, leader election on, as deployed) timed as in daemon_bench.py: the first
MachineSet at its target, all of them, the Machine and Node caches listed, and peak RSS (VmHWM) once
those are listed and it settled:
- *without*: no Machine and no Node exists; the two informers list nothing;
- *with*: every MachineSet has 3 Machines (owned by it, its template's providerSpec, phase `Running`,
  a `nodeRef`, an instance id) and each Machine's Node is `Ready`: 3N Machines and 3N Nodes, as a
  cluster whose pools are all scaled up.
The rounds alternate (without, with, without, ...) on the same server, the fleet made stale again
before each. The goal (issue 45): the Machines and Nodes add at most 20 MiB of peak RSS and no second
to the first patch. Exit 1 when a goal is missed.
"""

from __future__ import annotations

import argparse
import asyncio
import copy
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import machinesets  # noqa: F401  (first: it puts tests/ on sys.path for harness)
from daemon_bench import (
    CREATE_CONCURRENCY,
    MACHINESETS_PATH,
    SETTLE_SECONDS,
    Convergence,
    Daemon,
    _sleep_sampling,
    _until,
    bounded,
    create_fleet,
    delete_all,
    delete_fleet,
    planned_stale_fleet,
    setup_cluster,
)
from harness.cluster import start_test_cluster
from harness.objects import MERGE_PATCH, kube_request

from bootimage_controller.constants import MAPI_NAMESPACE
from bootimage_controller.kube.client import make_api_client

MACHINES_PER_SET = 3
MACHINES_PATH = f"/apis/machine.openshift.io/v1beta1/namespaces/{MAPI_NAMESPACE}/machines"
GOAL_RSS_MIB = 20.0
GOAL_FIRST_PATCH_SECONDS = 1.0


@dataclass(frozen=True)
class Figures:
    with_machines: bool
    first_patch_seconds: float  # command start to the first MachineSet at its target
    converge_seconds: float  # command start to every MachineSet at its target
    verification_ready_seconds: float  # command start to the Machine and Node caches listed
    peak_rss_mib: float  # VmHWM once every cache listed and the daemon settled


async def run_daemon(cluster: Any, workdir: Path, api: Any, decisions: Any, name: str) -> Figures:
    """The continuous daemon (leader election on), as deployed: the first patch, every patch, the
    verification caches listed, then a settle, its peak RSS sampled throughout."""
    log = workdir / f"{name}.log"
    async with Convergence(api, decisions) as observer:
        daemon = Daemon.launch(cluster, workdir, name, "--concurrency", "4", "--qps", "0")
        try:
            await observer.wait()
            await _until(daemon, lambda: _logged(log, CACHES_LISTED), "judging boot verdicts", poll=0.2)
            listed = _logged_at(log, CACHES_LISTED)
            await _sleep_sampling(daemon, SETTLE_SECONDS)
            daemon.sample_memory()
            started = daemon.command_started()
        finally:
            await daemon.stop()
    assert observer.at is not None and observer.first_at is not None
    return Figures(name.endswith("with"), observer.first_at - started, observer.at - started, listed - started,
                   daemon.peak_hwm_kb / 1024)


CACHES_LISTED = "boot verification's caches listed"


async def _logged(log: Path, text: str) -> bool:
    return log.exists() and text in log.read_text(errors="replace")


def _logged_at(log: Path, text: str) -> float:
    """When the daemon logged `text` (its JSON log line's timestamp)."""
    for line in log.read_text(errors="replace").splitlines():
        if text in line:
            stamp = json.loads(line)["timestamp"]
            return datetime.fromisoformat(str(stamp).replace("Z", "+00:00")).timestamp()
    raise LookupError(text)


async def add_machines_and_nodes(api: Any) -> float:
    """3 Machines per MachineSet, Running with a Ready Node each, as a scaled-up pool looks."""
    started = time.monotonic()
    sets = (await kube_request(api, "GET", MACHINESETS_PATH))["items"]
    jobs = [(ms, i) for ms in sets for i in range(MACHINES_PER_SET)]
    await bounded(CREATE_CONCURRENCY, (lambda ms=ms, i=i: _machine_and_node(api, ms, i) for ms, i in jobs))  # type: ignore[misc]
    return time.monotonic() - started


async def _machine_and_node(api: Any, machine_set: dict[str, Any], i: int) -> None:
    meta = machine_set["metadata"]
    name = f"{meta['name']}-{i}"
    template = copy.deepcopy(machine_set["spec"]["template"])
    await kube_request(api, "POST", MACHINES_PATH, {
        "apiVersion": "machine.openshift.io/v1beta1", "kind": "Machine",
        "metadata": {"name": name, "namespace": meta["namespace"], "labels": template["metadata"]["labels"],
                     "ownerReferences": [{"apiVersion": "machine.openshift.io/v1beta1", "kind": "MachineSet",
                                          "name": meta["name"], "uid": meta["uid"], "controller": True}]},
        "spec": template["spec"],
    })
    await kube_request(api, "POST", "/api/v1/nodes", {
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "labels": {"node-role.kubernetes.io/worker": "", "kubernetes.io/hostname": name},
                     "annotations": {"machine.openshift.io/machine": f"{MAPI_NAMESPACE}/{name}"}},
    })
    await kube_request(api, "PATCH", f"/api/v1/nodes/{name}/status", {"status": {
        "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady", "message": "ready",
                        "lastHeartbeatTime": "2026-11-28T00:00:00Z", "lastTransitionTime": "2026-11-28T00:00:00Z"}],
        "nodeInfo": {"osImage": "Red Hat Enterprise Linux CoreOS 9.6", "kubeletVersion": "v1.34.4"}}},
        content_type=MERGE_PATCH)
    await kube_request(api, "PATCH", f"{MACHINES_PATH}/{name}/status", {"status": {
        "phase": "Running", "nodeRef": {"kind": "Node", "name": name},
        "providerStatus": {"instanceId": f"i-{name}", "instanceState": "running"}}}, content_type=MERGE_PATCH)


async def bench(n: int, rounds: int, workdir: Path) -> list[Figures]:
    cluster = await asyncio.to_thread(start_test_cluster, workdir / "cluster", with_controller_manager=False)
    out: list[Figures] = []
    try:
        async with await make_api_client(str(cluster.kubeconfig), qps=0) as api:
            await setup_cluster(api)
            _, fleet, decisions = planned_stale_fleet(n)
            await create_fleet(api, fleet)
            for r in range(rounds):
                for with_machines in (False, True):
                    await delete_fleet(api)
                    await delete_all(api, MACHINES_PATH)
                    await delete_all(api, "/api/v1/nodes")
                    await create_fleet(api, fleet)
                    if with_machines:
                        took = await add_machines_and_nodes(api)
                        print(f"round {r + 1}: {MACHINES_PER_SET * n} Machines and Nodes made in {took:.0f} s",
                              flush=True)
                    figures = await run_daemon(cluster, workdir, api, decisions,
                                               f"round{r + 1}-{'with' if with_machines else 'without'}")
                    print(json.dumps(asdict(figures)), flush=True)
                    out.append(figures)
    finally:
        await asyncio.to_thread(cluster.stop)
    return out


def report(n: int, figures: list[Figures]) -> int:
    def median(with_machines: bool, pick: Callable[[Figures], float]) -> float:
        return statistics.median(pick(f) for f in figures if f.with_machines is with_machines)

    rss = median(True, lambda f: f.peak_rss_mib) - median(False, lambda f: f.peak_rss_mib)
    first = median(True, lambda f: f.first_patch_seconds) - median(False, lambda f: f.first_patch_seconds)
    converge = median(True, lambda f: f.converge_seconds) - median(False, lambda f: f.converge_seconds)
    ready = median(True, lambda f: f.verification_ready_seconds)
    print(f"N={n} MachineSets, {MACHINES_PER_SET * n} Machines and Nodes (medians of {len(figures) // 2} rounds):")
    print(f"  peak RSS without {median(False, lambda f: f.peak_rss_mib):.0f} MiB, with "
          f"{median(True, lambda f: f.peak_rss_mib):.0f} MiB: +{rss:.1f} MiB (goal <= {GOAL_RSS_MIB:.0f}: "
          f"{'met' if rss <= GOAL_RSS_MIB else 'MISSED'})")
    print(f"  first patch without {median(False, lambda f: f.first_patch_seconds):.2f} s, with "
          f"{median(True, lambda f: f.first_patch_seconds):.2f} s: {first:+.2f} s (goal < "
          f"{GOAL_FIRST_PATCH_SECONDS:.0f} s: {'met' if first < GOAL_FIRST_PATCH_SECONDS else 'MISSED'})")
    print(f"  every MachineSet patched: {converge:+.2f} s; the Machine and Node caches listed {ready:.2f} s "
          "after the command started")
    return 0 if rss <= GOAL_RSS_MIB and first < GOAL_FIRST_PATCH_SECONDS else 1


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    p.add_argument("--machinesets", type=int, default=5000)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--workdir", type=Path)
    args = p.parse_args()
    with tempfile.TemporaryDirectory(prefix="verification-bench-") as tmp:
        workdir = args.workdir or Path(tmp)
        figures = asyncio.run(bench(args.machinesets, args.rounds, workdir))
    return report(args.machinesets, figures)


if __name__ == "__main__":
    sys.exit(main())
