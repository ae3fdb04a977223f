"""What a rollback writes (SPEC section 3, `rollback`; section 3b, a failed first boot): the boot
image recorded in `boot-image-previous` put back. Pure: `commands/rollback.py` and the daemon's
roll back of a failed image both build their patch from `rollback_changes`."""

from __future__ import annotations

import json
from typing import Any

from ..constants import ANNOTATION_PREVIOUS
from ..errors import InputError
from .capi.resources import CapiObject, capi_kind_key
from .model import FieldChange, MachineResource, get_path, parse_dotted


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
