"""Realistic OpenShift objects as plain dicts, and async helpers to put them on a test cluster.

Builders return what `oc get -o json` would show for a typical IPI cluster (server-populated
metadata left out), so a test sets up a scenario in a few lines:

    await apply(kube_api, infrastructure("AWS"))
    await apply(kube_api, cluster_version([("4.22.0", "Completed"), ("4.16.0", "Completed")]))
    await apply(kube_api, bootimages_configmap("coreos-bootimages-4.18.yaml"))
    await apply(kube_api, machineset_from_fixture("aws-x86_64-us-east-1a-4.16.yaml"))

`apply` creates or replaces, then writes `status` through the status subresource when the object
carries one (a plain create or update ignores it there).
"""

from __future__ import annotations

import asyncio
import copy
import hashlib
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import yaml
from kubernetes_asyncio import client as k8s_client
from kubernetes_asyncio import config as k8s_config
from kubernetes_asyncio.client import ApiClient
from kubernetes_asyncio.client.rest import ApiException

from bootimage_controller.constants import (
    ANNOTATION_ALEPH_VERSION,
    BOOTIMAGES_CONFIGMAP,
    CAPI_NAMESPACE,
    CLUSTEROPERATOR_PLURAL,
    CLUSTERVERSION_NAME,
    CLUSTERVERSION_PLURAL,
    CONFIG_GROUP,
    CONFIG_VERSION,
    CONTROL_PLANE_NODE_LABELS,
    CPMS_KIND,
    CPMS_NAME,
    CPMS_PLURAL,
    CPMS_VERSION,
    INFRA_MACHINES,
    INFRA_TEMPLATES,
    INFRASTRUCTURE_NAME,
    INFRASTRUCTURE_PLURAL,
    LABEL_ARCH,
    MACHINE_API_GROUP,
    MACHINECONFIGURATION_KIND,
    MACHINECONFIGURATION_NAME,
    MACHINECONFIGURATION_PLURAL,
    MACHINESET_KIND,
    MACHINESET_PLURAL,
    MACHINESET_VERSION,
    MAPI_NAMESPACE,
    MCO_NAMESPACE,
    OPERATOR_GROUP,
    OPERATOR_VERSION,
)

FIXTURES: Final = Path(__file__).resolve().parents[1] / "fixtures"
MACHINESET_FIXTURES: Final = FIXTURES / "machinesets"
CONFIGMAP_FIXTURES: Final = FIXTURES / "configmaps"
EXAMPLE_CLUSTER: Final = Path(__file__).resolve().parents[2] / "examples" / "aws-4.16-cluster"

INFRA_ID: Final = "mycluster-7xk2p"  # the infrastructure name used by the MachineSet fixtures
CLUSTER_ID: Final = "5d3e8f0c-2c1b-4f7e-9a53-7c1f0e9b2a41"
_LABEL_MACHINESET: Final = "machine.openshift.io/cluster-api-machineset"
_LABEL_CLUSTER: Final = "machine.openshift.io/cluster-api-cluster"
# Fixed timestamps keep objects reproducible; history entries go back a month each.
_EPOCH: Final = 1_735_689_600  # 2025-01-01T00:00:00Z
_MONTH: Final = 30 * 86_400
_SERVER_METADATA: Final = (
    "uid",
    "resourceVersion",
    "creationTimestamp",
    "generation",
    "managedFields",
    "selfLink",
)


# --- the REST shape of the kinds the tests touch -------------------------------------------------------


@dataclass(frozen=True)
class Resource:
    """Where one kind lives in the API."""

    api_version: str
    kind: str
    plural: str
    namespaced: bool
    status_subresource: bool

    def collection_path(self, namespace: str | None = None) -> str:
        prefix = "/api/v1" if self.api_version == "v1" else f"/apis/{self.api_version}"
        if self.namespaced and namespace:
            return f"{prefix}/namespaces/{namespace}/{self.plural}"
        return f"{prefix}/{self.plural}"

    def item_path(self, name: str, namespace: str | None = None) -> str:
        return f"{self.collection_path(namespace)}/{name}"


def _gv(group: str, version: str) -> str:
    return f"{group}/{version}"


