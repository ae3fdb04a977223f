"""`aleph-report` against the real API server: the Node annotation is written, kept, and never
clobbered by a garbage aleph file."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from harness.objects import apply, control_plane_node, get_object
from kubernetes_asyncio import client as k8s_client

from bootimage_controller.commands.aleph_report import RetryPolicy, run_aleph_report
from bootimage_controller.constants import ANNOTATION_ALEPH_VERSION

pytestmark = pytest.mark.integration

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "aleph"
ALEPHS = [
    ("rhcos-cosa-legacy-48.84.202109241901-0.json", "48.84.202109241901-0"),
    ("rhcos-osbuild-418.94.202511191518-0.json", "418.94.202511191518-0"),
    ("rhcos-osbuild-9.6.20251212-1.json", "9.6.20251212-1"),
    ("fcos-cosa-legacy-32.20201002.dev.2.json", "32.20201002.dev.2"),
    ("fcos-bootc-aleph-43.20260301.20.dev1.json", "43.20260301.20.dev1"),
]
QUICK = RetryPolicy(attempts=2, base_delay=0.05, max_delay=0.1)


async def _node(api: k8s_client.ApiClient, name: str) -> dict[str, Any]:
    live = await get_object(api, control_plane_node(name))
    assert live is not None
    return live


async def _report(api: k8s_client.ApiClient, path: Path, node: str = "master-0") -> int:
    return await run_aleph_report(node, path, api, once=True, retry=QUICK)


async def test_each_aleph_format_annotates_the_node(kube_api: k8s_client.ApiClient) -> None:
    base = control_plane_node("master-0")
    base["metadata"]["annotations"]["example.com/keep"] = "yes"
    await apply(kube_api, base)
    for name, build_id in ALEPHS:
        assert await _report(kube_api, FIXTURES / name) == 0, name
        live = await _node(kube_api, "master-0")
        assert live["metadata"]["annotations"][ANNOTATION_ALEPH_VERSION] == build_id
        assert live["metadata"]["annotations"]["example.com/keep"] == "yes"
        assert "node-role.kubernetes.io/master" in live["metadata"]["labels"]


async def test_steady_state_writes_nothing(kube_api: k8s_client.ApiClient) -> None:
    await apply(kube_api, control_plane_node("master-0"))
    assert await _report(kube_api, FIXTURES / "rhcos-osbuild-9.6.20251212-1.json") == 0
    before = (await _node(kube_api, "master-0"))["metadata"]["resourceVersion"]
    assert await _report(kube_api, FIXTURES / "rhcos-osbuild-9.6.20251212-1.json") == 0
    assert (await _node(kube_api, "master-0"))["metadata"]["resourceVersion"] == before


@pytest.mark.parametrize(
    "text",
    ['{"version": 9.6}', "not json", "{}", '{"build": "48.84 rm -rf /"}'],
)
async def test_garbage_leaves_an_existing_annotation_alone(
    kube_api: k8s_client.ApiClient, tmp_path: Path, text: str
) -> None:
    await apply(kube_api, control_plane_node("master-0", aleph="413.92.202402131523-0"))
    before = await _node(kube_api, "master-0")
    aleph = tmp_path / ".coreos-aleph-version.json"
    aleph.write_text(text)
    assert await _report(kube_api, tmp_path) == 1
    after = await _node(kube_api, "master-0")
    assert after["metadata"]["annotations"][ANNOTATION_ALEPH_VERSION] == "413.92.202402131523-0"
    assert after["metadata"]["resourceVersion"] == before["metadata"]["resourceVersion"]


async def test_a_missing_node_fails_once_mode(kube_api: k8s_client.ApiClient) -> None:
    assert await _report(kube_api, FIXTURES / "rhcos-osbuild-9.6.20251212-1.json", node="no-such-node") == 1
