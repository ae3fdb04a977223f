"""A writer that keeps reverting our patch (SPEC section 3, hot loop): three writes, then stop,
Degraded, a HotLoop event, and a count that survives a restart."""

from __future__ import annotations

import asyncio
import contextlib
import copy
import json
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest
from harness.background import running
from harness.cluster import TestCluster
from harness.objects import MERGE_PATCH, kube_request

from bootimage_controller.constants import (
    ANNOTATION_HOT_LOOP,
    ANNOTATION_UPDATED_AT,
    CLAIM_HOLDER_NAME,
    CO_DEGRADED,
    CONDITION_DEGRADED,
    EVENT_HOT_LOOP,
    HOT_LOOP_KEY_PREFIX,
    HOT_LOOP_LIMIT,
    Reason,
)
from bootimage_controller.core.claims import LedgerEntry
from bootimage_controller.reconcile.writer import MachineSetWriter

from .daemon_helpers import daemon_task, wait_for
from .fleet import (
    AWS_416,
    AWS_422,
    CO_PATH,
    MC_PATH,
    MS_PATH,
    ami,
    annotations_of,
    aws_machinesets,
    base_cluster,
    conditions,
    events_for,
    get_ms,
    set_ami_patch,
)

pytestmark = pytest.mark.integration

Revert = Callable[[dict[str, Any]], Awaitable[None]]


@contextlib.asynccontextmanager
async def rogue(api: Any, name: str, revert: Revert, every: float = 1.0) -> AsyncIterator[list[str]]:
    """Every `every` seconds: if MachineSet `name` boots anything but the 4.16 AMI, `revert` it.
    Yields the AMIs it reverted, in order."""
    reverted: list[str] = []

    async def loop() -> None:
        while True:
            await asyncio.sleep(every)
            obj = await get_ms(api, name)
            if obj is not None and ami(obj) != AWS_416:
                await revert(obj)
                reverted.append(ami(obj))

    async with running(loop()):
        yield reverted


def put_back(api: Any, name: str, original: dict[str, Any]) -> Revert:
    """A writer that replaces the whole object with its old copy (`oc replace`, a GitOps tool): a
    custom resource update needs the current resourceVersion, so it takes that from the live object."""

    async def revert(current: dict[str, Any]) -> None:
        old_copy = copy.deepcopy(original)
        old_copy["metadata"]["resourceVersion"] = current["metadata"]["resourceVersion"]
        await kube_request(api, "PUT", f"{MS_PATH}/{name}", old_copy)

    return revert


def count_applied_patches(monkeypatch: pytest.MonkeyPatch) -> Counter[str]:
    """Boot image patches of the daemon that the API server applied, per MachineSet."""
    applied: Counter[str] = Counter()
    real = MachineSetWriter.patch_boot_image

    async def spy(self: MachineSetWriter, obj: Any, *args: Any) -> None:
        await real(self, obj, *args)  # a refusal raises: only what was applied is counted
        applied[obj["metadata"]["name"]] += 1

    monkeypatch.setattr(MachineSetWriter, "patch_boot_image", spy)
    return applied


async def degraded_by_hot_loop(api: Any, name: str) -> bool:
    cond = (await conditions(api)).get(CONDITION_DEGRADED)
    return cond is not None and cond["status"] == "True" and f"{name}: {Reason.HOT_LOOP}: " in cond["message"]


async def boots(api: Any, name: str, image: str) -> bool:
    obj = await get_ms(api, name)
    return obj is not None and ami(obj) == image