RESOURCES: Final[tuple[Resource, ...]] = (
    Resource(_gv(MACHINE_API_GROUP, MACHINESET_VERSION), MACHINESET_KIND, MACHINESET_PLURAL, True, True),
    Resource(_gv(MACHINE_API_GROUP, CPMS_VERSION), CPMS_KIND, CPMS_PLURAL, True, True),
    Resource(_gv(MACHINE_API_GROUP, "v1beta1"), "Machine", "machines", True, True),
    Resource(
        _gv(OPERATOR_GROUP, OPERATOR_VERSION),
        MACHINECONFIGURATION_KIND,
        MACHINECONFIGURATION_PLURAL,
        False,
        True,
    ),
    Resource(_gv(CONFIG_GROUP, CONFIG_VERSION), "ClusterVersion", CLUSTERVERSION_PLURAL, False, True),
    Resource(_gv(CONFIG_GROUP, CONFIG_VERSION), "Infrastructure", INFRASTRUCTURE_PLURAL, False, True),
    Resource(_gv(CONFIG_GROUP, CONFIG_VERSION), "ClusterOperator", CLUSTEROPERATOR_PLURAL, False, True),
    Resource(_gv(CONFIG_GROUP, CONFIG_VERSION), "Proxy", "proxies", False, True),
    Resource(_gv(CONFIG_GROUP, CONFIG_VERSION), "FeatureGate", "featuregates", False, True),
    Resource("v1", "ConfigMap", "configmaps", True, False),
    Resource("v1", "Secret", "secrets", True, False),
    Resource("v1", "Node", "nodes", False, True),
    Resource("v1", "Namespace", "namespaces", False, True),
    Resource("v1", "Event", "events", True, False),
    Resource("v1", "ServiceAccount", "serviceaccounts", True, False),
    Resource("events.k8s.io/v1", "Event", "events", True, False),
    Resource("coordination.k8s.io/v1", "Lease", "leases", True, False),
    Resource("rbac.authorization.k8s.io/v1", "Role", "roles", True, False),
    Resource("rbac.authorization.k8s.io/v1", "RoleBinding", "rolebindings", True, False),
    Resource("rbac.authorization.k8s.io/v1", "ClusterRole", "clusterroles", False, False),
    Resource("rbac.authorization.k8s.io/v1", "ClusterRoleBinding", "clusterrolebindings", False, False),
    Resource("apiextensions.k8s.io/v1", "CustomResourceDefinition", "customresourcedefinitions", False, False),
    # HyperShift (tests/fixtures/crds, applied by the fleet tests only)
    Resource("hypershift.openshift.io/v1beta1", "HostedCluster", "hostedclusters", True, True),
    Resource("hypershift.openshift.io/v1beta1", "NodePool", "nodepools", True, True),
    # Cluster API (manifests/crds): both versions of the core kinds, the providers' templates.
    *(
        Resource(f"cluster.x-k8s.io/{v}", kind, plural, True, True)
        for v in ("v1beta1", "v1beta2")
        for kind, plural in (("MachineSet", "machinesets"), ("MachineDeployment", "machinedeployments"),
                             ("Cluster", "clusters"))
    ),
    *(
        Resource(f"infrastructure.cluster.x-k8s.io/{version}", kind, plural, True, True)
        for kind, (version, plural) in INFRA_TEMPLATES.items()
    ),
    *(  # the machines cloned from those templates (AWSMachine, ...)
        Resource(f"infrastructure.cluster.x-k8s.io/{version}", kind.removesuffix("Template"), plural, True, True)
        for kind, (version, plural) in INFRA_MACHINES.items()
    ),
)
_BY_TYPE: Final = {(r.api_version, r.kind): r for r in RESOURCES}


def resource_for(api_version: str, kind: str) -> Resource:
    try:
        return _BY_TYPE[(api_version, kind)]
    except KeyError:
        raise ValueError(f"harness does not know {api_version} {kind}; add it to RESOURCES") from None


def resource_of(obj: Mapping[str, Any]) -> Resource:
    return resource_for(obj["apiVersion"], obj["kind"])


# --- builders -----------------------------------------------------------------------------------------


def _rfc3339(epoch: int) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(epoch))


