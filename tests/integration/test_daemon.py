"""The daemon on a real kube-apiserver (issue 3 acceptance)."""

from __future__ import annotations

import asyncio
import signal
from pathlib import Path
from typing import Any

import pytest
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

from bootimage_controller import observability as obs
from bootimage_controller.constants import (
    ANNOTATION_RELEASE,
    ANNOTATION_STREAM,
    CLAIM_HOLDER_NAME,
    LEASE_NAME,
    MCO_NAMESPACE,
)

from .daemon_helpers import (
    configmap_from_stream,
    daemon_task,
    list_machinesets,
    start_daemon_process,
    strip_ours,
    user_data_secret,
    wait_for,
)

pytestmark = pytest.mark.integration

GA_416 = "installer-4.16-416.94.202405291527-0-rhcos.json"
AWS_416_US_EAST_1 = "ami-05483066c3caaccf5"
AWS_422_US_EAST_1 = "ami-06a6b025350ff1e23"
GCP_422 = "projects/rhcos-cloud/global/images/rhcos-9-8-20260403-0-gcp-x86-64"
SPEC = ("spec", "template", "spec", "providerSpec", "value")

# name -> (fixture, boot image field under providerSpec.value, expected after 4.22 or None: untouched)
FLEET: dict[str, tuple[str, tuple[str | int, ...], Any]] = {
    "aws-1a": ("aws-x86_64-us-east-1a-4.16.yaml", ("ami",), {"id": AWS_422_US_EAST_1}),
    "aws-1b": ("aws-x86_64-us-east-1a-4.16.yaml", ("ami",), {"id": AWS_422_US_EAST_1}),
    "aws-arm": ("aws-aarch64-us-east-2a-4.16.yaml", ("ami",), "patched"),
    "aws-filters": ("aws-x86_64-ami-filters.yaml", ("ami",), None),
    "aws-me-south": ("aws-x86_64-me-south-1a-4.21.yaml", ("ami",), "any"),
    "gcp-a": ("gcp-x86_64-us-central1-a-4.16.yaml", ("disks", 0, "image"), GCP_422),
    "gcp-b": ("gcp-x86_64-us-central1-a-4.16.yaml", ("disks", 0, "image"), GCP_422),
    "gcp-custom": ("gcp-x86_64-custom-image.yaml", ("disks", 0, "image"), None),
    "azure-legacy": ("azure-x86_64-legacy-gallery-gen2-4.16.yaml", ("image",), "patched"),
    "azure-noplan": ("azure-x86_64-marketplace-noplan-4.20.yaml", ("image",), None),
}


async def setup_cluster(api: Any, configmap: dict[str, Any]) -> None:
    await apply(api, infrastructure("AWS"))
    await apply(api, cluster_version())
    await apply(api, machine_configuration())
    await apply(api, configmap)
    await apply(api, user_data_secret())
    for name, (fixture, _field, _expected) in FLEET.items():
        await apply(api, machineset_from_fixture(fixture, name))


def boot_value(obj: dict[str, Any], field: tuple[str | int, ...]) -> Any:
    cur: Any = obj
    for part in (*SPEC, *field):
        cur = cur[part]
    return cur


def patch_requests() -> float:
    total = 0.0
    for metric in obs.REGISTRY.collect():
        for sample in metric.samples:
            labels = sample.labels
            if sample.name.endswith("_total") and labels.get("verb") == "patch" and "machinesets" in labels.get("resource", ""):
                total += sample.value
    return total


