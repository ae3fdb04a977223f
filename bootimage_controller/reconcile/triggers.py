"""What makes a key worth reconciling: the informers' events, mapped to keys.

- A machine object added, deleted, or changed where the planner reads it (`keys.relevant_view`):
  its own key (a deleted one's reconcile drops its outcome). A Machine API pool that changes sides also re-queues its CAPI mirror.
- An infrastructure template changed: every CAPI key (their decisions read it).
- Boot verification: a Machine (either API), its infrastructure machine or its Node changed: the
  pools it counts for.
- A cluster-wide input changed (golden data, Infrastructure, Nodes, MachineConfiguration spec,
  the MCO's version or gates, the ClusterVersion's release or gate): the parsed inputs are dropped
  and every key is queued.
- The MCO reported a new pass: the MCO-managed keys (compared with our target after it).
- A claim holder changed: `@claims`; deleted: every key (patches held back go ahead).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from functools import partial
from typing import Any, Protocol

from ..constants import MACHINESET_KIND, Manager
from ..core.capi.verification import capi_keys_of_machine, infra_ref
from ..core.cluster import (
    CAPI_MACHINE_READ,
    CAPI_READS,
    INFRA_MACHINE_READS,
    MACHINE_READS,
    NODE_READS,
    TEMPLATE_READS,
    VERIFICATION_READS,
    upgrade_blocker,
)
from ..core.companion import McoPass
from ..core.model import get_path
from ..core.verification import machine_set_names
from ..kube.informer import Informer, resource_version
from .keys import CLAIMS_KEY, machine_key, machine_update
from .loop import KeySink
from .state import MachineSetState
from .store import CAPI_HOLDER, MAPI_HOLDER, ClusterView, InformerStore

Handler = Callable[..., None]


class OwnWrites(Protocol):
    """Who knows our own patches: the machine reconciler's `reconcile.state.WriteMemory` (it
    records each patch as it is sent)."""

    def wrote(self, key: str, old: dict[str, Any]) -> bool:
        """Whether a machine object's change from this old version is our own patch landing."""
        ...


# How long the echo of our own patch waits before its reconcile. It is a confirmation, not news:
# its reconcile plans the object again and finds it current. Queued at once, the echoes of a pass's
# first writes took CPU from the writes still to come (a hundred reconciles at the end of a
# 100-MachineSet pass, on the same 2 cores as the API server; issue 36). A second is longer than
# a 1,000-MachineSet pass takes to start its last writes and short enough for the status to follow.
OWN_WRITE_ECHO_DELAY = 1.0


def _on(informers: Mapping[str, Informer], names: tuple[str, ...], add: Handler, update: Handler,
        delete: Handler) -> None:
    """The three handlers of the informers named `names`."""
    for name in names:
        informers[name].add_handler(on_add=add, on_update=update, on_delete=delete)


def _ignored(_obj: dict[str, Any]) -> None:
    """An event that changes no key."""


