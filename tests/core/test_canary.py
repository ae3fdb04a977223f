"""The canary Machine and its verdict (SPEC section 3b, core/canary.py): pure."""

from __future__ import annotations

import copy
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from bootimage_controller.constants import (
    ANNOTATION_BOOT_IMAGE_CANARY,
    ANNOTATION_BOOT_IMAGE_VERIFIED,
    ANNOTATION_CANARY_DEADLINE,
    ANNOTATION_CANARY_RUNNER,
    LABEL_BOOT_IMAGE_CANARY,
    LABEL_MACHINE_CLUSTER_ID,
)
from bootimage_controller.core.canary import (
    CanaryError,
    canary_due,
    canary_machine,
    canary_name,
    canary_progress,
    recorded_for,
)
from bootimage_controller.core.verification import BootVerdict, MachineFacts, NodeFacts, Verdict, selects

from .planner.support import machineset

MS = "aws-x86_64-us-east-1a-4.16.yaml"
NOW = datetime(2026, 11, 28, 12, 0, tzinfo=UTC)
TIMEOUT = timedelta(minutes=20)
AMI_FIELD = "spec.template.spec.providerSpec.value.ami"
IMAGE = "ami-0b00700000000d00d"


def _pool(name: str, ms: dict[str, Any] | None = None) -> dict[str, Any]:
    pool = copy.deepcopy(ms or machineset(MS))
    pool["metadata"]["name"] = name
    pool["spec"]["selector"]["matchLabels"]["machine.openshift.io/cluster-api-machineset"] = name
    pool["spec"]["template"]["metadata"]["labels"]["machine.openshift.io/cluster-api-machineset"] = name
    return pool


def test_no_machineset_of_the_namespace_selects_the_canary_and_the_machine_controller_accepts_it() -> None:
    pool, other = _pool("gpu"), _pool("infra")
    canary = canary_machine(pool, IMAGE, [pool, other], "daemon", NOW + TIMEOUT)
    labels = canary["metadata"]["labels"]
    assert not any(selects(ms["spec"]["selector"], labels) for ms in (pool, other))
    assert labels[LABEL_BOOT_IMAGE_CANARY] == "gpu"
    # The machine controller refuses a Machine without the cluster-ID label (validateMachine).
    assert labels[LABEL_MACHINE_CLUSTER_ID] == pool["spec"]["template"]["metadata"]["labels"][LABEL_MACHINE_CLUSTER_ID]
    assert "ownerReferences" not in canary["metadata"]
    assert canary["spec"]["providerSpec"] == pool["spec"]["template"]["spec"]["providerSpec"]
    assert {"key": LABEL_BOOT_IMAGE_CANARY, "value": "gpu", "effect": "NoSchedule"} in canary["spec"]["taints"]
    assert canary["metadata"]["annotations"][ANNOTATION_CANARY_RUNNER] == "daemon"
    assert canary["metadata"]["annotations"][ANNOTATION_CANARY_DEADLINE] == "2026-11-28T12:20:00Z"


def test_a_machineset_that_would_select_any_canary_gets_none() -> None:
    pool, greedy = _pool("gpu"), _pool("greedy")
    cluster = greedy["spec"]["selector"]["matchLabels"][LABEL_MACHINE_CLUSTER_ID]
    greedy["spec"]["selector"] = {"matchLabels": {LABEL_MACHINE_CLUSTER_ID: cluster}}
    with pytest.raises(CanaryError, match="greedy would select a canary"):
        canary_machine(pool, IMAGE, [pool, greedy], "daemon", NOW)


def test_the_name_comes_from_the_machineset_and_image_and_fits_a_label() -> None:
    assert canary_name("gpu", IMAGE) == canary_name("gpu", IMAGE) != canary_name("gpu", "ami-other")
    long = canary_name("x" * 70, IMAGE)
    assert len(long) == 63 and long.startswith("x" * 40)


