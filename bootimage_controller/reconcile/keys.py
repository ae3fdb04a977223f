"""The queue's keys, and what about an object is worth a key.

A machine object's key is `<kind>/<namespace>/<name>`, the kind being the informer's role
(`MachineSet`, `ControlPlaneMachineSet`, `MachineSet.cluster.x-k8s.io`, ...). Two keys stand for
work of the whole fleet: `@status` (recompute conditions from every outcome) and `@claims` (the
claim holders' lifecycle).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..constants import CAPI_MACHINESET, CAPI_NAMESPACE, CPMS_KIND, MACHINESET_KIND
from ..core.capi.resources import capi_kind_key
from ..core.claims import is_our_reference
from ..core.cluster import provider_spec_platforms
from ..core.planner import authoritative_api

STATUS_KEY = "@status"
CLAIMS_KEY = "@claims"


def machine_key(obj: Mapping[str, Any]) -> str:
    """`<informer role>/<namespace>/<name>`: the role is the kind, `Kind.cluster.x-k8s.io` for CAPI."""
    meta = obj.get("metadata") or {}
    role = capi_kind_key(obj) or obj.get("kind", MACHINESET_KIND)
    return f"{role}/{meta.get('namespace', '')}/{meta.get('name', '')}"


def split_key(key: str) -> tuple[str, str, str]:
    """(kind, namespace, name) of a machine key."""
    kind, _, rest = key.partition("/")
    namespace, _, name = rest.partition("/")
    return kind, namespace, name


def uid_of(obj: Mapping[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("uid", ""))


def is_claimed(obj: Mapping[str, Any]) -> bool:
    """The object carries our owner reference (to either claim holder)."""
    return any(is_our_reference(r) for r in (obj.get("metadata") or {}).get("ownerReferences") or [])


def relevant_view(obj: Mapping[str, Any]) -> tuple[Any, ...]:
    """What the planner reads of an object: an update that leaves it alone (replicas, status, our
    own resourceVersion bump) is not worth a reconcile (the MCO's filter: labels, annotations,
    owner references, providerSpec)."""
    meta = obj.get("metadata") or {}
    spec = obj.get("spec") or {}
    template = spec.get("template") or {}
    if capi_kind_key(obj) is not None:
        # The template it names, its failure domain, and (MachineDeployments) the rollout's progress.
        inner = template.get("spec") or {}
        rollout = (meta.get("generation"), obj.get("status"))
        return (meta.get("labels"), meta.get("annotations"), meta.get("ownerReferences"),
                inner.get("infrastructureRef"), inner.get("failureDomain"), template.get("metadata"), rollout)
    provider = (
        ((template.get("machines_v1beta1_machine_openshift_io") or {}).get("spec") or {}).get("providerSpec")
        if obj.get("kind") == CPMS_KIND
        else (template.get("spec") or {}).get("providerSpec")
    )
    return (meta.get("labels"), meta.get("annotations"), meta.get("ownerReferences"), provider, template.get("metadata"),
            authoritative_api(obj))


@dataclass(frozen=True, slots=True)
class MachineUpdate:
    """What a machine object's update asks of the triggers."""

    key: str
    platform_evidence: bool  # its providerSpec kind changed: the platform read from them may have
    mirror: str | None  # a Machine API pool that changed sides: its CAPI mirror's key (its decision changes)


def machine_update(old: Mapping[str, Any], new: Mapping[str, Any]) -> MachineUpdate | None:
    """The update from `old` to `new` of a machine object, or None when it leaves alone what the
    planner reads (`relevant_view`)."""
    if relevant_view(old) == relevant_view(new):
        return None
    mirror = None
    if new.get("kind") == MACHINESET_KIND and authoritative_api(old) != authoritative_api(new):
        mirror = f"{CAPI_MACHINESET}/{CAPI_NAMESPACE}/{(new.get('metadata') or {}).get('name', '')}"
    return MachineUpdate(machine_key(new), provider_spec_platforms([old]) != provider_spec_platforms([new]), mirror)
