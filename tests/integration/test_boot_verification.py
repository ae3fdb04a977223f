"""A boot image counts once a node booted from it joined (SPEC section 3b), on the real API server.

The harness plays only the cloud's machine controller and the kubelet (`harness.machine_provider`:
which images boot, which never join, which the cloud refuses, and a capacity error); the scale-ups
stand in for the MachineSet controller. Everything else is the daemon."""

from __future__ import annotations

import asyncio
import json
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from harness.cluster import ClusterFactory, TestCluster
from harness.machine_provider import CAPACITY_LABEL, Boot, machine_provider, scale_up
from harness.objects import apply, bootimages_configmap, feature_gate, mco_cluster_operator

from bootimage_controller import observability as obs
from bootimage_controller.constants import (
    ANNOTATION_BOOT_IMAGE_VERIFIED,
    CO_DEGRADED,
    EVENT_FIRST_BOOT_FAILED,
    EVENT_ROLLED_BACK,
    EVENT_VERIFIED,
)
from bootimage_controller.kube.client import make_api_client
from bootimage_controller.reconcile.writer import MachineSetWriter

from .daemon_helpers import audit_writes, audited_cluster, daemon_task, plan_from_cluster, run_cli, wait_for
from .fleet import (
    AWS_416,
    AWS_422,
    CO_PATH,
    MULTISTREAM_422,
    ami,
    annotations_of,
    aws_machinesets,
    base_cluster,
    conditions,
    events_for,
    get_ms,
)

pytestmark = [pytest.mark.integration, pytest.mark.heavy]

NEW_GOOD = "ami-0b00700000000d00d"  # the next golden image, which boots
TIMEOUT = ("--first-boot-timeout", "3s")
DAEMON_USER = "replica-a"  # a user of the harness's tokens file, told apart in the audit log


def count_patches(monkeypatch: pytest.MonkeyPatch) -> Counter[str]:
    """Every MachineSet write of the daemon the API server applied (boot image, record, roll back)."""
    applied: Counter[str] = Counter()
    real = MachineSetWriter.patch

    async def spy(self: MachineSetWriter, obj: Any, ops: Any, what: str) -> None:
        await real(self, obj, ops, what)
        applied[obj["metadata"]["name"]] += 1

    monkeypatch.setattr(MachineSetWriter, "patch", spy)
    return applied


def verdict_of(obj: dict[str, Any] | None) -> dict[str, Any] | None:
    raw = annotations_of(obj).get(ANNOTATION_BOOT_IMAGE_VERIFIED) if obj is not None else None
    return json.loads(raw) if raw else None


def metric(name: str) -> float | None:
    return obs.REGISTRY.get_sample_value("bootimage_controller_boot_image_verified",
                                         {"namespace": "openshift-machine-api", "name": name, "kind": "MachineSet"})


async def event(api: Any, name: str, reason: str) -> dict[str, Any] | None:
    return next((e for e in await events_for(api, name) if e["reason"] == reason), None)


def golden_with_us_east_1(image: str) -> dict[str, Any]:
    cm = bootimages_configmap(MULTISTREAM_422)
    stream = json.loads(cm["data"]["stream"])
    stream["architectures"]["x86_64"]["images"]["aws"]["regions"]["us-east-1"]["image"] = image
    cm["data"]["stream"] = json.dumps(stream)
    return cm


