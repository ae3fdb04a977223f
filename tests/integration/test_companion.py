"""Companion, not competitor (issue 22) on the loopback kube-apiserver.

- Release after release (4.16 to 4.22, and no MCO at all), on AWS, GCP, Azure and vSphere, `plan` and
  the daemon give every MachineSet the same manager, the one the reference says, and the daemon
  writes only its own.
- GitOps: an Argo CD-tracked MachineSet gets a proposal whose JSON patch, applied as `kubectl patch
  --type=json` does, yields exactly what the daemon writes for an identical MachineSet it manages.
- The MCO: an MCO-managed MachineSet that stays on another image after the MCO's pass is a
  BootImageDisagreement (Event and metric) once the grace is over.
The coexistence with a stand-in MCO is in test_coexistence.py.
"""

from __future__ import annotations

import asyncio
import copy
import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from core.capi.objects import capi_object, template
from harness.cluster import TestCluster
from harness.mco import FIXTURE_BY_PLATFORM, MCO_DEFAULT_FROM
from harness.objects import (
    apply,
    bootimages_configmap,
    cluster_version,
    delete_object,
    feature_gate,
    get_object,
    infrastructure,
    kube_request,
    machine_configuration,
    machineset_from_fixture,
    mco_cluster_operator,
    resource_of,
)
from kubernetes_asyncio import client as k8s_client

from bootimage_controller import observability as obs
from bootimage_controller.constants import (
    ANNOTATION_ARGOCD_TRACKING_ID,
    ANNOTATION_BOOT_IMAGE_MANAGER,
    CAPI_NAMESPACE,
    CAPI_VERSIONS,
    CLAIM_FINALIZER,
    CLAIM_HOLDER_NAME,
    LABEL_HIVE_MACHINE_POOL,
    LABEL_OSSTREAM,
    MAPI_NAMESPACE,
)
from bootimage_controller.core.lookups import plan_object
from bootimage_controller.daemon import run as daemon
from bootimage_controller.plan import inputs as plan_inputs
from bootimage_controller.reconcile.store import ClusterView, InformerStore, build_informers

from .daemon_helpers import list_machinesets, run_args, user_data_secret, wait_for

pytestmark = pytest.mark.integration

FIXTURE = FIXTURE_BY_PLATFORM
# The gates each release enables by default (FeatureGate status as a default cluster shows it).
DEFAULT_GATES = {
    16: [], 17: ["ManagedBootImages"], 18: ["ManagedBootImages", "ManagedBootImagesAWS"],
    19: ["ManagedBootImages", "ManagedBootImagesAWS"], 20: ["ManagedBootImages", "ManagedBootImagesAWS"],
    21: ["ManagedBootImages", "ManagedBootImagesAWS"], 22: ["ManagedBootImagesCPMS", "BootImageSkewEnforcement"],
}
CAPI_ENTRY = {"resource": "machinesets", "apiGroup": "cluster.x-k8s.io", "selection": {"mode": "All"}}
AWS_416 = "ami-05483066c3caaccf5"
MS_PATH = f"/apis/machine.openshift.io/v1beta1/namespaces/{MAPI_NAMESPACE}/machinesets"


def expected(platform: str, minor: int | None) -> dict[str, str]:
    """Who manages each MachineSet of `fleet()` with the MCO of 4.`minor` (None: no MCO)."""
    mco_on = minor is not None and minor >= MCO_DEFAULT_FROM[platform]
    out = {
        "plain": "mco" if mco_on else "bootimage-controller",
        # From 4.22 the MCO leaves other streams alone; before, it ignores the label.
        "rhel10": "mco" if mco_on and minor is not None and minor < 22 else "bootimage-controller",
        "claimed": "bootimage-controller",
        "handed": "bootimage-controller",
        "hive": "hive",
        "argo": "gitops",
    }
    if platform == "AWS":
        out["capi"] = "bootimage-controller"
    return out


async def holder(api: k8s_client.ApiClient) -> dict[str, Any]:
    """Our claim holder, so a claimed MachineSet's owner exists (else the collector takes it)."""
    return await apply(api, {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {
        "name": CLAIM_HOLDER_NAME, "namespace": MAPI_NAMESPACE, "finalizers": [CLAIM_FINALIZER]}})


