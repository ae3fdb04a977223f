"""Boot verification of Cluster API pools (core/capi/verification.py): a CAPI Machine and its
infrastructure machine judged by the same rules as a Machine API Machine."""

from __future__ import annotations

import copy
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from bootimage_controller.constants import (
    CAPI_MACHINEDEPLOYMENT,
    CAPI_MACHINESET,
    CAPI_NAMESPACE,
    LABEL_CAPI_DEPLOYMENT_NAME,
    LABEL_CAPI_SET_NAME,
)
from bootimage_controller.core.capi.verification import (
    CapiMachineIndex,
    capi_keys_of_machine,
    infra_image_path,
    judge_capi_object,
)
from bootimage_controller.core.machine_cache import trim_capi_machine, trim_infra_machine
from bootimage_controller.core.model import image_label
from bootimage_controller.core.verification import NodeFacts, Verdict

from .objects import capi_object

NOW = datetime(2026, 11, 28, 12, 0, tzinfo=UTC)
TIMEOUT = timedelta(minutes=20)
FIELD = "spec.template.spec.ami"  # a CAPI AWS decision's field (inside the template)
GOLDEN = "ami-06a6b025350ff1e23"
CURRENT = {"template": "AWSMachineTemplate/workers-1a2b3c4d", "image": {"id": GOLDEN}}
READY = {"workers-a": NodeFacts("workers-a", True, "2026-11-28T11:40:00Z")}


def _pool(kind: str = "MachineSet", name: str = "workers", uid: str = "uid-workers") -> dict[str, Any]:
    obj = capi_object(kind, name, "AWSMachineTemplate", "workers-1a2b3c4d")
    obj["metadata"]["uid"] = uid
    return obj


def _machine(name: str, *, owner_uid: str | None = "uid-workers", set_name: str = "workers",
             deployment: str | None = None, status: dict[str, Any] | None = None,
             created: str = "2026-11-28T11:00:00Z", provider_id: bool = True) -> dict[str, Any]:
    labels = {LABEL_CAPI_SET_NAME: set_name, "cluster.x-k8s.io/cluster-name": "mycluster-7xk2p"}
    if deployment:
        labels[LABEL_CAPI_DEPLOYMENT_NAME] = deployment
    meta: dict[str, Any] = {"name": name, "namespace": CAPI_NAMESPACE, "resourceVersion": "7", "labels": labels,
                            "creationTimestamp": created, "uid": f"uid-{name}"}
    if owner_uid:
        meta["ownerReferences"] = [{"apiVersion": "cluster.x-k8s.io/v1beta1", "kind": "MachineSet",
                                    "name": set_name, "uid": owner_uid, "controller": True}]
    spec: dict[str, Any] = {"clusterName": "mycluster-7xk2p", "bootstrap": {"dataSecretName": "worker-user-data"},
                            "infrastructureRef": {"apiVersion": "infrastructure.cluster.x-k8s.io/v1beta2",
                                                  "kind": "AWSMachine", "name": name}}
    if provider_id:
        spec["providerID"] = f"aws:///us-east-1a/i-{name}"
    return {"apiVersion": "cluster.x-k8s.io/v1beta1", "kind": "Machine", "metadata": meta, "spec": spec,
            "status": status or {}}


def _infra(name: str, image: str = GOLDEN, status: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"apiVersion": "infrastructure.cluster.x-k8s.io/v1beta2", "kind": "AWSMachine",
            "metadata": {"name": name, "namespace": CAPI_NAMESPACE, "resourceVersion": "3",
                         "annotations": {"cluster.x-k8s.io/cloned-from-name": "workers-1a2b3c4d"}},
            "spec": {"ami": {"id": image}, "instanceType": "m6i.xlarge", "instanceID": f"i-{name}"},
            "status": status or {}}


def _judge(machines: list[dict[str, Any]], infra: list[dict[str, Any]], obj: dict[str, Any] | None = None,
           nodes: dict[str, NodeFacts] | None = None) -> Any:
    index = CapiMachineIndex.build(machines, infra)
    return judge_capi_object(obj or _pool(), FIELD, CURRENT, index, READY if nodes is None else nodes, None, NOW, TIMEOUT)


def test_the_image_is_read_where_the_decision_says_inside_the_infrastructure_machine() -> None:
    assert infra_image_path(FIELD) == ("spec", "ami")
    assert infra_image_path("spec.ami") is None  # not inside a template
    assert infra_image_path("spec.template.spec.image.marketplace") == ("spec", "image", "marketplace")
    assert image_label(CURRENT) == GOLDEN  # a CAPI decision's current names the template's image


def test_a_machine_whose_node_joined_verifies_the_image_its_infrastructure_machine_booted() -> None:
    running = _machine("workers-a", status={"phase": "Running", "nodeRef": {"kind": "Node", "name": "workers-a"}})
    j = _judge([running], [_infra("workers-a")])
    assert (j.verdict.verdict, j.verdict.image, j.verdict.machine, j.verdict.node) == (
        Verdict.VERIFIED, GOLDEN, "workers-a", "workers-a")


