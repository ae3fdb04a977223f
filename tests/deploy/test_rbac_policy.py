"""The shipped RBAC: no wildcards, Secrets by name only, and exactly the daemon's requests.

The request tables below are read off the daemon's code (controller.py informers, writer.py,
status.py, reconcile/event_lane.py, stub_ignition.py, cloud/image_checks.py, kube/leader.py, cloud/credentials.py, aleph_report.py) and
use the names from constants.py, so renaming an object there without following in the RBAC fails
here. tests/integration/test_rbac.py proves the same against a real API server by running the
daemon under these rules.
"""

from __future__ import annotations

from typing import Any

import pytest

from bootimage_controller.constants import (
    AWS_CREDENTIALS_SECRET,
    AZURE_CREDENTIALS_SECRET,
    BOOTIMAGES_CONFIGMAP,
    CAPI_GROUP,
    CAPI_KINDS,
    CAPI_NAMESPACE,
    CAPI_VERSIONS,
    CLAIM_HOLDER_NAME,
    CLUSTEROPERATOR_PLURAL,
    CLUSTERVERSION_NAME,
    CLUSTERVERSION_PLURAL,
    CONFIG_GROUP,
    CPMS_NAME,
    CPMS_PLURAL,
    DEFAULT_CLUSTER_OPERATOR,
    GCP_CREDENTIALS_SECRET,
    INFRA_MACHINES,
    INFRA_TEMPLATES,
    INFRASTRUCTURE_GROUP,
    INFRASTRUCTURE_NAME,
    INFRASTRUCTURE_PLURAL,
    LEASE_NAME,
    MACHINE_API_GROUP,
    MACHINECONFIGURATION_NAME,
    MACHINECONFIGURATION_PLURAL,
    MACHINESET_PLURAL,
    MAPI_NAMESPACE,
    MCO_NAMESPACE,
    OPERATOR_GROUP,
    VSPHERE_CREDENTIALS_SECRET,
)
from bootimage_controller.core.cluster import daemon_reads, with_capi_version

from .manifests import (
    Grant,
    Request,
    allowed,
    capi_component,
    default_set,
    full_set,
    grants_for,
    iter_rbac,
    one,
    rbac_violations,
)

CONTROLLER = "bootimage-controller"
ALEPH = "bootimage-aleph-reporter"
MS = (MACHINE_API_GROUP, MACHINESET_PLURAL)
CPMS = (MACHINE_API_GROUP, CPMS_PLURAL)
USER_DATA = ("worker-user-data", "master-user-data")


def _req(verb: str, gr: tuple[str, str], namespace: str | None, name: str | None = None) -> Request:
    return Request(verb, gr[0], gr[1], namespace, name)


CM = ("", "configmaps")
SECRETS = ("", "secrets")
NODES = ("", "nodes")
MC = (OPERATOR_GROUP, MACHINECONFIGURATION_PLURAL)
MC_STATUS = (OPERATOR_GROUP, f"{MACHINECONFIGURATION_PLURAL}/status")
CO = (CONFIG_GROUP, CLUSTEROPERATOR_PLURAL)
CO_STATUS = (CONFIG_GROUP, f"{CLUSTEROPERATOR_PLURAL}/status")
LEASES = ("coordination.k8s.io", "leases")
CRDS = ("apiextensions.k8s.io", "customresourcedefinitions")
# The CRD of every custom kind the daemon reads, on any platform.
READ_CRDS = sorted({f"{r.plural}.{r.group}" for platform in ("AWS", "GCP", "Azure", "VSphere", None)
                    for r in with_capi_version(daemon_reads(platform), CAPI_VERSIONS[-1]) if r.group})