def fleet(platform: str, holder_uid: str) -> list[dict[str, Any]]:
    claim = {"apiVersion": "v1", "kind": "ConfigMap", "name": CLAIM_HOLDER_NAME, "uid": holder_uid,
             "controller": True, "blockOwnerDeletion": False}

    def ms(name: str, **kw: Any) -> dict[str, Any]:
        return machineset_from_fixture(FIXTURE[platform], name, **kw)

    return [
        ms("plain"),
        ms("rhel10", labels={LABEL_OSSTREAM: "rhel-10"}),
        ms("claimed", owner_references=[claim]),
        ms("handed", annotations={ANNOTATION_BOOT_IMAGE_MANAGER: "bootimage-controller"}),
        ms("hive", labels={LABEL_HIVE_MACHINE_POOL: "worker"}),
        ms("argo", annotations={ANNOTATION_ARGOCD_TRACKING_ID: "workers:machine.openshift.io/MachineSet:x/argo"}),
    ]


async def arrange(api: k8s_client.ApiClient, platform: str) -> None:
    await apply(api, infrastructure(platform, region="us-east-1" if platform == "AWS" else None))
    await apply(api, cluster_version())
    await apply(api, machine_configuration([CAPI_ENTRY] if platform == "AWS" else None))
    await apply(api, bootimages_configmap("coreos-bootimages-4.22-multistream.yaml"))
    await apply(api, user_data_secret())
    owner = await holder(api)
    for obj in fleet(platform, owner["metadata"]["uid"]):
        await apply(api, obj)
    if platform == "AWS":
        cluster = await apply(api, {"apiVersion": "cluster.x-k8s.io/v1beta1", "kind": "Cluster",
                                    "metadata": {"name": "mycluster-7xk2p", "namespace": CAPI_NAMESPACE}, "spec": {}})
        owners = [{"apiVersion": "cluster.x-k8s.io/v1beta1", "kind": "Cluster", "name": "mycluster-7xk2p",
                   "uid": cluster["metadata"]["uid"]}]
        await apply(api, template("AWSMachineTemplate", "capi-t0", {"ami": {"id": AWS_416}, "instanceType": "m6i.xlarge"},
                                  owners=owners))
        await apply(api, capi_object("MachineSet", "capi", "AWSMachineTemplate", "capi-t0", owners=owners))


async def set_mco(api: k8s_client.ApiClient, minor: int | None) -> list[dict[str, Any]]:
    """The MCO of 4.`minor` (ClusterOperator and FeatureGate), or none; returns what was applied."""
    if minor is None:
        for obj in (mco_cluster_operator(), feature_gate()):
            await delete_object(api, obj)
        return []
    version = f"4.{minor}.0"
    objs = [mco_cluster_operator(version), feature_gate(version, DEFAULT_GATES[minor])]
    for obj in objs:
        await apply(api, obj)
    return objs


