"""Boot verification (SPEC section 3b): whether a boot image has booted a node that joined. Pure.

The boot image field being equal to the golden data proves nothing about scale-up; a Machine created
from that image whose Node joined does. This module turns plain data (a MachineSet's Machines, the
Nodes' Ready conditions, the recorded verdict, the clock) into a `BootVerdict`; the daemon records
it (`boot-image-verified`) and rolls back what it wrote when the verdict is `failed`, and `plan` and
`fleet` show it. Nothing here reads or writes anything.

Which failures are the image's. Rolling a MachineSet back is a write an administrator did not ask
for, so only evidence that points at the image counts against it:
- a Machine created from the image reached phase `Failed` with an error that names the image or
  says the cloud refused it (`InvalidAMIID`, "image not found", ...);
- or its instance exists (phase `Provisioned`, or an instance id in `providerStatus`) and no Node
  joined within the first-boot timeout: the image booted and could not pivot or join (MCO #1706,
  #6435).
Capacity, quota and every other failure (a bad subnet, IAM) are not the image's: the verdict stays
`unverified` with that reason, and nothing is rolled back.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from enum import StrEnum
from typing import Any

from ..constants import (
    ANNOTATION_BOOT_IMAGE_VERIFIED,
    LABEL_BOOT_IMAGE_CANARY,
    Manager,
)
from .model import JsonPath, as_mapping, get_path, image_label, is_mapping, parse_dotted
from .times import format_time

# The failed images kept in the record (the newest last): enough for a golden image, its rollback
# target and a retry of each, bounded so the annotation cannot grow without end.
MAX_FAILED_IMAGES = 5
# Where a MachineSet's boot image field lives inside its providerSpec: the part of the decision's
# `field` after this, applied to a Machine's own providerSpec.
_PROVIDER_VALUE = "providerSpec.value"

# Phases a Machine API Machine goes through (openshift/api machine/v1beta1).
PHASE_RUNNING = "Running"
PHASE_FAILED = "Failed"
PHASE_PROVISIONED = "Provisioned"

# Errors that say the cloud had no room or no allowance: never the image's.
_NOT_THE_IMAGE = re.compile(
    r"InsufficientResources|InsufficientInstanceCapacity|InsufficientCapacity|capacity|quota|"
    r"LimitExceeded|limit exceeded|ZONE_RESOURCE_POOL_EXHAUSTED|RESOURCE_EXHAUSTED|SkuNotAvailable|"
    r"AllocationFailed|OverconstrainedAllocationRequest|RequestLimitExceeded|Throttl",
    re.IGNORECASE,
)
# Errors that say the cloud refused the image itself.
_IMAGE_REFUSED = re.compile(
    r"InvalidAMIID|AMI .*(not found|does not exist|deregistered|not available)|"
    r"image .*(not found|does not exist|not available|is deprecated|was deprecated|invalid)|"
    r"ImageNotFound|InvalidImage|ImageVersionDeprecated|InvalidParameter.*image|"
    r"PlatformImageNotFound|GalleryImageNotFound|MarketplacePurchaseEligibilityFailed|"
    r"template .*(not found|does not exist)",
    re.IGNORECASE,
)


class Verdict(StrEnum):
    """SPEC section 3b: the boot image booted a node that joined, or it cannot, or nobody knows yet."""

    VERIFIED = "verified"
    FAILED = "failed"
    UNVERIFIED = "unverified"


# `bootimage_controller_boot_image_verified` (SPEC section 3b): the daemon sets it, `fleet --prometheus`
# reads it back.
VERDICT_VALUES = {Verdict.VERIFIED: 1, Verdict.UNVERIFIED: 0, Verdict.FAILED: -1}


def verdict_of_value(value: float) -> Verdict:
    """The verdict a metric value says (anything else than 1 or -1: unverified)."""
    return Verdict.VERIFIED if value == 1 else Verdict.FAILED if value == -1 else Verdict.UNVERIFIED


@dataclass(frozen=True, slots=True)
class BootVerdict:
    """The verdict on one MachineSet's boot image (annotation `boot-image-verified`, `plan`'s
    `verified`). `failed_images`: the images this controller rolled back from on this MachineSet,
    never written to it again while the golden data names them (SPEC section 3b)."""

    verdict: Verdict
    image: str | None
    machine: str | None = None
    node: str | None = None
    at: str | None = None  # RFC 3339: when the evidence was seen
    reason: str = ""
    failed_images: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        """`verified` in `plan -o json` and `fleet -o json` (SPEC section 3b), field names exact."""
        return {"verdict": str(self.verdict), "image": self.image, "machine": self.machine, "node": self.node,
                "at": self.at, "reason": self.reason}

    def to_annotation(self) -> str:
        doc = self.to_json()
        if self.failed_images:
            doc["failedImages"] = list(self.failed_images)
        return json.dumps(doc, sort_keys=True, separators=(",", ":"))

    @classmethod
    def from_annotations(cls, annotations: Mapping[str, str]) -> BootVerdict | None:
        """The recorded verdict; None when there is none or it cannot be read (a record someone
        garbled is not evidence: the next verdict replaces it)."""
        raw = annotations.get(ANNOTATION_BOOT_IMAGE_VERIFIED)
        if not raw:
            return None
        try:
            doc = json.loads(raw)
        except (json.JSONDecodeError, TypeError):
            return None
        if not is_mapping(doc):
            return None
        try:
            verdict = Verdict(str(doc.get("verdict")))
        except ValueError:
            return None
        failed = doc.get("failedImages")
        return cls(
            verdict=verdict,
            image=_str_or_none(doc.get("image")),
            machine=_str_or_none(doc.get("machine")),
            node=_str_or_none(doc.get("node")),
            at=_str_or_none(doc.get("at")),
            reason=str(doc.get("reason") or ""),
            failed_images=tuple(str(i) for i in failed if isinstance(i, str))[-MAX_FAILED_IMAGES:]
            if isinstance(failed, list) else (),
        )

    def kept_from(self, recorded: BootVerdict | None) -> BootVerdict:
        """This verdict, carrying the images `recorded` says never to write again: a new verdict
        replaces the record's evidence, never its `failedImages`."""
        return replace(self, failed_images=recorded.failed_images if recorded is not None else ())

    def with_failed(self, image: str) -> BootVerdict:
        """The same verdict, `image` kept among the images never to write again."""
        kept = tuple(i for i in self.failed_images if i != image)
        return replace(self, failed_images=(*kept, image)[-MAX_FAILED_IMAGES:])

    def same_evidence(self, other: BootVerdict | None) -> bool:
        """Whether recording `self` over `other` would change nothing but the time."""
        return other is not None and (self.verdict, self.image, self.machine, self.node, self.reason,
                                      self.failed_images) == (other.verdict, other.image, other.machine,
                                                              other.node, other.reason, other.failed_images)


