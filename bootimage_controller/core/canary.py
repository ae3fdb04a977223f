"""The canary (SPEC section 3b): one Machine booted from a MachineSet's template to prove its boot
image, for pools that create none between upgrades (at zero replicas, grown only in an emergency).
Pure: it builds the Machine, says how far a canary got and when one is due; `reconcile/canary.py`
(the daemon) and `commands/verify_boot.py` create, watch and delete it.

Why the canary looks as it does:
- No MachineSet may select it. A MachineSet adopts the orphan Machines its selector matches and
  deletes the surplus over `replicas`: the canary would be counted, and a real Machine (or the
  canary) deleted. So it carries none of the selecting labels of any MachineSet of its namespace,
  and no owner reference. The cluster-ID label is the exception the machine controller forces: it
  refuses a Machine without it (`validateMachine`), so a MachineSet that selects on that label
  alone gets no canary (`CanaryError`, said rather than risked).
- Its label `boot-image-canary: <MachineSet>` counts it for that MachineSet only
  (`verification.MachineIndex`), and finds it again after a restart: the canary's state is the
  Machine itself, never memory.
- Its name comes from the MachineSet and the image: a second create of the same canary (two
  reconciles, a restarted `verify-boot`) is refused as AlreadyExists, never a second Machine.
- A `NoSchedule` taint of the same key keeps workloads off its Node: it is deleted once judged,
  and draining it should move nothing.
"""

from __future__ import annotations

import copy
import hashlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from ..constants import (
    ANNOTATION_BOOT_IMAGE_CANARY,
    ANNOTATION_CANARY_DEADLINE,
    ANNOTATION_CANARY_RUNNER,
    BOOT_IMAGE_CANARY_ENABLED,
    LABEL_BOOT_IMAGE_CANARY,
    LABEL_MACHINE_CLUSTER_ID,
)
from ..errors import InputError
from .model import as_mapping, get_path, image_label, is_mapping
from .times import format_time
from .verification import (
    PHASE_FAILED,
    BootVerdict,
    MachineFacts,
    NodeFacts,
    Verdict,
    judge,
    machine_facts,
    machine_image_path,
    parse_time,
    selects,
)

MACHINE_API_VERSION = "machine.openshift.io/v1beta1"
# Label values and the hostnames some providers derive from a Machine's name: 63 characters.
_MAX_NAME = 63


class CanaryError(InputError):
    """No canary can be made for this MachineSet (said; nothing is created)."""


def canary_name(machine_set: str, image: str) -> str:
    """`<MachineSet>-canary-<6 hex of the image>`, cut to 63 characters."""
    digest = hashlib.sha256(image.encode()).hexdigest()[:6]
    suffix = f"-canary-{digest}"
    return f"{machine_set[:_MAX_NAME - len(suffix)].rstrip('-.')}{suffix}"


def canary_labels(machine_set: Mapping[str, Any], machine_sets: Iterable[Mapping[str, Any]]) -> dict[str, str]:
    """The template's labels less every label by which a MachineSet of the namespace would select
    the canary, plus the canary label. Raises `CanaryError` when some MachineSet still would."""
    meta = as_mapping(machine_set.get("metadata"))
    name, namespace = str(meta.get("name") or ""), meta.get("namespace")
    who = f"MachineSet {namespace}/{name}"
    if len(name) > _MAX_NAME:
        raise CanaryError(who, "metadata.name", f"longer than {_MAX_NAME} characters: no label can name it")
    template = as_mapping(get_path(machine_set, ("spec", "template", "metadata", "labels")))
    labels = {str(k): str(v) for k, v in template.items()}
    labels[LABEL_BOOT_IMAGE_CANARY] = name
    peers = [ms for ms in machine_sets if get_path(ms, ("metadata", "namespace")) == namespace]
    for ms in [machine_set, *peers]:
        selector = get_path(ms, ("spec", "selector"))
        for key in as_mapping(as_mapping(selector).get("matchLabels")):
            if key != LABEL_MACHINE_CLUSTER_ID:
                labels.pop(str(key), None)
    for ms in [machine_set, *peers]:
        if selects(get_path(ms, ("spec", "selector")), labels):
            other = get_path(ms, ("metadata", "name"))
            raise CanaryError(who, "spec.selector",
                              f"MachineSet {namespace}/{other} would select a canary of it (its selector matches "
                              f"the labels a Machine must keep: {sorted(labels)}); no canary is made")
    return labels


