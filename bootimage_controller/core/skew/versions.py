"""RHCOS build ids and OCP versions, and the RHEL version each build id implies.

Build id schemes seen in OpenShift history (reference/stream-metadata.md section 5):

=============  ===========================  ============================================
OCP            example                      meaning of the fields
=============  ===========================  ============================================
4.1, 4.2       ``410.8.20190520.0``         OCP 4.1(.0) / RHEL 8(.0) / YYYYMMDD . serial
4.3            ``43.82.202008010953.0``     OCP 4.3 / RHEL 8.2 / YYYYMMDDHHMM . serial
4.4 - 4.18     ``418.94.202410090804-0``    OCP 4.18 / RHEL 9.4 / YYYYMMDDHHMM - serial
4.19 and on    ``9.6.20250402-0``           RHEL 9.6 / YYYYMMDD - serial ("RHEL-aligned")
Azure          ``9.6.20251015``             RHEL 9.6 / YYYYMMDD: the unpaid marketplace image's
                                            version, the build's date without its serial (0)
=============  ===========================  ============================================

The paid Azure images' versions (``4.18.2025031114``: OCP 4.18 / YYYYMMDDHH) name an OCP minor,
not a build: `record.marketplace_ocp_version` reads them.

The first field tells the schemes apart: OCP-encoded ids start with ``4`` followed by the OCP
minor (41..419), RHEL-aligned ids start with a RHEL major (8, 9, 10, ...). Unlike the Machine
Config Operator we do not trust the timestamp width alone (it reads ``410.8.20190520.0`` as
"RHEL 410.8"). Versions are only ever used for reporting and skew checks: update decisions
compare boot images for equality, never by version order.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import StrEnum
from functools import lru_cache

from ...errors import VersionError

# ASCII digits only, each numeric field at most 9 digits: int() of a huge digit run raises
# ValueError (Python's int max str digits), and no real version field is longer than a timestamp.
_N = r"\d{1,9}"
_BUILD_ID = re.compile(rf"^({_N})\.({_N})\.(\d{{8}}|\d{{12}})([.-])({_N})$", re.ASCII)
# Azure's unpaid marketplace images (`9.6.20251015`) and paid ones (`4.18.2025031114`).
_MARKETPLACE_RHEL = re.compile(r"^([0-9]{1,2})\.([0-9]{1,3})\.([0-9]{8})$", re.ASCII)
_MARKETPLACE_OCP = re.compile(r"^4\.([0-9]{1,3})\.([0-9]{10})$", re.ASCII)
_OCP = re.compile(rf"^v?({_N})\.({_N})(?:\.({_N}))?(?:[-+].*)?$", re.ASCII)
_RHEL = re.compile(rf"({_N})\.({_N})", re.ASCII)
# Longest text any parser here looks at; real values are under 40 characters.
MAX_VERSION_TEXT = 128
# First field of an OCP-encoded id: "4" then the OCP minor. RHEL majors stay far below 40.
_OCP_ENCODED_MIN = 40


def _plausible(text: object) -> bool:
    return isinstance(text, str) and len(text) <= MAX_VERSION_TEXT


def _shown(text: object) -> str:
    """The value for an error message, cut short: a message must not carry megabytes of input."""
    if isinstance(text, str) and len(text) > 80:
        return f"{text[:80]!r}... ({len(text)} characters)"
    return repr(text)


class BuildIdScheme(StrEnum):
    OCP_ENCODED = "ocp-encoded"
    RHEL_ALIGNED = "rhel-aligned"


@dataclass(frozen=True, order=True)
class RhelVersion:
    major: int
    minor: int

    def __str__(self) -> str:
        return f"{self.major}.{self.minor}"

    @classmethod
    def parse(cls, text: str, what: str = "RHEL version") -> RhelVersion:
        m = _RHEL.fullmatch(text.strip()) if _plausible(text) else None
        if not m:
            raise VersionError(what, None, f"{_shown(text)} is not a RHEL version like 9.2")
        return cls(int(m.group(1)), int(m.group(2)))


@dataclass(frozen=True, order=True)
class OcpVersion:
    major: int
    minor: int
    patch: int = 0

    def __str__(self) -> str:
        return f"{self.major}.{self.minor}.{self.patch}"

    @classmethod
    def parse(cls, text: str, what: str = "OCP version") -> OcpVersion:
        """Generic parse like the MCO's `version.ParseGeneric`: `4.13`, `4.13.0`, `5.0.0-ec.2`."""
        m = _OCP.fullmatch(text.strip()) if _plausible(text) else None
        if not m:
            raise VersionError(what, None, f"{_shown(text)} is not an OCP version like 4.13.0")
        return cls(int(m.group(1)), int(m.group(2)), int(m.group(3) or 0))