def _canary(phase: str | None, node: str | None = None, instance: bool = False, error: str | None = None,
            age: timedelta = timedelta(minutes=1), image: str = IMAGE) -> dict[str, Any]:
    canary = canary_machine(_pool("gpu"), image, [], "daemon", NOW - age + TIMEOUT)
    canary["spec"]["providerSpec"]["value"]["ami"] = {"id": image}
    canary["metadata"]["creationTimestamp"] = (NOW - age).strftime("%Y-%m-%dT%H:%M:%SZ")
    status: dict[str, Any] = {}
    if phase:
        status["phase"] = phase
    if node:
        status["nodeRef"] = {"name": node}
    if instance:
        status["providerStatus"] = {"instanceId": "i-1"}
    if error:
        status.update(errorReason="InvalidConfiguration", errorMessage=error)
    canary["status"] = status
    return canary


READY = {"n1": NodeFacts("n1", True, "2026-11-28T11:59:00Z")}


@pytest.mark.parametrize(("canary", "verdict", "done"), [
    (_canary("Running", "n1"), Verdict.VERIFIED, True),
    (_canary("Provisioned", instance=True), Verdict.UNVERIFIED, False),
    (_canary("Provisioned", instance=True, age=timedelta(minutes=21)), Verdict.FAILED, True),
    (_canary("Failed", error="InvalidAMIID.NotFound: the image id does not exist"), Verdict.FAILED, True),
    (_canary("Failed", error="InsufficientInstanceCapacity"), Verdict.UNVERIFIED, True),
    (_canary("Provisioning", age=timedelta(minutes=21)), Verdict.UNVERIFIED, True),
    (_canary(None), Verdict.UNVERIFIED, False),
])
def test_how_far_a_canary_got(canary: dict[str, Any], verdict: Verdict, done: bool) -> None:
    progress = canary_progress(canary, AMI_FIELD, READY, NOW, TIMEOUT)
    assert (progress.verdict.verdict, progress.done) == (verdict, done)
    if done and verdict is Verdict.UNVERIFIED:
        assert progress.verdict.machine == canary["metadata"]["name"] and progress.verdict.reason
    if not done:
        assert progress.recheck_at is not None and progress.recheck_at > NOW


def test_a_canary_is_deleted_only_once_the_record_holds_its_result() -> None:
    progress = canary_progress(_canary("Running", "n1"), AMI_FIELD, READY, NOW, TIMEOUT)
    name = progress.machine.name
    assert not recorded_for(progress, None)
    assert not recorded_for(progress, BootVerdict(Verdict.UNVERIFIED, IMAGE))
    assert recorded_for(progress, BootVerdict(Verdict.VERIFIED, IMAGE, name, "n1"))
    assert recorded_for(progress, BootVerdict(Verdict.VERIFIED, IMAGE, "a-pool-machine", "n2"))
    assert recorded_for(progress, BootVerdict(Verdict.FAILED, "ami-old", failed_images=(IMAGE,)))


def _annotated(pool: dict[str, Any], **annotations: str) -> dict[str, Any]:
    pool["metadata"].setdefault("annotations", {}).update(annotations)
    return pool


def test_a_canary_is_due_once_after_our_write_to_an_enabled_pool_and_never_otherwise() -> None:
    enabled = _annotated(_pool("gpu"), **{ANNOTATION_BOOT_IMAGE_CANARY: "Enabled"})
    current = {"id": IMAGE}
    fresh = BootVerdict(Verdict.UNVERIFIED, IMAGE, reason="no Machine has been created from this image yet")
    assert canary_due(enabled, current, fresh, True, [], [])
    assert not canary_due(_pool("gpu"), current, fresh, True, [], [])  # not asked for
    assert not canary_due(enabled, current, fresh, False, [], [])  # another writer's image
    assert not canary_due(enabled, current, fresh, True, [], [{"metadata": {"name": "running"}}])  # one at a time
    assert not canary_due(enabled, current, BootVerdict(Verdict.VERIFIED, IMAGE), True, [], [])
    machine = MachineFacts("openshift-machine-api", "m1", IMAGE, "Provisioning", None, None, None, NOW, False)
    assert not canary_due(enabled, current, fresh, True, [machine], [])  # a scale-up is proving it
    # A canary already judged this image (capacity: unverified, with its Machine): no second one.
    tried = BootVerdict(Verdict.UNVERIFIED, IMAGE, "gpu-canary-1", None, "t", "capacity").to_annotation()
    assert not canary_due(_annotated(enabled, **{ANNOTATION_BOOT_IMAGE_VERIFIED: tried}), current, fresh, True, [], [])