@dataclass(frozen=True, slots=True)
class MachineFacts:
    """What verification reads of one Machine (the informer keeps no more than this)."""

    namespace: str
    name: str
    image: str | None  # the boot image its own providerSpec names
    phase: str | None
    node: str | None
    error_reason: str | None
    error_message: str | None
    created: datetime | None
    has_instance: bool
    deleting: bool = False

    @property
    def display(self) -> str:
        return f"Machine {self.namespace}/{self.name}"

    @property
    def error(self) -> str:
        return ": ".join(p for p in (self.error_reason, self.error_message) if p) or "no error given"


@dataclass(frozen=True, slots=True)
class Judgement:
    """A verdict from the Machines now, and when to look again (a Machine still inside its
    first-boot timeout fails at `recheck_at` if no Node joins by then)."""

    verdict: BootVerdict
    recheck_at: datetime | None = None
    failed_machine: MachineFacts | None = None  # the Machine whose failure is the image's
    machines: tuple[MachineFacts, ...] = ()  # what it was judged from (`judge_machine_set`)


@dataclass(frozen=True, slots=True)
class NodeFacts:
    name: str
    ready: bool
    ready_since: str | None  # the Ready condition's lastTransitionTime


@dataclass(frozen=True, slots=True)
class VerificationOutcome:
    """What verification came to for one MachineSet in one reconcile (part of its
    `MachineSetState`: Events, metrics and the ClusterOperator read it)."""

    verdict: BootVerdict
    recorded_before: BootVerdict | None  # the record this reconcile found
    writer: Manager  # who keeps the boot image the verdict is about (the decision's manager)
    ours_to_roll_back: bool = False  # our last write put this image there (a record to go back to)
    rolled_back_to: str | None = None  # the image put back (a failed image this controller wrote)
    failed_machine: MachineFacts | None = None
    recheck_after: float | None = None  # seconds: a Machine's first-boot timeout runs out then
    write_error: str | None = None  # the record or the roll back was refused
    # A roll back is due but was not written: the MachineSet changed first, or the claims are being
    # released. The next event tries again; what is said waits for it.
    rollback_pending: bool = False
    # The daemon's canary (core/canary.py): the one running, the one created and those deleted in
    # this reconcile, and why none could be made or recorded.
    canary: str | None = None
    canary_created: str | None = None
    canary_deleted: tuple[str, ...] = ()
    canary_error: str | None = None

    @property
    def failed(self) -> bool:
        return self.verdict.verdict is Verdict.FAILED

    def failure_text(self) -> str:
        """The failure as the Degraded condition and the Warning say it: the image, the writer, and
        what happened or what to do."""
        v = self.verdict
        if self.rolled_back_to is not None:
            return (f"boot image {v.image} failed its first boot ({v.reason}); rolled back to {self.rolled_back_to} "
                    "and not written again while the golden data names it")
        if self.rollback_pending:
            return f"boot image {v.image} failed its first boot ({v.reason}); being rolled back"
        if self.write_error is not None:
            return f"boot image {v.image} failed its first boot ({v.reason}); {self.write_error}"
        fix = fix_for(self.writer, self.ours_to_roll_back)
        return f"boot image {v.image}, kept by {self.writer}, failed its first boot ({v.reason}); {fix}"