# Every request `run`, `release-claims` and `plan --from-cluster` make as the controller.
CONTROLLER_REQUESTS = [
    # While a kind is not served: one watch of its CRD, by name (kube/informer.py KindWatch).
    *(_req(v, CRDS, None, crd) for crd in READ_CRDS for v in ("list", "watch")),
    # MachineSets: informer, re-read after a conflict, the boot image / claim / release patch.
    *(_req(v, MS, MAPI_NAMESPACE) for v in ("list", "watch")),
    *(_req(v, MS, MAPI_NAMESPACE, "worker-us-east-1a") for v in ("get", "patch")),
    # ControlPlaneMachineSet: informer, live list and writes, all by name.
    *(_req(v, CPMS, MAPI_NAMESPACE, CPMS_NAME) for v in ("list", "watch", "get", "patch")),
    # Boot verification (SPEC section 3b): the Machines' informer (every Node's is below).
    *(_req(v, (MACHINE_API_GROUP, "machines"), MAPI_NAMESPACE) for v in ("list", "watch", "create")),
    # The canary (reconcile/canary.py): deleted by name once judged.
    _req("delete", (MACHINE_API_GROUP, "machines"), MAPI_NAMESPACE, "worker-us-east-1a-canary-0a1b2c"),
    # fresh_machines lists the ControlPlaneMachineSet by name too (metadata.name=cluster).
    # Golden data and claim holder informers (field selector metadata.name=...).
    *(_req(v, CM, MCO_NAMESPACE, BOOTIMAGES_CONFIGMAP) for v in ("list", "watch", "get")),
    *(_req(v, CM, MAPI_NAMESPACE, CLAIM_HOLDER_NAME) for v in ("list", "watch", "get", "patch")),
    _req("create", CM, MAPI_NAMESPACE),
    # Cluster-wide inputs.
    *(_req(v, MC, None, MACHINECONFIGURATION_NAME) for v in ("list", "watch", "get")),
    _req("patch", MC_STATUS, None, MACHINECONFIGURATION_NAME),
    *(
        _req(v, (CONFIG_GROUP, INFRASTRUCTURE_PLURAL), None, INFRASTRUCTURE_NAME)
        for v in ("list", "watch", "get")
    ),
    *(
        _req(v, (CONFIG_GROUP, CLUSTERVERSION_PLURAL), None, CLUSTERVERSION_NAME)
        for v in ("list", "watch", "get")
    ),
    *(_req(v, NODES, None) for v in ("list", "watch")),
    # Who else manages boot images (manager.py): the MCO's ClusterOperator and the FeatureGate.
    *(_req(v, CO, None, "machine-config") for v in ("list", "watch")),
    *(_req(v, (CONFIG_GROUP, "featuregates"), None, "cluster") for v in ("list", "watch")),
    # ClusterOperator.
    _req("create", CO, None),
    _req("get", CO, None, DEFAULT_CLUSTER_OPERATOR),
    _req("patch", CO_STATUS, None, DEFAULT_CLUSTER_OPERATOR),
    # Events on MachineSets.
    *(_req(v, ("", "events"), MAPI_NAMESPACE) for v in ("create", "patch")),
    # Leader election in the daemon's own namespace.
    _req("create", LEASES, MCO_NAMESPACE),
    *(_req(v, LEASES, MCO_NAMESPACE, LEASE_NAME) for v in ("get", "update")),
    # Secrets: cloud credentials (get), user data (get + patch), by name.
    *(
        _req("get", SECRETS, MAPI_NAMESPACE, s)
        for s in (AWS_CREDENTIALS_SECRET, GCP_CREDENTIALS_SECRET, AZURE_CREDENTIALS_SECRET)
    ),
    *(_req(v, SECRETS, MAPI_NAMESPACE, s) for s in USER_DATA for v in ("get", "patch")),
    _req("get", SECRETS, MAPI_NAMESPACE, VSPHERE_CREDENTIALS_SECRET),
    # The cluster-wide proxy (daemon/proxy.py): informer and plan --from-cluster, by name.
    *(_req(v, (CONFIG_GROUP, "proxies"), None, "cluster") for v in ("list", "watch", "get")),
    # Who may scrape /metrics: token and access reviews (daemon/metrics_security.py).
    _req("create", ("authentication.k8s.io", "tokenreviews"), None),
    _req("create", ("authorization.k8s.io", "subjectaccessreviews"), None),
    # Cluster API (docs/capi.md): informers, re-reads, patches; templates created and retired;
    # the Cluster API's own claim holder; Events on its objects.
    *(_req(v, (CAPI_GROUP, p), CAPI_NAMESPACE) for p in CAPI_KINDS.values() for v in ("list", "watch")),
    *(_req(v, (CAPI_GROUP, p), CAPI_NAMESPACE, "workers") for p in CAPI_KINDS.values() for v in ("get", "patch")),
    *(_req(v, (INFRASTRUCTURE_GROUP, plural), CAPI_NAMESPACE) for _, plural in INFRA_TEMPLATES.values()
      for v in ("list", "watch", "create")),
    *(_req(v, (INFRASTRUCTURE_GROUP, plural), CAPI_NAMESPACE, "t0") for _, plural in INFRA_TEMPLATES.values()
      for v in ("get", "delete")),
    # Before an old template goes: the machines cloned from templates (core/capi/retire.py); boot
    # verification's informers over them and over the Cluster API's Machines (never written).
    *(_req(v, (INFRASTRUCTURE_GROUP, plural), CAPI_NAMESPACE) for _, plural in INFRA_MACHINES.values()
      for v in ("list", "watch")),
    *(_req(v, (CAPI_GROUP, "machines"), CAPI_NAMESPACE) for v in ("list", "watch")),
    *(_req(v, CM, CAPI_NAMESPACE, CLAIM_HOLDER_NAME) for v in ("list", "watch", "get", "patch")),
    _req("create", CM, CAPI_NAMESPACE),
    *(_req(v, ("", "events"), CAPI_NAMESPACE) for v in ("create", "patch")),
]

