"""`plan` and the daemon decide alike on the same objects (issue 13, item 5).

Each fixture set is stored in the real API server. The daemon's controller plans every MachineSet
from its informers' caches; `plan` plans from the same objects as read back from the server and
written to files. Both build their context with `context.planning_context`; this test is what
keeps it that way: any fact one side reads and the other does not shows up as a different
decision. The sets include partial clusters (no ClusterVersion, no Infrastructure, MachineSets and
the ConfigMap alone) and a broken providerSpec, where inventing a fact would show.
"""

from __future__ import annotations

import asyncio
import copy
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from harness.objects import (
    apply,
    bootimages_configmap,
    example_objects,
    kube_request,
    machineset_from_fixture,
    reset_cluster,
    resource_of,
)
from kubernetes_asyncio import client as k8s_client

from bootimage_controller.constants import CAPI_VERSIONS
from bootimage_controller.core.lookups import plan_object
from bootimage_controller.core.model import BootImageDecision
from bootimage_controller.plan import inputs as plan_inputs
from bootimage_controller.reconcile.store import ClusterView, InformerStore, build_informers

pytestmark = pytest.mark.integration

CONFIGMAPS = (
    "coreos-bootimages-4.18.yaml",
    "coreos-bootimages-4.22-multistream.yaml",
    "hypershift-fixture-4.10-coreos-bootimages.yaml",
    "hypershift-fixture-5.0.0-ec.2-coreos-bootimages.yaml",
)
MACHINESETS_BY_PLATFORM = {
    "aws": (
        "aws-aarch64-us-east-2a-4.16.yaml",
        "aws-x86_64-ami-filters.yaml",
        "aws-x86_64-me-south-1a-4.21.yaml",
        "aws-x86_64-rhel-10-stream.yaml",
        "aws-x86_64-us-east-1a-4.16.yaml",
    ),
    "azure": ("azure-x86_64-legacy-gallery-gen2-4.16.yaml", "azure-x86_64-marketplace-noplan-4.20.yaml"),
    "gcp": ("gcp-x86_64-custom-image.yaml", "gcp-x86_64-us-central1-a-4.16.yaml"),
    "vsphere": ("vsphere-x86_64-4.16.yaml",),
}


def fixture_machinesets(platform: str) -> list[dict[str, Any]]:
    return [
        machineset_from_fixture(name, f"{platform}-{i}") for i, name in enumerate(MACHINESETS_BY_PLATFORM[platform])
    ]


def broken_aws_machineset() -> dict[str, Any]:
    # A providerSpec the AWS rules cannot read: `error`, on a fleet whose platform only the
    # providerSpec kinds name (no Infrastructure), never `NotEnrolled`.
    return machineset_from_fixture("aws-x86_64-us-east-1a-4.16.yaml", "aws-broken", provider_spec={"ami": "not-a-map"})


def fixture_sets() -> Iterator[tuple[str, list[dict[str, Any]]]]:
    example = example_objects(strip_server_metadata=True)
    yield "example", example
    yield "example without ClusterVersion", [o for o in example if o["kind"] != "ClusterVersion"]
    yield "example without Infrastructure", [o for o in example if o["kind"] != "Infrastructure"]
    yield "example without control-plane Nodes", [o for o in example if o["kind"] != "Node"]
    for configmap in CONFIGMAPS:
        for platform in MACHINESETS_BY_PLATFORM:
            extra = [broken_aws_machineset()] if platform == "aws" else []
            yield f"{platform} MachineSets, {configmap}", [
                bootimages_configmap(configmap), *fixture_machinesets(platform), *extra
            ]
    everything = [ms for p in MACHINESETS_BY_PLATFORM for ms in fixture_machinesets(p)]
    yield "every platform at once", [bootimages_configmap(CONFIGMAPS[1]), *everything]


SETS = list(fixture_sets())


def by_key(decisions: list[BootImageDecision]) -> dict[str, dict[str, Any]]:
    """Everything decided, `plan -o json` fields and the evidence for skew, by MachineSet.

    The message is left out only for unparseable objects, where `plan` prefixes the file name.
    """
    out = {}
    for d in decisions:
        value = {**d.to_json(), "current_release_source": d.current_release_source, "changes": d.changes}
        if d.reason == "InvalidObject":
            value.pop("message")
        out[d.key] = value
    return out


async def daemon_decisions(api: k8s_client.ApiClient) -> tuple[list[BootImageDecision], Any]:
    store = InformerStore(build_informers(api, CAPI_VERSIONS[-1]))
    tasks = [informer.start() for informer in store.informers.values()]
    try:
        assert await store.wait_synced(30), "informers did not sync"
        inputs = ClusterView(store).inputs()
        ctx = inputs.context
        assert ctx is not None, inputs.problem
        machines = [o for kind in ("MachineSet", "ControlPlaneMachineSet") for o in store.list(kind)]
        return [plan_object(obj, store, ctx, ctx.facts) for obj in machines], ctx
    finally:
        for informer in store.informers.values():
            await informer.stop()
        await asyncio.gather(*tasks, return_exceptions=True)


async def stored(api: k8s_client.ApiClient, objects: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The objects as the API server keeps them (defaulted, pruned), for `plan`."""
    out = []
    for obj in objects:
        res = resource_of(obj)
        ns = obj["metadata"].get("namespace") if res.namespaced else None
        live = await kube_request(api, "GET", res.item_path(obj["metadata"]["name"], ns))
        live.setdefault("apiVersion", obj["apiVersion"])
        live.setdefault("kind", obj["kind"])
        out.append(live)
    return out


@pytest.mark.parametrize("name", [name for name, _ in SETS])
async def test_plan_and_daemon_decide_alike(name: str, kube_api: k8s_client.ApiClient, tmp_path: Path) -> None:
    objects = copy.deepcopy(dict(SETS)[name])
    await reset_cluster(kube_api)
    for obj in objects:
        await apply(kube_api, obj)
    daemon, ctx = await daemon_decisions(kube_api)

    (tmp_path / "objects.yaml").write_text(yaml.safe_dump_all(await stored(kube_api, objects)))
    prepared = plan_inputs.prepare(plan_inputs.classify(plan_inputs.load_paths([tmp_path])))
    plan = plan_inputs.run_planner(prepared)

    assert by_key(daemon) == by_key(plan)
    assert ctx.facts == prepared.context.facts
    assert ctx.enrollment == prepared.context.enrollment
    assert len(plan) == sum(o["kind"] in ("MachineSet", "ControlPlaneMachineSet") for o in objects)
    if "without Infrastructure" in name or "MachineSets," in name:
        # No Infrastructure: the platform is the one the providerSpec kinds name.
        assert ctx.facts.platform == name.split()[0].replace("aws", "AWS").replace("azure", "Azure").replace(
            "gcp", "GCP").replace("vsphere", "VSphere").replace("example", "AWS")
    if name.startswith("aws MachineSets"):
        broken = next(d for d in plan if d.name == "aws-broken")
        assert (str(broken.action), str(broken.reason)) == ("error", "InvalidProviderSpec")
