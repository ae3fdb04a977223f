"""cProfile statistics as short tables: where the time goes."""

from __future__ import annotations

import os
import pstats
from dataclasses import dataclass
from typing import Any

from machinesets import REPO

PACKAGE = str(REPO / "bootimage_controller")
# Entry points and imports: their cumulative time is the whole run, idle waits included.
_NOT_INFORMATIVE = frozenset({"main", "handler", "run_daemon", "_run", "_serve", "<module>"})


@dataclass(frozen=True)
class ProfileRow:
    function: str
    calls: int  # for coroutines cProfile counts every resumption as a call
    own_seconds: float
    cumulative_seconds: float


def _label(filename: str, line: int, name: str) -> str:
    where = os.path.relpath(filename, REPO) if filename.startswith(str(REPO)) else os.path.basename(filename)
    return f"{where}:{line}({name})" if line else name


def top_functions(stats: pstats.Stats, rows: int, *, by: str = "own", package_only: bool = False) -> list[ProfileRow]:
    """The `rows` functions with the most own (or cumulative) time; `package_only`: ours only."""
    raw: dict[Any, Any] = stats.stats  # type: ignore[attr-defined]
    entries = [
        ProfileRow(_label(filename, line, name), calls, own, cumulative)
        for (filename, line, name), (_cc, calls, own, cumulative, _callers) in raw.items()
        if not package_only or (filename.startswith(PACKAGE) and name not in _NOT_INFORMATIVE)
    ]
    key = (lambda r: r.own_seconds) if by == "own" else (lambda r: r.cumulative_seconds)
    entries.sort(key=key, reverse=True)
    return entries[:rows]


def load(path: str) -> pstats.Stats:
    return pstats.Stats(path)
