"""The daemon's read side: informers over every object it reads, a store over them, and the
cluster-wide inputs parsed from them.

`build_informers` is called by `daemon/run.py` (sample-controller's informer factory): the reconcilers
get the `InformerStore` and never build or swap a cache themselves. The store is the same
`lookups.ObjectStore` that `plan` implements over its input files.
"""

from __future__ import annotations

import asyncio
import builtins
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import structlog

from ..constants import CAPI_NAMESPACE, CLAIM_HOLDER_NAME, CLAIM_HOLDER_NAMESPACE
from ..core.cluster import (
    CAPI_MACHINE_READ,
    CAPI_READS,
    CAPI_VERIFICATION_READS,
    INFRA_MACHINE_READS,
    MACHINE_READS,
    NODE_READS,
    TEMPLATE_READS,
    VERIFICATION_READS,
    ClusterObjects,
    ClusterRead,
    daemon_reads,
    upgrade_blocker,
    with_capi_version,
)
from ..core.context import PlanningContext, golden_origin, planning_context
from ..core.golden import GoldenBootImages
from ..core.machine_cache import trim_capi_machine, trim_infra_machine, trim_machine, trim_node
from ..core.manager import other_writer_entries
from ..data import bundled_index
from ..errors import BootImageControllerError
from ..kube.fence import UpgradeGateClosed
from ..kube.informer import LIST_PAGE_SIZE, Informer, ListWatch

log = structlog.get_logger(__name__)

# Boot verification reads a few fields of each Machine and Node: the caches keep only those.
TRIMS = {**dict(zip((r.role for r in VERIFICATION_READS), (trim_machine, trim_node), strict=True)),
         CAPI_MACHINE_READ.role: trim_capi_machine, **{r.role: trim_infra_machine for r in INFRA_MACHINE_READS}}
# A Node is 10-20 KB as served: 100 of them decoded at once, not 500 (kube.informer.LIST_PAGE_SIZE).
TRIMMED_PAGE_SIZE = 100
MAPI_HOLDER = "holder"  # the informer of the Machine API's claim holder
CAPI_HOLDER = "holder:capi"  # the informer of the Cluster API's claim holder


def build_informers(api: Any, capi_version: str, platform: str | None = None) -> dict[str, Informer]:
    """One informer per row of `daemon_reads(platform)` (by role), and one per claim holder."""
    reads = with_capi_version(daemon_reads(platform), capi_version)
    # The Cluster API's reads may be refused (403) where its optional rights are not installed
    # (manifests/components/capi): they then count as empty. No other read may: a refused read
    # of the MCO's version or gates would otherwise be taken for "no MCO" and let us write.
    optional = {r.role for r in (*CAPI_READS, *TEMPLATE_READS, *CAPI_VERIFICATION_READS)}
    informers = {read.role: Informer(_list_watch(api, read), absent_ok=read.group != "",
                                     forbidden_ok=read.role in optional, trim=TRIMS.get(read.role),
                                     page_size=TRIMMED_PAGE_SIZE if read.role in TRIMS else LIST_PAGE_SIZE,
                                     keep_managed_fields=other_writer_entries)
                 for read in reads}
    informers[MAPI_HOLDER] = Informer(ListWatch.config_maps(api, CLAIM_HOLDER_NAMESPACE, name=CLAIM_HOLDER_NAME))
    informers[CAPI_HOLDER] = Informer(ListWatch.config_maps(api, CAPI_NAMESPACE, name=CLAIM_HOLDER_NAME),
                                      forbidden_ok=True)
    return informers


def _list_watch(api: Any, read: ClusterRead) -> ListWatch:
    """The informer's list/watch for one `ClusterRead`."""
    if read.kind == "ConfigMap":
        assert read.namespace is not None
        return ListWatch.config_maps(api, read.namespace, name=read.name)
    if read.kind == "Node":
        return ListWatch.nodes(api, label_selector=read.label_selector)
    # absent_ok (above): a cluster without one of these CRDs (e.g. no ControlPlaneMachineSet) must
    # not keep the daemon unready forever; the kind simply has no objects.
    return ListWatch.custom_objects(
        api, read.group, read.version, read.plural, read.namespace, name=read.name, label_selector=read.label_selector
    )


