"""Safe writes on a real API server (SPEC section 3, invariants 1 and 3): foreign owners, a writer
in between our read and our patch, the stub Ignition gate, the record, rollback, status counts."""

from __future__ import annotations

import base64
import json
import time
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from harness.cluster import TestCluster
from harness.objects import apply, kube_request, machineset_from_fixture, merge_patch

from bootimage_controller import observability as obs
from bootimage_controller.constants import (
    ANNOTATION_BOOT_IMAGE_UPDATES,
    ANNOTATION_PREVIOUS,
    ANNOTATION_RELEASE,
    ANNOTATION_STREAM,
    ANNOTATION_STUB_UPGRADED_AT,
    ANNOTATION_STUB_UPGRADED_TO,
    ANNOTATION_UPDATED_AT,
    CO_DEGRADED,
    CO_PROGRESSING,
    CONDITION_DEGRADED,
    CONDITION_PROGRESSING,
    EVENT_FAILED,
    MAPI_NAMESPACE,
    Reason,
)
from bootimage_controller.reconcile.writer import MachineSetWriter

from .daemon_helpers import daemon_task, run_args, strip_ours, user_data_secret, wait_for
from .fleet import (
    AWS_416,
    AWS_422,
    CO_PATH,
    RELEASE_422,
    ami,
    annotations_of,
    aws_machinesets,
    base_cluster,
    conditions,
    events_for,
    get_ms,
    machinesets,
    merge_patch_ms,
    our_refs,
    run_cli,
    rv,
    set_ami_patch,
)

pytestmark = pytest.mark.integration

AMI_PATH = ("spec", "template", "spec", "providerSpec", "value", "ami")
CUSTOM_AMI = "ami-0123456789abcdef0"  # in no stream, unknown offline: the planner must leave it


def request_count(verb: str, resource: str, codes: tuple[str, ...] | None = None) -> float:
    """bootimage_controller_api_requests_total summed over codes (process-wide: use differences)."""
    total = 0.0
    for metric in obs.REGISTRY.collect():
        for sample in metric.samples:
            labels = sample.labels
            if (
                sample.name.endswith("api_requests_total")
                and labels.get("verb") == verb
                and labels.get("resource") == resource
                and (codes is None or labels.get("code") in codes)
            ):
                total += sample.value
    return total


async def progress_message_is(api: Any, text: str) -> bool:
    cond = (await conditions(api)).get(CONDITION_PROGRESSING)
    return cond is not None and cond["message"].startswith(text)


async def test_a_machineset_with_a_foreign_owner_is_never_written(kube_cluster: TestCluster, kube_api: Any) -> None:
    await base_cluster(kube_api)
    other = await kube_request(
        kube_api,
        "POST",
        f"/api/v1/namespaces/{MAPI_NAMESPACE}/configmaps",
        {"metadata": {"name": "other-owner", "namespace": MAPI_NAMESPACE}},
    )
    foreign = {"apiVersion": "v1", "kind": "ConfigMap", "name": "other-owner", "uid": other["metadata"]["uid"]}
    await aws_machinesets(kube_api, ["free-a", "free-b"])
    owned = (await aws_machinesets(kube_api, ["foreign-owned"], owner_references=[foreign]))["foreign-owned"]

    async with daemon_task(kube_cluster.kubeconfig):
        # The condition counts every MachineSet decided: the foreign one was seen and skipped.
        await wait_for(
            lambda: progress_message_is(kube_api, "Reconciled 2 of 3 MAPI MachineSets (1 skipped)"),
            30,
            "a pass that patched the free MachineSets",
        )
    fleet = await machinesets(kube_api)
    assert ami(fleet["free-a"]) == ami(fleet["free-b"]) == AWS_422
    assert fleet["foreign-owned"]["metadata"]["resourceVersion"] == owned["metadata"]["resourceVersion"]
    assert fleet["foreign-owned"]["metadata"]["ownerReferences"] == [foreign]


