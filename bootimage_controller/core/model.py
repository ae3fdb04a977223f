"""Plain data at the edges: what the planner reads and what it returns.

`MachineResource` is a MachineSet or ControlPlaneMachineSet with its metadata parsed and its
providerSpec kept raw (the platform rules validate it). `BootImageDecision` is the planner's
answer. Both are frozen dataclasses so a decision can be logged, printed, compared in tests and
handed to a writer without anyone mutating it on the way.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import TYPE_CHECKING, Any, TypeGuard

from ..constants import (
    CPMS_KIND,
    CPMS_PROVIDER_SPEC_PATH,
    CPMS_TEMPLATE_LABELS_PATH,
    HIVE_BOOT_IMAGE_FIELDS,
    MACHINESET_KIND,
    MACHINESET_PROVIDER_SPEC_PATH,
    MACHINESET_TEMPLATE_LABELS_PATH,
    Action,
    Manager,
    Reason,
)
from ..errors import InputError

if TYPE_CHECKING:
    from .capi.work import CapiWork
    from .vsphere.topology import TemplateWork

JsonPath = tuple[str | int, ...]


@lru_cache(maxsize=1024)
def dotted(path: JsonPath) -> str:
    """`("spec", "disks", 0, "image")` -> `spec.disks[0].image` (how the SPEC names fields).

    Cached: the same few field paths are named in every decision of a pass."""
    out = ""
    for part in path:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else part
    return out


_SEGMENT = re.compile(r"([^.\[\]]+)|\[(\d+)\]")


def parse_dotted(path: str) -> JsonPath:
    """Inverse of `dotted`: `spec.disks[0].image` -> ("spec", "disks", 0, "image")."""
    out: list[str | int] = []
    for name, index in _SEGMENT.findall(path):
        out.append(int(index) if index else name)
    return tuple(out)


@dataclass(frozen=True)
class OwnerReference:
    api_version: str
    kind: str
    name: str
    uid: str
    controller: bool = False


@dataclass(frozen=True)
class MachineResource:
    """A MachineSet or the ControlPlaneMachineSet, metadata parsed, providerSpec raw."""

    kind: str
    namespace: str
    name: str
    uid: str
    resource_version: str
    labels: Mapping[str, str]
    annotations: Mapping[str, str]
    owner_references: tuple[OwnerReference, ...]
    template_labels: Mapping[str, str]
    provider_spec_path: JsonPath
    provider_spec: Any  # raw JSON value; the platform rules validate it
    raw: Mapping[str, Any] = field(repr=False, compare=False)

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def display(self) -> str:
        return f"{self.kind} {self.namespace}/{self.name}"

    @classmethod
    def from_object(cls, obj: Any, source: str = "") -> MachineResource:
        """Parse the parts every rule needs. Raises `InputError` naming the object and field."""
        where = source or "object"
        if not is_mapping(obj):
            raise InputError(where, None, f"expected an object, got {type(obj).__name__}")
        kind = obj.get("kind")
        if kind not in (MACHINESET_KIND, CPMS_KIND):
            raise InputError(where, "kind", f"expected MachineSet or ControlPlaneMachineSet, got {kind!r}")
        meta = obj.get("metadata")
        if not is_mapping(meta):
            raise InputError(where, "metadata", "missing or not an object")
        name = meta.get("name")
        if not isinstance(name, str) or not name:
            raise InputError(where, "metadata.name", "missing or not a string")
        namespace = meta.get("namespace", "")
        where = f"{kind} {namespace}/{name}" if not source else f"{source}: {kind} {namespace}/{name}"
        if not isinstance(namespace, str):
            raise InputError(where, "metadata.namespace", "not a string")
        labels = _string_map(meta.get("labels"), where, "metadata.labels")
        annotations = _string_map(meta.get("annotations"), where, "metadata.annotations")
        owners = _owner_references(meta.get("ownerReferences"), where)
        is_cpms = kind == CPMS_KIND
        spec_path = CPMS_PROVIDER_SPEC_PATH if is_cpms else MACHINESET_PROVIDER_SPEC_PATH
        labels_path = CPMS_TEMPLATE_LABELS_PATH if is_cpms else MACHINESET_TEMPLATE_LABELS_PATH
        template_labels = _string_map(get_path(obj, labels_path), where, dotted(labels_path))
        return cls(
            kind=kind,
            namespace=namespace,
            name=name,
            uid=str(meta.get("uid") or ""),
            resource_version=str(meta.get("resourceVersion") or ""),
            labels=labels,
            annotations=annotations,
            owner_references=owners,
            template_labels=template_labels,
            provider_spec_path=spec_path,
            provider_spec=get_path(obj, spec_path),
            raw=obj,
        )


_MISSING = object()
_ONLY_STR = frozenset({str})


def is_mapping(value: Any) -> TypeGuard[Mapping[str, Any]]:
    # Parsed JSON/YAML is always a dict: check that first, the (slow) ABC only for other mappings.
    return type(value) is dict or isinstance(value, Mapping)


def as_mapping(value: Any) -> Mapping[str, Any]:
    """`value` when it is an object, else an empty one (for reads of optional JSON objects)."""
    return value if is_mapping(value) else {}


def get_path(obj: Any, path: JsonPath, default: Any = None) -> Any:
    """Follow a path through nested dicts/lists; `default` when any step is missing."""
    cur = obj
    for part in path:
        if isinstance(part, int):
            if not isinstance(cur, list) or part >= len(cur):
                return default
            cur = cur[part]
        elif type(cur) is dict or is_mapping(cur):
            cur = cur.get(part, _MISSING)
            if cur is _MISSING:
                return default
        else:
            return default
    return cur


def _string_map(value: Any, where: str, field_name: str) -> Mapping[str, str]:
    if value is None:
        return {}
    if not is_mapping(value):
        raise InputError(where, field_name, f"expected a map of strings, got {type(value).__name__}")
    # The types of every key and value, collected in C (the common, valid case); the precise
    # error only when that finds anything but `str`.
    if not {*map(type, value), *map(type, value.values())} <= _ONLY_STR:
        for k, v in value.items():
            if not isinstance(k, str) or not isinstance(v, str):
                raise InputError(where, f"{field_name}[{k!r}]", "keys and values must be strings")
    return value


def _owner_references(value: Any, where: str) -> tuple[OwnerReference, ...]:
    if value is None:
        return ()
    if not isinstance(value, list):
        raise InputError(where, "metadata.ownerReferences", "expected a list")
    refs = []
    for i, ref in enumerate(value):
        if not isinstance(ref, Mapping):
            raise InputError(where, f"metadata.ownerReferences[{i}]", "expected an object")
        refs.append(
            OwnerReference(
                api_version=str(ref.get("apiVersion", "")),
                kind=str(ref.get("kind", "")),
                name=str(ref.get("name", "")),
                uid=str(ref.get("uid", "")),
                controller=bool(ref.get("controller", False)),
            )
        )
    return tuple(refs)


@dataclass(frozen=True, slots=True)
class FieldChange:
    """One value the patch replaces, addressed from the object root."""

    path: JsonPath
    old: Any
    new: Any


@dataclass(frozen=True, slots=True)  # one per MachineSet, kept: no per-instance dict
class BootImageDecision:
    """What the planner decided for one MachineSet (SPEC section 2 and the `plan -o json` shape)."""

    kind: str
    namespace: str
    name: str
    action: Action
    reason: str
    message: str
    platform: str | None = None
    architecture: str | None = None
    stream: str | None = None
    field: str | None = None
    current: Any = None
    target: Any = None
    current_release: str | None = None
    target_release: str | None = None
    changes: tuple[FieldChange, ...] = ()
    # Not part of `plan -o json`: where the image lives (AWS region, GCP zone, Azure location) and
    # which evidence gave `current_release` (see skew.record.ReleaseSource), for cloud lookups and skew.
    location: str | None = None
    current_release_source: str | None = None
    # vSphere: the vCenter work behind the decision (vsphere.topology.TemplateWork): the names to
    # look up and, on a patch, the template to build before (or instead of) the MachineSet patch.
    template: TemplateWork | None = None
    # Cluster API: the template to write before the infrastructureRef patch (capi.work.CapiWork).
    capi: CapiWork | None = None
    # Who updates this boot image (SPEC rule 2b; `manager` in `plan -o json`), why, and whether the
    # MCO's controller would manage it but for our claim or the hand-over (manager.ManagerVerdict).
    manager: Manager = Manager.OURS
    manager_why: str = ""
    manager_named: str | None = None  # the field manager (`external`) or MachinePool (`hive`) it names
    taken_from_mco: bool = False
    # Who else will write this boot image (`alsoWrittenBy`: the MCO, for a Hive or GitOps MachineSet
    # it covers; SPEC section 3, writer conflicts).
    also_written_by: tuple[Manager, ...] = ()
    # Annotated `boot-image-updates: Disabled`, which only this controller reads: the decision is the
    # MCO's, which writes it all the same (a writer conflict with the admin's pin; SPEC section 4).
    opted_out: bool = False
    # A skip the cloud's answer would turn into a write, when it was not asked: what decides it and
    # how to ask (`nextWrite` says `when: unknown` with this as `because`; SPEC section 4).
    ask_cloud: str | None = None
    # The patch moves the boot image back to an older build (the golden data is older than what it
    # boots); written all the same (rule 7: equality, never order), and said (`downgrade: true`).
    downgrade: bool = False
    # What the patch replaces that an administrator may not expect (a customer's Azure gallery
    # image): in the message, and in every report's sentence of the next write.
    warning: str | None = None
    # The cloud says the current image is deprecated: why (`currentDeprecated`; Event, metric).
    current_deprecated: str | None = None
    # The verdict recorded on the MachineSet for the image it boots (SPEC section 3b, `verified`),
    # as the JSON object; None when none is recorded for that image.
    verified: Mapping[str, Any] | None = None

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    def to_json(self) -> dict[str, Any]:
        """The `machineSets[]` entry of `plan -o json` (SPEC section 4), field names exact."""
        return {
            "namespace": self.namespace,
            "name": self.name,
            "kind": self.kind,
            "platform": self.platform,
            "architecture": self.architecture,
            "stream": self.stream,
            "manager": str(self.manager),
            "action": str(self.action),
            "reason": self.reason,
            "message": self.message,
            "field": self.field,
            "current": _jsonable(self.current),
            "target": _jsonable(self.target),
            "currentRelease": self.current_release,
            "targetRelease": self.target_release,
            "alsoWrittenBy": [str(m) for m in self.also_written_by],
            "currentDeprecated": self.current_deprecated,
            "verified": dict(self.verified) if self.verified is not None else unverified_json(self.current),
            # Who and why (issue 49: an `external` row named no writer): the sentence, and the
            # writer it names where the manager is a kind (`fieldManager`, the Hive MachinePool).
            "managerWhy": self.manager_why,
            "downgrade": self.downgrade,
            **self._named_writer(),
        }

    def hive_field(self) -> tuple[str | None, Any]:
        """The Hive MachinePool field that sets this pool's boot image on the hub, and the value to
        set there (the target's); (None, None) where Hive has no such field on the platform."""
        field = HIVE_BOOT_IMAGE_FIELDS.get(self.platform or "")
        if field is None:
            return None, None
        return field[0], self.target.get(field[1]) if isinstance(self.target, dict) else None

    def _named_writer(self) -> dict[str, Any]:
        if self.manager is Manager.EXTERNAL:
            return {"fieldManager": self.manager_named}
        if self.manager is Manager.HIVE:
            field, value = self.hive_field()
            return {"hiveMachinePool": {"name": self.manager_named, "field": field, "value": value}}
        return {}


def unverified_json(current: Any) -> dict[str, Any]:
    """`verified` where no verdict is recorded for the boot image (SPEC section 3b): the image
    named as verdicts name it (`image_label`)."""
    return {"verdict": "unverified", "image": image_label(current), "machine": None,
            "node": None, "at": None, "reason": "no verdict recorded for this boot image"}


def image_label(value: Any) -> str | None:
    """One string per boot image, the same for a MachineSet's field and a Machine's: the AMI id,
    the GCP image path, the Azure gallery resource or `publisher:offer:sku:version`, the vSphere
    template; for a Cluster API object (`{"template": ..., "image": ...}`, docs/capi.md) the image
    its template names, as its infrastructure machines name it. None when the value names no image."""
    if isinstance(value, str):
        return value or None
    if not is_mapping(value):
        return None
    if "template" in value and "image" in value:
        return image_label(value["image"])
    for key in ("id", "resourceID"):
        found = value.get(key)
        if isinstance(found, str) and found:
            return found
    parts = [value.get(k) for k in ("publisher", "offer", "sku", "version")]
    if all(isinstance(p, str) and p for p in parts):
        return ":".join(str(p) for p in parts)
    return None


def _jsonable(value: Any) -> Any:
    # Values come from parsed JSON/YAML; a round trip guarantees plain types in the output.
    return json.loads(json.dumps(value)) if value is not None else None


@dataclass(frozen=True)
class Refusal:
    """Why a planned patch must not be written (e.g. the user-data secret cannot be made spec 3)."""

    reason: Reason
    message: str


@dataclass(frozen=True)
class InputNote:
    """A value in the input that was passed over (it does not parse, or says nothing usable): the
    pure core says so in its result and its caller logs it (core/ does no logging)."""

    event: str
    fields: tuple[tuple[str, str], ...] = ()

    @classmethod
    def of(cls, event: str, **fields: object) -> InputNote:
        return cls(event, tuple((k, str(v)) for k, v in fields.items()))


def first_names(names: Sequence[str], limit: int) -> str:
    """`a, b, c and 7 more`: a message names a few and counts the rest."""
    more = len(names) - limit
    return ", ".join(names[:limit]) + (f" and {more} more" if more > 0 else "")


# Public names for the metadata parsers other object kinds reuse (capi.resources).
parse_owner_references = _owner_references
parse_string_map = _string_map
