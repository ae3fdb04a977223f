"""Where a boot image release comes from, and the record the skew check keeps (SPEC section 5).

A `BootImageRelease` is one value the skew check can judge: an RHCOS build id or an OCP version,
with the `ReleaseSource` that gave it (printed as `clusterBootImage.source` by `plan -o json`).

`machineset_boot_image` picks a MachineSet's release from the best evidence available, in the
SPEC's order: our `boot-image-release` annotation, then the planner's identification of the current
image (golden data, bundled index, cloud), then the minimum control-plane aleph, then the
ClusterVersion install version.

`BootImageRecord` is the `{ocpVersion, rhcosVersion}` value kept in
`status.bootImageSkewEnforcementStatus.automatic` (and `manual`), validated with the OpenShift API's
own patterns and messages; `automatic_record_after_pass` keeps it as the Machine Config Operator
does (reference mco-boot-image-controller.md section 11.3), with the differences documented there.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from ...constants import ANNOTATION_ALEPH_VERSION, ANNOTATION_RELEASE, UNKNOWN_RELEASE_VERSION
from ...errors import InputError, VersionError
from ..model import InputNote
from .versions import OcpVersion, RhcosVersion, marketplace_ocp_version, parse_rhcos_version


class ReleaseSource(StrEnum):
    """Which evidence gave a boot image release (`clusterBootImage.source` in `plan -o json`)."""

    MACHINESET_RECORD = "MachineSetRecord"  # our boot-image-release annotation on the MachineSet
    GOLDEN_DATA = "GoldenData"  # the current image is in a stream of the coreos-bootimages ConfigMap
    BUNDLED_INDEX = "BundledIndex"  # the current image is in the bundled index of published images
    CLOUD = "Cloud"  # AMI name/description, GCP image name, Azure image version
    ALEPH = "Aleph"  # the oldest aleph across control-plane Nodes (the install-time boot image)
    INSTALL_VERSION = "InstallVersion"  # ClusterVersion: the oldest Completed history entry
    MANUAL = "Manual"  # the administrator's spec.bootImageSkewEnforcement.manual value
    AUTOMATIC = "Automatic"  # the record kept in MachineConfiguration status (Automatic mode)

    @property
    def described(self) -> str:
        """The source in words, for messages an administrator reads (the value stays in JSON)."""
        return _DESCRIBED[self]


_DESCRIBED = {
    ReleaseSource.MACHINESET_RECORD: "the MachineSet's boot-image-release record",
    ReleaseSource.GOLDEN_DATA: "the golden data",
    ReleaseSource.BUNDLED_INDEX: "the index of published RHCOS images",
    ReleaseSource.CLOUD: "the cloud",
    ReleaseSource.ALEPH: "the control-plane nodes' aleph",
    ReleaseSource.INSTALL_VERSION: "the install version",
    ReleaseSource.MANUAL: "the Manual setting",
    ReleaseSource.AUTOMATIC: "the Automatic record",
}


# Sources that identify the MachineSet's own current image (the planner sets these on decisions).
IMAGE_SOURCES = frozenset({ReleaseSource.GOLDEN_DATA, ReleaseSource.BUNDLED_INDEX, ReleaseSource.CLOUD})
# Sources that describe the MachineSet itself rather than a cluster-wide guess.
MACHINESET_SOURCES = IMAGE_SOURCES | {ReleaseSource.MACHINESET_RECORD}


class ReleaseKind(StrEnum):
    RHCOS = "rhcos"
    OCP = "ocp"


# RHEL-aligned build ids (`9.6.20250402-0`) started with OCP 4.19: every such id is at least that era.
_RHEL_ALIGNED_FIRST_OCP = (4, 19)


@dataclass(frozen=True)
class BootImageRelease:
    """One boot image release the skew check can judge."""

    value: str
    kind: ReleaseKind
    source: ReleaseSource

    @classmethod
    def rhcos(cls, value: str, source: ReleaseSource) -> BootImageRelease:
        return cls(value, ReleaseKind.RHCOS, source)

    @classmethod
    def ocp(cls, value: str | OcpVersion, source: ReleaseSource) -> BootImageRelease:
        return cls(str(value), ReleaseKind.OCP, source)

    def to_json(self) -> dict[str, Any]:
        """`clusterBootImage` of `plan -o json`: `{"rhcosVersion", "ocpVersion", "source"}`."""
        return {
            "rhcosVersion": self.value if self.kind is ReleaseKind.RHCOS else None,
            "ocpVersion": self.value if self.kind is ReleaseKind.OCP else None,
            "source": str(self.source),
        }

    def __str__(self) -> str:
        return f"{self.value} ({self.source})"


def release_age_key(release: BootImageRelease) -> tuple[Any, ...]:
    """Sort key, oldest first, across RHCOS build ids and OCP versions.

    The OCP era comes first (an OCP version's minor, an OCP-encoded id's minor, 4.19 for every
    RHEL-aligned id), then the RHEL version, then build order. An OCP version sorts before an RHCOS
    id of the same era: it is the less precise, more conservative value. Values that do not parse
    sort first of all, so they are never hidden behind a known one. Used only to choose which value
    to report; update decisions never order boot images.
    """
    if release.kind is ReleaseKind.OCP:
        try:
            v = OcpVersion.parse(release.value)
        except VersionError:
            return (0, (), release.value)
        return (1, (v.major, v.minor), 0, (), ("", v.patch))
    try:
        r = parse_rhcos_version(release.value)
    except VersionError:
        return (0, (), release.value)
    era = (r.ocp.major, r.ocp.minor) if r.ocp is not None else _RHEL_ALIGNED_FIRST_OCP
    return (1, era, 1, (r.rhel.major, r.rhel.minor), r.build_order)


def pick_cluster_boot_image(
    releases: Iterable[BootImageRelease], below_limit: Callable[[BootImageRelease], bool]
) -> BootImageRelease | None:
    """`ClusterBootImage`: the oldest release below its limit if any, else the oldest overall."""
    all_releases = list(releases)
    if not all_releases:
        return None
    below = [r for r in all_releases if below_limit(r)]
    return min(below or all_releases, key=release_age_key)


# --- one MachineSet's boot image ------------------------------------------------------------


def machineset_boot_image(
    annotations: Mapping[str, str],
    decision_current_release: str | None,
    decision_release_source: str | None,
    aleph_min: str | None,
    install_version: OcpVersion | None,
    notes: list[InputNote] | None = None,
) -> BootImageRelease | None:
    """A MachineSet's boot image release, from the best evidence (SPEC section 5, in order).

    1. our `boot-image-release` annotation (what we last wrote);
    2. the planner's `current_release` when its source is GoldenData, BundledIndex or Cloud;
    3. the oldest control-plane aleph (MachineSets never updated still boot the install image);
    4. the ClusterVersion install version, as an OCP version;
    None when none of these says (no ClusterVersion either): unknown, never guessed.

    A value that is not an RHCOS build id (a hand-edited annotation, an FCOS aleph) is passed over
    with a note in `notes` (the caller logs it) and the next source is used. The fallbacks describe the install-time boot image,
    the oldest a MachineSet can plausibly boot, so passing over a bad value errs towards holding
    upgrades, never towards hiding an old image.
    """
    recorded = annotations.get(ANNOTATION_RELEASE)
    if recorded is not None:
        if _is_rhcos(recorded):
            return BootImageRelease.rhcos(recorded.strip(), ReleaseSource.MACHINESET_RECORD)
        _note(notes, "the boot-image-release annotation is not an RHCOS build id; judged by the next evidence",
              value=recorded, annotation=ANNOTATION_RELEASE)
    source = _release_source(decision_release_source)
    if decision_current_release and source in IMAGE_SOURCES:
        if _is_rhcos(decision_current_release):
            return BootImageRelease.rhcos(decision_current_release.strip(), source)
        # A paid Azure image's version names the OCP minor it shipped with: judged as that release
        # (the MCO compares marketplace versions by major.minor only).
        paid = marketplace_ocp_version(decision_current_release)
        if paid is not None:
            return BootImageRelease.ocp(paid, source)
        _note(notes, "the current image's release is not an RHCOS build id; judged by the next evidence",
              value=decision_current_release, source=str(source))
    if aleph_min and _is_rhcos(aleph_min):
        return BootImageRelease.rhcos(aleph_min.strip(), ReleaseSource.ALEPH)
    if install_version is None:
        return None
    return BootImageRelease.ocp(install_version, ReleaseSource.INSTALL_VERSION)


def _note(notes: list[InputNote] | None, event: str, **fields: object) -> None:
    """A passed-over value, for the caller to log (once: status is recomputed every few seconds)."""
    if notes is not None:
        notes.append(InputNote.of(event, **fields))


def _release_source(value: str | None) -> ReleaseSource | None:
    try:
        return ReleaseSource(value) if value is not None else None
    except ValueError:
        return None


def release_kind(value: str) -> ReleaseKind:
    """An RHCOS build id, or else (as the cluster boot image metric carries either) an OCP version."""
    return ReleaseKind.RHCOS if _is_rhcos(value) else ReleaseKind.OCP


def _is_rhcos(value: str) -> bool:
    # Every status report asks this of every MachineSet's record, and a fleet has few distinct
    # values: cache the short ones (an annotation can hold 256 KiB; the cache must not).
    return _is_rhcos_cached(value) if len(value) <= 64 else _parses_as_rhcos(value)


@functools.lru_cache(maxsize=1024)
def _is_rhcos_cached(value: str) -> bool:
    return _parses_as_rhcos(value)


def _parses_as_rhcos(value: str) -> bool:
    try:
        parse_rhcos_version(value.strip())
    except VersionError:
        return False
    return True


# --- control-plane aleph --------------------------------------------------------------------


@dataclass(frozen=True)
class IgnoredAleph:
    value: str
    problem: str


@dataclass(frozen=True)
class AlephSummary:
    """The oldest RHCOS aleph across control-plane Nodes, and the values that were passed over."""

    minimum: str | None
    ignored: tuple[IgnoredAleph, ...] = ()


def summarize_alephs(node_annotations: Iterable[Mapping[str, str]]) -> AlephSummary:
    """Oldest aleph by RHEL version, then build order; unparseable values ignored with a reason.

    Non-RHCOS values (an FCOS/OKD build id such as `32.20201002.dev.2`, which `aleph-report`
    records faithfully) are unknown to the skew check: they are ignored here, not guessed at.
    """
    best: RhcosVersion | None = None
    ignored: list[IgnoredAleph] = []
    for node in node_annotations:
        value = node.get(ANNOTATION_ALEPH_VERSION)
        if value is None:
            continue
        try:
            parsed = parse_rhcos_version(value.strip())
        except VersionError as exc:
            ignored.append(IgnoredAleph(value, exc.problem))
            continue
        if best is None or _aleph_key(parsed) < _aleph_key(best):
            best = parsed
    return AlephSummary(best.text.strip() if best else None, tuple(ignored))


def _aleph_key(v: RhcosVersion) -> tuple[Any, ...]:
    return (v.rhel, v.build_order)


def min_aleph(node_annotations: Iterable[Mapping[str, str]], notes: list[InputNote] | None = None) -> str | None:
    """The oldest RHCOS aleph across the given Nodes' annotations (None when none is usable); the
    values passed over go to `notes`."""
    summary = summarize_alephs(node_annotations)
    for item in summary.ignored:
        _note(notes, "a control-plane aleph annotation is not an RHCOS build id; not used",
              annotation=ANNOTATION_ALEPH_VERSION, value=item.value, reason=item.problem)
    return summary.minimum


# --- the status record ({ocpVersion, rhcosVersion}) -----------------------------------------

# openshift/api operator/v1 types_machineconfiguration.go (ClusterBootImageManual/Automatic).
# fullmatch, not `$`: CEL's RE2 `$` does not accept a trailing newline, Python's does.
OCP_VERSION_PATTERN = re.compile(r"[0-9]+\.[0-9]+\.[0-9]+")
OCP_VERSION_LENGTH = (5, 10)
OCP_VERSION_MESSAGE = "ocpVersion must match the OCP semver compatible format of x.y.z"
RHCOS_VERSION_PATTERN = re.compile(r"[0-9]+\.[0-9]+\.([0-9]{8}|[0-9]{12})-[0-9]+")
RHCOS_VERSION_LENGTH = (14, 21)
RHCOS_VERSION_MESSAGE = (
    "rhcosVersion must match format [major].[minor].[datestamp(YYYYMMDD)]-[buildnumber] "
    "or must match legacy format [major].[minor].[timestamp(YYYYMMDDHHmm)]-[buildnumber]"
)
AT_LEAST_ONE_MESSAGE = "at least one of ocpVersion or rhcosVersion is required"

_RULES = {
    "ocpVersion": (OCP_VERSION_PATTERN, OCP_VERSION_LENGTH, OCP_VERSION_MESSAGE),
    "rhcosVersion": (RHCOS_VERSION_PATTERN, RHCOS_VERSION_LENGTH, RHCOS_VERSION_MESSAGE),
}


def api_version_problems(key: str, value: Any) -> list[str]:
    """What the API server would say about `ocpVersion`/`rhcosVersion` = value (empty: valid)."""
    pattern, (shortest, longest), message = _RULES[key]
    if not isinstance(value, str):
        return [f"must be of type string, got {type(value).__name__}"]
    problems = []
    if len(value) < shortest:
        problems.append(f"should be at least {shortest} chars long")
    if len(value) > longest:
        problems.append(f"may not be longer than {longest}")
    if not pattern.fullmatch(value):
        problems.append(message)
    return problems


def validate_api_version(key: str, value: Any, obj: str, field: str) -> str:
    """Return value if the API would accept it, else raise `InputError` naming obj and field."""
    problems = api_version_problems(key, value)
    if problems:
        raise InputError(obj, field, f"{_short(value)}: " + "; ".join(problems))
    return str(value)


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:60] + "..."


@dataclass(frozen=True)
class BootImageRecord:
    """`{ocpVersion, rhcosVersion}` as kept in `status.bootImageSkewEnforcementStatus.automatic`."""

    ocp_version: str | None = None
    rhcos_version: str | None = None

    def to_dict(self) -> dict[str, str]:
        out: dict[str, str] = {}
        if self.ocp_version is not None:
            out["ocpVersion"] = self.ocp_version
        if self.rhcos_version is not None:
            out["rhcosVersion"] = self.rhcos_version
        return out

    def judged_release(self, source: ReleaseSource) -> BootImageRelease | None:
        """The value the Machine Config Operator judges: ocpVersion if set, else rhcosVersion."""
        if self.ocp_version:
            return BootImageRelease.ocp(self.ocp_version, source)
        if self.rhcos_version:
            return BootImageRelease.rhcos(self.rhcos_version, source)
        return None

    @classmethod
    def from_api(cls, value: Any, obj: str, field: str) -> BootImageRecord:
        """Parse `ClusterBootImageAutomatic`, with the API's validation rules and messages."""
        if not isinstance(value, Mapping):
            raise InputError(obj, field, f"expected an object, got {type(value).__name__}")
        found: dict[str, str] = {}
        for key in ("ocpVersion", "rhcosVersion"):
            if value.get(key) is not None:
                found[key] = validate_api_version(key, value[key], obj, f"{field}.{key}")
        if not found:
            raise InputError(obj, field, AT_LEAST_ONE_MESSAGE)
        return cls(found.get("ocpVersion"), found.get("rhcosVersion"))

    @classmethod
    def for_ocp(cls, version: OcpVersion) -> BootImageRecord:
        return cls(ocp_version=str(version))


