"""Boot verification of Cluster API pools (SPEC section 3b). Pure.
docs/capi.md, "Is the new boot image good?", says it for administrators.

A Cluster API Machine says how its boot went (`status.phase`, `nodeRef`, the failure) and names its
infrastructure machine (`spec.infrastructureRef`: an AWSMachine, GCPMachine, AzureMachine), which
holds the boot image the instance was created from (cloned from the template the MachineSet named
then) and the cloud's error. This module joins the two into the same `MachineFacts` the Machine
API's Machines give, so one `judge` decides for both APIs with the same rules of which failures are
the image's.

Which Machines count for which object, as the Cluster API counts them:
- a MachineSet: the Machines it owns (controller owner reference, by uid); an orphan labelled
  `cluster.x-k8s.io/set-name` with its name (its controller would adopt it);
- a MachineDeployment: the Machines labelled `cluster.x-k8s.io/deployment-name` with its name (its
  MachineSets' Machines; the MachineSets themselves are never written, `OwnedByMachineDeployment`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Any

from ...constants import (
    CAPI_GROUP,
    CAPI_MACHINEDEPLOYMENT,
    CAPI_MACHINESET,
    LABEL_CAPI_DEPLOYMENT_NAME,
    LABEL_CAPI_SET_NAME,
)
from ..model import JsonPath, as_mapping, get_path, image_label, is_mapping, parse_dotted
from ..verification import (
    PHASE_PROVISIONED,
    PHASE_RUNNING,
    BootVerdict,
    Judgement,
    MachineFacts,
    NodeFacts,
    judge,
    parse_time,
)
from .resources import TEMPLATE_SPEC_PATH, capi_kind_key

# Where a v1beta2 Machine keeps the v1beta1 failure fields (cluster-api's `status.deprecated.v1beta1`).
_DEPRECATED_V1BETA1 = ("status", "deprecated", "v1beta1")


def infra_image_path(decision_field: str | None) -> JsonPath | None:
    """Where an infrastructure machine's boot image is, from a CAPI decision's `field` (inside the
    template: `spec.template.spec.ami` -> `spec.ami`)."""
    if not decision_field:
        return None
    path = parse_dotted(decision_field)
    if tuple(path[: len(TEMPLATE_SPEC_PATH)]) != TEMPLATE_SPEC_PATH:
        return None
    return ("spec", *path[len(TEMPLATE_SPEC_PATH):])


def _failure(obj: Mapping[str, Any] | None) -> tuple[str | None, str | None]:
    """(reason, message) of a Machine's or infrastructure machine's failure, either API version."""
    if obj is None:
        return None, None
    for where in (("status",), _DEPRECATED_V1BETA1):
        status = as_mapping(get_path(obj, where))
        reason, message = _text(status.get("failureReason")), _text(status.get("failureMessage"))
        if reason or message:
            return reason, message
    return None, None


def capi_machine_facts(machine: Mapping[str, Any], infra: Mapping[str, Any] | None,
                       image_path: JsonPath | None) -> MachineFacts:
    """What verification reads of a CAPI Machine and its infrastructure machine. Without the
    infrastructure machine (not created yet, or deleted) the image is unknown: the Machine does not
    count for any image."""
    meta, status = as_mapping(machine.get("metadata")), as_mapping(machine.get("status"))
    reason, message = _failure(machine)
    if not (reason or message):
        reason, message = _failure(infra)
    phase = _text(status.get("phase"))
    instance = bool(get_path(machine, ("spec", "providerID")))
    if infra is not None:
        instance = instance or bool(get_path(infra, ("spec", "instanceID")) or get_path(infra, ("spec", "providerID")))
    return MachineFacts(
        namespace=str(meta.get("namespace") or ""),
        name=str(meta.get("name") or ""),
        image=image_label(get_path(infra, image_path)) if infra is not None and image_path is not None else None,
        phase=phase,
        node=_text(as_mapping(status.get("nodeRef")).get("name")),
        error_reason=reason,
        error_message=message,
        created=parse_time(meta.get("creationTimestamp")),
        has_instance=instance or phase in (PHASE_PROVISIONED, PHASE_RUNNING),
        deleting=bool(meta.get("deletionTimestamp")),
    )


def infra_ref(machine: Mapping[str, Any]) -> tuple[str, str] | None:
    """(kind, name) of the infrastructure machine a CAPI Machine names (both API versions name the
    kind and name; it lives in the Machine's namespace)."""
    ref = as_mapping(get_path(machine, ("spec", "infrastructureRef")))
    kind, name = _text(ref.get("kind")), _text(ref.get("name"))
    return (kind, name) if kind and name else None


def _owner_uids(meta: Mapping[str, Any]) -> list[str]:
    return [str(o.get("uid")) for o in _list(meta.get("ownerReferences"))
            if is_mapping(o) and o.get("kind") == "MachineSet" and o.get("uid")
            and str(o.get("apiVersion") or CAPI_GROUP).startswith(CAPI_GROUP)]


@dataclass(frozen=True)
class CapiMachineIndex:
    """The CAPI Machines grouped the ways `of` looks them up, and the infrastructure machines by
    (namespace, kind, name): judging every pool reads each Machine once."""

    by_owner: Mapping[str, Sequence[Mapping[str, Any]]]
    orphans_by_set: Mapping[tuple[str, str], Sequence[Mapping[str, Any]]]
    by_deployment: Mapping[tuple[str, str], Sequence[Mapping[str, Any]]]
    infra: Mapping[tuple[str, str, str], Mapping[str, Any]]

    @classmethod
    def build(cls, machines: Iterable[Mapping[str, Any]], infra_machines: Iterable[Mapping[str, Any]]) -> CapiMachineIndex:
        by_owner: dict[str, list[Mapping[str, Any]]] = {}
        orphans: dict[tuple[str, str], list[Mapping[str, Any]]] = {}
        by_deployment: dict[tuple[str, str], list[Mapping[str, Any]]] = {}
        for machine in machines:
            meta = as_mapping(machine.get("metadata"))
            namespace, labels = str(meta.get("namespace") or ""), as_mapping(meta.get("labels"))
            owners = _owner_uids(meta)
            for uid in owners:
                by_owner.setdefault(uid, []).append(machine)
            set_name = labels.get(LABEL_CAPI_SET_NAME)
            if not owners and isinstance(set_name, str) and set_name:
                orphans.setdefault((namespace, set_name), []).append(machine)
            deployment = labels.get(LABEL_CAPI_DEPLOYMENT_NAME)
            if isinstance(deployment, str) and deployment:
                by_deployment.setdefault((namespace, deployment), []).append(machine)
        infra = {(str(get_path(m, ("metadata", "namespace")) or ""), str(m.get("kind") or ""),
                  str(get_path(m, ("metadata", "name")) or "")): m for m in infra_machines}
        return cls(by_owner, orphans, by_deployment, infra)

    def of(self, obj: Mapping[str, Any]) -> list[Mapping[str, Any]]:
        """The Machines of a CAPI MachineSet or MachineDeployment (module docstring)."""
        meta = as_mapping(obj.get("metadata"))
        namespace, name = str(meta.get("namespace") or ""), str(meta.get("name") or "")
        if capi_kind_key(obj) == CAPI_MACHINEDEPLOYMENT:
            return list(self.by_deployment.get((namespace, name), ()))
        owned = [m for m in self.by_owner.get(str(meta.get("uid") or ""), ())
                 if get_path(m, ("metadata", "namespace")) == namespace]
        return [*owned, *self.orphans_by_set.get((namespace, name), ())]

    def infra_of(self, machine: Mapping[str, Any]) -> Mapping[str, Any] | None:
        ref = infra_ref(machine)
        if ref is None:
            return None
        return self.infra.get((str(get_path(machine, ("metadata", "namespace")) or ""), *ref))

    def facts(self, obj: Mapping[str, Any], decision_field: str | None) -> tuple[MachineFacts, ...]:
        path = infra_image_path(decision_field)
        return tuple(capi_machine_facts(m, self.infra_of(m), path) for m in self.of(obj))


def judge_capi_object(
    obj: Mapping[str, Any],
    decision_field: str | None,
    current: Any,
    index: CapiMachineIndex,
    nodes: Mapping[str, NodeFacts],
    recorded: BootVerdict | None,
    now: datetime,
    first_boot_timeout: timedelta,
) -> Judgement:
    """`judge` for one CAPI MachineSet or MachineDeployment: the image its template names
    (`current` is `{"template", "image"}`) against its Machines' infrastructure machines."""
    facts = index.facts(obj, decision_field)
    judgement = judge(image_label(current), facts, nodes, recorded, now, first_boot_timeout)
    return replace(judgement, machines=facts)


def capi_keys_of_machine(machine: Mapping[str, Any]) -> list[tuple[str, str]]:
    """(kind key, name) of the CAPI objects a Machine counts for (`CapiMachineIndex.of` read the
    other way): its owning MachineSets, the MachineSet its label names, its MachineDeployment."""
    meta = as_mapping(machine.get("metadata"))
    labels = as_mapping(meta.get("labels"))
    names = {str(o.get("name")) for o in _list(meta.get("ownerReferences"))
             if is_mapping(o) and o.get("kind") == "MachineSet" and o.get("name")}
    set_name = labels.get(LABEL_CAPI_SET_NAME)
    if isinstance(set_name, str) and set_name:
        names.add(set_name)
    keys = [(CAPI_MACHINESET, n) for n in sorted(names)]
    deployment = labels.get(LABEL_CAPI_DEPLOYMENT_NAME)
    if isinstance(deployment, str) and deployment:
        keys.append((CAPI_MACHINEDEPLOYMENT, deployment))
    return keys


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []
