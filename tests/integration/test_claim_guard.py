"""The shipped claim guard (manifests/claim-guard-policy.yaml) on the real API server (issue 25).

Kubernetes 1.34 serves ValidatingAdmissionPolicy (GA in 1.30, OpenShift 4.17+): the policies are
applied as they ship and DELETEs are sent as the users they name. Denials come from the API server's
own CEL, so a policy that does not compile, does not match, or says the wrong thing fails here.
Users are impersonated by the admin (the `Impersonate-User` header); they get the RBAC to delete,
so what answers is the policy, not RBAC. Deletes are dry runs: admission runs in full, nothing goes.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
import yaml
from harness.objects import apply, kube_request, machineset_from_fixture
from kubernetes_asyncio.client.exceptions import ApiException

from bootimage_controller.constants import CLAIM_FINALIZER, CLAIM_HOLDER_NAME, MAPI_NAMESPACE
from bootimage_controller.core.claims import owner_reference

from .daemon_helpers import REPO, wait_for

pytestmark = pytest.mark.integration

POLICY_FILE = REPO / "manifests" / "claim-guard-policy.yaml"
GARBAGE_COLLECTOR = "system:serviceaccount:kube-system:generic-garbage-collector"
CONTROLLER = "system:serviceaccount:openshift-machine-config-operator:bootimage-controller"
SOMEONE = "jane"
VAP = "/apis/admissionregistration.k8s.io/v1"
HOLDER = f"/api/v1/namespaces/{MAPI_NAMESPACE}/configmaps/{CLAIM_HOLDER_NAME}"
MS = f"/apis/machine.openshift.io/v1beta1/namespaces/{MAPI_NAMESPACE}/machinesets"
FOREGROUND = {"apiVersion": "v1", "kind": "DeleteOptions", "propagationPolicy": "Foreground"}
DELETER = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
           "metadata": {"name": "claim-guard-test-deleter"},
           "rules": [{"apiGroups": ["", "machine.openshift.io"], "resources": ["configmaps", "machinesets"],
                      "verbs": ["delete", "get"]}]}
DELETERS = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
            "metadata": {"name": "claim-guard-test-deleters"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": DELETER["metadata"]["name"]},
            "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": u}
                         for u in (GARBAGE_COLLECTOR, CONTROLLER, SOMEONE)]}


async def delete(api: Any, path: str, user: str | None = None, body: Any = None) -> tuple[int, str]:
    """(HTTP status, message) of a dry-run DELETE, as `user` (None: the admin)."""
    headers = {"Impersonate-User": user} if user else None
    try:
        await kube_request(api, "DELETE", path, body, query=[("dryRun", "All")], headers=headers)
    except ApiException as exc:
        return exc.status, str(exc.body)
    return 200, ""


@pytest.fixture
async def guarded(kube_api: Any) -> AsyncIterator[Any]:
    """The claim guard applied as it ships, the deleters' RBAC, and all of it removed afterwards
    (the next test's reset deletes holders as the admin)."""
    groups = (await kube_request(kube_api, "GET", VAP))["resources"]
    assert any(r["name"] == "validatingadmissionpolicies" for r in groups), "the test API server must serve VAP (1.30+)"
    docs = [d for d in yaml.safe_load_all(POLICY_FILE.read_text()) if d]
    for doc in (DELETER, DELETERS):
        await apply(kube_api, doc)
    for doc in docs:
        plural = "validatingadmissionpolicies" if doc["kind"] == "ValidatingAdmissionPolicy" else "validatingadmissionpolicybindings"
        await kube_request(kube_api, "POST", f"{VAP}/{plural}", doc)
    try:
        yield kube_api
    finally:
        for doc in docs:
            plural = "validatingadmissionpolicies" if doc["kind"] == "ValidatingAdmissionPolicy" else "validatingadmissionpolicybindings"
            await kube_request(kube_api, "DELETE", f"{VAP}/{plural}/{doc['metadata']['name']}")
        for path in ("/apis/rbac.authorization.k8s.io/v1/clusterrolebindings/claim-guard-test-deleters",
                     "/apis/rbac.authorization.k8s.io/v1/clusterroles/claim-guard-test-deleter"):
            await kube_request(kube_api, "DELETE", path)


async def holder(api: Any, *, finalizer: bool = True) -> dict[str, Any]:
    return await apply(api, {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {
        "name": CLAIM_HOLDER_NAME, "namespace": MAPI_NAMESPACE, "finalizers": [CLAIM_FINALIZER] if finalizer else []}})


async def test_the_holder_cannot_be_deleted_while_it_guards_claims_but_by_the_controller(guarded: Any) -> None:
    await holder(guarded)

    async def enforced() -> bool:  # a new policy takes a moment to reach the admission plugin
        return (await delete(guarded, HOLDER))[0] == 403

    await wait_for(enforced, 30, "the claim-holder policy to be enforced")
    for user in (None, SOMEONE):
        for body in (None, FOREGROUND):
            status, message = await delete(guarded, HOLDER, user, body)
            assert status == 403 and "release-claims" in message, (user, body, status, message)
    assert await delete(guarded, HOLDER, CONTROLLER) == (200, "")  # release-claims runs as this ServiceAccount
    await holder(guarded, finalizer=False)  # release-claims removed the finalizer: anyone may delete it
    assert await delete(guarded, HOLDER, SOMEONE) == (200, "")


async def test_the_garbage_collector_cannot_delete_a_claimed_machineset(guarded: Any) -> None:
    owner = await holder(guarded)
    claimed = machineset_from_fixture("aws-x86_64-us-east-1a-4.16.yaml", "claimed",
                                      owner_references=[owner_reference(owner["metadata"]["uid"])])
    free = machineset_from_fixture("aws-x86_64-us-east-1a-4.16.yaml", "free")
    for obj in (claimed, free):
        await apply(guarded, obj)

    async def enforced() -> bool:
        return (await delete(guarded, f"{MS}/claimed", GARBAGE_COLLECTOR))[0] == 403

    await wait_for(enforced, 30, "the claimed-machinesets policy to be enforced")
    status, message = await delete(guarded, f"{MS}/claimed", GARBAGE_COLLECTOR)
    assert status == 403 and "claimed by bootimage-controller" in message, message
    # Only the collector is stopped, and only for claimed MachineSets: people decide for themselves.
    assert await delete(guarded, f"{MS}/free", GARBAGE_COLLECTOR) == (200, "")
    assert await delete(guarded, f"{MS}/claimed", SOMEONE) == (200, "")
    assert await delete(guarded, f"{MS}/claimed") == (200, "")