def automatic_record_after_pass(
    current: BootImageRecord | None,
    *,
    skipped: int,
    errors: int,
    target_releases: Iterable[str],
    configmap_release_version: str | None,
    install_version: OcpVersion | None,
    notes: list[InputNote] | None = None,
) -> BootImageRecord | None:
    """The Automatic-mode record after one MachineSet pass (reference section 11.3).

    - errors > 0: untouched (errors hold upgrades through Degraded instead);
    - skips and no errors: the install version (a skipped MachineSet may still boot it); untouched
      when the install version is unknown;
    - clean pass: the oldest RHCOS build id among `target_releases` (the targets of every
      MachineSet now at its target: patched or already up to date) as `rhcosVersion`; when there
      is none, the ConfigMap `releaseVersion` as `ocpVersion`; when that is missing or unusable,
      untouched.

    Deliberate differences from the Machine Config Operator: the MCO records an RHCOS value only
    for Azure marketplace images and otherwise trusts `releaseVersion`; we record the oldest target
    build id we wrote or confirmed, which is what the MachineSets actually boot. A build id the API
    would refuse (`43.82.202008010953.0`: dot before the serial) is not recorded. The installer's
    placeholder `0.0.1-snapshot` counts as missing (the MCO would record `0.0.1` and hold upgrades).
    The caller applies this in Automatic mode only.
    """
    if errors > 0:
        return current
    if skipped > 0:
        return BootImageRecord.for_ocp(install_version) if install_version is not None else current
    oldest = _oldest_recordable(target_releases)
    if oldest is not None:
        return BootImageRecord(rhcos_version=oldest)
    ocp = _recordable_release_version(configmap_release_version)
    if ocp is None:
        _note(notes, "automatic_record_unchanged", reason="no usable releaseVersion", value=configmap_release_version)
        return current
    return BootImageRecord(ocp_version=ocp)


