"""The skew enforcement setting and the mode in effect (SPEC section 5).

`SkewSetting` is `MachineConfiguration.spec.bootImageSkewEnforcement` parsed with the OpenShift
API's own validation rules and messages (openshift/api `operator/v1`,
`BootImageSkewEnforcementConfig` and `ClusterBootImageManual`), so `plan` on a manifest tells the
administrator what the API server would have said.

`effective_skew_mode` derives `status.bootImageSkewEnforcementStatus` the way the Machine Config
Operator's `syncBootImageSkewEnforcementStatus` does (reference section 11.2):

1. spec set: Manual -> `{mode: Manual, manual: <spec.manual>}`, None -> `{mode: None}`;
2. BareMetal platform -> None;
3. single-node (`controlPlaneTopology: SingleReplica`) -> None;
4. a platform that supports boot image updates (AWS, GCP, Azure, VSphere) with every MachineSet
   enrolled -> Automatic, keeping the existing automatic record, seeded with the install version
   when the status was not Automatic before;
5. anything else -> Manual at the install version (recomputed every time).

Deliberate difference: the MCO treats BareMetal as None only on the machine-os-images path (no
metal3 `provisioningOSDownloadURL`); we have no reason to read the Provisioning object and follow the
SPEC: bare-metal clusters are None.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import Any, TypeVar

from ...constants import (
    DEFAULT_ENROLLED_PLATFORMS,
    MACHINECONFIGURATION_KIND,
    MACHINECONFIGURATION_NAME,
    SINGLE_REPLICA_TOPOLOGY,
    Platform,
    SkewMode,
)
from ...errors import InputError
from ..model import InputNote
from .record import (
    BootImageRecord,
    BootImageRelease,
    ReleaseSource,
    automatic_record_after_pass,
    validate_api_version,
)
from .versions import OcpVersion

MC_OBJECT = f"{MACHINECONFIGURATION_KIND} {MACHINECONFIGURATION_NAME}"
SPEC_FIELD = "spec.bootImageSkewEnforcement"
STATUS_FIELD = "status.bootImageSkewEnforcementStatus"

# openshift/api union rules (x-kubernetes-validations messages, verbatim).
MANUAL_UNION_MESSAGE = "manual is required when mode is Manual, and forbidden otherwise"
AUTOMATIC_UNION_MESSAGE = "automatic is required when mode is Automatic, and forbidden otherwise"
OCP_UNION_MESSAGE = "ocpVersion is required when mode is OCPVersion, and forbidden otherwise"
RHCOS_UNION_MESSAGE = "rhcosVersion is required when mode is RHCOSVersion, and forbidden otherwise"


class ManualMode(StrEnum):
    OCP_VERSION = "OCPVersion"
    RHCOS_VERSION = "RHCOSVersion"


_E = TypeVar("_E", bound=StrEnum)

# manual mode -> the one version key it requires (the other is forbidden)
_MANUAL_KEYS = {
    ManualMode.OCP_VERSION: "ocpVersion",
    ManualMode.RHCOS_VERSION: "rhcosVersion",
}
_UNION_MESSAGES = {"ocpVersion": OCP_UNION_MESSAGE, "rhcosVersion": RHCOS_UNION_MESSAGE}


@dataclass(frozen=True)
class ManualSkew:
    """`ClusterBootImageManual`: the administrator's statement of the oldest boot image."""

    mode: ManualMode
    version: str

    @property
    def key(self) -> str:
        return _MANUAL_KEYS[self.mode]

    def release(self) -> BootImageRelease:
        if self.mode is ManualMode.OCP_VERSION:
            return BootImageRelease.ocp(self.version, ReleaseSource.MANUAL)
        return BootImageRelease.rhcos(self.version, ReleaseSource.MANUAL)

    def to_dict(self) -> dict[str, str]:
        return {"mode": str(self.mode), self.key: self.version}

    @classmethod
    def at_install_version(cls, install_version: OcpVersion) -> ManualSkew:
        return cls(ManualMode.OCP_VERSION, str(install_version))

    @classmethod
    def from_api(cls, value: Any, obj: str, where: str) -> ManualSkew:
        """Parse `manual` with the API's rules; raises `InputError` naming obj and the field."""
        if not isinstance(value, Mapping):
            raise InputError(obj, where, f"expected an object, got {type(value).__name__}")
        mode = _enum(value.get("mode"), ManualMode, obj, f"{where}.mode")
        for key, message in _UNION_MESSAGES.items():
            wanted = _MANUAL_KEYS[mode] == key
            if (value.get(key) is not None) != wanted:
                raise InputError(obj, where, message)
        key = _MANUAL_KEYS[mode]
        return cls(mode, validate_api_version(key, value[key], obj, f"{where}.{key}"))