async def stored(api: k8s_client.ApiClient, objs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out = []
    for obj in objs:
        live = await get_object(api, obj)
        assert live is not None, obj["metadata"]["name"]
        live.setdefault("apiVersion", obj["apiVersion"])
        live.setdefault("kind", obj["kind"])
        out.append(live)
    return out


def managers_of(decisions: Any) -> dict[str, str]:
    return {d.name: str(d.manager) for d in decisions}


async def daemon_managers(store: InformerStore) -> dict[str, str]:
    """What the daemon decides from its caches (planned as its machine reconciler plans, offline)."""
    inputs = ClusterView(store).inputs()
    ctx = inputs.context
    assert ctx is not None, inputs.problem
    kinds = ("MachineSet", "ControlPlaneMachineSet", "MachineSet.cluster.x-k8s.io")
    objs = [o for kind in kinds for o in store.list(kind)]
    return managers_of([plan_object(obj, store, ctx, ctx.facts) for obj in objs])


async def plan_managers(api: k8s_client.ApiClient, tmp_path: Path, platform: str, mco: list[dict[str, Any]]) -> dict[str, str]:
    ms = (await kube_request(api, "GET", MS_PATH))["items"]
    for item in ms:
        item.update(apiVersion="machine.openshift.io/v1beta1", kind="MachineSet")
    singles = [infrastructure(platform), cluster_version(), machine_configuration(),
               bootimages_configmap("coreos-bootimages-4.22-multistream.yaml"), *mco]
    objs = [*await stored(api, singles), *ms]
    if platform == "AWS":
        objs += await stored(api, [capi_object("MachineSet", "capi", "AWSMachineTemplate", "capi-t0"),
                                   template("AWSMachineTemplate", "capi-t0", {})])
    (tmp_path / "cluster.yaml").write_text(yaml.safe_dump_all(objs))
    prepared = plan_inputs.prepare(plan_inputs.classify(plan_inputs.load_paths([tmp_path / "cluster.yaml"])))
    return managers_of(plan_inputs.run_planner(prepared))


async def once(cluster: TestCluster) -> int:
    return await daemon.run_async(run_args(cluster.kubeconfig, "--once", "--no-leader-elect"))


async def versions(api: k8s_client.ApiClient) -> dict[str, str]:
    return {n: o["metadata"]["resourceVersion"] for n, o in (await list_machinesets(api)).items()}


@pytest.mark.parametrize("platform", sorted(FIXTURE))
async def test_plan_and_the_daemon_agree_on_every_manager_release_after_release_and_write_only_their_own(
    platform: str, kube_cluster: TestCluster, kube_api: k8s_client.ApiClient, tmp_path: Path
) -> None:
    await arrange(kube_api, platform)
    store = InformerStore(build_informers(kube_api, CAPI_VERSIONS[-1]))
    tasks = [i.start() for i in store.informers.values()]
    try:
        assert await store.wait_synced(30), store.sync_errors()
        for minor in (None, *range(16, 23)):
            mco = await set_mco(kube_api, minor)
            want = f"4.{minor}.0" if minor is not None else None

            async def seen(want: str | None = want) -> bool:
                found = store.list("mco_operator")
                got = found[0]["status"]["versions"][0]["version"] if found else None
                return got == want and len(store.list("feature_gate")) == (want is not None)

            await wait_for(seen, 10, f"the daemon's caches to see the MCO {want}")
            wanted = expected(platform, minor)
            assert await daemon_managers(store) == wanted, f"daemon, MCO {want}"
            assert await plan_managers(kube_api, tmp_path, platform, mco) == wanted, f"plan, MCO {want}"
    finally:
        for informer in store.informers.values():
            await informer.stop()
        await asyncio.gather(*tasks, return_exceptions=True)

    # The MCO of 4.22 is in place: the daemon writes only what is its own.
    before = await versions(kube_api)
    await once(kube_cluster)
    after = await versions(kube_api)
    written = {n for n in before if before[n] != after[n]}
    assert written <= {n for n, m in expected(platform, 22).items() if m == "bootimage-controller"}
    if platform in ("AWS", "GCP"):  # the offline rules can patch these (Azure and vSphere need their cloud)
        assert {"claimed", "handed"} <= written, written
    if platform == "AWS":
        assert {"rhel10", "capi"} - written == {"capi"}, written  # CAPI writes a template, not a MachineSet
    # Without an MCO the plain MachineSet is ours too; Hive's and Git's never are.
    await set_mco(kube_api, None)
    before = await versions(kube_api)
    await once(kube_cluster)
    after = await versions(kube_api)
    assert before["hive"] == after["hive"] and before["argo"] == after["argo"]
    if platform in ("AWS", "GCP"):
        assert before["plain"] != after["plain"]


async def event_of(api: k8s_client.ApiClient, name: str, reason: str) -> dict[str, Any] | None:
    doc = await kube_request(api, "GET", f"/api/v1/namespaces/{MAPI_NAMESPACE}/events")
    return next((e for e in doc["items"] if e["involvedObject"]["name"] == name and e["reason"] == reason), None)


async def test_a_gitops_machineset_gets_a_proposal_that_yields_exactly_what_the_daemon_writes(
    kube_cluster: TestCluster, kube_api: k8s_client.ApiClient
) -> None:
    await apply(kube_api, infrastructure("AWS", region="us-east-1"))
    await apply(kube_api, cluster_version())
    await apply(kube_api, machine_configuration())
    await apply(kube_api, bootimages_configmap("coreos-bootimages-4.22-multistream.yaml"))
    await apply(kube_api, user_data_secret())
    tracked = machineset_from_fixture(FIXTURE["AWS"], "tracked", annotations={
        ANNOTATION_ARGOCD_TRACKING_ID: "workers:machine.openshift.io/MachineSet:openshift-machine-api/tracked"})
    twin = machineset_from_fixture(FIXTURE["AWS"], "twin")
    for obj in (tracked, twin):
        await apply(kube_api, obj)
    untouched = await get_object(kube_api, tracked)
    assert untouched is not None

    assert await once(kube_cluster) == 0
    live = await get_object(kube_api, tracked)
    assert live is not None and live["metadata"]["resourceVersion"] == untouched["metadata"]["resourceVersion"]
    event = await event_of(kube_api, "tracked", "BootImageUpdateProposed")
    assert event is not None and event["type"] == "Normal", "no proposal Event"
    patch = json.loads(event["message"].split("JSON patch: ", 1)[1])

    # What `kubectl patch --type=json -p <patch>` sends: an RFC 6902 PATCH of the MachineSet.
    res = resource_of(tracked)
    applied = await kube_request(kube_api, "PATCH", res.item_path("tracked", MAPI_NAMESPACE), patch,
                                 content_type="application/json-patch+json")
    written = await get_object(kube_api, twin)
    assert written is not None and written["metadata"]["annotations"].get(
        "machineconfiguration.openshift.io/boot-image-release"), "the daemon did not patch its own twin"
    spec = ("spec", "template", "spec", "providerSpec", "value")

    def provider_spec(obj: dict[str, Any]) -> Any:
        out: Any = obj
        for key in spec:
            out = out[key]
        return copy.deepcopy(out)

    assert provider_spec(applied) == provider_spec(written)
    assert provider_spec(applied) != provider_spec(untouched)
    # A second pass proposes nothing new and still writes nothing.
    assert await once(kube_cluster) == 0
    again = await get_object(kube_api, tracked)
    assert again is not None and again["metadata"]["resourceVersion"] == applied["metadata"]["resourceVersion"]


async def test_an_mco_machineset_left_behind_after_the_mcos_pass_is_a_disagreement(
    kube_cluster: TestCluster, kube_api: k8s_client.ApiClient
) -> None:
    from .daemon_helpers import daemon_task

    await apply(kube_api, infrastructure("AWS", region="us-east-1"))
    await apply(kube_api, cluster_version())
    await apply(kube_api, mco_cluster_operator("4.22.0"))
    await apply(kube_api, feature_gate("4.22.0", DEFAULT_GATES[22]))
    mc = machine_configuration(status={"conditions": [
        {"type": "BootImageUpdateProgressing", "status": "True", "reason": "MAPIMachineSetUpdated",
         "message": "Reconciled 0 of 1 MAPI MachineSets", "lastTransitionTime": "2026-11-25T00:00:00Z"},
        {"type": "BootImageUpdateDegraded", "status": "False", "reason": "MAPIMachineSetUpdated",
         "message": "0 Degraded MAPI MachineSets", "lastTransitionTime": "2026-11-25T00:00:00Z"}]})
    await apply(kube_api, mc)
    await apply(kube_api, bootimages_configmap("coreos-bootimages-4.22-multistream.yaml"))
    await apply(kube_api, machineset_from_fixture(FIXTURE["AWS"], "left-behind"))
    before = await versions(kube_api)

    def disagreeing() -> bool:
        return any(s.labels.get("name") == "left-behind" and s.value == 1
                   for m in obs.REGISTRY.collect() if m.name == "bootimage_controller_disagreements" for s in m.samples)

    async with daemon_task(kube_cluster.kubeconfig, "--disagreement-grace", "2s"):
        await asyncio.sleep(4)  # the MCO's pass is not over: nothing to say yet, however long
        assert await event_of(kube_api, "left-behind", "BootImageDisagreement") is None and not disagreeing()
        # The MCO reports its pass done and leaves the MachineSet where it is.
        mc["status"]["conditions"][0].update(status="False", message="Reconciled 1 of 1 MAPI MachineSets (1 skipped)")
        await apply(kube_api, mc)

        async def reported() -> bool:
            return await event_of(kube_api, "left-behind", "BootImageDisagreement") is not None and disagreeing()

        await wait_for(reported, 20, "a BootImageDisagreement Event and metric")
    event = await event_of(kube_api, "left-behind", "BootImageDisagreement")
    assert event is not None and event["type"] == "Warning"
    assert AWS_416 in event["message"] and "(1 skipped)" in event["message"] and "BootImageOutdated" in event["message"]
    assert await versions(kube_api) == before, "an MCO-managed MachineSet was written"
