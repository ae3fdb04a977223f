"""The shipped claim guard (manifests/claim-guard-policy.yaml, issue 14 item 1), evaluated as the API
server would: its match rules, then its CEL with a real CEL evaluator (cel-python), on admission
requests shaped like kube-apiserver's. The 1.20 test API server has no ValidatingAdmissionPolicy.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

import celpy
import pytest
from harness.objects import machineset_from_fixture

from bootimage_controller.constants import CAPI_NAMESPACE, CLAIM_FINALIZER, CLAIM_HOLDER_NAME, MAPI_NAMESPACE
from bootimage_controller.core.claims import owner_reference

from .manifests import MANIFESTS, Manifest, default_set, load_file

POLICY_FILE = MANIFESTS / "claim-guard-policy.yaml"
ADMIN = {"username": "system:admin", "groups": ["system:masters", "system:authenticated"]}
KUBEADMIN = {"username": "kube:admin", "groups": ["system:cluster-admins", "system:authenticated"]}
CONTROLLER = {
    "username": "system:serviceaccount:openshift-machine-config-operator:bootimage-controller",
    "groups": ["system:serviceaccounts", "system:serviceaccounts:openshift-machine-config-operator"],
}
GARBAGE_COLLECTOR = {
    "username": "system:serviceaccount:kube-system:generic-garbage-collector",
    "groups": ["system:serviceaccounts", "system:serviceaccounts:kube-system"],
}
FOREGROUND = {"apiVersion": "meta.k8s.io/v1", "kind": "DeleteOptions", "propagationPolicy": "Foreground"}


def documents() -> list[Manifest]:
    return load_file(POLICY_FILE)


def policies() -> dict[str, Mapping[str, Any]]:
    return {m.name: m.obj for m in documents() if m.kind == "ValidatingAdmissionPolicy"}


def holder(*, finalizers: list[str] | None = None, namespace: str = MAPI_NAMESPACE) -> dict[str, Any]:
    return {
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": CLAIM_HOLDER_NAME, "namespace": namespace, "uid": "holder-uid",
                     "finalizers": [CLAIM_FINALIZER] if finalizers is None else finalizers},
        "data": {},
    }


def claimed(kind: str = "MachineSet", *, ours: bool = True, others: bool = False) -> dict[str, Any]:
    ms = machineset_from_fixture("aws-x86_64-us-east-1a-4.16.yaml", "worker-a")
    refs = ([owner_reference("holder-uid")] if ours else []) + (
        [{"apiVersion": "apps/v1", "kind": "Deployment", "name": "someone-else", "uid": "x"}] if others else []
    )
    if refs:
        ms["metadata"]["ownerReferences"] = refs
    if kind == "ControlPlaneMachineSet":
        ms["apiVersion"], ms["kind"], ms["metadata"]["name"] = "machine.openshift.io/v1", kind, "cluster"
    if kind in ("CAPIMachineSet", "MachineDeployment"):
        ms["apiVersion"], ms["kind"] = "cluster.x-k8s.io/v1beta1", kind.removeprefix("CAPI")
        ms["metadata"]["namespace"] = CAPI_NAMESPACE
    return ms


def delete_request(obj: Mapping[str, Any], user: Mapping[str, Any], *, options: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """An AdmissionRequest for a DELETE, as kube-apiserver builds it (object null, oldObject stored)."""
    group, _, version = str(obj["apiVersion"]).rpartition("/")
    plural = {"ConfigMap": "configmaps", "MachineSet": "machinesets", "ControlPlaneMachineSet": "controlplanemachinesets",
              "MachineDeployment": "machinedeployments"}
    meta = obj["metadata"]
    return {
        "uid": "3f6c9f1e-0000-4000-8000-000000000001",
        "kind": {"group": group, "version": version, "kind": obj["kind"]},
        "resource": {"group": group, "version": version, "resource": plural[obj["kind"]]},
        "requestKind": {"group": group, "version": version, "kind": obj["kind"]},
        "requestResource": {"group": group, "version": version, "resource": plural[obj["kind"]]},
        "name": meta["name"],
        "namespace": meta.get("namespace", ""),
        "operation": "DELETE",
        "userInfo": dict(user),
        "options": dict(options or {"apiVersion": "meta.k8s.io/v1", "kind": "DeleteOptions"}),
        "dryRun": False,
    }


def _matches_rules(policy: Mapping[str, Any], request: Mapping[str, Any]) -> bool:
    for rule in policy["spec"]["matchConstraints"]["resourceRules"]:
        if (
            request["resource"]["group"] in rule["apiGroups"]
            and (request["resource"]["version"] in rule["apiVersions"] or "*" in rule["apiVersions"])
            and request["operation"] in rule["operations"]
            and request["resource"]["resource"] in rule["resources"]
            and (not rule.get("resourceNames") or request["name"] in rule["resourceNames"])
        ):
            return True
    return False


def _cel(expression: str, request: Mapping[str, Any], old: Mapping[str, Any]) -> bool:
    env = celpy.Environment()
    program = env.program(env.compile(expression))
    result = program.evaluate({
        "request": celpy.json_to_cel(dict(request)),
        "oldObject": celpy.json_to_cel(copy.deepcopy(dict(old))),
        "object": celpy.json_to_cel(None),  # DELETE: no new object
    })
    assert isinstance(result, celpy.celtypes.BoolType), f"{expression!r} gave {result!r}, not a bool"
    return bool(result)


def admitted(request: Mapping[str, Any], old: Mapping[str, Any]) -> tuple[bool, list[str]]:
    """Whether every shipped policy admits the request, and the messages of those that deny it."""
    denials = []
    for policy in policies().values():
        if not _matches_rules(policy, request):
            continue
        if not all(_cel(c["expression"], request, old) for c in policy["spec"].get("matchConditions", [])):
            continue
        denials += [v["message"] for v in policy["spec"]["validations"] if not _cel(v["expression"], request, old)]
    return not denials, denials


# ---- the holder --------------------------------------------------------------------------------


@pytest.mark.parametrize("user", [ADMIN, KUBEADMIN], ids=["system:admin", "kube:admin"])
@pytest.mark.parametrize("options", [None, FOREGROUND], ids=["background", "foreground"])
def test_an_admin_cannot_delete_the_holder_while_it_guards_claims(user: Mapping[str, Any], options: Any) -> None:
    ok, why = admitted(delete_request(holder(), user, options=options), holder())
    assert not ok and "release-claims" in why[0]


def test_the_controllers_own_serviceaccount_may_delete_the_holder() -> None:
    assert admitted(delete_request(holder(), CONTROLLER), holder()) == (True, [])


def test_once_release_claims_removed_the_finalizer_anyone_may_delete_the_holder() -> None:
    released = holder(finalizers=[])
    assert admitted(delete_request(released, ADMIN, options=FOREGROUND), released)[0]
    no_field = holder()
    del no_field["metadata"]["finalizers"]
    assert admitted(delete_request(no_field, ADMIN), no_field)[0]


def test_other_configmaps_and_namespaces_are_not_matched() -> None:
    other = {**holder(), "metadata": {**holder()["metadata"], "name": "something-else"}}
    assert admitted(delete_request(other, ADMIN), other)[0]
    elsewhere = holder(namespace="default")
    assert admitted(delete_request(elsewhere, ADMIN), elsewhere)[0]


def test_the_cluster_apis_holder_is_guarded_too() -> None:
    capi_holder = holder(namespace=CAPI_NAMESPACE)
    ok, why = admitted(delete_request(capi_holder, ADMIN, options=FOREGROUND), capi_holder)
    assert not ok and "release-claims" in why[0]


# ---- the garbage collector ---------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["MachineSet", "ControlPlaneMachineSet", "CAPIMachineSet", "MachineDeployment"])
def test_the_garbage_collector_cannot_delete_a_claimed_machineset(kind: str) -> None:
    for ms in (claimed(kind), claimed(kind, others=True)):
        ok, why = admitted(delete_request(ms, GARBAGE_COLLECTOR), ms)
        assert not ok and "claimed by bootimage-controller" in why[0]


def test_the_garbage_collector_may_delete_what_we_do_not_claim() -> None:
    for ms in (claimed(ours=False), claimed(ours=False, others=True)):
        assert admitted(delete_request(ms, GARBAGE_COLLECTOR), ms)[0]


def test_an_admin_may_still_delete_a_claimed_machineset() -> None:
    # Deleting one MachineSet on purpose is an admin's call; the guard is against the cascade.
    ms = claimed()
    assert admitted(delete_request(ms, ADMIN), ms)[0]


def test_a_reference_to_another_configmap_of_that_name_kind_is_not_ours() -> None:
    ms = claimed(ours=False)
    ms["metadata"]["ownerReferences"] = [{"apiVersion": "v1", "kind": "Secret", "name": CLAIM_HOLDER_NAME, "uid": "u"}]
    assert admitted(delete_request(ms, GARBAGE_COLLECTOR), ms)[0]


# ---- what is shipped ---------------------------------------------------------------------------


def test_each_policy_is_bound_to_deny_and_matches_exactly_its_resources() -> None:
    docs = documents()
    bindings = {m.obj["spec"]["policyName"]: m.obj for m in docs if m.kind == "ValidatingAdmissionPolicyBinding"}
    assert set(bindings) == set(policies())
    assert all(b["spec"]["validationActions"] == ["Deny"] for b in bindings.values())
    assert all(p["spec"]["failurePolicy"] == "Fail" for p in policies().values())
    rules = {
        name: [(tuple(r["apiGroups"]), tuple(r["operations"]), tuple(r["resources"]), tuple(r.get("resourceNames", ())))
               for r in p["spec"]["matchConstraints"]["resourceRules"]]
        for name, p in policies().items()
    }
    assert rules == {
        "bootimage-controller-claim-holder": [(("",), ("DELETE",), ("configmaps",), (CLAIM_HOLDER_NAME,))],
        "bootimage-controller-claimed-machinesets": [
            (("machine.openshift.io",), ("DELETE",), ("machinesets", "controlplanemachinesets"), ()),
            (("cluster.x-k8s.io",), ("DELETE",), ("machinesets", "machinedeployments"), ()),
        ],
    }


def test_the_guard_is_in_the_default_kustomization() -> None:
    shipped = {(m.kind, m.name) for m in default_set()}
    assert {(m.kind, m.name) for m in documents()} <= shipped
