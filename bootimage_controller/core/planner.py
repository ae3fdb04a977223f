"""The planner: one pure function from plain data to a `BootImageDecision` (SPEC section 2).

No I/O happens here. The controller and the `plan` command fetch the MachineSets, the golden
data, the cluster facts and (optionally) cloud answers, call `plan_machine` for each object and
act on the decisions. Rules run in the SPEC's order; the first that decides wins.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import replace
from typing import Any, cast

from ..constants import (
    ANNOTATION_AUTOSCALER_LABELS,
    ANNOTATION_BOOT_IMAGE_UPDATES,
    ANNOTATION_BOOT_IMAGE_VERIFIED,
    BOOT_IMAGE_UPDATES_DISABLED,
    CLAIM_HOLDER_NAME,
    CPMS_KIND,
    CPMS_PLATFORMS,
    KUBE_TO_RPM_ARCH,
    LABEL_ARCH,
    LABEL_OS_ID,
    LABEL_OSSTREAM,
    MACHINESET_KIND,
    NON_AUTHORITATIVE,
    OS_ID_WINDOWS,
    PROVIDER_KIND_PLATFORM,
    Action,
    Manager,
    Reason,
)
from ..errors import InputError, VersionError
from .context import ClusterFacts
from .enrollment import Enrollment
from .golden import GoldenBootImages
from .manager import ManagerVerdict, decide_manager
from .model import BootImageDecision, MachineResource, dotted, get_path, image_label, is_mapping
from .providers import rules_for_platform
from .providers._common import release_rhel_major
from .providers.base import Failure, RuleContext, Skip, Target, image_facts
from .skew.versions import parse_rhcos_version
from .verification import BootVerdict


def plan_all(
    objects: Iterable[Any],
    golden: GoldenBootImages,
    facts: ClusterFacts,
    enrollment: Enrollment,
) -> list[BootImageDecision]:
    return [plan_machine(obj, golden, facts, enrollment) for obj in objects]


def plan_machine(
    obj: Any,
    golden: GoldenBootImages,
    facts: ClusterFacts,
    enrollment: Enrollment,
) -> BootImageDecision:
    """Decide for one MachineSet or ControlPlaneMachineSet (a raw object or a parsed resource)."""
    try:
        resource = obj if isinstance(obj, MachineResource) else MachineResource.from_object(obj)
    except InputError as exc:
        return invalid_object(obj, exc)
    planner = _Planner(resource, golden, facts, enrollment)
    return planner.with_recorded_verdict(planner.decide())


def identify_boot_image(obj: Any, golden: GoldenBootImages, facts: ClusterFacts) -> BootImageDecision:
    """The decision as if the MachineSet were enrolled and unowned: what it boots, for skew only.

    A MachineSet the controller must not touch (opted out, owned by another controller) still
    scales up from its boot image, so skew enforcement needs that image's release all the same.
    The result must never be acted on.
    """
    try:
        resource = obj if isinstance(obj, MachineResource) else MachineResource.from_object(obj)
    except InputError as exc:
        return invalid_object(obj, exc)
    return _Planner(resource, golden, facts, Enrollment.everything(), evidence_only=True).decide()


def is_downgrade(current_release: str | None, target_release: str | None) -> bool:
    """Whether writing `target_release` over `current_release` moves the boot image back: both builds
    known, of one RHEL major (a stream change is not a step back), the target built earlier. Equality
    decides a patch, never this order (rule 7); this only says it (SPEC section 4: the MCO moves a
    newer image back too, `downgrade: true`)."""
    if not current_release or not target_release:
        return False
    try:
        current, target = parse_rhcos_version(current_release), parse_rhcos_version(target_release)
    except VersionError:
        return False
    if current.rhel_major != target.rhel_major or current.built is None or target.built is None:
        return False
    return target.built < current.built


def invalid_object(obj: Any, exc: InputError, *, unknown_kind: str = "") -> BootImageDecision:
    """The decision for an object that could not be read at all (`InvalidObject`, the field named):
    every planner's, Machine API and Cluster API alike. `unknown_kind`: said when it has no kind."""
    meta = obj.get("metadata") if isinstance(obj, Mapping) else None
    meta = meta if isinstance(meta, Mapping) else {}
    return BootImageDecision(
        kind=str(obj.get("kind", unknown_kind)) if isinstance(obj, Mapping) else unknown_kind,
        namespace=str(meta.get("namespace", "")),
        name=str(meta.get("name", "")),
        action=Action.ERROR,
        reason=Reason.INVALID_OBJECT,
        message=str(exc),
        field=exc.field,
    )