def fix_for(writer: Manager, ours_to_roll_back: bool) -> str:
    """What an administrator does about a failed image another writer put there (SPEC section 3b)."""
    if writer is Manager.OURS and ours_to_roll_back:
        return "roll back with `bootimage-controller rollback NAME` (automatic roll back is off)"
    if writer is Manager.OURS:
        return ("this controller did not write it and has no earlier image to go back to: set the MachineSet's boot "
                "image to one that boots, or wait for the next golden image")
    if writer is Manager.MCO:
        # `rollback` needs our record of a previous image, which a MachineSet the MCO wrote lacks:
        # after the hand-over the admin sets the image that booted.
        return ("the Machine Config Operator wrote it and would write it again: hand the MachineSet over with "
                "`bootimage-controller hand-over NAME` and set a boot image that boots (`bootimage-controller "
                "rollback NAME` once this controller has recorded one), or leave it out of the MCO's "
                "managedBootImages with a Partial machineResourceSelector")
    return f"its writer ({writer}) holds the boot image: put the previous image back where {writer} keeps it"


def machine_image_path(decision_field: str | None) -> JsonPath | None:
    """Where a Machine's boot image is, from the MachineSet decision's `field`
    (`spec.template.spec.providerSpec.value.ami` -> `spec.providerSpec.value.ami`)."""
    if not decision_field or _PROVIDER_VALUE not in decision_field:
        return None
    suffix = decision_field.split(_PROVIDER_VALUE, 1)[1].lstrip(".")
    return ("spec", "providerSpec", "value", *parse_dotted(suffix))


def machine_facts(machine: Mapping[str, Any], image_path: JsonPath | None) -> MachineFacts:
    meta, status = as_mapping(machine.get("metadata")), as_mapping(machine.get("status"))
    node_ref = status.get("nodeRef")
    provider_status = status.get("providerStatus")
    instance = is_mapping(provider_status) and bool(provider_status.get("instanceId") or provider_status.get("instanceID"))
    phase = _str_or_none(status.get("phase"))
    return MachineFacts(
        namespace=str(meta.get("namespace") or ""),
        name=str(meta.get("name") or ""),
        image=image_label(get_path(machine, image_path)) if image_path is not None else None,
        phase=phase,
        node=_str_or_none(node_ref.get("name")) if is_mapping(node_ref) else None,
        error_reason=_str_or_none(status.get("errorReason")),
        error_message=_str_or_none(status.get("errorMessage")),
        created=parse_time(meta.get("creationTimestamp")),
        has_instance=instance or phase in (PHASE_PROVISIONED, PHASE_RUNNING),
        deleting=bool(meta.get("deletionTimestamp")),
    )


def node_facts(node: Mapping[str, Any]) -> NodeFacts:
    conditions = _list(get_path(node, ("status", "conditions")))
    ready = next((c for c in conditions if is_mapping(c) and c.get("type") == "Ready"), None)
    return NodeFacts(
        name=str(get_path(node, ("metadata", "name")) or ""),
        ready=ready is not None and ready.get("status") == "True",
        ready_since=_str_or_none(ready.get("lastTransitionTime")) if ready is not None else None,
    )


def selects(selector: Any, labels: Mapping[str, str]) -> bool:
    """Whether a label selector (`matchLabels`, `matchExpressions`) matches `labels`. An empty or
    missing selector selects nothing here: a MachineSet always has one, and a guess would count
    another pool's Machines."""
    if not is_mapping(selector):
        return False
    match = as_mapping(selector.get("matchLabels"))
    expressions = _list(selector.get("matchExpressions"))
    if not match and not expressions:
        return False
    if any(labels.get(k) != v for k, v in match.items()):
        return False
    return all(_expression_holds(e, labels) for e in expressions)


