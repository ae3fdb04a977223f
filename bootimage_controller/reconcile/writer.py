"""Every MachineSet write the daemon makes, and the claim holder's lifecycle (SPEC section 3).

Writes are JSON patches that test `/metadata/resourceVersion` first (see `claims.py`). Every
refusal leaves as the typed error of `kube.api_errors`: `Conflict` (a 409, or a failed `test`) means
someone else wrote in between, and the caller re-reads and re-plans, never resending the same
patch; `NotFound` that the object is gone; `Invalid` or `Forbidden` carry
the API server's own reason and message. Transient failures (429, 5xx, broken connections) are
retried with backoff by `kube.retry.api_call`.

The garbage collector must never delete a MachineSet because of us (SPEC invariant 4): the holder
carries a finalizer, so while any MachineSet still refers to it, it cannot disappear; release
removes every reference first and only then the finalizer.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import partial
from typing import Any

import structlog
from kubernetes_asyncio.client import CustomObjectsApi

from ..constants import (
    CAPI_GROUP,
    CAPI_KINDS,
    CAPI_MACHINEDEPLOYMENT_PLURAL,
    CAPI_VERSIONS,
    CLAIM_FINALIZER,
    CLAIM_HOLDER_NAME,
    CLAIM_HOLDER_NAMESPACE,
    CPMS_KIND,
    CPMS_PLURAL,
    CPMS_VERSION,
    INFRA_MACHINES,
    INFRA_TEMPLATES,
    INFRASTRUCTURE_GROUP,
    JSON_PATCH,
    MACHINE_API_GROUP,
    MACHINE_PLURAL,
    MACHINE_VERSION,
    MACHINESET_PLURAL,
    MACHINESET_VERSION,
    MERGE_PATCH,
)
from ..core.capi.resources import same_template_spec
from ..core.claims import HotLoopRecord, JsonPatch, boot_image_patch, record_annotations, release_patch
from ..core.model import BootImageDecision
from ..kube.api_errors import ApiError, Conflict, NotFound
from ..kube.client import call_and_discard, object_path, write_and_discard
from ..kube.core_api import CoreApi
from ..kube.fence import UpgradeGateClosed, write_preconditions
from ..kube.retry import api_call, gave_up_on_conflicts

log = structlog.get_logger(__name__)

# Reads of the claim holder before giving up on a race with another writer (the reconcile retries).
HOLDER_ATTEMPTS = 5


@dataclass(frozen=True)
class Holder:
    uid: str
    deleting: bool


class MachineSetWriter:
    """Writes to the machine objects of one namespace and its claim holder (an owner reference
    must name an object in its dependent's namespace: the Machine API's holder lives in
    openshift-machine-api, the Cluster API's in openshift-cluster-api)."""

    def __init__(self, custom: CustomObjectsApi, core: CoreApi, holder_namespace: str = CLAIM_HOLDER_NAMESPACE) -> None:
        # Typed as Any: kubernetes_asyncio's signatures omit `_content_type`, which every patch
        # here must pass (its default for a list body is right, for a dict body it is not).
        self.custom: Any = custom
        self.core = core
        self.holder_namespace = holder_namespace
        self.writes = 0  # every MachineSet write attempted, for tests and benchmarks

    # ---- the claim holder -----------------------------------------------------------------
    async def ensure_holder(self) -> Holder:
        """Get the holder ConfigMap, (re)creating it or restoring its finalizer when needed.

        Two workers may find it missing (or without its finalizer) at once: the one that loses the
        create (409) or the finalizer patch (a failed `test`, or deleted meanwhile) reads it again
        and uses what the other one wrote; `HOLDER_ATTEMPTS` such races, then `Conflict`.
        """
        for _ in range(HOLDER_ATTEMPTS):
            cm = await self._read_holder()
            if cm is None:
                try:
                    return await self._create_holder()
                except Conflict:
                    continue  # created concurrently: use that one
            meta = cm.metadata
            if meta.deletion_timestamp is not None or CLAIM_FINALIZER in (meta.finalizers or []):
                return Holder(meta.uid, deleting=meta.deletion_timestamp is not None)  # usable (or going: wait)
            ops: JsonPatch = [
                {"op": "test", "path": "/metadata/resourceVersion", "value": meta.resource_version},
                {"op": "add", "path": "/metadata/finalizers", "value": [*(meta.finalizers or []), CLAIM_FINALIZER]},
            ]
            try:
                await self._patch_holder(ops)
            except (Conflict, NotFound):
                continue  # changed or deleted while its finalizer was restored: read it again
            return Holder(meta.uid, deleting=False)
        raise gave_up_on_conflicts("claim holder", HOLDER_ATTEMPTS)

    async def _read_holder(self) -> Any:
        """The holder ConfigMap, or None when it does not exist."""
        try:
            return await api_call(
                partial(self.core.read_namespaced_config_map, CLAIM_HOLDER_NAME, self.holder_namespace),
                what="get claim holder",
            )
        except NotFound:
            return None

    async def _create_holder(self) -> Holder:
        body = {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {
                "name": CLAIM_HOLDER_NAME,
                "namespace": self.holder_namespace,
                "finalizers": [CLAIM_FINALIZER],
                "labels": {"app.kubernetes.io/name": "bootimage-controller"},
                "annotations": {
                    "description": "Owner of MachineSets whose boot images bootimage-controller manages. "
                    "Run `bootimage-controller release-claims` before deleting it."
                },
            },
            "data": {},
        }
        cm = await api_call(partial(self.core.create_namespaced_config_map, self.holder_namespace, body),
                            what="create claim holder")
        log.info("claim holder created", name=CLAIM_HOLDER_NAME, uid=cm.metadata.uid)
        return Holder(cm.metadata.uid, deleting=False)

    # The holder's writes leave the answer unread (`send_and_discard`): nothing uses it, and making
    # a V1ConfigMap model of it cost a millisecond, and the first time the model modules' imports,
    # on the way to the pass's first patch (issue 36).
    async def _patch_holder(self, ops: JsonPatch) -> None:
        await api_call(
            partial(call_and_discard, self.core.patch_namespaced_config_map, CLAIM_HOLDER_NAME, self.holder_namespace,
                    ops, _content_type=JSON_PATCH),
            what="patch claim holder",
        )

    async def keep_hot_loop(self, entries: Mapping[str, str | None]) -> None:
        """Set (or, with None, remove) hot-loop counts in the holder's data: a JSON merge patch of
        those keys only, so concurrent workers writing other MachineSets' keys never collide."""
        await api_call(
            partial(call_and_discard, self.core.patch_namespaced_config_map, CLAIM_HOLDER_NAME, self.holder_namespace,
                    {"data": dict(entries)}, _content_type=MERGE_PATCH),
            what="patch claim holder hot-loop counts",
        )

    async def remove_holder_finalizer(self) -> None:
        """Drop our finalizer (the caller has checked no MachineSet refers to the holder). Raises
        `Conflict` when the holder changed meanwhile (list again and call again), as every write
        here does; a holder already gone or without it is done."""
        cm = await self._read_holder()
        if cm is None:
            return
        finalizers = list(cm.metadata.finalizers or [])
        if CLAIM_FINALIZER not in finalizers:
            return
        finalizers.remove(CLAIM_FINALIZER)
        ops: JsonPatch = [
            {"op": "test", "path": "/metadata/resourceVersion", "value": cm.metadata.resource_version},
            {"op": "replace", "path": "/metadata/finalizers", "value": finalizers},
        ]
        try:
            await self._patch_holder(ops)
        except NotFound:
            return
        log.info("claim holder finalizer removed", name=CLAIM_HOLDER_NAME)

    # ---- MachineSets --------------------------------------------------------------------------
    async def patch_boot_image(
        self, obj: Mapping[str, Any], decision: BootImageDecision, hot: HotLoopRecord, holder: Holder
    ) -> None:
        """The decision's changes, our record of them (`hot`: this write's count) and our claim, in
        one JSON patch. Raises `Conflict` (re-read and re-plan), `NotFound` (deleted meanwhile),
        other `ApiError`s."""
        ops = boot_image_patch(obj, decision.changes, record_annotations(decision, hot, now_utc()), holder.uid)
        await self.patch(obj, ops, "patch boot image")

    async def claim(self, obj: Mapping[str, Any], holder: Holder) -> bool:
        """Only our owner reference (a MachineSet handed over from the MCO, whose boot image needs
        no change now): the MCO skips it from then on. False when it was ours already."""
        ops = boot_image_patch(obj, (), {}, holder.uid)
        if len(ops) == 1:  # only the resourceVersion test: already ours
            return False
        await self.patch(obj, ops, "claim")
        return True

    async def release(self, obj: Mapping[str, Any]) -> None:
        ops = release_patch(obj)
        if ops is not None:
            await self.patch(obj, ops, "release claim")

    async def patch(self, obj: Mapping[str, Any], ops: JsonPatch, what: str) -> None:
        """Send a JSON patch built by `claims.py` (its first op tests the resourceVersion)."""
        meta = obj.get("metadata") or {}
        name, namespace = meta.get("name"), meta.get("namespace")
        group, version, plural = machine_resource(obj)
        path = object_path(group, version, str(namespace), plural, str(name))
        self.writes += 1
        try:
            await api_call(
                # The answer is not read: the watch brings the new version to the cache.
                partial(write_and_discard, self.custom.api_client, "PATCH", path, ops, JSON_PATCH),
                what=f"{what} {namespace}/{name}",
            )
        except Conflict:
            log.info("write conflict, will re-read", namespace=namespace, name=name, what=what)
            raise
        except NotFound:
            raise
        except ApiError as error:
            log.warning(
                "write failed", namespace=namespace, name=name, what=what,
                code=error.status, reason=error.reason, message=error.message,
            )
            raise

    async def get(self, kind: str, namespace: str, name: str, version: str | None = None) -> dict[str, Any] | None:
        """`kind`: MachineSet, ControlPlaneMachineSet or a CAPI kind key (`version`: its version)."""
        group, default_version, plural = _resource_for_kind(kind)
        try:
            obj: dict[str, Any] = await api_call(
                partial(self.custom.get_namespaced_custom_object, group, version or default_version, namespace, plural,
                        name),
                what=f"get {namespace}/{name}",
            )
        except NotFound:
            return None
        return obj

    # ---- canary Machines (SPEC section 3b, core/canary.py) ----------------------------------------
    async def create_machine(self, body: Mapping[str, Any]) -> bool:
        """Create a canary Machine. False when one of that name exists: the canary's name comes from
        its MachineSet and image, so that is the same canary (another reconcile, a restart)."""
        meta = body.get("metadata") or {}
        namespace, name = str(meta.get("namespace")), str(meta.get("name"))
        self.writes += 1
        try:
            await api_call(
                partial(call_and_discard, self.custom.create_namespaced_custom_object, MACHINE_API_GROUP,
                        MACHINE_VERSION, namespace, MACHINE_PLURAL, dict(body)),
                what=f"create canary Machine {namespace}/{name}",
            )
        except Conflict:
            return False
        log.info("canary Machine created", namespace=namespace, name=name)
        return True

    async def delete_machine(self, namespace: str, name: str, uid: str) -> bool:
        """Delete one canary Machine, only the one with this uid. False when gone already."""
        return await self._delete_exactly(MACHINE_API_GROUP, MACHINE_VERSION, MACHINE_PLURAL, namespace, name, uid,
                                          "canary Machine", "canary Machine deleted")

    # ---- CAPI infrastructure templates ---------------------------------------------------------
    async def create_template(self, body: Mapping[str, Any]) -> None:
        """Create a template written by the CAPI planner. Its name comes from its content: one that
        exists already with the same spec is the same template (a retry, another replica)."""
        group, _, version = str(body.get("apiVersion")).partition("/")
        kind = str(body.get("kind"))
        plural = INFRA_TEMPLATES[kind][1]
        meta = body.get("metadata") or {}
        namespace, name = str(meta.get("namespace")), str(meta.get("name"))
        self.writes += 1
        try:
            await api_call(
                partial(call_and_discard, self.custom.create_namespaced_custom_object, group, version, namespace,
                        plural, dict(body)),
                what=f"create {kind} {namespace}/{name}",
            )
            log.info("infrastructure template created", kind=kind, namespace=namespace, name=name)
            return
        except Conflict:
            pass  # exists: the same one, or another of that name (below)
        existing = await api_call(
            partial(self.custom.get_namespaced_custom_object, group, version, namespace, plural, name),
            what=f"get {kind} {namespace}/{name}",
        )
        if not same_template_spec(kind, body.get("spec"), existing.get("spec")):
            raise Conflict(f"create {kind} {namespace}/{name}", 409, "AlreadyExists",
                           "a template of that name exists with another spec; not using it")

    async def list_infra_machines(self, template_kind: str, namespace: str) -> list[dict[str, Any]]:
        """The infrastructure machines cloned from templates of this kind (none without the CRD)."""
        version, plural = INFRA_MACHINES[template_kind]
        try:
            found = await api_call(
                partial(self.custom.list_namespaced_custom_object, INFRASTRUCTURE_GROUP, version, namespace, plural),
                what=f"list {plural}.{INFRASTRUCTURE_GROUP}",
            )
        except NotFound:
            return []
        items: list[dict[str, Any]] = found.get("items", [])
        return items

    async def delete_template(self, kind: str, api_version: str, namespace: str, name: str, uid: str) -> bool:
        """Delete one template, only the one with this uid (a precondition). False when gone already."""
        group, _, version = api_version.partition("/")
        return await self._delete_exactly(group, version, INFRA_TEMPLATES[kind][1], namespace, name, uid, kind,
                                          "infrastructure template deleted", kind=kind)

    async def _delete_exactly(self, group: str, version: str, plural: str, namespace: str, name: str, uid: str,
                              what: str, said: str, **logged: str) -> bool:
        """Delete the object of this uid, never another that took its name. False when it is gone."""
        body = {"apiVersion": "v1", "kind": "DeleteOptions", "preconditions": {"uid": uid}}
        self.writes += 1
        try:
            await api_call(
                partial(call_and_discard, self.custom.delete_namespaced_custom_object, group, version, namespace,
                        plural, name, body=body),
                what=f"delete {what} {namespace}/{name}",
            )
        except (NotFound, Conflict):  # gone, or another object of that name now
            return False
        log.info(said, **logged, namespace=namespace, name=name)
        return True


async def guarded_patch(writer: MachineSetWriter, upgrade_gate: Callable[[], UpgradeGateClosed | None],
                        obj: Mapping[str, Any], ops: JsonPatch, what: str) -> tuple[bool, str | None]:
    """One patch of a record (a boot verdict, a roll back) under the upgrade gate: (applied, the
    refusal in words). Not applied without a refusal: the object changed or went first (a conflict,
    deleted) or the gate closed; the watch event of that change brings the MachineSet back."""
    try:
        with write_preconditions(upgrade_gate):
            await writer.patch(obj, ops, what)
    except (Conflict, NotFound, UpgradeGateClosed):
        return False, None
    except ApiError as exc:
        return False, f"{what}: {exc.describe()}"
    return True, None


def machine_resource(obj: Mapping[str, Any]) -> tuple[str, str, str]:
    """(group, version, plural) of a MachineSet, ControlPlaneMachineSet or CAPI object."""
    api_version = str(obj.get("apiVersion") or "")
    group, _, version = api_version.partition("/")
    if group == CAPI_GROUP:
        plural = CAPI_MACHINEDEPLOYMENT_PLURAL if obj.get("kind") == "MachineDeployment" else MACHINESET_PLURAL
        return CAPI_GROUP, version, plural
    if obj.get("kind") == CPMS_KIND:
        return MACHINE_API_GROUP, CPMS_VERSION, CPMS_PLURAL
    return MACHINE_API_GROUP, MACHINESET_VERSION, MACHINESET_PLURAL


def _resource_for_kind(kind: str) -> tuple[str, str, str]:
    if kind in CAPI_KINDS:
        return CAPI_GROUP, CAPI_VERSIONS[-1], CAPI_KINDS[kind]
    if kind == CPMS_KIND:
        return MACHINE_API_GROUP, CPMS_VERSION, CPMS_PLURAL
    return MACHINE_API_GROUP, MACHINESET_VERSION, MACHINESET_PLURAL


def now_utc() -> datetime:
    return datetime.now(UTC)