def canary_machine(machine_set: Mapping[str, Any], image: str, machine_sets: Iterable[Mapping[str, Any]],
                   runner: str, deadline: datetime) -> dict[str, Any]:
    """The canary Machine: the MachineSet's template as its controller would create a Machine,
    but selected by no MachineSet and owned by none (module docstring)."""
    meta = as_mapping(machine_set.get("metadata"))
    name, namespace = str(meta.get("name") or ""), str(meta.get("namespace") or "")
    template = as_mapping(get_path(machine_set, ("spec", "template")))
    spec = copy.deepcopy(dict(as_mapping(template.get("spec"))))
    if not is_mapping(get_path(spec, ("providerSpec", "value"))):
        raise CanaryError(f"MachineSet {namespace}/{name}", "spec.template.spec.providerSpec.value", "missing")
    spec.pop("providerID", None)
    taints = [t for t in spec.get("taints") or [] if is_mapping(t) and t.get("key") != LABEL_BOOT_IMAGE_CANARY]
    spec["taints"] = [*taints, {"key": LABEL_BOOT_IMAGE_CANARY, "value": name, "effect": "NoSchedule"}]
    annotations = {str(k): str(v) for k, v in as_mapping(as_mapping(template.get("metadata")).get("annotations")).items()}
    annotations.update({ANNOTATION_CANARY_RUNNER: runner, ANNOTATION_CANARY_DEADLINE: format_time(deadline)})
    return {
        "apiVersion": MACHINE_API_VERSION,
        "kind": "Machine",
        "metadata": {"name": canary_name(name, image), "namespace": namespace,
                     "labels": canary_labels(machine_set, machine_sets), "annotations": annotations},
        "spec": spec,
    }


def canary_enabled(machine_set: Mapping[str, Any]) -> bool:
    annotations = as_mapping(get_path(machine_set, ("metadata", "annotations")))
    return annotations.get(ANNOTATION_BOOT_IMAGE_CANARY) == BOOT_IMAGE_CANARY_ENABLED


def canary_runner(machine: Mapping[str, Any]) -> str | None:
    value = as_mapping(get_path(machine, ("metadata", "annotations"))).get(ANNOTATION_CANARY_RUNNER)
    return value if isinstance(value, str) else None


def canary_deadline(machine: Mapping[str, Any]) -> datetime | None:
    return parse_time(as_mapping(get_path(machine, ("metadata", "annotations"))).get(ANNOTATION_CANARY_DEADLINE))


@dataclass(frozen=True, slots=True)
class CanaryProgress:
    """How far one canary got: its verdict so far, and whether that is final (then it is recorded
    and the canary deleted)."""

    machine: MachineFacts
    verdict: BootVerdict
    done: bool
    recheck_at: datetime | None = None


def canary_progress(canary: Mapping[str, Any], decision_field: str | None, nodes: Mapping[str, NodeFacts],
                    now: datetime, timeout: timedelta) -> CanaryProgress:
    """The canary's own verdict (`judge` of it alone). Final once its Node is Ready, its failure is
    the image's or is not (capacity: `unverified` with that reason), or its deadline passed without
    an instance (`unverified`: the cloud never started one; nothing said about the image)."""
    facts = machine_facts(canary, machine_image_path(decision_field))
    judgement = judge(facts.image, [facts], nodes, None, now, timeout)
    verdict = judgement.verdict
    if verdict.verdict is not Verdict.UNVERIFIED:
        return CanaryProgress(facts, verdict, True)
    if facts.phase == PHASE_FAILED:
        return CanaryProgress(facts, _with_machine(verdict, facts, now), True)
    deadline = canary_deadline(canary) or ((facts.created + timeout) if facts.created is not None else None)
    if deadline is not None and now >= deadline and not facts.has_instance:
        reason = f"{facts.display} got no instance by {format_time(deadline)} (phase {facts.phase or 'none'})"
        return CanaryProgress(facts, BootVerdict(Verdict.UNVERIFIED, facts.image, facts.name, None, format_time(now),
                                                 reason), True)
    recheck = judgement.recheck_at if judgement.recheck_at is not None else deadline
    return CanaryProgress(facts, verdict, False, recheck)


def _with_machine(verdict: BootVerdict, machine: MachineFacts, now: datetime) -> BootVerdict:
    return BootVerdict(verdict.verdict, verdict.image, machine.name, None, format_time(now), verdict.reason)


def recorded_for(progress: CanaryProgress, recorded: BootVerdict | None) -> bool:
    """Whether the MachineSet's record already holds what this canary proved (only then is it
    deleted: the record is the evidence once the Machine is gone)."""
    if recorded is None:
        return False
    image = progress.verdict.image
    if image is not None and image in recorded.failed_images:
        return True
    if recorded.image != image:
        return False
    # The image is judged, whichever Machine proved it (a scale-up may have joined first).
    return recorded.verdict is not Verdict.UNVERIFIED or recorded.machine == progress.machine.name


def canary_due(machine_set: Mapping[str, Any], current: Any, judged: BootVerdict, wrote_current: bool,
               machines: Sequence[MachineFacts], canaries: Sequence[Mapping[str, Any]]) -> bool:
    """Whether the daemon starts a canary now (SPEC section 3b): the MachineSet asks for canaries,
    this controller wrote the image it names, nothing has judged that image yet (no Machine from
    it, no verdict recorded with a Machine), and no canary of it runs."""
    image = image_label(current)
    if image is None or not canary_enabled(machine_set) or not wrote_current or canaries:
        return False
    if judged.verdict is not Verdict.UNVERIFIED or image in judged.failed_images:
        return False
    if any(m.image == image and not m.deleting for m in machines):
        return False  # a Machine of the pool is proving it already
    recorded = BootVerdict.from_annotations(as_mapping(get_path(machine_set, ("metadata", "annotations"))))
    return not (recorded is not None and recorded.image == image and recorded.machine)
