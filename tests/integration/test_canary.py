"""Canaries for pools at zero replicas (SPEC section 3b), on the real API server: the daemon's after
its write to an annotated pool, and `verify-boot`. The harness plays only the cloud's machine
controller and the kubelet (`harness.machine_provider`)."""

from __future__ import annotations

import asyncio
import contextlib
import signal
from pathlib import Path
from typing import Any

import pytest
from harness.cluster import TestCluster
from harness.machine_provider import MACHINES_PATH, Boot, machine_provider
from harness.objects import kube_request

from bootimage_controller.commands.verify_boot import verify_machine_sets
from bootimage_controller.constants import (
    ANNOTATION_BOOT_IMAGE_CANARY,
    EVENT_CANARY_STARTED,
    LABEL_BOOT_IMAGE_CANARY,
    MAPI_NAMESPACE,
)
from bootimage_controller.core.verification import selects

from .daemon_helpers import daemon_task, start_daemon_process, wait_for
from .fleet import AWS_416, AWS_422, aws_machinesets, base_cluster, events_for, get_ms, machinesets
from .test_boot_verification import verdict_of

pytestmark = pytest.mark.integration


async def canaries(api: Any, pool: str) -> list[dict[str, Any]]:
    doc = await kube_request(api, "GET", f"{MACHINES_PATH}?labelSelector={LABEL_BOOT_IMAGE_CANARY}%3D{pool}")
    return list(doc["items"])


async def assert_no_machineset_selects(api: Any, machine: dict[str, Any]) -> None:
    labels = machine["metadata"].get("labels") or {}
    selecting = [name for name, ms in (await machinesets(api)).items() if selects(ms["spec"].get("selector"), labels)]
    assert selecting == [], f"{machine['metadata']['name']} would be adopted by {selecting}"
    assert not machine["metadata"].get("ownerReferences")


async def test_the_daemon_runs_one_canary_after_its_write_and_deletes_it_after_a_kill_and_restart(
    kube_cluster: TestCluster, kube_api: Any, tmp_path: Path
) -> None:
    await base_cluster(kube_api)
    await aws_machinesets(kube_api, ["gpu"], replicas=0, annotations={ANNOTATION_BOOT_IMAGE_CANARY: "Enabled"})
    await aws_machinesets(kube_api, ["plain"], replicas=0)  # not annotated: no canary
    # No machine controller yet: the canary waits for an instance when the daemon is killed.
    first = start_daemon_process(kube_cluster.kubeconfig, "canary-daemon", tmp_path / "daemon.log",
                                 "--first-boot-timeout", "60s")
    try:
        async def one_canary() -> bool:
            return len(await canaries(kube_api, "gpu")) == 1

        await wait_for(one_canary, 40, "the canary after the daemon's write")
        (canary,) = await canaries(kube_api, "gpu")
        gpu = await get_ms(kube_api, "gpu")
        assert gpu is not None and gpu["spec"]["template"]["spec"]["providerSpec"]["value"]["ami"]["id"] == AWS_422
        assert canary["spec"]["providerSpec"]["value"]["ami"]["id"] == AWS_422
        await assert_no_machineset_selects(kube_api, canary)

        async def said_started() -> bool:
            # Events go out in batches: the daemon that made the canary says so before it is killed.
            return any(e["reason"] == EVENT_CANARY_STARTED for e in await events_for(kube_api, "gpu"))

        await wait_for(said_started, 20, "Event BootImageCanaryStarted")
    finally:
        first.send_signal(signal.SIGKILL)
        first.wait(10)
    name = canary["metadata"]["name"]
    async with machine_provider(kube_api, {AWS_422: Boot.GOOD}) as provider, \
            daemon_task(kube_cluster.kubeconfig, "--first-boot-timeout", "60s"):

        async def recorded_and_deleted() -> bool:
            v = verdict_of(await get_ms(kube_api, "gpu"))
            return v is not None and v["verdict"] == "verified" and not await canaries(kube_api, "gpu")

        await wait_for(recorded_and_deleted, 40, "the canary's verdict recorded and the canary deleted")
        v = verdict_of(await get_ms(kube_api, "gpu"))
        assert v is not None and (v["image"], v["machine"], v["node"]) == (AWS_422, name, name)
        await asyncio.sleep(2)
        assert provider.created == [name], "exactly one canary, and none for the pool not annotated"
        assert await canaries(kube_api, "plain") == []
        assert provider.nodes == []  # its Node went with it
    started = [e for e in await events_for(kube_api, "gpu") if e["reason"] == EVENT_CANARY_STARTED]
    assert len(started) == 1 and name in started[0]["message"]


async def test_verify_boot_on_a_pool_at_zero_records_the_verdict_deletes_the_canary_and_says_it_in_its_exit(
    kube_cluster: TestCluster, kube_api: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    await base_cluster(kube_api)
    await aws_machinesets(kube_api, ["zero", "neighbour"], replicas=0)
    api = kube_api
    async with machine_provider(kube_api, {AWS_416: Boot.NEVER_JOINS}, hold=True) as provider:
        # Killed mid-canary: the canary stays, and a second run takes it over.
        run = asyncio.create_task(verify_machine_sets(api, MAPI_NAMESPACE, ["zero"], 3.0, poll=0.2))

        async def created() -> bool:
            return len(await canaries(kube_api, "zero")) == 1

        await wait_for(created, 20, "the verify-boot canary")
        run.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await run
        (canary,) = await canaries(kube_api, "zero")
        await assert_no_machineset_selects(kube_api, canary)
        provider.hold = False
        capsys.readouterr()
        code = await verify_machine_sets(api, MAPI_NAMESPACE, ["zero"], 3.0, poll=0.2)
        out = capsys.readouterr().out
    assert code == 3, out
    assert "exists already" in out and "failed" in out
    assert await canaries(kube_api, "zero") == []
    v = verdict_of(await get_ms(kube_api, "zero"))
    assert v is not None and (v["verdict"], v["image"], v["machine"]) == ("failed", AWS_416, canary["metadata"]["name"])
    assert provider.created == [canary["metadata"]["name"]]

    async with machine_provider(kube_api, {}):
        assert await verify_machine_sets(api, MAPI_NAMESPACE, ["neighbour"], 20.0, poll=0.2) == 0
        assert await verify_machine_sets(api, MAPI_NAMESPACE, ["missing"], 1.0, poll=0.2) == 1
    v = verdict_of(await get_ms(kube_api, "neighbour"))
    assert v is not None and v["verdict"] == "verified"
