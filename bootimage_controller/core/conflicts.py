"""Writer conflicts: one MachineSet, two writers of its boot image (SPEC section 3). Pure.

The real Machine Config Operator reads no Argo CD, Flux or Hive mark (measured beside its boot image
controller at 7ff337a): a GitOps- or Hive-managed MachineSet it covers is patched by it all the same,
and Git (or the hub's MachinePool) puts the old image back, until the MCO's hot-loop guard gives up.
`writer_conflict` says so once per target, with both writers, the image Git holds where the object
shows it (`kubectl.kubernetes.io/last-applied-configuration`), and the two ways out:

- leave the MachineSet out of the MCO: the exact MachineConfiguration merge patch, a Partial
  `machineResourceSelector` with one more `DoesNotExist` requirement and every other entry kept. The
  requirement is on a label the MachineSet already carries where one tells it apart (Hive's pool
  label, the Flux label, the `--gitops-label`), else on `LABEL_BOOT_IMAGE_WRITER`, which the fix
  asks to add in Git first. This controller reads the same selector, so it leaves the MachineSet out
  too: Git alone carries its boot image from then on (`plan --write-patched` before the change);
- or let the MCO write it and tell the GitOps tool to ignore the field (Argo CD
  `ignoreDifferences`, Flux `kustomize.toolkit.fluxcd.io/ssa: IfNotPresent`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..constants import (
    ANNOTATION_ARGOCD_TRACKING_ID,
    ANNOTATION_BOOT_IMAGE_UPDATES,
    ANNOTATION_FLUX_SSA,
    ANNOTATION_LAST_APPLIED,
    BOOT_IMAGE_UPDATES_DISABLED,
    FLUX_LABELS,
    LABEL_BOOT_IMAGE_WRITER,
    LABEL_HIVE_MACHINE_POOL,
    MACHINE_API_GROUP,
    MACHINESET_PLURAL,
    MAX_EVENT_MESSAGE,
    Action,
    Manager,
)
from .claims import pointer
from .companion import hive_change
from .model import BootImageDecision, FieldChange, first_names, get_path, is_mapping

MCO_NAME = "the Machine Config Operator"
MANUAL_SKEW_EXAMPLE = ("oc patch machineconfiguration cluster --type=merge -p "
                       "'{\"spec\":{\"bootImageSkewEnforcement\":{\"mode\":\"Manual\",\"manual\":"
                       "{\"mode\":\"OCPVersion\",\"ocpVersion\":\"4.16.0\"}}}}'")
_WRITER_WORDS = {Manager.GITOPS: "GitOps", Manager.HIVE: "Hive", Manager.MCO: MCO_NAME, Manager.OURS: "this controller",
                 Manager.EXTERNAL: "the writer that keeps the field"}


@dataclass(frozen=True)
class LabelExclusion:
    """The label requirement that leaves the MachineSet out of a `machineResourceSelector`, and
    what must be added first when the MachineSet does not carry the label yet."""

    key: str
    add_first: str | None  # e.g. `label it ... in Git first`; None: it carries the label already

    def requirement(self) -> dict[str, Any]:
        return {"key": self.key, "operator": "DoesNotExist"}


@dataclass(frozen=True)
class WriterConflict:
    """Two writers of one boot image, and how to make it one."""

    namespace: str
    name: str
    writers: tuple[Manager, ...]  # (the MCO, then the decision's manager)
    target: Any
    target_release: str | None
    git_image: Any  # what the GitOps tool last applied at the boot image field; None: not shown
    current: Any
    exclusion: LabelExclusion
    machine_configuration_patch: Mapping[str, Any]  # merge patch of MachineConfiguration cluster
    ignore_rule: str  # the GitOps tool's way to leave the field to the MCO ("" for Hive)
    # The MCO enforces skew in Automatic mode: OpenShift then refuses a Partial MachineSet selection
    # (openshift/api's CEL rule on MachineConfiguration), so skew enforcement moves to Manual first.
    automatic_skew: bool = False
    # The other "writer" is the admin's pin: annotation `boot-image-updates: Disabled`, which the MCO
    # does not read (`BootImageDecision.opted_out`).
    pinned: bool = False

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def writer_words(self) -> str:
        return " and ".join(_WRITER_WORDS.get(w, str(w)) for w in self.writers)

    def patch_command(self) -> str:
        body = json.dumps(self.machine_configuration_patch, separators=(",", ":"), sort_keys=True)
        return f"oc patch machineconfiguration cluster --type=merge -p '{body}'"

    def git_words(self) -> str:
        if self.git_image is None:
            return ""
        if self.git_image == self.current:
            return f"; Git holds {_short(self.git_image)}, the image it boots now"
        return f"; Git holds {_short(self.git_image)}, not the {_short(self.current)} it boots now"

    def summary(self) -> str:
        """One sentence: who writes, what the MCO will set, what Git holds."""
        other = _WRITER_WORDS.get(self.writers[-1], str(self.writers[-1]))
        target = f"{self.target_release} ({_short(self.target)})" if self.target_release else _short(self.target)
        if self.pinned:
            return (f"{MCO_NAME} writes the boot image of MachineSet {self.key} although annotation "
                    f"{ANNOTATION_BOOT_IMAGE_UPDATES}={BOOT_IMAGE_UPDATES_DISABLED} opts it out: only this controller "
                    f"reads that annotation, and the MCO sets {target} in place of {_short(self.current)}")
        return (f"{self.writer_words} both write the boot image of MachineSet {self.key}: the MCO sets "
                f"{target}, {other} puts its own back, until the MCO's hot-loop guard stops{self.git_words()}")

    def fixes(self, *, why: bool = True) -> list[str]:
        """The ways out, each a sentence with its exact command or snippet."""
        steps = [self.exclusion.add_first] if self.exclusion.add_first else []
        if self.automatic_skew:
            # The Event has room for the step, not the example command (plan prints both).
            example = f" ({MANUAL_SKEW_EXAMPLE}, with your oldest boot image's version: plan's Skew line names it)"
            steps.append("move skew enforcement to Manual first (OpenShift refuses Partial while it is Automatic)"
                         + (example if why else ""))
        first = "".join(f"{s}, then " for s in steps)
        if not why:
            note = ""
        elif self.pinned:
            note = "; this controller reads the same selector, so nothing writes its boot image from then on"
        else:
            note = "; this controller reads the same selector, so Git alone carries its boot image from then on"
        out = [f"leave it out of the MCO ({first}{self.patch_command()}{note})"]
        if self.ignore_rule:
            out.append(f"or let the MCO write it: {self.ignore_rule}")
        return out

    def message(self) -> str:
        """The `BootImageWriterConflict` Event's text (at most MAX_EVENT_MESSAGE characters): both
        writers and the fixes, the exact MachineConfiguration patch first; what does not fit is
        left to `plan`, which prints all of it."""
        fixes = self.fixes(why=False)
        for kept in (fixes, fixes[:1]):
            text = f"{self.summary()}. Fix: " + "; ".join(kept)
            if len(text) <= MAX_EVENT_MESSAGE:
                return text
        short = (f"{self.summary()}. Fix: leave it out of the MCO's managedBootImages or make the GitOps tool "
                 "ignore the field; `bootimage-controller plan --from-cluster` prints the exact patch")
        return short[:MAX_EVENT_MESSAGE]


def conflicts_note(conflicts: Sequence[WriterConflict]) -> str | None:
    """The ClusterOperator's word on writer conflicts (its Available message), or None."""
    if not conflicts:
        return None
    names = sorted(c.key for c in conflicts)
    what = "MachineSet" if len(names) == 1 else "MachineSets"
    others = "GitOps, Hive or an opt-out annotation" if any(c.pinned for c in conflicts) else "GitOps or Hive"
    return (f"{len(names)} {what} written by the Machine Config Operator and {others} alike "
            f"({first_names(names, 5)}): see Event BootImageWriterConflict for the fix")


