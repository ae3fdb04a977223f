#!/usr/bin/env python3
"""`plan` on the bundled example, as a person runs it: wall time and peak RSS of the whole process
(interpreter start-up included), median of 9 runs. Issue 36's goal: under 0.3 s.

    python benchmarks/plan_startup.py
"""

from __future__ import annotations

import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
GOAL_SECONDS = 0.3


def main() -> int:
    print(f"machine: {os.cpu_count()} CPUs, Python {sys.version.split()[0]}, load {os.getloadavg()[0]:.2f}")
    times = []
    for _ in range(9):
        started = time.perf_counter()
        subprocess.run([sys.executable, "-m", "bootimage_controller", "plan", str(REPO / "examples" / "aws-4.16-cluster")],
                       stdout=subprocess.DEVNULL, check=True, cwd=REPO)
        times.append(time.perf_counter() - started)
    peak_mib = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    median = statistics.median(times)
    print(f"plan (bundled example): median {median:.2f} s of 9 (min {min(times):.2f}, max {max(times):.2f}), "
          f"peak RSS {peak_mib:.0f} MiB; goal < {GOAL_SECONDS} s: {'met' if median < GOAL_SECONDS else 'MISSED'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
