"""The shipped manifests on a real API server, and the daemon running with exactly the shipped RBAC.

- Every document of manifests/ is accepted by the server: RBAC objects and ServiceAccounts are
  applied for real (server-side apply), workloads and the rest with `dryRun=All`. Server-side apply
  checks every field name against the server's schema, so a misspelt field fails here.
- The daemon authenticates as system:serviceaccount:openshift-machine-config-operator:
  bootimage-controller with only the shipped Roles and bindings, and does its whole job: a `--once`
  pass converges (patch, claim, stub Ignition upgrade, events, MachineConfiguration status,
  ClusterOperator) without a single 403; a leader-elected run takes and releases the Lease;
  `release-claims` and `plan --from-cluster` work from the same identity.
- Requests outside the rules get 403, and the aleph reporter may annotate a Node and nothing else.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import signal
import sys
import time
import urllib.error
import urllib.request
from collections.abc import AsyncIterator, Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
import yaml
from deploy.manifests import (
    RBAC_KINDS,
    REPO,
    Manifest,
    all_manifests,
    capi_component,
    default_set,
    full_set,
    grants_for,
)
from harness.cluster import ALEPH_REPORTER_USER, BOOTIMAGE_CONTROLLER_USER, TestCluster
from harness.objects import (
    MERGE_PATCH,
    api_client_for,
    apply,
    bootimages_configmap,
    control_plane_node,
    get_object,
    kube_request,
)
from kubernetes_asyncio.client.rest import ApiException

from bootimage_controller import observability as obs
from bootimage_controller.commands.aleph_report import RetryPolicy, run_aleph_report
from bootimage_controller.constants import (
    ANNOTATION_ALEPH_VERSION,
    ANNOTATION_STUB_UPGRADED_TO,
    BOOTIMAGES_CONFIGMAP,
    CLAIM_FINALIZER,
    CLAIM_HOLDER_NAME,
    CONDITION_DEGRADED,
    CONDITION_PROGRESSING,
    DEFAULT_CLUSTER_OPERATOR,
    EVENT_UPDATED,
    LEASE_NAME,
    MAPI_NAMESPACE,
    MCO_NAMESPACE,
)

from .daemon_helpers import list_machinesets, run_args, start_daemon_process, wait_for
from .test_daemon import AWS_422_US_EAST_1, FLEET, boot_value, setup_cluster

pytestmark = pytest.mark.integration

FIELD_MANAGER = "bootimage-controller-tests"
APPLY_PATCH = "application/apply-patch+yaml"
TEST_CRDS = Path(__file__).resolve().parents[1] / "deploy" / "crds"
ALEPH_FIXTURE = (
    Path(__file__).resolve().parents[1] / "fixtures" / "aleph" / "rhcos-osbuild-9.6.20251212-1.json"
)
MS_PATH = f"/apis/machine.openshift.io/v1beta1/namespaces/{MAPI_NAMESPACE}/machinesets"
MAPI_CM = f"/api/v1/namespaces/{MAPI_NAMESPACE}/configmaps"
MAPI_SECRETS = f"/api/v1/namespaces/{MAPI_NAMESPACE}/secrets"
MCO_CM = f"/api/v1/namespaces/{MCO_NAMESPACE}/configmaps"
LEASE_PATH = f"/apis/coordination.k8s.io/v1/namespaces/{MCO_NAMESPACE}/leases/{LEASE_NAME}"
MC_PATH = "/apis/operator.openshift.io/v1/machineconfigurations/cluster"
CO_PATH = f"/apis/config.openshift.io/v1/clusteroperators/{DEFAULT_CLUSTER_OPERATOR}"
# Kinds the 1.20 test server does not serve at the manifests' version: the same object at the
# version it does serve (PodDisruptionBudget's fields used here are identical in v1beta1).
SERVED_INSTEAD = {("policy/v1", "PodDisruptionBudget"): "policy/v1beta1"}


# --- applying manifests ----------------------------------------------------------------------------


async def _rest_path(api: Any, manifest: Mapping[str, Any], api_version: str) -> str | None:
    """The object's URL from discovery (None: the server does not serve that kind)."""
    base = "/api/v1" if api_version == "v1" else f"/apis/{api_version}"
    try:
        discovery = await kube_request(api, "GET", base)
    except ApiException as exc:
        if exc.status == 404:
            return None
        raise
    kind = manifest["kind"]
    found = [r for r in discovery["resources"] if r["kind"] == kind and "/" not in r["name"]]
    if not found:
        return None
    meta = manifest["metadata"]
    scope = f"/namespaces/{meta['namespace']}" if found[0]["namespaced"] else ""
    return f"{base}{scope}/{found[0]['name']}/{meta['name']}"


