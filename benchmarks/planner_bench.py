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

from fleet import PlanInputs, plan, plan_inputs, realistic_mix
from profiling import ProfileRow, top_functions

REPEATS = 3


@dataclass(frozen=True)
class PlannerResult:
    count: int
    # CPU seconds of this process (median of REPEATS runs): on a busy machine wall time also counts
    # the time other processes held the core, CPU time does not.
    seconds: float
    wall_seconds: float  # median wall time of the same runs
    seconds_gc_off: float  # CPU seconds with the cyclic garbage collector off (diagnostic)
    decisions: dict[str, int]  # "action Reason" -> count

    @property
    def per_second(self) -> float:
        return self.count / self.seconds

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


def _median_run(objects: list[dict[str, Any]], inputs: PlanInputs, gc_enabled: bool) -> tuple[float, float]:
    runs = []
    for _ in range(REPEATS):
        gc.collect()
        if not gc_enabled:
            gc.disable()
        try:
            runs.append(_timed(objects, inputs))
        finally:
            gc.enable()
    return statistics.median(r[0] for r in runs), statistics.median(r[1] for r in runs)


def run_planner(count: int) -> PlannerResult:
    inputs = plan_inputs()
    objects = realistic_mix(count)
    decisions = Counter(f"{d.action} {d.reason}" for d in (plan(o, inputs) for o in objects))
    with one_core():
        seconds, wall = _median_run(objects, inputs, gc_enabled=True)
        seconds_gc_off, _ = _median_run(objects, inputs, gc_enabled=False)
    return PlannerResult(count, seconds, wall, seconds_gc_off, dict(sorted(decisions.items())))


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
