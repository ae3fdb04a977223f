"""daemon/caches: which informer starts when. The caches no write waits for are listed after the
leader's first pass, and every MachineSet judged again once they have (DEFERRED_ROLES); the Cluster
API's caches start with its first pool (ON_DEMAND_ROLES, issue 48)."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

from bootimage_controller.daemon.caches import CacheStarts, judge_after_first_pass
from bootimage_controller.reconcile.store import CAPI_HOLDER, DEFERRED_ROLES, DEMANDING_ROLES, ON_DEMAND_ROLES


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
    deferred_started: bool = False

    async def start_deferred(self) -> None:
        self.deferred_started = True
        self.store.listed = True  # the lists are answered


def test_once_listed_after_the_first_pass_every_machineset_is_judged_again() -> None:
    store = Store()
    deferred = Deferred(store)
    queued: list[str] = []
    asyncio.run(judge_after_first_pass(store, Queue(), deferred, lambda: queued.append("all")))  # type: ignore[arg-type]
    assert deferred.deferred_started and queued == ["all"]


def test_a_new_leadership_with_the_caches_listed_judges_in_its_own_pass() -> None:
    store = Store(listed=True)
    deferred = Deferred(store, deferred_started=True)
    queued: list[str] = []
    asyncio.run(judge_after_first_pass(store, Queue(), deferred, lambda: queued.append("all")))  # type: ignore[arg-type]
    assert queued == []  # lead() queued every MachineSet already, judged from the start



class FakeInformer:
    """An informer as `CacheStarts` sees it: started or not, and its add handlers."""

    def __init__(self) -> None:
        self.started = False
        self.handlers: list[Any] = []

    def start(self) -> asyncio.Task[None]:
        self.started = True
        return asyncio.get_running_loop().create_task(asyncio.sleep(0))

    def add_handler(self, on_add: Any) -> None:
        self.handlers.append(on_add)

    async def wait_synced(self, _timeout: float | None = None) -> bool:
        return True

    def emit_add(self, obj: dict[str, Any]) -> None:
        for handler in self.handlers:
            handler(obj)


class Tasks:
    def __init__(self) -> None:
        self.names: list[str] = []

    def watch(self, task: asyncio.Task[Any], name: str) -> asyncio.Task[Any]:
        self.names.append(name)
        return task


def informers_of(roles: set[str]) -> dict[str, FakeInformer]:
    return {role: FakeInformer() for role in roles}


ROLES = {"MachineSet", "bootimages", *DEMANDING_ROLES, *DEFERRED_ROLES, *ON_DEMAND_ROLES}


def running(informers: dict[str, FakeInformer]) -> set[str]:
    return {role for role, i in informers.items() if i.started}


async def test_the_cluster_apis_caches_start_with_its_first_pool_and_boot_verifications_after_the_first_pass() -> None:
    informers = informers_of(ROLES)
    tasks = Tasks()
    caches = CacheStarts(informers, tasks)  # type: ignore[arg-type]
    caches.start()
    assert running(informers) == ROLES - DEFERRED_ROLES - ON_DEMAND_ROLES, "a cluster without a CAPI pool"

    informers[sorted(DEMANDING_ROLES)[0]].emit_add({"kind": "MachineSet", "metadata": {"name": "workers"}})
    assert running(informers) == ROLES - DEFERRED_ROLES, "templates and claim holder, not yet the CAPI Machines"
    assert CAPI_HOLDER in running(informers)

    await caches.start_deferred()
    assert running(informers) == ROLES
    assert len(tasks.names) == len(set(tasks.names)) == len(ROLES), "each started once"


async def test_without_a_pool_the_deferred_caches_leave_the_cluster_apis_machines_alone() -> None:
    informers = informers_of(ROLES)
    caches = CacheStarts(informers, Tasks())  # type: ignore[arg-type]
    caches.start()
    await caches.start_deferred()
    assert running(informers) == ROLES - ON_DEMAND_ROLES
    informers[sorted(DEMANDING_ROLES)[-1]].emit_add({"kind": "MachineDeployment", "metadata": {"name": "md"}})
    assert running(informers) == ROLES, "a pool after the first pass starts every Cluster API cache at once"


async def test_run_once_starts_the_deferred_caches_with_the_others() -> None:
    informers = informers_of(ROLES)
    CacheStarts(informers, Tasks()).start(with_deferred=True)  # type: ignore[arg-type]
    assert running(informers) == ROLES - ON_DEMAND_ROLES