def _platform_status(platform: str, region: str | None) -> dict[str, Any]:
    details: dict[str, dict[str, Any]] = {
        "AWS": {"aws": {"region": region or "us-east-1"}},
        "GCP": {"gcp": {"projectID": "openshift-dev-123456", "region": region or "us-central1"}},
        "Azure": {
            "azure": {
                "cloudName": "AzurePublicCloud",
                "resourceGroupName": f"{INFRA_ID}-rg",
                "networkResourceGroupName": f"{INFRA_ID}-rg",
            }
        },
        "VSphere": {"vsphere": {}},
    }
    return {"type": platform, **details.get(platform, {})}


def infrastructure(
    platform: str = "AWS",
    topology: str = "HighlyAvailable",
    *,
    region: str | None = None,
    infrastructure_name: str = INFRA_ID,
) -> dict[str, Any]:
    """Infrastructure `cluster`: `platform` as in status.platformStatus.type (AWS, GCP, Azure,
    VSphere, BareMetal, None, ...), `topology` as status.controlPlaneTopology."""
    return {
        "apiVersion": _gv(CONFIG_GROUP, CONFIG_VERSION),
        "kind": "Infrastructure",
        "metadata": {"name": INFRASTRUCTURE_NAME},
        "spec": {"cloudConfig": {"name": ""}, "platformSpec": {"type": platform}},
        "status": {
            "infrastructureName": infrastructure_name,
            "platform": platform,
            "platformStatus": _platform_status(platform, region),
            "etcdDiscoveryDomain": "",
            "apiServerURL": "https://api.mycluster.example.com:6443",
            "apiServerInternalURI": "https://api-int.mycluster.example.com:6443",
            "controlPlaneTopology": topology,
            "infrastructureTopology": "SingleReplica" if topology == "SingleReplica" else "HighlyAvailable",
            "cpuPartitioning": "None",
        },
    }


def _release_image(version: str) -> str:
    digest = hashlib.sha256(version.encode()).hexdigest()
    return f"quay.io/openshift-release-dev/ocp-release@sha256:{digest}"


def _condition(type_: str, status: str, reason: str = "AsExpected", message: str = "") -> dict[str, str]:
    return {
        "type": type_,
        "status": status,
        "reason": reason,
        "message": message,
        "lastTransitionTime": _rfc3339(_EPOCH),
    }


def cluster_version(
    history: Sequence[tuple[str, str]] = (("4.22.0", "Completed"), ("4.16.0", "Completed")),
    architecture: str | None = None,
) -> dict[str, Any]:
    """ClusterVersion `version`: `history` newest first as (version, state); state is Completed or
    Partial (an install or upgrade in progress). `architecture="Multi"` marks a multi-arch payload."""
    entries = []
    for age, (version, state) in enumerate(history):
        started = _EPOCH - age * _MONTH
        entries.append(
            {
                "state": state,
                "startedTime": _rfc3339(started),
                "completionTime": _rfc3339(started + 3600) if state == "Completed" else None,
                "version": version,
                "image": _release_image(version),
                "verified": age > 0,
                "acceptedRisks": "",
            }
        )
    desired_version = history[0][0] if history else "0.0.0"
    desired: dict[str, Any] = {
        "version": desired_version,
        "image": _release_image(desired_version),
        "url": f"https://access.redhat.com/errata/RHSA-{desired_version}",
        "channels": [f"stable-{'.'.join(desired_version.split('.')[:2])}"],
    }
    if architecture is not None:
        desired["architecture"] = architecture
    progressing = bool(history) and history[0][1] != "Completed"
    return {
        "apiVersion": _gv(CONFIG_GROUP, CONFIG_VERSION),
        "kind": "ClusterVersion",
        "metadata": {"name": CLUSTERVERSION_NAME},
        "spec": {"clusterID": CLUSTER_ID, "channel": desired["channels"][0]},
        "status": {
            "observedGeneration": 1,
            "versionHash": "Tq5sZ4Y0nV8=",
            "desired": desired,
            "history": entries,
            "availableUpdates": None,
            "conditions": [
                _condition("Available", "True", "", f"Done applying {desired_version}"),
                _condition("Failing", "False"),
                _condition(
                    "Progressing",
                    "True" if progressing else "False",
                    "",
                    f"Working towards {desired_version}"
                    if progressing
                    else f"Cluster version is {desired_version}",
                ),
            ],
        },
    }


