"""Planning one object from a read-only store: the daemon's watch caches or `plan`'s inputs.

Pure. Both the daemon and `plan` plan a Cluster API object with the infrastructure template it
names and the Machine API MachineSet of the same name, and both ask the cloud about the images an
offline plan names and then plan again with the answers (SPEC rule 9). Written once here, over an
`ObjectStore` each of them implements.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any, Protocol

from ..constants import MACHINESET_KIND, MAPI_NAMESPACE, Action, Reason
from .capi.planner import plan_capi
from .capi.resources import INFRA_REF_PATH, capi_kind_key
from .cloud.facts import CloudFacts
from .context import ClusterFacts, PlanningContext
from .model import BootImageDecision, get_path
from .planner import authoritative_api, plan_machine


class ObjectStore(Protocol):
    """Objects by kind: `MachineSet`, `ControlPlaneMachineSet`, a CAPI kind key
    (`MachineSet.cluster.x-k8s.io`) or an infrastructure template kind (`AWSMachineTemplate`)."""

    def get(self, kind: str, namespace: str, name: str) -> Mapping[str, Any] | None: ...

    def list(self, kind: str) -> Sequence[Mapping[str, Any]]: ...


def infra_template(store: ObjectStore, obj: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The infrastructure template a CAPI object's `infrastructureRef` names (None: not found)."""
    ref = get_path(obj, INFRA_REF_PATH)
    if not isinstance(ref, Mapping) or not isinstance(ref.get("name"), str):
        return None
    namespace = str((obj.get("metadata") or {}).get("namespace", ""))
    return store.get(str(ref.get("kind")), namespace, ref["name"])


def mapi_authority(store: ObjectStore, obj: Mapping[str, Any]) -> str | None:
    """For a CAPI MachineSet: the `authoritativeAPI` of the Machine API MachineSet of the same name
    ("" when it has none); None when there is no such MachineSet (or for a MachineDeployment)."""
    if obj.get("kind") != MACHINESET_KIND:
        return None
    twin = store.get(MACHINESET_KIND, MAPI_NAMESPACE, str((obj.get("metadata") or {}).get("name", "")))
    return None if twin is None else (authoritative_api(twin) or "")


def plan_object(obj: Mapping[str, Any], store: ObjectStore, ctx: PlanningContext, facts: ClusterFacts) -> BootImageDecision:
    """The decision for a Machine API object, or for a Cluster API one with what it refers to."""
    if capi_kind_key(obj) is None:
        return plan_machine(obj, ctx.golden, facts, ctx.enrollment)
    template = infra_template(store, obj)
    return plan_capi(obj, dict(template) if template is not None else None, ctx.golden, facts, ctx.enrollment,
                     mapi_authority=mapi_authority(store, obj))


def wants_cloud(decision: BootImageDecision) -> bool:
    """Whether the cloud's answer can change this decision: a patch's target must exist there, an
    unknown boot image may be identified there, and (vSphere) only vCenter knows what a template
    holds."""
    if decision.action is Action.PATCH or decision.reason == Reason.UNKNOWN_BOOT_IMAGE:
        return True
    return decision.reason == Reason.VCENTER_UNAVAILABLE and decision.template is not None


# Given the offline decisions that want the cloud: its answers and the platforms they cover
# (None: no answer, plan offline).
AskCloud = Callable[[list[BootImageDecision]], Awaitable[tuple[CloudFacts, frozenset[str]] | None]]


def with_cloud_answer(facts: ClusterFacts, answer: tuple[CloudFacts, frozenset[str]]) -> ClusterFacts:
    """`facts` with the cloud's answers and the platforms they cover, to plan again with."""
    return replace(facts, cloud=answer[0], cloud_platforms=answer[1])


async def plan_verified(
    plan: Callable[[ClusterFacts], list[BootImageDecision]], facts: ClusterFacts, ask: AskCloud | None
) -> list[BootImageDecision]:
    """Plan offline; where the cloud can confirm a target or identify an image, ask it and plan
    again with its answers (rule 9: never patch to an image the cloud does not have)."""
    decisions = plan(facts)
    asking = [d for d in decisions if wants_cloud(d)]
    if ask is None or not asking:
        return decisions
    answer = await ask(asking)
    if answer is None:
        return decisions
    return plan(with_cloud_answer(facts, answer))


__all__ = ["AskCloud", "ObjectStore", "infra_template", "mapi_authority", "plan_object", "plan_verified", "wants_cloud",
           "with_cloud_answer"]
