#!/usr/bin/env python3
"""`fleet` over generated must-gather trees (issue 26): wall time, CPU and peak memory per size.

    python benchmarks/fleet_bench.py                     # 250 and 1,000 trees, --parallel 8
    python benchmarks/fleet_bench.py --sizes 100,2000 --parallel 4

The trees come from tests/fleet/fleetgen.py (the fixtures, varied in platform, release, stream,
architecture and skew; 1 to 4 MachineSets each). Each run is `bootimage-controller fleet TREES...
-o json` in its own process (benchmarks/daemon_child.py: peak RSS is that process's VmHWM), output
discarded. Reading is concurrent and a tree's objects are dropped once its rows are made, so peak
memory should not grow with the number of trees beyond the rows themselves (a few KB each).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))

from fleet.fleetgen import write_fleet  # noqa: E402

FLAT_GOAL_MIB = 25.0  # peak RSS may grow by at most this much from the smallest size to the largest


def run(trees: list[Path], parallel: int, work: Path) -> dict[str, float]:
    out = work / f"fleet-{len(trees)}.json"
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, str(REPO / "benchmarks" / "daemon_child.py"), str(out), "fleet", *map(str, trees),
         "--parallel", str(parallel), "-o", "json"],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, cwd=REPO, check=False,
    )
    wall = time.monotonic() - started
    if done.returncode not in (0, 1):
        raise SystemExit(f"fleet failed ({done.returncode}): {done.stderr[-2000:]}")
    doc = json.loads(out.read_text())
    return {"wall": wall, "main": doc["main_finished"] - doc["main_started"], "cpu": doc["cpu_seconds"],
            "peak_mib": doc["vmhwm_kb"] / 1024}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--sizes", default="250,1000", help="tree counts (default 250,1000)")
    p.add_argument("--parallel", type=int, default=8)
    args = p.parse_args()
    sizes = sorted(int(s) for s in args.sizes.split(","))
    print(f"machine: {os.cpu_count()} CPUs, Python {sys.version.split()[0]}, load {os.getloadavg()[0]:.2f}")
    with tempfile.TemporaryDirectory(prefix="bootimage-fleet-bench-") as tmp:
        work = Path(tmp)
        trees = write_fleet(work / "trees", sizes[-1])
        results = {}
        for n in sizes:
            r = run(trees[:n], args.parallel, work)
            results[n] = r
            print(f"fleet {n} trees: {r['main']:.1f} s in the command ({r['wall']:.1f} s with start-up), "
                  f"{r['cpu']:.1f} s CPU, {n / r['main']:.0f} trees/s, peak RSS {r['peak_mib']:.0f} MiB")
        growth = results[sizes[-1]]["peak_mib"] - results[sizes[0]]["peak_mib"]
        verdict = "met" if growth <= FLAT_GOAL_MIB else "MISSED"
        print(f"peak RSS from {sizes[0]} to {sizes[-1]} trees: +{growth:.1f} MiB "
              f"(goal <= {FLAT_GOAL_MIB:.0f} MiB: {verdict})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
