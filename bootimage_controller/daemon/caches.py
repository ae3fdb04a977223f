"""Which informers run, and from when. Every replica runs them; only the starts differ.

- **At start**: every cache a write waits for.
- **Deferred** (reconcile/store.DEFERRED_ROLES): boot verification's Machines and Nodes, a large
  cluster's biggest lists, started by the first leader after its first pass, so that listing them
  (at 5,000 pools, 15,000 Machines and as many Nodes) takes nothing from the first patches. Then
  the MachineSets planned before are judged again (`judge_after_first_pass`).
- **On demand** (reconcile/store.ON_DEMAND_ROLES): what only a Cluster API pool needs (its
  templates, Machines, infrastructure machines and claim holder), started when the first Cluster
  API MachineSet or MachineDeployment is seen. On an OpenShift cluster without one (the Cluster
  API is opt-in) each would hold a watch for nothing: a bookmark a minute, and with it a wakeup of
  the settled daemon (issue 48). Until started, the store counts them as listed and empty.
  Once started they run until the process ends: a cluster that had a Cluster API pool is likely to
  have one again, and stopping would cost a list at the next one. Deferred and on demand at once
  (the Cluster API's Machines) starts when both hold.

`run --once` starts the deferred caches with the others: its one pass judges boot verdicts too.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping

import structlog

from ..kube.informer import Informer, KubeObject
from ..kube.workqueue import WorkQueue
from ..reconcile.store import DEFERRED_ROLES, DEMANDING_ROLES, ON_DEMAND_ROLES, InformerStore
from .supervision import Supervisor

log = structlog.get_logger(__name__)

# How long a start waits for the caches it begins to list, and how long the deferred caches wait
# for the first pass to end (a pass kept busy by retries).
SYNC_TIMEOUT = 120.0
FIRST_PASS_WAIT = 60.0


class CacheStarts:
    """Starts each informer at its time (module docstring)."""

    def __init__(self, informers: Mapping[str, Informer], supervisor: Supervisor, *,
                 deferred: frozenset[str] = DEFERRED_ROLES, on_demand: frozenset[str] = ON_DEMAND_ROLES) -> None:
        self.informers = informers
        self.supervisor = supervisor
        self.deferred = deferred & informers.keys()
        self.on_demand = on_demand & informers.keys()
        self.deferred_started = False
        self.demanded = False

    def start(self, *, with_deferred: bool = False) -> None:
        """Start what runs from the start (`with_deferred`: the deferred caches too, for `run --once`),
        and watch the Cluster API pools for the first one."""
        for role in DEMANDING_ROLES & self.informers.keys():
            self.informers[role].add_handler(on_add=self._pool_seen)
        self.deferred_started = with_deferred
        for role in self.informers:
            if self._due(role):
                self._start(role)

    async def start_deferred(self) -> None:
        """The deferred caches, one after the other: two lists decoding pages at once would double
        the peak. Idempotent."""
        if self.deferred_started:
            return
        self.deferred_started = True
        for role in sorted(self.deferred):
            if self._due(role):
                self._start(role)
                await self.informers[role].wait_synced(SYNC_TIMEOUT)

    def _pool_seen(self, pool: KubeObject) -> None:
        if self.demanded:
            return
        self.demanded = True
        log.info("a Cluster API pool exists: starting the Cluster API's caches", pool=pool.get("kind"),
                 name=(pool.get("metadata") or {}).get("name"))
        for role in sorted(self.on_demand):
            if self._due(role):
                self._start(role)

    def _due(self, role: str) -> bool:
        return ((role not in self.deferred or self.deferred_started)
                and (role not in self.on_demand or self.demanded))

    def _start(self, role: str) -> None:
        informer = self.informers[role]
        if not informer.started:
            self.supervisor.watch(informer.start(), f"informer-{role}")


async def judge_after_first_pass(store: InformerStore, queue: WorkQueue, caches: CacheStarts | None,
                                 judge_again: Callable[[], None]) -> None:
    """Start the deferred caches once the first pass has drained the queue (or FIRST_PASS_WAIT has
    passed); once they have listed, the MachineSets planned before, whose boot verdict could not be
    judged then (`MachineReconciler.judge_again`)."""
    if store.synced(deferred=True):
        # Listed under an earlier leadership (or by `--once`): this pass judges from the start.
        log.info("boot verification's caches listed before this pass")
        return
    if caches is not None and not caches.deferred_started:
        waited = 0.0
        while queue.busy and waited < FIRST_PASS_WAIT:
            await asyncio.sleep(0.2)
            waited += 0.2
        await caches.start_deferred()
    while not await store.wait_synced(SYNC_TIMEOUT, deferred=True):
        log.warning("boot verification's caches have not listed yet; no verdict is judged until they do",
                    errors=store.sync_errors())
    log.info("boot verification's caches listed: judging the MachineSets planned before")
    judge_again()