def _oldest_recordable(target_releases: Iterable[str]) -> str | None:
    best: RhcosVersion | None = None
    for value in target_releases:
        if not value or api_version_problems("rhcosVersion", value):
            continue
        try:
            parsed = parse_rhcos_version(value)
        except VersionError:
            continue
        if best is None or _aleph_key(parsed) < _aleph_key(best):
            best = parsed
    return best.text if best else None


def _recordable_release_version(value: str | None) -> str | None:
    if not value or value.strip() == UNKNOWN_RELEASE_VERSION:
        return None
    try:
        text = str(OcpVersion.parse(value, "coreos-bootimages releaseVersion"))
    except VersionError:
        return None
    return None if api_version_problems("ocpVersion", text) else text


def rhel_major(release: BootImageRelease) -> int | None:
    """The RHEL major an RHCOS release implies; None for OCP versions and unparseable ids."""
    if release.kind is not ReleaseKind.RHCOS:
        return None
    try:
        return parse_rhcos_version(release.value).rhel_major
    except VersionError:
        return None


__all__ = [
    "AT_LEAST_ONE_MESSAGE",
    "IMAGE_SOURCES",
    "MACHINESET_SOURCES",
    "OCP_VERSION_MESSAGE",
    "RHCOS_VERSION_MESSAGE",
    "AlephSummary",
    "BootImageRecord",
    "BootImageRelease",
    "IgnoredAleph",
    "ReleaseKind",
    "ReleaseSource",
    "api_version_problems",
    "automatic_record_after_pass",
    "machineset_boot_image",
    "min_aleph",
    "pick_cluster_boot_image",
    "release_age_key",
    "rhel_major",
    "summarize_alephs",
    "validate_api_version",
]
