"""Cluster API MachineSets and MachineDeployments on the loopback kube-apiserver (issue 16).

The CRDs are the project's (manifests/crds), the garbage collector runs: every test checks that it
deleted nothing of ours.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from core.capi.objects import capi_object, managers, template
from harness.cluster import TestCluster
from harness.machine_provider import Boot, capi_scale_up, machine_provider
from harness.objects import (
    apply,
    bootimages_configmap,
    cluster_version,
    get_object,
    infrastructure,
    kube_request,
    machine_configuration,
)
from harness.objects import machineset_from_fixture as ms_fixture

from bootimage_controller import observability as obs
from bootimage_controller.constants import (
    ANNOTATION_BOOT_IMAGE_VERIFIED,
    ANNOTATION_PREVIOUS,
    ANNOTATION_RELEASE,
    ANNOTATION_REPLACES,
    CAPI_MACHINESET,
    CAPI_NAMESPACE,
    CLAIM_HOLDER_NAME,
    EVENT_FIRST_BOOT_FAILED,
    EVENT_ROLLED_BACK,
)
from bootimage_controller.daemon import run as daemon

from .daemon_helpers import (
    daemon_task,
    list_machinesets,
    plan_from_cluster,
    run_args,
    user_data_secret,
    wait_for,
)

pytestmark = pytest.mark.integration

AWS_416 = "ami-05483066c3caaccf5"  # 4.16 us-east-1
AWS_422 = "ami-06a6b025350ff1e23"  # cm-4.22 us-east-1
NEXT_AMI = "ami-0f00000000000000a"  # "the next release" (a modified 4.22 stream)
CAPI = f"/apis/cluster.x-k8s.io/v1beta1/namespaces/{CAPI_NAMESPACE}"
INFRA = f"/apis/infrastructure.cluster.x-k8s.io/{{version}}/namespaces/{CAPI_NAMESPACE}/{{plural}}"


async def make_cluster(kube_api: Any) -> dict[str, Any]:
    """The CAPI `Cluster` everything is owned by (it must exist, or the collector takes them)."""
    obj = {"apiVersion": "cluster.x-k8s.io/v1beta1", "kind": "Cluster",
           "metadata": {"name": "mycluster-7xk2p", "namespace": CAPI_NAMESPACE}, "spec": {}}
    await apply(kube_api, obj)
    found = await get_object(kube_api, obj)
    assert found is not None
    return {"apiVersion": "cluster.x-k8s.io/v1beta1", "kind": "Cluster", "name": "mycluster-7xk2p",
            "uid": found["metadata"]["uid"]}


async def arrange(kube_api: Any, platform: str, *resources: str, golden: dict[str, Any] | None = None) -> dict[str, Any]:
    await apply(kube_api, infrastructure(platform, region="us-east-1" if platform == "AWS" else None))
    await apply(kube_api, cluster_version())
    mc = machine_configuration()
    mc["spec"].update(managers(*resources))
    await apply(kube_api, mc)
    await apply(kube_api, golden or bootimages_configmap("coreos-bootimages-4.22-multistream.yaml"))
    await apply(kube_api, user_data_secret())
    return await make_cluster(kube_api)


async def once(kube_cluster: TestCluster) -> int:
    return await daemon.run_async(run_args(kube_cluster.kubeconfig, "--once", "--no-leader-elect"))


async def capi_items(kube_api: Any, plural: str) -> dict[str, dict[str, Any]]:
    doc = await kube_request(kube_api, "GET", f"{CAPI}/{plural}")
    return {i["metadata"]["name"]: i for i in doc["items"]}


async def templates(kube_api: Any, plural: str = "awsmachinetemplates", version: str = "v1beta2") -> dict[str, dict[str, Any]]:
    doc = await kube_request(kube_api, "GET", INFRA.format(version=version, plural=plural))
    return {i["metadata"]["name"]: i for i in doc["items"]}


def ref_name(obj: dict[str, Any]) -> str:
    return str(obj["spec"]["template"]["spec"]["infrastructureRef"]["name"])


def next_release_golden() -> dict[str, Any]:
    cm = bootimages_configmap("coreos-bootimages-4.22-multistream.yaml")
    stream = json.loads(cm["data"]["stream"])
    stream["architectures"]["x86_64"]["images"]["aws"]["regions"]["us-east-1"]["image"] = NEXT_AMI
    cm["data"]["stream"] = json.dumps(stream)
    return cm


async def settle_collector(kube_cluster: TestCluster) -> None:
    """Give the garbage collector a moment on what the pass wrote (it acts within a second)."""
    import asyncio

    await asyncio.to_thread(kube_cluster.wait_for_garbage_collector)
    await asyncio.sleep(2)


async def test_a_stale_aws_machineset_gets_a_new_template_and_old_ones_go_two_updates_later(
    kube_cluster: TestCluster, kube_api: Any
) -> None:
    cluster = await arrange(kube_api, "AWS", "machinesets")
    await apply(kube_api, template("AWSMachineTemplate", "workers-t0", {"ami": {"id": AWS_416}, "instanceType": "m6i.xlarge"},
                                   owners=[cluster]))
    await apply(kube_api, capi_object("MachineSet", "workers", "AWSMachineTemplate", "workers-t0", owners=[cluster]))
    t0 = (await templates(kube_api))["workers-t0"]

    assert await once(kube_cluster) == 0
    ms = (await capi_items(kube_api, "machinesets"))["workers"]
    t1_name = ref_name(ms)
    found = await templates(kube_api)
    assert set(found) == {"workers-t0", t1_name}
    t1 = found[t1_name]
    assert t1["spec"]["template"]["spec"] == {"ami": {"id": AWS_422}, "instanceType": "m6i.xlarge"}
    assert t1["metadata"]["ownerReferences"] == t0["metadata"]["ownerReferences"]
    assert found["workers-t0"]["metadata"]["resourceVersion"] == t0["metadata"]["resourceVersion"], "old template untouched"
    annotations = ms["metadata"]["annotations"]
    assert annotations[ANNOTATION_RELEASE] and json.loads(annotations[ANNOTATION_PREVIOUS]) == "workers-t0"
    claims = [r for r in ms["metadata"]["ownerReferences"] if r["kind"] == "ConfigMap"]
    assert [r["name"] for r in claims] == [CLAIM_HOLDER_NAME]
    holder = await kube_request(kube_api, "GET", f"/api/v1/namespaces/{CAPI_NAMESPACE}/configmaps/{CLAIM_HOLDER_NAME}")
    assert claims[0]["uid"] == holder["metadata"]["uid"], "claimed by the holder in the MachineSet's own namespace"

    assert await once(kube_cluster) == 0
    again = (await capi_items(kube_api, "machinesets"))["workers"]
    assert again["metadata"]["resourceVersion"] == ms["metadata"]["resourceVersion"], "second pass writes nothing"
    assert set(await templates(kube_api)) == {"workers-t0", t1_name}

    await apply(kube_api, next_release_golden())
    assert await once(kube_cluster) == 0
    ms = (await capi_items(kube_api, "machinesets"))["workers"]
    t2_name = ref_name(ms)
    found = await templates(kube_api)
    assert set(found) == {t1_name, t2_name}, "two generations old deleted, the previous kept for rollback"
    assert found[t2_name]["spec"]["template"]["spec"]["ami"] == {"id": NEXT_AMI}
    assert found[t2_name]["metadata"]["annotations"][ANNOTATION_REPLACES] == t1_name

    await settle_collector(kube_cluster)
    assert "workers" in await capi_items(kube_api, "machinesets")
    assert set(await templates(kube_api)) == {t1_name, t2_name}, "the garbage collector deleted nothing of ours"

    # rollback NAME points the MachineSet back at the previous template.
    from bootimage_controller.commands.cli import main

    code = await _run_cli(main, "rollback", "workers", "-n", CAPI_NAMESPACE, "--kubeconfig", str(kube_cluster.kubeconfig))
    assert code == 0
    assert ref_name((await capi_items(kube_api, "machinesets"))["workers"]) == t1_name


async def _run_cli(main: Any, *argv: str) -> int:
    import asyncio

    return int(await asyncio.to_thread(main, list(argv)))


@pytest.mark.parametrize(
    ("platform", "kind", "plural", "spec", "field"),
    [
        ("GCP", "GCPMachineTemplate", "gcpmachinetemplates",
         {"image": "projects/rhcos-cloud/global/images/rhcos-416-94-202405291527-0-gcp-x86-64", "instanceType": "n2-standard-4"},
         "image"),
        ("Azure", "AzureMachineTemplate", "azuremachinetemplates",
         {"image": {"marketplace": {"publisher": "azureopenshift", "offer": "aro4", "sku": "aro_419", "version": "419.6.20250101",
                                    "thirdPartyImage": False}}, "vmSize": "Standard_D4s_v3"},
         "image"),
    ],
)
async def test_gcp_and_azure_templates_are_replaced_the_same_way(
    kube_cluster: TestCluster, kube_api: Any, platform: str, kind: str, plural: str, spec: dict[str, Any], field: str
) -> None:
    cluster = await arrange(kube_api, platform, "machinesets")
    await apply(kube_api, template(kind, "t0", spec, owners=[cluster]))
    await apply(kube_api, capi_object("MachineSet", "workers", kind, "t0", owners=[cluster], failure_domain="us-central1-a"))
    assert await once(kube_cluster) == 0
    ms = (await capi_items(kube_api, "machinesets"))["workers"]
    new = (await templates(kube_api, plural, "v1beta1"))[ref_name(ms)]
    changed = new["spec"]["template"]["spec"]
    assert {k: v for k, v in changed.items() if k != field} == {k: v for k, v in spec.items() if k != field}
    assert changed[field] != spec[field]
    await settle_collector(kube_cluster)
    assert len(await templates(kube_api, plural, "v1beta1")) == 2


async def test_machinedeployments_are_patched_only_when_enrolled_and_their_machinesets_never(
    kube_cluster: TestCluster, kube_api: Any
) -> None:
    cluster = await arrange(kube_api, "AWS", "machinesets")
    await apply(kube_api, template("AWSMachineTemplate", "t0", {"ami": {"id": AWS_416}}, owners=[cluster]))
    md = capi_object("MachineDeployment", "pool", "AWSMachineTemplate", "t0", owners=[cluster])
    await apply(kube_api, md)
    md_uid = (await capi_items(kube_api, "machinedeployments"))["pool"]["metadata"]["uid"]
    owned = capi_object("MachineSet", "pool-abc12", "AWSMachineTemplate", "t0", owners=[
        cluster, {"apiVersion": "cluster.x-k8s.io/v1beta1", "kind": "MachineDeployment", "name": "pool", "uid": md_uid,
                  "controller": True}])
    await apply(kube_api, owned)
    before = await capi_items(kube_api, "machinesets")

    assert await once(kube_cluster) == 0
    assert ref_name((await capi_items(kube_api, "machinedeployments"))["pool"]) == "t0", "not enrolled: not patched"

    mc = machine_configuration()
    mc["spec"].update(managers("machinesets", "machinedeployments"))
    await apply(kube_api, mc)
    assert await once(kube_cluster) == 0
    patched = (await capi_items(kube_api, "machinedeployments"))["pool"]
    assert ref_name(patched) != "t0"
    events = await kube_request(kube_api, "GET", f"/api/v1/namespaces/{CAPI_NAMESPACE}/events")
    messages = [e["message"] for e in events["items"] if e["involvedObject"]["name"] == "pool"]
    assert any("rolls out new Machines" in m or "rollout" in m for m in messages), messages
    after = await capi_items(kube_api, "machinesets")
    assert after["pool-abc12"]["metadata"]["resourceVersion"] == before["pool-abc12"]["metadata"]["resourceVersion"]

    assert await once(kube_cluster) == 0
    assert (await capi_items(kube_api, "machinedeployments"))["pool"]["metadata"]["resourceVersion"] == \
        patched["metadata"]["resourceVersion"], "patched once"


async def test_a_migrated_pool_is_written_on_its_authoritative_side_only(kube_cluster: TestCluster, kube_api: Any) -> None:
    cluster = await arrange(kube_api, "AWS", "machinesets")
    mapi = ms_fixture("aws-x86_64-us-east-1a-4.16.yaml", "workers")
    await apply(kube_api, mapi)
    await kube_request(kube_api, "PATCH",
                       "/apis/machine.openshift.io/v1beta1/namespaces/openshift-machine-api/machinesets/workers/status",
                       {"status": {"authoritativeAPI": "ClusterAPI"}}, content_type="application/merge-patch+json")
    await apply(kube_api, template("AWSMachineTemplate", "t0", {"ami": {"id": AWS_416}}, owners=[cluster]))
    await apply(kube_api, capi_object("MachineSet", "workers", "AWSMachineTemplate", "t0", owners=[cluster]))
    mapi_before = (await list_machinesets(kube_api))["workers"]

    assert await once(kube_cluster) == 0
    assert (await list_machinesets(kube_api))["workers"]["metadata"]["resourceVersion"] == \
        mapi_before["metadata"]["resourceVersion"], "the Machine API side is not authoritative: untouched"
    assert ref_name((await capi_items(kube_api, "machinesets"))["workers"]) != "t0", "the CAPI mirror is updated"


async def test_a_pool_that_appears_under_a_running_daemon_starts_the_cluster_apis_caches_and_is_written(
    kube_cluster: TestCluster, kube_api: Any
) -> None:
    """Issue 48: without a Cluster API pool the daemon does not watch templates, CAPI Machines or the
    CAPI claim holder (daemon/caches.py). The first pool starts them; the pool waits for them to list
    (reconcile/loop.py), then is claimed under the holder in its namespace and gets its template."""
    cluster = await arrange(kube_api, "AWS", "machinesets")
    await apply(kube_api, ms_fixture("aws-x86_64-us-east-1a-4.16.yaml", "mapi-workers"))
    async with daemon_task(kube_cluster.kubeconfig):
        async def mapi_written() -> bool:
            ms = (await list_machinesets(kube_api))["mapi-workers"]
            return ANNOTATION_RELEASE in (ms["metadata"].get("annotations") or {})

        await wait_for(mapi_written, 30, "the Machine API MachineSet written: the daemon is up")
        await apply(kube_api, template("AWSMachineTemplate", "workers-t0", {"ami": {"id": AWS_416}}, owners=[cluster]))
        await apply(kube_api, capi_object("MachineSet", "workers", "AWSMachineTemplate", "workers-t0", owners=[cluster]))

        async def capi_written() -> bool:
            return ref_name((await capi_items(kube_api, "machinesets"))["workers"]) != "workers-t0"

        await wait_for(capi_written, 30, "the Cluster API MachineSet pointed at a new template")
    ms = (await capi_items(kube_api, "machinesets"))["workers"]
    assert (await templates(kube_api))[ref_name(ms)]["spec"]["template"]["spec"]["ami"] == {"id": AWS_422}
    holder = await kube_request(kube_api, "GET", f"/api/v1/namespaces/{CAPI_NAMESPACE}/configmaps/{CLAIM_HOLDER_NAME}")
    assert [r["uid"] for r in ms["metadata"]["ownerReferences"] if r["kind"] == "ConfigMap"] == [holder["metadata"]["uid"]]


async def test_an_owner_other_than_the_cluster_keeps_the_controller_away(kube_cluster: TestCluster, kube_api: Any) -> None:
    cluster = await arrange(kube_api, "AWS", "machinesets")
    await apply(kube_api, template("AWSMachineTemplate", "t0", {"ami": {"id": AWS_416}}, owners=[cluster]))
    holder = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "pool-owner", "namespace": CAPI_NAMESPACE}}
    await apply(kube_api, holder)
    found = await get_object(kube_api, holder)
    assert found is not None
    other = {"apiVersion": "v1", "kind": "ConfigMap", "name": "pool-owner", "uid": found["metadata"]["uid"]}
    await apply(kube_api, capi_object("MachineSet", "foreign", "AWSMachineTemplate", "t0", owners=[cluster, other]))
    # A Cluster that controls the object: our claim then cannot be a second controller.
    controlled = {**cluster, "controller": True}
    await apply(kube_api, capi_object("MachineSet", "controlled", "AWSMachineTemplate", "t0", owners=[controlled]))
    before = await capi_items(kube_api, "machinesets")
    assert await once(kube_cluster) == 0
    after = await capi_items(kube_api, "machinesets")
    assert after["foreign"]["metadata"]["resourceVersion"] == before["foreign"]["metadata"]["resourceVersion"]
    claim = [r for r in after["controlled"]["metadata"]["ownerReferences"] if r["kind"] == "ConfigMap"]
    assert ref_name(after["controlled"]) != "t0" and claim and claim[0]["controller"] is False


async def test_plan_reads_capi_objects_and_templates_from_files(tmp_path: Path) -> None:
    import subprocess
    import sys

    import yaml

    docs = [
        infrastructure("AWS", region="us-east-1"),
        {**machine_configuration(), "spec": managers("machinesets")},
        bootimages_configmap("coreos-bootimages-4.22-multistream.yaml"),
        template("AWSMachineTemplate", "t0", {"ami": {"id": AWS_416}}),
        capi_object("MachineSet", "workers", "AWSMachineTemplate", "t0"),
    ]
    (tmp_path / "cluster.yaml").write_text(yaml.safe_dump_all(docs))
    out = tmp_path / "patched"
    result = subprocess.run([sys.executable, "-m", "bootimage_controller", "plan", str(tmp_path / "cluster.yaml"), "-o", "json",
                             "--write-patched", str(out)], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    row = json.loads(result.stdout)["machineSets"][0]
    assert (row["kind"], row["action"], row["field"]) == ("MachineSet.cluster.x-k8s.io", "patch", "spec.template.spec.ami")
    assert row["current"] == {"template": "AWSMachineTemplate/t0", "image": {"id": AWS_416}}
    assert row["target"]["image"] == {"id": AWS_422} and row["target"]["template"].startswith("AWSMachineTemplate/workers-")
    # For GitOps: the new template and the MachineSet pointing at it, nothing else changed.
    new_name = row["target"]["template"].split("/", 1)[1]
    written = {p.name: yaml.safe_load(p.read_text()) for p in out.iterdir()}
    assert set(written) == {f"{CAPI_NAMESPACE}_{new_name}.yaml", f"{CAPI_NAMESPACE}_workers.yaml"}
    assert written[f"{CAPI_NAMESPACE}_{new_name}.yaml"]["spec"]["template"]["spec"] == {"ami": {"id": AWS_422}}
    patched = written[f"{CAPI_NAMESPACE}_workers.yaml"]
    assert ref_name(patched) == new_name
    original = capi_object("MachineSet", "workers", "AWSMachineTemplate", "t0")
    patched["spec"]["template"]["spec"]["infrastructureRef"]["name"] = "t0"
    assert patched == original


async def test_an_old_template_a_machine_was_cloned_from_stays_until_that_machine_is_gone(
    kube_cluster: TestCluster, kube_api: Any
) -> None:
    """As MCO #6447: an old template is deleted only when no machine (of any MachineSet) was cloned
    from it and nothing names it (issue 34, item 2)."""
    cluster = await arrange(kube_api, "AWS", "machinesets")
    await apply(kube_api, template("AWSMachineTemplate", "workers-t0", {"ami": {"id": AWS_416}, "instanceType": "m6i.xlarge"},
                                   owners=[cluster]))
    await apply(kube_api, capi_object("MachineSet", "workers", "AWSMachineTemplate", "workers-t0", owners=[cluster]))
    machine = {"apiVersion": "infrastructure.cluster.x-k8s.io/v1beta2", "kind": "AWSMachine",
               "metadata": {"name": "workers-abcde", "namespace": CAPI_NAMESPACE,
                            "annotations": {"cluster.x-k8s.io/cloned-from-name": "workers-t0"}},
               "spec": {"ami": {"id": AWS_416}}}
    await apply(kube_api, machine)
    assert await once(kube_cluster) == 0  # t1
    await apply(kube_api, next_release_golden())
    assert await once(kube_cluster) == 0  # t2: t0 would go two updates on, but a machine runs from it
    t2_name = ref_name((await capi_items(kube_api, "machinesets"))["workers"])
    assert "workers-t0" in await templates(kube_api), "a machine was cloned from it: kept"
    assert t2_name.startswith("workers-") and "-bic-" not in t2_name
    await kube_request(kube_api, "DELETE", f"{INFRA.format(version='v1beta2', plural='awsmachines')}/workers-abcde")
    third = next_release_golden()
    stream = json.loads(third["data"]["stream"])
    stream["architectures"]["x86_64"]["images"]["aws"]["regions"]["us-east-1"]["image"] = "ami-0f00000000000000c"
    third["data"]["stream"] = json.dumps(stream)
    # The image it boots now stays in the golden data (another stream), so it is a known RHCOS image.
    streams = json.loads(third["data"]["streams"])
    streams["rhel-9"]["architectures"]["x86_64"]["images"]["aws"]["regions"]["us-east-1"]["image"] = NEXT_AMI
    third["data"]["streams"] = json.dumps(streams)
    await apply(kube_api, third)
    assert await once(kube_cluster) == 0  # t3: the next update looks again
    found = await templates(kube_api)
    assert "workers-t0" not in found, "the machine is gone: deleted at the next update"
    assert t2_name in found, "the template the current one replaced stays, for rollback"


async def test_a_capi_pool_whose_new_image_never_joins_is_rolled_back_and_a_good_one_verified(
    kube_cluster: TestCluster, kube_api: Any
) -> None:
    """Boot verification of a Cluster API pool (SPEC section 3b, docs/capi.md): the harness plays CAPA
    and the kubelet only (`machine_provider(capi=True)`), the scale-ups stand in for CAPI's
    MachineSet controller; the daemon judges the Machines through their AWSMachines and rolls back
    `infrastructureRef.name` to the previous template."""
    cluster = await arrange(kube_api, "AWS", "machinesets")
    await apply(kube_api, template("AWSMachineTemplate", "workers-t0", {"ami": {"id": AWS_416}, "instanceType": "m6i.xlarge"},
                                   owners=[cluster]))
    await apply(kube_api, capi_object("MachineSet", "workers", "AWSMachineTemplate", "workers-t0", owners=[cluster]))

    async def workers() -> dict[str, Any]:
        return (await capi_items(kube_api, "machinesets"))["workers"]

    async def verdict() -> dict[str, Any] | None:
        raw = ((await workers())["metadata"].get("annotations") or {}).get(ANNOTATION_BOOT_IMAGE_VERIFIED)
        return json.loads(raw) if raw else None

    async def points_at(predicate: Any) -> bool:
        return bool(predicate(ref_name(await workers())))

    images = {AWS_422: Boot.NEVER_JOINS, NEXT_AMI: Boot.GOOD}
    async with machine_provider(kube_api, images, capi=True), \
            daemon_task(kube_cluster.kubeconfig, "--first-boot-timeout", "3s"):
        await wait_for(lambda: points_at(lambda name: name != "workers-t0"), 30, "the 4.22 template written")
        t1_name = ref_name(await workers())
        await capi_scale_up(kube_api, await workers(), "workers-a")

        async def rolled_back() -> bool:
            v = await verdict()
            return await points_at(lambda name: name == "workers-t0") and v is not None \
                and v.get("failedImages") == [AWS_422]

        await wait_for(rolled_back, 30, "the roll back to the previous template")
        reasons = {e["reason"]: e for e in await _capi_events(kube_api, "workers")}
        warning = reasons[EVENT_FIRST_BOOT_FAILED]
        assert warning["type"] == "Warning" and "workers-a" in warning["message"] and AWS_422 in warning["message"]
        assert "workers-t0" in reasons[EVENT_ROLLED_BACK]["message"]
        assert obs.REGISTRY.get_sample_value("bootimage_controller_boot_image_verified", {
            "namespace": CAPI_NAMESPACE, "name": "workers", "kind": CAPI_MACHINESET}) == -1
        await asyncio.sleep(2)
        assert ref_name(await workers()) == "workers-t0", "the failed image is not written again"
        assert t1_name in await templates(kube_api), "the failed template is not the one in use, nothing else"

        # The golden data names a new image that boots: written, a Machine joins, verified.
        await apply(kube_api, next_release_golden())
        await wait_for(lambda: points_at(lambda name: name not in ("workers-t0", t1_name)), 30, "the next template")
        await capi_scale_up(kube_api, await workers(), "workers-b")

        async def verified() -> bool:
            v = await verdict()
            return v is not None and v["verdict"] == "verified" and v["image"] == NEXT_AMI

        await wait_for(verified, 30, "the verdict verified")
        v = await verdict()
        assert v is not None and (v["machine"], v["node"], v["failedImages"]) == ("workers-b", "workers-b", [AWS_422])
    # `plan --from-cluster` shows what the daemon recorded.
    row = next(m for m in (await plan_from_cluster(kube_cluster))["machineSets"] if m["name"] == "workers")
    assert (row["kind"], row["verified"]["verdict"], row["verified"]["image"]) == (CAPI_MACHINESET, "verified", NEXT_AMI)


async def _capi_events(api: Any, name: str) -> list[dict[str, Any]]:
    doc = await kube_request(api, "GET", f"/api/v1/namespaces/{CAPI_NAMESPACE}/events",
                             query=[("fieldSelector", f"involvedObject.name={name}")])
    return list(doc["items"])
