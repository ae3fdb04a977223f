"""`StatusClock`: every decision about *when* the status is reported or written, on one time source.

Three questions, asked by two parts:
- the status reconciler: is a mid-pass report worth its cost now (`report_due`, `reported`)?
- the status writer, per object: how long until it may be written again (`write_delay`), and what
  a write or a failure does to that (`wrote`, `write_failed`)?
- the status writer, for the ClusterOperator: is this status worth offering at all, given the
  Progressing hold-off (`cluster_operator_due`)?

What the status *says* is the reporter's (`reporting`); merging offers (the newest wins) is the
writer's. `daemon/run.py` builds one clock and gives it to both; tests give a fake time source.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable

from ..constants import CO_PROGRESSING
from ..core.status import ClusterOperatorStatus
from ..kube.retry import Backoff

Clock = Callable[[], float]

# Mid-pass progress reports at most this often (seconds); the status key reports whenever the queue
# reaches it.
PROGRESS_INTERVAL = 2.0
# Mid-pass reports cost O(MachineSets) on the event loop (0.1 s at 5,000): spaced to 25 times their
# cost, at most 4% of a long pass goes to them (10 times cost a 5,000-MachineSet pass 10%), and the
# Progressing counts still move every few seconds.
REPORT_SPACING = 25
# Each status object is written at most once per this many seconds; offers meanwhile merge.
WRITE_INTERVAL = 1.0
WRITE_BACKOFF_CAP = 60.0
# The ClusterOperator shows Progressing=True only for a pass longer than this, and then refreshes
# its counts this often; the MachineConfiguration carries the live counts (SPEC section 3).
CO_PROGRESS_INTERVAL = 10.0


class StatusClock:
    def __init__(
        self,
        now: Clock = time.monotonic,
        *,
        progress_interval: float = PROGRESS_INTERVAL,
        write_interval: float = WRITE_INTERVAL,
        co_progress_interval: float = CO_PROGRESS_INTERVAL,
    ) -> None:
        self.now = now
        self.progress_interval = progress_interval
        self.write_interval = write_interval
        self.co_progress_interval = co_progress_interval
        # Reports.
        self._last_report = -math.inf
        self._report_cost = 0.0
        # Writes, per object name.
        self._next_write: dict[str, float] = {}
        self._failures: dict[str, int] = {}
        self._backoff = Backoff(base=max(write_interval, 1.0), cap=WRITE_BACKOFF_CAP)
        # The ClusterOperator's hold-off.
        self._co_shape: tuple[tuple[str, str, str], ...] | None = None
        self._co_offered_at = -math.inf
        self._progress_since: float | None = None

    # -- reports (the status reconciler) ---------------------------------------------------------

    def report_due(self) -> bool:
        """After a machine key: is a mid-pass report due? At most once per progress interval (and
        REPORT_SPACING times the last report's cost), counted from the first reconcile: a short
        pass then writes its status once, at the end, not also at its first key. A settled pass of
        any length makes no mid-pass report at all: whether a report has anything to say is the
        status reconciler's (`StatusReconciler.after_machine_key`), not a question of time."""
        now = self.now()
        if self._last_report == -math.inf:
            self._last_report = now
        return now - self._last_report >= max(self.progress_interval, REPORT_SPACING * self._report_cost)

    def reported(self, started: float) -> None:
        """A report that began at `started` (this clock's time) is done."""
        self._last_report = self.now()
        self._report_cost = self._last_report - started

    # -- writes (the status writer, per object) ----------------------------------------------------

    def write_delay(self, name: str) -> float:
        """Seconds until `name` may be written again (0 or less: now)."""
        return self._next_write.get(name, -math.inf) - self.now()

    def wrote(self, name: str, started: float) -> None:
        """A write of `name` that began at `started` ended (written, or nothing to write)."""
        self._next_write[name] = started + self.write_interval
        self._failures.pop(name, None)

    def deferred(self, name: str, started: float) -> None:
        """`name` was not there to write: asked again after the usual interval."""
        self._next_write[name] = started + self.write_interval

    def write_failed(self, name: str, started: float) -> None:
        """A write of `name` failed: the next one waits a backoff that grows with each failure."""
        failures = self._failures.get(name, 0)
        self._failures[name] = failures + 1
        self._next_write[name] = max(started + self.write_interval, self.now() + self._backoff.delay(failures))

    # -- the ClusterOperator's Progressing hold-off (the status writer) -------------------------------

    def cluster_operator_due(self, co: ClusterOperatorStatus) -> bool:
        """Whether a ClusterOperator status offered now is worth writing.

        Settled states (and a change of Available, Degraded or Upgradeable) at once; while a pass
        progresses, nothing for its first `co_progress_interval` seconds (a short pass does not flap
        Progressing, as the cluster-version operator's monitors expect) and then the counts every
        `co_progress_interval` seconds. A long pass thus writes the MachineConfiguration about once
        a second and the ClusterOperator rarely, not both every second.
        """
        now = self.now()
        others = tuple((c.type, c.status, c.reason) for c in co.conditions if c.type != CO_PROGRESSING)
        progressing = co.condition(CO_PROGRESSING)
        if progressing is None or not progressing.is_true:
            self._progress_since = None
        elif self._progress_since is None:
            self._progress_since = now
        if self._progress_since is not None:
            if self._co_shape is None:
                self._co_shape = others  # the first report: a baseline to tell changes from
            changed = others != self._co_shape
            interval = self.co_progress_interval
            long_pass = now - self._progress_since >= interval
            if not changed and not (long_pass and now - self._co_offered_at >= interval):
                return False
        self._co_shape, self._co_offered_at = others, now
        return True
