"""Hypothesis strategies: arbitrary JSON values, and real objects with a few parts replaced by them.

Mutating real objects finds far more than random JSON alone: the parser gets past the first type
check and meets the odd value deep inside, where real bugs hide.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping
from functools import cache
from pathlib import Path
from typing import Any, Final

import yaml
from hypothesis import strategies as st

ROOT: Final = Path(__file__).resolve().parents[2]
FIXTURES: Final = ROOT / "tests" / "fixtures"
MACHINESET_FILES: Final = tuple(sorted((FIXTURES / "machinesets").glob("*.yaml")))
CONFIGMAP_422: Final = FIXTURES / "configmaps" / "coreos-bootimages-4.22-multistream.yaml"

_Loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

# Keys the code looks for, so dictionaries often hit a branch instead of being ignored.
KEYS: Final = (
    "kind", "apiVersion", "metadata", "name", "namespace", "labels", "annotations", "ownerReferences",
    "spec", "template", "providerSpec", "value", "ami", "id", "placement", "region", "disks", "boot",
    "image", "publisher", "offer", "sku", "version", "resourceID", "type", "template", "workspace",
    "securityProfile", "settings", "securityType", "location", "zone", "architectures", "artifacts",
    "images", "aws", "gcp", "regions", "release", "project", "rhel-coreos-extensions", "marketplace",
    "azure", "formats", "ova", "disk", "stream", "streams", "data", "build", "ref", "count", "target",
    "matchLabels", "matchExpressions", "key", "operator", "values", "x86_64", "aarch64", "us-east-1",
)
STRINGS: Final = (
    "", "MachineSet", "AWSMachineProviderConfig", "GCPMachineProviderSpec", "AzureMachineProviderSpec",
    "VSphereMachineProviderSpec", "x86_64", "aarch64", "us-east-1", "ami-05483066c3caaccf5", "Windows",
    "projects/rhcos-cloud/global/images/x", "418.94.202410090804-0", "9.6.20250402-0", "rhel-10", "In",
    "Exists", "kubernetes.io/arch=arm64", "kubernetes.io/arch=", "openshift-machine-api", "v1", "ConfigMap",
    "machineset-boot-image-controller", "azureopenshift", "rh-ocp-worker", "\x00", "é", "1e999",
)

scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(10**30), max_value=10**30)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.sampled_from(STRINGS)
    | st.text(max_size=20)
)
keys = st.sampled_from(KEYS) | st.text(max_size=10)
json_values = st.recursive(
    scalars,
    lambda children: st.lists(children, max_size=4) | st.dictionaries(keys, children, max_size=5),
    max_leaves=20,
)


@cache
def _load(path: Path) -> Any:
    return yaml.load(path.read_text(), Loader=_Loader)


def fixture_machinesets() -> list[dict[str, Any]]:
    return [copy.deepcopy(_load(p)) for p in MACHINESET_FILES]


def configmap_422() -> dict[str, Any]:
    cm: dict[str, Any] = copy.deepcopy(_load(CONFIGMAP_422))
    return cm


def stream_422() -> dict[str, Any]:
    doc: dict[str, Any] = json.loads(configmap_422()["data"]["stream"])
    return doc


def _paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every path to a node below `value` (not the root itself)."""
    out: list[tuple[Any, ...]] = []
    if isinstance(value, Mapping):
        for k, v in value.items():
            out.append((*prefix, k))
            out.extend(_paths(v, (*prefix, k)))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            out.append((*prefix, i))
            out.extend(_paths(v, (*prefix, i)))
    return out


@st.composite
def mutated(draw: st.DrawFn, base: Any, max_changes: int = 3) -> Any:
    """`base` (deep-copied) with 1..max_changes nodes replaced by arbitrary values or removed."""
    obj = copy.deepcopy(base)
    for _ in range(draw(st.integers(1, max_changes))):
        paths = _paths(obj)
        if not paths:
            break
        path = draw(st.sampled_from(paths))
        parent = obj
        for part in path[:-1]:
            parent = parent[part]
        if isinstance(parent, dict) and draw(st.booleans()):
            del parent[path[-1]]
        else:
            parent[path[-1]] = draw(json_values)
    return obj


def control_plane_machine_set() -> dict[str, Any]:
    """The ControlPlaneMachineSet `cluster` around the AWS fixture's providerSpec."""
    aws = next(m for m in fixture_machinesets() if m["spec"]["template"]["spec"]["providerSpec"]["value"].get("kind") == "AWSMachineProviderConfig")
    template = {"metadata": {"labels": {}}, "spec": {"providerSpec": aws["spec"]["template"]["spec"]["providerSpec"]}}
    return {
        "apiVersion": "machine.openshift.io/v1",
        "kind": "ControlPlaneMachineSet",
        "metadata": {"name": "cluster", "namespace": "openshift-machine-api"},
        "spec": {"template": {"machineType": "machines_v1beta1_machine_openshift_io", "machines_v1beta1_machine_openshift_io": template}},
    }


def _bases() -> list[dict[str, Any]]:
    return [*fixture_machinesets(), control_plane_machine_set()]


machineset_objects = st.integers(0, len(MACHINESET_FILES)).flatmap(lambda i: mutated(_bases()[i]))
