"""The test control plane is a real API server: the semantics later tests rely on hold on it."""

from __future__ import annotations

import asyncio
import copy
import urllib.error
from typing import Any

import pytest
from harness.cluster import BOOTIMAGE_CONTROLLER_USER, ClusterFactory, TestCluster, crd_documents
from harness.objects import (
    MERGE_PATCH,
    api_client_for,
    apply,
    bootimages_configmap,
    cluster_version,
    control_plane_machine_set,
    control_plane_node,
    get_object,
    infrastructure,
    kube_request,
    machine_configuration,
    machine_manager,
    machineset_from_fixture,
    reset_cluster,
    skew_manual,
)
from kubernetes_asyncio import client as k8s_client
from kubernetes_asyncio.client.rest import ApiException
from kubernetes_asyncio.watch import Watch

from bootimage_controller.constants import (
    ANNOTATION_ALEPH_VERSION,
    MACHINE_API_GROUP,
    MACHINESET_PLURAL,
    MACHINESET_VERSION,
    MAPI_NAMESPACE,
    MCO_NAMESPACE,
)

pytestmark = pytest.mark.integration

AWS_FIXTURE = "aws-x86_64-us-east-1a-4.16.yaml"
PROVIDER_SPEC = ("spec", "template", "spec", "providerSpec", "value")
# Keys no AWSMachineProviderConfig has today: a newer machine-api may add such fields, and a
# write by the controller must not drop them.
UNKNOWN_PROVIDER_KEYS: dict[str, Any] = {
    "futureField": {"nested": [1, "two", {"three": True}]},
    "capacityReservationId": "cr-0123456789abcdef0",
}


def _custom(api: k8s_client.ApiClient) -> Any:
    # Any: the bundled stubs omit `_content_type` and dict bodies, which the generated methods accept.
    return k8s_client.CustomObjectsApi(api)


def _core(api: k8s_client.ApiClient) -> Any:
    return k8s_client.CoreV1Api(api)


def _provider_spec(obj: dict[str, Any]) -> Any:
    value: Any = obj
    for key in PROVIDER_SPEC:
        value = value[key]
    return value