# Requests the controller must never be able to make.
CONTROLLER_DENIED = [
    *(_req(v, MS, MAPI_NAMESPACE, "worker-us-east-1a") for v in ("delete", "update")),
    _req("create", MS, MAPI_NAMESPACE),
    _req("deletecollection", MS, MAPI_NAMESPACE),
    # Cluster API: objects never created, deleted or updated; templates never updated or patched.
    *(_req(v, (CAPI_GROUP, p), CAPI_NAMESPACE, "workers") for p in CAPI_KINDS.values() for v in ("delete", "update")),
    _req("create", (CAPI_GROUP, MACHINESET_PLURAL), CAPI_NAMESPACE),
    *(_req(v, (CAPI_GROUP, "machines"), CAPI_NAMESPACE, "workers-abcde") for v in ("create", "delete", "patch")),
    *(_req(v, (INFRASTRUCTURE_GROUP, "awsmachines"), CAPI_NAMESPACE, "workers-abcde") for v in ("delete", "patch")),
    *(_req(v, (INFRASTRUCTURE_GROUP, "awsmachinetemplates"), CAPI_NAMESPACE, "t0") for v in ("update", "patch")),
    _req("list", SECRETS, CAPI_NAMESPACE),
    _req("get", MS, "default", "worker-us-east-1a"),
    _req("patch", (MACHINE_API_GROUP, f"{MACHINESET_PLURAL}/scale"), MAPI_NAMESPACE, "worker-us-east-1a"),
    _req("patch", CPMS, MAPI_NAMESPACE, "other"),
    _req("list", CPMS, MAPI_NAMESPACE),  # only by name
    _req("delete", CPMS, MAPI_NAMESPACE, CPMS_NAME),
    # Secrets: never enumerated, nothing else by name, cloud credentials never written.
    *(_req(v, SECRETS, MAPI_NAMESPACE) for v in ("list", "watch")),
    *(_req(v, SECRETS, MAPI_NAMESPACE, AWS_CREDENTIALS_SECRET) for v in ("list", "watch", "patch", "update")),
    _req("get", SECRETS, MAPI_NAMESPACE, "some-other-secret"),
    _req("get", SECRETS, MCO_NAMESPACE, "worker-user-data"),
    _req("delete", SECRETS, MAPI_NAMESPACE, "worker-user-data"),
    # ConfigMaps: the golden data is read-only; no other ConfigMap is visible.
    *(_req(v, CM, MCO_NAMESPACE, BOOTIMAGES_CONFIGMAP) for v in ("patch", "update", "delete")),
    _req("list", CM, MCO_NAMESPACE),
    _req("list", CM, MAPI_NAMESPACE),
    _req("get", CM, MAPI_NAMESPACE, "kube-rbac-proxy"),
    _req("delete", CM, MAPI_NAMESPACE, CLAIM_HOLDER_NAME),
    # Cluster objects: status only, never spec.
    _req("patch", MC, None, MACHINECONFIGURATION_NAME),
    _req("patch", (CONFIG_GROUP, INFRASTRUCTURE_PLURAL), None, INFRASTRUCTURE_NAME),
    _req("patch", CO_STATUS, None, "machine-config"),
    _req("delete", CO, None, DEFAULT_CLUSTER_OPERATOR),
    _req("patch", NODES, None, "master-0"),
    _req("get", NODES, None, "master-0"),
    _req("delete", LEASES, MCO_NAMESPACE, LEASE_NAME),
    _req("update", LEASES, MCO_NAMESPACE, "machine-config-controller"),
    _req("create", ("", "pods"), MCO_NAMESPACE),
]

ALEPH_REQUESTS = [_req("get", NODES, None, "master-0"), _req("patch", NODES, None, "master-0")]
ALEPH_DENIED = [
    _req("list", NODES, None),
    _req("patch", ("", "nodes/status"), None, "master-0"),
    _req("delete", NODES, None, "master-0"),
    _req("patch", MS, MAPI_NAMESPACE, "worker-us-east-1a"),
    _req("get", SECRETS, MAPI_NAMESPACE, "worker-user-data"),
    _req("get", CM, MCO_NAMESPACE, BOOTIMAGES_CONFIGMAP),
]


@pytest.fixture(scope="module")
def controller() -> list[Grant]:
    return grants_for(full_set(), MCO_NAMESPACE, CONTROLLER)


