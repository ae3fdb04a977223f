"""Fixture loading and small builders shared by the planner tests (no code under test computes
expected values here: it only loads inputs)."""

from __future__ import annotations

import copy
import json
from collections.abc import Iterable, Mapping
from functools import cache
from pathlib import Path
from typing import Any

import yaml

from bootimage_controller.core.cloud.facts import CloudFacts, CloudImage, ImageKey
from bootimage_controller.core.context import ClusterFacts
from bootimage_controller.core.enrollment import Enrollment
from bootimage_controller.core.golden import GoldenBootImages, merge_marketplace
from bootimage_controller.core.index import PublishedImageIndex
from bootimage_controller.core.model import BootImageDecision, FieldChange, JsonPath
from bootimage_controller.core.planner import plan_machine
from bootimage_controller.data import bundled_index

ROOT = Path(__file__).resolve().parents[3]
MACHINESETS = ROOT / "tests" / "fixtures" / "machinesets"
CONFIGMAPS = ROOT / "tests" / "fixtures" / "configmaps"
STREAMS = ROOT / "data" / "stream-metadata"
PSP = ("spec", "template", "spec", "providerSpec", "value")

# Stream fixtures: id -> (stream file, marketplace overlay or None), as the installer merges them.
STREAM_FILES: dict[str, tuple[str, str | None]] = {
    "4.16-ga": ("installer-4.16-416.94.202405291527-0-rhcos.json", None),
    "4.16": ("installer-release-4.16-rhcos.json", None),
    "4.18": ("installer-release-4.18-rhcos.json", None),
    "4.19": ("installer-release-4.19-rhcos.json", None),
    "4.21": ("installer-release-4.21-rhcos.json", None),
    "4.21+mp": ("installer-release-4.21-rhcos.json", "installer-release-4.21-marketplace-rhcos.json"),
    "4.22-rhel-9": ("installer-release-4.22-coreos-rhel-9.json", None),
    "4.22-rhel-9+mp": ("installer-release-4.22-coreos-rhel-9.json", "installer-release-4.22-marketplace-coreos-rhel-9.json"),
    "4.22-rhel-10": ("installer-release-4.22-coreos-rhel-10.json", None),
    "4.22-rhel-10+mp": (
        "installer-release-4.22-coreos-rhel-10.json",
        "openshift-installer-main-marketplace-coreos-rhel-10.json",
    ),
}
CONFIGMAP_FILES = {
    "cm-4.18": "coreos-bootimages-4.18.yaml",
    "cm-4.22": "coreos-bootimages-4.22-multistream.yaml",
    "cm-hs-4.10": "hypershift-fixture-4.10-coreos-bootimages.yaml",
    "cm-hs-5.0": "hypershift-fixture-5.0.0-ec.2-coreos-bootimages.yaml",
}
ALL_GOLDEN = [*STREAM_FILES, *CONFIGMAP_FILES]


_Loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def _load_yaml(path: Path) -> Any:
    return yaml.load(path.read_text(), Loader=_Loader)  # CSafeLoader: the C build of the safe loader


@cache
def _machineset(name: str) -> dict[str, Any]:
    obj: dict[str, Any] = _load_yaml(MACHINESETS / name)
    return obj


def machineset(name: str) -> dict[str, Any]:
    """A fresh copy of a MachineSet fixture (tests may mutate it)."""
    return copy.deepcopy(_machineset(name))


@cache
def stream_doc(file: str) -> Mapping[str, Any]:
    doc: Mapping[str, Any] = json.loads((STREAMS / file).read_text())
    return doc


@cache
def configmap(cm_id: str) -> Mapping[str, Any]:
    cm: Mapping[str, Any] = _load_yaml(CONFIGMAPS / CONFIGMAP_FILES[cm_id])
    return cm


@cache
def golden(golden_id: str) -> GoldenBootImages:
    if golden_id in CONFIGMAP_FILES:
        return GoldenBootImages.from_configmap(configmap(golden_id))
    stream_file, overlay = STREAM_FILES[golden_id]
    doc = stream_doc(stream_file)
    if overlay is not None:
        doc = merge_marketplace(doc, stream_doc(overlay))
    return GoldenBootImages.from_stream_json(json.dumps(doc), golden_id)


def configmap_with(data: Mapping[str, str]) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "coreos-bootimages"}, "data": dict(data)}


ALL_ENROLLED = Enrollment.from_machine_configuration(None, "AWS")


def plan(
    obj: Any,
    golden_id: str | GoldenBootImages = "cm-4.22",
    facts: ClusterFacts | None = None,
    enrollment: Enrollment = ALL_ENROLLED,
) -> BootImageDecision:
    g = golden(golden_id) if isinstance(golden_id, str) else golden_id
    return plan_machine(obj, g, facts or ClusterFacts(published=bundled_index()), enrollment)


def set_path(obj: Any, path: JsonPath, value: Any) -> None:
    cur = obj
    for part in path[:-1]:
        cur = cur[part]
    cur[path[-1]] = value


def get(obj: Any, path: JsonPath) -> Any:
    cur = obj
    for part in path:
        cur = cur[part]
    return cur


def apply_changes(obj: Mapping[str, Any], changes: Iterable[FieldChange]) -> dict[str, Any]:
    out: dict[str, Any] = copy.deepcopy(dict(obj))
    for change in changes:
        assert get(out, change.path) == change.old, f"{change.path}: old value does not match the object"
        set_path(out, change.path, copy.deepcopy(change.new))
    return out


def without(obj: Mapping[str, Any], paths: Iterable[JsonPath]) -> dict[str, Any]:
    """A copy with the given fields replaced by a marker, to compare everything else."""
    out: dict[str, Any] = copy.deepcopy(dict(obj))
    for path in paths:
        set_path(out, path, "<boot image field>")
    return out


def cloud_facts(
    images: Iterable[CloudImage] = (),
    errors: Mapping[ImageKey, str] | None = None,
    **extra: Any,
) -> CloudFacts:
    return CloudFacts(images={i.key: i for i in images}, errors=dict(errors or {}), **extra)


def facts_with(
    cloud: CloudFacts | None = None,
    platforms: Iterable[str] = (),
    published: PublishedImageIndex | None = None,
    **extra: Any,
) -> ClusterFacts:
    kwargs: dict[str, Any] = dict(extra)
    kwargs["published"] = published if published is not None else bundled_index()
    return ClusterFacts(cloud=cloud, cloud_platforms=frozenset(platforms), **kwargs)
