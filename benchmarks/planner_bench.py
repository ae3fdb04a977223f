"""The planner alone: `plan_machine` over a realistic fleet, on one core, no I/O."""

from __future__ import annotations

import contextlib
import cProfile
import gc
import os
import pstats
import statistics
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from machinesets import PlanInputs, plan, plan_inputs, realistic_mix
from profiling import ProfileRow, top_functions

REPEATS = 7


@dataclass(frozen=True)
class PlannerResult:
    count: int
    # CPU seconds of this process, the best of REPEATS runs. On this kind of VM the same code
    # measures 15,000-23,000 decisions/s from one run to the next; as `timeit` advises, the minimum
    # is what the code costs and the slower runs are interference. The median is shown beside it.
    seconds: float
    median_seconds: float
    wall_seconds: float  # wall time of the best run
    seconds_gc_off: float  # CPU seconds with the cyclic garbage collector off (diagnostic, best run)
    decisions: dict[str, int]  # "action Reason" -> count

    @property
    def per_second(self) -> float:
        return self.count / self.seconds

    @property
    def per_second_median(self) -> float:
        return self.count / self.median_seconds

    @property
    def per_second_wall(self) -> float:
        return self.count / self.wall_seconds

    @property
    def per_second_gc_off(self) -> float:
        return self.count / self.seconds_gc_off


@contextlib.contextmanager
def one_core() -> Iterator[None]:
    """Pin this process to one CPU for the measurement (the planner is single-threaded anyway)."""
    before = os.sched_getaffinity(0)
    os.sched_setaffinity(0, {min(before)})
    try:
        yield
    finally:
        os.sched_setaffinity(0, before)


def _timed(objects: list[dict[str, Any]], inputs: PlanInputs) -> tuple[float, float]:
    """(CPU seconds, wall seconds) for planning every object once."""
    cpu, wall = time.process_time(), time.perf_counter()
    for obj in objects:
        plan(obj, inputs)
    return time.process_time() - cpu, time.perf_counter() - wall


def _runs(objects: list[dict[str, Any]], inputs: PlanInputs, gc_enabled: bool) -> list[tuple[float, float]]:
    """(CPU seconds, wall seconds) of REPEATS runs, fastest first."""
    runs = []
    for _ in range(REPEATS):
        gc.collect()
        if not gc_enabled:
            gc.disable()
        try:
            runs.append(_timed(objects, inputs))
        finally:
            gc.enable()
    return sorted(runs)


def run_planner(count: int) -> PlannerResult:
    inputs = plan_inputs()
    objects = realistic_mix(count)
    decisions = Counter(f"{d.action} {d.reason}" for d in (plan(o, inputs) for o in objects))
    with one_core():
        runs = _runs(objects, inputs, gc_enabled=True)
        gc_off = _runs(objects, inputs, gc_enabled=False)
    (seconds, wall), median = runs[0], statistics.median(cpu for cpu, _ in runs)
    return PlannerResult(count, seconds, median, wall, gc_off[0][0], dict(sorted(decisions.items())))


def profile_planner(count: int, rows: int = 12) -> list[ProfileRow]:
    """The functions where `plan_machine` spends its own time (cProfile, GC on as in production)."""
    inputs = plan_inputs()
    objects = realistic_mix(count)
    profiler = cProfile.Profile()
    profiler.enable()
    for obj in objects:
        plan(obj, inputs)
    profiler.disable()
    return top_functions(pstats.Stats(profiler), rows)
