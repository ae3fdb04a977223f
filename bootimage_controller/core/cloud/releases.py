"""RHCOS build ids found in cloud image names and descriptions.

Image names spell the build id in several ways: `rhcos-418.94.202410090804-0-x86_64-hvm` and
`rhcos-9.6.20250402-0-x86_64` (AWS), `rhcos-9-6-20260112-0-gcp-x86-64` and
`rhcos-418-94-202410090804-0-gcp-x86-64` (GCP, dots become dashes), `RHEL CoreOS 9.6
9.6.20260210-0 x86_64` (AWS Marketplace descriptions). A candidate counts only when
`parse_rhcos_version` accepts it, so a date or a UUID fragment is never mistaken for a release.
"""

from __future__ import annotations

import re

from ...errors import VersionError
from ..skew.versions import parse_rhcos_version

_CANDIDATE = re.compile(r"(?<![\d.])(\d+)([.-])(\d+)[.-](\d{12}|\d{8})([.-])(\d+)(?![\d.])")
# The OCP-encoded ids of OCP 4.1/4.2 (`410.8.20190520.0`) separate the serial with a dot.
_OCP_ENCODED_MIN = 40


def release_in_text(text: str | None) -> str | None:
    """The first RHCOS build id spelled in `text`, in its canonical dotted form, or None."""
    if not text:
        return None
    for m in _CANDIDATE.finditer(text):
        first, sep, second, stamp, serial_sep, serial = m.groups()
        if sep == "-":
            # Dashed names lose the original serial separator: restore it from the era.
            serial_sep = "." if len(stamp) == 8 and int(first) >= _OCP_ENCODED_MIN else "-"
        candidate = f"{first}.{second}.{stamp}{serial_sep}{serial}"
        try:
            parse_rhcos_version(candidate)
        except VersionError:
            continue
        return candidate
    return None
