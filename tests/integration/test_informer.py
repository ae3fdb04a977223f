"""The informer against a real kube-apiserver: events, selectors, 410 after compaction, bookmarks."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
from harness.cluster import ClusterFactory, TestCluster
from harness.objects import MERGE_PATCH, control_plane_node, machineset_from_fixture, node
from kubernetes_asyncio import client as k8s_client

from bootimage_controller.constants import (
    CONTROL_PLANE_NODE_LABELS,
    MACHINE_API_GROUP,
    MACHINESET_PLURAL,
    MACHINESET_VERSION,
    MAPI_NAMESPACE,
    MCO_NAMESPACE,
)
from bootimage_controller.kube.client import InstrumentedApiClient, make_api_client
from bootimage_controller.kube.informer import Informer, ListWatch, object_key
from bootimage_controller.kube.retry import Backoff
from bootimage_controller.observability import REGISTRY

pytestmark = pytest.mark.integration

WAIT = 20.0
FAST_BACKOFF = Backoff(base=0.05, cap=0.5)


class Events:
    """Records handler calls as (type, key, resourceVersion) and lets a test wait for some."""

    def __init__(self, informer: Informer) -> None:
        self.seen: list[tuple[str, str, str]] = []
        informer.add_handler(
            on_add=lambda o: self._record("add", o),
            on_update=lambda old, new: self._record("update", new),
            on_delete=lambda o: self._record("delete", o),
        )

    def _record(self, kind: str, obj: dict[str, Any]) -> None:
        self.seen.append((kind, object_key(obj), obj["metadata"]["resourceVersion"]))

    def kinds_for(self, key: str) -> list[str]:
        return [kind for kind, k, _ in self.seen if k == key]

    async def wait_for(self, pred: Callable[[], bool], timeout: float = WAIT) -> None:
        async with asyncio.timeout(timeout):
            while not pred():
                await asyncio.sleep(0.02)


@contextlib.asynccontextmanager
async def running(informer: Informer) -> AsyncIterator[Informer]:
    informer.start()
    try:
        assert await informer.wait_synced(WAIT), f"informer did not sync: {informer.last_error}"
        yield informer
    finally:
        await informer.stop()


@pytest.fixture
async def api(
    kube_cluster: TestCluster, kube_api: k8s_client.ApiClient
) -> AsyncIterator[InstrumentedApiClient]:
    """The daemon's own client (rate limit + metrics) on the session cluster, reset by kube_api."""
    client = await make_api_client(str(kube_cluster.kubeconfig), qps=100, burst=200)
    async with client:
        yield client


def _custom(api: k8s_client.ApiClient) -> Any:
    return k8s_client.CustomObjectsApi(api)


def _core(api: k8s_client.ApiClient) -> Any:
    return k8s_client.CoreV1Api(api)