class Triggers:
    def __init__(self, store: InformerStore, cluster: ClusterView, outcomes: Mapping[str, MachineSetState],
                 sink: KeySink, enqueue_all: Callable[[], None], own_writes: OwnWrites | None = None) -> None:
        self.store = store
        self.cluster = cluster
        self.outcomes = outcomes
        self.sink = sink
        self.enqueue_all = enqueue_all
        self.own_writes = own_writes
        # Machine keys by the Node they name, built on the first Node event after a Machine changed:
        # a Node event looks its Machine up, never scans them all (15,000 Nodes listing against
        # 15,000 Machines would be 225 million reads).
        self._machines_by_node: dict[str, list[dict[str, Any]]] | None = None
        # CAPI Machines by the infrastructure machine they name (namespace, kind, name), the same way.
        self._capi_by_infra: dict[tuple[Any, ...], list[dict[str, Any]]] | None = None

    def attach(self, informers: Mapping[str, Informer]) -> None:
        on = partial(_on, informers)
        on(tuple(r.role for r in (*MACHINE_READS, *CAPI_READS)), self._machine_added, self._machine_updated,
           self._machine_deleted)
        # Only the cluster's platform's template kind is watched (core.cluster.daemon_reads).
        on(tuple(r.role for r in TEMPLATE_READS if r.role in informers), self._template_changed,
           self._template_updated, self._template_changed)
        on(("bootimages", "infrastructure", *(r.role for r in NODE_READS)), self.cluster_changed,
           self._cluster_updated, self.cluster_changed)
        on(("bootimages",), self.cluster.prepare, self._golden_updated, _ignored)
        on(("machineconfiguration",), self.cluster_changed, self._machineconfiguration_updated, self.cluster_changed)
        on(("mco_operator", "feature_gate"), self.cluster_changed, self._mco_updated, self.cluster_changed)
        on(("clusterversion",), self.cluster_changed, self._clusterversion_updated, self.cluster_changed)
        on((MAPI_HOLDER, CAPI_HOLDER), self._holder_event, self._holder_updated, self._holder_deleted)
        # Boot verification (SPEC section 3b): a Machine or its Node changed: its MachineSet's verdict may.
        if VERIFICATION_READS[0].role in informers:
            on((VERIFICATION_READS[0].role,), self._boot_machine_event, self._boot_machine_updated,
               self._boot_machine_event)
        if VERIFICATION_READS[1].role in informers:
            on((VERIFICATION_READS[1].role,), self._node_event, self._node_updated, self._node_event)
        if CAPI_MACHINE_READ.role in informers:
            on((CAPI_MACHINE_READ.role,), self._capi_machine_event, self._capi_machine_updated,
               self._capi_machine_event)
        on(tuple(r.role for r in INFRA_MACHINE_READS if r.role in informers), self._infra_machine_event,
           self._infra_machine_updated, self._infra_machine_event)

    def _golden_updated(self, _old: dict[str, Any], new: dict[str, Any]) -> None:
        self.cluster.prepare(new)  # parsed once per version, as soon as it arrives

    # ---- machine objects ------------------------------------------------------------------------
    def _machine_added(self, obj: dict[str, Any]) -> None:
        self._platform_evidence_changed()
        self.sink.add(machine_key(obj))

    def _machine_updated(self, old: dict[str, Any], new: dict[str, Any]) -> None:
        update = machine_update(old, new)
        if update is None:
            return
        if update.platform_evidence:
            self._platform_evidence_changed()
        if self.own_writes is not None and self.own_writes.wrote(update.key, old):
            self.sink.add_after(update.key, OWN_WRITE_ECHO_DELAY)
        else:
            self.sink.add(update.key)
        if update.mirror is not None:
            self.sink.add(update.mirror)

    def _machine_deleted(self, obj: dict[str, Any]) -> None:
        self._platform_evidence_changed()
        self.sink.add(machine_key(obj))  # its reconcile finds it gone: its outcome is dropped
        self.sink.add(CLAIMS_KEY)

    def _platform_evidence_changed(self) -> None:
        # Without an Infrastructure platform the MachineSets' providerSpec kinds name it
        # (`context.platform_fact`): adding, removing or re-kinding one can change it.
        parsed = self.cluster.parsed
        if parsed is not None and parsed.context is not None and parsed.context.platform_from_machines:
            self.cluster_changed()

    # ---- boot verification: Machines and their Nodes ----------------------------------------------
    def _boot_machine_event(self, machine: dict[str, Any]) -> None:
        self._machines_by_node = None
        self._queue_machine_sets(machine)

    def _queue_machine_sets(self, machine: dict[str, Any]) -> None:
        namespace = str((machine.get("metadata") or {}).get("namespace", ""))
        for name in machine_set_names(machine, self.store.list(MACHINESET_KIND)):
            self.sink.add(f"{MACHINESET_KIND}/{namespace}/{name}")

    def _boot_machine_updated(self, old: dict[str, Any], new: dict[str, Any]) -> None:
        if _without_version(old) != _without_version(new):  # the caches keep only what verification reads
            self._boot_machine_event(new)

    def _node_event(self, node: dict[str, Any]) -> None:
        name = str((node.get("metadata") or {}).get("name"))
        if self._machines_by_node is None:
            by_node: dict[str, list[dict[str, Any]]] = {}
            for machine in (*self.store.list(VERIFICATION_READS[0].role), *self.store.list(CAPI_MACHINE_READ.role)):
                ref = get_path(machine, ("status", "nodeRef", "name"))
                if isinstance(ref, str):
                    by_node.setdefault(ref, []).append(machine)
            self._machines_by_node = by_node
        for machine in self._machines_by_node.get(name, ()):
            if get_path(machine, ("spec", "infrastructureRef")) is not None:
                self._queue_capi_objects(machine)
            else:
                self._queue_machine_sets(machine)

    def _capi_machine_event(self, machine: dict[str, Any]) -> None:
        self._machines_by_node = None
        self._capi_by_infra = None
        self._queue_capi_objects(machine)

    def _capi_machine_updated(self, old: dict[str, Any], new: dict[str, Any]) -> None:
        if _without_version(old) != _without_version(new):
            self._capi_machine_event(new)

    def _queue_capi_objects(self, machine: dict[str, Any]) -> None:
        namespace = str((machine.get("metadata") or {}).get("namespace", ""))
        for kind, name in capi_keys_of_machine(machine):
            self.sink.add(f"{kind}/{namespace}/{name}")

    def _infra_machine_event(self, infra: dict[str, Any]) -> None:
        """An infrastructure machine changed (its image, the cloud's error): the pools of the CAPI
        Machine that names it."""
        if self._capi_by_infra is None:
            by_infra: dict[tuple[Any, ...], list[dict[str, Any]]] = {}
            for machine in self.store.list(CAPI_MACHINE_READ.role):
                ref = infra_ref(machine)
                if ref is not None:
                    by_infra.setdefault((get_path(machine, ("metadata", "namespace")), *ref), []).append(machine)
            self._capi_by_infra = by_infra
        meta = infra.get("metadata") or {}
        for machine in self._capi_by_infra.get((meta.get("namespace"), infra.get("kind"), meta.get("name")), ()):
            self._queue_capi_objects(machine)

    def _infra_machine_updated(self, old: dict[str, Any], new: dict[str, Any]) -> None:
        if _without_version(old) != _without_version(new):
            self._infra_machine_event(new)

    def _node_updated(self, old: dict[str, Any], new: dict[str, Any]) -> None:
        if _without_version(old) != _without_version(new):  # the Ready condition moved
            self._node_event(new)

    # ---- CAPI infrastructure templates --------------------------------------------------------------
    def _template_changed(self, _obj: dict[str, Any]) -> None:
        for read in CAPI_READS:
            for obj in self.store.list(read.role):
                self.sink.add(machine_key(obj))

    def _template_updated(self, old: dict[str, Any], new: dict[str, Any]) -> None:
        if resource_version(old) != resource_version(new):
            self._template_changed(new)

    # ---- cluster-wide inputs --------------------------------------------------------------------------
    def cluster_changed(self, *_objs: Any) -> None:
        self.cluster.changed()
        self.enqueue_all()

    def _cluster_updated(self, old: dict[str, Any], new: dict[str, Any]) -> None:
        if resource_version(old) != resource_version(new):
            self.cluster_changed()

    def _machineconfiguration_updated(self, old: dict[str, Any], new: dict[str, Any]) -> None:
        # Our own status writes must not re-trigger a pass: only spec (and metadata) matter, and
        # the MCO's report of its own pass, which MCO-managed MachineSets are compared after.
        if old.get("spec") != new.get("spec"):
            self.cluster_changed()
        elif McoPass.from_machine_configuration(old) != McoPass.from_machine_configuration(new):
            for key, state in list(self.outcomes.items()):
                if state.decision.manager is Manager.MCO:
                    self.sink.add(key)

    def _mco_updated(self, old: dict[str, Any], new: dict[str, Any]) -> None:
        # The MCO's version (ClusterOperator) or its gates (FeatureGate) decide who manages what;
        # its conditions change all the time and decide nothing here.
        keys = (("status", "versions"), ("status", "featureGates"))
        if any(get_path(old, k) != get_path(new, k) for k in keys):
            self.cluster_changed()

    def _clusterversion_updated(self, old: dict[str, Any], new: dict[str, Any]) -> None:
        # The gate itself is read live at every write (`ClusterView.upgrade_gate`); this only
        # re-plans when the gate opens or shuts, or the release changes, not on every progress message.
        desired = (old.get("status") or {}).get("desired") != (new.get("status") or {}).get("desired")
        if desired or (upgrade_blocker(old) is None) != (upgrade_blocker(new) is None):
            self.cluster_changed()

    # ---- claim holders ------------------------------------------------------------------------------
    def _holder_event(self, _obj: dict[str, Any]) -> None:
        self.sink.add(CLAIMS_KEY)

    def _holder_updated(self, old: dict[str, Any], new: dict[str, Any]) -> None:
        old_meta, new_meta = old.get("metadata") or {}, new.get("metadata") or {}
        if new_meta.get("deletionTimestamp") or old_meta.get("finalizers") != new_meta.get("finalizers"):
            self.sink.add(CLAIMS_KEY)

    def _holder_deleted(self, _obj: dict[str, Any]) -> None:
        # Patches held back while the old holder was being deleted go ahead now; the first one
        # creates a new holder.
        self.enqueue_all()


def _without_version(obj: dict[str, Any]) -> tuple[Any, ...]:
    """A trimmed Machine or Node as verification reads it, whatever its resourceVersion."""
    meta = {k: v for k, v in (obj.get("metadata") or {}).items() if k != "resourceVersion"}
    return meta, obj.get("spec"), obj.get("status")
