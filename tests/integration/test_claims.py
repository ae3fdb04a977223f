"""Ownership claims on a real API server with the garbage collector running (SPEC section 3,
invariant 4): releasing them never lets the collector delete a MachineSet."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from harness.cluster import TestCluster
from harness.objects import apply, kube_request, machine_configuration, machine_manager

from bootimage_controller.constants import (
    ANNOTATION_BOOT_IMAGE_UPDATES,
    ANNOTATION_PREVIOUS,
    CLAIM_FINALIZER,
    CLAIM_HOLDER_NAME,
    CLAIM_HOLDER_NAMESPACE,
    MAPI_NAMESPACE,
)
from bootimage_controller.core.claims import owner_reference

from .daemon_helpers import configmap_from_stream, daemon_task, run_args, wait_for
from .fleet import (
    AWS_422,
    HOLDER_PATH,
    ami,
    annotations_of,
    aws_machinesets,
    base_cluster,
    get_holder,
    get_ms,
    machinesets,
    merge_patch_ms,
    our_refs,
    run_cli,
    rv,
)

pytestmark = pytest.mark.integration

FLEET = ("claim-a", "claim-b", "claim-c")


async def wait_for_collector(cluster: TestCluster) -> None:
    # A negative result ("nothing was deleted") means something only with a collector running.
    await asyncio.to_thread(cluster.wait_for_garbage_collector)


async def all_claimed(api: Any, names: tuple[str, ...], holder_uid: str | None = None) -> bool:
    fleet = await machinesets(api)
    return all(
        name in fleet
        and len(our_refs(fleet[name])) == 1
        and (holder_uid is None or our_refs(fleet[name])[0]["uid"] == holder_uid)
        for name in names
    )


async def patched_and_claimed(api: Any, names: tuple[str, ...]) -> bool:
    fleet = await machinesets(api)
    return all(name in fleet and ami(fleet[name]) == AWS_422 and our_refs(fleet[name]) for name in names)


async def create_canary(api: Any, holder_uid: str) -> None:
    """A ConfigMap owned by the holder exactly like a claimed MachineSet. Nothing releases it, so
    the collector deletes it once the holder is gone: proof that the collector saw the deletion."""
    body = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "gc-canary", "namespace": MAPI_NAMESPACE, "ownerReferences": [owner_reference(holder_uid)]},
    }
    await kube_request(api, "POST", f"/api/v1/namespaces/{MAPI_NAMESPACE}/configmaps", body)


async def configmap_exists(api: Any, name: str) -> bool:
    doc = await kube_request(api, "GET", f"/api/v1/namespaces/{MAPI_NAMESPACE}/configmaps")
    return any(cm["metadata"]["name"] == name for cm in doc["items"])


async def test_deleting_the_holder_releases_every_claim_and_the_collector_deletes_no_machineset(
    kube_cluster: TestCluster, kube_api: Any
) -> None:
    await wait_for_collector(kube_cluster)
    await base_cluster(kube_api)
    await aws_machinesets(kube_api, FLEET)
    async with daemon_task(kube_cluster.kubeconfig) as task:
        await wait_for(lambda: patched_and_claimed(kube_api, FLEET), 30, "the fleet patched and claimed")
        holder = await get_holder(kube_api)
        assert holder is not None and CLAIM_FINALIZER in holder["metadata"]["finalizers"]
        old_uid = holder["metadata"]["uid"]
        assert await all_claimed(kube_api, FLEET, old_uid)
        await create_canary(kube_api, old_uid)

        await kube_request(kube_api, "DELETE", HOLDER_PATH)  # default propagation: background

        async def holder_gone() -> bool:
            return await get_holder(kube_api) is None

        await wait_for(holder_gone, 30, "the holder to go once every claim is released")
        await wait_for(lambda: _not(configmap_exists(kube_api, "gc-canary")), 30, "the collector to act")
        fleet = await machinesets(kube_api)
        assert set(FLEET) <= set(fleet), "the collector deleted a MachineSet"
        for name in FLEET:
            assert our_refs(fleet[name]) == [], name
            assert ami(fleet[name]) == AWS_422 and ANNOTATION_PREVIOUS in annotations_of(fleet[name])
        # Releasing does not re-create the holder: only the next claim does.
        assert await get_holder(kube_api) is None

        await apply(kube_api, configmap_from_stream("installer-release-4.21-rhcos.json", "4.21.0"))

        async def reclaimed() -> bool:
            new = await get_holder(kube_api)
            fleet = await machinesets(kube_api)
            return (
                new is not None
                and all(ami(fleet[n]) != AWS_422 for n in FLEET)
                and await all_claimed(kube_api, FLEET, new["metadata"]["uid"])
            )

        await wait_for(reclaimed, 30, "the next patch to re-create the holder and claim")
        new_holder = await get_holder(kube_api)
        assert new_holder is not None and new_holder["metadata"]["uid"] != old_uid
        assert CLAIM_FINALIZER in new_holder["metadata"]["finalizers"]
        assert not task.done()


async def _not(check: Any) -> bool:
    return not await check


async def test_without_the_finalizer_the_collector_would_delete_the_machineset(
    kube_cluster: TestCluster, kube_api: Any
) -> None:
    """The control: a holder-like ConfigMap without our finalizer, deleted while a MachineSet
    still refers to it, takes the MachineSet with it. This is what the finalizer prevents."""
    await wait_for_collector(kube_cluster)
    body = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": CLAIM_HOLDER_NAME, "namespace": CLAIM_HOLDER_NAMESPACE}}
    holder = await kube_request(kube_api, "POST", f"/api/v1/namespaces/{CLAIM_HOLDER_NAMESPACE}/configmaps", body)
    await aws_machinesets(kube_api, ["gc-victim"], owner_references=[owner_reference(holder["metadata"]["uid"])])
    await aws_machinesets(kube_api, ["gc-bystander"])

    await kube_request(kube_api, "DELETE", HOLDER_PATH)

    async def victim_gone() -> bool:
        return await get_ms(kube_api, "gc-victim") is None

    await wait_for(victim_gone, 30, "the collector to delete the owned MachineSet")
    assert await get_ms(kube_api, "gc-bystander") is not None


async def test_opting_out_releases_that_machinesets_claim_only(kube_cluster: TestCluster, kube_api: Any) -> None:
    selected = {"boot-images": "managed"}
    partial = [machine_manager(match_labels=selected)]
    await base_cluster(kube_api, managed=partial)
    names = ("opt-annotation", "opt-label", "opt-mode", "opt-stays")
    await aws_machinesets(kube_api, names, labels=selected)

    async def claims() -> dict[str, bool]:
        fleet = await machinesets(kube_api)
        return {n: bool(our_refs(fleet[n])) for n in names}

    async def claimed_exactly(*expected: str) -> bool:
        return {n for n, c in (await claims()).items() if c} == set(expected)

    async with daemon_task(kube_cluster.kubeconfig):
        await wait_for(lambda: patched_and_claimed(kube_api, names), 30, "the fleet patched and claimed")
        before = await machinesets(kube_api)

        await merge_patch_ms(kube_api, "opt-annotation", {"metadata": {"annotations": {ANNOTATION_BOOT_IMAGE_UPDATES: "Disabled"}}})
        await wait_for(lambda: claimed_exactly("opt-label", "opt-mode", "opt-stays"), 20, "the annotation opt-out")

        await merge_patch_ms(kube_api, "opt-label", {"metadata": {"labels": {"boot-images": None}}})
        await wait_for(lambda: claimed_exactly("opt-mode", "opt-stays"), 20, "the selector opt-out")

        # Narrow the selector so that only opt-stays matches, then opt every MachineSet out.
        await merge_patch_ms(kube_api, "opt-stays", {"metadata": {"labels": {"pool": "kept"}}})
        await apply(kube_api, machine_configuration([machine_manager(match_labels={"pool": "kept"})]))
        await wait_for(lambda: claimed_exactly("opt-stays"), 20, "the narrowed selector")
        none = [{"resource": "machinesets", "apiGroup": "machine.openshift.io", "selection": {"mode": "None"}}]
        await apply(kube_api, machine_configuration(none))
        await wait_for(lambda: claimed_exactly(), 20, "mode None")

        holder = await get_holder(kube_api)
    after = await machinesets(kube_api)
    for name in names:
        # A release removes our owner reference and nothing else: the boot image and the record stay.
        assert ami(after[name]) == ami(before[name]) == AWS_422
        assert {k: v for k, v in annotations_of(after[name]).items() if k != ANNOTATION_BOOT_IMAGE_UPDATES} == annotations_of(
            before[name]
        )
    # No claim is left, but the holder was not deleted: it keeps its finalizer for the next claim.
    assert holder is not None and CLAIM_FINALIZER in holder["metadata"]["finalizers"]


async def test_release_claims_removes_references_then_the_finalizer(kube_cluster: TestCluster, kube_api: Any) -> None:
    from bootimage_controller.daemon import run as daemon

    await wait_for_collector(kube_cluster)
    await base_cluster(kube_api)
    await aws_machinesets(kube_api, FLEET)
    assert await daemon.run_async(run_args(kube_cluster.kubeconfig, "--once", "--no-leader-elect")) == 0
    assert await all_claimed(kube_api, FLEET)

    code, out = await run_cli("release-claims", "--kubeconfig", str(kube_cluster.kubeconfig))

    assert code == 0, out
    fleet = await machinesets(kube_api)
    holder = await get_holder(kube_api)
    assert holder is not None and CLAIM_FINALIZER not in (holder["metadata"].get("finalizers") or [])
    for name in FLEET:
        assert our_refs(fleet[name]) == [] and ami(fleet[name]) == AWS_422
        # One etcd orders every write: each reference went before the finalizer did.
        assert rv(fleet[name]) < rv(holder)
    # Now the holder can be deleted at once, and the collector has nothing to take.
    await create_canary(kube_api, holder["metadata"]["uid"])
    await kube_request(kube_api, "DELETE", HOLDER_PATH)
    await wait_for(lambda: _not(configmap_exists(kube_api, "gc-canary")), 30, "the collector to act")
    assert set(FLEET) <= set(await machinesets(kube_api))
    # Idempotent: nothing left to release, no holder at all.
    code, out = await run_cli("release-claims", "--kubeconfig", str(kube_cluster.kubeconfig))
    assert code == 0, out