async def server_side_apply(api: Any, manifest: Mapping[str, Any], *, dry_run: bool) -> dict[str, Any]:
    api_version = str(manifest["apiVersion"])
    path = await _rest_path(api, manifest, api_version)
    if path is None and (api_version, manifest["kind"]) in SERVED_INSTEAD:
        api_version = SERVED_INSTEAD[(api_version, manifest["kind"])]
        manifest = {**manifest, "apiVersion": api_version}
        path = await _rest_path(api, manifest, api_version)
    if path is None:
        pytest.skip(
            f"{api_version} {manifest['kind']} is not served by the test API server "
            f"(Kubernetes 1.20); it needs a newer Kubernetes (see the manifest's comment)"
        )
    query = [("fieldManager", FIELD_MANAGER), ("force", "true")]
    if dry_run:
        query.append(("dryRun", "All"))
    stored: dict[str, Any] = await kube_request(
        api, "PATCH", path, dict(manifest), content_type=APPLY_PATCH, query=query
    )
    return stored


async def delete_manifest(api: Any, manifest: Mapping[str, Any]) -> None:
    path = await _rest_path(api, manifest, str(manifest["apiVersion"]))
    if path is None:
        return
    try:
        await kube_request(api, "DELETE", path)
    except ApiException as exc:
        if exc.status != 404:
            raise


def _is_real(manifest: Manifest) -> bool:
    """RBAC and ServiceAccounts are applied for real; everything else as a dry run."""
    return manifest.kind in RBAC_KINDS or manifest.kind == "ServiceAccount"


@pytest.fixture(scope="module")
def stand_in_crds(kube_cluster: TestCluster) -> Iterator[None]:
    """ServiceMonitor and SecurityContextConstraints CRDs from the test tree (OpenShift has both)."""
    base = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
    crds = [yaml.safe_load(p.read_text()) for p in sorted(TEST_CRDS.glob("*.yaml"))]
    for crd in crds:
        try:
            kube_cluster.request("POST", base, crd)
        except urllib.error.HTTPError as exc:
            if exc.code != 409:
                raise
    deadline = time.monotonic() + 30
    for crd in crds:
        while not any(
            c["type"] == "Established" and c["status"] == "True"
            for c in kube_cluster.request("GET", f"{base}/{crd['metadata']['name']}")
            .get("status", {})
            .get("conditions", [])
        ):
            assert time.monotonic() < deadline, f"{crd['metadata']['name']} not established"
            time.sleep(0.1)
    yield
    for crd in crds:
        kube_cluster.request("DELETE", f"{base}/{crd['metadata']['name']}")