def writer_conflict(
    decision: BootImageDecision,
    obj: Mapping[str, Any],
    machine_configuration: Mapping[str, Any] | None,
    gitops_labels: Sequence[str] = (),
) -> WriterConflict | None:
    """The conflict on one MachineSet, or None when one writer (or none) changes its boot image.
    An opted-out MachineSet the MCO writes counts too: the admin pinned its image, the MCO moves it."""
    pinned = decision.opted_out and decision.manager is Manager.MCO
    if not pinned and (not decision.also_written_by or decision.manager in decision.also_written_by):
        return None
    if decision.action not in (Action.PATCH, Action.NOOP):
        return None  # nothing to write, or not known what: neither writer changes it
    # (At the golden image, NOOP, the conflict stands: Git puts its image back, or, for a pinned
    # MachineSet, the MCO has already replaced the pinned image and keeps writing it.)
    labels = get_path(obj, ("metadata", "labels"))
    labels = labels if is_mapping(labels) else {}
    exclusion = _exclusion(decision.manager, labels, gitops_labels)
    return WriterConflict(
        namespace=decision.namespace,
        name=decision.name,
        writers=(Manager.MCO,) if pinned else (*decision.also_written_by, decision.manager),
        pinned=pinned,
        target=decision.target,
        target_release=decision.target_release,
        git_image=_last_applied(obj, decision.changes),
        current=decision.current,
        exclusion=exclusion,
        machine_configuration_patch=exclude_from_mco(machine_configuration, exclusion),
        automatic_skew=get_path(machine_configuration, ("status", "bootImageSkewEnforcementStatus", "mode")) == "Automatic",
        ignore_rule=_other_way(decision, obj),
    )