async def test_an_image_that_never_joins_is_rolled_back_never_written_again_and_a_good_one_verified(
    kube_cluster: TestCluster, kube_api: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    await base_cluster(kube_api)
    await aws_machinesets(kube_api, ["pool"])
    applied = count_patches(monkeypatch)
    images = {AWS_416: Boot.GOOD, AWS_422: Boot.NEVER_JOINS, NEW_GOOD: Boot.GOOD}
    async with machine_provider(kube_api, images), daemon_task(kube_cluster.kubeconfig, *TIMEOUT):
        await wait_for(lambda: _boots(kube_api, "pool", AWS_422), 30, "the golden 4.22 image written")
        pool = await get_ms(kube_api, "pool")
        assert pool is not None
        await scale_up(kube_api, pool, "pool-a")  # the autoscaler grows the pool: from the new image

        async def rolled_back() -> bool:
            v = verdict_of(await get_ms(kube_api, "pool"))
            return await _boots(kube_api, "pool", AWS_416) and v is not None and v.get("failedImages") == [AWS_422]

        await wait_for(rolled_back, 30, "the roll back to the previous image")
        warning = await _wait_event(kube_api, "pool", EVENT_FIRST_BOOT_FAILED)
        assert warning["type"] == "Warning" and "pool-a" in warning["message"] and AWS_422 in warning["message"]
        assert "no Node joined within 3s" in warning["message"]
        assert AWS_416 in (await _wait_event(kube_api, "pool", EVENT_ROLLED_BACK))["message"]
        assert metric("pool") == -1

        async def degraded_names_the_image() -> bool:
            co = (await conditions(kube_api, CO_PATH)).get(CO_DEGRADED)
            return co is not None and co["status"] == "True" and AWS_422 in co["message"]

        await wait_for(degraded_names_the_image, 20, "Degraded naming the failed image")
        writes_after_rollback = applied["pool"]
    # A second pass (a new daemon) writes nothing: not the failed image again.
    async with machine_provider(kube_api, images), daemon_task(kube_cluster.kubeconfig, *TIMEOUT):
        await wait_for(degraded_names_the_image, 20, "the restarted daemon's Degraded")
        await asyncio.sleep(2)
        assert applied["pool"] == writes_after_rollback
        assert await _boots(kube_api, "pool", AWS_416)

        # The golden data names a new image that boots: written, a Machine joins, verified, Degraded clears.
        await apply(kube_api, golden_with_us_east_1(NEW_GOOD))
        await wait_for(lambda: _boots(kube_api, "pool", NEW_GOOD), 30, "the new golden image written")
        pool = await get_ms(kube_api, "pool")
        assert pool is not None
        await scale_up(kube_api, pool, "pool-b")

        async def verified() -> bool:
            v = verdict_of(await get_ms(kube_api, "pool"))
            return v is not None and v["verdict"] == "verified" and v["image"] == NEW_GOOD

        await wait_for(verified, 30, "the verdict verified")
        v = verdict_of(await get_ms(kube_api, "pool"))
        assert v is not None and (v["machine"], v["node"]) == ("pool-b", "pool-b")
        assert v["failedImages"] == [AWS_422]  # still never written while the golden data names it

        async def degraded_cleared() -> bool:
            co = (await conditions(kube_api, CO_PATH)).get(CO_DEGRADED)
            return co is not None and co["status"] == "False"

        await wait_for(degraded_cleared, 20, "Degraded cleared")
        assert metric("pool") == 1
        assert NEW_GOOD in (await _wait_event(kube_api, "pool", EVENT_VERIFIED))["message"]
    # `plan --from-cluster` and `fleet` show what the daemon recorded.
    row = next(m for m in (await plan_from_cluster(kube_cluster))["machineSets"] if m["name"] == "pool")
    assert (row["verified"]["verdict"], row["verified"]["image"], row["verified"]["node"]) == ("verified", NEW_GOOD,
                                                                                               "pool-b")
    code, out, err = await run_cli(kube_cluster, "fleet", "-o", "json")
    assert code == 0, err
    (cluster_row,) = json.loads(out)["clusters"]
    pool_row = next(p for p in cluster_row["pools"] if p["name"] == "pool")
    assert (pool_row["verified"]["verdict"], pool_row["verified"]["image"]) == ("verified", NEW_GOOD)


async def test_a_capacity_failure_is_not_the_images_and_rolls_nothing_back(
    kube_cluster: TestCluster, kube_api: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    await base_cluster(kube_api)
    await aws_machinesets(kube_api, ["pool"])
    applied = count_patches(monkeypatch)
    async with machine_provider(kube_api, {}), daemon_task(kube_cluster.kubeconfig, *TIMEOUT):
        await wait_for(lambda: _boots(kube_api, "pool", AWS_422), 30, "the golden image written")
        pool = await get_ms(kube_api, "pool")
        assert pool is not None
        await scale_up(kube_api, pool, "pool-a", {CAPACITY_LABEL: "true"})
        await wait_for(lambda: _metric_is("pool", 0), 20, "an unverified verdict")
        await asyncio.sleep(4)  # past the first-boot timeout: still not the image's
        assert await _boots(kube_api, "pool", AWS_422)
        assert applied["pool"] == 1  # the boot image patch only: no roll back, no record
        assert await event(kube_api, "pool", EVENT_FIRST_BOOT_FAILED) is None
        assert metric("pool") == 0


async def test_a_failed_image_the_mco_wrote_is_reported_with_its_writer_and_never_written(
    fresh_cluster: ClusterFactory, tmp_path: Path
) -> None:
    # The API server's audit log is the witness: no write of this controller's user to the MachineSet.
    cluster, audit_log = audited_cluster(fresh_cluster, tmp_path)
    async with await make_api_client(str(cluster.kubeconfig)) as api:
        await base_cluster(api)
        await apply(api, mco_cluster_operator("4.22.0"))
        await apply(api, feature_gate("4.22.0", ("ManagedBootImages", "ManagedBootImagesAWS")))
        # The MCO already moved it to the golden image, which the cloud refuses.
        pool = (await aws_machinesets(api, ["mco-pool"]))["mco-pool"]
        pool["spec"]["template"]["spec"]["providerSpec"]["value"]["ami"]["id"] = AWS_422
        pool = await apply(api, pool)
        before = pool["metadata"]["resourceVersion"]
        since = time.time()
        async with machine_provider(api, {AWS_422: Boot.REFUSED}), \
                daemon_task(cluster.kubeconfig_for(DAEMON_USER), *TIMEOUT):
            await scale_up(api, pool, "mco-pool-a")
            warning = await _wait_event(api, "mco-pool", EVENT_FIRST_BOOT_FAILED)
            assert "mco" in warning["message"] and "hand-over" in warning["message"]
            assert "InvalidAMIID.NotFound" in warning["message"] and AWS_422 in warning["message"]
            await wait_for(lambda: _metric_is("mco-pool", -1), 10, "the failed metric")
            await asyncio.sleep(2)
        await asyncio.sleep(1.0)  # the audit log is written asynchronously
        sent = audit_writes(audit_log, DAEMON_USER, since)
        assert sent, "the witness sees the daemon's other writes (Events, the ClusterOperator)"
        touched = [(e["verb"], e["objectRef"]) for e in sent
                   if (e.get("objectRef") or {}).get("resource") in ("machinesets", "machines")]
        assert touched == [], f"an MCO-managed MachineSet (or its Machine) was written: {touched}"
        after = await get_ms(api, "mco-pool")
        assert after is not None and after["metadata"]["resourceVersion"] == before


async def _boots(api: Any, name: str, image: str) -> bool:
    obj = await get_ms(api, name)
    return obj is not None and ami(obj) == image


async def _metric_is(name: str, value: float) -> bool:
    return metric(name) == value


async def _wait_event(api: Any, name: str, reason: str) -> dict[str, Any]:
    async def found() -> bool:
        return await event(api, name, reason) is not None

    await wait_for(found, 20, f"Event {reason} on {name}")
    got = await event(api, name, reason)
    assert got is not None
    return got
