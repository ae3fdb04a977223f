"""`kube/core_api.CoreApi` sends what kubernetes_asyncio's generated `CoreV1Api` sends (issue 36).

Every operation is sent both ways, with the arguments the daemon uses, to one recording server: the
method, path, query, headers that matter and body must be the same, and so must the answer (the
same model, or the same raw bytes with `_preload_content=False`).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
from aiohttp import web
from harness.fake_http import serving
from kubernetes_asyncio.client import Configuration, CoreV1Api
from kubernetes_asyncio.client.exceptions import ApiTypeError

from bootimage_controller.kube.client import InstrumentedApiClient
from bootimage_controller.kube.core_api import CoreApi

ANSWERS = {
    "ConfigMapList": {"kind": "ConfigMapList", "apiVersion": "v1", "metadata": {"resourceVersion": "7"},
                      "items": [{"metadata": {"name": "cm", "namespace": "ns"}, "data": {"k": "v"}}]},
    "ConfigMap": {"kind": "ConfigMap", "apiVersion": "v1", "metadata": {"name": "cm", "namespace": "ns",
                                                                        "resourceVersion": "8"}, "data": {"k": "v"}},
    "Secret": {"kind": "Secret", "apiVersion": "v1", "metadata": {"name": "s", "namespace": "ns"},
               "data": {"userData": "e30="}},
    "Event": {"kind": "Event", "apiVersion": "v1", "metadata": {"name": "e", "namespace": "ns"},
              "involvedObject": {"kind": "MachineSet", "name": "w"}, "reason": "BootImageUpdated", "count": 2},
    "Node": {"kind": "Node", "apiVersion": "v1", "metadata": {"name": "master-0", "annotations": {"a": "b"}}},
    "NodeList": {"kind": "NodeList", "apiVersion": "v1", "metadata": {"resourceVersion": "9"},
                 "items": [{"metadata": {"name": "master-0", "labels": {"node-role.kubernetes.io/master": ""}}}]},
}

CALLS: list[tuple[str, Callable[[Any], Any]]] = [
    ("ConfigMapList", lambda c: c.list_namespaced_config_map(
        "ns", field_selector="metadata.name=cm", limit=500, _preload_content=False, _request_timeout=30)),
    ("ConfigMapList", lambda c: c.list_namespaced_config_map(
        "ns", field_selector="metadata.name=cm", resource_version="7", watch=True, allow_watch_bookmarks=True,
        timeout_seconds=290, _preload_content=False)),
    ("ConfigMapList", lambda c: c.list_namespaced_config_map("ns", _continue="tok", limit=2)),
    ("ConfigMap", lambda c: c.read_namespaced_config_map("cm", "ns")),
    ("ConfigMap", lambda c: c.create_namespaced_config_map("ns", {"metadata": {"name": "cm"}, "data": {"k": "v"}})),
    ("ConfigMap", lambda c: c.patch_namespaced_config_map(
        "cm", "ns", [{"op": "test", "path": "/metadata/resourceVersion", "value": "8"}])),
    ("ConfigMap", lambda c: c.patch_namespaced_config_map(
        "cm", "ns", {"data": {"k": "w"}}, _content_type="application/merge-patch+json")),
    ("Secret", lambda c: c.read_namespaced_secret("s", "ns")),
    ("Secret", lambda c: c.read_namespaced_secret("s", "ns", _preload_content=False)),
    ("Secret", lambda c: c.patch_namespaced_secret("s", "ns", {"data": {"userData": "e30="}},
                                                   _content_type="application/merge-patch+json")),
    ("Event", lambda c: c.create_namespaced_event("ns", {"metadata": {"generateName": "w."}, "reason": "R"},
                                                  _preload_content=False)),
    ("Event", lambda c: c.patch_namespaced_event("e", "ns", {"count": 3}, _preload_content=False)),
    ("NodeList", lambda c: c.list_node(label_selector="node-role.kubernetes.io/master", limit=500)),
    ("Node", lambda c: c.read_node("master-0")),
    ("Node", lambda c: c.patch_node("master-0", {"metadata": {"annotations": {"a": "b"}}},
                                    _content_type="application/merge-patch+json")),
]


@pytest.fixture
async def recording_server() -> AsyncIterator[tuple[str, list[dict[str, Any]]]]:
    seen: list[dict[str, Any]] = []

    async def handle(request: web.Request) -> web.Response:
        body = await request.read()
        seen.append({
            "method": request.method, "path": request.path, "query": sorted(request.query.items()),
            "accept": request.headers.get("Accept"), "content_type": request.headers.get("Content-Type"),
            "authorization": request.headers.get("Authorization"), "body": json.loads(body) if body else None,
        })
        return web.json_response(ANSWERS[request.headers["X-Answer"]])

    async with serving(handle) as url:
        yield url, seen


async def answer_of(result: Any) -> Any:
    if hasattr(result, "read"):  # _preload_content=False: the raw response
        return json.loads(await result.read())
    return result.to_dict()


@pytest.mark.parametrize(("answer", "call"), CALLS, ids=[f"{i}-{a}" for i, (a, _) in enumerate(CALLS)])
async def test_every_operation_sends_and_answers_as_the_generated_client(
    recording_server: tuple[str, list[dict[str, Any]]], answer: str, call: Callable[[Any], Any]
) -> None:
    url, seen = recording_server
    config = Configuration(host=url, api_key={"BearerToken": "token"}, api_key_prefix={"BearerToken": "Bearer"})
    async with InstrumentedApiClient(config) as api:
        api.set_default_header("X-Answer", answer)
        generated = await answer_of(await call(CoreV1Api(api)))
        ours = await answer_of(await call(CoreApi(api)))
    assert len(seen) == 2
    assert seen[1] == seen[0]
    assert seen[0]["authorization"] == "Bearer token"
    assert ours == generated


def test_an_unknown_argument_is_refused_as_by_the_generated_client() -> None:
    with pytest.raises(ApiTypeError, match="unexpected keyword argument 'labelSelector'"):
        CoreApi(object()).list_node(labelSelector="x")