# Caches no write waits for: boot verification's Machines (of both APIs) and Nodes (a large cluster's biggest
# lists, 3 Machines and a Node per pool member). The first boot image patch goes out while they
# list; verification judges nothing until they have (`BootVerification.applies_to`), then the
# MachineSets planned before are queued again (daemon/run.py, `MachineReconciler.judge_again`).
# `run --once` waits for them: its one pass judges too.
DEFERRED_ROLES = frozenset(r.role for r in (*VERIFICATION_READS, *CAPI_VERIFICATION_READS))
# Caches that only a Cluster API pool needs: its infrastructure templates, its Machines and their
# infrastructure machines, and its claim holder. They start once the cluster has a Cluster API
# MachineSet or MachineDeployment (`daemon/caches.CacheStarts`, issue 48); until then each would
# hold a watch for nothing (one bookmark a minute, a wakeup each: the settled daemon's idle CPU).
ON_DEMAND_ROLES = frozenset((*(r.role for r in (*TEMPLATE_READS, *CAPI_VERIFICATION_READS)), CAPI_HOLDER))
# The Cluster API pools whose first object starts the `ON_DEMAND_ROLES`.
DEMANDING_ROLES = frozenset(r.role for r in CAPI_READS)


class InformerStore:
    """Objects by role from the watch caches (a `lookups.ObjectStore`), and whether they are whole.

    An informer of `on_demand` that has not been started counts as listed and empty: nothing needs
    it yet (ON_DEMAND_ROLES). Once started, it gates like the others until it has listed.
    """

    def __init__(self, informers: Mapping[str, Informer], deferred: frozenset[str] = frozenset(),
                 on_demand: frozenset[str] = frozenset()) -> None:
        self.informers = informers
        self.deferred = deferred  # roles whose first list no write waits for (DEFERRED_ROLES)
        self.on_demand = on_demand  # roles started only when needed (ON_DEMAND_ROLES)

    def _gating(self, deferred: bool) -> list[Informer]:
        return [i for role, i in self.informers.items()
                if (deferred or role not in self.deferred) and (i.started or role not in self.on_demand)]

    def role_synced(self, role: str) -> bool:
        informer = self.informers.get(role)
        return informer is not None and informer.has_synced.is_set()

    def get(self, kind: str, namespace: str, name: str) -> dict[str, Any] | None:
        informer = self.informers.get(kind)
        return informer.get(f"{namespace}/{name}" if namespace else name) if informer is not None else None

    def list(self, kind: str) -> Sequence[dict[str, Any]]:
        informer = self.informers.get(kind)
        return informer.list() if informer is not None else []

    def one(self, role: str) -> dict[str, Any] | None:
        """The single object of a read by name (the ClusterVersion, a claim holder, ...)."""
        items = self.list(role)
        return items[0] if items else None

    async def wait_synced(self, timeout: float | None = None, *, deferred: bool = False) -> bool:
        """Whether the caches writes wait for listed within `timeout` (`deferred`: every cache).
        Asked again after each round: a list can start an on-demand cache (a Cluster API
        MachineSet listed starts its templates'), which then has to list too."""
        loop = asyncio.get_running_loop()
        deadline = None if timeout is None else loop.time() + timeout
        while not self.synced(deferred=deferred):
            left = None if deadline is None else max(0.0, deadline - loop.time())
            if not all(await asyncio.gather(*(i.wait_synced(left) for i in self._gating(deferred)))):
                return False
        return True

    def synced(self, *, deferred: bool = False) -> bool:
        return all(i.has_synced.is_set() for i in self._gating(deferred))

    def sync_errors(self) -> dict[str, str]:
        """The last error of each informer that has not listed yet (why the caches are not synced)."""
        gating = self._gating(deferred=True)
        return {
            name: informer.last_error or "no answer yet"
            for name, informer in self.informers.items()
            if informer in gating and not informer.has_synced.is_set()
        }

    def access_notes(self) -> builtins.list[str]:
        """What the daemon may not read (optional kinds answered 403), for the ClusterOperator: the
        Cluster API's rights come in an optional part of the install (manifests/components/capi)."""
        refused = sorted({i.source.resource for i in self.informers.values() if i.forbidden})
        if not refused:
            return []
        return [f"no rights to list {', '.join(refused)}: Cluster API objects are not managed (add the "
                "manifests/components/capi kustomize component to manage them)"]


