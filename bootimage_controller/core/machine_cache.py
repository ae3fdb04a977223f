"""What the daemon's Machine and Node caches keep (SPEC section 3b: "only the fields this needs").

A cluster whose pools are scaled up has three Machines and a Node per pool member: at 5,000
MachineSets, 15,000 of each. As served a Machine is about 6 KB and a Node 10-20 KB; verification
reads a few hundred bytes of either. Even trimmed to those, a cached object as nested dicts costs
2.8 KB (a Machine: eleven small dicts) and 1.1 KB (a Node), 55 MiB at that size. So the caches keep
each as one flat object with slots (`SlimMachine`, `SlimNode`, about 0.5 KB and 0.25 KB with their
strings) that answers reads in the shape Kubernetes serves (`obj["status"]["phase"]`, `.get`,
`.items()`): the readers (`verification`, `canary`, the triggers, the informer) need not know. The
nested parts are rebuilt on each read, which costs CPU only where a verdict is judged.

What is kept, and what is not:
- metadata: name, namespace, resourceVersion (the informer tells versions apart), deletion time,
  creation time until a Node joins (the first-boot deadline counts from it), the MachineSet owner
  references (kind, name, uid). Labels only where a MachineSet
  would find the Machine by them (no MachineSet owner: an orphan its selector adopts) or where they
  name a canary; the uid and the canary annotations only on canaries (a canary is deleted by uid).
- spec: the providerSpec keys that name a boot image (AWS `ami`, Azure `image`, vSphere `template`,
  GCP the boot disks' `image`), one shared object for every Machine that boots the same image.
- status: phase, the Node's name, the error, and whether the cloud reported an instance (not its id).
- A Node: its name, resourceVersion and Ready condition (status and since when).
The informer stores them as its objects (`trim=`); they are read-only.

Cluster API Machines and their infrastructure machines (`trim_capi_machine`, `trim_infra_machine`)
are kept as small plain dicts of the same fields (phase, Node, failure, creation time, the
infrastructure machine's name and boot image): the Cluster API's worker pools are a tech preview
with few Machines, so the flat form is not worth its code there yet.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator, Mapping
from typing import Any, cast

from ..constants import (
    ANNOTATION_CANARY_DEADLINE,
    ANNOTATION_CANARY_RUNNER,
    LABEL_BOOT_IMAGE_CANARY,
    LABEL_CAPI_DEPLOYMENT_NAME,
    LABEL_CAPI_SET_NAME,
)
from .model import as_mapping, get_path, is_mapping

_CANARY_ANNOTATIONS = (ANNOTATION_CANARY_RUNNER, ANNOTATION_CANARY_DEADLINE)
# The providerSpec keys that name a boot image on each platform.
_IMAGE_KEYS = ("ami", "image", "template")
# What `status.providerStatus.instanceId` reads as in the cache: the cloud reported an instance.
INSTANCE_REPORTED = "reported"
# The boot image parts of the providerSpecs seen, one object each (every Machine of a pool shares
# it); bounded so a stream of distinct images cannot grow it without end.
_VALUES: dict[str, Mapping[str, Any]] = {}
_MAX_VALUES = 4096


class SlimMachine(Mapping[str, Any]):
    """A Machine as the cache keeps it (module docstring)."""

    __slots__ = (
        "_annotations",
        "_created",
        "_deleted",
        "_error_message",
        "_error_reason",
        "_instance",
        "_labels",
        "_name",
        "_namespace",
        "_node",
        "_owners",
        "_phase",
        "_resource_version",
        "_uid",
        "_value",
    )

    def __init__(self, machine: Mapping[str, Any]) -> None:
        meta, status = as_mapping(machine.get("metadata")), as_mapping(machine.get("status"))
        labels = as_mapping(meta.get("labels"))
        owners = tuple((str(o.get("name")), str(o.get("uid"))) for o in _list(meta.get("ownerReferences"))
                       if is_mapping(o) and o.get("kind") == "MachineSet")
        canary = LABEL_BOOT_IMAGE_CANARY in labels
        annotations = as_mapping(meta.get("annotations"))
        provider_status = as_mapping(status.get("providerStatus"))
        self._name = _text(meta.get("name"))
        self._namespace = _word(meta.get("namespace"))
        self._resource_version = _text(meta.get("resourceVersion"))
        self._node = _text(as_mapping(status.get("nodeRef")).get("name"))
        # The first-boot deadline counts from the creation time, until a Node joins.
        self._created = _text(meta.get("creationTimestamp")) if self._node is None else None
        self._deleted = _text(meta.get("deletionTimestamp"))
        self._owners = owners or None
        self._labels = dict(labels) if labels and (canary or not owners) else None
        self._uid = _text(meta.get("uid")) if canary else None
        kept = {k: annotations[k] for k in _CANARY_ANNOTATIONS if k in annotations}
        self._annotations = kept or None
        self._value = _image_value(as_mapping(get_path(machine, ("spec", "providerSpec", "value"))))
        self._phase = _word(status.get("phase"))
        self._error_reason = _text(status.get("errorReason"))
        self._error_message = _text(status.get("errorMessage"))
        self._instance = bool(provider_status.get("instanceId") or provider_status.get("instanceID"))

    def __getitem__(self, key: str) -> Any:
        if key == "metadata":
            return self._metadata()
        if key == "spec":
            return {"providerSpec": {"value": self._value}}
        if key == "status":
            return self._status()
        raise KeyError(key)

    def __iter__(self) -> Iterator[str]:
        return iter(("metadata", "spec", "status"))

    def __len__(self) -> int:
        return 3

    def __repr__(self) -> str:
        return f"SlimMachine({self._namespace}/{self._name}@{self._resource_version})"

    def _metadata(self) -> dict[str, Any]:
        meta: dict[str, Any] = {"name": self._name, "namespace": self._namespace,
                                "resourceVersion": self._resource_version}
        optional = (("creationTimestamp", self._created), ("deletionTimestamp", self._deleted), ("uid", self._uid),
                    ("labels", self._labels), ("annotations", self._annotations))
        meta.update((k, v) for k, v in optional if v is not None)
        if self._owners is not None:
            meta["ownerReferences"] = [{"kind": "MachineSet", "name": n, "uid": u} for n, u in self._owners]
        return meta

    def _status(self) -> dict[str, Any]:
        status: dict[str, Any] = {}
        optional = (("phase", self._phase), ("errorReason", self._error_reason), ("errorMessage", self._error_message))
        status.update((k, v) for k, v in optional if v is not None)
        if self._node is not None:
            status["nodeRef"] = {"name": self._node}
        if self._instance:
            status["providerStatus"] = {"instanceId": INSTANCE_REPORTED}
        return status


class SlimNode(Mapping[str, Any]):
    """A Node as the cache keeps it: its name, version and Ready condition."""

    __slots__ = ("_name", "_ready", "_resource_version", "_since")

    def __init__(self, node: Mapping[str, Any]) -> None:
        meta = as_mapping(node.get("metadata"))
        conditions = _list(get_path(node, ("status", "conditions")))
        ready = next((c for c in conditions if is_mapping(c) and c.get("type") == "Ready"), None)
        self._name = _text(meta.get("name"))
        self._resource_version = _text(meta.get("resourceVersion"))
        self._ready = _word(ready.get("status")) if ready is not None else None
        self._since = _text(ready.get("lastTransitionTime")) if ready is not None else None

    def __getitem__(self, key: str) -> Any:
        if key == "metadata":
            return {"name": self._name, "resourceVersion": self._resource_version}
        if key == "status":
            if self._ready is None:
                return {"conditions": []}
            return {"conditions": [{"type": "Ready", "status": self._ready, "lastTransitionTime": self._since}]}
        raise KeyError(key)

    def __iter__(self) -> Iterator[str]:
        return iter(("metadata", "status"))

    def __len__(self) -> int:
        return 2

    def __repr__(self) -> str:
        return f"SlimNode({self._name}@{self._resource_version})"


# The informer's `trim=`: its objects are typed as dicts (`KubeObject`); these are read-only
# Mappings, which is all any reader of these two caches does with them.
def trim_machine(machine: dict[str, Any]) -> dict[str, Any]:
    return cast(dict[str, Any], SlimMachine(machine))


def trim_node(node: dict[str, Any]) -> dict[str, Any]:
    return cast(dict[str, Any], SlimNode(node))


def trim_capi_machine(machine: dict[str, Any]) -> dict[str, Any]:
    """A Cluster API Machine as the cache keeps it (module docstring)."""
    meta, status = as_mapping(machine.get("metadata")), as_mapping(machine.get("status"))
    labels = as_mapping(meta.get("labels"))
    ref = as_mapping(get_path(machine, ("spec", "infrastructureRef")))
    node = _text(as_mapping(status.get("nodeRef")).get("name"))
    kept_meta: dict[str, Any] = {
        "name": _text(meta.get("name")), "namespace": _word(meta.get("namespace")),
        "resourceVersion": _text(meta.get("resourceVersion")),
        "labels": {k: labels[k] for k in (LABEL_CAPI_SET_NAME, LABEL_CAPI_DEPLOYMENT_NAME) if k in labels},
        "ownerReferences": [{k: o.get(k) for k in ("apiVersion", "kind", "name", "uid")}
                            for o in _list(meta.get("ownerReferences")) if is_mapping(o) and o.get("kind") == "MachineSet"],
    }
    for key in ("deletionTimestamp", *(() if node else ("creationTimestamp",))):
        if meta.get(key):
            kept_meta[key] = meta[key]
    kept_status: dict[str, Any] = {k: _word(status.get(k)) if k == "phase" else _text(status.get(k))
                                   for k in ("phase", "failureReason", "failureMessage") if status.get(k)}
    old = as_mapping(get_path(status, ("deprecated", "v1beta1")))
    if old.get("failureReason") or old.get("failureMessage"):
        kept_status["deprecated"] = {"v1beta1": {k: old.get(k) for k in ("failureReason", "failureMessage")}}
    if node:
        kept_status["nodeRef"] = {"name": node}
    spec: dict[str, Any] = {"infrastructureRef": {"kind": _word(ref.get("kind")), "name": _text(ref.get("name"))}}
    if get_path(machine, ("spec", "providerID")):
        spec["providerID"] = INSTANCE_REPORTED
    return {"metadata": kept_meta, "spec": spec, "status": kept_status}


def trim_infra_machine(machine: dict[str, Any]) -> dict[str, Any]:
    """An infrastructure machine (AWSMachine, ...) as the cache keeps it: its boot image, whether
    the cloud made an instance, and its failure."""
    meta, status = as_mapping(machine.get("metadata")), as_mapping(machine.get("status"))
    spec = as_mapping(machine.get("spec"))
    kept_spec = dict(_image_value(spec))
    if spec.get("instanceID") or spec.get("providerID"):
        kept_spec["providerID"] = INSTANCE_REPORTED
    return {
        "kind": _word(machine.get("kind")),
        "metadata": {"name": _text(meta.get("name")), "namespace": _word(meta.get("namespace")),
                     "resourceVersion": _text(meta.get("resourceVersion"))},
        "spec": kept_spec,
        "status": {k: status.get(k) for k in ("failureReason", "failureMessage") if status.get(k)},
    }


def plain(obj: Any) -> Any:
    """A cached object as plain JSON data (for a test, a log line, a dump)."""
    if is_mapping(obj):
        return {k: plain(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [plain(v) for v in obj]
    return obj


def _image_value(value: Mapping[str, Any]) -> Mapping[str, Any]:
    kept: dict[str, Any] = {k: value[k] for k in _IMAGE_KEYS if k in value}
    disks = [{"boot": d.get("boot"), "image": d.get("image")} for d in _list(value.get("disks")) if is_mapping(d)]
    if disks:
        kept["disks"] = disks
    key = json.dumps(kept, sort_keys=True, separators=(",", ":"))
    shared = _VALUES.get(key)
    if shared is None:
        if len(_VALUES) >= _MAX_VALUES:
            _VALUES.clear()
        shared = _VALUES[key] = kept
    return shared


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def _word(value: Any) -> str | None:
    """A string of few values (a namespace, a phase, `True`): one copy for the whole cache."""
    text = _text(value)
    return sys.intern(text) if text is not None and len(text) <= 64 else text


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []
