"""What a rollback writes (SPEC section 3, `rollback`; section 3b, a failed first boot): the boot
image recorded in `boot-image-previous` put back. Pure: `commands/rollback.py` and the daemon's
roll back of a failed image both build their patch from `rollback_changes`."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from ..constants import (
    ANNOTATION_BOOT_IMAGE_VERIFIED,
    ANNOTATION_HOT_LOOP,
    ANNOTATION_PREVIOUS,
    ANNOTATION_RELEASE,
    ANNOTATION_UPDATED_AT,
)
from ..errors import InputError
from .capi.resources import CapiObject, capi_kind_key
from .claims import HotLoopRecord, JsonPatch, annotation_ops, boot_image_patch, fingerprint, pointer
from .model import FieldChange, MachineResource, as_mapping, get_path, parse_dotted
from .times import format_time
from .verification import BootVerdict


def rollback_changes(obj: dict[str, Any], field: str) -> tuple[list[FieldChange], Any]:
    """The change restoring the previous value, and that value. Raises InputError when impossible."""
    resource: MachineResource | CapiObject = (
        CapiObject.from_object(obj) if capi_kind_key(obj) is not None else MachineResource.from_object(obj)
    )
    raw = resource.annotations.get(ANNOTATION_PREVIOUS)
    if not raw:
        raise InputError(resource.display, f"metadata.annotations[{ANNOTATION_PREVIOUS!r}]", "no previous boot image recorded")
    try:
        previous = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise InputError(resource.display, f"metadata.annotations[{ANNOTATION_PREVIOUS!r}]", f"not JSON: {exc.msg}") from None
    path = parse_dotted(field)
    current = get_path(obj, path)
    if current is None:
        raise InputError(resource.display, field, "the boot image field is missing")
    if current == previous:
        return [], previous
    return [FieldChange(path, current, previous)], previous


def wrote_current(annotations: Mapping[str, str], current: Any) -> bool:
    """Whether the boot image the MachineSet names now is the one our last write put there: our
    hot-loop record names the target of every write we make, and a value someone else wrote since
    differs from it. Only then is a failed image ours to roll back (SPEC section 3b)."""
    record = HotLoopRecord.from_annotation(annotations.get(ANNOTATION_HOT_LOOP))
    return record is not None and current is not None and record.target == fingerprint(current)


def rollback_patch(obj: Mapping[str, Any], changes: Sequence[FieldChange], holder_uid: str, now: datetime,
                   annotations: Mapping[str, str]) -> JsonPatch:
    """The one JSON patch of a roll back, `rollback NAME`'s and the daemon's after a failed first
    boot alike: the field put back, claimed, `boot-image-previous` (the value replaced, so the roll
    back can itself be undone) and the time recorded, with `annotations` (what each adds). The
    release record goes: the restored image's release is judged afresh rather than kept wrong."""
    record = {ANNOTATION_PREVIOUS: fingerprint(changes[0].old), ANNOTATION_UPDATED_AT: format_time(now), **annotations}
    ops = boot_image_patch(obj, changes, record, holder_uid)
    if ANNOTATION_RELEASE in as_mapping(get_path(obj, ("metadata", "annotations"))):
        ops.append({"op": "remove", "path": pointer(("metadata", "annotations", ANNOTATION_RELEASE))})
    return ops


def failed_image_rollback(obj: dict[str, Any], field: str, verdict: BootVerdict, holder_uid: str,
                          now: datetime) -> tuple[JsonPatch, Any]:
    """The roll back after `verdict` failed the current image, and the value it puts back: the
    verdict is recorded with the failed image kept (never written again while the golden data
    names it). Raises `InputError` when there is no usable record to roll back to."""
    changes, previous = rollback_changes(obj, field)
    if not changes or verdict.image is None:
        raise InputError(f"MachineSet {get_path(obj, ('metadata', 'name'))}", field,
                         "the boot image field already holds the recorded previous image")
    record = {ANNOTATION_BOOT_IMAGE_VERIFIED: verdict.with_failed(verdict.image).to_annotation()}
    return rollback_patch(obj, changes, holder_uid, now, record), previous


def verdict_patch(obj: Mapping[str, Any], verdict: BootVerdict) -> JsonPatch:
    """Record `verdict` (annotation `boot-image-verified`), guarded by the resourceVersion."""
    meta = as_mapping(obj.get("metadata"))
    return [{"op": "test", "path": "/metadata/resourceVersion", "value": meta.get("resourceVersion")},
            *annotation_ops(meta, {ANNOTATION_BOOT_IMAGE_VERIFIED: verdict.to_annotation()})]
