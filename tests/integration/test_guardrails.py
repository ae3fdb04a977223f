"""Guardrails on the real API server (issue 14): what the controller refuses to do whatever it is asked."""

from __future__ import annotations

import asyncio

import pytest
from harness.cluster import TestCluster
from harness.objects import MERGE_PATCH, apply, kube_request
from kubernetes_asyncio import client as k8s_client

from bootimage_controller.constants import AWS_CREDENTIALS_SECRET, CONDITION_DEGRADED, MAPI_NAMESPACE

from .daemon_helpers import daemon_task, user_data_secret
from .fleet import AWS_416, ami, aws_machinesets, base_cluster, conditions, get_ms

pytestmark = pytest.mark.integration

SECRETS = f"/api/v1/namespaces/{MAPI_NAMESPACE}/secrets"


async def test_a_cloud_credentials_secret_named_as_user_data_is_never_read_or_written(
    kube_cluster: TestCluster, kube_api: k8s_client.ApiClient
) -> None:
    await base_cluster(kube_api)
    # The worst case: the credentials Secret even holds a spec 2 stub, which would be "upgradable".
    trap = user_data_secret(AWS_CREDENTIALS_SECRET)
    before = await apply(kube_api, trap)
    await aws_machinesets(
        kube_api, ["hostile"], provider_spec={"userDataSecret": {"name": AWS_CREDENTIALS_SECRET}}
    )
    async with daemon_task(kube_cluster.kubeconfig, "--once") as task:
        code = await task
    assert code == 1, "a MachineSet in error fails the pass"
    after = await kube_request(kube_api, "GET", f"{SECRETS}/{AWS_CREDENTIALS_SECRET}")
    assert after["metadata"]["resourceVersion"] == before["metadata"]["resourceVersion"]
    assert after["data"] == before["data"] and not after["metadata"].get("annotations")
    ms = await get_ms(kube_api, "hostile")
    assert ms is not None and ami(ms) == AWS_416, "no boot image patch either"
    degraded = (await conditions(kube_api))[CONDITION_DEGRADED]
    assert degraded["status"] == "True"
    assert "UserDataInvalid" in degraded["message"] and AWS_CREDENTIALS_SECRET in degraded["message"], degraded
    assert "aws_secret_access_key" not in degraded["message"]


async def test_workers_racing_on_the_holder_re_read_instead_of_failing(kube_api: k8s_client.ApiClient) -> None:
    """Two workers find the holder missing (both create: one gets 409), or without its finalizer
    (both patch with a resourceVersion test: one gets the failed-test 422). Both must end with the
    same holder, finalizer on, and no error (it used to be an unhandled 422 traceback)."""
    from bootimage_controller.constants import CLAIM_FINALIZER, CLAIM_HOLDER_NAME
    from bootimage_controller.reconcile.writer import MachineSetWriter

    def writer() -> MachineSetWriter:
        return MachineSetWriter(k8s_client.CustomObjectsApi(kube_api), k8s_client.CoreV1Api(kube_api))

    path = f"/api/v1/namespaces/{MAPI_NAMESPACE}/configmaps/{CLAIM_HOLDER_NAME}"
    for _ in range(5):  # a race is a matter of timing: try it several times
        created = await asyncio.gather(*(writer().ensure_holder() for _ in range(4)))
        assert len({h.uid for h in created}) == 1
        await kube_request(kube_api, "PATCH", path, {"metadata": {"finalizers": None}}, content_type=MERGE_PATCH)
        restored = await asyncio.gather(*(writer().ensure_holder() for _ in range(4)))
        assert {h.uid for h in restored} == {h.uid for h in created}
        live = await kube_request(kube_api, "GET", path)
        assert live["metadata"]["finalizers"] == [CLAIM_FINALIZER]
        await kube_request(kube_api, "PATCH", path, {"metadata": {"finalizers": None}}, content_type=MERGE_PATCH)
        await kube_request(kube_api, "DELETE", path)