def _enum(value: Any, enum: type[_E], obj: str, where: str) -> _E:
    if value is None:
        raise InputError(obj, where, "Required value")
    try:
        return enum(value)
    except ValueError:
        supported = ", ".join(f'"{m.value}"' for m in enum)
        raise InputError(obj, where, f"Unsupported value: {value!r}: supported values: {supported}") from None


class _SpecMode(StrEnum):
    # What an administrator may write: Automatic is status-only.
    MANUAL = "Manual"
    NONE = "None"


@dataclass(frozen=True)
class SkewSetting:
    """`spec.bootImageSkewEnforcement`; `mode is None` means unset (the cluster default applies).

    Careful: `mode is None` (Python None, unset) differs from `mode == SkewMode.NONE` (the
    administrator's explicit `{mode: None}`, enforcement off).
    """

    mode: SkewMode | None = None
    manual: ManualSkew | None = None

    @property
    def is_set(self) -> bool:
        return self.mode is not None

    @classmethod
    def from_spec(cls, value: Any, obj: str = MC_OBJECT, where: str = SPEC_FIELD) -> SkewSetting:
        """Parse the spec value; absent, null and `{}` (the Go zero value, omitted) are unset."""
        if value is None:
            return cls()
        if not isinstance(value, Mapping):
            raise InputError(obj, where, f"expected an object, got {type(value).__name__}")
        if not value:
            return cls()
        mode = SkewMode(_enum(value.get("mode"), _SpecMode, obj, f"{where}.mode").value)
        if (value.get("manual") is not None) != (mode is SkewMode.MANUAL):
            raise InputError(obj, where, MANUAL_UNION_MESSAGE)
        if mode is SkewMode.NONE:
            return cls(SkewMode.NONE)
        return cls(SkewMode.MANUAL, ManualSkew.from_api(value["manual"], obj, f"{where}.manual"))

    @classmethod
    def from_machine_configuration(cls, mc: Mapping[str, Any] | None) -> SkewSetting:
        """The setting of MachineConfiguration `cluster` (None or no spec: unset)."""
        spec = mc.get("spec") if isinstance(mc, Mapping) else None
        if spec is None:
            return cls()
        if not isinstance(spec, Mapping):
            raise InputError(MC_OBJECT, "spec", f"expected an object, got {type(spec).__name__}")
        return cls.from_spec(spec.get("bootImageSkewEnforcement"))