@dataclass
class ClusterInputs:
    """Parsed cluster-wide inputs, rebuilt when any of their objects change."""

    context: PlanningContext | None
    problem: str | None  # why nothing can be planned (bad golden data, bad enrollment)
    objects: ClusterObjects


class ClusterView:
    """The cluster-wide inputs as the caches have them: parsed once per change (`changed()`)."""

    def __init__(self, store: InformerStore, gitops_labels: tuple[str, ...] = ()) -> None:
        self.store = store
        self.gitops_labels = gitops_labels
        self._inputs: ClusterInputs | None = None
        self._golden: tuple[tuple[Any, Any], GoldenBootImages] | None = None

    def prepare(self, configmap: Mapping[str, Any]) -> None:
        """What the inputs need from the golden ConfigMap alone, done as soon as it arrives: its
        informer lists long before the MachineSets', so the first plan no longer waits the ~7 ms of
        parsing it and loading the bundled image index (issue 36)."""
        self.parse_golden(configmap)
        bundled_index()

    def parse_golden(self, configmap: Mapping[str, Any] | None) -> GoldenBootImages | None:
        """The golden boot images of `configmap`, parsed once per version of it (uid and
        resourceVersion): the inputs are rebuilt at every cluster-wide change (a Node, the
        ClusterVersion), and parsing the golden data was half of that. None without a version or
        when it does not parse: `planning_context` then parses it and says why."""
        meta = (configmap or {}).get("metadata") or {}
        version = (meta.get("uid"), meta.get("resourceVersion"))
        if configmap is None or None in version:
            return None
        if self._golden is None or self._golden[0] != version:
            try:
                self._golden = (version, GoldenBootImages.from_configmap(configmap))
            except BootImageControllerError:
                return None
        return self._golden[1]

    def changed(self) -> None:
        self._inputs = None

    @property
    def parsed(self) -> ClusterInputs | None:
        """The inputs if parsed since the last change (None: not yet)."""
        return self._inputs

    def upgrade_gate(self) -> UpgradeGateClosed | None:
        """None while boot images may be written; else why not. Read from the ClusterVersion as the
        watch has it now (not from the inputs parsed at the last change), at plan time and again
        when each patch is sent (a `write_preconditions` check)."""
        blocker = upgrade_blocker(self.store.one("clusterversion"))
        return None if blocker is None else UpgradeGateClosed(blocker)

    def context_to_plan(self) -> PlanningContext | None:
        """The planning context while boot images may be planned and written; None when the
        cluster-wide inputs do not parse or an upgrade is in progress or its state unknown (SPEC
        section 3). The status key says which; nothing is written meanwhile."""
        ctx = self.inputs().context
        return ctx if ctx is not None and self.upgrade_gate() is None else None

    def objects(self) -> ClusterObjects:
        one = self.store.one
        # Control-plane Nodes carry the master label, the control-plane label, or both.
        nodes = {(n.get("metadata") or {}).get("name"): n for read in NODE_READS for n in self.store.list(read.role)}
        return ClusterObjects.from_roles(one, nodes=tuple(nodes.values()))

    def inputs(self) -> ClusterInputs:
        if self._inputs is None:
            objects = self.objects()
            # The MachineSets are handed to the context (platform from their providerSpec kinds when
            # Infrastructure says none) but not kept: the inputs live until a cluster-wide change,
            # and holding the cache's objects of the moment would keep every replaced version of
            # every MachineSet alive after a pass (5,000 of them: +20 MiB).
            machines = tuple(o for read in MACHINE_READS for o in self.store.list(read.role))
            golden = self.parse_golden(objects.bootimages)
            try:
                ctx = planning_context(replace(objects, machines=machines), gitops_labels=self.gitops_labels,
                                       golden=golden, golden_origin=golden_origin(objects) if golden else None,
                                       published=bundled_index())
                self._inputs = ClusterInputs(ctx, None, objects)
            except BootImageControllerError as exc:
                log.error("cannot plan: bad cluster input", error=str(exc))
                self._inputs = ClusterInputs(None, str(exc), objects)
        return self._inputs
