"""Runs `bootimage-controller` in this process and dumps its metrics when it exits.

    python benchmarks/daemon_child.py OUT.json run --kubeconfig K ...

A subprocess keeps the daemon's memory (peak RSS) apart from the benchmark's own, and the dump
gives the daemon's own `bootimage_controller_*` counters even after `run --once` has exited.
With `BOOTIMAGE_BENCH_PROFILE=FILE` in the environment the command runs under cProfile and the
statistics go to FILE (pstats format). With `BOOTIMAGE_BENCH_HEAP=FILE` it runs under tracemalloc,
and when `FILE.request` appears (the benchmark creates it once the fleet has converged) the live
Python heap, grouped by source file, goes to FILE as JSON (`heap_profile.py` prints it). `OUT.json` gets `{"main_started": <epoch s>, "main_finished": <epoch s>, "exit": code,
"vmhwm_kb": <peak RSS>, "cpu_seconds": <user + system CPU>, "samples": [{"name", "labels", "value"}, ...]}`; `OUT.json.started` is written as soon as the
command starts (after the imports), so the parent can tell interpreter start-up apart.
"""

from __future__ import annotations

import cProfile
import json
import os
import resource
import sys
import threading
import time
import tracemalloc
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
PROFILE_ENV = "BOOTIMAGE_BENCH_PROFILE"
HEAP_ENV = "BOOTIMAGE_BENCH_HEAP"
sys.path.insert(0, str(REPO))

from bootimage_controller import observability  # noqa: E402
from bootimage_controller.commands.cli import main  # noqa: E402
from bootimage_controller.daemon import run as _daemon  # noqa: E402,F401  (imported before the clock starts)


def own_peak_rss_kb() -> int:
    """This process's VmHWM. Not the parent's `ru_maxrss` from wait4: Linux folds the RSS of the
    forked (or vforked) copy of the parent into it at exec, so it reports the parent's size."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    return 0


def own_rss_kb() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def _heap_doc(snapshot: tracemalloc.Snapshot) -> dict[str, Any]:
    stats = snapshot.statistics("filename")
    current, peak = tracemalloc.get_traced_memory()
    rows = [{"file": str(s.traceback[0].filename), "bytes": s.size, "blocks": s.count} for s in stats[:40]]
    return {"traced_bytes": current, "traced_peak_bytes": peak, "rss_kb": own_rss_kb(),
            "total_bytes": sum(s.size for s in stats), "rows": rows}


def heap_snapshot_on_request(to: Path) -> None:
    """Write the live heap by source file (in a thread: the daemon's event loop runs on) when
    `to.request` appears, and to `to.peak` the heap at the highest point seen, sampled every
    0.2 s (a new snapshot when the traced heap grew by 2 MiB since the last one)."""
    request = to.with_name(to.name + ".request")
    highest = 0
    while not request.exists():
        current, _ = tracemalloc.get_traced_memory()
        if current > highest + 2**21:
            highest = current
            to.with_name(to.name + ".peak").write_text(json.dumps(_heap_doc(tracemalloc.take_snapshot())))
        time.sleep(0.2)
    to.write_text(json.dumps(_heap_doc(tracemalloc.take_snapshot())))


def _cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def samples() -> list[dict[str, Any]]:
    out = []
    for metric in observability.REGISTRY.collect():
        for sample in metric.samples:
            out.append({"name": sample.name, "labels": dict(sample.labels), "value": sample.value})
    return out


def run(out: Path, argv: list[str]) -> int:
    started = time.time()
    out.with_name(out.name + ".started").write_text(json.dumps({"main_started": started, "rss_kb": own_rss_kb()}))
    heap_to = os.environ.get(HEAP_ENV)
    if heap_to:
        tracemalloc.start()
        threading.Thread(target=heap_snapshot_on_request, args=(Path(heap_to),), daemon=True).start()
    code = 1
    profile_to = os.environ.get(PROFILE_ENV)
    profiler = cProfile.Profile() if profile_to else None
    try:
        if profiler is not None:
            profiler.enable()
        code = main(argv)
    finally:
        if profiler is not None and profile_to:
            profiler.disable()
            profiler.dump_stats(profile_to)
        doc = {
            "main_started": started,
            "main_finished": time.time(),
            "exit": code,
            "vmhwm_kb": own_peak_rss_kb(),
            "cpu_seconds": _cpu_seconds(),
            "samples": samples(),
        }
        out.write_text(json.dumps(doc))
    return code


if __name__ == "__main__":
    raise SystemExit(run(Path(sys.argv[1]), sys.argv[2:]))
