"""Which old infrastructure templates may go (docs/capi.md, "Where the boot image is, and what is written"). Pure.

Templates are immutable: every boot image update of a Cluster API pool creates one, and the old ones
pile up. A template this controller created or replaced goes once nothing needs it any more:
- no MachineSet or MachineDeployment names it (it is nobody's current template);
- it is not the template a current one replaced (kept one generation back, for `rollback`);
- no machine was cloned from it (its infrastructure machine's `cluster.x-k8s.io/cloned-from-name`):
  a Machine of any MachineSet still running from it keeps it, as MCO #6447 keeps them.
Templates named under this controller's first scheme (`<base>-bic-<8 hex>`) are recognised and
retired by the same rule. Templates nobody here created or replaced are never touched.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from ...constants import ANNOTATION_CLONED_FROM_NAME, ANNOTATION_REPLACES
from ..model import get_path
from .resources import is_replaced_template_name


def _annotation(obj: Mapping[str, Any], key: str) -> str | None:
    value = get_path(obj, ("metadata", "annotations", key))
    return value if isinstance(value, str) and value else None


def templates_to_retire(
    templates: Mapping[str, Mapping[str, Any]],
    current: Iterable[str],
    machines: Iterable[Mapping[str, Any]],
) -> list[str]:
    """Names of the templates (of one kind, in one namespace: `templates` by name) that may be
    deleted, given the names MachineSets and MachineDeployments use now and the infrastructure
    machines that exist."""
    in_use = set(current)
    kept = in_use | {r for name in in_use if name in templates and (r := _annotation(templates[name], ANNOTATION_REPLACES))}
    kept |= {name for m in machines if (name := _annotation(m, ANNOTATION_CLONED_FROM_NAME))}
    replaced = {r for t in templates.values() if (r := _annotation(t, ANNOTATION_REPLACES))}
    ours = {name for name, t in templates.items() if _annotation(t, ANNOTATION_REPLACES) or is_replaced_template_name(name)}
    return sorted(name for name in (replaced | ours) if name in templates and name not in kept)


__all__ = ["templates_to_retire"]
