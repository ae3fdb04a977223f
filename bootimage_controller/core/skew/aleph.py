"""Aleph files: the build id of the boot image a node was installed from.

Formats (reference/stream-metadata.md section 5.1):

- coreos-assembler (`create_disk.sh`, RHCOS up to the osbuild switch): `{"build", "ref",
  "ostree-commit", "imgid"}`;
- osbuild (`org.osbuild.ostree.aleph`, current RHCOS/FCOS): `{"version", "ref", "ostree-commit",
  "osbuild-version", "container-image"?}`, at `/sysroot/.aleph-version.json` with the CoreOS path
  `/sysroot/.coreos-aleph-version.json` a symlink to it;
- bootc (`/sysroot/.bootc-aleph.json`): `{"version", "target-image", "digest", "kernel", ...}`.

The build id is `version or build` (bootupd's rule: `version`, aliased to `build`).

FCOS/OKD build ids (`32.20201002.dev.2`, `43.20260301.20.dev1`) are valid aleph files: `parse_aleph`
accepts them and `aleph-report` annotates them as they are, because the annotation records a fact
about the node, not a judgement. They are not RHCOS build ids, so the skew side
(`record.summarize_alephs`) treats them as unknown and falls back to the install version.

Pure: the file is read by `commands/aleph_file.read_aleph`, which hands the text to `parse_aleph`.
"""

from __future__ import annotations

import json
import posixpath
import re
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from ...constants import BOOTC_ALEPH_FILE
from ...errors import AlephError, VersionError
from .versions import RhcosVersion, parse_rhcos_version

# Real aleph files are under 4 KiB; refuse to load anything near a megabyte.
MAX_ALEPH_BYTES = 1 << 20
# Real build ids are under 40 characters; an annotation value should stay readable.
MAX_BUILD_ID_LENGTH = 128
# What a build id may contain: OSTree/OCI version characters, no spaces or control characters.
_BUILD_ID_CHARS = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+~-]*", re.ASCII)
# Keys only a bootc aleph has.
_BOOTC_KEYS = frozenset({"target-image", "kernel", "digest", "selinux"})


class AlephFormat(StrEnum):
    COSA = "cosa"
    OSBUILD = "osbuild"
    BOOTC = "bootc"


@dataclass(frozen=True)
class AlephInfo:
    """What an aleph file says: the build id, the format it came in, and its ref (if any)."""

    build_id: str
    format: AlephFormat
    ref: str | None
    source: str = ""

    @property
    def rhcos(self) -> RhcosVersion | None:
        """The build id as an RHCOS version; None for FCOS and other non-RHCOS ids."""
        try:
            return parse_rhcos_version(self.build_id)
        except VersionError:
            return None


def parse_aleph(text: str, source: str) -> AlephInfo:
    """Parse an aleph file's text; raises `AlephError` naming `source` and the field."""
    data = _load_object(text, source)
    field, build_id = _build_id(data, source)
    fmt = _format(data, field, source)
    ref_key = "target-image" if fmt is AlephFormat.BOOTC else "ref"
    ref = data.get(ref_key)
    return AlephInfo(build_id, fmt, ref if isinstance(ref, str) and ref else None, source)


def _load_object(text: str, source: str) -> dict[str, Any]:
    if not isinstance(text, str):
        raise AlephError(source, None, f"expected text, got {type(text).__name__}")
    if len(text) > MAX_ALEPH_BYTES:
        raise AlephError(source, None, f"{len(text)} characters is far too large for an aleph file")
    try:
        data = json.loads(text)
    except RecursionError:
        raise AlephError(source, None, "not JSON: nested too deeply") from None
    except ValueError as exc:  # JSONDecodeError, and int() limits on huge numbers
        raise AlephError(source, None, f"not JSON: {exc}") from None
    if not isinstance(data, dict):
        raise AlephError(source, None, f"expected a JSON object, got {type(data).__name__}")
    return data


def _build_id(data: dict[str, Any], source: str) -> tuple[str, str]:
    for key in ("version", "build"):
        value = data.get(key)
        if value is None or value == "":
            continue
        if not isinstance(value, str):
            raise AlephError(source, key, f"expected a string, got {type(value).__name__}")
        value = value.strip()
        if len(value) > MAX_BUILD_ID_LENGTH:
            raise AlephError(source, key, f"{len(value)} characters is too long for a build id")
        if not _BUILD_ID_CHARS.fullmatch(value):
            raise AlephError(source, key, f"{value!r} is not a build id")
        return key, value
    raise AlephError(source, "version", "no build id: neither `version` nor `build` is set")


def _format(data: dict[str, Any], field: str, source: str) -> AlephFormat:
    if field == "build":
        return AlephFormat.COSA
    if posixpath.basename(source) == BOOTC_ALEPH_FILE or _BOOTC_KEYS & data.keys():
        return AlephFormat.BOOTC
    return AlephFormat.OSBUILD
