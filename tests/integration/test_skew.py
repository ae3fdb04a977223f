"""Skew enforcement on the running daemon (issue 6 acceptance, real API server)."""

from __future__ import annotations

from typing import Any

import pytest
from harness.cluster import TestCluster
from harness.objects import (
    apply,
    bootimages_configmap,
    cluster_version,
    control_plane_node,
    infrastructure,
    kube_request,
    machine_configuration,
    machineset_from_fixture,
    skew_none,
)

from bootimage_controller.constants import (
    ANNOTATION_BOOT_IMAGE_UPDATES,
    DEFAULT_CLUSTER_OPERATOR,
    LABEL_OSSTREAM,
)

from .daemon_helpers import daemon_task, list_machinesets, user_data_secret, wait_for

pytestmark = pytest.mark.integration

OLD_ALEPH = "48.84.202109241901-0"
OLD_GCP_IMAGE = "projects/rhcos-cloud/global/images/rhcos-48-84-202109241901-0-gcp-x86-64"
MS_PATH = "/apis/machine.openshift.io/v1beta1/namespaces/openshift-machine-api/machinesets"


async def upgradeable(api: Any) -> dict[str, Any] | None:
    try:
        co = await kube_request(api, "GET", f"/apis/config.openshift.io/v1/clusteroperators/{DEFAULT_CLUSTER_OPERATOR}")
    except Exception:
        return None
    for cond in (co.get("status") or {}).get("conditions") or []:
        if cond["type"] == "Upgradeable":
            return dict(cond)
    return None


def old_gcp_machineset(name: str, disabled: bool) -> dict[str, Any]:
    annotations = {ANNOTATION_BOOT_IMAGE_UPDATES: "Disabled"} if disabled else None
    ms = machineset_from_fixture("gcp-x86_64-us-central1-a-4.16.yaml", name, annotations=annotations)
    ms["spec"]["template"]["spec"]["providerSpec"]["value"]["disks"][0]["image"] = OLD_GCP_IMAGE
    return ms


async def old_cluster(api: Any, platform: str = "GCP") -> None:
    """Installed at 4.8, upgraded to 4.22; control-plane Nodes still carry their 4.8 aleph."""
    await apply(api, infrastructure(platform))
    await apply(api, cluster_version(history=(("4.22.0", "Completed"), ("4.16.0", "Completed"), ("4.8.0", "Completed"))))
    await apply(api, machine_configuration())
    await apply(api, bootimages_configmap("coreos-bootimages-4.22-multistream.yaml"))
    await apply(api, user_data_secret())
    for i in range(3):
        await apply(api, control_plane_node(f"master-{i}", aleph=OLD_ALEPH))


async def wait_upgradeable(api: Any, status: str, reason: str, timeout: float = 30) -> dict[str, Any]:
    found: dict[str, Any] = {}

    async def check() -> bool:
        cond = await upgradeable(api)
        if cond is not None:
            found.update(cond)
        return cond is not None and cond["status"] == status and cond["reason"] == reason

    try:
        await wait_for(check, timeout, f"Upgradeable={status} ({reason})")
    except AssertionError as exc:
        raise AssertionError(f"{exc}; last condition: {found}") from None
    return found


async def test_old_boot_images_hold_upgrades_until_patched_and_none_releases_at_once(
    kube_cluster: TestCluster, kube_api: Any
) -> None:
    await old_cluster(kube_api)
    # Opted out at first so the daemon cannot fix it yet: the cluster is held.
    await apply(kube_api, old_gcp_machineset("workers-a", disabled=True))
    async with daemon_task(kube_cluster.kubeconfig):
        held = await wait_upgradeable(kube_api, "False", "ClusterBootImageSkewError")
        assert "48.84.202109241901-0" in held["message"] and "9.2" in held["message"]

        # Skew enforcement None releases the hold at once, whatever the boot images.
        await apply(kube_api, machine_configuration(skew=skew_none()))
        await wait_upgradeable(kube_api, "True", "AsExpected", timeout=15)

        # Back to the default (Automatic): held again; then let the daemon update the MachineSet.
        await apply(kube_api, machine_configuration())
        await wait_upgradeable(kube_api, "False", "ClusterBootImageSkewError")
        fleet = await list_machinesets(kube_api)
        ms = fleet["workers-a"]
        del ms["metadata"]["annotations"][ANNOTATION_BOOT_IMAGE_UPDATES]
        await kube_request(kube_api, "PUT", f"{MS_PATH}/workers-a", ms)

        async def patched() -> bool:
            fleet = await list_machinesets(kube_api)
            disk = fleet["workers-a"]["spec"]["template"]["spec"]["providerSpec"]["value"]["disks"][0]
            return bool(disk["image"] != OLD_GCP_IMAGE)

        await wait_for(patched, 30, "the boot image patch")
        # Upgradeable without a restart of the daemon.
        await wait_upgradeable(kube_api, "True", "AsExpected")


async def test_unidentifiable_boot_image_is_judged_by_the_control_plane_aleph(
    kube_cluster: TestCluster, kube_api: Any
) -> None:
    await old_cluster(kube_api, platform="AWS")
    # An AMI no stream or index knows, and no cloud to ask: its release comes from the aleph.
    ms = machineset_from_fixture("aws-x86_64-us-east-1a-4.16.yaml", "workers-unknown")
    ms["spec"]["template"]["spec"]["providerSpec"]["value"]["ami"] = {"id": "ami-0123456789abcdef0"}
    await apply(kube_api, ms)
    async with daemon_task(kube_cluster.kubeconfig):
        held = await wait_upgradeable(kube_api, "False", "ClusterBootImageSkewError")
        assert OLD_ALEPH in held["message"]
        assert "known from the control-plane nodes' aleph" in held["message"], "the message says where the release came from"


async def test_rhel10_machineset_on_a_rhel9_image_holds_upgrades_and_is_named(
    kube_cluster: TestCluster, kube_api: Any
) -> None:
    await apply(kube_api, infrastructure("AWS"))
    await apply(kube_api, cluster_version())
    await apply(kube_api, machine_configuration())
    await apply(kube_api, bootimages_configmap("coreos-bootimages-4.22-multistream.yaml"))
    await apply(kube_api, user_data_secret())
    # Labelled rhel-10 but still on the 4.16 RHEL 9 AMI, and opted out so it stays there.
    ms = machineset_from_fixture(
        "aws-x86_64-us-east-1a-4.16.yaml",
        "workers-rhel10",
        labels={LABEL_OSSTREAM: "rhel-10"},
        annotations={ANNOTATION_BOOT_IMAGE_UPDATES: "Disabled"},
    )
    await apply(kube_api, ms)
    async with daemon_task(kube_cluster.kubeconfig):
        held = await wait_upgradeable(kube_api, "False", "ClusterBootImageSkewError")
        assert "workers-rhel10" in held["message"]
        assert "rhel-10" in held["message"] or "RHEL 10" in held["message"]
