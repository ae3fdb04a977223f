"""Where the continuous daemon's memory goes once N MachineSets have converged (issue 36, item 4).

    python benchmarks/heap_profile.py [--size 5000]

A control plane, N stale MachineSets, the continuous daemon under tracemalloc
(`daemon_child.py`, BOOTIMAGE_BENCH_HEAP): the live Python heap at its highest (sampled) and once
every MachineSet holds its target, grouped by package and module and printed with the process's
RSS and its RSS right after the imports. tracemalloc's own bookkeeping makes the process larger than an untraced one: the RSS
figures for the goal come from `run.py`; this says what the Python heap is made of.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from daemon_bench import Convergence, Daemon, create_fleet, planned_stale_fleet, setup_cluster
from daemon_child import HEAP_ENV
from harness.cluster import start_test_cluster
from machinesets import REPO

from bootimage_controller.kube.client import make_api_client

SITE = "site-packages" + os.sep


def where(path: str) -> str:
    """A source file as a reader groups it: our module, or the third-party package, or the stdlib."""
    if path.startswith(str(REPO / "bootimage_controller")):
        return os.path.relpath(path, REPO)
    if SITE in path:
        return path.split(SITE, 1)[1].split(os.sep, 1)[0] + " (package)"
    if path.startswith("<"):
        return path
    return "stdlib: " + os.path.basename(path)


async def profile(n: int, workdir: Path) -> dict[str, dict[str, object]]:
    cluster = await asyncio.to_thread(start_test_cluster, workdir / "cluster", with_controller_manager=False)
    try:
        async with await make_api_client(str(cluster.kubeconfig), qps=0) as api:
            await setup_cluster(api)
            _, fleet, decisions = planned_stale_fleet(n)
            await create_fleet(api, fleet)
            heap = workdir / "heap.json"
            async with Convergence(api, decisions) as observer:
                daemon = Daemon.launch(cluster, workdir, "heap", env={HEAP_ENV: str(heap)})
                try:
                    if await observer.wait(give_up=asyncio.ensure_future(daemon.wait())) is None:
                        raise RuntimeError(f"the daemon exited before it converged: {workdir / 'heap.log'}")
                    await asyncio.sleep(5)  # its events written, its status reported
                    heap.with_name(heap.name + ".request").write_text("")
                    deadline = time.monotonic() + 120
                    while not heap.exists() and time.monotonic() < deadline:
                        await asyncio.sleep(0.5)
                finally:
                    await daemon.stop()
            started = daemon.dump.with_name(daemon.dump.name + ".started")
            after_imports = json.loads(started.read_text()).get("rss_kb", 0)
            docs: dict[str, dict[str, object]] = {}
            for name, path in (("converged", heap), ("highest", heap.with_name(heap.name + ".peak"))):
                if path.exists():
                    docs[name] = {**json.loads(path.read_text()), "rss_after_imports_kb": after_imports}
            return docs
    finally:
        await asyncio.to_thread(cluster.stop)


def table(doc: dict[str, object]) -> str:
    grouped: dict[str, int] = defaultdict(int)
    for row in doc["rows"]:  # type: ignore[attr-defined]
        grouped[where(row["file"])] += int(row["bytes"])
    total = int(doc["total_bytes"])  # type: ignore[call-overload]
    lines = [
        f"RSS after the imports: {int(doc['rss_after_imports_kb']) / 1024:.0f} MiB; "  # type: ignore[call-overload]
        f"RSS at the snapshot (traced): {int(doc['rss_kb']) / 1024:.0f} MiB; "  # type: ignore[call-overload]
        f"live Python heap: {total / 2**20:.1f} MiB",
        "",
        "| where (allocated in) | MiB | share of the heap |",
        "|---|---|---|",
    ]
    for name, size in sorted(grouped.items(), key=lambda kv: -kv[1])[:15]:
        lines.append(f"| {name} | {size / 2**20:.1f} | {100 * size / total:.0f}% |")
    return "\n".join(lines)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--size", type=int, default=5000)
    p.add_argument("--workdir", type=Path)
    args = p.parse_args()
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="heap-"))
    docs = asyncio.run(profile(args.size, workdir))
    for name, doc in docs.items():
        print(f"N = {args.size}, the heap {name} (converged: once every MachineSet holds its target; highest: "
              "the largest traced heap, sampled every 0.2 s)")
        print(table(doc))
        print()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
