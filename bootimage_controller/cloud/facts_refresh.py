"""Credentials read by name, again at most once a minute (the cloud's and vCenter's alike).

The credentials Secrets are read by name (RBAC grants `get` on those names only, so they cannot be
watched). A reader therefore re-reads them on use, at most once per `seconds`: a rotated key is
picked up within a minute, and a pass over thousands of MachineSets costs one read, not thousands.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

CREDENTIALS_REFRESH_SECONDS = 60.0


class AtMostEvery:
    """Runs a load at most once per `seconds`, one at a time. The clock starts only when the load
    returns: a load that raises (the API server did not answer) is tried again at the next use,
    never skipped for a minute with stale or missing credentials."""

    def __init__(self, seconds: float = CREDENTIALS_REFRESH_SECONDS) -> None:
        self.seconds = seconds
        self._lock = asyncio.Lock()
        self._loaded_at = float("-inf")

    async def run(self, load: Callable[[], Awaitable[None]]) -> None:
        async with self._lock:
            now = asyncio.get_running_loop().time()
            if now - self._loaded_at < self.seconds:
                return
            await load()
            self._loaded_at = now

    def expire(self) -> None:
        """The next `run` loads again (the clients were dropped: the proxy changed)."""
        self._loaded_at = float("-inf")
