"""CAPI objects for tests: MachineSets, MachineDeployments and infrastructure templates."""

from __future__ import annotations

from typing import Any

from bootimage_controller.constants import CAPI_NAMESPACE

CLUSTER = "mycluster-7xk2p"


def template(kind: str, name: str, spec: dict[str, Any], *, owners: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    version = "v1beta2" if kind == "AWSMachineTemplate" else "v1beta1"
    meta: dict[str, Any] = {"name": name, "namespace": CAPI_NAMESPACE, "labels": {"cluster.x-k8s.io/cluster-name": CLUSTER}}
    if owners:
        meta["ownerReferences"] = owners
    return {"apiVersion": f"infrastructure.cluster.x-k8s.io/{version}", "kind": kind, "metadata": meta,
            "spec": {"template": {"spec": spec}}}


def capi_object(kind: str, name: str, template_kind: str, template_name: str, *, replicas: int = 1,
                failure_domain: str | None = None, owners: list[dict[str, Any]] | None = None,
                labels: dict[str, str] | None = None) -> dict[str, Any]:
    version = "v1beta2" if template_kind == "AWSMachineTemplate" else "v1beta1"
    meta: dict[str, Any] = {"name": name, "namespace": CAPI_NAMESPACE,
                            "labels": {"cluster.x-k8s.io/cluster-name": CLUSTER, **(labels or {})}}
    if owners:
        meta["ownerReferences"] = owners
    spec: dict[str, Any] = {
        "clusterName": CLUSTER,
        "replicas": replicas,
        "selector": {"matchLabels": {"pool": name}},
        "template": {
            "metadata": {"labels": {"pool": name}},
            "spec": {
                "clusterName": CLUSTER,
                "bootstrap": {"dataSecretName": "worker-user-data"},
                "infrastructureRef": {"apiVersion": f"infrastructure.cluster.x-k8s.io/{version}", "kind": template_kind,
                                      "name": template_name},
            },
        },
    }
    if failure_domain:
        spec["template"]["spec"]["failureDomain"] = failure_domain
    return {"apiVersion": "cluster.x-k8s.io/v1beta1", "kind": kind, "metadata": meta, "spec": spec}


def cluster_owner(uid: str = "0000-cluster") -> dict[str, Any]:
    return {"apiVersion": "cluster.x-k8s.io/v1beta1", "kind": "Cluster", "name": CLUSTER, "uid": uid}


def managers(*resources: str, mode: str = "All") -> dict[str, Any]:
    """MachineConfiguration spec enrolling these cluster.x-k8s.io resources (Machine API: All)."""
    entries = [{"resource": "machinesets", "apiGroup": "machine.openshift.io", "selection": {"mode": "All"}}]
    entries += [{"resource": r, "apiGroup": "cluster.x-k8s.io", "selection": {"mode": mode}} for r in resources]
    return {"managedBootImages": {"machineManagers": entries}}
