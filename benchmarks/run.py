"""Reproduce every benchmark figure: `python benchmarks/run.py [--sizes 100,1000,5000] [--quick]`.

Prints progress and one line per figure (with its goal, when it has one); with `--write-doc`,
rewrites the generated section of docs/benchmarks.md with this machine's figures. Ctrl-C stops
cleanly (the control planes and daemons it started are stopped). See benchmarks/README.md.
"""

from __future__ import annotations

import argparse
import asyncio
import shlex
import sys
import tempfile
import time
from pathlib import Path

import machinesets as fleet
from daemon_bench import SizeResult, bench_size
from planner_bench import PlannerResult, profile_planner, run_planner
from report import Figure, Machine, markdown, planner_figures, size_figures, write_doc

from bootimage_controller.observability import configure_logging

DEFAULT_SIZES = (100, 1000, 5000)
QUICK_SIZES = (100, 1000)
PLANNER_SIZES = (10_000, 1_000)
IDLE_SECONDS = 60.0
# Larger fleets' rounds last 5-25 s each, so fewer: 5. With 3, one run's median at N = 5,000 went
# from 1.03 to 1.22 between two full runs of the same code (the Go baseline's round 1: 20.4 s, then
# 18.0 s); a median of 5 lets one slow round of the 5 pass unnoticed, as 15 do at N = 100.
DEFAULT_ROUNDS = 5
# A small fleet's runs last well under a second, where one slow request of the API server (a Go GC
# pause, an etcd fsync) moves the ratio by 0.3: in three full runs the N = 100 rounds ranged from
# 0.92 to 1.80, and the Go baseline alone from 0.27 to 0.62 s. Its rounds are cheap (about 10 s
# each), so it gets enough for a stable median: 15 (9 until issue 36's last measurements).
SMALL_FLEET = 300
SMALL_FLEET_ROUNDS = 15
QUICK_IDLE_SECONDS = 10.0
DOC = fleet.REPO / "docs" / "benchmarks.md"


def default_rounds(n: int) -> int:
    return SMALL_FLEET_ROUNDS if n <= SMALL_FLEET else DEFAULT_ROUNDS


def sizes_arg(text: str) -> tuple[int, ...]:
    try:
        sizes = tuple(int(s) for s in text.split(",") if s.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: expected numbers separated by commas, e.g. 100,1000") from None
    if not sizes or min(sizes) < 1:
        raise argparse.ArgumentTypeError("sizes must be at least 1")
    return sizes


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="benchmarks/run.py", description=__doc__.split("\n\n")[0] if __doc__ else None)
    p.add_argument("--sizes", type=sizes_arg, help=f"daemon fleet sizes (default {','.join(map(str, DEFAULT_SIZES))}; --quick: {','.join(map(str, QUICK_SIZES))})")
    p.add_argument("--quick", action="store_true", help=f"N={','.join(map(str, QUICK_SIZES))} and a {QUICK_IDLE_SECONDS:.0f} s idle window")
    p.add_argument("--idle", type=float, help=f"idle window in seconds (default {IDLE_SECONDS:.0f}, --quick {QUICK_IDLE_SECONDS:.0f})")
    p.add_argument("--rounds", type=int,
                   help="baseline / --once / continuous rounds per size; the ratio goal is judged on their median "
                        f"(default {DEFAULT_ROUNDS}, {SMALL_FLEET_ROUNDS} for N <= {SMALL_FLEET})")
    p.add_argument("--concurrency", type=int, default=4, help="daemon --concurrency and the baseline's (default 4, the daemon's default)")
    p.add_argument("--qps", default="0", help="daemon --qps (default 0: no client rate limit, like the baseline)")
    p.add_argument("--profile", action="store_true",
                   help="one more continuous run at the largest size under cProfile; its top functions go into the doc")
    p.add_argument("--planner-only", action="store_true", help="skip the daemon benchmarks (no API server needed)")
    p.add_argument("--write-doc", action="store_true", help=f"rewrite the figures in {DOC.relative_to(fleet.REPO)}")
    p.add_argument("--workdir", type=Path, help="where clusters and daemon logs go (default: a temporary folder)")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    try:
        return _main(argv)
    except KeyboardInterrupt:
        # asyncio.run has cancelled the round in flight; its `finally` blocks stopped the daemons
        # and the control plane, and the harness stops any cluster left at exit.
        print("\ninterrupted: no figures written", file=sys.stderr, flush=True)
        return 130


def _progress(line: str) -> None:
    print(f"  ... {line}", file=sys.stderr, flush=True)


def _main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.rounds is not None and args.rounds < 1:
        raise SystemExit("--rounds must be at least 1")
    # The convergence observer is the project's own Informer: its info lines are not figures.
    configure_logging("console", "WARNING")
    sizes: tuple[int, ...] = () if args.planner_only else (args.sizes or (QUICK_SIZES if args.quick else DEFAULT_SIZES))
    idle = args.idle if args.idle is not None else (QUICK_IDLE_SECONDS if args.quick else IDLE_SECONDS)
    machine = Machine.describe()  # before the run: its load average says how busy the machine was
    print(f"machine: {machine.nproc} CPUs ({machine.cpu}), {machine.memory_gib:.1f} GiB, Python {machine.python}, load {machine.load}")
    started = time.monotonic()
    figures: list[Figure] = []

    _progress(f"planner: {' and '.join(map(str, PLANNER_SIZES))} MachineSets")
    planner: list[PlannerResult] = [run_planner(n) for n in PLANNER_SIZES]
    profile = profile_planner(PLANNER_SIZES[0])
    figures += _emit(planner_figures(planner[0], planner[1]))

    results: list[SizeResult] = []
    workdir = args.workdir or (Path(tempfile.mkdtemp(prefix="bootimage-bench-")) if sizes else Path())
    for n in sizes:
        result = asyncio.run(
            bench_size(
                n, workdir / f"n{n}", concurrency=args.concurrency, qps=args.qps, idle_seconds=idle,
                rounds=args.rounds or default_rounds(n), profile=args.profile and n == max(sizes),
                progress=_progress,
            )
        )
        results.append(result)
        figures += _emit(size_figures(result))

    print(f"total: {time.monotonic() - started:.0f} s; daemon logs in {workdir}" if sizes else f"total: {time.monotonic() - started:.0f} s")
    if args.write_doc:
        command = "python benchmarks/run.py " + shlex.join(argv if argv is not None else sys.argv[1:])
        write_doc(DOC, markdown(machine, command.strip(), planner, profile, results, figures))
        print(f"wrote {DOC.relative_to(fleet.REPO)}")
    return 0


def _emit(figures: list[Figure]) -> list[Figure]:
    for f in figures:
        print(f.line(), flush=True)
    return figures


if __name__ == "__main__":
    raise SystemExit(main())
