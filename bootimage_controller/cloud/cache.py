"""A small TTL cache for cloud answers, with a clock seam for tests.

Only answers are cached (the image exists or not, its state); failed lookups are not, so the next
reconcile asks again. Not thread-safe: the verifier uses it from the event loop only.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")

Clock = Callable[[], float]


class TtlCache(Generic[K, V]):
    def __init__(self, ttl: float, clock: Clock = time.monotonic, max_entries: int = 10_000) -> None:
        if ttl < 0:
            raise ValueError("ttl must be >= 0")
        self.ttl = ttl
        self._clock = clock
        self._max = max_entries
        self._entries: dict[K, tuple[float, V]] = {}

    def get(self, key: K) -> V | None:
        entry = self._entries.get(key)
        if entry is None:
            return None
        expires, value = entry
        if self._clock() >= expires:
            del self._entries[key]
            return None
        return value

    def put(self, key: K, value: V) -> None:
        if self.ttl == 0:
            return
        if len(self._entries) >= self._max:
            self._evict()
        self._entries[key] = (self._clock() + self.ttl, value)

    def discard_if(self, predicate: Callable[[K], bool]) -> None:
        for key in [k for k in self._entries if predicate(k)]:
            del self._entries[key]

    def clear(self) -> None:
        self._entries.clear()

    def __len__(self) -> int:
        return len(self._entries)

    def _evict(self) -> None:
        now = self._clock()
        for key in [k for k, (exp, _) in self._entries.items() if exp <= now]:
            del self._entries[key]
        # Still full: drop the oldest insertions (dicts keep insertion order).
        while len(self._entries) >= self._max:
            del self._entries[next(iter(self._entries))]
