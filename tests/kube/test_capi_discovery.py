"""Which cluster.x-k8s.io version the daemon reads, from the group's own discovery document."""

from __future__ import annotations

from typing import Any

import pytest
from aiohttp import web
from harness.fake_http import serving
from kubernetes_asyncio.client import Configuration

from bootimage_controller.kube.capi_discovery import discover_capi_version
from bootimage_controller.kube.client import InstrumentedApiClient


def group(*versions: str) -> dict[str, Any]:
    return {
        "kind": "APIGroup", "apiVersion": "v1", "name": "cluster.x-k8s.io",
        "versions": [{"groupVersion": f"cluster.x-k8s.io/{v}", "version": v} for v in versions],
        "preferredVersion": {"groupVersion": f"cluster.x-k8s.io/{versions[0]}", "version": versions[0]} if versions else None,
    }


async def discover(status: int, body: Any) -> tuple[str, list[str]]:
    paths: list[str] = []

    async def answer(request: web.Request) -> web.Response:
        paths.append(request.path)
        if isinstance(body, str):
            return web.Response(text=body, status=status, content_type="application/json")
        return web.json_response(body, status=status)

    async with serving(answer) as url:
        api = InstrumentedApiClient(Configuration(host=url))
        try:
            return await discover_capi_version(api), paths
        finally:
            await api.close()


@pytest.mark.parametrize(
    ("versions", "expected"),
    [(("v1beta2", "v1beta1"), "v1beta2"), (("v1beta1",), "v1beta1"), (("v1alpha4", "v1beta1"), "v1beta1")],
)
async def test_the_newest_version_of_ours_the_group_serves(versions: tuple[str, ...], expected: str) -> None:
    version, paths = await discover(200, group(*versions))
    assert version == expected
    assert paths == ["/apis/cluster.x-k8s.io"]  # the group's document, not every group's


async def test_a_group_serving_none_of_ours_falls_back_to_the_oldest() -> None:
    assert (await discover(200, group("v1alpha3")))[0] == "v1beta1"


@pytest.mark.parametrize(
    ("status", "body"),
    [(404, {"kind": "Status", "code": 404, "reason": "NotFound"}),  # not installed
     (503, {"kind": "Status", "code": 503, "reason": "ServiceUnavailable"}),  # no answer: the informers say so
     (200, "<html>not json</html>")],
)
async def test_an_absent_group_or_a_failed_discovery_falls_back_to_the_oldest(status: int, body: Any) -> None:
    version, paths = await discover(status, body)
    assert version == "v1beta1"
    assert len(paths) == 1  # one attempt: an unreachable server is reported by the start-up check
