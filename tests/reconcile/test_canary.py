"""The daemon's canary step (reconcile/canary.py), level-triggered from what the cluster holds: which
canary it creates, records and deletes, and when it writes nothing (SPEC section 3b)."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from core.planner.support import machineset

from bootimage_controller.constants import ANNOTATION_BOOT_IMAGE_CANARY, ANNOTATION_BOOT_IMAGE_VERIFIED
from bootimage_controller.core.canary import canary_machine
from bootimage_controller.core.verification import BootVerdict, NodeFacts, Verdict
from bootimage_controller.kube.fence import UpgradeGateClosed
from bootimage_controller.reconcile.canary import ABANDONED_AFTER, Canaries, CanaryInputs

NOW = datetime(2026, 11, 28, 12, 0, tzinfo=UTC)
TIMEOUT = 1200.0
IMAGE = "ami-0b00700000000d00d"
FIELD = "spec.template.spec.providerSpec.value.ami"


@dataclass
class Writer:
    created: list[str] = field(default_factory=list)
    deleted: list[str] = field(default_factory=list)
    patched: list[list[dict[str, Any]]] = field(default_factory=list)

    exists: bool = False  # another reconcile created the canary first (the cache not caught up)

    async def create_machine(self, body: dict[str, Any]) -> bool:
        self.created.append(body["metadata"]["name"])
        return not self.exists

    async def delete_machine(self, namespace: str, name: str, uid: str) -> bool:
        self.deleted.append(name)
        return True

    async def patch(self, obj: Any, ops: list[dict[str, Any]], what: str) -> None:
        self.patched.append(ops)


def pool(**annotations: str) -> dict[str, Any]:
    ms = machineset("aws-x86_64-us-east-1a-4.16.yaml")
    ms["metadata"]["name"] = "gpu"
    ms["metadata"]["resourceVersion"] = "5"
    ms["spec"]["template"]["spec"]["providerSpec"]["value"]["ami"] = {"id": IMAGE}
    ms["metadata"].setdefault("annotations", {}).update(
        {ANNOTATION_BOOT_IMAGE_CANARY: "Enabled", **annotations})
    return ms


def canary(runner: str = "daemon", image: str = IMAGE, age: timedelta = timedelta(minutes=1),
           status: dict[str, Any] | None = None) -> dict[str, Any]:
    machine = canary_machine(pool(), image, [], runner, NOW - age + timedelta(seconds=TIMEOUT))
    machine["spec"]["providerSpec"]["value"]["ami"] = {"id": image}
    machine["metadata"].update(uid="uid-1", creationTimestamp=(NOW - age).strftime("%Y-%m-%dT%H:%M:%SZ"))
    machine["status"] = status or {}
    return machine


JOINED = {"phase": "Running", "nodeRef": {"name": "n1"}}
NODES = {"n1": NodeFacts("n1", True, "2026-11-28T11:59:00Z")}
FRESH = BootVerdict(Verdict.UNVERIFIED, IMAGE, reason="no Machine has been created from this image yet")


def seen(ms: dict[str, Any], canaries: list[dict[str, Any]], *, ours: bool = True, wrote: bool = True,
         recorded: BootVerdict | None = None, judged: BootVerdict = FRESH) -> CanaryInputs:
    return CanaryInputs(ms, [ms], FIELD, {"id": IMAGE}, judged, recorded, wrote, ours, [], canaries, NODES)


def step(inputs: CanaryInputs, gate: UpgradeGateClosed | None = None, writer: Writer | None = None) -> tuple[Writer, Any]:
    import asyncio

    writer = writer or Writer()
    report = asyncio.run(Canaries(TIMEOUT, lambda: gate, lambda: NOW).step(writer, inputs))  # type: ignore[arg-type]
    return writer, report


def test_one_canary_after_our_write_and_none_while_the_upgrade_gate_is_closed() -> None:
    writer, report = step(seen(pool(), []))
    assert writer.created == [report.created] and report.running == report.created
    writer, report = step(seen(pool(), []), gate=UpgradeGateClosed("an upgrade is in progress"))
    assert writer.created == [] and report.created is None
    writer, _ = step(seen(pool(), [], wrote=False))  # another writer's image: verify-boot is for that
    assert writer.created == []
    # Made first by a reconcile the cache has not caught up with: watched, but not said to be started.
    writer, report = step(seen(pool(), []), writer=Writer(exists=True))
    assert report.created is None and report.running == writer.created[0]


def test_a_canary_is_recorded_before_it_is_deleted() -> None:
    done = canary(status={"phase": "Failed", "errorMessage": "InsufficientInstanceCapacity"})
    writer, report = step(seen(pool(), [done]))
    # Unverified (capacity) is recorded by the canary step itself; the canary waits for that record.
    assert writer.deleted == [] and len(writer.patched) == 1 and report.running == done["metadata"]["name"]
    recorded = BootVerdict(Verdict.UNVERIFIED, IMAGE, done["metadata"]["name"], None, "t", "capacity")
    writer, report = step(seen(pool(), [done], recorded=recorded))
    assert writer.deleted == [done["metadata"]["name"]] and writer.patched == [] and writer.created == []


def test_a_joined_canary_waits_for_verifications_record_then_goes() -> None:
    joined = canary(status=JOINED)
    writer, _ = step(seen(pool(), [joined]))
    assert (writer.deleted, writer.patched, writer.created) == ([], [], [])  # verification records it
    recorded = BootVerdict(Verdict.VERIFIED, IMAGE, joined["metadata"]["name"], "n1")
    writer, _ = step(seen(pool(), [joined], recorded=recorded, judged=recorded))
    assert writer.deleted == [joined["metadata"]["name"]]


def test_a_canary_that_proves_nothing_any_more_goes_at_once() -> None:
    stale = canary(image="ami-rolled-back-from", status={"phase": "Provisioned"})
    writer, _ = step(seen(pool(), [stale]))
    assert writer.deleted == [stale["metadata"]["name"]]
    running = canary(status={"phase": "Provisioned"})
    writer, _ = step(seen(pool(), [running], ours=False))  # the MachineSet left this controller
    assert writer.deleted == [running["metadata"]["name"]]


def test_a_verify_boot_canary_is_that_commands_until_abandoned() -> None:
    theirs = canary(runner="verify-boot", status={"phase": "Provisioned"})
    writer, _ = step(seen(pool(), [theirs]))
    assert writer.deleted == [] and writer.created == []  # one canary at a time, whoever runs it
    abandoned = canary(runner="verify-boot", age=timedelta(seconds=TIMEOUT) + ABANDONED_AFTER + timedelta(seconds=1))
    writer, _ = step(seen(pool(), [abandoned]))
    assert writer.deleted == [abandoned["metadata"]["name"]]


def test_the_record_of_a_canary_keeps_the_images_never_to_write_again() -> None:
    done = canary(age=timedelta(seconds=TIMEOUT + 1), status={"phase": "Provisioning"})
    recorded = BootVerdict(Verdict.FAILED, "ami-older", failed_images=("ami-older",))
    writer, _ = step(seen(pool(), [done], recorded=recorded))
    (ops,) = writer.patched
    record = next(op["value"] for op in ops if op.get("path", "").endswith(
        ANNOTATION_BOOT_IMAGE_VERIFIED.replace("/", "~1")))
    kept = BootVerdict.from_annotations({ANNOTATION_BOOT_IMAGE_VERIFIED: record})
    assert kept is not None and kept.failed_images == ("ami-older",) and kept.machine == done["metadata"]["name"]
    assert "got no instance" in kept.reason