@dataclass(frozen=True)
class SkewEnforcementStatus:
    """`status.bootImageSkewEnforcementStatus`: the mode in effect and the recorded boot image."""

    mode: SkewMode
    automatic: BootImageRecord | None = None
    manual: ManualSkew | None = None
    # Why this mode applies, for plan output and logs; not written to the API.
    explanation: str = field(default="", compare=False)

    def to_status(self) -> dict[str, Any]:
        """The object for `status.bootImageSkewEnforcementStatus` (absent keys left out)."""
        out: dict[str, Any] = {"mode": str(self.mode)}
        if self.mode is SkewMode.AUTOMATIC and self.automatic is not None:
            out["automatic"] = self.automatic.to_dict()
        if self.mode is SkewMode.MANUAL and self.manual is not None:
            out["manual"] = self.manual.to_dict()
        return out

    @property
    def complete(self) -> bool:
        """False when the mode needs a record that is unknown (Automatic or Manual seeded from an
        install version nobody knows): the API would refuse such a status, and nothing is invented."""
        if self.mode is SkewMode.AUTOMATIC:
            return self.automatic is not None
        if self.mode is SkewMode.MANUAL:
            return self.manual is not None
        return True

    def to_merge_patch(self, previous: Mapping[str, Any] | None) -> dict[str, Any] | None:
        """`to_status()` plus explicit nulls for keys of `previous` that must go; None when the
        status is not `complete` (then nothing is written and the previous status stays).

        A JSON merge patch merges objects: without the nulls, switching `automatic` from
        `{ocpVersion}` to `{rhcosVersion}` would keep the stale ocpVersion (the MCO replaces the
        whole struct).
        """
        if not self.complete:
            return None
        return _with_nulls(self.to_status(), previous)

    def recorded_release(self) -> BootImageRelease | None:
        """The value the MCO would judge: the automatic record or the manual value."""
        if self.mode is SkewMode.AUTOMATIC and self.automatic is not None:
            return self.automatic.judged_release(ReleaseSource.AUTOMATIC)
        if self.mode is SkewMode.MANUAL and self.manual is not None:
            return self.manual.release()
        return None

    def after_pass(
        self,
        *,
        skipped: int,
        errors: int,
        target_releases: list[str] | tuple[str, ...],
        configmap_release_version: str | None,
        install_version: OcpVersion | None,
        notes: list[InputNote] | None = None,
    ) -> SkewEnforcementStatus:
        """The status after a MachineSet pass: only the Automatic record moves (record.py)."""
        if self.mode is not SkewMode.AUTOMATIC:
            return self
        record = automatic_record_after_pass(
            self.automatic,
            skipped=skipped,
            errors=errors,
            target_releases=target_releases,
            configmap_release_version=configmap_release_version,
            install_version=install_version,
            notes=notes,
        )
        return self if record == self.automatic else replace(self, automatic=record)

    @classmethod
    def from_status(
        cls, value: Any, obj: str = MC_OBJECT, where: str = STATUS_FIELD
    ) -> SkewEnforcementStatus:
        """Parse a status written by us or the MCO, with the API's rules; raises `InputError`."""
        if not isinstance(value, Mapping):
            raise InputError(obj, where, f"expected an object, got {type(value).__name__}")
        mode = _enum(value.get("mode"), SkewMode, obj, f"{where}.mode")
        if (value.get("automatic") is not None) != (mode is SkewMode.AUTOMATIC):
            raise InputError(obj, where, AUTOMATIC_UNION_MESSAGE)
        if (value.get("manual") is not None) != (mode is SkewMode.MANUAL):
            raise InputError(obj, where, MANUAL_UNION_MESSAGE)
        if mode is SkewMode.AUTOMATIC:
            return cls(
                mode, automatic=BootImageRecord.from_api(value["automatic"], obj, f"{where}.automatic")
            )
        if mode is SkewMode.MANUAL:
            return cls(mode, manual=ManualSkew.from_api(value["manual"], obj, f"{where}.manual"))
        return cls(mode)


def previous_status_of(mc: Mapping[str, Any] | None, notes: list[InputNote] | None = None
                       ) -> SkewEnforcementStatus | None:
    """The skew status already on MachineConfiguration `cluster`; None when absent or invalid.

    An invalid status (hand-edited, or written by a newer operator) is noted (`notes`, for the
    caller to log) and treated as absent: the mode is derived afresh and an Automatic record is
    re-seeded at the install version.
    """
    status = mc.get("status") if isinstance(mc, Mapping) else None
    value = status.get("bootImageSkewEnforcementStatus") if isinstance(status, Mapping) else None
    if value is None or value == {}:
        return None
    try:
        return SkewEnforcementStatus.from_status(value)
    except InputError as exc:
        if notes is not None:
            notes.append(InputNote.of("the recorded bootImageSkewEnforcementStatus is invalid; not used", error=exc))
        return None