@pytest.mark.parametrize("manifest", all_manifests(), ids=lambda m: m.id)
async def test_every_manifest_is_accepted_by_the_api_server(
    stand_in_crds: None, kube_api: Any, manifest: Manifest
) -> None:
    real = _is_real(manifest)
    if manifest.namespace == "open-cluster-management-observability":
        # Applied on an ACM hub (manifests/optional): that namespace exists there.
        await apply(kube_api, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": manifest.namespace}})
    try:
        stored = await server_side_apply(kube_api, manifest.obj, dry_run=not real)
        assert stored["kind"] == manifest.kind
        assert stored["metadata"]["name"] == manifest.name
        assert stored["metadata"].get("namespace") == manifest.namespace
        if real:
            assert await get_object(kube_api, {**manifest.obj}) is not None
    finally:
        if real:
            await delete_manifest(kube_api, manifest.obj)


# --- the shipped RBAC, for real --------------------------------------------------------------------


def _rbac_manifests(manifests: list[Manifest] | None = None) -> list[Manifest]:
    return [m for m in (full_set() if manifests is None else manifests) if _is_real(m)]


async def _access_review(api: Any, attributes: Mapping[str, Any]) -> bool:
    review = await kube_request(
        api,
        "POST",
        "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews",
        {
            "apiVersion": "authorization.k8s.io/v1",
            "kind": "SelfSubjectAccessReview",
            "spec": {"resourceAttributes": dict(attributes)},
        },
    )
    return bool(review["status"].get("allowed"))


@pytest.fixture
async def shipped_rbac(kube_cluster: TestCluster, kube_api: Any) -> AsyncIterator[None]:
    """The full install's (default set and Cluster API component) ServiceAccounts, Roles and bindings,
    applied; removed afterwards."""
    async with _applied_rbac(kube_cluster, kube_api, full_set()):
        yield


@contextlib.asynccontextmanager
async def _applied_rbac(kube_cluster: TestCluster, kube_api: Any, install: list[Manifest]) -> AsyncIterator[None]:
    manifests = _rbac_manifests(install)
    for m in manifests:
        await server_side_apply(kube_api, m.obj, dry_run=False)
    # The authorizer learns of new bindings through its informers: wait until every binding counts.
    for user, sa in (
        (BOOTIMAGE_CONTROLLER_USER, "bootimage-controller"),
        (ALEPH_REPORTER_USER, "bootimage-aleph-reporter"),
    ):
        async with await api_client_for(kube_cluster.kubeconfig_for(user)) as as_sa:
            for grant in grants_for(install, MCO_NAMESPACE, sa):
                rule = grant.rules[0]
                attributes = {
                    "verb": rule.verbs[0],
                    "group": rule.api_groups[0],
                    "resource": rule.resources[0].split("/")[0],
                    "subresource": rule.resources[0].partition("/")[2],
                    "name": rule.resource_names[0] if rule.resource_names else "",
                    "namespace": grant.namespace or "",
                }

                async def granted(attributes: Mapping[str, Any] = attributes) -> bool:
                    return await _access_review(as_sa, attributes)

                await wait_for(granted, 10, f"{grant.binding.id} to take effect")
    try:
        yield
    finally:
        for m in reversed(manifests):
            await delete_manifest(kube_api, m.obj)


def _forbidden_count() -> float:
    """API requests the daemon made in this process that the server answered with 403."""
    return sum(
        s.value
        for metric in obs.REGISTRY.collect()
        for s in metric.samples
        if s.name == "bootimage_controller_api_requests_total" and s.labels.get("code") == "403"
    )


async def _conditions(api: Any, path: str) -> dict[str, dict[str, Any]]:
    obj = await kube_request(api, "GET", path)
    return {c["type"]: c for c in (obj.get("status") or {}).get("conditions") or []}


async def test_once_pass_under_shipped_rbac_does_the_whole_job_without_a_403(
    kube_cluster: TestCluster, kube_api: Any, shipped_rbac: None
) -> None:
    from bootimage_controller.commands import release_claims as commands
    from bootimage_controller.daemon import run as daemon

    await setup_cluster(kube_api, bootimages_configmap("coreos-bootimages-4.22-multistream.yaml"))
    as_controller = kube_cluster.kubeconfig_for(BOOTIMAGE_CONTROLLER_USER)
    forbidden = _forbidden_count()

    assert await daemon.run_async(run_args(as_controller, "--once", "--no-leader-elect")) == 0
    assert _forbidden_count() == forbidden, "the daemon made a request the shipped RBAC refused"

    fleet = await list_machinesets(kube_api)
    assert boot_value(fleet["aws-1a"], ("ami",)) == {"id": AWS_422_US_EAST_1}
    patched = [n for n, (_f, _field, expected) in FLEET.items() if expected not in (None, "any")]
    for name in patched:
        refs = fleet[name]["metadata"].get("ownerReferences") or []
        assert [r["name"] for r in refs if r["kind"] == "ConfigMap"] == [CLAIM_HOLDER_NAME], name
    holder = await kube_request(kube_api, "GET", f"{MAPI_CM}/{CLAIM_HOLDER_NAME}")
    assert CLAIM_FINALIZER in holder["metadata"]["finalizers"]
    # The stub Ignition upgrade read and patched the user-data Secret by name.
    secret = await kube_request(kube_api, "GET", f"{MAPI_SECRETS}/worker-user-data")
    assert ANNOTATION_STUB_UPGRADED_TO in secret["metadata"]["annotations"]
    # Status: MachineConfiguration conditions, and the ClusterOperator it created.
    mc = await _conditions(kube_api, MC_PATH)
    assert mc[CONDITION_PROGRESSING]["status"] == "False" and mc[CONDITION_DEGRADED]["status"] == "False"
    co = await _conditions(kube_api, CO_PATH)
    assert {"Available", "Progressing", "Degraded", "Upgradeable"} <= set(co)
    # Events on the MachineSets it patched.
    events = (await kube_request(kube_api, "GET", f"/api/v1/namespaces/{MAPI_NAMESPACE}/events"))["items"]
    updated = {e["involvedObject"]["name"] for e in events if e["reason"] == EVENT_UPDATED}
    assert set(patched) <= updated

    # Uninstall step: release-claims as the same identity removes every claim, then the finalizer.
    assert await commands.run_release_claims(run_args(as_controller)) == 0
    assert _forbidden_count() == forbidden
    for name, obj in (await list_machinesets(kube_api)).items():
        assert not [r for r in obj["metadata"].get("ownerReferences") or [] if r["kind"] == "ConfigMap"], name
    holder = await kube_request(kube_api, "GET", f"{MAPI_CM}/{CLAIM_HOLDER_NAME}")
    assert CLAIM_FINALIZER not in (holder["metadata"].get("finalizers") or [])


def _metrics_port(log_path: Path) -> int | None:
    for line in log_path.read_text(errors="replace").splitlines():
        if '"serving health and metrics"' in line:
            return int(json.loads(line)["metrics_port"])
    return None


def _scrape_forbidden(port: int) -> float:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as resp:
        text = resp.read().decode()
    pattern = re.compile(r'^bootimage_controller_api_requests_total\{[^}]*code="403"[^}]*\} (\S+)$', re.M)
    return sum(float(v) for v in pattern.findall(text))


async def test_leader_elected_run_under_shipped_rbac_takes_and_releases_the_lease(
    kube_cluster: TestCluster, kube_api: Any, shipped_rbac: None, tmp_path: Path
) -> None:
    await setup_cluster(kube_api, bootimages_configmap("coreos-bootimages-4.22-multistream.yaml"))
    identity = "bootimage-controller-5d8f7-x2x9k"
    log_path = tmp_path / "daemon.log"
    proc = start_daemon_process(kube_cluster.kubeconfig_for(BOOTIMAGE_CONTROLLER_USER), identity, log_path)
    try:

        async def leads() -> bool:
            try:
                lease = await kube_request(kube_api, "GET", LEASE_PATH)
            except ApiException:
                return False
            return bool(lease["spec"].get("holderIdentity") == identity)

        await wait_for(leads, 30, "the daemon to take the Lease")

        async def patched() -> bool:
            fleet = await list_machinesets(kube_api)
            return bool(boot_value(fleet["aws-1a"], ("ami",)) == {"id": AWS_422_US_EAST_1})

        await wait_for(patched, 60, "the leader's patch")
        port = _metrics_port(log_path)
        assert port, log_path.read_text()
        assert _scrape_forbidden(port) == 0, log_path.read_text()
        # SIGTERM: the leader releases the Lease (an update by name) and exits 0.
        proc.send_signal(signal.SIGTERM)
        assert await asyncio.to_thread(proc.wait, 20) == 0, log_path.read_text()
        lease = await kube_request(kube_api, "GET", LEASE_PATH)
        assert lease["spec"].get("holderIdentity") in (None, "")
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)


