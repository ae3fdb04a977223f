"""The daemon's informers and the cluster-wide inputs read from them (reconcile/store.py)."""

from __future__ import annotations

import asyncio
from typing import Any

from harness.objects import bootimages_configmap, infrastructure
from kubernetes_asyncio.client import ApiClient, Configuration

from bootimage_controller.constants import CAPI_VERSIONS
from bootimage_controller.core.cluster import CLUSTER_READS
from bootimage_controller.reconcile.loop import KeyList
from bootimage_controller.reconcile.store import ON_DEMAND_ROLES, ClusterView, InformerStore, build_informers
from bootimage_controller.reconcile.triggers import Triggers


async def test_on_aws_one_template_informer_and_every_handler_attaches() -> None:
    api = ApiClient(Configuration(host="https://127.0.0.1:6443"))
    try:
        everything = build_informers(api, CAPI_VERSIONS[-1])
        aws = build_informers(api, CAPI_VERSIONS[-1], "AWS")
        assert set(everything) - set(aws) == {"GCPMachineTemplate", "AzureMachineTemplate", "VSphereMachineTemplate",
                                              "infra-machines:GCPMachine", "infra-machines:AzureMachine"}
        assert {r.role for r in CLUSTER_READS} <= set(everything)
        # The triggers attach to whatever template informers there are.
        store = InformerStore(aws)
        Triggers(store, ClusterView(store), {}, KeyList(), lambda: None).attach(aws)
        assert aws["AWSMachineTemplate"].handler_count
        # Boot verification of CAPI pools: their Machines and the platform's infrastructure machines.
        assert aws["capi-machines"].handler_count and aws["infra-machines:AWSMachine"].handler_count
    finally:
        await api.close()


class _Cache:
    """An `InformerStore` stand-in holding one object per role."""

    def __init__(self, **objects: dict[str, Any]) -> None:
        self.objects = objects

    def one(self, role: str) -> dict[str, Any] | None:
        return self.objects.get(role)

    def list(self, role: str) -> list[dict[str, Any]]:
        return [self.objects[role]] if role in self.objects else []


def _golden(rv: str, **changes: Any) -> dict[str, Any]:
    cm = bootimages_configmap("coreos-bootimages-4.22-multistream.yaml")
    cm["metadata"].update(uid="cm-uid", resourceVersion=rv)
    cm["data"].update(changes)
    return cm


def test_the_golden_data_is_parsed_once_per_version_of_the_configmap() -> None:
    cache = _Cache(bootimages=_golden("1"), infrastructure=infrastructure("AWS"))
    view = ClusterView(cache)  # type: ignore[arg-type]
    view.prepare(cache.objects["bootimages"])  # as the ConfigMap's informer delivers it
    parsed = view.parse_golden(cache.objects["bootimages"])
    assert parsed is not None
    ctx = view.inputs().context
    assert ctx is not None and ctx.golden is parsed  # the inputs reuse it
    assert ctx.explanation[0].startswith("golden boot images: ConfigMap openshift-machine-config-operator/coreos-bootimages;")
    view.changed()  # a cluster-wide change elsewhere (a Node): the same ConfigMap is not parsed again
    assert view.inputs().context.golden is parsed  # type: ignore[union-attr]
    cache.objects["bootimages"] = _golden("2")
    view.changed()
    again = view.inputs().context
    assert again is not None and again.golden is not parsed and again.golden == parsed


def test_golden_data_that_does_not_parse_is_reported_by_the_inputs_as_before() -> None:
    cache = _Cache(bootimages=_golden("1", stream="{not json"), infrastructure=infrastructure("AWS"))
    view = ClusterView(cache)  # type: ignore[arg-type]
    view.prepare(cache.objects["bootimages"])  # no error here: the inputs say it
    inputs = view.inputs()
    assert inputs.context is None
    assert inputs.problem is not None and "coreos-bootimages" in inputs.problem and "data.stream" in inputs.problem


async def test_a_cache_started_on_demand_counts_as_listed_until_started_and_is_waited_for_once_it_is() -> None:
    api = ApiClient(Configuration(host="https://127.0.0.1:6443"))
    try:
        informers = build_informers(api, CAPI_VERSIONS[-1], "AWS")
        store = InformerStore(informers, on_demand=ON_DEMAND_ROLES)
        for role, informer in informers.items():
            if role not in ON_DEMAND_ROLES:
                informer.replace_all([], "1")  # listed, as a list answered would
        assert store.synced() and store.sync_errors() == {}, "never started: nothing needs it yet"

        template = informers["AWSMachineTemplate"]
        template.start()  # nothing listens at that address: started, and no answer
        assert not store.synced() and set(store.sync_errors()) == {"AWSMachineTemplate"}
        waiting = asyncio.create_task(store.wait_synced(5))
        await asyncio.sleep(0.05)
        assert not waiting.done()
        template.replace_all([], "2")
        assert await waiting and store.synced()
        await template.stop()
    finally:
        await api.close()
