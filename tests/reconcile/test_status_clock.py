"""reconcile/status_clock.py: the one clock of the status (issue 35, item 3): when a mid-pass report
is due, when each status object may be written again, and the ClusterOperator's Progressing
hold-off. Time is a fake: nothing sleeps."""

from __future__ import annotations

from datetime import UTC, datetime

from bootimage_controller.constants import CONDITION_PROGRESSING
from bootimage_controller.core.status import ClusterOperatorStatus, make_condition
from bootimage_controller.reconcile.status_clock import (
    CO_PROGRESS_INTERVAL,
    PROGRESS_INTERVAL,
    REPORT_SPACING,
    WRITE_INTERVAL,
    StatusClock,
)


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def co(progressing: bool, degraded: bool = False) -> ClusterOperatorStatus:
    now = datetime(2026, 1, 1, tzinfo=UTC)
    prog = make_condition(CONDITION_PROGRESSING, "True" if progressing else "False", "Reconciling", "n of m", now, None)
    deg = make_condition("BootImageUpdateDegraded", "True" if degraded else "False", "AsExpected", "", now, None)
    return ClusterOperatorStatus.build(synced=True, progressing=prog, degraded=deg, verdict=None, now=now)


def test_a_mid_pass_report_is_due_once_per_interval_counted_from_the_first_key() -> None:
    t = Clock()
    clock = StatusClock(t)
    assert not clock.report_due()  # the first key: a short pass reports once, at its end
    t.now += PROGRESS_INTERVAL - 0.1
    assert not clock.report_due()
    t.now += 0.1
    assert clock.report_due()
    clock.reported(t.now)
    assert not clock.report_due()


def test_a_costly_report_spaces_the_next_by_its_cost() -> None:
    t = Clock()
    clock = StatusClock(t)
    clock.report_due()
    started = t.now
    t.now += 0.2  # a report over a large fleet took 0.2 s
    clock.reported(started)
    t.now += PROGRESS_INTERVAL
    assert not clock.report_due()  # 25 times 0.2 s: 5 s, not 2
    t.now += REPORT_SPACING * 0.2 - PROGRESS_INTERVAL + 0.01
    assert clock.report_due()


def test_each_object_is_written_at_most_once_per_interval_and_backs_off_on_failures() -> None:
    t = Clock()
    clock = StatusClock(t)
    mc, co_name = "machineconfiguration/cluster", "clusteroperator/x"
    assert clock.write_delay(mc) <= 0  # never written: now
    clock.wrote(mc, t.now)
    assert clock.write_delay(mc) == WRITE_INTERVAL
    assert clock.write_delay(co_name) <= 0  # objects are spaced apart, not together
    delays = []
    for _ in range(8):
        clock.write_failed(co_name, t.now)
        delays.append(clock.write_delay(co_name))
    assert delays[0] >= WRITE_INTERVAL * 0.8 and delays[-1] > delays[0] * 8  # growing
    assert max(delays) <= 60.0  # capped
    clock.wrote(co_name, t.now)  # a success ends the backoff
    assert clock.write_delay(co_name) == WRITE_INTERVAL


def test_the_cluster_operator_follows_state_changes_at_once_and_counts_only_on_long_passes() -> None:
    t = Clock()
    hold = StatusClock(t)
    assert hold.cluster_operator_due(co(progressing=False))  # settled: always handed over (the writer dedups)
    assert not hold.cluster_operator_due(co(progressing=True))  # a pass starts: no Progressing flap yet
    t.now += 5
    assert not hold.cluster_operator_due(co(progressing=True))
    assert hold.cluster_operator_due(co(progressing=True, degraded=True))  # Degraded: at once
    t.now += CO_PROGRESS_INTERVAL
    assert hold.cluster_operator_due(co(progressing=True, degraded=True))  # a long pass: counts refreshed
    t.now += 1
    assert not hold.cluster_operator_due(co(progressing=True, degraded=True))
    assert hold.cluster_operator_due(co(progressing=False))  # the end of the pass