async def test_plan_from_cluster_runs_as_the_controller_service_account(
    kube_cluster: TestCluster, kube_api: Any, shipped_rbac: None
) -> None:
    """The troubleshooting command of docs/install.md works from inside the pod's identity."""
    await setup_cluster(kube_api, bootimages_configmap("coreos-bootimages-4.22-multistream.yaml"))
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "bootimage_controller",
        "plan",
        "--from-cluster",
        "--kubeconfig",
        str(kube_cluster.kubeconfig_for(BOOTIMAGE_CONTROLLER_USER)),
        "-o",
        "json",
        cwd=REPO,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode == 0, err.decode()
    plan = json.loads(out)
    assert {ms["name"] for ms in plan["machineSets"]} == set(FLEET)
    # No refusal in what it says; timestamps aside (`21:58:56.403512Z` once made this flaky).
    said = [{k: v for k, v in json.loads(line).items() if k != "timestamp"}
            for line in err.decode().splitlines() if line.startswith("{")]
    assert not [line for line in said if "403" in json.dumps(line)], said
    assert b"403" not in b"\n".join(line for line in err.splitlines() if not line.startswith(b"{")), err.decode()


async def _status_of(
    api: Any, method: str, path: str, body: Any = None, query: tuple[tuple[str, str], ...] = ()
) -> int:
    try:
        await kube_request(
            api,
            method,
            path,
            body,
            content_type=MERGE_PATCH if method == "PATCH" else "application/json",
            query=query,
        )
    except ApiException as exc:
        return int(exc.status)
    return 200