def _exclusion(manager: Manager, labels: Mapping[str, Any], gitops_labels: Sequence[str]) -> LabelExclusion:
    if manager is Manager.HIVE and LABEL_HIVE_MACHINE_POOL in labels:
        return LabelExclusion(LABEL_HIVE_MACHINE_POOL, None)
    for key in (*FLUX_LABELS, *gitops_labels):
        if key in labels:
            return LabelExclusion(key, None)
    if LABEL_BOOT_IMAGE_WRITER in labels:
        return LabelExclusion(LABEL_BOOT_IMAGE_WRITER, None)
    where = {Manager.GITOPS: " in Git", Manager.EXTERNAL: " (where the policy leaves labels alone)"}.get(manager, "")
    # An opted-out MachineSet the MCO writes: the label says what the admin wants, a pinned image.
    value = "pinned" if manager is Manager.MCO else str(manager)
    return LabelExclusion(LABEL_BOOT_IMAGE_WRITER, f"label it {LABEL_BOOT_IMAGE_WRITER}={value}{where}")


def exclude_from_mco(machine_configuration: Mapping[str, Any] | None, exclusion: LabelExclusion) -> dict[str, Any]:
    """The merge patch of MachineConfiguration `cluster` that leaves MachineSets carrying the
    exclusion's label out of `managedBootImages`, every other selected MachineSet (and every other
    manager entry) kept. A merge patch replaces a list whole, so the list is written out entire."""
    managers = get_path(machine_configuration, ("spec", "managedBootImages", "machineManagers"))
    entries = [dict(m) for m in managers if is_mapping(m)] if isinstance(managers, list) else []
    index = next((i for i, m in enumerate(entries)
                  if m.get("resource") == MACHINESET_PLURAL and m.get("apiGroup") == MACHINE_API_GROUP), None)
    current = entries[index] if index is not None else {}
    selector = get_path(current, ("selection", "partial", "machineResourceSelector"))
    partial = get_path(current, ("selection", "mode")) == "Partial" and is_mapping(selector)
    base: dict[str, Any] = dict(selector) if partial and is_mapping(selector) else {}
    expressions = [e for e in base.get("matchExpressions") or [] if is_mapping(e)]
    if exclusion.requirement() not in expressions:
        expressions.append(exclusion.requirement())
    base["matchExpressions"] = expressions
    entry = {"resource": MACHINESET_PLURAL, "apiGroup": MACHINE_API_GROUP,
             "selection": {"mode": "Partial", "partial": {"machineResourceSelector": base}}}
    if index is None:
        entries.append(entry)
    else:
        entries[index] = entry
    return {"spec": {"managedBootImages": {"machineManagers": entries}}}


def _last_applied(obj: Mapping[str, Any], changes: Sequence[FieldChange]) -> Any:
    """The boot image value in what the GitOps tool last applied (client-side apply keeps it in an
    annotation), at the first changed field; None when the object does not show it."""
    text = get_path(obj, ("metadata", "annotations", ANNOTATION_LAST_APPLIED))
    if not isinstance(text, str) or not changes:
        return None
    try:
        applied = json.loads(text)
    except ValueError:
        return None
    return get_path(applied, changes[0].path)


def _other_way(decision: BootImageDecision, obj: Mapping[str, Any]) -> str:
    """The way out that lets the MCO write it (the other writer stops), per writer."""
    if decision.opted_out and decision.manager is Manager.MCO:
        return (f"remove annotation {ANNOTATION_BOOT_IMAGE_UPDATES} and let the MCO keep it current "
                "(what happens anyway while the MCO selects it)")
    if decision.manager is Manager.GITOPS:
        return _ignore_rule(decision, obj)
    if decision.manager is Manager.EXTERNAL:
        return "take the boot image field out of what that writer enforces"
    if decision.manager is Manager.HIVE:
        return f"make the two agree: {hive_change(decision)}"
    return ""


def _ignore_rule(decision: BootImageDecision, obj: Mapping[str, Any]) -> str:
    labels = get_path(obj, ("metadata", "labels"))
    annotations = get_path(obj, ("metadata", "annotations"))
    flux = is_mapping(labels) and any(k in labels for k in FLUX_LABELS)
    argo = is_mapping(annotations) and ANNOTATION_ARGOCD_TRACKING_ID in annotations
    if flux and not argo:
        return f"annotate it {ANNOTATION_FLUX_SSA}=IfNotPresent in Git (Flux then creates it and never corrects it)"
    pointers = sorted({pointer(c.path) for c in decision.changes})
    # The Application's destination namespace is the MachineSet's: the name alone picks it.
    rule = [{"group": MACHINE_API_GROUP, "kind": decision.kind, "name": decision.name, "jsonPointers": pointers}]
    return (f"its Argo CD Application's spec.ignoreDifferences: {json.dumps(rule, separators=(',', ':'))} "
            "with syncOptions RespectIgnoreDifferences=true")


def _short(value: Any) -> str:
    if isinstance(value, str):
        return value
    if is_mapping(value):
        for key in ("id", "version", "template"):
            found = value.get(key)
            if isinstance(found, str) and found:
                return found
    return json.dumps(value, sort_keys=True, default=str) if value is not None else "an unknown image"


__all__ = ["LabelExclusion", "WriterConflict", "conflicts_note", "exclude_from_mco", "writer_conflict"]