async def test_a_field_reverter_gets_three_patches_then_a_hot_loop_that_survives_a_restart(
    kube_cluster: TestCluster, kube_api: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    await base_cluster(kube_api)
    await aws_machinesets(kube_api, ["looping", "steady"])
    applied = count_applied_patches(monkeypatch)

    async def revert_the_ami(_obj: dict[str, Any]) -> None:
        # Like an old GitOps copy applied with a merge patch: the field goes back, the rest stays.
        await kube_request(kube_api, "PATCH", f"{MS_PATH}/looping", set_ami_patch(AWS_416), content_type=MERGE_PATCH)

    async with daemon_task(kube_cluster.kubeconfig), rogue(kube_api, "looping", revert_the_ami) as reverted:
        await wait_for(lambda: degraded_by_hot_loop(kube_api, "looping"), 30, "Degraded naming the hot loop")
        await wait_for(lambda: boots(kube_api, "looping", AWS_416), 5, "the rogue's last revert")
        # No fourth patch follows the last revert: the loop ends here.
        co = await conditions(kube_api, CO_PATH)
    assert applied["looping"] == HOT_LOOP_LIMIT == len(reverted) == 3
    assert reverted == [AWS_422] * 3
    assert applied["steady"] == 1 and await boots(kube_api, "steady", AWS_422)
    looping = await get_ms(kube_api, "looping")
    assert looping is not None
    record = json.loads(annotations_of(looping)[ANNOTATION_HOT_LOOP])
    assert record["count"] == HOT_LOOP_LIMIT and AWS_422 in record["target"]
    hot = [e for e in await events_for(kube_api, "looping") if e["reason"] == EVENT_HOT_LOOP]
    assert len(hot) == 1 and hot[0]["type"] == "Warning" and hot[0]["count"] == 1
    assert "4th time" in hot[0]["message"] and ANNOTATION_HOT_LOOP in hot[0]["message"]
    assert not [e for e in await events_for(kube_api, "steady") if e["reason"] == EVENT_HOT_LOOP]
    assert co[CO_DEGRADED]["status"] == "True" and "looping" in co[CO_DEGRADED]["message"]

    # A restart: the count comes back from the annotation. Clear the condition first, so that
    # Degraded can only come from the new daemon's own refusal.
    await kube_request(kube_api, "PATCH", f"{MC_PATH}/status", {"status": {"conditions": []}}, content_type=MERGE_PATCH)
    applied.clear()
    async with daemon_task(kube_cluster.kubeconfig):
        await wait_for(lambda: degraded_by_hot_loop(kube_api, "looping"), 30, "the restarted daemon's refusal")
    assert applied["looping"] == 0
    after = await get_ms(kube_api, "looping")
    assert after is not None and ami(after) == AWS_416
    assert annotations_of(after)[ANNOTATION_HOT_LOOP] == annotations_of(looping)[ANNOTATION_HOT_LOOP]


async def test_a_writer_replacing_the_whole_object_is_stopped_too(
    kube_cluster: TestCluster, kube_api: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A writer that puts back a whole old copy (metadata included; a custom resource update
    needs the current resourceVersion, so it reads that first) also wipes our record and the
    hot-loop annotation: the daemon's memory of its own writes counts instead."""
    await base_cluster(kube_api)
    original = (await aws_machinesets(kube_api, ["replaced"]))["replaced"]
    applied = count_applied_patches(monkeypatch)

    async with daemon_task(kube_cluster.kubeconfig), rogue(kube_api, "replaced", put_back(kube_api, "replaced", original)) as reverted:
        await wait_for(lambda: degraded_by_hot_loop(kube_api, "replaced"), 30, "Degraded naming the hot loop")
        await wait_for(lambda: boots(kube_api, "replaced", AWS_416), 5, "the rogue's last revert")
    assert applied["replaced"] == len(reverted) == HOT_LOOP_LIMIT
    final = await get_ms(kube_api, "replaced")
    assert final is not None and ANNOTATION_UPDATED_AT not in annotations_of(final)  # the record was wiped


async def test_a_whole_object_writer_is_stopped_across_restarts_by_the_count_the_holder_keeps(
    kube_cluster: TestCluster, kube_api: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`oc replace` / GitOps: each revert wipes our annotations, and each daemon start used to
    write three more times (25 identical patches over 8 restarts). The count lives in the claim
    holder now, where that writer cannot reach it: three writes in all, whatever the restarts."""
    await base_cluster(kube_api)
    original = (await aws_machinesets(kube_api, ["gitops"]))["gitops"]
    applied = count_applied_patches(monkeypatch)

    async with rogue(kube_api, "gitops", put_back(kube_api, "gitops", original), every=0.5):
        for start in range(3):
            # Each start: clear the condition, so Degraded can only come from this daemon's refusal.
            await kube_request(kube_api, "PATCH", f"{MC_PATH}/status", {"status": {"conditions": []}},
                               content_type=MERGE_PATCH)
            async with daemon_task(kube_cluster.kubeconfig):
                await wait_for(lambda: degraded_by_hot_loop(kube_api, "gitops"), 30, f"Degraded after start {start + 1}")
                await wait_for(lambda: boots(kube_api, "gitops", AWS_416), 5, "the rogue's last revert")
            assert applied["gitops"] == HOT_LOOP_LIMIT, f"after start {start + 1}"
    holder = await kube_request(kube_api, "GET", f"/api/v1/namespaces/openshift-machine-api/configmaps/{CLAIM_HOLDER_NAME}")
    kept = LedgerEntry.from_data(holder["data"][f"{HOT_LOOP_KEY_PREFIX}{original['metadata']['uid']}"])
    assert kept is not None and kept.count == HOT_LOOP_LIMIT
    hot = [e for e in await events_for(kube_api, "gitops") if e["reason"] == EVENT_HOT_LOOP]
    assert hot and all(e["type"] == "Warning" for e in hot)


async def test_a_daemon_that_dies_right_after_each_write_still_writes_three_times_in_all(
    kube_cluster: TestCluster, kube_api: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 25 item 5, the hardest case: a whole-object writer wipes our record after every write,
    and the daemon dies the moment each patch is applied, before it keeps anything in memory. Only
    a count written before the patch was sent, somewhere the PUT cannot reach, survives; the first
    write must be counted too, or every start writes once more for ever."""
    await base_cluster(kube_api)
    original = (await aws_machinesets(kube_api, ["gitops"]))["gitops"]
    applied: Counter[str] = Counter()
    wrote = asyncio.Event()
    real = MachineSetWriter.patch_boot_image

    async def write_then_die(self: MachineSetWriter, obj: Any, *args: Any) -> None:
        await real(self, obj, *args)
        applied[obj["metadata"]["name"]] += 1
        wrote.set()
        await asyncio.Event().wait()  # the process is gone: nothing after the write runs

    monkeypatch.setattr(MachineSetWriter, "patch_boot_image", write_then_die)

    async def wrote_or_refused() -> bool:
        return wrote.is_set() or await degraded_by_hot_loop(kube_api, "gitops")

    outcomes = []
    async with rogue(kube_api, "gitops", put_back(kube_api, "gitops", original), every=0.3):
        for start in range(HOT_LOOP_LIMIT + 2):
            wrote.clear()
            await kube_request(kube_api, "PATCH", f"{MC_PATH}/status", {"status": {"conditions": []}},
                               content_type=MERGE_PATCH)
            async with daemon_task(kube_cluster.kubeconfig):
                await wait_for(wrote_or_refused, 30, f"a write or a refusal after start {start + 1}")
            outcomes.append("wrote" if wrote.is_set() else "refused")
            await wait_for(lambda: boots(kube_api, "gitops", AWS_416), 5, "the rogue's revert")
    assert outcomes == ["wrote"] * HOT_LOOP_LIMIT + ["refused"] * 2
    assert applied["gitops"] == HOT_LOOP_LIMIT
