"""Read every cluster of a `fleet` run: at most `parallel` at a time, each within `timeout`, with a
progress line on stderr. Rows are handed on as each cluster finishes, so a cluster's objects are
dropped once its rows are made: memory follows `parallel`, not the fleet's size."""

from __future__ import annotations

import asyncio
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TextIO

from ..core.fleet import ClusterRow, failed_cluster
from .read import FleetOptions, read_cluster, tree_parsers
from .sources import ClusterSource

DEFAULT_PARALLEL = 8
DEFAULT_TIMEOUT = 60.0
PROGRESS_EVERY = 1.0  # seconds between progress lines (a terminal's line is redrawn in place)


@dataclass
class Progress:
    """`fleet: 120/1000 clusters read (3 unreadable), 14 s` on stderr, at most once a second."""

    total: int
    out: TextIO = field(default_factory=lambda: sys.stderr)
    done: int = 0
    failed: int = 0
    started: float = field(default_factory=time.monotonic)
    _last: float = 0.0

    def tick(self, failed: bool, force: bool = False) -> None:
        self.done += 1
        self.failed += failed
        now = time.monotonic()
        if force or now - self._last >= PROGRESS_EVERY or self.done == self.total:
            self._last = now
            tty = self.out.isatty()
            line = (f"fleet: {self.done}/{self.total} clusters read"
                    f"{f' ({self.failed} unreadable)' if self.failed else ''}, {now - self.started:.0f} s")
            self.out.write(("\r\033[K" + line) if tty else line + "\n")
            if tty and self.done == self.total:
                self.out.write("\n")
            self.out.flush()


async def read_fleet(
    sources: Sequence[ClusterSource],
    options: FleetOptions,
    *,
    parallel: int = DEFAULT_PARALLEL,
    timeout: float = DEFAULT_TIMEOUT,
    on_rows: Callable[[list[ClusterRow]], None],
    progress: Progress | None = None,
) -> None:
    """Read `sources`, calling `on_rows` with each cluster's rows as it finishes (in any order).

    A must-gather tree still being parsed when its time is up is reported as not read; its worker
    (a process with many trees, else a thread) finishes in the background and its result is dropped."""

    parsers = tree_parsers(sum(1 for s in sources if s.tree is not None), parallel, options)

    async def one(source: ClusterSource) -> None:
        try:
            rows = await asyncio.wait_for(read_cluster(source, options, parsers), timeout)
        except TimeoutError:
            rows = [failed_cluster(source.name, source.description, f"not read within {timeout:g} s (--timeout)")]
        on_rows(rows)
        if progress is not None:
            progress.tick(failed=rows[0].error is not None)

    # Workers pull from one iterator: no task per cluster waits in memory for its turn.
    pending = iter(sources)

    async def worker() -> None:
        for source in pending:
            await one(source)

    try:
        await asyncio.gather(*(worker() for _ in range(max(1, min(parallel, len(sources))))))
    finally:
        if parsers is not None:
            parsers.shutdown(wait=False, cancel_futures=True)