@pytest.fixture(scope="module")
def aleph() -> list[Grant]:
    return grants_for(default_set(), MCO_NAMESPACE, ALEPH)


@pytest.mark.parametrize("role", list(iter_rbac(full_set())), ids=lambda m: m.id)
def test_shipped_roles_follow_the_policy(role: Any) -> None:
    assert rbac_violations(role.obj) == []


@pytest.mark.parametrize(
    ("rule", "problem"),
    [
        ({"apiGroups": ["*"], "resources": ["machinesets"], "verbs": ["get"]}, "wildcard in apiGroups"),
        ({"apiGroups": [""], "resources": ["*"], "verbs": ["get"]}, "wildcard in resources"),
        ({"apiGroups": [""], "resources": ["configmaps"], "verbs": ["*"]}, "wildcard in verbs"),
        ({"apiGroups": [""], "resources": ["secrets"], "verbs": ["get"]}, "secrets without resourceNames"),
        (
            {
                "apiGroups": [""],
                "resources": ["secrets"],
                "resourceNames": ["worker-user-data"],
                "verbs": ["get", "list"],
            },
            "['list'] on secrets",
        ),
        (
            {"apiGroups": [""], "resources": ["secrets"], "resourceNames": ["x"], "verbs": ["watch", "get"]},
            "['watch'] on secrets",
        ),
        (
            {"apiGroups": ["rbac.authorization.k8s.io"], "resources": ["clusterroles"], "verbs": ["bind"]},
            "grants ['bind']",
        ),
    ],
)
def test_the_policy_check_catches_each_kind_of_violation(rule: dict[str, Any], problem: str) -> None:
    role = {"kind": "ClusterRole", "metadata": {"name": "bad"}, "rules": [rule]}
    problems = rbac_violations(role)
    assert any(problem in p for p in problems), problems


def test_every_daemon_request_is_granted(controller: list[Grant]) -> None:
    missing = [str(r) for r in CONTROLLER_REQUESTS if not allowed(controller, r)]
    assert missing == []


def test_requests_outside_the_daemon_needs_are_not_granted(controller: list[Grant]) -> None:
    granted = [str(r) for r in CONTROLLER_DENIED if allowed(controller, r)]
    assert granted == []


def test_every_granted_rule_is_used_by_some_daemon_request(controller: list[Grant]) -> None:
    """Least privilege the other way round: no rule is there for nothing."""
    unused = []
    for grant in controller:
        for rule in grant.rules:
            for verb in rule.verbs:
                if not any(
                    r.verb == verb
                    and (grant.namespace is None or grant.namespace == r.namespace)
                    and rule.allows(r.verb, r.group, r.resource, r.name)
                    for r in CONTROLLER_REQUESTS
                ):
                    unused.append(f"{grant.role.id}: {verb} {rule.resources} {rule.resource_names}")
    assert unused == []


def test_the_aleph_reporter_may_read_and_patch_nodes_and_nothing_else(aleph: list[Grant]) -> None:
    assert [str(r) for r in ALEPH_REQUESTS if not allowed(aleph, r)] == []
    assert [str(r) for r in ALEPH_DENIED if allowed(aleph, r)] == []
    rules = [rule for g in aleph for rule in g.rules]
    assert {res for rule in rules for res in rule.resources} == {"nodes", "securitycontextconstraints"}
    # Besides Nodes: only `use` of its own SCC (OpenShift admission, not an API write).
    scc = [r for r in rules if "securitycontextconstraints" in r.resources]
    assert [(r.verbs, r.resource_names) for r in scc] == [(("use",), (ALEPH,))]
    assert one(default_set(), "SecurityContextConstraints", ALEPH)


def test_namespaced_rights_are_granted_by_role_bindings_in_their_namespace(controller: list[Grant]) -> None:
    """Secrets, ConfigMaps, Leases and Events are never granted cluster-wide."""
    for grant in controller:
        if grant.namespace is not None:
            continue
        for rule in grant.rules:
            assert not set(rule.resources) & {"secrets", "configmaps", "leases", "events"}, grant.role.id
    where = {g.namespace for g in controller}
    assert where == {None, MAPI_NAMESPACE, MCO_NAMESPACE, CAPI_NAMESPACE}


def test_the_default_set_installs_on_a_cluster_without_the_cluster_api_namespace() -> None:
    """openshift-cluster-api exists only with the ClusterAPIMachineManagement gate (issue 25): nothing
    in `oc apply -k manifests/` may be in it; the optional component carries the Cluster API's rights."""
    assert [m.id for m in default_set() if m.namespace == CAPI_NAMESPACE] == []
    assert {(m.kind, m.namespace) for m in capi_component()} == {("Role", CAPI_NAMESPACE), ("RoleBinding", CAPI_NAMESPACE)}
