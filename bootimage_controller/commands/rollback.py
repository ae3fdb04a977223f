"""`bootimage-controller rollback NAME`: restore the boot image recorded in `boot-image-previous`.

The rollback is one claimed, recorded JSON patch like any boot image write, plus the per-MachineSet
opt-out annotation (`boot-image-updates: Disabled`): without it the daemon would put the golden
image straight back, and the two would hot-loop. Remove that annotation to resume updates.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import structlog
from kubernetes_asyncio.client import CustomObjectsApi

from ..constants import (
    ANNOTATION_BOOT_IMAGE_UPDATES,
    BOOT_IMAGE_UPDATES_DISABLED,
    CAPI_MACHINESET,
    CAPI_NAMESPACE,
    CLAIM_HOLDER_NAME,
    CLAIM_HOLDER_NAMESPACE,
    MACHINESET_KIND,
)
from ..core.capi.resources import INFRA_REF_NAME_PATH
from ..core.model import dotted, get_path
from ..core.rollback import rollback_changes, rollback_patch
from ..errors import InputError
from ..kube.api_errors import ApiError, Conflict, NotFound
from ..kube.capi_discovery import discover_capi_version
from ..kube.core_api import CoreApi
from ..reconcile.writer import MachineSetWriter

log = structlog.get_logger(__name__)

async def rollback_machineset(api: Any, namespace: str, name: str, *, dry_run: bool = False) -> int:
    """A Machine API MachineSet, or (namespace openshift-cluster-api) a Cluster API MachineSet:
    there the boot image field is `infrastructureRef.name`, pointed back at the previous template."""
    custom, core = CustomObjectsApi(api), CoreApi(api)
    capi = namespace == CAPI_NAMESPACE
    writer = MachineSetWriter(custom, core, CAPI_NAMESPACE if capi else CLAIM_HOLDER_NAMESPACE)
    if capi:
        obj = await writer.get(CAPI_MACHINESET, namespace, name, await discover_capi_version(api))
    else:
        obj = await writer.get(MACHINESET_KIND, namespace, name)
    if obj is None:
        print(f"error: MachineSet {namespace}/{name} not found")
        return 1
    field = dotted(INFRA_REF_NAME_PATH) if capi else boot_image_field(obj)
    try:
        changes, previous = rollback_changes(obj, field)
    except InputError as exc:
        print(f"error: {exc}")
        return 1
    if not changes:
        print(f"{namespace}/{name} already boots its previous image")
        return 0
    print(f"{namespace}/{name}: {field}: {json.dumps(changes[0].old)} -> {json.dumps(previous)}")
    if dry_run:
        return 0
    holder = await writer.ensure_holder()
    if holder.deleting:
        # A claim now would point at a holder about to go, and the garbage collector would then
        # delete the MachineSet. The daemon is releasing every claim; roll back once it is done.
        print(f"error: the claim holder {writer.holder_namespace}/{CLAIM_HOLDER_NAME} is being deleted; run rollback again once it is gone")
        return 1
    ops = rollback_patch(obj, changes, holder.uid, datetime.now(UTC),
                         {ANNOTATION_BOOT_IMAGE_UPDATES: BOOT_IMAGE_UPDATES_DISABLED})
    try:
        await writer.patch(obj, ops, "rollback")
    except (Conflict, NotFound) as exc:
        print(f"error: rollback of {namespace}/{name} not applied ({exc.describe()}); run it again")
        return 1
    except ApiError as exc:
        print(f"error: rollback of {namespace}/{name} refused by the API server: {exc.describe()}")
        return 1
    print(
        f"rolled back; boot image updates are now disabled for {namespace}/{name} "
        f"(remove annotation {ANNOTATION_BOOT_IMAGE_UPDATES} to resume)"
    )
    return 0


def boot_image_field(obj: dict[str, Any]) -> str:
    """Where the boot image lives for this MachineSet's platform (the planner's Target.field)."""
    spec = get_path(obj, ("spec", "template", "spec", "providerSpec", "value")) or {}
    kind = spec.get("kind") if isinstance(spec, dict) else None
    base = "spec.template.spec.providerSpec.value"
    if kind == "AWSMachineProviderConfig":
        return f"{base}.ami"
    if kind == "AzureMachineProviderSpec":
        return f"{base}.image"
    if kind == "VSphereMachineProviderSpec":
        return f"{base}.template"
    if kind == "GCPMachineProviderSpec":
        for i, disk in enumerate(spec.get("disks") or []):
            if isinstance(disk, dict) and disk.get("boot"):
                return f"{base}.disks[{i}].image"
    raise InputError(f"MachineSet {obj['metadata'].get('name')}", f"{base}.kind", f"unsupported provider kind {kind!r}")
