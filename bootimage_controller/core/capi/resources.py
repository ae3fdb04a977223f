"""Cluster API objects as plain data: MachineSets, MachineDeployments and infrastructure templates.

Pure. Both `cluster.x-k8s.io` versions are read: v1beta1 names the template with
`infrastructureRef.apiVersion`, v1beta2 with `infrastructureRef.apiGroup`; either way the kind and
name are what matter (templates live in the object's namespace).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ...constants import (
    CAPI_GROUP,
    CAPI_MACHINEDEPLOYMENT,
    CAPI_MACHINESET,
    INFRA_TEMPLATES,
    INFRASTRUCTURE_GROUP,
    PLATFORM_TEMPLATE_KIND,
    Platform,
)
from ...errors import InputError
from ..model import JsonPath, OwnerReference, as_mapping, get_path, is_mapping
from ..model import parse_owner_references as _owner_references
from ..model import parse_string_map as _string_map
from .typed import TemplateShapeError, aws_template_spec_round_trip

INFRA_REF_PATH: JsonPath = ("spec", "template", "spec", "infrastructureRef")
INFRA_REF_NAME_PATH: JsonPath = (*INFRA_REF_PATH, "name")
TEMPLATE_SPEC_PATH: JsonPath = ("spec", "template", "spec")  # inside the infrastructure template
MAX_NAME = 253
AWS_TEMPLATE_KIND = PLATFORM_TEMPLATE_KIND[Platform.AWS]
# Templates this controller writes: `<base>-bic-<8 hex of their spec>`.
_OURS = re.compile(r"^(?P<base>.+)-bic-[0-9a-f]{8}$")


def capi_kind_key(obj: Mapping[str, Any]) -> str | None:
    """`MachineSet.cluster.x-k8s.io` / `MachineDeployment.cluster.x-k8s.io`, or None for other objects."""
    group = str(obj.get("apiVersion") or "").partition("/")[0]
    if group != CAPI_GROUP:
        return None
    kind = obj.get("kind")
    return {"MachineSet": CAPI_MACHINESET, "MachineDeployment": CAPI_MACHINEDEPLOYMENT}.get(str(kind))


@dataclass(frozen=True)
class TemplateRef:
    kind: str
    name: str
    group: str


@dataclass(frozen=True)
class CapiObject:
    """A CAPI MachineSet or MachineDeployment, as far as boot images need it."""

    kind: str  # CAPI_MACHINESET or CAPI_MACHINEDEPLOYMENT
    api_version: str
    namespace: str
    name: str
    uid: str
    resource_version: str
    generation: int | None
    labels: Mapping[str, str]
    annotations: Mapping[str, str]
    owner_references: tuple[OwnerReference, ...]
    template_labels: Mapping[str, str]
    template_ref: TemplateRef | None
    failure_domain: str | None
    raw: Mapping[str, Any] = field(repr=False, compare=False)

    @property
    def display(self) -> str:
        return f"{self.kind} {self.namespace}/{self.name}"

    @property
    def is_deployment(self) -> bool:
        return self.kind == CAPI_MACHINEDEPLOYMENT

    @classmethod
    def from_object(cls, obj: Any, source: str = "") -> CapiObject:
        if not is_mapping(obj) or capi_kind_key(obj) is None:
            raise InputError(source or "object", "kind", "expected a cluster.x-k8s.io MachineSet or MachineDeployment")
        kind = str(capi_kind_key(obj))
        meta = as_mapping(obj.get("metadata"))
        name, namespace = str(meta.get("name") or ""), str(meta.get("namespace") or "")
        where = f"{source + ': ' if source else ''}{kind} {namespace}/{name}"
        if not name:
            raise InputError(where, "metadata.name", "missing")
        ref = get_path(obj, INFRA_REF_PATH)
        template_ref = None
        if ref is not None:
            if not is_mapping(ref):
                raise InputError(where, "spec.template.spec.infrastructureRef", "expected an object")
            group = str(ref.get("apiGroup") or str(ref.get("apiVersion") or "").partition("/")[0])
            if not isinstance(ref.get("kind"), str) or not isinstance(ref.get("name"), str) or not ref.get("name"):
                raise InputError(where, "spec.template.spec.infrastructureRef", "needs kind and name")
            template_ref = TemplateRef(str(ref["kind"]), str(ref["name"]), group)
        domain = get_path(obj, ("spec", "template", "spec", "failureDomain"))
        generation = meta.get("generation")
        return cls(
            kind=kind,
            api_version=str(obj.get("apiVersion")),
            namespace=namespace,
            name=name,
            uid=str(meta.get("uid") or ""),
            resource_version=str(meta.get("resourceVersion") or ""),
            generation=generation if isinstance(generation, int) else None,
            labels=_string_map(meta.get("labels"), where, "metadata.labels"),
            annotations=_string_map(meta.get("annotations"), where, "metadata.annotations"),
            owner_references=_owner_references(meta.get("ownerReferences"), where),
            template_labels=_string_map(get_path(obj, ("spec", "template", "metadata", "labels")), where,
                                        "spec.template.metadata.labels"),
            template_ref=template_ref,
            failure_domain=domain if isinstance(domain, str) and domain else None,
            raw=obj,
        )

    def rollout_in_progress(self) -> str | None:
        """Why a MachineDeployment is mid-rollout (None when settled). A MachineSet never is."""
        if not self.is_deployment:
            return None
        status = as_mapping(self.raw.get("status"))
        if not status:
            return None  # never reconciled by CAPI: it has no Machines to roll
        observed = status.get("observedGeneration")
        if self.generation is not None and observed != self.generation:
            return f"status.observedGeneration {observed} is behind metadata.generation {self.generation}"
        rolling = _condition(status, "RollingOut")
        if rolling is not None and rolling.get("status") == "True":
            return f"condition RollingOut is True ({rolling.get('message') or rolling.get('reason') or 'no message'})"
        spec_replicas = get_path(self.raw, ("spec", "replicas"))
        replicas = status.get("replicas", 0) or 0
        updated, field = self._updated_replicas(status)
        if updated is None:
            return None  # this version reports no count of updated replicas: judged by RollingOut alone
        if isinstance(spec_replicas, int) and updated < spec_replicas:
            return f"{updated} of {spec_replicas} replicas updated ({field})"
        if replicas != updated:
            return f"{replicas} replicas, {updated} updated ({field}; old machines still being replaced)"
        return None

    def _updated_replicas(self, status: Mapping[str, Any]) -> tuple[int | None, str]:
        """The count of machines on the current template, where the version in use keeps it:
        v1beta2 `status.upToDateReplicas` (or its `deprecated.v1beta1.updatedReplicas`), v1beta1
        `status.updatedReplicas` (issue 24: v1beta2 has no `updatedReplicas`)."""
        candidates: tuple[tuple[str, ...], ...] = (("updatedReplicas",),)
        if self.api_version.endswith("/v1beta2"):
            candidates = (("upToDateReplicas",), ("deprecated", "v1beta1", "updatedReplicas"))
        for path in candidates:
            value = get_path(status, path)
            if isinstance(value, int) and not isinstance(value, bool):
                return value, "status." + ".".join(path)
        if self.api_version.endswith("/v1beta2"):
            return None, ""
        return 0, "status.updatedReplicas"


def _condition(status: Mapping[str, Any], type_: str) -> Mapping[str, Any] | None:
    conditions = status.get("conditions")
    for c in conditions if isinstance(conditions, list) else ():
        if is_mapping(c) and c.get("type") == type_:
            return c
    return None


@dataclass(frozen=True)
class InfraTemplate:
    """An AWS/GCP/Azure/VSphereMachineTemplate."""

    kind: str
    api_version: str
    namespace: str
    name: str
    uid: str
    resource_version: str
    spec: Mapping[str, Any]  # spec.template.spec
    annotations: Mapping[str, str]
    raw: Mapping[str, Any] = field(repr=False, compare=False)

    @property
    def display(self) -> str:
        return f"{self.kind} {self.namespace}/{self.name}"

    @classmethod
    def from_object(cls, obj: Any) -> InfraTemplate:
        meta = as_mapping(obj.get("metadata"))
        kind, name, ns = str(obj.get("kind")), str(meta.get("name") or ""), str(meta.get("namespace") or "")
        where = f"{kind} {ns}/{name}"
        spec = get_path(obj, TEMPLATE_SPEC_PATH)
        if not is_mapping(spec):
            raise InputError(where, "spec.template.spec", "missing or not an object")
        if kind == AWS_TEMPLATE_KIND:
            try:  # what CAPA's types cannot hold, its webhook and the MCO reject too
                aws_template_spec_round_trip(as_mapping(obj.get("spec")))
            except TemplateShapeError as exc:
                raise InputError(where, f"spec.{exc.path}", str(exc).partition(": ")[2]) from None
        return cls(
            kind=kind,
            api_version=str(obj.get("apiVersion")),
            namespace=ns,
            name=name,
            uid=str(meta.get("uid") or ""),
            resource_version=str(meta.get("resourceVersion") or ""),
            spec=spec,
            annotations=_string_map(meta.get("annotations"), where, "metadata.annotations"),
            raw=obj,
        )


def is_template_kind(kind: str, group: str) -> bool:
    return kind in INFRA_TEMPLATES and group in ("", INFRASTRUCTURE_GROUP)


def new_template_name(base: str, kind: str, new_spec: Mapping[str, Any]) -> str:
    """`<base>-<FNV-1a 32 of the template's whole spec as Go marshals it, 8 hex digits>`, as the
    Machine Config Operator names the templates of a CAPI pool (MCO #6082 `newInfraTemplateName`;
    the base is the MachineSet's or MachineDeployment's name) and cluster-capi-operator in shape: the
    same spec gives the same name, for a retry, a second replica, or the MCO writing the same pool.

    `new_spec` is the new template's `spec` (with its `template` wrapper). An AWSMachineTemplate's is
    first read into CAPA's types and written back, as the MCO does (`template_hash_input`); the
    other kinds, which the MCO does not write, are hashed as they are. Over 253 characters the base
    is cut (the MCO's create would fail there)."""
    suffix = f"-{fnv1a32(template_hash_input(kind, new_spec)):08x}"
    return f"{base[: MAX_NAME - len(suffix)]}{suffix}"


def template_hash_input(kind: str, spec: Mapping[str, Any]) -> bytes:
    """What a template's name hashes: two templates are the same when this is (the MCO's copy drops
    the fields CAPA does not know, so its template and ours may differ in those alone)."""
    return go_json(aws_template_spec_round_trip(spec) if kind == AWS_TEMPLATE_KIND else spec)


def same_template_spec(kind: str, ours: object, theirs: object) -> bool:
    """Whether an existing template of the name we computed is the one we meant: the same hash input
    (the MCO's copy of an AWS template drops the fields CAPA does not know, so the raw specs of the
    same template may differ). One CAPA's types cannot hold is not ours."""
    if not (is_mapping(ours) and is_mapping(theirs)):
        return False
    try:
        return template_hash_input(kind, ours) == template_hash_input(kind, theirs)
    except TemplateShapeError:
        return False


def is_replaced_template_name(name: str) -> bool:
    """Written by this controller under the old scheme (`<base>-bic-<8 hex>`): still retired by the
    same rule as the templates named the new way."""
    return _OURS.match(name) is not None


def go_json(value: Any) -> bytes:
    """`json.Marshal` of an unstructured value (map keys sorted; HTML-sensitive characters and the
    line and paragraph separators escaped, as encoding/json does)."""
    text = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    for raw, escaped in (("<", "\\u003c"), (">", "\\u003e"), ("&", "\\u0026"), ("\u2028", "\\u2028"),
                         ("\u2029", "\\u2029")):
        text = text.replace(raw, escaped)
    return text.encode()


_FNV32_OFFSET = 0x811C9DC5
_FNV32_PRIME = 0x01000193


def fnv1a32(data: bytes) -> int:
    """FNV-1a, 32 bits (Go's hash/fnv New32a)."""
    h = _FNV32_OFFSET
    for byte in data:
        h = ((h ^ byte) * _FNV32_PRIME) & 0xFFFFFFFF
    return h


__all__ = [
    "INFRA_REF_NAME_PATH",
    "TEMPLATE_SPEC_PATH",
    "CapiObject",
    "InfraTemplate",
    "TemplateRef",
    "capi_kind_key",
    "fnv1a32",
    "go_json",
    "is_replaced_template_name",
    "is_template_kind",
    "new_template_name",
    "same_template_spec",
    "template_hash_input",
]
