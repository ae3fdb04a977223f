"""A loop a test runs beside the daemon (a cloud provider, a rogue writer) for the length of a block."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Coroutine
from typing import Any


@contextlib.asynccontextmanager
async def running(work: Coroutine[Any, Any, None]) -> AsyncIterator[None]:
    """`work` as a task while the block runs, cancelled after it. A failure of `work` itself is
    raised when the block ends: a stand-in that stopped must not pass for one that did nothing."""
    task = asyncio.create_task(work)
    try:
        yield
    finally:
        if task.done():
            task.result()
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
