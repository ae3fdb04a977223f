"""The skew verdict: are upgrades held, why, and what fixes it (SPEC section 5).

Rules, in order of precedence:

1. Automatic or Manual, and a boot image below its limit or a stream mismatch -> not upgradeable,
   `ClusterBootImageSkewError`, with the Machine Config Operator's message text (the version found,
   the limit, the fix and the documentation URL). In Automatic mode every MachineSet's boot image is
   judged (falling back to the status record when there are no MachineSets); in Manual mode the
   administrator's value is judged. A MachineSet labelled `rhel-N` whose boot image implies RHEL
   M != N is a skew error whatever the limits.
2. Automatic with `BootImageUpdateDegraded=True` -> not upgradeable, `BootImageUpdateDegraded`
   (the skew error wins when both apply: it names the fix).
3. None -> upgradeable whatever is found; stream mismatches are still listed in `offenders` so the
   daemon can emit a Warning event and `plan` can print them.
4. Otherwise upgradeable, `AsExpected`.

Judging one value (`judge`): an RHCOS build id by the RHEL version it implies against the RHEL
limit, an OCP version against the OCP limit. Deliberate difference from the MCO, which lets any
value it cannot parse through: a value we cannot parse is held (reported with the reason), never
silently allowed. In practice such values rarely get here: `record.machineset_boot_image` passes
over unparseable evidence, and the API validates the manual and automatic values.

The stream rule uses only evidence about the MachineSet itself (our annotation, the golden data,
the bundled index, the cloud): the aleph and install-version fallbacks are cluster-wide guesses and
an OCP version names no RHEL major, so they cannot convict a MachineSet of a stream mismatch.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ...constants import (
    DEFAULT_OCP_SKEW_LIMIT,
    DEFAULT_RHEL_SKEW_LIMIT,
    LABEL_OSSTREAM,
    OSSTREAM_RHEL_PREFIX,
    SKEW_DOCS_URL,
    SkewMode,
    SkewReason,
)
from ...errors import VersionError
from ..model import first_names
from .policy import SkewEnforcementStatus
from .record import MACHINESET_SOURCES, BootImageRelease, ReleaseKind, pick_cluster_boot_image
from .versions import OcpVersion, RhelVersion, parse_rhcos_version

_STREAM_LABEL = re.compile(rf"{re.escape(OSSTREAM_RHEL_PREFIX)}([0-9]{{1,3}})", re.ASCII)


@dataclass(frozen=True)
class SkewLimits:
    """The oldest boot image upgrades allow: the MCO's compile-time values by default."""

    ocp: OcpVersion = field(default_factory=lambda: OcpVersion.parse(DEFAULT_OCP_SKEW_LIMIT))
    rhel: RhelVersion = field(default_factory=lambda: RhelVersion.parse(DEFAULT_RHEL_SKEW_LIMIT))

    def to_json(self) -> dict[str, str]:
        """`limit` of `plan -o json`: `{"ocpVersion": "4.13.0", "rhelVersion": "9.2"}`."""
        return {"ocpVersion": str(self.ocp), "rhelVersion": str(self.rhel)}

    @classmethod
    def from_flags(
        cls,
        ocp: str | None = None,
        rhel: str | None = None,
        *,
        ocp_flag: str = "--skew-ocp-limit",
        rhel_flag: str = "--skew-rhel-limit",
    ) -> SkewLimits:
        """Limits from command-line values (None: default); `VersionError` names the flag."""
        default = cls()
        return cls(
            OcpVersion.parse(ocp, ocp_flag) if ocp is not None else default.ocp,
            RhelVersion.parse(rhel, rhel_flag) if rhel is not None else default.rhel,
        )


@dataclass(frozen=True)
class Judgement:
    """One release judged against the limits."""

    release: BootImageRelease
    below: bool
    rhel: RhelVersion | None = None  # what an RHCOS build id implies
    problem: str | None = None  # set when the value does not parse (then `below` is True)

    def sentence(self, limits: SkewLimits) -> str:
        """Why upgrades are held, in the MCO's words (`checkOCPVersionSkew`/`checkRHCOSVersionSkew`)."""
        v = self.release.value
        if self.problem is not None:
            return f"the cluster boot image version {v!r} cannot be judged against the skew limits ({self.problem})"
        if self.release.kind is ReleaseKind.OCP:
            return f"the cluster is using OCP boot image version {v}, which is below the minimum required version {limits.ocp}"
        # No space before "(RHEL version": the MCO's text, kept verbatim for anyone matching on it.
        return (
            f"the cluster is using RHCOS boot image version {v}(RHEL version: {self.rhel}), "
            f"which is below the minimum required RHEL version {limits.rhel}"
        )


def judge(release: BootImageRelease, limits: SkewLimits) -> Judgement:
    """Judge one release in its own terms; an unparseable value is held, with the reason."""
    try:
        if release.kind is ReleaseKind.OCP:
            return Judgement(release, OcpVersion.parse(release.value) < limits.ocp)
        rhel = parse_rhcos_version(release.value).rhel
    except VersionError as exc:
        return Judgement(release, True, problem=exc.problem)
    return Judgement(release, rhel < limits.rhel, rhel=rhel)


