"""Boot verification's verdicts (SPEC section 3b), from plain Machines and Nodes: which failures are
the image's, which Machines are a MachineSet's, what the record keeps, and the planner's refusal
to write a golden image that failed its first boot here."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from bootimage_controller.constants import (
    ANNOTATION_BOOT_IMAGE_VERIFIED,
    LABEL_BOOT_IMAGE_CANARY,
    Action,
    Reason,
)
from bootimage_controller.core.model import image_label
from bootimage_controller.core.verification import (
    BootVerdict,
    MachineFacts,
    NodeFacts,
    Verdict,
    VerificationInputs,
    image_failure,
    judge,
    judge_machine_set,
    machine_image_path,
    machines_of,
    selects,
)

from .planner.support import machineset, plan

MS = "aws-x86_64-us-east-1a-4.16.yaml"
TARGET_422 = "ami-06a6b025350ff1e23"  # 4.22 rhel-9 us-east-1 (the fixture's header)
NOW = datetime(2026, 11, 28, 12, 0, tzinfo=UTC)
TIMEOUT = timedelta(minutes=20)
AMI_FIELD = "spec.template.spec.providerSpec.value.ami"


def _machine(name: str, image: str | None = "ami-good", phase: str | None = "Running", node: str | None = None,
             error: tuple[str, str] | None = None, age: timedelta = timedelta(minutes=5),
             instance: bool = True) -> MachineFacts:
    return MachineFacts("openshift-machine-api", name, image, phase, node, error[0] if error else None,
                        error[1] if error else None, NOW - age, instance)


READY = {"n1": NodeFacts("n1", True, "2026-11-28T11:58:00Z"), "n2": NodeFacts("n2", False, None)}


def test_a_machine_whose_node_is_ready_verifies_its_image() -> None:
    j = judge("ami-good", [_machine("m1", node="n1")], READY, None, NOW, TIMEOUT)
    assert j.verdict.verdict is Verdict.VERIFIED
    assert (j.verdict.machine, j.verdict.node, j.verdict.at) == ("m1", "n1", "2026-11-28T11:58:00Z")


def test_a_node_not_ready_or_another_image_verifies_nothing() -> None:
    machines = [_machine("m1", node="n2"), _machine("m2", image="ami-other", node="n1")]
    j = judge("ami-good", machines, READY, None, NOW, TIMEOUT)
    assert j.verdict.verdict is Verdict.UNVERIFIED
    assert j.recheck_at is None  # m1 has a Node: it is not waiting for its first boot


def test_an_instance_without_a_node_fails_the_image_after_the_timeout_and_not_before() -> None:
    waiting = _machine("m1", phase="Provisioned", age=timedelta(minutes=19))
    early = judge("ami-good", [waiting], READY, None, NOW, TIMEOUT)
    assert early.verdict.verdict is Verdict.UNVERIFIED
    assert early.recheck_at == NOW + timedelta(minutes=1)
    late = judge("ami-good", [_machine("m1", phase="Provisioned", age=timedelta(minutes=21))], READY, None, NOW,
                 TIMEOUT)
    assert late.verdict.verdict is Verdict.FAILED
    assert late.failed_machine is not None and late.failed_machine.name == "m1"
    assert "no Node joined within 20m0s" in late.verdict.reason


def test_a_machine_still_provisioning_without_an_instance_never_fails_by_time() -> None:
    pending = _machine("m1", phase="Provisioning", age=timedelta(hours=3), instance=False)
    assert judge("ami-good", [pending], READY, None, NOW, TIMEOUT).verdict.verdict is Verdict.UNVERIFIED


@pytest.mark.parametrize(("error", "verdict"), [
    (("InvalidConfiguration", "error launching instance: InvalidAMIID.NotFound: The image id '[ami-good]' does "
      "not exist"), Verdict.FAILED),
    (("CreateError", "failed to create instance from image ami-good"), Verdict.FAILED),
    (("InsufficientResources", "InsufficientInstanceCapacity: We currently do not have sufficient capacity"),
     Verdict.UNVERIFIED),
    (("CreateError", "VcpuLimitExceeded: You have requested more vCPU capacity than your current limit"),
     Verdict.UNVERIFIED),
    (("InvalidConfiguration", "subnet subnet-123 not found"), Verdict.UNVERIFIED),
])
def test_only_a_failure_that_is_the_images_fails_it(error: tuple[str, str], verdict: Verdict) -> None:
    j = judge("ami-good", [_machine("m1", phase="Failed", error=error, instance=False)], READY, None, NOW, TIMEOUT)
    assert j.verdict.verdict is verdict
    if verdict is Verdict.UNVERIFIED:
        assert "not for its image" in j.verdict.reason and error[1] in j.verdict.reason


def test_capacity_wins_over_a_message_that_names_the_image() -> None:
    m = _machine("m1", phase="Failed", error=("InsufficientResources", "no capacity for ami-good in us-east-1a"))
    assert image_failure(m, "ami-good") is False


def test_the_record_stands_without_new_evidence_and_evidence_replaces_it() -> None:
    recorded = BootVerdict(Verdict.VERIFIED, "ami-good", "m0", "n0", "2026-11-01T00:00:00Z", "joined")
    assert judge("ami-good", [], READY, recorded, NOW, TIMEOUT).verdict == recorded
    # A record for another image says nothing about this one.
    assert judge("ami-new", [], READY, recorded, NOW, TIMEOUT).verdict.verdict is Verdict.UNVERIFIED
    failing = _machine("m1", phase="Failed", error=("InvalidConfiguration", "InvalidAMIID.NotFound"))
    assert judge("ami-good", [failing], READY, recorded, NOW, TIMEOUT).verdict.verdict is Verdict.FAILED


def test_failed_images_survive_every_new_verdict() -> None:
    recorded = BootVerdict(Verdict.FAILED, "ami-bad", "m1", None, "t", "no Node").with_failed("ami-bad")
    j = judge("ami-good", [_machine("m2", node="n1")], READY, recorded, NOW, TIMEOUT)
    assert j.verdict.verdict is Verdict.VERIFIED and j.verdict.failed_images == ("ami-bad",)


def test_the_annotation_round_trips_and_garbage_is_no_record() -> None:
    v = BootVerdict(Verdict.FAILED, "ami-bad", "m1", None, "2026-11-28T12:00:00Z", "why").with_failed("ami-bad")
    doc = json.loads(v.to_annotation())
    assert doc["failedImages"] == ["ami-bad"] and doc["verdict"] == "failed"
    assert BootVerdict.from_annotations({ANNOTATION_BOOT_IMAGE_VERIFIED: v.to_annotation()}) == v
    for garbage in ("{", "[]", '{"verdict": "maybe"}', ""):
        assert BootVerdict.from_annotations({ANNOTATION_BOOT_IMAGE_VERIFIED: garbage}) is None
    kept = BootVerdict(Verdict.UNVERIFIED, "x")
    for i in range(9):
        kept = kept.with_failed(f"ami-{i}")
    assert kept.failed_images == tuple(f"ami-{i}" for i in range(4, 9))


def test_images_are_named_alike_on_machinesets_and_machines() -> None:
    assert image_label({"id": "ami-1"}) == "ami-1"
    assert image_label("projects/rhcos-cloud/global/images/rhcos-9") == "projects/rhcos-cloud/global/images/rhcos-9"
    azure = {"publisher": "azureopenshift", "offer": "aro4", "sku": "aro_419", "version": "419.6.20250523",
             "resourceID": "", "type": "MarketplaceNoPlan"}
    assert image_label(azure) == "azureopenshift:aro4:aro_419:419.6.20250523"
    assert image_label({"resourceID": "/subscriptions/s/galleries/g/images/i/versions/1"}).endswith("/versions/1")
    assert image_label({"filters": []}) is None
    assert machine_image_path("spec.template.spec.providerSpec.value.disks[0].image") == (
        "spec", "providerSpec", "value", "disks", 0, "image")
    assert machine_image_path(None) is None


def _machine_object(name: str, labels: dict[str, str], owner_uid: str | None = None,
                    namespace: str = "openshift-machine-api") -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": namespace, "labels": labels}
    if owner_uid:
        meta["ownerReferences"] = [{"apiVersion": "machine.openshift.io/v1beta1", "kind": "MachineSet",
                                    "name": "x", "uid": owner_uid, "controller": True}]
    return {"apiVersion": "machine.openshift.io/v1beta1", "kind": "Machine", "metadata": meta,
            "spec": {"providerSpec": {"value": {"ami": {"id": "ami-good"}}}}}


def test_a_machinesets_machines_by_selector_owner_or_canary_label_and_no_others() -> None:
    ms = machineset(MS)
    ms["metadata"]["uid"] = "uid-ms"
    selected = dict(ms["spec"]["selector"]["matchLabels"])
    machines = [
        _machine_object("by-selector", selected),
        _machine_object("by-owner", {}, owner_uid="uid-ms"),
        _machine_object("canary", {LABEL_BOOT_IMAGE_CANARY: ms["metadata"]["name"]}),
        _machine_object("other-pool", {**selected, "machine.openshift.io/cluster-api-machineset": "other"}),
        _machine_object("other-namespace", selected, namespace="elsewhere"),
        # Another MachineSet's Machine is never counted here, whatever its labels.
        _machine_object("owned-elsewhere", selected, owner_uid="uid-other"),
    ]
    assert [m["metadata"]["name"] for m in machines_of(ms, machines)] == ["by-owner", "by-selector", "canary"]


@pytest.mark.parametrize(("selector", "labels", "selected"), [
    ({}, {"a": "1"}, False),
    (None, {"a": "1"}, False),
    ({"matchLabels": {"a": "1"}}, {"a": "1", "b": "2"}, True),
    ({"matchExpressions": [{"key": "a", "operator": "In", "values": ["1", "2"]}]}, {"a": "2"}, True),
    ({"matchExpressions": [{"key": "a", "operator": "NotIn", "values": ["1"]}]}, {"a": "1"}, False),
    ({"matchExpressions": [{"key": "a", "operator": "Exists"}]}, {}, False),
    ({"matchExpressions": [{"key": "a", "operator": "DoesNotExist"}]}, {}, True),
    ({"matchExpressions": [{"key": "a", "operator": "Sometimes"}]}, {"a": "1"}, False),
])
def test_label_selectors(selector: Any, labels: dict[str, str], selected: bool) -> None:
    assert selects(selector, labels) is selected


def test_judged_from_whole_objects_the_way_the_daemon_reads_them() -> None:
    ms = machineset(MS)
    labels = dict(ms["spec"]["selector"]["matchLabels"])
    machine = _machine_object("m1", labels)
    machine["metadata"]["creationTimestamp"] = "2026-11-28T11:00:00Z"
    machine["status"] = {"phase": "Running", "nodeRef": {"kind": "Node", "name": "n1"}}
    node = {"metadata": {"name": "n1"}, "status": {"conditions": [
        {"type": "Ready", "status": "True", "lastTransitionTime": "2026-11-28T11:03:00Z"}]}}
    inputs = VerificationInputs.of([machine], [node])
    j = judge_machine_set(ms, AMI_FIELD, {"id": "ami-good"}, inputs, None, NOW, TIMEOUT)
    assert j.verdict.verdict is Verdict.VERIFIED and j.verdict.node == "n1"


def test_the_planner_never_writes_a_golden_image_that_failed_its_first_boot_here() -> None:
    ms = machineset(MS)
    assert plan(ms).action is Action.PATCH
    record = BootVerdict(Verdict.FAILED, TARGET_422, "m1", None, "t", "no Node").with_failed(TARGET_422)
    ms["metadata"].setdefault("annotations", {})[ANNOTATION_BOOT_IMAGE_VERIFIED] = record.to_annotation()
    d = plan(ms)
    assert (d.action, d.reason) == (Action.SKIP, Reason.TARGET_IMAGE_FAILED_FIRST_BOOT)
    assert TARGET_422 in d.message and d.target == {"id": TARGET_422}
    # Another failed image in the record does not stop this one.
    other = BootVerdict(Verdict.FAILED, "ami-0ther", None, None, None, "").with_failed("ami-0ther")
    ms["metadata"]["annotations"][ANNOTATION_BOOT_IMAGE_VERIFIED] = other.to_annotation()
    assert plan(ms).action is Action.PATCH


def test_plan_carries_the_verdict_recorded_for_the_image_the_machineset_boots() -> None:
    ms = machineset(MS)
    current = ms["spec"]["template"]["spec"]["providerSpec"]["value"]["ami"]["id"]
    assert plan(ms).to_json()["verified"] == {"verdict": "unverified", "image": current, "machine": None,
                                              "node": None, "at": None,
                                              "reason": "no verdict recorded for this boot image"}
    record = BootVerdict(Verdict.VERIFIED, current, "m1", "n1", "2026-11-28T11:03:00Z", "joined")
    ms["metadata"].setdefault("annotations", {})[ANNOTATION_BOOT_IMAGE_VERIFIED] = record.to_annotation()
    assert plan(ms).to_json()["verified"] == record.to_json()
    # A verdict about another image says nothing about this one.
    other = BootVerdict(Verdict.VERIFIED, "ami-0ther", "m1", "n1", "t", "joined")
    ms["metadata"]["annotations"][ANNOTATION_BOOT_IMAGE_VERIFIED] = other.to_annotation()
    assert plan(ms).to_json()["verified"]["verdict"] == "unverified"


def test_the_trimmed_caches_keep_everything_a_verdict_reads() -> None:
    from bootimage_controller.core.machine_cache import plain, trim_machine, trim_node
    from bootimage_controller.core.verification import machine_facts, node_facts

    machine = _machine_object("m1", {"a": "1"}, owner_uid="uid-ms")
    machine["metadata"].update(creationTimestamp="2026-11-28T11:00:00Z", resourceVersion="7",
                               managedFields=[{"manager": "x" * 500}], annotations={"big": "y" * 5000})
    machine["spec"]["providerSpec"]["value"].update(
        kind="GCPMachineProviderSpec", disks=[{"boot": True, "image": "projects/p/global/images/i", "sizeGb": 128}],
        userDataSecret={"name": "worker-user-data"}, tags=["t"] * 50)
    machine["status"] = {"phase": "Failed", "errorReason": "InvalidConfiguration", "errorMessage": "image not found",
                         "nodeRef": {"kind": "Node", "name": "n1", "uid": "u"},
                         "providerStatus": {"instanceId": "i-1", "conditions": [{"type": "x"}] * 20},
                         "addresses": [{"type": "InternalIP", "address": "10.0.0.1"}] * 5}
    for path in (("spec", "providerSpec", "value", "ami"), ("spec", "providerSpec", "value", "disks", 0, "image")):
        # The creation time is kept until a Node joins: only the first-boot deadline reads it.
        assert machine_facts(trim_machine(machine), path) == replace(machine_facts(machine, path), created=None)
        booting = {**machine, "status": {"phase": "Provisioned", "providerStatus": {"instanceId": "i-1"}}}
        assert machine_facts(trim_machine(booting), path) == machine_facts(booting, path)
        assert machine_facts(trim_machine(booting), path).created is not None
    trimmed = trim_machine(machine)
    assert len(json.dumps(plain(trimmed))) < len(json.dumps(machine)) / 5
    assert trimmed["metadata"]["resourceVersion"] == "7"  # the informer still tells versions apart
    assert machines_of({"metadata": {"namespace": "openshift-machine-api", "name": "x", "uid": "uid-ms"}},
                       [trimmed]) == [trimmed]
    node = {"metadata": {"name": "n1", "resourceVersion": "3", "labels": {"a": "b"}},
            "status": {"conditions": [{"type": "MemoryPressure", "status": "False"},
                                      {"type": "Ready", "status": "True", "lastTransitionTime": "t",
                                       "message": "kubelet is posting ready status"}],
                       "images": [{"names": ["x" * 200]}] * 50}}
    assert node_facts(trim_node(node)) == node_facts(node) == NodeFacts("n1", True, "t")


@pytest.mark.parametrize("fixture", ["azure-x86_64-marketplace-noplan-4.20.yaml", "gcp-x86_64-us-central1-a-4.16.yaml"])
def test_plan_names_the_unverified_image_as_verdicts_name_it(fixture: str) -> None:
    d = plan(machineset(fixture))
    assert d.current is not None
    # The same name a recorded verdict would carry for it, so the two can be compared.
    assert d.to_json()["verified"]["image"] == image_label(d.current) is not None
