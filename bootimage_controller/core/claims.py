"""Claims and the boot image record as JSON patches (SPEC section 3). Pure: no I/O here.

Every MachineSet write is one RFC 6902 JSON patch whose first operation tests
`/metadata/resourceVersion`, so a write based on a stale read fails with 409/422 instead of
overwriting another writer's change. The same patch carries the boot image change, our owner
reference (the claim) and the record annotations, so a MachineSet is never patched unclaimed.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from ..constants import (
    ANNOTATION_HOT_LOOP,
    ANNOTATION_PREVIOUS,
    ANNOTATION_RELEASE,
    ANNOTATION_STREAM,
    ANNOTATION_UPDATED_AT,
    CLAIM_HOLDER_NAME,
    HOT_LOOP_KEY_PREFIX,
    HOT_LOOP_LIMIT,
)
from .model import BootImageDecision, FieldChange, JsonPath
from .times import format_time

JsonPatch = list[dict[str, Any]]


def pointer(path: JsonPath) -> str:
    """RFC 6901 JSON pointer for a path (`~` and `/` escaped in keys)."""
    return "".join("/" + str(p).replace("~", "~0").replace("/", "~1") for p in path)


def owner_reference(holder_uid: str, controller: bool = True) -> dict[str, Any]:
    # controller=true so other controllers see the MachineSet is managed; blockOwnerDeletion=false so
    # the holder can never be blocked by a MachineSet, and we never need `update` on finalizers of ours.
    # An object may have one controller only: a CAPI object its Cluster controls gets controller=false.
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "name": CLAIM_HOLDER_NAME,
        "uid": holder_uid,
        "controller": controller,
        "blockOwnerDeletion": False,
    }


def is_our_reference(ref: Mapping[str, Any]) -> bool:
    return ref.get("apiVersion") == "v1" and ref.get("kind") == "ConfigMap" and ref.get("name") == CLAIM_HOLDER_NAME


@dataclass(frozen=True)
class HotLoopRecord:
    """Our writes of one target to one MachineSet, in a row, as annotation `boot-image-hot-loop`
    shows them (the visible copy; the claim holder keeps a `LedgerEntry` of the same count)."""

    target: str
    count: int

    def to_annotation(self) -> str:
        return json.dumps({"target": self.target, "count": self.count}, sort_keys=True, separators=(",", ":"))

    @classmethod
    def from_annotation(cls, value: str | None) -> HotLoopRecord | None:
        if not value:
            return None
        try:
            doc = json.loads(value)
            count = int(doc["count"])
            target = str(doc["target"])
        except (ValueError, KeyError, TypeError, OverflowError, RecursionError):
            # An absurd value (edited by hand: 1e999, nested 100,000 deep, not JSON) is treated as
            # no record, not as a crash: the next write starts the count again.
            return None
        return cls(target, count) if count >= 0 else None

    def ledger_entry(self) -> LedgerEntry:
        return LedgerEntry(target_digest(self.target), self.count)


@dataclass(frozen=True)
class LedgerEntry:
    """The claim holder's count of our writes of one target to one MachineSet (key
    `hot-loop.<uid>`, value `<count>:<digest of the target>`). No writer of the MachineSet can erase
    it, and it is written before each patch is sent, the first included (reconcile/ledger.py).
    Compact, so that thousands fit in one ConfigMap: about 70 bytes each."""

    digest: str
    count: int

    def to_data(self) -> str:
        return f"{self.count}:{self.digest}"

    @classmethod
    def from_data(cls, value: str | None) -> LedgerEntry | None:
        if not value:
            return None
        count, sep, digest = value.partition(":")
        if sep and count.isdigit() and len(count) <= 6 and _is_digest(digest):
            return cls(digest, int(count))
        # Releases before the ledger kept the annotation's JSON form here.
        legacy = HotLoopRecord.from_annotation(value) if value.startswith("{") else None
        return legacy.ledger_entry() if legacy is not None else None


def _is_digest(value: str) -> bool:
    return len(value) == _DIGEST_CHARS and all(c in "0123456789abcdef" for c in value)


_DIGEST_CHARS = 16  # 64 bits: it only tells one MachineSet's successive targets apart


def fingerprint(value: Any) -> str:
    """A boot image field's value as our records write it: compact JSON, keys sorted (the
    hot-loop target, `boot-image-previous`), so two records of one value are the same text."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


def target_fingerprint(decision: BootImageDecision) -> str:
    return fingerprint(decision.target)


def target_digest(fingerprint: str) -> str:
    return hashlib.sha256(fingerprint.encode()).hexdigest()[:_DIGEST_CHARS]


def has_record(annotations: Mapping[str, str]) -> bool:
    """True when the object still carries the record of a boot image write of ours."""
    return ANNOTATION_UPDATED_AT in annotations or ANNOTATION_PREVIOUS in annotations


