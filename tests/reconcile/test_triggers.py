"""reconcile/triggers.py: which informer events are worth a key, and which key (issue 35).

The informers are stand-ins that record the handlers `Triggers.attach` gives them; each test fires
an event through them as the informer would and reads what landed in the sink.
"""

from __future__ import annotations

import copy
from collections import defaultdict
from typing import Any

from harness.objects import (
    bootimages_configmap,
    cluster_version,
    machine_configuration,
    machineset_from_fixture,
)

from bootimage_controller.constants import MACHINESET_KIND
from bootimage_controller.reconcile.keys import CLAIMS_KEY, machine_key
from bootimage_controller.reconcile.loop import KeyList
from bootimage_controller.reconcile.store import MAPI_HOLDER
from bootimage_controller.reconcile.triggers import OWN_WRITE_ECHO_DELAY, Triggers

PSP = ("spec", "template", "spec", "providerSpec", "value")


class Recorder:
    """An informer's handler registry, as `Informer.add_handler` takes it."""

    def __init__(self) -> None:
        self.handlers: list[dict[str, Any]] = []

    def add_handler(self, **handlers: Any) -> None:
        self.handlers.append(handlers)

    def add(self, obj: dict[str, Any]) -> None:
        for h in self.handlers:
            h["on_add"](obj)

    def update(self, old: dict[str, Any], new: dict[str, Any]) -> None:
        for h in self.handlers:
            h["on_update"](old, new)

    def delete(self, obj: dict[str, Any]) -> None:
        for h in self.handlers:
            h["on_delete"](obj)


class Cluster:
    parsed = None  # no parsed inputs yet: the platform comes from Infrastructure

    def __init__(self) -> None:
        self.changes = 0
        self.prepared: list[dict[str, Any]] = []

    def changed(self) -> None:
        self.changes += 1

    def prepare(self, configmap: dict[str, Any]) -> None:
        self.prepared.append(configmap)


class Store:
    def list(self, _kind: str) -> list[dict[str, Any]]:
        return []


def triggers() -> tuple[dict[str, Recorder], KeyList, Cluster, list[int]]:
    informers: dict[str, Recorder] = defaultdict(Recorder)
    sink, cluster, everything = KeyList(), Cluster(), [0]
    t = Triggers(Store(), cluster, {}, sink, lambda: everything.__setitem__(0, everything[0] + 1))  # type: ignore[arg-type]
    t.attach(informers)  # type: ignore[arg-type]
    return informers, sink, cluster, everything


def machineset() -> dict[str, Any]:
    obj = machineset_from_fixture("aws-x86_64-us-east-1a-4.16.yaml", "worker-a")
    obj["metadata"]["resourceVersion"] = "1"
    return obj


def test_a_machineset_added_or_deleted_is_a_key() -> None:
    informers, sink, _, _ = triggers()
    ms = machineset()
    informers[MACHINESET_KIND].add(ms)
    assert list(sink.keys) == [machine_key(ms)]
    sink.keys.clear()
    informers[MACHINESET_KIND].delete(ms)
    # Its reconcile finds it gone and drops its outcome (the loop then asks for a report); claims
    # change with it.
    assert list(sink.keys) == [machine_key(ms), CLAIMS_KEY]


def test_only_an_update_the_planner_reads_is_a_key() -> None:
    informers, sink, _, _ = triggers()
    old = machineset()
    scaled = copy.deepcopy(old)
    scaled["spec"]["replicas"] = 5
    scaled["status"] = {"replicas": 5}
    scaled["metadata"]["resourceVersion"] = "2"
    informers[MACHINESET_KIND].update(old, scaled)
    assert list(sink.keys) == []  # replicas and status: not worth a reconcile
    edited = copy.deepcopy(scaled)
    value = edited
    for part in PSP:
        value = value[part]
    value["ami"] = {"id": "ami-0123456789abcdef0"}
    informers[MACHINESET_KIND].update(scaled, edited)
    assert list(sink.keys) == [machine_key(edited)]


class DelayedKeys(KeyList):
    """The daemon's work queue as the triggers see it: keys now, and keys after a delay."""

    def __init__(self) -> None:
        super().__init__()
        self.later: list[tuple[str, float]] = []

    def add_after(self, key: str, delay: float) -> None:
        self.later.append((key, delay))