async def _wait_until(predicate: Any, timeout: float, what: str) -> None:
    """Poll an async predicate; fail naming `what` after `timeout` seconds."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not await predicate():
        if loop.time() > deadline:
            pytest.fail(f"timed out after {timeout}s waiting for {what}")
        await asyncio.sleep(0.2)


async def test_every_crd_is_established(kube_api: k8s_client.ApiClient) -> None:
    crds = {d["metadata"]["name"] for d in crd_documents()}
    assert crds == {
        "machinesets.machine.openshift.io",
        "controlplanemachinesets.machine.openshift.io",
        "machines.machine.openshift.io",
        "machineconfigurations.operator.openshift.io",
        "clusterversions.config.openshift.io",
        "infrastructures.config.openshift.io",
        "clusteroperators.config.openshift.io",
        "proxies.config.openshift.io",
        "featuregates.config.openshift.io",
        # Cluster API (issue 16)
        "clusters.cluster.x-k8s.io",
        "machinesets.cluster.x-k8s.io",
        "machines.cluster.x-k8s.io",
        "machinedeployments.cluster.x-k8s.io",
        # the machines cloned from templates (an old template stays while one runs from it)
        "awsmachines.infrastructure.cluster.x-k8s.io",
        "gcpmachines.infrastructure.cluster.x-k8s.io",
        "azuremachines.infrastructure.cluster.x-k8s.io",
        "vspheremachines.infrastructure.cluster.x-k8s.io",
        "awsmachinetemplates.infrastructure.cluster.x-k8s.io",
        "gcpmachinetemplates.infrastructure.cluster.x-k8s.io",
        "azuremachinetemplates.infrastructure.cluster.x-k8s.io",
        "vspheremachinetemplates.infrastructure.cluster.x-k8s.io",
    }
    ext = k8s_client.ApiextensionsV1Api(kube_api)
    for name in crds:
        crd = await ext.read_custom_resource_definition(name)
        established = [c for c in crd.status.conditions if c.type == "Established"]
        assert established and established[0].status == "True", name


async def test_machineset_round_trips_with_unknown_provider_spec_keys(kube_api: k8s_client.ApiClient) -> None:
    ms = machineset_from_fixture(AWS_FIXTURE, provider_spec=UNKNOWN_PROVIDER_KEYS)
    stored = await apply(kube_api, ms)

    co = _custom(kube_api)
    live = await co.get_namespaced_custom_object(
        MACHINE_API_GROUP, MACHINESET_VERSION, MAPI_NAMESPACE, MACHINESET_PLURAL, ms["metadata"]["name"]
    )
    assert _provider_spec(live) == _provider_spec(ms)
    assert _provider_spec(live)["futureField"] == UNKNOWN_PROVIDER_KEYS["futureField"]
    assert live["spec"]["template"]["metadata"] == ms["spec"]["template"]["metadata"]
    assert live["spec"]["selector"] == ms["spec"]["selector"]
    assert live["metadata"]["annotations"] == ms["metadata"]["annotations"]
    assert stored["metadata"]["resourceVersion"] == live["metadata"]["resourceVersion"]


async def test_structural_schema_prunes_unknown_fields_outside_provider_spec(
    kube_api: k8s_client.ApiClient,
) -> None:
    ms = machineset_from_fixture(AWS_FIXTURE, merge={"spec": {"template": {"spec": {"notAMachineField": 1}}}})
    live = await apply(kube_api, ms)
    assert "notAMachineField" not in live["spec"]["template"]["spec"]
    assert _provider_spec(live) == _provider_spec(ms)


async def test_status_goes_through_the_status_subresource(kube_api: k8s_client.ApiClient) -> None:
    ms = machineset_from_fixture(AWS_FIXTURE)
    ms["status"] = {"replicas": 1, "readyReplicas": 1, "availableReplicas": 1, "observedGeneration": 1}
    stored = await apply(kube_api, ms)
    assert stored["status"]["readyReplicas"] == 1

    co = _custom(kube_api)
    name = ms["metadata"]["name"]
    # A status change sent to the main resource is ignored, as on OpenShift.
    await co.patch_namespaced_custom_object(
        MACHINE_API_GROUP, MACHINESET_VERSION, MAPI_NAMESPACE, MACHINESET_PLURAL, name,
        {"status": {"readyReplicas": 0}}, _content_type=MERGE_PATCH,
    )  # fmt: skip
    live = await get_object(kube_api, ms)
    assert live is not None and live["status"]["readyReplicas"] == 1

    # Applying again replaces the object (no 409 on an existing one).
    again = await apply(kube_api, machineset_from_fixture(AWS_FIXTURE, replicas=3))
    assert again["spec"]["replicas"] == 3


async def test_merge_patch_with_stale_resource_version_is_a_conflict(kube_api: k8s_client.ApiClient) -> None:
    ms = machineset_from_fixture(AWS_FIXTURE)
    first = await apply(kube_api, ms)
    stale_rv = first["metadata"]["resourceVersion"]
    co = _custom(kube_api)
    args = (MACHINE_API_GROUP, MACHINESET_VERSION, MAPI_NAMESPACE, MACHINESET_PLURAL, ms["metadata"]["name"])

    # Another writer changes the object: our resourceVersion is now stale.
    await co.patch_namespaced_custom_object(*args, {"spec": {"replicas": 2}}, _content_type=MERGE_PATCH)
    with pytest.raises(ApiException) as err:
        await co.patch_namespaced_custom_object(
            *args,
            {"metadata": {"resourceVersion": stale_rv}, "spec": {"replicas": 5}},
            _content_type=MERGE_PATCH,
        )
    assert err.value.status == 409
    live = await co.get_namespaced_custom_object(*args)
    assert live["spec"]["replicas"] == 2  # the other writer's change survived


async def test_json_patch_with_failing_test_op_is_unprocessable(kube_api: k8s_client.ApiClient) -> None:
    ms = machineset_from_fixture(AWS_FIXTURE)
    await apply(kube_api, ms)
    co = _custom(kube_api)
    args = (MACHINE_API_GROUP, MACHINESET_VERSION, MAPI_NAMESPACE, MACHINESET_PLURAL, ms["metadata"]["name"])
    ami_path = "/spec/template/spec/providerSpec/value/ami"
    with pytest.raises(ApiException) as err:
        await co.patch_namespaced_custom_object(
            *args,
            [
                {"op": "test", "path": f"{ami_path}/id", "value": "ami-0000000000000000"},
                {"op": "replace", "path": ami_path, "value": {"id": "ami-06a6b025350ff1e23"}},
            ],
            _content_type="application/json-patch+json",
        )
    assert err.value.status == 422
    live = await co.get_namespaced_custom_object(*args)
    assert _provider_spec(live)["ami"] == _provider_spec(ms)["ami"]


async def test_watch_from_compacted_revision_is_gone(fresh_cluster: ClusterFactory) -> None:
    cluster = fresh_cluster(extra_apiserver_args=("--watch-cache=false",), with_controller_manager=False)
    async with await api_client_for(cluster.kubeconfig) as api:
        core = _core(api)
        cm = {"metadata": {"name": "counter", "namespace": MCO_NAMESPACE}, "data": {"n": "0"}}
        await core.create_namespaced_config_map(MCO_NAMESPACE, cm)
        listed = await core.list_namespaced_config_map(MCO_NAMESPACE)
        old_rv = listed.metadata.resource_version
        for n in range(1, 4):
            await core.patch_namespaced_config_map("counter", MCO_NAMESPACE, {"data": {"n": str(n)}})
        compacted_at = cluster.compact_etcd()
        assert compacted_at > int(old_rv)

        with pytest.raises(ApiException) as err:
            async with Watch() as watch:
                async for _event in watch.stream(
                    core.list_namespaced_config_map, MCO_NAMESPACE, resource_version=old_rv, timeout_seconds=5
                ):
                    pass
        assert err.value.status == 410


async def test_watch_without_compaction_replays_changes(kube_api: k8s_client.ApiClient) -> None:
    """The control for the 410 test: the same watch from a live revision sees the changes."""
    core = _core(kube_api)
    cm = {"metadata": {"name": "counter", "namespace": MCO_NAMESPACE}, "data": {"n": "0"}}
    created = await core.create_namespaced_config_map(MCO_NAMESPACE, cm)
    await core.patch_namespaced_config_map("counter", MCO_NAMESPACE, {"data": {"n": "1"}})
    seen = []
    async with Watch() as watch:
        async for event in watch.stream(
            core.list_namespaced_config_map,
            MCO_NAMESPACE,
            resource_version=created.metadata.resource_version,
            timeout_seconds=5,
        ):
            seen.append((event["type"], event["object"].data["n"]))
            break
    assert seen == [("MODIFIED", "1")]


async def test_garbage_collector_deletes_object_whose_owner_is_gone(
    kube_cluster: TestCluster, kube_api: k8s_client.ApiClient
) -> None:
    kube_cluster.wait_for_garbage_collector()
    core = _core(kube_api)
    owner = await core.create_namespaced_config_map(
        MAPI_NAMESPACE, {"metadata": {"name": "gc-owner", "namespace": MAPI_NAMESPACE}}
    )
    ref = {"apiVersion": "v1", "kind": "ConfigMap", "name": "gc-owner", "uid": owner.metadata.uid}
    child = {"metadata": {"name": "gc-child", "namespace": MAPI_NAMESPACE, "ownerReferences": [ref]}}
    await core.create_namespaced_config_map(MAPI_NAMESPACE, child)
    bystander = {"metadata": {"name": "gc-bystander", "namespace": MAPI_NAMESPACE}}
    await core.create_namespaced_config_map(MAPI_NAMESPACE, bystander)

    await core.delete_namespaced_config_map("gc-owner", MAPI_NAMESPACE)

    async def child_gone() -> bool:
        names = {cm.metadata.name for cm in (await core.list_namespaced_config_map(MAPI_NAMESPACE)).items}
        return "gc-child" not in names

    await _wait_until(child_gone, 60, "the garbage collector to delete gc-child")
    await core.read_namespaced_config_map("gc-bystander", MAPI_NAMESPACE)  # unowned: untouched


async def test_service_account_user_is_authenticated_but_not_authorized(kube_cluster: TestCluster) -> None:
    async with await api_client_for(kube_cluster.kubeconfig_for(BOOTIMAGE_CONTROLLER_USER)) as api:
        # Authenticated: any authenticated user may ask what it is allowed to do.
        authz: Any = k8s_client.AuthorizationV1Api(api)
        review = await authz.create_self_subject_access_review(
            {
                "spec": {
                    "resourceAttributes": {"verb": "list", "resource": "secrets", "namespace": MAPI_NAMESPACE}
                }
            }
        )
        assert review.status.allowed is False

        with pytest.raises(ApiException) as err:
            await k8s_client.CoreV1Api(api).list_namespaced_secret(MAPI_NAMESPACE)
        assert err.value.status == 403
        assert BOOTIMAGE_CONTROLLER_USER in str(err.value.body)

    # The control: a token the server does not know is not authenticated at all.
    with pytest.raises(urllib.error.HTTPError) as unauthenticated:
        kube_cluster.request("GET", f"/api/v1/namespaces/{MAPI_NAMESPACE}/secrets", token="not-a-token")
    assert unauthenticated.value.code == 401


def _condition_with_empty_message(type_: str) -> dict[str, str]:
    return {
        "type": type_,
        "status": "False",
        "reason": "AsExpected",
        "message": "",
        "lastTransitionTime": "2026-01-01T00:00:00Z",
    }


async def test_builders_produce_objects_the_schemas_accept(kube_api: k8s_client.ApiClient) -> None:
    ms = machineset_from_fixture(AWS_FIXTURE)
    objects = [
        infrastructure("GCP", region="us-central1"),
        cluster_version([("4.18.3", "Partial"), ("4.16.0", "Completed")], architecture="Multi"),
        machine_configuration(
            [
                machine_manager(match_labels={"pool": "blue"}),
                machine_manager("controlplanemachinesets", "All"),
            ],
            skew_manual(rhcos_version="416.94.202405291527-0"),
            status={
                # As the MCO's operator mirrors the spec (Automatic with a Partial MachineSet manager is
                # what OpenShift refuses: tests/integration/test_openshift_validation.py).
                "bootImageSkewEnforcementStatus": skew_manual(rhcos_version="416.94.202405291527-0"),
                # "" is a valid message (a 1.20 server built with Go >= 1.16 needs the harness's fix).
                "conditions": [_condition_with_empty_message("BootImageUpdateDegraded")],
            },
        ),
        bootimages_configmap("coreos-bootimages-4.22-multistream.yaml"),
        control_plane_node("master-0", arch="arm64", aleph="418.94.202410090804-0"),
        control_plane_machine_set(copy.deepcopy(_provider_spec(ms))),
    ]
    for obj in objects:
        stored = await apply(kube_api, obj)
        if obj["kind"] != "Node":  # admission adds the not-ready taint to a new Node, as on a cluster
            assert stored.get("spec") == obj.get("spec"), obj["kind"]
        assert stored["metadata"].get("labels") == obj["metadata"].get("labels"), obj["kind"]
        assert stored.get("data") == obj.get("data"), obj["kind"]
        for key, value in obj.get("status", {}).items():
            assert stored["status"][key] == value, (obj["kind"], key)

    node = await k8s_client.CoreV1Api(kube_api).read_node("master-0")  # typed client can read it
    assert node.metadata.annotations[ANNOTATION_ALEPH_VERSION] == "418.94.202410090804-0"
    assert node.status.node_info.architecture == "arm64"


@pytest.mark.parametrize(
    "spec",
    [
        {"bootImageSkewEnforcement": {"mode": "Automatic"}},  # users cannot set Automatic
        {"bootImageSkewEnforcement": {"mode": "Manual", "manual": {"mode": "OCPVersion", "ocpVersion": "4.16"}}},
        {"managedBootImages": {"machineManagers": [{"resource": "machinesets", "apiGroup": "machine.openshift.io",
                                                    "selection": {"mode": "Some"}}]}},
    ],
    ids=["automatic-in-spec", "short-ocp-version", "unknown-selection-mode"],
)  # fmt: skip
async def test_machine_configuration_schema_rejects_invalid_spec(
    kube_api: k8s_client.ApiClient, spec: dict[str, Any]
) -> None:
    obj = machine_configuration()
    obj["spec"].update(spec)
    with pytest.raises(ApiException) as err:
        await apply(kube_api, obj)
    assert err.value.status == 422


async def test_reset_leaves_nothing_behind(kube_cluster: TestCluster, kube_api: k8s_client.ApiClient) -> None:
    """What one test leaves (even with finalizers) is gone for the next one."""
    holder = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "held", "namespace": MAPI_NAMESPACE, "finalizers": ["example.com/hold"]},
    }
    await apply(kube_api, holder)
    await apply(
        kube_api,
        machineset_from_fixture(AWS_FIXTURE, merge={"metadata": {"finalizers": ["example.com/hold"]}}),
    )
    await apply(kube_api, infrastructure())
    await reset_cluster(kube_api)
    assert await get_object(kube_api, holder) is None
    listed = await kube_request(
        kube_api, "GET", f"/apis/{MACHINE_API_GROUP}/{MACHINESET_VERSION}/{MACHINESET_PLURAL}"
    )
    assert listed["items"] == []
    assert await get_object(kube_api, infrastructure()) is None


async def test_two_clusters_at_once_each_collect_garbage(
    kube_cluster: TestCluster, kube_api: k8s_client.ApiClient, fresh_cluster: ClusterFactory
) -> None:
    """A second control plane beside the session's: each controller manager runs (no port either
    binds for all, so neither exits) and each collects a dependent whose owner is gone (issue 25)."""
    second = fresh_cluster()
    assert second.running and kube_cluster.running
    async with await api_client_for(second.kubeconfig) as other:
        for cluster, api in ((kube_cluster, kube_api), (second, other)):
            await asyncio.to_thread(cluster.wait_for_garbage_collector)
            core = _core(api)
            owner = await core.create_namespaced_config_map(
                MAPI_NAMESPACE, {"metadata": {"name": "gc-owner-2", "namespace": MAPI_NAMESPACE}})
            ref = {"apiVersion": "v1", "kind": "ConfigMap", "name": "gc-owner-2", "uid": owner.metadata.uid}
            await core.create_namespaced_config_map(
                MAPI_NAMESPACE, {"metadata": {"name": "gc-child-2", "namespace": MAPI_NAMESPACE, "ownerReferences": [ref]}})
            await core.delete_namespaced_config_map("gc-owner-2", MAPI_NAMESPACE)

            async def collected(core: Any = core) -> bool:
                names = {cm.metadata.name for cm in (await core.list_namespaced_config_map(MAPI_NAMESPACE)).items}
                return "gc-child-2" not in names

            await _wait_until(collected, 60, f"the garbage collector of {cluster.server} to delete gc-child-2")
    assert second.running and kube_cluster.running, "a controller manager exited"