def hot_loop_check(
    annotations: Mapping[str, str],
    decision: BootImageDecision,
    remembered: HotLoopRecord | None = None,
    kept: LedgerEntry | None = None,
    unsent: LedgerEntry | None = None,
) -> HotLoopRecord | None:
    """The record to write with this patch, or None when writing it would be the 4th time (refuse).

    Three copies of the count, the highest for this target wins:
    - `kept`, the claim holder's: survives restarts and any writer of the MachineSet (it is only
      cleared when the MachineSet is opted out, the documented reset). It already counts a write
      that was counted but then refused by the API server (`unsent`, the same entry): that one is
      not counted twice;
    - annotation `boot-image-hot-loop`: survives restarts and a writer that reverts only the boot
      image field;
    - `remembered`, our last write in this process: counts when our whole record vanished (a
      writer that replaces the object with an old copy). A record without the hot-loop annotation
      is an admin's reset of the annotation and memory copies (the holder's still counts).
    """
    fingerprint = target_fingerprint(decision)
    annotated = HotLoopRecord.from_annotation(annotations.get(ANNOTATION_HOT_LOOP))
    if annotated is None and not has_record(annotations):
        annotated = remembered
    count = annotated.count if annotated is not None and annotated.target == fingerprint else 0
    if kept is not None and kept.digest == target_digest(fingerprint):
        count = max(count, kept.count - 1 if kept == unsent else kept.count)
    if count >= HOT_LOOP_LIMIT:
        return None
    return HotLoopRecord(fingerprint, count + 1)


def hot_loop_key(uid: str) -> str:
    """The claim holder's data key for a MachineSet's count (uids are valid ConfigMap keys)."""
    return f"{HOT_LOOP_KEY_PREFIX}{uid}"


def record_annotations(decision: BootImageDecision, hot_loop: HotLoopRecord, now: datetime) -> dict[str, str]:
    record = {
        ANNOTATION_STREAM: decision.stream or "",
        ANNOTATION_UPDATED_AT: format_time(now),
        # The boot image field's value before the patch (CAPI: the template's name), for rollback.
        ANNOTATION_PREVIOUS: fingerprint(decision.capi.old_name if decision.capi is not None else decision.current),
        ANNOTATION_HOT_LOOP: hot_loop.to_annotation(),
    }
    if decision.target_release:
        record[ANNOTATION_RELEASE] = decision.target_release
    return record


def boot_image_patch(
    obj: Mapping[str, Any],
    changes: Sequence[FieldChange],
    annotations: Mapping[str, str],
    holder_uid: str,
) -> JsonPatch:
    """The one JSON patch that claims, changes the boot image field and records (SPEC section 3)."""
    meta = obj.get("metadata") or {}
    ops: JsonPatch = [{"op": "test", "path": "/metadata/resourceVersion", "value": meta.get("resourceVersion")}]
    ops.extend(change_ops(changes))
    ops.extend(claim_ops(meta, holder_uid))
    ops.extend(annotation_ops(meta, annotations))
    return ops


def change_ops(changes: Sequence[FieldChange]) -> JsonPatch:
    """The boot image field changes alone, each guarded by a `test` of the value planned from. Also
    the proposal for a GitOps-managed MachineSet (`BootImageUpdateProposed`, `plan --write-patched`):
    what Git should change, with no claim and none of our bookkeeping."""
    ops: JsonPatch = []
    for change in changes:
        ops.append({"op": "test", "path": pointer(change.path), "value": change.old})
        ops.append({"op": "replace", "path": pointer(change.path), "value": change.new})
    return ops


def claim_ops(meta: Mapping[str, Any], holder_uid: str) -> JsonPatch:
    refs = meta.get("ownerReferences")
    controlled = any(r.get("controller") for r in refs or [] if not is_our_reference(r))
    ours = owner_reference(holder_uid, controller=not controlled)
    if not refs:
        return [{"op": "add", "path": "/metadata/ownerReferences", "value": [ours]}]
    for i, ref in enumerate(refs):
        if is_our_reference(ref):
            if ref == ours:
                return []
            # A stale uid (holder recreated) is repaired in place.
            return [
                {"op": "test", "path": f"/metadata/ownerReferences/{i}/name", "value": CLAIM_HOLDER_NAME},
                {"op": "replace", "path": f"/metadata/ownerReferences/{i}", "value": ours},
            ]
    return [{"op": "add", "path": "/metadata/ownerReferences/-", "value": ours}]


def annotation_ops(meta: Mapping[str, Any], annotations: Mapping[str, str]) -> JsonPatch:
    if not annotations:
        return []
    if not meta.get("annotations"):
        return [{"op": "add", "path": "/metadata/annotations", "value": dict(annotations)}]
    # `add` on an existing member replaces it (RFC 6902 4.1), so one op serves both cases.
    return [
        {"op": "add", "path": pointer(("metadata", "annotations", k)), "value": v} for k, v in annotations.items()
    ]


def release_patch(obj: Mapping[str, Any]) -> JsonPatch | None:
    """Remove our owner reference (and nothing else); None when there is none."""
    meta = obj.get("metadata") or {}
    refs = meta.get("ownerReferences") or []
    indexes = [i for i, ref in enumerate(refs) if is_our_reference(ref)]
    if not indexes:
        return None
    ops: JsonPatch = [{"op": "test", "path": "/metadata/resourceVersion", "value": meta.get("resourceVersion")}]
    for i in reversed(indexes):  # highest index first so earlier indexes stay valid
        ops.append({"op": "remove", "path": f"/metadata/ownerReferences/{i}"})
    return ops
