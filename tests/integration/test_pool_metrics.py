"""Per-pool boot image series on /metrics (issue 26, item 4): what a fleet's Thanos or ACM
Observability aggregates without new infrastructure."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from harness.cluster import TestCluster
from harness.objects import apply, kube_request
from prometheus_client import generate_latest

from bootimage_controller.constants import ANNOTATION_ARGOCD_TRACKING_ID
from bootimage_controller.observability import REGISTRY

from .daemon_helpers import daemon_task, wait_for
from .fleet import AWS_422, ami, aws_machinesets, base_cluster, get_ms

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
BUILD_416 = "416.94.202405291527-0"
BUILD_422 = "9.8.20260403-0"


def sample(metric: str, **labels: str) -> float | None:
    return REGISTRY.get_sample_value(metric, labels)


async def test_each_pool_reports_its_boot_image_age_and_how_far_behind_it_is(
    kube_cluster: TestCluster, kube_api: Any
) -> None:
    await base_cluster(kube_api)
    await aws_machinesets(kube_api, ["updated"])
    # Applied from Git: planned in full, proposed to Git, never written here; it stays on 4.16.
    await aws_machinesets(kube_api, ["held-back"],
                          annotations={ANNOTATION_ARGOCD_TRACKING_ID: "workers:machine.openshift.io/MachineSet:x"})

    async def patched() -> bool:
        obj = await get_ms(kube_api, "updated")
        return obj is not None and ami(obj) == AWS_422

    async with daemon_task(kube_cluster.kubeconfig):
        await wait_for(patched, 30, "the enrolled MachineSet patched")
        pool = {"namespace": "openshift-machine-api", "kind": "MachineSet"}

        async def reported() -> bool:
            return sample("bootimage_controller_machineset_boot_image_info", **pool, name="updated",
                          stream="rhel-9", arch="x86_64", release=BUILD_422, target_release=BUILD_422,
                          manager="bootimage-controller") == 1

        await wait_for(reported, 15, "the patched pool's series to show its new boot image")
        text = generate_latest(REGISTRY).decode()  # what /metrics serves
    assert sample("bootimage_controller_machineset_boot_image_releases_behind", **pool, name="updated") == 0
    assert sample("bootimage_controller_machineset_boot_image_info", **pool, name="held-back", stream="rhel-9",
                  arch="x86_64", release=BUILD_416, target_release=BUILD_422, manager="gitops") == 1
    assert sample("bootimage_controller_machineset_boot_image_releases_behind", **pool, name="held-back") == 6
    old = sample("bootimage_controller_machineset_boot_image_age_seconds", **pool, name="held-back")
    new = sample("bootimage_controller_machineset_boot_image_age_seconds", **pool, name="updated")
    assert old is not None and new is not None and old > new > 0
    assert old > 900 * 86400  # built 2024-05-29
    # The series of the pool before its patch is gone, not left beside the new one.
    assert f'release="{BUILD_416}"' not in next(line for line in text.splitlines() if 'name="updated"' in line
                                           and line.startswith("bootimage_controller_machineset_boot_image_info"))
    assert len([line for line in text.splitlines() if line.startswith("bootimage_controller_machineset_boot_image_info{")
                and 'name="updated"' in line]) == 1


async def test_the_acm_allowlist_applies_to_an_api_server(kube_api: Any) -> None:
    """manifests/optional/acm-metrics-allowlist.yaml is what an ACM hub takes: a valid ConfigMap in
    open-cluster-management-observability whose metrics_list.yaml parses."""
    doc = yaml.safe_load((REPO / "manifests" / "optional" / "acm-metrics-allowlist.yaml").read_text())
    namespace = doc["metadata"]["namespace"]
    await apply(kube_api, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})
    stored = await apply(kube_api, doc)
    assert stored["metadata"]["uid"]
    live = await kube_request(kube_api, "GET", f"/api/v1/namespaces/{namespace}/configmaps/{doc['metadata']['name']}")
    assert "bootimage_controller_machineset_boot_image_info" in yaml.safe_load(live["data"]["metrics_list.yaml"])["names"]
