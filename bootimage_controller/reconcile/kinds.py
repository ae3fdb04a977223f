"""What differs between the machine objects of the Machine API and of the Cluster API, behind one
small interface the machine reconciler drives: how an object is parsed, read afresh and claimed,
and what a boot image write needs before and after it.

- Machine API MachineSets and the ControlPlaneMachineSet: the Ignition stub Secret must hold a
  spec 3 config before a boot image that needs one is written (SPEC rule 8).
- Cluster API MachineSets and MachineDeployments: the boot image lives in an infrastructure
  template, which is immutable by convention. A new template (named from its content) is created
  before `infrastructureRef` is pointed at it; after the write, the template two generations old
  is deleted once nothing refers to it (exactly one previous template is kept, for rollback).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Protocol

import structlog

from ..constants import MACHINESET_KIND
from ..core.capi.resources import INFRA_REF_PATH, CapiObject, capi_kind_key
from ..core.capi.retire import templates_to_retire
from ..core.capi.work import CapiWork
from ..core.model import BootImageDecision, MachineResource, Refusal, get_path
from ..kube.api_errors import ApiError
from ..kube.fence import UpgradeGateClosed, write_preconditions
from .claim_reconciler import ClaimScope, fresh_capi
from .store import InformerStore

log = structlog.get_logger(__name__)

# Before a boot image patch: whether the MachineSet's user data can boot it (stub_ignition).
SecretCheck = Callable[[MachineResource], Awaitable[Refusal | None]]
UpgradeGate = Callable[[], UpgradeGateClosed | None]


class MachineKind(Protocol):
    scope: ClaimScope

    def resource(self, obj: Mapping[str, Any]) -> MachineResource | CapiObject: ...

    async def read(self, obj: Mapping[str, Any]) -> dict[str, Any] | None:
        """The object as the API server has it now (None: gone)."""
        ...

    async def before_write(self, resource: MachineResource | CapiObject, decision: BootImageDecision) -> Refusal | None:
        """Why this object's boot image must not be written now (None: it may, and what the patch
        needs in place before it goes now is)."""
        ...

    async def after_write(self, decision: BootImageDecision) -> None:
        """What follows a written boot image (failures here are logged, never the write's)."""
        ...


class MachineApiKind:
    def __init__(self, scope: ClaimScope, stub_check: SecretCheck | None = None) -> None:
        self.scope = scope
        self.stub_check = stub_check

    def resource(self, obj: Mapping[str, Any]) -> MachineResource:
        return MachineResource.from_object(obj)

    async def read(self, obj: Mapping[str, Any]) -> dict[str, Any] | None:
        meta = obj.get("metadata") or {}
        return await self.scope.writer.get(str(obj.get("kind", MACHINESET_KIND)), str(meta.get("namespace", "")),
                                           str(meta.get("name", "")))

    async def before_write(self, resource: MachineResource | CapiObject, decision: BootImageDecision) -> Refusal | None:
        """The stub Ignition Secret must hold a config the new boot image can read (SPEC rule 8)."""
        if self.stub_check is None or not isinstance(resource, MachineResource):
            return None
        return await self.stub_check(resource)

    async def after_write(self, decision: BootImageDecision) -> None:
        return None


class ClusterApiKind:
    def __init__(self, scope: ClaimScope, store: InformerStore, capi_version: str, upgrade_gate: UpgradeGate) -> None:
        self.scope = scope
        self.store = store
        self.capi_version = capi_version
        self.upgrade_gate = upgrade_gate

    def resource(self, obj: Mapping[str, Any]) -> CapiObject:
        return CapiObject.from_object(obj)

    async def read(self, obj: Mapping[str, Any]) -> dict[str, Any] | None:
        meta = obj.get("metadata") or {}
        version = str(obj.get("apiVersion") or "").partition("/")[2] or None
        return await self.scope.writer.get(str(capi_kind_key(obj)), str(meta.get("namespace", "")),
                                           str(meta.get("name", "")), version)

    async def before_write(self, resource: MachineResource | CapiObject, decision: BootImageDecision) -> Refusal | None:
        """The new template first: the patch that points at it may only go once it exists."""
        if decision.capi is not None:
            with write_preconditions(self.upgrade_gate):
                await self.scope.writer.create_template(decision.capi.new_template)
        return None

    async def after_write(self, decision: BootImageDecision) -> None:
        """The patch is written: a cleanup that fails now is retried after the next update."""
        if decision.capi is None:
            return
        try:
            await self._retire_template(decision.capi)
        except ApiError as exc:
            log.warning("old infrastructure template not deleted; tried again after the next update",
                        kind=decision.capi.template_kind, namespace=decision.capi.namespace, error=str(exc))

    async def _retire_template(self, work: CapiWork) -> None:
        """Delete the old templates nothing needs any more (core.capi.retire): judged from live lists,
        not the cache, so a reference or a machine made a moment ago keeps its template."""
        templates = {str(get_path(t, ("metadata", "name"))): t for t in self.store.list(work.template_kind)
                     if get_path(t, ("metadata", "namespace")) == work.namespace}
        current = {work.new_name}
        for obj in await fresh_capi(self.scope.writer.custom, self.capi_version):
            ref = get_path(obj, INFRA_REF_PATH) or {}
            if ref.get("kind") == work.template_kind and isinstance(ref.get("name"), str):
                current.add(ref["name"])
        machines = await self.scope.writer.list_infra_machines(work.template_kind, work.namespace)
        for name in templates_to_retire(templates, current, machines):
            meta = templates[name].get("metadata") or {}
            with write_preconditions(self.upgrade_gate):
                await self.scope.writer.delete_template(work.template_kind, str(templates[name].get("apiVersion")),
                                                        work.namespace, name, str(meta.get("uid", "")))