async def test_fleet_converges_after_configmap_change_touching_only_the_boot_image(
    kube_cluster: TestCluster, kube_api: Any
) -> None:
    await setup_cluster(kube_api, configmap_from_stream(GA_416, "4.16.0"))
    async with daemon_task(kube_cluster.kubeconfig) as task:
        # 4.16 GA data: the 4.16 AMIs are current, nothing of the x86 AWS fleet is written.
        async def settled_on_416() -> bool:
            fleet = await list_machinesets(kube_api)
            return boot_value(fleet["aws-1a"], ("ami",)) == {"id": AWS_416_US_EAST_1}

        await wait_for(settled_on_416, 30, "4.16 state")
        await asyncio.sleep(2)
        before = await list_machinesets(kube_api)
        await apply(kube_api, bootimages_configmap("coreos-bootimages-4.22-multistream.yaml"))

        async def converged() -> bool:
            fleet = await list_machinesets(kube_api)
            return all(
                expected in (None, "any", "patched") or boot_value(fleet[name], field) == expected
                for name, (_f, field, expected) in FLEET.items()
            ) and all(
                boot_value(fleet[name], field) != boot_value(before[name], field)
                for name, (_f, field, expected) in FLEET.items()
                if expected == "patched"
            )

        await wait_for(converged, 60, "the fleet to reach the 4.22 boot images")
        assert not task.done(), task
    after = await list_machinesets(kube_api)
    for name, (_fixture, field, expected) in FLEET.items():
        path = (*SPEC, *field)
        # Invariant 1: nothing but the boot image field and our metadata differs (whole objects).
        assert strip_ours(after[name], path) == strip_ours(before[name], path), name
        changed = boot_value(after[name], field) != boot_value(before[name], field)
        if expected is None:
            assert not changed, f"{name} must not be written"
            assert after[name]["metadata"]["resourceVersion"] == before[name]["metadata"]["resourceVersion"]
        elif expected != "any":
            assert changed, name
            meta = after[name]["metadata"]
            owners = [r for r in meta.get("ownerReferences", []) if r["name"] == CLAIM_HOLDER_NAME]
            assert owners and owners[0]["kind"] == "ConfigMap" and owners[0]["blockOwnerDeletion"] is False
            assert meta["annotations"][ANNOTATION_STREAM] == "rhel-9"
            # AWS/GCP record the RHCOS build id; Azure the marketplace image version it booted.
            expected_release = "9.6.20251015" if name.startswith("azure") else "9.8.20260403-0"
            assert meta["annotations"][ANNOTATION_RELEASE] == expected_release


async def test_replica_and_label_edits_do_not_write_but_a_configmap_change_does(
    kube_cluster: TestCluster, kube_api: Any
) -> None:
    await setup_cluster(kube_api, bootimages_configmap("coreos-bootimages-4.22-multistream.yaml"))
    async with daemon_task(kube_cluster.kubeconfig):

        async def converged() -> bool:
            fleet = await list_machinesets(kube_api)
            return boot_value(fleet["gcp-a"], ("disks", 0, "image")) == GCP_422 and boot_value(
                fleet["aws-1a"], ("ami",)
            ) == {"id": AWS_422_US_EAST_1}

        await wait_for(converged, 60, "convergence on 4.22")
        await asyncio.sleep(2)
        writes = patch_requests()
        fleet = await list_machinesets(kube_api)
        ms = fleet["aws-1b"]
        ms["spec"]["replicas"] = 5
        ms["metadata"]["labels"]["team"] = "payments"
        await kube_request(
            kube_api,
            "PUT",
            "/apis/machine.openshift.io/v1beta1/namespaces/openshift-machine-api/machinesets/aws-1b",
            ms,
        )
        await asyncio.sleep(3)
        assert patch_requests() == writes, "a replica/label edit must not cause a MachineSet write"
        await apply(kube_api, configmap_from_stream("installer-release-4.21-rhcos.json", "4.21.0"))

        async def rewritten() -> bool:
            return patch_requests() > writes

        await wait_for(rewritten, 30, "a write after the ConfigMap change")