async def test_a_change_between_our_read_and_our_patch_is_kept_and_replanned(
    kube_cluster: TestCluster, kube_api: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another writer changes the MachineSet after the daemon read it and before its patch lands:
    the stale patch fails (resourceVersion test), the daemon re-reads and re-plans, and the other
    writer's change survives (invariant 3)."""
    await base_cluster(kube_api)
    before = await aws_machinesets(kube_api, ["contested-config", "contested-ami"])
    interference = {
        # An edit of another field: the re-plan still patches the boot image, on top of it.
        "contested-config": {
            "metadata": {"labels": {"team": "other-writer"}},
            "spec": {"template": {"spec": {"providerSpec": {"value": {"instanceType": "m6i.2xlarge"}}}}},
        },
        # An edit of the boot image itself: the re-plan must not overwrite it.
        "contested-ami": set_ami_patch(CUSTOM_AMI),
    }
    interfered: list[str] = []
    real_patch = MachineSetWriter.patch_boot_image

    async def patch_after_another_writer(self: MachineSetWriter, obj: Any, *args: Any) -> Any:
        name = obj["metadata"]["name"]
        if name in interference and name not in interfered:
            interfered.append(name)
            await merge_patch_ms(kube_api, name, interference[name])
        return await real_patch(self, obj, *args)

    monkeypatch.setattr(MachineSetWriter, "patch_boot_image", patch_after_another_writer)
    rejected = request_count("patch", "machinesets", ("409", "422"))

    async with daemon_task(kube_cluster.kubeconfig):
        await wait_for(
            lambda: progress_message_is(kube_api, "Reconciled 1 of 2 MAPI MachineSets (1 skipped)"),
            30,
            "both MachineSets re-planned",
        )
    assert sorted(interfered) == sorted(interference)
    assert request_count("patch", "machinesets", ("409", "422")) - rejected == 2, "both stale patches rejected"
    fleet = await machinesets(kube_api)
    config = fleet["contested-config"]
    assert config["metadata"]["labels"]["team"] == "other-writer"
    assert config["spec"]["template"]["spec"]["providerSpec"]["value"]["instanceType"] == "m6i.2xlarge"
    assert ami(config) == AWS_422 and our_refs(config)
    assert annotations_of(config)[ANNOTATION_PREVIOUS] == json.dumps({"id": AWS_416}, separators=(",", ":"))
    contested = fleet["contested-ami"]
    assert ami(contested) == CUSTOM_AMI
    assert not our_refs(contested) and ANNOTATION_UPDATED_AT not in annotations_of(contested)
    # Apart from the other writer's edit, the boot image field and our metadata, nothing moved.
    expected = merge_patch(before["contested-config"], interference["contested-config"])
    assert strip_ours(config, AMI_PATH) == strip_ours(expected, AMI_PATH)


async def test_a_v2_stub_is_upgraded_before_the_patch_and_a_broken_secret_blocks_only_its_machineset(
    kube_cluster: TestCluster, kube_api: Any
) -> None:
    await base_cluster(kube_api)  # secret worker-user-data: the installer's Ignition 2.2.0 stub
    broken = user_data_secret("broken-user-data")
    broken["data"]["userData"] = base64.b64encode(b'{"ignition":{"version":"2.2.0"},"networkd":{"units":[{}]}}').decode()
    broken_before = await apply(kube_api, broken)
    await aws_machinesets(kube_api, ["stub-a", "stub-b"])
    blocked = (
        await aws_machinesets(kube_api, ["stub-broken"], provider_spec={"userDataSecret": {"name": "broken-user-data"}})
    )["stub-broken"]

    async def degraded_by_broken() -> bool:
        cond = (await conditions(kube_api)).get(CONDITION_DEGRADED)
        return cond is not None and cond["status"] == "True" and "stub-broken" in cond["message"]

    async with daemon_task(kube_cluster.kubeconfig):
        await wait_for(degraded_by_broken, 30, "Degraded naming the broken MachineSet")
        await wait_for(
            lambda: progress_message_is(kube_api, "Reconciled 2 of 3 MAPI MachineSets"), 30, "the others patched"
        )
    secret = await kube_request(kube_api, "GET", f"/api/v1/namespaces/{MAPI_NAMESPACE}/secrets/worker-user-data")
    assert secret["metadata"]["annotations"][ANNOTATION_STUB_UPGRADED_TO] == "3.5.0"
    assert ANNOTATION_STUB_UPGRADED_AT in secret["metadata"]["annotations"]
    stub = json.loads(base64.b64decode(secret["data"]["userData"]))
    assert stub["ignition"]["version"] == "3.5.0" and stub["ignition"]["config"]["merge"]
    fleet = await machinesets(kube_api)
    for name in ("stub-a", "stub-b"):
        assert ami(fleet[name]) == AWS_422
        assert rv(secret) < rv(fleet[name]), f"{name} was patched before its stub was upgraded"
    # The broken one: untouched, and the reason says why.
    assert fleet["stub-broken"]["metadata"]["resourceVersion"] == blocked["metadata"]["resourceVersion"]
    after = await kube_request(kube_api, "GET", f"/api/v1/namespaces/{MAPI_NAMESPACE}/secrets/broken-user-data")
    assert after["metadata"]["resourceVersion"] == broken_before["metadata"]["resourceVersion"]
    degraded = (await conditions(kube_api))[CONDITION_DEGRADED]
    assert degraded["reason"] == "MachineSetErrors"
    assert f"stub-broken: {Reason.USER_DATA_INVALID}: " in degraded["message"]
    assert "networkd.units" in degraded["message"]
    warnings = [e for e in await events_for(kube_api, "stub-broken") if e["type"] == "Warning"]
    assert [e["reason"] for e in warnings] == [EVENT_FAILED]
    assert warnings[0]["message"].startswith(f"{Reason.USER_DATA_INVALID}: ")
    co = await conditions(kube_api, CO_PATH)
    assert co[CO_DEGRADED]["status"] == "True" and co[CO_DEGRADED]["message"] == degraded["message"]


async def test_the_record_and_rollback_end_to_end(kube_cluster: TestCluster, kube_api: Any) -> None:
    from bootimage_controller.daemon import run as daemon

    await base_cluster(kube_api)
    await aws_machinesets(kube_api, ["rb-target", "rb-other"])
    started = datetime.now(UTC).replace(microsecond=0)
    assert await daemon.run_async(run_args(kube_cluster.kubeconfig, "--once", "--no-leader-elect")) == 0

    patched = await get_ms(kube_api, "rb-target")
    assert patched is not None and ami(patched) == AWS_422 and our_refs(patched)
    record = annotations_of(patched)
    assert record[ANNOTATION_RELEASE] == RELEASE_422
    assert record[ANNOTATION_STREAM] == "rhel-9"
    stamp = datetime.strptime(record[ANNOTATION_UPDATED_AT], "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)
    assert started <= stamp <= datetime.now(UTC) + timedelta(seconds=1)
    assert json.loads(record[ANNOTATION_PREVIOUS]) == {"id": AWS_416}  # the whole field before the patch
    other = await get_ms(kube_api, "rb-other")
    assert other is not None

    code, out = await run_cli("rollback", "rb-target", "--kubeconfig", str(kube_cluster.kubeconfig))

    assert code == 0, out
    rolled = await get_ms(kube_api, "rb-target")
    assert rolled is not None and ami(rolled) == AWS_416
    opted_out = merge_patch(patched, {"metadata": {"annotations": {ANNOTATION_BOOT_IMAGE_UPDATES: "Disabled"}}})
    assert strip_ours(rolled, AMI_PATH) == strip_ours(opted_out, AMI_PATH)  # only the field and our metadata
    rolled_record = annotations_of(rolled)
    assert rolled_record[ANNOTATION_BOOT_IMAGE_UPDATES] == "Disabled"  # opted out: no hot loop with the daemon
    assert json.loads(rolled_record[ANNOTATION_PREVIOUS]) == {"id": AWS_422}  # rollback is itself recorded
    assert rolled_record[ANNOTATION_UPDATED_AT] >= record[ANNOTATION_UPDATED_AT]
    assert ANNOTATION_RELEASE not in rolled_record  # the restored image's release is not known here
    assert [r["uid"] for r in our_refs(rolled)] == [r["uid"] for r in our_refs(patched)]  # claimed
    assert (await get_ms(kube_api, "rb-other")) == other

    # The daemon leaves the rolled-back MachineSet alone and, as it is opted out, releases it.
    assert await daemon.run_async(run_args(kube_cluster.kubeconfig, "--once", "--no-leader-elect")) == 0
    final = await get_ms(kube_api, "rb-target")
    assert final is not None and ami(final) == AWS_416 and not our_refs(final)
    # A MachineSet that does not exist: a clear error, exit 1.
    code, out = await run_cli("rollback", "no-such-machineset", "--kubeconfig", str(kube_cluster.kubeconfig))
    assert code == 1 and "not found" in out


async def test_conditions_count_a_100_machineset_pass_and_status_writes_stay_batched(
    kube_cluster: TestCluster, kube_api: Any
) -> None:
    await base_cluster(kube_api)
    names = [f"many-{i:03d}" for i in range(97)]
    await aws_machinesets(kube_api, names)
    # Three the planner skips: a custom AMI (unknown offline), AMI filters, a Windows pool.
    await aws_machinesets(kube_api, ["skip-custom"], provider_spec={"ami": {"id": CUSTOM_AMI}})
    await apply(kube_api, machineset_from_fixture("aws-x86_64-ami-filters.yaml", "skip-filters"))
    windows = {"spec": {"template": {"metadata": {"labels": {"machine.openshift.io/os-id": "Windows"}}}}}
    await aws_machinesets(kube_api, ["skip-windows"], merge=windows)
    expected = "Reconciled 97 of 100 MAPI MachineSets (3 skipped)"
    writes_before = request_count("patch", "machineconfigurations/status") + request_count(
        "patch", "clusteroperators/status"
    )

    started = time.monotonic()
    # Unthrottled (--qps 0): the pass is as short as the API server allows, the hardest case for batching.
    async with daemon_task(kube_cluster.kubeconfig, "--qps", "0"):

        async def done() -> bool:
            cond = (await conditions(kube_api)).get(CONDITION_PROGRESSING)
            return cond is not None and cond["status"] == "False" and cond["message"].startswith(expected)

        await wait_for(done, 60, expected)
        elapsed = time.monotonic() - started
        writes = (
            request_count("patch", "machineconfigurations/status")
            + request_count("patch", "clusteroperators/status")
            - writes_before
        )
    fleet = await machinesets(kube_api)
    assert all(ami(fleet[n]) == AWS_422 for n in names)
    mc = await conditions(kube_api)
    assert mc[CONDITION_PROGRESSING]["message"] == f"{expected} | Reconciled 0 of 0 ControlPlaneMachineSets"
    assert mc[CONDITION_DEGRADED]["status"] == "False"
    co = await conditions(kube_api, CO_PATH)
    assert co[CO_PROGRESSING]["status"] == "False"
    assert co[CO_PROGRESSING]["message"] == mc[CONDITION_PROGRESSING]["message"]
    # Batched: at most about one status write per second for the whole pass, not one per MachineSet.
    assert writes <= elapsed + 2, f"{writes} status writes in a {elapsed:.1f}s pass"