async def test_requests_outside_the_rules_are_refused(
    kube_cluster: TestCluster, kube_api: Any, shipped_rbac: None
) -> None:
    await setup_cluster(kube_api, bootimages_configmap("coreos-bootimages-4.22-multistream.yaml"))
    await apply(kube_api, control_plane_node("master-0"))
    other_secret = {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": "other-secret", "namespace": MAPI_NAMESPACE},
        "stringData": {"token": "do-not-read"},
    }
    await apply(kube_api, other_secret)
    await apply(
        kube_api,
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "kube-rbac-proxy", "namespace": MAPI_NAMESPACE},
            "data": {},
        },
    )
    live_ms = (await list_machinesets(kube_api))["aws-1a"]
    annotate = {"metadata": {"annotations": {"example.com/x": "y"}}}
    by_name = (("fieldSelector", f"metadata.name={BOOTIMAGES_CONFIGMAP}"),)
    # (what, method, path, body, query, expected HTTP status). 200/404 rows are controls: the
    # identity is authorised there, so a 403 elsewhere is RBAC and not a broken token.
    cases: list[tuple[str, str, str, Any, tuple[tuple[str, str], ...], int]] = [
        ("list MachineSets", "GET", MS_PATH, None, (), 200),
        ("patch a MachineSet", "PATCH", f"{MS_PATH}/aws-1a", annotate, (), 200),
        ("delete a MachineSet", "DELETE", f"{MS_PATH}/aws-1a", None, (), 403),
        ("replace a MachineSet", "PUT", f"{MS_PATH}/aws-1a", live_ms, (), 403),
        (
            "create a MachineSet",
            "POST",
            MS_PATH,
            {**live_ms, "metadata": {"name": "new", "namespace": MAPI_NAMESPACE}},
            (),
            403,
        ),
        ("scale a MachineSet", "PATCH", f"{MS_PATH}/aws-1a/scale", {"spec": {"replicas": 9}}, (), 403),
        ("MachineSets elsewhere", "GET", MS_PATH.replace(MAPI_NAMESPACE, "default"), None, (), 403),
        ("get worker-user-data", "GET", f"{MAPI_SECRETS}/worker-user-data", None, (), 200),
        ("get absent aws-cloud-credentials", "GET", f"{MAPI_SECRETS}/aws-cloud-credentials", None, (), 404),
        ("get a Secret not named", "GET", f"{MAPI_SECRETS}/other-secret", None, (), 403),
        ("list Secrets", "GET", MAPI_SECRETS, None, (), 403),
        (
            "list Secrets by name",
            "GET",
            MAPI_SECRETS,
            None,
            (("fieldSelector", "metadata.name=worker-user-data"),),
            403,
        ),
        ("patch cloud credentials", "PATCH", f"{MAPI_SECRETS}/aws-cloud-credentials", annotate, (), 403),
        ("list the golden ConfigMap by name", "GET", MCO_CM, None, by_name, 200),
        ("list ConfigMaps", "GET", MCO_CM, None, (), 403),
        ("patch the golden ConfigMap", "PATCH", f"{MCO_CM}/{BOOTIMAGES_CONFIGMAP}", annotate, (), 403),
        ("get another ConfigMap", "GET", f"{MAPI_CM}/kube-rbac-proxy", None, (), 403),
        ("delete the claim holder", "DELETE", f"{MAPI_CM}/{CLAIM_HOLDER_NAME}", None, (), 403),
        ("patch a Node", "PATCH", "/api/v1/nodes/master-0", annotate, (), 403),
        ("patch MachineConfiguration spec", "PATCH", MC_PATH, {"spec": {"logLevel": "Debug"}}, (), 403),
        (
            "patch another ClusterOperator",
            "PATCH",
            "/apis/config.openshift.io/v1/clusteroperators/machine-config/status",
            {"status": {}},
            (),
            403,
        ),
        ("delete the Lease", "DELETE", LEASE_PATH, None, (), 403),
    ]
    async with await api_client_for(kube_cluster.kubeconfig_for(BOOTIMAGE_CONTROLLER_USER)) as as_controller:
        got = [(what, await _status_of(as_controller, m, p, b, q)) for what, m, p, b, q, _ in cases]
    wrong = [
        f"{what}: {code} (expected {case[-1]})"
        for (what, code), case in zip(got, cases, strict=True)
        if code != case[-1]
    ]
    assert wrong == []
    # And nothing was changed by the refused writes.
    assert (await list_machinesets(kube_api))["aws-1a"]["spec"] == live_ms["spec"]