def test_an_instance_that_never_joins_fails_the_image_once_the_first_boot_timeout_has_passed() -> None:
    provisioned = _machine("workers-a", status={"phase": "Provisioned"})
    j = _judge([provisioned], [_infra("workers-a")])
    assert j.verdict.verdict is Verdict.FAILED and j.verdict.machine == "workers-a"
    assert "no Node joined within 20m" in j.verdict.reason
    young = _machine("workers-a", status={"phase": "Provisioned"}, created="2026-11-28T11:55:00Z")
    j = _judge([young], [_infra("workers-a")])
    assert j.verdict.verdict is Verdict.UNVERIFIED and j.recheck_at == datetime(2026, 11, 28, 12, 15, tzinfo=UTC)


@pytest.mark.parametrize("where", ["machine", "infra", "machine-v1beta2"])
def test_the_cloud_refusing_the_image_fails_it_wherever_the_failure_is_reported(where: str) -> None:
    failure = {"failureReason": "InvalidConfiguration",
               "failureMessage": f"failed to create AWSMachine instance: InvalidAMIID.NotFound: The image id '[{GOLDEN}]' "
                                 "does not exist"}
    machine_status: dict[str, Any] = {"phase": "Failed"}
    infra_status: dict[str, Any] = {}
    if where == "machine":
        machine_status.update(failure)
    elif where == "infra":
        infra_status = failure
    else:
        machine_status["deprecated"] = {"v1beta1": failure}
    j = _judge([_machine("workers-a", status=machine_status, provider_id=False)], [_infra("workers-a", status=infra_status)])
    assert j.verdict.verdict is Verdict.FAILED and "InvalidAMIID.NotFound" in j.verdict.reason


def test_a_capacity_failure_is_not_the_images() -> None:
    failure = {"phase": "Failed", "failureReason": "CreateError",
               "failureMessage": "InsufficientInstanceCapacity: We currently do not have sufficient m6i.xlarge capacity"}
    j = _judge([_machine("workers-a", status=failure, provider_id=False)], [_infra("workers-a")])
    assert j.verdict.verdict is Verdict.UNVERIFIED and "not for its image" in j.verdict.reason


def test_machines_count_for_their_own_pool_and_image_only() -> None:
    joined = {"phase": "Running", "nodeRef": {"name": "workers-a"}}
    other_pool = _machine("workers-a", owner_uid="uid-other", set_name="other", status=joined)
    assert _judge([other_pool], [_infra("workers-a")]).verdict.verdict is Verdict.UNVERIFIED
    older_image = _machine("workers-a", status=joined)
    j = _judge([older_image], [_infra("workers-a", image="ami-05483066c3caaccf5")])
    assert j.verdict.verdict is Verdict.UNVERIFIED
    # Without its infrastructure machine a Machine's image is unknown: it proves nothing.
    assert _judge([_machine("workers-a", status=joined)], []).verdict.verdict is Verdict.UNVERIFIED
    # An orphan its label names is counted (its MachineSet would adopt it).
    orphan = _machine("workers-a", owner_uid=None, status=joined)
    assert _judge([orphan], [_infra("workers-a")]).verdict.verdict is Verdict.VERIFIED


def test_a_machinedeployment_counts_the_machines_of_its_machinesets() -> None:
    joined = {"phase": "Running", "nodeRef": {"name": "workers-a"}}
    machine = _machine("workers-a", owner_uid="uid-workers-ms", set_name="workers-7f9c", deployment="workers",
                       status=joined)
    j = _judge([machine], [_infra("workers-a")], obj=_pool("MachineDeployment", uid="uid-md"))
    assert j.verdict.verdict is Verdict.VERIFIED
    assert capi_keys_of_machine(machine) == [(CAPI_MACHINESET, "workers-7f9c"), (CAPI_MACHINEDEPLOYMENT, "workers")]


@pytest.mark.parametrize("status", [
    {"phase": "Running", "nodeRef": {"kind": "Node", "name": "workers-a"}},
    {"phase": "Provisioned"},
    {"phase": "Failed", "failureReason": "InvalidConfiguration", "failureMessage": "InvalidAMIID.NotFound"},
])
def test_the_trimmed_caches_keep_everything_a_verdict_reads(status: dict[str, Any]) -> None:
    machine, infra = _machine("workers-a", status=status), _infra("workers-a")
    machine["metadata"]["managedFields"] = [{"manager": "capi", "fieldsV1": {"f:spec": {}}}]
    whole = _judge([copy.deepcopy(machine)], [copy.deepcopy(infra)])
    trimmed = _judge([trim_capi_machine(machine)], [trim_infra_machine(infra)])
    assert trimmed.verdict == whole.verdict
    # The creation time is dropped once a Node joined (the first-boot deadline no longer counts).
    assert trimmed.machines == tuple(replace(m, created=None) if m.node else m for m in whole.machines)
    assert "managedFields" not in trim_capi_machine(machine)["metadata"]
    assert "instanceType" not in trim_infra_machine(infra)["spec"]
