"""Decisions for Cluster API MachineSets and MachineDeployments (issue 16, docs/capi.md).

Pure. The checks only the Cluster API has come first (enrollment is opt-in; a `Cluster` owner is
expected, a MachineDeployment owner means its MachineDeployment is the one to update; the Machine
API side of a migrating pool; a MachineDeployment mid-rollout; the template exists). Then the
template's boot image goes through the same planner and platform rules as a Machine API
MachineSet (`adapters`), and the answer is carried back: a patch becomes "write a copy of the
template with only the boot image changed, named from its content, and point infrastructureRef at
it" (`CapiWork`).
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from ...constants import (
    ANNOTATION_BOOT_IMAGE_UPDATES,
    ANNOTATION_REPLACES,
    AUTHORITATIVE_MACHINE_API,
    CAPI_CLUSTER_KIND,
    CAPI_GROUP,
    MACHINESET_KIND,
    MACHINESET_PROVIDER_SPEC_PATH,
    NON_AUTHORITATIVE,
    Action,
    Platform,
    Reason,
)
from ...errors import InputError
from ..context import ClusterFacts
from ..enrollment import Enrollment
from ..golden import GoldenBootImages
from ..manager import decide_manager
from ..model import BootImageDecision, FieldChange, dotted, is_mapping
from ..planner import invalid_object, is_our_owner_reference, plan_machine
from .adapters import ADAPTERS, Adapter
from .resources import (
    INFRA_REF_NAME_PATH,
    TEMPLATE_SPEC_PATH,
    CapiObject,
    InfraTemplate,
    is_template_kind,
    new_template_name,
)
from .work import CapiWork

PSP = MACHINESET_PROVIDER_SPEC_PATH
ROLLOUT_NOTE = "patching a MachineDeployment rolls out new Machines per its strategy"


def plan_capi(
    obj: Any,
    template: Mapping[str, Any] | None,
    golden: GoldenBootImages,
    facts: ClusterFacts,
    enrollment: Enrollment,
    *,
    mapi_authority: str | None = None,
) -> BootImageDecision:
    """`template`: the object `infrastructureRef` names (None: not found). `mapi_authority`: the
    `status.authoritativeAPI` of the Machine API MachineSet of the same name, when there is one
    (`""` when it has none)."""
    try:
        capi = CapiObject.from_object(obj)
    except InputError as exc:
        return invalid_object(obj, exc, unknown_kind="?")
    return _CapiPlanning(capi, golden, facts, enrollment, mapi_authority).decide(template)


class _CapiPlanning:
    def __init__(
        self, capi: CapiObject, golden: GoldenBootImages, facts: ClusterFacts, enrollment: Enrollment,
        mapi_authority: str | None,
    ) -> None:
        self.c, self.golden, self.facts, self.enrollment = capi, golden, facts, enrollment
        self.mapi_authority = mapi_authority
        # Rule 2b for the CAPI object itself (the MCO on AWS behind ManagedBootImagesAWSCAPI; Hive and GitOps).
        self.coverage = enrollment.covers(capi)
        self.verdict = decide_manager(capi, facts.platform, facts.managers, enrollment, is_ours=is_our_owner_reference,
                                      coverage=self.coverage)

    def decision(self, action: Action, reason: Reason | str, message: str, **extra: Any) -> BootImageDecision:
        return BootImageDecision(self.c.kind, self.c.namespace, self.c.name, action, str(reason), message,
                                 platform=extra.pop("platform", self.facts.platform), manager=self.verdict.manager,
                                 manager_why=self.verdict.why, taken_from_mco=self.verdict.taken_from_mco,
                                 also_written_by=self.verdict.also_written_by, **extra)

    def skip(self, reason: Reason, message: str) -> BootImageDecision:
        return self.decision(Action.SKIP, reason, f"{self.c.display}: {message}")

    def decide(self, template: Mapping[str, Any] | None) -> BootImageDecision:
        c = self.c
        enrolled, why = self.coverage
        if not enrolled:
            note = f"; enrolling it means {ROLLOUT_NOTE}" if c.is_deployment else ""
            return self.skip(Reason.NOT_ENROLLED, f"not enrolled: {why}{note}")
        owner = self._owner_problem()
        if owner is not None:
            return owner
        if self.mapi_authority is not None and self.mapi_authority not in NON_AUTHORITATIVE:
            return self.skip(
                Reason.NOT_AUTHORITATIVE,
                f"the Machine API MachineSet {c.name} is the authoritative side of this machine pool "
                f"(status.authoritativeAPI {self.mapi_authority or AUTHORITATIVE_MACHINE_API}); it is updated instead",
            )
        rollout = c.rollout_in_progress()
        if rollout is not None:
            return self.skip(Reason.ROLLOUT_IN_PROGRESS, f"mid-rollout ({rollout}); planned again once it settles")
        ref = c.template_ref
        if ref is None:
            return self.decision(Action.ERROR, Reason.INVALID_OBJECT,
                                 f"{c.display}: spec.template.spec.infrastructureRef is missing",
                                 field="spec.template.spec.infrastructureRef")
        if not is_template_kind(ref.kind, ref.group) or ref.kind not in ADAPTERS:
            return self.skip(Reason.UNSUPPORTED_PLATFORM, f"infrastructure template kind {ref.kind} is not managed")
        if template is None:
            return self.skip(Reason.TEMPLATE_NOT_FOUND, f"{ref.kind} {c.namespace}/{ref.name} does not exist")
        try:
            tmpl = InfraTemplate.from_object(template)
        except InputError as exc:
            return self.decision(Action.ERROR, Reason.INVALID_OBJECT, str(exc), field=exc.field)
        return self._with_rules(tmpl, ADAPTERS[ref.kind])

    def _owner_problem(self) -> BootImageDecision | None:
        for o in self.c.owner_references:
            group = o.api_version.partition("/")[0]
            if is_our_owner_reference(o.api_version, o.kind, o.name):
                continue
            if group == CAPI_GROUP and o.kind == CAPI_CLUSTER_KIND:
                continue  # CAPI's own: every object of a cluster is owned by its Cluster
            if group == CAPI_GROUP and o.kind == "MachineDeployment" and not self.c.is_deployment:
                return self.skip(Reason.OWNED_BY_MACHINE_DEPLOYMENT,
                                 f"managed by MachineDeployment {o.name}, which is the one to update")
            return self.skip(Reason.OWNED_BY_OTHER, f"owned by {o.kind}/{o.name}; never touched")
        return None

    def _with_rules(self, tmpl: InfraTemplate, adapter: Adapter) -> BootImageDecision:
        c = self.c
        synthetic = {
            "apiVersion": "machine.openshift.io/v1beta1",
            "kind": MACHINESET_KIND,
            "metadata": {
                "name": c.name,
                "namespace": c.namespace,
                "labels": dict(c.labels),
                "annotations": {k: v for k, v in c.annotations.items() if k != ANNOTATION_BOOT_IMAGE_UPDATES},
            },
            "spec": {"template": {
                "metadata": {"labels": dict(c.template_labels)},
                "spec": {"providerSpec": {"value": adapter.provider_spec(tmpl.spec, c.failure_domain, self.facts.region)}},
            }},
        }
        d = plan_machine(synthetic, self.golden, self.facts, Enrollment.everything())
        return self._translate(d, tmpl, adapter)

    def _translate(self, d: BootImageDecision, tmpl: InfraTemplate, adapter: Adapter) -> BootImageDecision:
        c = self.c
        where = f"{tmpl.kind} {tmpl.name} spec.template.spec"
        message = d.message.replace(f"MachineSet {c.namespace}/{c.name}", c.display).replace(dotted(PSP), where)
        field = None
        if d.field is not None and d.field.startswith(dotted(PSP)):
            rel = tuple(int(p) if p.isdigit() else p for p in d.field[len(dotted(PSP)) + 1:].replace("[", ".").replace("]", "").split(".") if p)
            field = dotted(TEMPLATE_SPEC_PATH + adapter.field_of(rel))
        old_ref = f"{tmpl.kind}/{tmpl.name}"
        current = {"template": old_ref, "image": d.current}
        target = {"template": old_ref, "image": d.target}
        base = replace(d, kind=c.kind, namespace=c.namespace, name=c.name, message=message, field=field,
                       current=current, target=target, changes=(), template=None, manager=self.verdict.manager,
                       manager_why=self.verdict.why, taken_from_mco=self.verdict.taken_from_mco,
                       also_written_by=self.verdict.also_written_by)
        if d.action is not Action.PATCH:
            return base
        if d.platform == Platform.VSPHERE:
            return replace(base, action=Action.SKIP, reason=Reason.UNSUPPORTED_PLATFORM, message=(
                f"{message}; planned only: vSphere templates of the Cluster API are not refreshed by this "
                "controller (Machine API MachineSets are)"))
        new_spec = copy.deepcopy(dict(tmpl.spec))
        for change in d.changes:
            rel, value = adapter.to_template(tuple(change.path[len(PSP):]), change.new)
            _set(new_spec, rel, value)
        body = _template_body(tmpl, new_spec)
        new_name = new_template_name(c.name, tmpl.kind, body["spec"])
        body["metadata"]["name"] = new_name
        work = CapiWork(tmpl.kind, tmpl.api_version, c.namespace, tmpl.name, new_name, body, rollout=c.is_deployment)
        note = f"; {ROLLOUT_NOTE}" if c.is_deployment else ""
        return replace(
            base,
            message=f"{message}: new {tmpl.kind} {new_name}{note}",
            target={"template": f"{tmpl.kind}/{new_name}", "image": d.target},
            changes=(FieldChange(INFRA_REF_NAME_PATH, tmpl.name, new_name),),
            capi=work,
        )


def _set(obj: dict[str, Any], path: tuple[str | int, ...], value: Any) -> None:
    cur: Any = obj
    for part in path[:-1]:
        cur = cur.setdefault(part, {}) if isinstance(part, str) else cur[part]
    cur[path[-1]] = value


# Metadata a copy must not carry: the server's, and the last-applied copy of someone else's apply.
_DROPPED_META = ("uid", "resourceVersion", "generation", "creationTimestamp", "managedFields", "deletionTimestamp",
                 "deletionGracePeriodSeconds", "selfLink")
_DROPPED_ANNOTATIONS = ("kubectl.kubernetes.io/last-applied-configuration",)


def _template_body(tmpl: InfraTemplate, new_spec: Mapping[str, Any]) -> dict[str, Any]:
    """The old template with only the boot image changed: same labels, owners (the Cluster) and
    every other field; annotated with the template it replaces (for the cleanup two updates on).
    Its name is the caller's to set: it is the hash of the spec."""
    body = copy.deepcopy(dict(tmpl.raw))
    meta = {k: v for k, v in (body.get("metadata") or {}).items() if k not in _DROPPED_META}
    annotations = {k: v for k, v in (meta.get("annotations") or {}).items() if k not in _DROPPED_ANNOTATIONS}
    annotations[ANNOTATION_REPLACES] = tmpl.name
    meta["annotations"] = annotations
    # The copied owner references (the Cluster) without blockOwnerDeletion: setting it needs update on
    # the owner's finalizers, which nothing here has or needs (as cluster-capi-operator and MCO #6447).
    owners = [{k: v for k, v in ref.items() if k != "blockOwnerDeletion"} for ref in meta.get("ownerReferences") or []
              if is_mapping(ref)]
    if owners:
        meta["ownerReferences"] = owners
    body["metadata"] = meta
    body.pop("status", None)
    body.setdefault("spec", {}).setdefault("template", {})["spec"] = dict(new_spec)
    return body


__all__ = ["plan_capi"]