def _configmap(name: str, namespace: str = MCO_NAMESPACE, **data: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": namespace}, "data": dict(data)}


async def test_informer_sees_machineset_add_update_delete(api: InstrumentedApiClient) -> None:
    source = ListWatch.custom_objects(
        api, MACHINE_API_GROUP, MACHINESET_VERSION, MACHINESET_PLURAL, MAPI_NAMESPACE
    )
    informer = Informer(source, backoff=FAST_BACKOFF)
    events = Events(informer)
    watch_before = REGISTRY.get_sample_value(
        "bootimage_controller_api_requests_total", {"verb": "watch", "resource": "machinesets", "code": "200"}
    )
    co = _custom(api)
    async with running(informer):
        assert len(informer) == 0
        ms = machineset_from_fixture("aws-x86_64-us-east-1a-4.16.yaml")
        name = ms["metadata"]["name"]
        key = f"{MAPI_NAMESPACE}/{name}"
        created = await co.create_namespaced_custom_object(
            MACHINE_API_GROUP, MACHINESET_VERSION, MAPI_NAMESPACE, MACHINESET_PLURAL, ms
        )
        await events.wait_for(lambda: events.kinds_for(key) == ["add"])
        cached = informer.get(key)
        assert cached is not None and cached["metadata"]["uid"] == created["metadata"]["uid"]

        patched = await co.patch_namespaced_custom_object(
            MACHINE_API_GROUP,
            MACHINESET_VERSION,
            MAPI_NAMESPACE,
            MACHINESET_PLURAL,
            name,
            {"metadata": {"labels": {"seen-by": "informer"}}},
            _content_type=MERGE_PATCH,
        )
        await events.wait_for(lambda: events.kinds_for(key) == ["add", "update"])
        cached = informer.get(key)
        assert cached is not None
        assert cached["metadata"]["labels"]["seen-by"] == "informer"
        assert informer.resource_version == patched["metadata"]["resourceVersion"]

        await co.delete_namespaced_custom_object(
            MACHINE_API_GROUP, MACHINESET_VERSION, MAPI_NAMESPACE, MACHINESET_PLURAL, name
        )
        await events.wait_for(lambda: events.kinds_for(key) == ["add", "update", "delete"])
        assert informer.get(key) is None
        assert informer.list_count == 1, "a healthy watch never re-lists"
    watch_after = REGISTRY.get_sample_value(
        "bootimage_controller_api_requests_total", {"verb": "watch", "resource": "machinesets", "code": "200"}
    )
    assert (watch_after or 0) > (watch_before or 0), "the watch request went through the metered client"


async def test_selectors_limit_what_is_cached_and_delivered(api: InstrumentedApiClient) -> None:
    core = _core(api)
    await core.create_namespaced_config_map(MCO_NAMESPACE, _configmap("coreos-bootimages", stream="{}"))
    await core.create_namespaced_config_map(MCO_NAMESPACE, _configmap("unrelated"))
    cms = Informer(ListWatch.config_maps(api, MCO_NAMESPACE, name="coreos-bootimages"), backoff=FAST_BACKOFF)
    masters = Informer(
        ListWatch.nodes(api, label_selector=CONTROL_PLANE_NODE_LABELS[0]), backoff=FAST_BACKOFF
    )
    cm_events, node_events = Events(cms), Events(masters)
    await core.create_node(control_plane_node("master-0"))
    async with running(cms), running(masters):
        assert cms.keys() == [f"{MCO_NAMESPACE}/coreos-bootimages"]
        assert masters.keys() == ["master-0"]
        cached = masters.get("master-0")
        assert cached is not None and cached["kind"] == "Node", "list items get their kind back"

        await core.create_node(node("worker-0"))
        await core.create_node(control_plane_node("master-1"))
        await core.patch_namespaced_config_map("unrelated", MCO_NAMESPACE, {"data": {"x": "1"}})
        await core.patch_namespaced_config_map("coreos-bootimages", MCO_NAMESPACE, {"data": {"x": "1"}})
        await node_events.wait_for(lambda: node_events.kinds_for("master-1") == ["add"])
        await cm_events.wait_for(
            lambda: cm_events.kinds_for(f"{MCO_NAMESPACE}/coreos-bootimages") == ["add", "update"]
        )
        assert sorted(masters.keys()) == ["master-0", "master-1"]
        assert node_events.kinds_for("worker-0") == []
        assert cm_events.kinds_for(f"{MCO_NAMESPACE}/unrelated") == []
        assert cms.keys() == [f"{MCO_NAMESPACE}/coreos-bootimages"]


class WatchGate:
    """Wraps a list function: while closed, watch requests wait (the connection is 'down')."""

    def __init__(self, list_fn: Callable[..., Any]) -> None:
        self.list_fn = list_fn
        self.open = asyncio.Event()
        self.open.set()
        self.blocked = 0
        self.responses: list[Any] = []

    async def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if kwargs.get("watch"):
            if not self.open.is_set():
                self.blocked += 1
            await self.open.wait()
        resp = await self.list_fn(*args, **kwargs)
        if kwargs.get("watch"):
            self.responses.append(resp)
        return resp

    def cut(self) -> None:
        """Drop the live watch connection and keep new ones from connecting."""
        self.open.clear()
        for resp in self.responses:
            resp.close()


async def test_watch_broken_across_compaction_relists_and_misses_nothing(
    fresh_cluster: ClusterFactory,
) -> None:
    # Without the watch cache the API server serves watches from etcd, which forgets compacted history.
    cluster = fresh_cluster(extra_apiserver_args=("--watch-cache=false",), with_controller_manager=False)
    async with await make_api_client(str(cluster.kubeconfig), qps=100, burst=200) as api:
        core = _core(api)
        for name in ("a", "b", "c"):
            await core.create_namespaced_config_map(MCO_NAMESPACE, _configmap(name, v="0"))
        real = ListWatch.config_maps(api, MCO_NAMESPACE)
        gate = WatchGate(real.list_fn)
        informer = Informer(ListWatch("configmaps", gate, real.args), backoff=FAST_BACKOFF)
        events = Events(informer)
        key = {n: f"{MCO_NAMESPACE}/{n}" for n in "abcde"}
        async with running(informer):
            assert sorted(informer.keys()) == [key["a"], key["b"], key["c"]]
            await events.wait_for(lambda: len(gate.responses) == 1)
            # A live watch first: it delivers changes as they happen.
            await core.patch_namespaced_config_map("c", MCO_NAMESPACE, {"data": {"v": "1"}})
            await events.wait_for(lambda: events.kinds_for(key["c"]) == ["add", "update"])
            last_seen = int(informer.resource_version or 0)

            gate.cut()
            await events.wait_for(lambda: gate.blocked > 0)  # reconnecting, and held off
            events.seen.clear()
            # While disconnected: a modified, b deleted, d created, e created and deleted again.
            await core.patch_namespaced_config_map("a", MCO_NAMESPACE, {"data": {"v": "2"}})
            await core.delete_namespaced_config_map("b", MCO_NAMESPACE)
            await core.create_namespaced_config_map(MCO_NAMESPACE, _configmap("d", v="0"))
            await core.create_namespaced_config_map(MCO_NAMESPACE, _configmap("e", v="0"))
            await core.delete_namespaced_config_map("e", MCO_NAMESPACE)
            assert cluster.compact_etcd() > last_seen
            assert events.seen == []

            gate.open.set()  # reconnect from the compacted revision: 410, re-list
            await events.wait_for(lambda: informer.list_count == 2)
            # Exactly what changed, once each; e came and went unseen, which is all a cache can know.
            assert sorted((kind, k) for kind, k, _ in events.seen) == [
                ("add", key["d"]),
                ("delete", key["b"]),
                ("update", key["a"]),
            ]
            listed = await core.list_namespaced_config_map(MCO_NAMESPACE)
            assert {
                f"{MCO_NAMESPACE}/{i.metadata.name}": i.metadata.resource_version for i in listed.items
            } == {object_key(o): o["metadata"]["resourceVersion"] for o in informer.list()}
            cached_a = informer.get(key["a"])
            assert cached_a is not None and cached_a["data"] == {"v": "2"}

            # ...and it is watching again, from the new list's resourceVersion.
            events.seen.clear()
            await core.patch_namespaced_config_map("d", MCO_NAMESPACE, {"data": {"v": "3"}})
            await events.wait_for(lambda: events.kinds_for(key["d"]) == ["update"])
            assert informer.list_count == 2


async def test_bookmarks_advance_the_resource_version(api: InstrumentedApiClient) -> None:
    core = _core(api)
    await core.create_namespaced_config_map(MCO_NAMESPACE, _configmap("quiet"))
    # A short server timeout: the API server sends a bookmark before it ends each watch.
    informer = Informer(
        ListWatch.config_maps(api, MCO_NAMESPACE, name="quiet"), watch_timeout=3, backoff=FAST_BACKOFF
    )
    events = Events(informer)
    async with running(informer):
        events.seen.clear()
        # Changes the informer does not watch (another namespace) move the resourceVersion on.
        for n in range(3):
            await core.create_namespaced_config_map(MAPI_NAMESPACE, _configmap(f"noise-{n}", MAPI_NAMESPACE))
        noise = await core.read_namespaced_config_map("noise-2", MAPI_NAMESPACE)
        target = int(noise.metadata.resource_version)
        assert int(informer.resource_version or 0) < target
        await events.wait_for(lambda: int(informer.resource_version or 0) >= target)
        assert events.seen == [], "no object event: only a bookmark can have moved it"
        assert informer.list_count == 1


async def test_kind_not_served_is_absent_not_fatal(api: InstrumentedApiClient) -> None:
    # e.g. a cluster without the ControlPlaneMachineSet CRD: the API server answers 404 to LIST.
    source = ListWatch.custom_objects(api, "bootimage-test.example.com", "v1", "widgets")
    informer = Informer(source, backoff=FAST_BACKOFF, absent_ok=True)
    async with running(informer):
        assert informer.absent
        assert informer.list() == []
        assert "404" in (informer.last_error or "")