def is_our_owner_reference(api_version: str, kind: str, name: str) -> bool:
    # Any uid: a stale uid (holder recreated) is repaired by the next write (SPEC section 2 rule 2).
    return api_version == "v1" and kind == "ConfigMap" and name == CLAIM_HOLDER_NAME


# `_Planner.recorded` not read yet (None is a reading: no verdict recorded).
_UNREAD = object()


class _Planner:
    """Holds one MachineSet's evaluation so each rule is a short method."""

    def __init__(
        self,
        resource: MachineResource,
        golden: GoldenBootImages,
        facts: ClusterFacts,
        enrollment: Enrollment,
        evidence_only: bool = False,
    ) -> None:
        self.evidence_only = evidence_only
        self.r = resource
        self.golden = golden
        self.facts = facts
        self.enrollment = enrollment
        self.platform: str | None = None
        self.arch: str | None = None
        self.stream_name: str | None = None
        self.manager: ManagerVerdict | None = None
        self._recorded: object = _UNREAD

    def decision(self, action: Action, reason: str, message: str, **extra: Any) -> BootImageDecision:
        return BootImageDecision(
            kind=self.r.kind,
            namespace=self.r.namespace,
            name=self.r.name,
            action=action,
            reason=reason,
            message=message,
            platform=self.platform,
            architecture=self.arch,
            stream=self.stream_name,
            **(self._manager_fields() if "manager" not in extra else {}),
            **extra,
        )

    def _manager_fields(self) -> dict[str, Any]:
        m = self.manager
        if m is None:
            return {}
        return {"manager": m.manager, "manager_why": m.why, "manager_named": m.named, "taken_from_mco": m.taken_from_mco,
                "also_written_by": m.also_written_by}

    def skip(self, reason: Reason, message: str) -> BootImageDecision:
        return self.decision(Action.SKIP, reason, message)

    def error(self, reason: Reason, message: str, field: str | None = None) -> BootImageDecision:
        return self.decision(Action.ERROR, reason, message, field=field)

    # ---- the rules, in SPEC order --------------------------------------------------------
    def decide(self) -> BootImageDecision:
        self.platform = self._platform_name()
        enrolled, why = self.enrollment.covers(self.r)
        if not self.evidence_only:
            # Rule 2b: who updates it; the MCO dispatches on the Infrastructure's platform.
            self.manager = decide_manager(self.r, self.facts.platform or self.platform, self.facts.managers,
                                          self.enrollment, is_ours=is_our_owner_reference, coverage=(enrolled, why))
        if not enrolled:
            skipped = self.skip(Reason.NOT_ENROLLED, f"{self.r.display} is not enrolled: {why}")
            return self._mco_despite_opt_out(skipped)
        authority = authoritative_api(self.r.raw)
        if self.r.kind == MACHINESET_KIND and authority in NON_AUTHORITATIVE and not self.evidence_only:
            return self.skip(
                Reason.NOT_AUTHORITATIVE,
                f"{self.r.display} has status.authoritativeAPI {authority}: the Cluster API MachineSet of the "
                "same name is the one updated",
            )
        foreign = [o for o in self.r.owner_references if not is_our_owner_reference(o.api_version, o.kind, o.name)]
        if foreign and not self.evidence_only:
            owners = ", ".join(f"{o.kind}/{o.name}" for o in foreign)
            return self.skip(
                Reason.OWNED_BY_OTHER,
                f"{self.r.display} is owned by {owners}; the controller never touches MachineSets "
                "another owner manages",
            )
        if self.r.template_labels.get(LABEL_OS_ID) == OS_ID_WINDOWS:
            return self.skip(Reason.WINDOWS, f"{self.r.display} creates Windows machines, which do not boot RHCOS")
        return self._with_stream()

    def _mco_despite_opt_out(self, skipped: BootImageDecision) -> BootImageDecision:
        """An opted-out MachineSet (`boot-image-updates: Disabled`) the MCO covers: the MCO reads no
        such annotation (measured beside it at 7ff337a: it wrote one within a minute), so what
        happens next is the MCO's decision as if the annotation were not there, marked `opted_out`
        (a writer conflict with the admin's pin, with the fix). Anything else stays `skipped`."""
        opted_out = self.r.annotations.get(ANNOTATION_BOOT_IMAGE_UPDATES) == BOOT_IMAGE_UPDATES_DISABLED
        if not opted_out or self.evidence_only or self.manager is None or self.manager.manager is not Manager.MCO:
            return skipped
        annotations = {k: v for k, v in self.r.annotations.items() if k != ANNOTATION_BOOT_IMAGE_UPDATES}
        mco = _Planner(replace(self.r, annotations=annotations), self.golden, self.facts, self.enrollment).decide()
        if mco.action not in (Action.PATCH, Action.NOOP) or mco.manager is not Manager.MCO:
            return skipped
        what = "patches it" if mco.action is Action.PATCH else "keeps it at the golden image"
        return replace(mco, opted_out=True, message=(
            f"{self.r.display}: annotation {ANNOTATION_BOOT_IMAGE_UPDATES}={BOOT_IMAGE_UPDATES_DISABLED} opts it out of "
            f"this controller only; the Machine Config Operator reads no such annotation and {what}: {mco.message}"))

    def _with_stream(self) -> BootImageDecision:
        label = self.r.labels.get(LABEL_OSSTREAM)
        found = self.golden.lookup(label)
        self.stream_name = found.name
        if found.error is not None:
            return self.error(Reason.INVALID_STREAM_DATA, f"stream {found.name!r} cannot be used: {found.error}")
        if found.stream is None:
            available = ", ".join(s.name for s in self.golden.all_streams())
            return self.skip(
                Reason.STREAM_NOT_AVAILABLE,
                f"{self.r.display} is labelled {LABEL_OSSTREAM}={label} but coreos-bootimages has no such "
                f"stream (available: {available})",
            )
        arch_or_decision = self._architecture()
        if isinstance(arch_or_decision, BootImageDecision):
            return arch_or_decision
        self.arch = arch_or_decision
        images = found.stream.arch(self.arch)
        if images is None and self.arch in found.stream.invalid_archs:
            return self.error(
                Reason.BOOT_IMAGES_CONFIGMAP_INVALID,
                f"{self.r.display}: its boot images in stream {found.name} are unusable: "
                f"{found.stream.invalid_archs[self.arch]}",
            )
        if images is None:
            return self.skip(
                Reason.ARCHITECTURE_NOT_IN_STREAM,
                f"stream {found.name} publishes no {self.arch} boot images",
            )
        return self._with_platform(RuleContext(self.r, {}, self.arch, found.stream, images, self.golden, self.facts))

    def _architecture(self) -> str | BootImageDecision:
        """Rule 5. CPMS always runs the control-plane architecture, as in the MCO."""
        if self.r.kind != CPMS_KIND:
            value = _arch_from_annotation(self.r.annotations.get(ANNOTATION_AUTOSCALER_LABELS))
            if value is not None:
                rpm = KUBE_TO_RPM_ARCH.get(value)
                if rpm is None:
                    return self.error(
                        Reason.INVALID_ARCHITECTURE,
                        f"{self.r.display}: {LABEL_ARCH}={value} in annotation {ANNOTATION_AUTOSCALER_LABELS} "
                        f"is not one of {', '.join(KUBE_TO_RPM_ARCH)}",
                        field=f"metadata.annotations[{ANNOTATION_AUTOSCALER_LABELS!r}]",
                    )
                return rpm
            if self.facts.multi_arch:
                return self.skip(
                    Reason.ARCHITECTURE_UNKNOWN,
                    f"{self.r.display} has no {LABEL_ARCH} in annotation {ANNOTATION_AUTOSCALER_LABELS} and the "
                    "cluster is multi-architecture; add e.g. kubernetes.io/arch=amd64 to that annotation",
                )
        return self.facts.control_plane_arch

    def _platform_name(self) -> str | None:
        spec = self.r.provider_spec
        kind = spec.get("kind") if is_mapping(spec) else None
        if isinstance(kind, str) and kind:
            known = PROVIDER_KIND_PLATFORM.get(kind)
            return str(known) if known else kind
        return self.facts.platform

    def _with_platform(self, base: RuleContext) -> BootImageDecision:
        spec = self.r.provider_spec
        spec_field = dotted(self.r.provider_spec_path)
        if not is_mapping(spec):
            got = "missing" if spec is None else f"a {type(spec).__name__}, not an object"
            return self.error(Reason.INVALID_PROVIDER_SPEC, f"{self.r.display}: {spec_field} is {got}", spec_field)
        rules = rules_for_platform(self.platform)
        if rules is None:
            return self.skip(
                Reason.UNSUPPORTED_PLATFORM,
                f"{self.r.display}: boot images are not managed on platform {self.platform or 'unknown'}",
            )
        if self.r.kind == CPMS_KIND and self.platform not in CPMS_PLATFORMS:
            return self.skip(
                Reason.UNSUPPORTED_PLATFORM,
                f"{self.r.display}: ControlPlaneMachineSets are managed on AWS, GCP and Azure only",
            )
        ctx = RuleContext(self.r, spec, base.arch, base.stream, base.images, self.golden, self.facts)
        try:
            outcome = rules.evaluate(ctx)
        except InputError as exc:
            return self.error(Reason.INVALID_PROVIDER_SPEC, f"{self.r.display}: {exc.field}: {exc.problem}", exc.field)
        if isinstance(outcome, Failure):
            return self.error(outcome.reason, outcome.message, dotted(outcome.field) if outcome.field else None)
        if isinstance(outcome, Skip):
            return self._from_skip(outcome)
        return self._compare(outcome)

    def _from_skip(self, s: Skip) -> BootImageDecision:
        return self.decision(Action.SKIP, s.reason, s.message, field=dotted(s.field) if s.field else None,
                             ask_cloud=s.ask_cloud, **image_facts(s))

    def _compare(self, t: Target) -> BootImageDecision:
        """Rules 4 (implicit major change) and 7 (equality, never version order)."""
        extra: dict[str, Any] = {"field": dotted(t.field), **image_facts(t)}
        if t.current == t.target:
            return self.decision(Action.NOOP, Reason.UP_TO_DATE, f"{self.r.display} boots the golden image", **extra)
        failed = self._failed_first_boot(t)
        if failed:
            return self.decision(Action.SKIP, Reason.TARGET_IMAGE_FAILED_FIRST_BOOT, failed, **extra)
        change = self._major_change(t)
        if change:
            return self.decision(Action.SKIP, Reason.STREAM_CHANGE_REQUIRES_LABEL, change, **extra)
        back = is_downgrade(t.current_release, t.target_release)
        note = " (back to an older build: the golden data is older than the image it boots)" if back else ""
        if t.warning:
            note += f"; warning: {t.warning}"
        return self.decision(
            Action.PATCH,
            Reason.BOOT_IMAGE_OUTDATED,
            f"{self.r.display}: boot image {t.current_release or 'unknown release'} -> {t.target_release or 'golden'}{note}",
            changes=t.changes,
            downgrade=back,
            warning=t.warning,
            **extra,
        )

    @property
    def recorded(self) -> BootVerdict | None:
        """The verdict recorded on the MachineSet (SPEC section 3b), read once for the rule below
        and for the decision's `verified`. (Not `functools.cached_property`: on Python 3.11 it takes
        a lock at every first read, once per decision.)"""
        if self._recorded is _UNREAD:
            self._recorded = BootVerdict.from_annotations(self.r.annotations)
        return cast("BootVerdict | None", self._recorded)

    def with_recorded_verdict(self, decision: BootImageDecision) -> BootImageDecision:
        """`decision` carrying the recorded verdict when it is about the image the MachineSet boots."""
        recorded = self.recorded
        if recorded is None or recorded.image is None or recorded.image != image_label(decision.current):
            return decision
        return replace(decision, verified=recorded.to_json())

    def _failed_first_boot(self, t: Target) -> str | None:
        """SPEC section 3b: a golden image this controller rolled back from after its first boot
        failed here is not written to this MachineSet again while the golden data names it."""
        recorded = self.recorded
        image = image_label(t.target)
        if recorded is None or image is None or image not in recorded.failed_images:
            return None
        return (
            f"{self.r.display}: the golden boot image {image} failed its first boot here and was rolled back; "
            "it is not written again while the golden data names it (see annotation "
            f"{ANNOTATION_BOOT_IMAGE_VERIFIED}; a new golden image is written as usual)"
        )

    def _major_change(self, t: Target) -> str | None:
        if LABEL_OSSTREAM in self.r.labels or not t.current_release or not t.target_release:
            return None
        # Marketplace versions (Azure `9.6.20251015`) count too: they name a RHEL major.
        cur, tgt = release_rhel_major(t.current_release), release_rhel_major(t.target_release)
        # RHEL 8 -> 9 (OpenShift 4.13) stays automatic; a move between 9 and later needs the label.
        if cur is None or tgt is None or cur == tgt or min(cur, tgt) < 9:
            return None
        return (
            f"{self.r.display} boots a RHEL {cur} image ({t.current_release}) but the default stream is "
            f"RHEL {tgt}; label it {LABEL_OSSTREAM}=rhel-{tgt} to move it, or rhel-{cur} to keep it"
        )


def authoritative_api(obj: Mapping[str, Any]) -> str | None:
    """A Machine API MachineSet's `status.authoritativeAPI` (the MachineAPIMigration feature)."""
    value = get_path(obj, ("status", "authoritativeAPI"))
    return value if isinstance(value, str) else None


def _arch_from_annotation(value: str | None) -> str | None:
    if not value:
        return None
    for item in value.split(","):
        key, _, val = item.strip().partition("=")
        if key == LABEL_ARCH:
            return val.strip()
    return None


__all__ = ["get_path", "identify_boot_image", "invalid_object", "is_our_owner_reference", "plan_all", "plan_machine"]