@dataclass(frozen=True)
class RhcosVersion:
    """A parsed RHCOS build id (the `release` of a boot image)."""

    text: str
    scheme: BuildIdScheme
    rhel: RhelVersion
    ocp: OcpVersion | None  # only OCP-encoded ids carry it
    timestamp: str
    serial: int

    @property
    def rhel_major(self) -> int:
        return self.rhel.major

    def __str__(self) -> str:
        return self.text

    @property
    def built(self) -> datetime | None:
        """When the build was made, from its timestamp (`202405291527`: minutes; `20251212`: the
        day, taken as midnight UTC). None when the stamp is not a real date."""
        return _built(self.timestamp)

    @property
    def build_order(self) -> tuple[str, int]:
        """Orders builds of one scheme and stream only (for picking the oldest of a kind)."""
        return (self.timestamp.ljust(12, "0"), self.serial)


@lru_cache(maxsize=1024)
def _built(timestamp: str) -> datetime | None:
    # Read from its digits, once per stamp: `strptime` was the planner's largest own time (every
    # decision asks whether its target is older than its current build, issue 36's planner goal).
    if len(timestamp) not in (8, 12) or not timestamp.isdigit():
        return None
    year, month, day = int(timestamp[:4]), int(timestamp[4:6]), int(timestamp[6:8])
    hour, minute = (int(timestamp[8:10]), int(timestamp[10:12])) if len(timestamp) == 12 else (0, 0)
    try:
        return datetime(year, month, day, hour, minute, tzinfo=UTC)
    except ValueError:  # not a real date (month 13)
        return None


def parse_rhcos_version(text: str) -> RhcosVersion:
    """Parse any RHCOS build id scheme; raises `VersionError` naming the value."""
    if not isinstance(text, str):
        # Checked before the cache, which would hash a list or map and raise TypeError.
        raise VersionError("RHCOS version", None, f"expected a string, got {type(text).__name__}")
    return _parse_rhcos_version(text)


@lru_cache(maxsize=4096)
def _parse_rhcos_version(text: str) -> RhcosVersion:
    m = _BUILD_ID.fullmatch(text.strip()) if len(text) <= MAX_VERSION_TEXT else None
    if not m:
        aligned = _MARKETPLACE_RHEL.fullmatch(text.strip()) if len(text) <= MAX_VERSION_TEXT else None
        if aligned is not None and 8 <= int(aligned.group(1)) < _OCP_ENCODED_MIN:
            rhel = RhelVersion(int(aligned.group(1)), int(aligned.group(2)))
            return RhcosVersion(text, BuildIdScheme.RHEL_ALIGNED, rhel, None, aligned.group(3), 0)
        raise VersionError(
            "RHCOS version",
            None,
            f"{_shown(text)} is not an RHCOS build id (like 9.6.20250402-0 or 418.94.202410090804-0)",
        )
    first, second, stamp, _sep, serial = m.groups()
    a = int(first)
    if a >= _OCP_ENCODED_MIN:
        if not first.startswith("4"):
            raise VersionError("RHCOS version", None, f"{_shown(text)}: unknown OCP-encoded prefix {first}")
        ocp_minor_text = first[1:]
        # "410" is OCP 4.1.0 with the 8-digit dates of 4.1/4.2, and OCP 4.10 with 12-digit stamps.
        if len(stamp) == 8 and len(ocp_minor_text) > 1 and ocp_minor_text.endswith("0"):
            ocp_minor_text = ocp_minor_text[:-1]
        ocp = OcpVersion(4, int(ocp_minor_text))
        rhel = RhelVersion(int(second[0]), int(second[1:] or 0))
        return RhcosVersion(text, BuildIdScheme.OCP_ENCODED, rhel, ocp, stamp, int(serial))
    if len(stamp) != 8:
        raise VersionError("RHCOS version", None, f"{_shown(text)}: RHEL-aligned ids carry an 8-digit date")
    return RhcosVersion(text, BuildIdScheme.RHEL_ALIGNED, RhelVersion(a, int(second)), None, stamp, int(serial))


def rhel_major_of(build_id: str) -> int | None:
    """The RHEL major a build id implies, or None when it does not parse."""
    try:
        return parse_rhcos_version(build_id).rhel_major
    except VersionError:
        return None


def marketplace_ocp_version(text: str) -> OcpVersion | None:
    """The OCP minor a paid Azure marketplace image version names (`4.18.2025031114` -> 4.18.0)."""
    m = _MARKETPLACE_OCP.fullmatch(text.strip()) if _plausible(text) else None
    return OcpVersion(4, int(m.group(1))) if m else None