def below_limit(release: BootImageRelease, limits: SkewLimits) -> bool:
    """True when `release` is older than its limit, or cannot be judged (see `judge`)."""
    return judge(release, limits).below


@dataclass(frozen=True)
class MachineSetSkewInput:
    """One MachineSet as the skew check sees it. `name` is printed as given (e.g. ns/name)."""

    name: str
    stream_label: str | None
    release: BootImageRelease | None  # None: nothing says what it boots (see record.machineset_boot_image)
    # Set when this controller leaves the MachineSet at the image it has although it is enrolled (a
    # confidential VM, a stream without its Hyper-V generation...): the decision reason, named in the
    # verdict so the fix is findable (the MCO counts these as skipped since #6404).
    skipped: str | None = None

    @property
    def labelled(self) -> str:
        return f"{self.name} (skipped: {self.skipped})" if self.skipped else self.name


@dataclass(frozen=True)
class StreamMismatch:
    """A MachineSet labelled `rhel-N` whose boot image is RHEL M != N."""

    name: str
    label: str
    release: BootImageRelease
    rhel: RhelVersion

    @property
    def message(self) -> str:
        return (
            f"MachineSet {self.name} is labelled {LABEL_OSSTREAM}={self.label} but boots "
            f"{self.release.value} (RHEL {self.rhel}, known from {self.release.source.described}); a {self.label} "
            f"MachineSet must boot a RHEL {self.label.removeprefix(OSSTREAM_RHEL_PREFIX)} image"
        )


def stream_mismatches(machinesets: Sequence[MachineSetSkewInput]) -> tuple[StreamMismatch, ...]:
    """Every MachineSet whose own boot image contradicts its `rhel-N` stream label."""
    found = []
    for ms in machinesets:
        m = _STREAM_LABEL.fullmatch(ms.stream_label or "")
        if (
            m is None
            or ms.release is None
            or ms.release.kind is not ReleaseKind.RHCOS
            or ms.release.source not in MACHINESET_SOURCES
        ):
            continue
        try:
            rhel = parse_rhcos_version(ms.release.value).rhel
        except VersionError:
            continue
        if rhel.major != int(m.group(1)):
            found.append(StreamMismatch(ms.name, ms.stream_label or "", ms.release, rhel))
    return tuple(found)


@dataclass(frozen=True)
class SkewVerdict:
    """The outcome: ClusterOperator `Upgradeable` and the `skew` object of `plan -o json`."""

    mode: SkewMode
    upgradeable: bool
    reason: SkewReason
    message: str
    cluster_boot_image: BootImageRelease | None
    limits: SkewLimits
    offenders: tuple[str, ...] = ()  # MachineSets whose boot image contradicts their stream label
    mismatches: tuple[StreamMismatch, ...] = ()  # the same, with the details for events and plan
    below_limit: tuple[str, ...] = ()  # MachineSets whose boot image is below its limit
    unknown: tuple[str, ...] = ()  # MachineSets whose boot image nothing identifies (not judged)
    skipped: tuple[str, ...] = ()  # "ns/name (skipped: Reason)": left at their image, judged by it

    def to_json(self) -> dict[str, Any]:
        """The `skew` object of `plan -o json` (SPEC section 4), keys exact."""
        return {
            "mode": str(self.mode),
            "clusterBootImage": self.cluster_boot_image.to_json() if self.cluster_boot_image else None,
            "limit": self.limits.to_json(),
            "upgradeable": self.upgradeable,
            "reason": str(self.reason),
            "message": self.message,
        }


def docs_url(cluster_version_minor: str | None) -> str:
    """The MCO's skew documentation link for `X.Y` (`latest` when the version is unknown)."""
    try:
        v = OcpVersion.parse(cluster_version_minor or "")
        version = f"{v.major}.{v.minor}"
    except VersionError:
        version = "latest"
    return SKEW_DOCS_URL.format(version=version)


def held_message(reasons: Sequence[str], cluster_version_minor: str | None) -> str:
    """The MCO's `ClusterBootImageSkewError` message around our reasons."""
    return (
        f"Upgrades have been disabled because {'; '.join(reasons)}. To enable upgrades, please update "
        "your boot images or disable boot image skew enforcement by following the documentation at "
        f"{docs_url(cluster_version_minor)}"
    )


def degraded_held_message(message: str) -> str:
    return f"Upgrades have been disabled due to boot image update failures: boot image controller is degraded: {message}"