def _expression_holds(expression: Any, labels: Mapping[str, str]) -> bool:
    if not is_mapping(expression):
        return False
    key, operator = str(expression.get("key")), expression.get("operator")
    values = _list(expression.get("values"))
    if operator == "In":
        return key in labels and labels[key] in values
    if operator == "NotIn":
        return key not in labels or labels[key] not in values
    if operator == "Exists":
        return key in labels
    if operator == "DoesNotExist":
        return key not in labels
    return False


def machines_of(machine_set: Mapping[str, Any], machines: Iterable[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """The Machines of a MachineSet (SPEC section 3b), as its controller counts them: those it owns
    (owner reference), the orphans of its namespace its selector matches (it would adopt them),
    and its canaries (label `boot-image-canary: <name>`). A Machine another MachineSet owns is
    never counted, whatever its labels."""
    return MachineIndex.build(machines).of(machine_set)


@dataclass(frozen=True)
class MachineIndex:
    """Machines grouped the ways `machines_of` looks them up, so that judging every MachineSet
    of a large fleet reads each Machine once, not once per MachineSet."""

    by_owner: Mapping[str, Sequence[Mapping[str, Any]]]
    by_canary: Mapping[tuple[str, str], Sequence[Mapping[str, Any]]]
    orphans: Mapping[str, Sequence[Mapping[str, Any]]]  # by namespace

    @classmethod
    def build(cls, machines: Iterable[Mapping[str, Any]]) -> MachineIndex:
        by_owner: dict[str, list[Mapping[str, Any]]] = {}
        by_canary: dict[tuple[str, str], list[Mapping[str, Any]]] = {}
        orphans: dict[str, list[Mapping[str, Any]]] = {}
        for machine in machines:
            meta = as_mapping(machine.get("metadata"))
            namespace = str(meta.get("namespace") or "")
            canary = as_mapping(meta.get("labels")).get(LABEL_BOOT_IMAGE_CANARY)
            if isinstance(canary, str) and canary:
                by_canary.setdefault((namespace, canary), []).append(machine)
                continue
            owner = next((str(o.get("uid")) for o in _list(meta.get("ownerReferences"))
                          if is_mapping(o) and o.get("kind") == "MachineSet" and o.get("uid")), None)
            if owner is not None:
                by_owner.setdefault(owner, []).append(machine)
            else:
                orphans.setdefault(namespace, []).append(machine)
        return cls(by_owner, by_canary, orphans)

    def of(self, machine_set: Mapping[str, Any]) -> list[Mapping[str, Any]]:
        meta = as_mapping(machine_set.get("metadata"))
        namespace, name, uid = str(meta.get("namespace") or ""), str(meta.get("name") or ""), str(meta.get("uid") or "")
        selector = get_path(machine_set, ("spec", "selector"))
        adopted = [m for m in self.orphans.get(namespace, ())
                   if selects(selector, as_mapping(as_mapping(m.get("metadata")).get("labels")))]
        owned = [m for m in self.by_owner.get(uid, ()) if as_mapping(m.get("metadata")).get("namespace") == namespace]
        return [*owned, *adopted, *self.by_canary.get((namespace, name), ())]


def image_failure(machine: MachineFacts, image: str) -> bool | None:
    """Whether a Failed Machine's error is the image's (True), not the image's (False), or says
    nothing either way (None: not counted against the image)."""
    text = machine.error
    if _NOT_THE_IMAGE.search(text):
        return False
    if image in text or _IMAGE_REFUSED.search(text):
        return True
    return None


def judge(
    image: str | None,
    machines: Sequence[MachineFacts],
    nodes: Mapping[str, NodeFacts],
    recorded: BootVerdict | None,
    now: datetime,
    first_boot_timeout: timedelta,
) -> Judgement:
    """The verdict on `image` for one MachineSet, from its Machines now and the record.

    Evidence now wins: a Machine from the image whose Node is Ready verifies it; a failure that is
    the image's fails it. Without evidence either way, a verdict recorded for the same image stands
    (a pool scaled to zero keeps what its last Machine proved); else `unverified`, with why.
    """
    kept = recorded.failed_images if recorded is not None else ()
    if image is None:
        return Judgement(BootVerdict(Verdict.UNVERIFIED, None, reason="the boot image is not known",
                                     failed_images=kept))
    stamp = format_time(now)
    mine = [m for m in machines if m.image == image and not m.deleting]
    for m in mine:
        node = nodes.get(m.node) if m.node else None
        if m.phase == PHASE_RUNNING and node is not None and node.ready:
            return Judgement(BootVerdict(Verdict.VERIFIED, image, m.name, node.name, node.ready_since or stamp,
                                         f"Node {node.name} of {m.display} joined and is Ready", kept))
    not_the_image: list[str] = []
    recheck: datetime | None = None
    for m in mine:
        if m.phase == PHASE_FAILED:
            if image_failure(m, image):
                return _failed(image, m, f"{m.display} failed: {m.error}", stamp, kept)
            not_the_image.append(f"{m.display} failed, not for its image: {m.error}")
            continue
        if m.has_instance and not m.node and m.created is not None:
            deadline = m.created + first_boot_timeout
            if now >= deadline:
                waited = _duration(first_boot_timeout)
                return _failed(image, m, f"{m.display} is {m.phase or 'provisioned'}: its instance runs but no "
                                         f"Node joined within {waited}", stamp, kept)
            recheck = deadline if recheck is None else min(recheck, deadline)
    if recorded is not None and recorded.image == image and recorded.verdict is not Verdict.UNVERIFIED:
        return Judgement(recorded, recheck)
    if not_the_image:
        reason = "; ".join(not_the_image)
    elif mine:
        reason = f"{len(mine)} Machine(s) from this image have not joined yet"
    else:
        reason = "no Machine has been created from this image yet"
    return Judgement(BootVerdict(Verdict.UNVERIFIED, image, reason=reason, failed_images=kept), recheck)


def _failed(image: str, machine: MachineFacts, reason: str, stamp: str, kept: tuple[str, ...]) -> Judgement:
    return Judgement(BootVerdict(Verdict.FAILED, image, machine.name, None, stamp, reason, kept),
                     failed_machine=machine)


def _duration(value: timedelta) -> str:
    seconds = int(value.total_seconds())
    minutes, seconds = divmod(seconds, 60)
    return f"{minutes}m{seconds}s" if minutes else f"{seconds}s"


def parse_time(value: Any) -> datetime | None:
    """A `metav1.Time` (`2026-01-02T03:04:05Z`); None when absent or not one."""
    if not isinstance(value, str) or not value:
        return None
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return parsed if parsed.tzinfo is not None else parsed.replace(tzinfo=UTC)


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _str_or_none(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


@dataclass(frozen=True)
class VerificationInputs:
    """Everything a verdict is judged from, for one cluster: the Machines, indexed by MachineSet,
    and the Nodes by name (the daemon's informers, or `plan`'s input files)."""

    index: MachineIndex = field(default_factory=lambda: MachineIndex({}, {}, {}))
    nodes: Mapping[str, NodeFacts] = field(default_factory=dict)

    @classmethod
    def of(cls, machines: Iterable[Mapping[str, Any]], nodes: Iterable[Mapping[str, Any]]) -> VerificationInputs:
        facts = (node_facts(n) for n in nodes)
        return cls(MachineIndex.build(machines), {f.name: f for f in facts if f.name})


def judge_machine_set(
    machine_set: Mapping[str, Any],
    decision_field: str | None,
    current: Any,
    inputs: VerificationInputs,
    recorded: BootVerdict | None,
    now: datetime,
    first_boot_timeout: timedelta,
) -> Judgement:
    """`judge` for one MachineSet: its Machines picked from `inputs`, their images read where the
    decision says the MachineSet's boot image is."""
    path = machine_image_path(decision_field)
    facts = tuple(machine_facts(m, path) for m in inputs.index.of(machine_set))
    judgement = judge(image_label(current), facts, inputs.nodes, recorded, now, first_boot_timeout)
    return replace(judgement, machines=facts)


def machine_set_names(machine: Mapping[str, Any], machine_sets: Iterable[Mapping[str, Any]]) -> list[str]:
    """The MachineSets a Machine counts for (`machines_of` read the other way): its owner, the
    one its canary label names, or, for an orphan, every MachineSet of its namespace whose
    selector matches it."""
    meta = as_mapping(machine.get("metadata"))
    canary = as_mapping(meta.get("labels")).get(LABEL_BOOT_IMAGE_CANARY)
    if isinstance(canary, str) and canary:
        return [canary]
    owners = [str(o.get("name")) for o in _list(meta.get("ownerReferences"))
              if is_mapping(o) and o.get("kind") == "MachineSet" and o.get("name")]
    if owners:
        return owners
    labels = as_mapping(meta.get("labels"))
    namespace = meta.get("namespace")
    return [str(get_path(ms, ("metadata", "name"))) for ms in machine_sets
            if get_path(ms, ("metadata", "namespace")) == namespace and selects(get_path(ms, ("spec", "selector")), labels)]