async def test_aleph_reporter_annotates_a_node_but_cannot_touch_anything_else(
    kube_cluster: TestCluster, kube_api: Any, shipped_rbac: None
) -> None:
    await setup_cluster(kube_api, bootimages_configmap("coreos-bootimages-4.22-multistream.yaml"))
    await apply(kube_api, control_plane_node("master-0"))
    async with await api_client_for(kube_cluster.kubeconfig_for(ALEPH_REPORTER_USER)) as as_aleph:
        quick = RetryPolicy(attempts=2, base_delay=0.05, max_delay=0.1)
        assert (
            await run_aleph_report(
                "master-0", ALEPH_FIXTURE, as_aleph, once=True, retry=quick, handle_signals=False
            )
            == 0
        )
        refused = {
            "patch a MachineSet": await _status_of(
                as_aleph, "PATCH", f"{MS_PATH}/aws-1a", {"metadata": {"labels": {"x": "y"}}}
            ),
            "get a user-data Secret": await _status_of(as_aleph, "GET", f"{MAPI_SECRETS}/worker-user-data"),
            "list Nodes": await _status_of(as_aleph, "GET", "/api/v1/nodes"),
            "patch Node status": await _status_of(
                as_aleph, "PATCH", "/api/v1/nodes/master-0/status", {"status": {}}
            ),
            "delete a Node": await _status_of(as_aleph, "DELETE", "/api/v1/nodes/master-0"),
        }
    assert refused == dict.fromkeys(refused, 403)
    node = await get_object(kube_api, control_plane_node("master-0"))
    assert node is not None
    assert node["metadata"]["annotations"][ANNOTATION_ALEPH_VERSION] == "9.6.20251212-1"


# --- a default cluster: no openshift-cluster-api, no Cluster API rights (issue 25) ------------------


async def test_the_default_install_applies_on_a_cluster_without_the_cluster_api_namespace(
    fresh_cluster: Any,
) -> None:
    """`oc apply -k manifests/` on a default 4.2x cluster (no ClusterAPIMachineManagement, so no
    openshift-cluster-api): every object is accepted; the capi component is what needs the namespace."""
    from harness.cluster import NAMESPACES

    from bootimage_controller.constants import CAPI_NAMESPACE

    cluster = fresh_cluster(with_controller_manager=False, namespaces=[n for n in NAMESPACES if n != CAPI_NAMESPACE])
    async with await api_client_for(cluster.kubeconfig) as api:
        for crd_path in sorted(TEST_CRDS.glob("*.yaml")):  # ServiceMonitor, SCC: OpenShift has them
            await kube_request(api, "POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
                               yaml.safe_load(crd_path.read_text()))

        async def served() -> bool:
            groups = await kube_request(api, "GET", "/apis")
            names = {g["name"] for g in groups["groups"]}
            return {"monitoring.coreos.com", "security.openshift.io"} <= names

        await wait_for(served, 30, "the stand-in CRDs to be served")
        for manifest in default_set():
            stored = await server_side_apply(api, manifest.obj, dry_run=True)
            assert stored["metadata"]["name"] == manifest.name, manifest.id
        with pytest.raises(ApiException) as missing:
            await server_side_apply(api, capi_component()[0].obj, dry_run=True)
        assert missing.value.status == 404 and CAPI_NAMESPACE in str(missing.value.body)


async def test_without_the_cluster_api_rights_the_daemon_says_so_and_does_the_rest(
    kube_cluster: TestCluster, kube_api: Any
) -> None:
    """Cluster API CRDs served but the component left out: the daemon's CAPI informers are refused,
    it says so once on its ClusterOperator, and every Machine API MachineSet is still handled."""
    async with _applied_rbac(kube_cluster, kube_api, default_set()):
        from bootimage_controller.daemon import run as daemon

        await setup_cluster(kube_api, bootimages_configmap("coreos-bootimages-4.22-multistream.yaml"))
        as_controller = kube_cluster.kubeconfig_for(BOOTIMAGE_CONTROLLER_USER)
        assert await daemon.run_async(run_args(as_controller, "--once", "--no-leader-elect")) == 0
        fleet = await list_machinesets(kube_api)
        assert boot_value(fleet["aws-1a"], ("ami",)) == {"id": AWS_422_US_EAST_1}
        co = await _conditions(kube_api, CO_PATH)
        assert co["Available"]["status"] == "True"
        message = co["Available"]["message"]
        assert "no rights to list" in message and "machinedeployments" in message
        assert "manifests/components/capi" in message