def evaluate_skew(
    status: SkewEnforcementStatus,
    machinesets: Sequence[MachineSetSkewInput],
    limits: SkewLimits,
    degraded: bool,
    degraded_message: str,
    cluster_version_minor: str | None,
) -> SkewVerdict:
    """The verdict for one pass (module docstring has the rules)."""
    mismatches = stream_mismatches(machinesets)
    named = _judged(status, machinesets)
    judgements = [(name, judge(release, limits)) for name, release in named]
    cluster_image = pick_cluster_boot_image((r for _, r in named), lambda r: below_limit(r, limits))
    labelled = {ms.name: ms.labelled for ms in machinesets}
    below = [(labelled.get(name, name), j) for name, j in judgements if j.below]
    upgradeable, reason, message = _outcome(
        status, below, mismatches, cluster_image, limits, degraded, degraded_message, cluster_version_minor
    )
    judges_machinesets = _judges_machinesets(status)
    unknown = tuple(sorted(ms.name for ms in machinesets if ms.release is None)) if judges_machinesets else ()
    if unknown:
        message += f"; {unknown_message(unknown)}"
    skipped = tuple(sorted(ms.labelled for ms in machinesets if ms.skipped)) if judges_machinesets else ()
    if skipped and upgradeable:
        message += f"; {skipped_message(skipped)}"
    return SkewVerdict(
        mode=status.mode,
        upgradeable=upgradeable,
        reason=reason,
        message=message,
        cluster_boot_image=cluster_image,
        limits=limits,
        offenders=tuple(m.name for m in mismatches),
        mismatches=mismatches,
        below_limit=tuple(sorted({name for name, _ in below if name})),
        unknown=unknown,
        skipped=skipped,
    )


def skipped_message(labelled: Sequence[str]) -> str:
    return (
        f"left at the boot image they have and judged by it: {first_names(labelled, 5)}; "
        "update them by hand or change what the reason names"
    )


def unknown_message(names: Sequence[str]) -> str:
    shown = first_names(names, 5)
    return (
        f"not judged: the boot image of {shown} is unknown (not a known published image, no "
        "boot-image-release record, no aleph on the control-plane Nodes, and no ClusterVersion "
        "install version); an unknown boot image is reported, never guessed"
    )


def _outcome(
    status: SkewEnforcementStatus,
    below: list[tuple[str, Judgement]],
    mismatches: tuple[StreamMismatch, ...],
    cluster_image: BootImageRelease | None,
    limits: SkewLimits,
    degraded: bool,
    degraded_message: str,
    cluster_version_minor: str | None,
) -> tuple[bool, SkewReason, str]:
    if status.mode is SkewMode.NONE:
        return True, SkewReason.AS_EXPECTED, _none_message(mismatches)
    if below or mismatches:
        reasons = _below_reasons(below, cluster_image, limits) + [m.message for m in mismatches]
        return False, SkewReason.CLUSTER_BOOT_IMAGE_SKEW_ERROR, held_message(reasons, cluster_version_minor)
    if status.mode is SkewMode.AUTOMATIC and degraded:
        return False, SkewReason.BOOT_IMAGE_UPDATE_DEGRADED, degraded_held_message(degraded_message)
    return True, SkewReason.AS_EXPECTED, _ok_message(status, cluster_image, limits)


def _judged(
    status: SkewEnforcementStatus, machinesets: Sequence[MachineSetSkewInput]
) -> list[tuple[str, BootImageRelease]]:
    """(MachineSet name or "", release) pairs the mode judges; unknown boot images are not judged."""
    known = [(ms.name, ms.release) for ms in machinesets if ms.release is not None]
    if _judges_machinesets(status) and known:
        return known
    recorded = status.recorded_release()
    return [("", recorded)] if recorded is not None else []


def _judges_machinesets(status: SkewEnforcementStatus) -> bool:
    return status.mode in (SkewMode.AUTOMATIC, SkewMode.NONE)


def _below_reasons(
    below: list[tuple[str, Judgement]], cluster_image: BootImageRelease | None, limits: SkewLimits
) -> list[str]:
    if not below:
        return []
    # Lead with the value clusterBootImage names (the oldest below its limit), in the MCO's words.
    lead = next((j for _, j in below if j.release == cluster_image), below[0][1])
    sentence = lead.sentence(limits)
    names = sorted({name for name, _ in below if name})
    if names:
        sentence += f" (known from {lead.release.source.described}; MachineSets below the limit: {', '.join(names)})"
    else:
        sentence += f" (known from {lead.release.source.described})"
    others = [j.sentence(limits) for _, j in below if j.problem is not None and j is not lead]
    return [sentence, *dict.fromkeys(others)]


def _none_message(mismatches: Sequence[StreamMismatch]) -> str:
    text = "Boot image skew enforcement is disabled (mode None): upgrades are not held whatever the boot images are"
    if mismatches:
        text += "; not enforced: " + "; ".join(m.message for m in mismatches)
    return text


def _ok_message(status: SkewEnforcementStatus, image: BootImageRelease | None, limits: SkewLimits) -> str:
    if image is None:
        why = f" ({status.explanation})" if status.explanation else ""
        return f"Boot image skew ({status.mode}): no boot image version to judge{why}"
    return (
        f"Boot image skew ({status.mode}): the oldest boot image {image.value} (known from {image.source.described}) is "
        f"within the limits (OCP {limits.ocp}, RHEL {limits.rhel})"
    )