def machine_manager(
    resource: str = MACHINESET_PLURAL,
    mode: str = "All",
    *,
    match_labels: Mapping[str, str] | None = None,
    match_expressions: Sequence[Mapping[str, Any]] | None = None,
) -> dict[str, Any]:
    """One `managedBootImages.machineManagers[]` entry; a selector implies mode Partial."""
    selection: dict[str, Any] = {"mode": mode}
    if match_labels is not None or match_expressions is not None:
        selector: dict[str, Any] = {}
        if match_labels is not None:
            selector["matchLabels"] = dict(match_labels)
        if match_expressions is not None:
            selector["matchExpressions"] = [dict(e) for e in match_expressions]
        selection = {"mode": "Partial", "partial": {"machineResourceSelector": selector}}
    return {"resource": resource, "apiGroup": MACHINE_API_GROUP, "selection": selection}


def skew_manual(*, ocp_version: str | None = None, rhcos_version: str | None = None) -> dict[str, Any]:
    """`spec.bootImageSkewEnforcement` in Manual mode with exactly one of the two versions."""
    if (ocp_version is None) == (rhcos_version is None):
        raise ValueError("give exactly one of ocp_version, rhcos_version")
    if ocp_version is not None:
        return {"mode": "Manual", "manual": {"mode": "OCPVersion", "ocpVersion": ocp_version}}
    return {"mode": "Manual", "manual": {"mode": "RHCOSVersion", "rhcosVersion": rhcos_version}}


def skew_none() -> dict[str, Any]:
    return {"mode": "None"}


def mco_cluster_operator(version: str = "4.22.0") -> dict[str, Any]:
    """ClusterOperator `machine-config` at `version`: the Machine Config Operator runs (SPEC rule 2b)."""
    return {
        "apiVersion": _gv(CONFIG_GROUP, CONFIG_VERSION),
        "kind": "ClusterOperator",
        "metadata": {"name": "machine-config"},
        "spec": {},
        "status": {
            "conditions": [
                {"type": t, "status": v, "lastTransitionTime": _rfc3339(_EPOCH), "reason": "AsExpected",
                 "message": f"Cluster version is {version}"}
                for t, v in (("Available", "True"), ("Progressing", "False"), ("Degraded", "False"))
            ],
            "versions": [{"name": "operator", "version": version},
                         {"name": "operator-image", "version": f"quay.io/openshift/mco:{version}"}],
            "relatedObjects": [{"group": "", "resource": "namespaces", "name": MCO_NAMESPACE}],
        },
    }


def feature_gate(version: str = "4.22.0", enabled: Sequence[str] = (), disabled: Sequence[str] = ()) -> dict[str, Any]:
    """FeatureGate `cluster` whose status lists `enabled` (and `disabled`) gates for `version`."""
    return {
        "apiVersion": _gv(CONFIG_GROUP, CONFIG_VERSION),
        "kind": "FeatureGate",
        "metadata": {"name": "cluster"},
        "spec": {"featureSet": ""},
        "status": {
            "featureGates": [{
                "version": version,
                "enabled": [{"name": g} for g in enabled],
                "disabled": [{"name": g} for g in disabled],
            }],
        },
    }


