"""Reading a node's aleph file, for `aleph-report` (the parsing is core/skew/aleph.py's, pure)."""

from __future__ import annotations

from pathlib import Path

from ..constants import ALEPH_FILE, BOOTC_ALEPH_FILE
from ..core.skew.aleph import MAX_ALEPH_BYTES, AlephInfo, parse_aleph
from ..errors import AlephError


def read_aleph(sysroot_path: str | Path) -> AlephInfo:
    """Read the node's aleph: `<dir>/.coreos-aleph-version.json`, else `<dir>/.bootc-aleph.json`.

    `sysroot_path` is the sysroot directory (normally `/sysroot`) or a file. A file path is read as
    given; when it is missing and named `.coreos-aleph-version.json`, the bootc file beside it is
    tried (bootupd's order). Raises `AlephError` naming the file(s) when nothing usable is found.
    """
    path = Path(sysroot_path)
    if path.is_dir():
        candidates = [path / ALEPH_FILE, path / BOOTC_ALEPH_FILE]
    elif path.name == ALEPH_FILE:
        candidates = [path, path.with_name(BOOTC_ALEPH_FILE)]
    else:
        candidates = [path]
    for candidate in candidates:
        text = _read_text(candidate)
        if text is not None:
            return parse_aleph(text, str(candidate))
    raise AlephError(" or ".join(str(c) for c in candidates), None, "no aleph file found")


def _read_text(path: Path) -> str | None:
    """The file's text; None when it does not exist (a dangling symlink counts as missing)."""
    try:
        with path.open("rb") as fh:
            raw = fh.read(MAX_ALEPH_BYTES + 1)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise AlephError(str(path), None, f"cannot read: {exc.strerror or exc}") from None
    if len(raw) > MAX_ALEPH_BYTES:
        raise AlephError(str(path), None, "far too large for an aleph file")
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise AlephError(str(path), None, f"not UTF-8 text: {exc.reason} at byte {exc.start}") from None


__all__ = ["read_aleph"]
