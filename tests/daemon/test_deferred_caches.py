"""The caches no write waits for (daemon/run.DeferredCaches): listed after the leader's first pass,
and every MachineSet judged again once they have (reconcile/store.DEFERRED_ROLES)."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from bootimage_controller.daemon.run import judge_after_first_pass


@dataclass
class Store:
    listed: bool = False

    def synced(self, *, deferred: bool = False) -> bool:
        return self.listed

    async def wait_synced(self, timeout: float | None = None, *, deferred: bool = False) -> bool:
        return self.listed


@dataclass
class Queue:
    busy: bool = False


@dataclass
class Deferred:
    store: Store
    started: bool = False

    async def start(self) -> None:
        self.started = True
        self.store.listed = True  # the lists are answered


def test_once_listed_after_the_first_pass_every_machineset_is_judged_again() -> None:
    store = Store()
    deferred = Deferred(store)
    queued: list[str] = []
    asyncio.run(judge_after_first_pass(store, Queue(), deferred, lambda: queued.append("all")))  # type: ignore[arg-type]
    assert deferred.started and queued == ["all"]


def test_a_new_leadership_with_the_caches_listed_judges_in_its_own_pass() -> None:
    store = Store(listed=True)
    deferred = Deferred(store, started=True)
    queued: list[str] = []
    asyncio.run(judge_after_first_pass(store, Queue(), deferred, lambda: queued.append("all")))  # type: ignore[arg-type]
    assert queued == []  # lead() queued every MachineSet already, judged from the start

