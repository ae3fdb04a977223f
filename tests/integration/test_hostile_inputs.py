"""Every input is hostile until validated (issue 24), on the loopback kube-apiserver.

- Golden data with an empty AMI for one region and a 5,000-digit integer in `data.streams`: the
  MachineSet of that region is an error naming the ConfigMap and the JSON path and is not written;
  the others are patched; rhel-10 MachineSets get InvalidStreamData; no traceback (the suite's hook).
- A Cluster API v1beta2 MachineDeployment goes RolloutInProgress -> settled -> patched, read from
  `upToDateReplicas` (the landed code read `updatedReplicas`, which v1beta2 lacks, and never patched).
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from core.capi.objects import capi_object, managers, template
from harness.cluster import TestCluster
from harness.objects import (
    apply,
    bootimages_configmap,
    cluster_version,
    infrastructure,
    kube_request,
    machine_configuration,
    machineset_from_fixture,
)

from bootimage_controller.constants import CAPI_NAMESPACE, LABEL_OSSTREAM
from bootimage_controller.daemon import run as daemon

from .daemon_helpers import list_machinesets, run_args, user_data_secret

pytestmark = pytest.mark.integration

AWS_416 = "ami-05483066c3caaccf5"
FIXTURE = "aws-x86_64-us-east-1a-4.16.yaml"
MC_PATH = "/apis/operator.openshift.io/v1/machineconfigurations/cluster"
MD_V1BETA2 = f"/apis/cluster.x-k8s.io/v1beta2/namespaces/{CAPI_NAMESPACE}/machinedeployments"


async def once(cluster: TestCluster) -> int:
    return await daemon.run_async(run_args(cluster.kubeconfig, "--once", "--no-leader-elect"))


def ami(ms: dict[str, Any]) -> str:
    return str(ms["spec"]["template"]["spec"]["providerSpec"]["value"]["ami"]["id"])


def hostile_golden() -> dict[str, Any]:
    cm = bootimages_configmap("coreos-bootimages-4.22-multistream.yaml")
    stream = json.loads(cm["data"]["stream"])
    stream["architectures"]["x86_64"]["images"]["aws"]["regions"]["us-east-1"]["image"] = ""
    cm["data"]["stream"] = json.dumps(stream)
    cm["data"]["streams"] = '{"rhel-10": {"architectures": {}, "size": ' + "9" * 5000 + "}}"
    return cm


async def test_golden_data_that_cannot_be_a_boot_image_is_never_a_target(
    kube_cluster: TestCluster, kube_api: Any
) -> None:
    await apply(kube_api, infrastructure("AWS", region="us-east-1"))
    await apply(kube_api, cluster_version())
    await apply(kube_api, machine_configuration())
    await apply(kube_api, user_data_secret())
    await apply(kube_api, hostile_golden())
    east2 = machineset_from_fixture(FIXTURE, "east-2", provider_spec={
        "placement": {"availabilityZone": "us-east-2a", "region": "us-east-2"}})
    for obj in (machineset_from_fixture(FIXTURE, "east-1"), east2,
                machineset_from_fixture(FIXTURE, "rhel10", labels={LABEL_OSSTREAM: "rhel-10"})):
        await apply(kube_api, obj)
    before = await list_machinesets(kube_api)

    assert await once(kube_cluster) == 1  # Degraded: two MachineSets cannot be planned

    after = await list_machinesets(kube_api)
    assert ami(after["east-1"]) == AWS_416, "patched to an empty AMI"
    assert after["east-1"]["metadata"]["resourceVersion"] == before["east-1"]["metadata"]["resourceVersion"]
    assert after["rhel10"]["metadata"]["resourceVersion"] == before["rhel10"]["metadata"]["resourceVersion"]
    assert ami(after["east-2"]) != AWS_416, "the others are still planned and patched"
    degraded = next(c for c in (await kube_request(kube_api, "GET", MC_PATH))["status"]["conditions"]
                    if c["type"] == "BootImageUpdateDegraded")
    assert degraded["status"] == "True"
    message = degraded["message"]
    # Degraded names the ConfigMap, the key and the JSON path of each broken value.
    assert "ConfigMap coreos-bootimages data.stream" in message and "not a well-formed AMI id" in message
    assert "architectures.x86_64.images.aws.regions.us-east-1.image" in message
    assert "data.streams" in message and "5000 digits" in message
    events = await kube_request(kube_api, "GET", "/api/v1/namespaces/openshift-machine-api/events")
    reasons = {e["involvedObject"]["name"]: e["message"] for e in events["items"] if e["reason"] == "BootImageUpdateFailed"}
    assert set(reasons) == {"east-1", "rhel10"}


async def test_a_v1beta2_machinedeployment_is_patched_once_its_rollout_settles(
    kube_cluster: TestCluster, kube_api: Any
) -> None:
    await apply(kube_api, infrastructure("AWS", region="us-east-1"))
    await apply(kube_api, cluster_version())
    mc = machine_configuration()
    mc["spec"].update(managers("machinesets", "machinedeployments"))
    await apply(kube_api, mc)
    await apply(kube_api, bootimages_configmap("coreos-bootimages-4.22-multistream.yaml"))
    await apply(kube_api, user_data_secret())
    cluster = await apply(kube_api, {"apiVersion": "cluster.x-k8s.io/v1beta1", "kind": "Cluster",
                                     "metadata": {"name": "mycluster-7xk2p", "namespace": CAPI_NAMESPACE}, "spec": {}})
    owners = [{"apiVersion": "cluster.x-k8s.io/v1beta1", "kind": "Cluster", "name": "mycluster-7xk2p",
               "uid": cluster["metadata"]["uid"]}]
    await apply(kube_api, template("AWSMachineTemplate", "t0", {"ami": {"id": AWS_416}}, owners=owners))
    md = capi_object("MachineDeployment", "pool", "AWSMachineTemplate", "t0", replicas=3, owners=owners)
    md["apiVersion"] = "cluster.x-k8s.io/v1beta2"
    stored = await apply(kube_api, md)
    generation = stored["metadata"].get("generation", 1)

    async def set_status(status: dict[str, Any]) -> None:
        live = await kube_request(kube_api, "GET", f"{MD_V1BETA2}/pool")
        live["status"] = {"observedGeneration": generation, **status}
        await kube_request(kube_api, "PUT", f"{MD_V1BETA2}/pool/status", live)

    async def template_name() -> str:
        live = await kube_request(kube_api, "GET", f"{MD_V1BETA2}/pool")
        return str(live["spec"]["template"]["spec"]["infrastructureRef"]["name"])

    # Mid-rollout, as v1beta2 says it: one of three machines on the current template.
    await set_status({"replicas": 3, "upToDateReplicas": 1, "readyReplicas": 3,
                      "conditions": [{"type": "RollingOut", "status": "True", "reason": "RollingOut",
                                      "message": "2 old Machines", "lastTransitionTime": "2026-11-25T00:00:00Z"}]})
    assert await once(kube_cluster) == 0
    assert await template_name() == "t0", "never patched mid-rollout"
    # Settled: every replica up to date, RollingOut False. The landed code waited forever here.
    await set_status({"replicas": 3, "upToDateReplicas": 3, "readyReplicas": 3, "availableReplicas": 3,
                      "conditions": [{"type": "RollingOut", "status": "False", "reason": "NotRollingOut",
                                      "lastTransitionTime": "2026-11-25T00:00:00Z"}]})
    assert await once(kube_cluster) == 0
    assert await template_name() != "t0", "a settled v1beta2 MachineDeployment is patched"
