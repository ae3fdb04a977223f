"""Every shipped manifest parses, is listed where it belongs, and refers to what exists."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml

from bootimage_controller.constants import CAPI_NAMESPACE, MAPI_NAMESPACE, MCO_NAMESPACE

from .manifests import (
    MANIFESTS,
    NOT_IN_KUSTOMIZATION,
    Manifest,
    all_manifests,
    containers,
    default_set,
    image_component,
    kustomization,
    kustomize_build,
    manifest_files,
    one,
    pod_spec,
)

CLUSTER_SCOPED = {
    "ClusterRole",
    "ClusterRoleBinding",
    "SecurityContextConstraints",
    "ValidatingAdmissionPolicy",
    "ValidatingAdmissionPolicyBinding",
}


@pytest.mark.parametrize(
    "path", manifest_files(include_crds=True), ids=lambda p: str(p.relative_to(MANIFESTS))
)
def test_every_document_is_a_kubernetes_object(path: Any) -> None:
    docs = [d for d in yaml.safe_load_all(path.read_text()) if d is not None]
    assert docs, f"{path} is empty"
    for doc in docs:
        assert isinstance(doc, dict)
        assert doc.get("apiVersion") and doc.get("kind"), doc
        assert (doc.get("metadata") or {}).get("name"), doc


def test_the_kustomization_lists_every_top_level_file_and_nothing_else() -> None:
    listed = kustomization()["resources"]
    present = sorted(p.name for p in MANIFESTS.glob("*.yaml") if p.name != "kustomization.yaml")
    assert sorted(listed) == present
    assert len(set(listed)) == len(listed)
    # Subfolders are separate on purpose: CRDs exist on OpenShift, uninstall and optional run by hand.
    folders = sorted(p.name for p in MANIFESTS.iterdir() if p.is_dir())
    assert set(folders) <= set(NOT_IN_KUSTOMIZATION), folders
    assert not any(str(r).startswith(NOT_IN_KUSTOMIZATION) for r in listed)


def test_no_namespace_is_shipped_so_uninstalling_cannot_delete_one() -> None:
    """openshift-machine-config-operator belongs to the MCO: `oc delete -k` must not remove it."""
    assert [m.id for m in all_manifests() if m.kind == "Namespace"] == []


ACM_HUB_NAMESPACE = "open-cluster-management-observability"


@pytest.mark.parametrize("manifest", all_manifests(), ids=lambda m: m.id)
def test_objects_live_in_the_openshift_namespaces(manifest: Manifest) -> None:
    if manifest.kind in CLUSTER_SCOPED:
        assert manifest.namespace is None
    elif manifest.namespace == CAPI_NAMESPACE:
        # The Cluster API's objects: only the RBAC to reconcile them there (docs/capi.md).
        assert manifest.kind in ("Role", "RoleBinding"), manifest.id
    elif manifest.namespace == ACM_HUB_NAMESPACE:
        # Applied on an ACM hub, not on the cluster the controller runs in (docs/install.md, "The fleet view").
        assert manifest.path.parts[0] == "optional" and manifest.kind == "ConfigMap", manifest.id
    else:
        assert manifest.namespace in (MCO_NAMESPACE, MAPI_NAMESPACE)


def test_the_workloads_run_the_shipped_service_accounts() -> None:
    manifests = all_manifests()
    accounts = {m.name for m in manifests if m.kind == "ServiceAccount" and m.namespace == MCO_NAMESPACE}
    assert accounts == {"bootimage-controller", "bootimage-aleph-reporter"}
    for workload in (m for m in manifests if m.kind in ("Deployment", "DaemonSet", "Job")):
        assert pod_spec(workload.obj)["serviceAccountName"] in accounts, workload.id
    for binding in (
        m for m in manifests if m.kind.endswith("Binding") and m.kind.startswith(("Role", "Cluster"))
    ):
        for subject in binding.obj["subjects"]:
            if binding.name == "bootimage-controller-metrics-reader":
                # The platform Prometheus, and only it, may read /metrics (daemon/metrics_security.py).
                assert subject == {"kind": "ServiceAccount", "name": "prometheus-k8s", "namespace": "openshift-monitoring"}
                continue
            assert subject["kind"] == "ServiceAccount" and subject["name"] in accounts, binding.id
            assert subject["namespace"] == MCO_NAMESPACE


def test_the_kustomization_sets_the_image_of_every_workload() -> None:
    assert "image" in kustomization()["components"], "the one place the image is set"
    images = {i["name"] for i in image_component()["images"]}
    for workload in (m for m in default_set() if m.kind in ("Deployment", "DaemonSet")):
        for container in containers(workload.obj):
            assert container["image"] in images, workload.id


def _selects(selector: dict[str, str], labels: dict[str, str]) -> bool:
    return bool(selector) and all(labels.get(k) == v for k, v in selector.items())


def test_service_monitor_pdb_and_network_policy_select_the_controller_pods() -> None:
    manifests = default_set()
    deployment = one(manifests, "Deployment", "bootimage-controller").obj
    labels = deployment["spec"]["template"]["metadata"]["labels"]
    assert _selects(deployment["spec"]["selector"]["matchLabels"], labels)
    ports = {p["name"]: p["containerPort"] for c in containers(deployment) for p in c.get("ports", [])}

    service = one(manifests, "Service", "bootimage-controller-metrics").obj
    assert _selects(service["spec"]["selector"], labels)
    assert [p["targetPort"] for p in service["spec"]["ports"]] == ["metrics"]
    assert "metrics" in ports

    monitor = one(manifests, "ServiceMonitor", "bootimage-controller").obj
    assert _selects(monitor["spec"]["selector"]["matchLabels"], service["metadata"]["labels"])
    assert [e["port"] for e in monitor["spec"]["endpoints"]] == [p["name"] for p in service["spec"]["ports"]]
    assert monitor["spec"]["endpoints"][0]["path"] == "/metrics"

    pdb = one(manifests, "PodDisruptionBudget", "bootimage-controller").obj
    assert _selects(pdb["spec"]["selector"]["matchLabels"], labels)
    # With two replicas, a drain may take one at a time and never both.
    assert pdb["spec"].get("maxUnavailable") == 1 or pdb["spec"].get("minAvailable") == 1

    policy = one(manifests, "NetworkPolicy", "bootimage-controller").obj
    assert _selects(policy["spec"]["podSelector"]["matchLabels"], labels)
    ingress_ports = {p["port"] for rule in policy["spec"]["ingress"] for p in rule["ports"]}
    assert ingress_ports == {ports["metrics"], ports["health"]}, "ingress only to metrics and health"
    assert set(policy["spec"]["policyTypes"]) == {"Ingress", "Egress"}


def test_the_aleph_reporter_accepts_no_connections() -> None:
    manifests = default_set()
    daemonset = one(manifests, "DaemonSet", "bootimage-aleph-reporter").obj
    policy = one(manifests, "NetworkPolicy", "bootimage-aleph-reporter").obj
    assert _selects(
        policy["spec"]["podSelector"]["matchLabels"], daemonset["spec"]["template"]["metadata"]["labels"]
    )
    assert "Ingress" in policy["spec"]["policyTypes"] and not policy["spec"].get("ingress")
    assert all(not c.get("ports") for c in containers(daemonset))


def test_the_kustomization_renders_to_the_listed_objects() -> None:
    rendered = kustomize_build(MANIFESTS)
    # The listed resources, and the generated ConfigMap that says where the docs are read.
    expected = [(m.kind, m.name) for m in default_set()] + [("ConfigMap", "bootimage-controller-docs")]
    assert sorted((d["kind"], d["metadata"]["name"]) for d in rendered) == sorted(expected)
    images = {c["image"] for d in rendered if d["kind"] in ("Deployment", "DaemonSet") for c in containers(d)}
    (entry,) = image_component()["images"]
    assert images == {f"{entry['newName']}:{entry['newTag']}"}


# Kinds that have no namespace (everything else rendered here must name one).
CLUSTER_SCOPED = frozenset({
    "ClusterRole", "ClusterRoleBinding", "SecurityContextConstraints", "ValidatingAdmissionPolicy",
    "ValidatingAdmissionPolicyBinding", "CustomResourceDefinition", "Namespace", "PriorityClass",
})


def test_every_kustomization_renders_namespaced_objects_with_their_namespace(tmp_path: Path) -> None:
    """`oc apply -k` puts an object without a namespace in whatever project `oc` is in (issue 33: the
    docs ConfigMap did that). Every kustomization, and the default set with the CAPI component, is
    rendered; every namespaced object names its namespace."""
    from .manifests import MANIFESTS, kustomize_build

    # An overlay as docs/install.md describes it (kustomize takes relative paths only).
    shutil.copytree(MANIFESTS, tmp_path / "manifests")
    overlay = tmp_path / "with-capi"
    overlay.mkdir()
    (overlay / "kustomization.yaml").write_text(
        "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n- ../manifests\n"
        "components:\n- ../manifests/components/capi\n")
    roots = [MANIFESTS, MANIFESTS / "uninstall", MANIFESTS / "crds", overlay]
    missing = []
    rendered = 0
    for root in roots:
        for doc in kustomize_build(root):
            rendered += 1
            if doc.get("kind") not in CLUSTER_SCOPED and not (doc.get("metadata") or {}).get("namespace"):
                missing.append(f"{root.name}: {doc.get('kind')} {(doc.get('metadata') or {}).get('name')}")
    assert rendered > 30, "the kustomizations rendered"
    assert missing == []