async def test_once_exits_zero_after_one_clean_pass(kube_cluster: TestCluster, kube_api: Any) -> None:
    from bootimage_controller.daemon import run as daemon

    from .daemon_helpers import run_args

    await setup_cluster(kube_api, bootimages_configmap("coreos-bootimages-4.22-multistream.yaml"))
    # Bounded: a `--once` that never ends fails here, with its stack, rather than stalling the suite.
    code = await asyncio.wait_for(daemon.run_async(run_args(kube_cluster.kubeconfig, "--once", "--no-leader-elect")), 180)
    assert code == 0
    fleet = await list_machinesets(kube_api)
    assert boot_value(fleet["aws-1a"], ("ami",)) == {"id": AWS_422_US_EAST_1}


async def test_dry_run_writes_nothing(kube_cluster: TestCluster, kube_api: Any) -> None:
    from bootimage_controller.daemon import run as daemon

    from .daemon_helpers import run_args

    await setup_cluster(kube_api, bootimages_configmap("coreos-bootimages-4.22-multistream.yaml"))
    before = await list_machinesets(kube_api)
    # Leader election is on by default: a dry run must not campaign either (it would take the
    # Lease from the replica that does the work).
    await asyncio.wait_for(daemon.run_async(run_args(kube_cluster.kubeconfig, "--once", "--dry-run")), 180)
    after = await list_machinesets(kube_api)
    assert {n: o["metadata"]["resourceVersion"] for n, o in after.items()} == {
        n: o["metadata"]["resourceVersion"] for n, o in before.items()
    }
    leases = await kube_request(kube_api, "GET", f"/apis/coordination.k8s.io/v1/namespaces/{MCO_NAMESPACE}/leases")
    assert [lease["metadata"]["name"] for lease in leases["items"]] == []


async def test_only_the_leader_writes_and_a_killed_leader_hands_over(
    kube_cluster: TestCluster, kube_api: Any, tmp_path: Path
) -> None:
    await setup_cluster(kube_api, configmap_from_stream(GA_416, "4.16.0"))
    logs = {i: tmp_path / f"{i}.log" for i in ("daemon-a", "daemon-b")}
    procs = {i: start_daemon_process(kube_cluster.kubeconfig, i, logs[i]) for i in logs}
    try:
        async def holder() -> str:
            lease = await kube_request(
                kube_api, "GET", f"/apis/coordination.k8s.io/v1/namespaces/{MCO_NAMESPACE}/leases/{LEASE_NAME}"
            )
            return str(lease["spec"].get("holderIdentity") or "")

        async def has_leader() -> bool:
            try:
                return await holder() in procs
            except Exception:
                return False

        await wait_for(has_leader, 30, "a leader")
        leader = await holder()
        follower = next(i for i in procs if i != leader)
        await apply(kube_api, bootimages_configmap("coreos-bootimages-4.22-multistream.yaml"))

        async def patched() -> bool:
            fleet = await list_machinesets(kube_api)
            return boot_value(fleet["aws-1a"], ("ami",)) == {"id": AWS_422_US_EAST_1}

        await wait_for(patched, 60, "the leader's patch")
        follower_log = logs[follower].read_text()
        assert '"event": "decision"' not in follower_log, "a follower must not reconcile"
        assert '"event": "decision"' in logs[leader].read_text()
        # kill -9: no lease release; the follower must take over within the lease duration.
        procs[leader].send_signal(signal.SIGKILL)
        procs[leader].wait(10)

        async def follower_leads() -> bool:
            return await holder() == follower

        await wait_for(follower_leads, 15 + 10, "the follower to take the lease")
        await apply(kube_api, configmap_from_stream("installer-release-4.21-rhcos.json", "4.21.0"))

        async def repatched() -> bool:
            fleet = await list_machinesets(kube_api)
            return boot_value(fleet["aws-1a"], ("ami",)) != {"id": AWS_422_US_EAST_1}

        await wait_for(repatched, 60, "the new leader's patch")
        # SIGTERM on the new leader releases the lease and exits 0.
        procs[follower].send_signal(signal.SIGTERM)
        assert procs[follower].wait(20) == 0
        assert await holder() == ""
    finally:
        for p in procs.values():
            if p.poll() is None:
                p.kill()
                p.wait(10)

