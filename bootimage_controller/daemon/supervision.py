"""Guarded root tasks: a long-running task that ends unexpectedly fails the process, loudly.

asyncio forgets a task that dies: its exception is logged (maybe) when the task is collected, and
the rest of the process goes on as if nothing happened: a dead informer leaves a cache that never
changes again, a dead event writer leaves events queued forever, and `/readyz` stays green. Every
task the daemon starts for its whole life is therefore `watch`ed here: when one ends before
`stopping()` was called (an exception, a cancellation nobody asked for, or just returning), the
cause is logged, `healthy` turns False (so `/readyz` fails at once), and `failed` is set; the
daemon then releases its Lease and exits non-zero so that the pod restarts clean.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any

import structlog

log = structlog.get_logger(__name__)


class Supervisor:
    def __init__(self) -> None:
        self.failed = asyncio.Event()
        self.failure: str | None = None
        self._stopping = False

    @property
    def healthy(self) -> bool:
        return not self.failed.is_set()

    def stopping(self) -> None:
        """From now on tasks are expected to end (shutdown)."""
        self._stopping = True

    def watch(self, task: asyncio.Task[Any], name: str, *, finite: bool = False) -> asyncio.Task[Any]:
        """Watch `task`. A `finite` task may end or be cancelled (event writers are, at each flush);
        only an exception from it is a failure."""
        task.add_done_callback(lambda t: self._ended(t, name, finite))
        return task

    def spawn(self, coro: Coroutine[Any, Any, Any], name: str, *, finite: bool = False) -> asyncio.Task[Any]:
        return self.watch(asyncio.get_running_loop().create_task(coro, name=name), name, finite=finite)

    def fail(self, name: str, cause: str) -> None:
        if self.failure is None:
            self.failure = f"{name}: {cause}"
        log.error("a long-running task ended unexpectedly; exiting", task=name, cause=cause)
        self.failed.set()

    def _ended(self, task: asyncio.Task[Any], name: str, finite: bool) -> None:
        if task.cancelled():
            if not finite and not self._stopping:
                self.fail(name, "cancelled")
            return
        exc = task.exception()  # retrieved here, so asyncio never reports it as lost
        if exc is not None:
            if not self._stopping:
                self.fail(name, f"{type(exc).__name__}: {exc}")
            else:
                log.warning("task failed during shutdown", task=name, error=f"{type(exc).__name__}: {exc}")
        elif not finite and not self._stopping:
            self.fail(name, "returned")


__all__ = ["Supervisor"]