def machine_configuration(
    managed: Sequence[Mapping[str, Any]] | None = None,
    skew: Mapping[str, Any] | None = None,
    *,
    status: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """MachineConfiguration `cluster`. `managed`: the machineManagers list (None: no
    managedBootImages at all; `[]`: the explicit full opt-out). `skew`: bootImageSkewEnforcement."""
    spec: dict[str, Any] = {"managementState": "Managed", "logLevel": "Normal", "operatorLogLevel": "Normal"}
    if managed is not None:
        spec["managedBootImages"] = {"machineManagers": [copy.deepcopy(dict(m)) for m in managed]}
    if skew is not None:
        spec["bootImageSkewEnforcement"] = copy.deepcopy(dict(skew))
    obj: dict[str, Any] = {
        "apiVersion": _gv(OPERATOR_GROUP, OPERATOR_VERSION),
        "kind": MACHINECONFIGURATION_KIND,
        "metadata": {"name": MACHINECONFIGURATION_NAME},
        "spec": spec,
    }
    if status is not None:
        obj["status"] = copy.deepcopy(dict(status))
    return obj


def _load_yaml(path: Path) -> dict[str, Any]:
    doc = yaml.safe_load(path.read_text())
    if not isinstance(doc, dict):
        raise ValueError(f"{path}: expected one YAML mapping")
    return doc


def _fixture(path: str | Path, folder: Path) -> Path:
    p = Path(path)
    return p if p.is_absolute() or p.exists() else folder / p


def _strip_server_metadata(obj: dict[str, Any]) -> dict[str, Any]:
    meta = obj.setdefault("metadata", {})
    for key in _SERVER_METADATA:
        meta.pop(key, None)
    obj.pop("status", None)
    return obj


def example_objects(*, strip_server_metadata: bool = False) -> list[dict[str, Any]]:
    """Every object of the bundled example cluster (`kind: List` files expanded)."""
    out: list[dict[str, Any]] = []
    for path in sorted(EXAMPLE_CLUSTER.rglob("*.yaml")):
        for doc in yaml.safe_load_all(path.read_text()):
            if doc:
                out.extend(doc["items"] if doc["kind"].endswith("List") else [doc])
    if strip_server_metadata:
        for obj in out:
            for key in _SERVER_METADATA:
                obj["metadata"].pop(key, None)
    return out


def bootimages_configmap(path: str | Path = "coreos-bootimages-4.18.yaml") -> dict[str, Any]:
    """The `coreos-bootimages` ConfigMap from a fixture (a name in tests/fixtures/configmaps or a path)."""
    obj = _strip_server_metadata(_load_yaml(_fixture(path, CONFIGMAP_FIXTURES)))
    obj["metadata"]["name"] = BOOTIMAGES_CONFIGMAP
    obj["metadata"]["namespace"] = MCO_NAMESPACE
    return obj


def node(
    name: str,
    *,
    arch: str = "amd64",
    roles: Sequence[str] = ("worker",),
    labels: Mapping[str, str] | None = None,
    annotations: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """A Ready RHCOS Node; `status.nodeInfo` is complete so typed clients can read it."""
    all_labels = {
        "beta.kubernetes.io/arch": arch,
        "beta.kubernetes.io/os": "linux",
        LABEL_ARCH: arch,
        "kubernetes.io/hostname": name,
        "kubernetes.io/os": "linux",
        "node.openshift.io/os_id": "rhcos",
        **{f"node-role.kubernetes.io/{role}": "" for role in roles},
        **(labels or {}),
    }
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": all_labels, "annotations": dict(annotations or {})},
        "spec": {"providerID": f"aws:///us-east-1a/i-{hashlib.sha256(name.encode()).hexdigest()[:17]}"},
        "status": {
            "conditions": [
                {
                    "type": "Ready",
                    "status": "True",
                    "reason": "KubeletReady",
                    "message": "kubelet is posting ready status",
                    "lastHeartbeatTime": _rfc3339(_EPOCH),
                    "lastTransitionTime": _rfc3339(_EPOCH),
                }
            ],
            "nodeInfo": {
                "architecture": arch,
                "bootID": str(uuid.uuid5(uuid.NAMESPACE_DNS, f"boot.{name}")),
                "containerRuntimeVersion": "cri-o://1.31.5-4.rhaos4.18.gitbaa1e2e.el9",
                "kernelVersion": "5.14.0-427.50.1.el9_4.x86_64",
                "kubeProxyVersion": "",
                "kubeletVersion": "v1.31.5",
                "machineID": hashlib.md5(name.encode()).hexdigest(),
                "operatingSystem": "linux",
                "osImage": "Red Hat Enterprise Linux CoreOS 418.94.202502041739-0",
                "systemUUID": str(uuid.uuid5(uuid.NAMESPACE_DNS, name)),
            },
        },
    }


def control_plane_node(name: str, arch: str = "amd64", aleph: str | None = None) -> dict[str, Any]:
    """A control-plane Node (both the master and control-plane role labels, NoSchedule taint);
    `aleph` sets the aleph-version annotation that `aleph-report` writes."""
    obj = node(name, arch=arch, roles=())
    obj["metadata"]["labels"].update({label: "" for label in CONTROL_PLANE_NODE_LABELS})
    if aleph is not None:
        obj["metadata"]["annotations"][ANNOTATION_ALEPH_VERSION] = aleph
    obj["spec"]["taints"] = [{"key": "node-role.kubernetes.io/master", "effect": "NoSchedule"}]
    return obj


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386 JSON merge patch applied to a copy of `target` (None deletes a key)."""
    if not isinstance(patch, Mapping):
        return copy.deepcopy(patch)
    result = copy.deepcopy(dict(target)) if isinstance(target, Mapping) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


def machineset_from_fixture(
    path: str | Path,
    name: str | None = None,
    *,
    namespace: str | None = None,
    labels: Mapping[str, str] | None = None,
    annotations: Mapping[str, str] | None = None,
    replicas: int | None = None,
    owner_references: Sequence[Mapping[str, Any]] | None = None,
    provider_spec: Mapping[str, Any] | None = None,
    merge: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """A MachineSet from tests/fixtures/machinesets (file name or path; YAML comments fall away).

    `name` renames it consistently (selector and template labels too); `labels`/`annotations` are
    added to metadata; `provider_spec` and `merge` are JSON merge patches onto
    providerSpec.value and onto the whole object (None deletes a key).
    """
    obj = _strip_server_metadata(_load_yaml(_fixture(path, MACHINESET_FIXTURES)))
    meta = obj["metadata"]
    if name is not None:
        _rename_machineset(obj, name)
    if namespace is not None:
        meta["namespace"] = namespace
    if labels:
        meta.setdefault("labels", {}).update(labels)
    if annotations:
        meta.setdefault("annotations", {}).update(annotations)
    if replicas is not None:
        obj["spec"]["replicas"] = replicas
    if owner_references is not None:
        meta["ownerReferences"] = [dict(ref) for ref in owner_references]
    if provider_spec is not None:
        template_spec = obj["spec"]["template"]["spec"]
        value = template_spec["providerSpec"].get("value", {})
        template_spec["providerSpec"]["value"] = merge_patch(value, provider_spec)
    if merge is not None:
        obj = merge_patch(obj, merge)
    return obj


def _rename_machineset(obj: dict[str, Any], name: str) -> None:
    obj["metadata"]["name"] = name
    spec = obj["spec"]
    for labels in (spec.get("selector", {}).get("matchLabels"), spec["template"]["metadata"].get("labels")):
        if isinstance(labels, dict) and _LABEL_MACHINESET in labels:
            labels[_LABEL_MACHINESET] = name


def control_plane_machine_set(
    provider_spec: Mapping[str, Any],
    *,
    state: str = "Active",
    replicas: int = 3,
    failure_domains: Mapping[str, Any] | None = None,
    labels: Mapping[str, str] | None = None,
    annotations: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """ControlPlaneMachineSet `cluster` around a providerSpec value (e.g. taken from a MachineSet
    fixture: `machineset_from_fixture(f)["spec"]["template"]["spec"]["providerSpec"]["value"]`)."""
    role_labels = {
        _LABEL_CLUSTER: INFRA_ID,
        "machine.openshift.io/cluster-api-machine-role": "master",
        "machine.openshift.io/cluster-api-machine-type": "master",
    }
    template: dict[str, Any] = {
        "metadata": {"labels": dict(role_labels)},
        "spec": {
            "lifecycleHooks": {},
            "metadata": {},
            "providerSpec": {"value": copy.deepcopy(dict(provider_spec))},
        },
    }
    if failure_domains is not None:
        template["failureDomains"] = copy.deepcopy(dict(failure_domains))
    metadata: dict[str, Any] = {"name": CPMS_NAME, "namespace": MAPI_NAMESPACE}
    if labels:
        metadata["labels"] = dict(labels)
    if annotations:
        metadata["annotations"] = dict(annotations)
    return {
        "apiVersion": _gv(MACHINE_API_GROUP, CPMS_VERSION),
        "kind": CPMS_KIND,
        "metadata": metadata,
        "spec": {
            "replicas": replicas,
            "state": state,
            "strategy": {"type": "RollingUpdate"},
            "selector": {"matchLabels": dict(role_labels)},
            "template": {
                "machineType": "machines_v1beta1_machine_openshift_io",
                "machines_v1beta1_machine_openshift_io": template,
            },
        },
    }


# --- async helpers ------------------------------------------------------------------------------------

_JSON: Final = "application/json"
MERGE_PATCH: Final = "application/merge-patch+json"
_CONFLICT_RETRIES: Final = 5


async def api_client_for(kubeconfig: Path) -> ApiClient:
    """An ApiClient configured from `kubeconfig` (use it as `async with await api_client_for(...)`)."""
    configuration = k8s_client.Configuration()
    await k8s_config.load_kube_config(config_file=str(kubeconfig), client_configuration=configuration)
    return ApiClient(configuration=configuration)


async def kube_request(
    api: ApiClient,
    method: str,
    path: str,
    body: Any = None,
    *,
    content_type: str = _JSON,
    query: Sequence[tuple[str, str]] = (),
    headers: Mapping[str, str] | None = None,
) -> Any:
    """One request through the client's configuration (auth, TLS); the JSON answer as dicts.
    `headers`: more request headers (e.g. `Impersonate-User`, which the admin token may send).

    Raises kubernetes_asyncio ApiException on a non-2xx answer, like the generated clients.
    """
    return await api.call_api(
        path,
        method,
        query_params=list(query),
        header_params={"Accept": _JSON, "Content-Type": content_type, **(headers or {})},
        body=body,
        response_types_map={200: "object", 201: "object", 202: "object"},
        auth_settings=["BearerToken"],
        _return_http_data_only=True,
    )


def _namespace_of(res: Resource, obj: Mapping[str, Any]) -> str | None:
    if not res.namespaced:
        return None
    namespace = obj["metadata"].get("namespace")
    if not namespace:
        raise ValueError(f"{res.kind} {obj['metadata'].get('name')} needs metadata.namespace")
    return str(namespace)


async def get_object(api: ApiClient, obj: Mapping[str, Any]) -> dict[str, Any] | None:
    """The live version of `obj` (matched by kind, namespace and name), None when absent."""
    res = resource_of(obj)
    try:
        live: dict[str, Any] = await kube_request(
            api, "GET", res.item_path(obj["metadata"]["name"], _namespace_of(res, obj))
        )
    except ApiException as exc:
        if exc.status == 404:
            return None
        raise
    return live


async def apply(api: ApiClient, obj: Mapping[str, Any]) -> dict[str, Any]:
    """Create `obj`, or replace the live one; then write its `status`, if any, through the status
    subresource. Returns the object as stored."""
    res = resource_of(obj)
    namespace = _namespace_of(res, obj)
    body = copy.deepcopy(dict(obj))
    status = body.pop("status", None) if res.status_subresource else None
    for key in ("resourceVersion", "uid"):  # a live object given back: apply it as a new write
        body["metadata"].pop(key, None)
    try:
        stored: dict[str, Any] = await kube_request(api, "POST", res.collection_path(namespace), body)
    except ApiException as exc:
        if exc.status != 409:
            raise
        stored = await _replace(api, res, namespace, body)
    if status is not None:
        stored = await _replace(api, res, namespace, {**stored, "status": status}, subresource="/status")
    return stored


async def _replace(
    api: ApiClient, res: Resource, namespace: str | None, body: dict[str, Any], *, subresource: str = ""
) -> dict[str, Any]:
    path = res.item_path(body["metadata"]["name"], namespace) + subresource
    for _ in range(_CONFLICT_RETRIES):
        live = await kube_request(api, "GET", path)
        body = {
            **body,
            "metadata": {**body["metadata"], "resourceVersion": live["metadata"]["resourceVersion"]},
        }
        try:
            stored: dict[str, Any] = await kube_request(api, "PUT", path, body)
            return stored
        except ApiException as exc:
            if exc.status != 409:
                raise
    raise RuntimeError(f"{path}: still conflicting after {_CONFLICT_RETRIES} tries")


async def delete_object(api: ApiClient, obj: Mapping[str, Any], *, remove_finalizers: bool = False) -> None:
    """Delete `obj` if it exists; with `remove_finalizers` it is gone when this returns."""
    res = resource_of(obj)
    path = res.item_path(obj["metadata"]["name"], _namespace_of(res, obj))
    try:
        if remove_finalizers:
            await kube_request(
                api, "PATCH", path, {"metadata": {"finalizers": None}}, content_type=MERGE_PATCH
            )
        await kube_request(api, "DELETE", path)
    except ApiException as exc:
        if exc.status != 404:
            raise


# What `reset_cluster` empties: these kinds everywhere, and these kinds in the two namespaces.
RESET_KINDS: Final = (
    (_gv(MACHINE_API_GROUP, MACHINESET_VERSION), MACHINESET_KIND),
    (_gv(MACHINE_API_GROUP, CPMS_VERSION), CPMS_KIND),
    (_gv(MACHINE_API_GROUP, "v1beta1"), "Machine"),
    (_gv(OPERATOR_GROUP, OPERATOR_VERSION), MACHINECONFIGURATION_KIND),
    (_gv(CONFIG_GROUP, CONFIG_VERSION), "ClusterVersion"),
    (_gv(CONFIG_GROUP, CONFIG_VERSION), "Infrastructure"),
    (_gv(CONFIG_GROUP, CONFIG_VERSION), "ClusterOperator"),
    (_gv(CONFIG_GROUP, CONFIG_VERSION), "Proxy"),
    (_gv(CONFIG_GROUP, CONFIG_VERSION), "FeatureGate"),
    ("v1", "Node"),
)
RESET_NAMESPACED_KINDS: Final = (
    ("v1", "ConfigMap"),
    ("v1", "Secret"),
    ("coordination.k8s.io/v1", "Lease"),
    ("v1", "Event"),
)
RESET_NAMESPACES: Final = (MAPI_NAMESPACE, MCO_NAMESPACE, CAPI_NAMESPACE)
RESET_CAPI_KINDS: Final = (
    ("cluster.x-k8s.io/v1beta1", "MachineSet"),
    ("cluster.x-k8s.io/v1beta1", "MachineDeployment"),
    *((f"infrastructure.cluster.x-k8s.io/{v}", kind) for kind, (v, _) in INFRA_TEMPLATES.items()),
    *((f"infrastructure.cluster.x-k8s.io/{v}", kind.removesuffix("Template")) for kind, (v, _) in INFRA_MACHINES.items()),
    ("cluster.x-k8s.io/v1beta1", "Cluster"),
)


async def reset_cluster(api: ApiClient, *, timeout: float = 30.0) -> None:
    """Delete every object a test may have left behind (finalizers removed first, so nothing hangs)."""
    deadline = asyncio.get_running_loop().time() + timeout
    for api_version, kind in RESET_KINDS:
        await _purge(api, resource_for(api_version, kind), None, deadline)
    for api_version, kind in RESET_CAPI_KINDS:
        await _purge(api, resource_for(api_version, kind), CAPI_NAMESPACE, deadline)
    for namespace in RESET_NAMESPACES:
        for api_version, kind in RESET_NAMESPACED_KINDS:
            await _purge(api, resource_for(api_version, kind), namespace, deadline)


async def _purge(api: ApiClient, res: Resource, namespace: str | None, deadline: float) -> None:
    loop = asyncio.get_running_loop()
    while True:
        items = (await kube_request(api, "GET", res.collection_path(namespace)))["items"]
        if not items:
            return
        if loop.time() > deadline:
            names = [i["metadata"]["name"] for i in items]
            raise TimeoutError(f"reset_cluster: {res.kind} still present: {names}")
        for item in items:
            if item["metadata"].get("finalizers"):
                path = res.item_path(item["metadata"]["name"], item["metadata"].get("namespace"))
                await _ignore_missing(
                    kube_request(
                        api, "PATCH", path, {"metadata": {"finalizers": None}}, content_type=MERGE_PATCH
                    )
                )
        for ns in sorted({i["metadata"].get("namespace") for i in items}, key=str):
            await _ignore_missing(kube_request(api, "DELETE", res.collection_path(ns)))
        await asyncio.sleep(0.05)


async def _ignore_missing(request: Any) -> None:
    try:
        await request
    except ApiException as exc:
        if exc.status not in (404, 409):
            raise


def plain_kubeconfig(folder: Path, server: str) -> Path:
    """`folder/kubeconfig`: one context `c` pointing at `server` with a dummy token (for servers
    that are dead, hang, or are not Kubernetes at all)."""
    path = folder / "kubeconfig"
    path.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "c",
        "clusters": [{"name": "c", "cluster": {"server": server}}],
        "users": [{"name": "u", "user": {"token": "t"}}],
        "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}],
    }))
    return path
