"""Apply a decision's `FieldChange`s to a copy of the object. Pure: no I/O, no typed models.

Used by `plan --write-patched` (GitOps manifests), and by the daemon's writer and `rollback` to
compute the object they expect after a write. The object is a plain JSON value: everything not
named by a change, unknown providerSpec keys included, is carried over as it was (SPEC section 7,
invariant 1). Each change first checks that the field still holds the value the planner saw, so a
change is never applied to an object that moved on since it was planned.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping
from typing import Any

from ..errors import BootImageControllerError
from .model import FieldChange, JsonPath, dotted


class PatchConflictError(BootImageControllerError):
    """The object does not hold the value a change expects at its field (or the field is gone)."""

    def __init__(self, path: JsonPath, problem: str) -> None:
        self.path = path
        self.problem = problem
        super().__init__(f"{dotted(path)}: {problem}")


_MISSING = object()


def apply_changes(obj: Mapping[str, Any], changes: Iterable[FieldChange], *, check_old: bool = True) -> dict[str, Any]:
    """A deep copy of `obj` with each change's field set to `change.new`.

    With `check_old`, the field must hold `change.old` (a missing field counts as None, and only
    then may it be created); otherwise `PatchConflictError`. The input is never modified.
    """
    out = copy.deepcopy(dict(obj))
    for change in changes:
        _apply(out, change, check_old)
    return out


def _apply(root: dict[str, Any], change: FieldChange, check_old: bool) -> None:
    if not change.path:
        raise PatchConflictError(change.path, "a change must name a field, not the whole object")
    parent = _parent(root, change.path)
    last = change.path[-1]
    current = _child(parent, last)
    if check_old and (None if current is _MISSING else current) != change.old:
        found = "missing" if current is _MISSING else f"{current!r}"
        raise PatchConflictError(change.path, f"expected {change.old!r}, found {found}")
    if isinstance(last, int) and current is _MISSING:
        raise PatchConflictError(change.path, "list index out of range")
    parent[last] = copy.deepcopy(change.new)


def _parent(root: Any, path: JsonPath) -> Any:
    cur = root
    for i, part in enumerate(path[:-1]):
        nxt = _child(cur, part)
        if nxt is _MISSING or not isinstance(nxt, dict | list):
            raise PatchConflictError(path, f"{dotted(path[: i + 1]) or '$'} is missing or not an object or list")
        cur = nxt
    if isinstance(path[-1], int) != isinstance(cur, list):
        raise PatchConflictError(path, f"{dotted(path[:-1]) or '$'} has the wrong type for this change")
    return cur


def _child(container: Any, part: str | int) -> Any:
    if isinstance(part, int):
        if isinstance(container, list) and 0 <= part < len(container):
            return container[part]
        return _MISSING
    if isinstance(container, dict):
        return container.get(part, _MISSING)
    return _MISSING


def changed_paths(before: Any, after: Any, path: JsonPath = ()) -> list[JsonPath]:
    """Paths where two JSON values differ (deepest differing object key or list element).

    For tests and the writer's self-check: after `apply_changes`, only the changes' paths differ.
    """
    if isinstance(before, Mapping) and isinstance(after, Mapping):
        out: list[JsonPath] = []
        for key in sorted(set(before) | set(after), key=str):
            if before.get(key, _MISSING) is _MISSING or after.get(key, _MISSING) is _MISSING:
                out.append((*path, key))
            else:
                out.extend(changed_paths(before[key], after[key], (*path, key)))
        return out
    if isinstance(before, list) and isinstance(after, list) and len(before) == len(after):
        return [p for i, (b, a) in enumerate(zip(before, after, strict=True)) for p in changed_paths(b, a, (*path, i))]
    return [] if before == after and type(before) is type(after) else [path]