class OurPatches:
    """The machine reconciler as the triggers see it: which versions its patches replaced."""

    def __init__(self, superseded: set[str]) -> None:
        self.superseded = superseded

    def wrote(self, _key: str, old: dict[str, Any]) -> bool:
        return str(old["metadata"]["resourceVersion"]) in self.superseded


def test_the_echo_of_our_own_patch_waits_behind_the_keys_still_to_write() -> None:
    """Our patch tests the resourceVersion it replaces, so a change from that version is our write
    landing: its key comes back after OWN_WRITE_ECHO_DELAY, not at once. Any other change, the next
    one after ours included, is a key at once."""
    informers: dict[str, Recorder] = defaultdict(Recorder)
    sink = DelayedKeys()
    t = Triggers(Store(), Cluster(), {}, sink, lambda: None,  # type: ignore[arg-type]
                 own_writes=OurPatches(superseded={"1"}))  # the versions our patches replaced
    t.attach(informers)  # type: ignore[arg-type]
    ours, theirs = machineset(), machineset()
    ours["metadata"].update(resourceVersion="2", annotations={"written": "by us"})
    theirs["metadata"].update(resourceVersion="3", annotations={"written": "by someone else"})
    informers[MACHINESET_KIND].update(machineset(), ours)
    assert list(sink.keys) == [] and sink.later == [(machine_key(ours), OWN_WRITE_ECHO_DELAY)]
    informers[MACHINESET_KIND].update(ours, theirs)
    assert list(sink.keys) == [machine_key(theirs)]


def test_cluster_inputs_replan_everything_only_when_they_change_what_is_planned() -> None:
    informers, sink, cluster, everything = triggers()
    cv = cluster_version()
    progressed = copy.deepcopy(cv)
    progressed["status"].setdefault("conditions", []).append({"type": "Failing", "status": "False", "message": "x"})
    progressed["metadata"]["resourceVersion"] = "9"
    informers["clusterversion"].update(cv, progressed)
    assert everything == [0]  # a progress message: the gate is read live at each write anyway
    upgraded = copy.deepcopy(cv)
    upgraded["status"]["desired"] = {"version": "4.23.0"}
    informers["clusterversion"].update(cv, upgraded)
    assert everything == [1] and cluster.changes == 1

    mc = machine_configuration()
    status_only = copy.deepcopy(mc)
    status_only["status"] = {"conditions": [{"type": "BootImageUpdateProgressing", "status": "False"}]}
    informers["machineconfiguration"].update(mc, status_only)
    assert everything == [1]  # our own status writes never re-trigger a pass
    opted_out = copy.deepcopy(mc)
    opted_out["spec"]["managedBootImages"] = {"machineManagers": []}
    informers["machineconfiguration"].update(mc, opted_out)
    assert everything == [2]
    assert list(sink.keys) == []


def test_the_golden_configmap_is_prepared_as_soon_as_it_arrives_and_when_it_changes() -> None:
    informers, _sink, cluster, _everything = triggers()
    cm = bootimages_configmap()
    informers["bootimages"].add(cm)
    changed = copy.deepcopy(cm)
    changed["metadata"]["resourceVersion"] = "9"
    informers["bootimages"].update(cm, changed)
    assert cluster.prepared == [cm, changed]


def test_a_claim_holder_losing_its_finalizer_is_the_claims_key() -> None:
    informers, sink, _, everything = triggers()
    holder = {"metadata": {"name": "h", "resourceVersion": "1", "finalizers": ["f"]}}
    relabelled = copy.deepcopy(holder)
    relabelled["metadata"]["labels"] = {"a": "b"}
    informers[MAPI_HOLDER].update(holder, relabelled)
    assert list(sink.keys) == []
    stripped = copy.deepcopy(holder)
    stripped["metadata"]["finalizers"] = []
    informers[MAPI_HOLDER].update(holder, stripped)
    assert list(sink.keys) == [CLAIMS_KEY]
    informers[MAPI_HOLDER].delete(stripped)
    assert everything == [1]  # held-back patches go ahead under a new holder