def effective_skew_mode(
    setting: SkewSetting,
    *,
    platform: str | None,
    control_plane_topology: str | None,
    all_machinesets_enrolled: bool,
    install_version: OcpVersion | None,
    previous_status: SkewEnforcementStatus | None,
) -> SkewEnforcementStatus:
    """The skew status to enforce and write back (module docstring has the rules).

    `all_machinesets_enrolled` is True when MachineSet enrollment resolves to `All` (explicitly, or
    by the platform default); `platform` is Infrastructure `status.platformStatus.type`.
    """
    if setting.mode is SkewMode.MANUAL and setting.manual is not None:
        return SkewEnforcementStatus(
            SkewMode.MANUAL, manual=setting.manual, explanation=f"{SPEC_FIELD} is Manual"
        )
    if setting.mode is SkewMode.NONE:
        return SkewEnforcementStatus(SkewMode.NONE, explanation=f"{SPEC_FIELD} is None")
    if platform == Platform.BAREMETAL:
        return SkewEnforcementStatus(SkewMode.NONE, explanation="bare-metal clusters default to None")
    if control_plane_topology == SINGLE_REPLICA_TOPOLOGY:
        return SkewEnforcementStatus(SkewMode.NONE, explanation="single-node clusters default to None")
    if platform in DEFAULT_ENROLLED_PLATFORMS and all_machinesets_enrolled:
        kept = (
            previous_status.automatic
            if previous_status and previous_status.mode is SkewMode.AUTOMATIC
            else None
        )
        seed = BootImageRecord.for_ocp(install_version) if install_version is not None else None
        return SkewEnforcementStatus(
            SkewMode.AUTOMATIC,
            automatic=kept or seed,
            explanation=f"every MachineSet is enrolled for boot image updates on {platform}",
        )
    why = (
        f"platform {platform or 'unknown'} does not support boot image updates"
        if platform not in DEFAULT_ENROLLED_PLATFORMS
        else "not every MachineSet is enrolled for boot image updates"
    )
    return SkewEnforcementStatus(
        SkewMode.MANUAL,
        manual=ManualSkew.at_install_version(install_version) if install_version is not None else None,
        explanation=(
            f"{why}: Manual at the install version "
            f"{install_version if install_version is not None else UNKNOWN_INSTALL_VERSION} until {SPEC_FIELD} is set"
        ),
    )


def install_version_from_cluster_version(cv: Mapping[str, Any] | None, notes: list[InputNote] | None = None
                                        ) -> OcpVersion | None:
    """The install version: the oldest Completed `status.history` entry (the list is newest
    first, so scan from the end); none Completed -> the oldest entry. None when nothing says: no
    ClusterVersion, no history, or a version that does not parse. Unknown is never guessed (an
    invented `0.0.0` would report a boot image nobody has and hold upgrades over it).
    """
    status = cv.get("status") if isinstance(cv, Mapping) else None
    history = status.get("history") if isinstance(status, Mapping) else None
    entries = [h for h in history if isinstance(h, Mapping)] if isinstance(history, list) else []
    if not entries:
        return None
    chosen = next((h for h in reversed(entries) if h.get("state") == "Completed"), entries[-1])
    version = chosen.get("version")
    try:
        return OcpVersion.parse(str(version or ""), "ClusterVersion version status.history[].version")
    except InputError:
        if notes is not None:
            notes.append(InputNote.of("the ClusterVersion install version does not parse; not used", value=version))
        return None


UNKNOWN_INSTALL_VERSION = "unknown (no ClusterVersion with a usable status.history)"


def cluster_version_minor(cv: Mapping[str, Any] | None) -> str | None:
    """`X.Y` of `status.history[0].version` (for the docs URL), None when unknown."""
    status = cv.get("status") if isinstance(cv, Mapping) else None
    history = status.get("history") if isinstance(status, Mapping) else None
    if not isinstance(history, list) or not history or not isinstance(history[0], Mapping):
        return None
    try:
        v = OcpVersion.parse(str(history[0].get("version") or ""))
    except InputError:
        return None
    return f"{v.major}.{v.minor}"


def _with_nulls(new: Mapping[str, Any], old: Mapping[str, Any] | None) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in new.items():
        prev = old.get(key) if isinstance(old, Mapping) else None
        out[key] = _with_nulls(value, prev) if isinstance(value, Mapping) else value
    if isinstance(old, Mapping):
        for key in old:
            if key not in new:
                out[key] = None
    return out
