"""The Ignition spec 2.x to 3.5.0 translator for stub configs (SPEC section 3). Pure: no I/O.

A MachineSet's `providerSpec.userDataSecret.name` names a Secret whose `userData` key holds the
"stub" (pointer) Ignition config a new machine boots with. Boot images from the RHCOS 4.6 era on
only understand Ignition spec 3, while clusters installed before that still carry spec 2.x stubs.
So before a boot image patch the daemon calls `stub_ignition.ensure_stub_ignition_v3`, which uses
`convert_stub_ignition` here to convert a 2.x stub to spec 3.5.0 (what the Machine Config Operator writes: the ignition v3_5 types' MaxVersion) and
leaves a 3.x stub alone, byte for byte.

The conversion (`convert_stub_ignition`, pure) follows coreos/ign-converter's v23tov30 translator
as the Machine Config Operator uses it, with these choices made explicit:

- Only the `root` filesystem is representable: spec 3 addresses files by path under mounted
  filesystems, and a 2.x filesystem name says nothing about where it would be mounted. A file,
  directory or link on any other filesystem is an error naming its path.
- Files: spec 2 files overwrite by default, spec 3 files do not, so `overwrite` is always written
  explicitly. Entries with `append: true` become the spec 3 file's `append` list, in order.
- Duplicates are removed first, and the LAST entry wins, as in the Machine Config Operator's
  `removeIgnDuplicateFilesUnitsUsers` and ign-converter's `RemoveDuplicateFilesUnitsUsers`: Ignition
  2.x applied entries in order, so the last write is what a machine ended up with. Precisely:
  files per path keep the last non-append entry plus the appends after it (earlier entries were
  overwritten); directories and links per path keep the last entry; units, users and groups of
  the same name are merged field by field, the last entry that sets a field winning (2.x applied
  each entry as a modification: a later unit entry without `contents` left the unit file alone),
  with unit drop-ins merged by name and users' SSH keys concatenated without repeats (what the
  Machine Config Operator does; spec 3 requires unique keys). Unlike the Machine Config Operator,
  users other than `core` are carried over rather than refused: a stub may create them.
- Anything spec 3 cannot express is an error naming the field, never silently dropped: networkd
  units, filesystems with the deprecated `create` or an already-mounted `path`, partitions sized
  in device sectors (512 or 4096 bytes: unknowable offline), unknown fields, and fields newer than
  the config's own 2.x version (Ignition 2.x ignored those, so carrying them over would change
  what a machine gets).

Errors are `UserDataError`s naming the secret and the field; the secret's contents are never
logged and never put into an error message.
"""

from __future__ import annotations

import json
import posixpath
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, NoReturn

from ..constants import STUB_IGNITION_TARGET_VERSION, USER_DATA_SECRET_KEY
from ..errors import UserDataError
from .model import JsonPath, dotted

# Ignition 2.0.0 .. 2.4.0 are the spec 2 versions ever released.
_MAX_SPEC2_MINOR = 4
_VERSION_RE = re.compile(r"(\d+)\.(\d+)\.(\d+)(?:-([0-9A-Za-z.-]+))?")
_INT_LIMIT = 2**63  # Ignition's Go `int` fields
_MAX_MODE = 0o7777
# Unit types systemd (and Ignition's validation) know.
_UNIT_SUFFIXES = frozenset({
    ".service", ".socket", ".device", ".mount", ".automount", ".swap",
    ".target", ".path", ".timer", ".snapshot", ".slice", ".scope",
})  # fmt: skip
_SYSTEMD_DIR = "/etc/systemd/system/"
# What Ignition 2.x fetched from and verified with (spec 3 accepts all of these too).
_SCHEMES = frozenset({"http", "https", "tftp", "s3", "data"})
_SCHEME_RE = re.compile(r"([A-Za-z][A-Za-z0-9+.-]*):")
_HASH_RE = re.compile(r"sha512-[0-9a-fA-F]{128}")


@dataclass(frozen=True)
class StubConversion:
    """`changed` False means `user_data` is the input, untouched (already spec 3)."""

    changed: bool
    from_version: str
    to_version: str
    user_data: bytes


def convert_stub_ignition(user_data: bytes, source: str) -> StubConversion:
    """Spec 3.x in -> returned as is; spec 2.0-2.4 -> an equivalent spec 3.5.0 config.

    `source` names where the bytes came from (e.g. `secret openshift-machine-api/worker-user-data`)
    for error messages. Raises only `UserDataError`.
    """
    doc = _parse_json(user_data, source)
    version = _read_version(doc, source)
    major, minor = _classify(version, source)
    if major == 3:
        return StubConversion(False, version, version, user_data)
    converted = _Spec2(source, minor).translate(doc)
    out = json.dumps(converted, separators=(",", ":"), ensure_ascii=True).encode("ascii")
    return StubConversion(True, version, STUB_IGNITION_TARGET_VERSION, out)


def _field(path: JsonPath) -> str:
    return f"{USER_DATA_SECRET_KEY}.{dotted(path)}" if path else USER_DATA_SECRET_KEY


def _reject_constant(name: str) -> NoReturn:
    raise ValueError(f"{name} is not valid JSON")


def _parse_json(user_data: bytes, source: str) -> dict[str, Any]:
    try:
        text = user_data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise UserDataError(source, USER_DATA_SECRET_KEY, f"not UTF-8 text (byte {exc.start})") from None
    try:
        doc = json.loads(text, parse_constant=_reject_constant)
    except json.JSONDecodeError as exc:
        # The message and position only: never the document, which may hold credentials.
        raise UserDataError(
            source, USER_DATA_SECRET_KEY, f"invalid JSON at line {exc.lineno} column {exc.colno}: {exc.msg}"
        ) from None
    except ValueError as exc:
        raise UserDataError(source, USER_DATA_SECRET_KEY, f"invalid JSON: {exc}") from None
    except RecursionError:
        raise UserDataError(source, USER_DATA_SECRET_KEY, "JSON nested too deeply") from None
    if not isinstance(doc, dict):
        raise UserDataError(source, USER_DATA_SECRET_KEY, "not a JSON object (an Ignition config is one)")
    return doc


def _read_version(doc: Mapping[str, Any], source: str) -> str:
    ign = doc.get("ignition")
    if not isinstance(ign, dict) or "version" not in ign:
        hint = (
            " (spec 1 configs, with ignitionVersion, are not supported)" if "ignitionVersion" in doc else ""
        )
        raise UserDataError(source, _field(("ignition", "version")), f"missing{hint}")
    version = ign["version"]
    if not isinstance(version, str):
        raise UserDataError(source, _field(("ignition", "version")), "must be a string such as 2.2.0")
    return version


def _classify(version: str, source: str) -> tuple[int, int]:
    where = _field(("ignition", "version"))
    m = _VERSION_RE.fullmatch(version)
    if not m:
        raise UserDataError(source, where, f"{version[:40]!r} is not a semantic version")
    major, minor, patch, pre = int(m.group(1)), int(m.group(2)), int(m.group(3)), m.group(4)
    if major == 3:
        # As the Machine Config Operator: any 3.x is what a new boot image expects; leave it be.
        return major, minor
    if major != 2:
        raise UserDataError(source, where, f"{version} is neither Ignition spec 2.x nor 3.x")
    if minor > _MAX_SPEC2_MINOR or patch != 0 or pre is not None:
        raise UserDataError(
            source,
            where,
            f"{version} is not a released Ignition spec 2 version (2.0.0 to 2.{_MAX_SPEC2_MINOR}.0)",
        )
    return major, minor


def _is_empty(value: Any) -> bool:
    """null, or objects and lists holding nothing but such: no content to lose or to carry over."""
    # A loop, not recursion: the JSON parser accepts nesting deeper than Python's stack allows.
    pending = [value]
    while pending:
        item = pending.pop()
        if isinstance(item, dict):
            pending.extend(item.values())
        elif isinstance(item, list):
            pending.extend(item)
        elif item is not None:
            return False
    return True


def _clean(d: Mapping[str, Any]) -> dict[str, Any]:
    """Drop unset (None) and empty values so the output carries only what was said."""
    return {k: v for k, v in d.items() if v is not None and v != {} and v != []}


# Allowed keys of each spec 2 object -> the minor version that introduced them (the v2_0 to
# v2_4 configuration docs of coreos/ignition).
# fmt: off
_TOP = {"ignition": 0, "storage": 0, "systemd": 0, "networkd": 0, "passwd": 0}
_IGNITION = {"version": 0, "config": 0, "timeouts": 1, "security": 2, "proxy": 4}
_CONFIG = {"append": 0, "replace": 0}
_RESOURCE = {"source": 0, "verification": 0, "httpHeaders": 4}
_VERIFICATION = {"hash": 0}
_HEADER = {"name": 4, "value": 4}
_TIMEOUTS = {"httpResponseHeaders": 1, "httpTotal": 1}
_SECURITY = {"tls": 2}
_TLS = {"certificateAuthorities": 2}
_PROXY = {"httpProxy": 4, "httpsProxy": 4, "noProxy": 4}
_STORAGE = {"disks": 0, "raid": 0, "filesystems": 0, "files": 0, "directories": 1, "links": 1}
_DISK = {"device": 0, "wipeTable": 0, "partitions": 0}
_PARTITION = {
    "label": 0, "number": 0, "size": 0, "start": 0, "typeGuid": 0, "guid": 1,
    "sizeMiB": 3, "startMiB": 3, "wipePartitionEntry": 3, "shouldExist": 3,
}
_RAID = {"name": 0, "level": 0, "devices": 0, "spares": 0, "options": 2}
_FILESYSTEM = {"name": 0, "mount": 0, "path": 0}
_MOUNT = {"device": 0, "format": 0, "create": 0, "wipeFilesystem": 1, "label": 1, "uuid": 1, "options": 1}
_NODE = {"filesystem": 0, "path": 0, "user": 0, "group": 0, "overwrite": 2}
_FILE = {**_NODE, "contents": 0, "mode": 0, "append": 2}
_FILE_CONTENTS = {"compression": 0, "source": 0, "verification": 0, "httpHeaders": 4}
_DIRECTORY = {**_NODE, "mode": 1}
_LINK = {**_NODE, "target": 1, "hard": 1}
_OWNER = {"id": 0, "name": 1}
_SYSTEMD = {"units": 0}
_UNIT = {"name": 0, "enable": 0, "enabled": 1, "mask": 0, "contents": 0, "dropins": 0}
_DROPIN = {"name": 0, "contents": 0}
_NETWORKD = {"units": 0}
_PASSWD = {"users": 0, "groups": 0}
_USER_CREATE = {
    "uid": 0, "gecos": 0, "homeDir": 0, "noCreateHome": 0, "primaryGroup": 0, "groups": 0,
    "noUserGroup": 0, "noLogInit": 0, "shell": 0, "system": 2,
}
_USER = {
    "name": 0, "passwordHash": 0, "sshAuthorizedKeys": 0, "create": 0,
    **{k: 1 for k in _USER_CREATE},
}
# fmt: on
_GROUP = {"name": 0, "gid": 0, "passwordHash": 0, "system": 2}
# Spec 3 user fields, in output order; the booleans are emitted only when true (2.x bools have no
# "unset": false was the default, and ign-converter maps false to unset likewise).
_USER_STRINGS = ("gecos", "homeDir", "primaryGroup", "shell")
_USER_BOOLS = ("noCreateHome", "noUserGroup", "noLogInit", "system")


# (clean path, raw entry, owner fields, where) -> the spec 3 directory or link
_NodeBuilder = Callable[[str, Mapping[str, Any], dict[str, Any], JsonPath], dict[str, Any]]


@dataclass
class _FileEntry:
    where: JsonPath
    append: bool
    overwrite: bool | None
    contents: dict[str, Any]
    attrs: dict[str, Any]


@dataclass
class _Unit:
    name: str
    enabled: bool | None = None
    mask: bool | None = None
    contents: str | None = None
    dropins: dict[str, str | None] = field(default_factory=dict)


class _Spec2:
    """Reads a spec 2.`minor` config and builds the spec 3.5.0 equivalent (or fails naming the field)."""

    def __init__(self, source: str, minor: int) -> None:
        self.source = source
        self.minor = minor

    # --- reading helpers -----------------------------------------------------------------
    def fail(self, path: JsonPath, problem: str) -> NoReturn:
        raise UserDataError(self.source, _field(path), problem)

    def obj(self, value: Any, path: JsonPath, allowed: Mapping[str, int]) -> dict[str, Any]:
        """`value` as an object holding only keys of this spec version; null or absent -> {}."""
        if value is None:
            return {}
        if not isinstance(value, dict):
            self.fail(path, "must be an object")
        for key, item in value.items():
            since = allowed.get(key)
            if since is None:
                self.fail((*path, key), "not a field of Ignition spec 2.x; it cannot be carried to spec 3")
            if since > self.minor and not _is_empty(item):
                self.fail(
                    (*path, key),
                    f"not part of Ignition spec 2.{self.minor}.0 (added in 2.{since}.0), so Ignition "
                    "ignored it; converting it would change what a machine gets",
                )
        return value

    def section(
        self, parent: Mapping[str, Any], key: str, path: JsonPath, allowed: Mapping[str, int]
    ) -> dict[str, Any]:
        return self.obj(parent.get(key), (*path, key), allowed)

    def items(self, parent: Mapping[str, Any], key: str, path: JsonPath) -> list[tuple[JsonPath, Any]]:
        value, where = parent.get(key), (*path, key)
        if value is None:
            return []
        if not isinstance(value, list):
            self.fail(where, "must be a list")
        return [((*where, i), item) for i, item in enumerate(value)]

    def string(
        self, parent: Mapping[str, Any], key: str, path: JsonPath, *, required: bool = False
    ) -> str | None:
        value = parent.get(key)
        if value is None:
            if required:
                self.fail((*path, key), "missing")
            return None
        if not isinstance(value, str):
            self.fail((*path, key), "must be a string")
        return value

    def boolean(self, parent: Mapping[str, Any], key: str, path: JsonPath) -> bool | None:
        value = parent.get(key)
        if value is not None and not isinstance(value, bool):
            self.fail((*path, key), "must be true or false")
        return value

    def integer(self, parent: Mapping[str, Any], key: str, path: JsonPath) -> int | None:
        value = parent.get(key)
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, int) or not -_INT_LIMIT <= value < _INT_LIMIT:
            self.fail((*path, key), "must be an integer")
        return value

    def strings(self, parent: Mapping[str, Any], key: str, path: JsonPath) -> list[str]:
        out = []
        for where, item in self.items(parent, key, path):
            if not isinstance(item, str):
                self.fail(where, "must be a string")
            out.append(item)
        return out

    # --- the document ----------------------------------------------------------------------
    def translate(self, doc: Mapping[str, Any]) -> dict[str, Any]:
        top = self.obj(doc, (), _TOP)
        self.networkd(top)
        systemd = self.systemd(top)
        storage = self.storage(top, systemd)
        return _clean(
            {
                "ignition": self.ignition(top),
                "passwd": self.passwd(top),
                "storage": storage,
                "systemd": {"units": [_unit_out(u) for u in systemd]} if systemd else None,
            }
        )

    def networkd(self, top: Mapping[str, Any]) -> None:
        networkd = self.section(top, "networkd", (), _NETWORKD)
        if self.items(networkd, "units", ("networkd",)):
            self.fail(
                ("networkd", "units"),
                "networkd units cannot be represented in Ignition spec 3 (write them as files under "
                "/etc/systemd/network instead)",
            )

    # --- ignition section ------------------------------------------------------------------
    def ignition(self, top: Mapping[str, Any]) -> dict[str, Any]:
        path: JsonPath = ("ignition",)
        ign = self.section(top, "ignition", (), _IGNITION)
        config = self.section(ign, "config", path, _CONFIG)
        cpath = (*path, "config")
        merge = [
            self.resource(item, where, source_required=True)
            for where, item in self.items(config, "append", cpath)
        ]
        replace = None
        if config.get("replace") is not None:
            replace = self.resource(config["replace"], (*cpath, "replace"), source_required=True)
        timeouts = self.section(ign, "timeouts", path, _TIMEOUTS)
        tpath = (*path, "timeouts")
        return _clean(
            {
                "config": _clean({"merge": merge, "replace": replace}),
                "proxy": self.proxy(ign, path),
                "security": self.security(ign, path),
                "timeouts": _clean(
                    {
                        "httpResponseHeaders": self.integer(timeouts, "httpResponseHeaders", tpath),
                        "httpTotal": self.integer(timeouts, "httpTotal", tpath),
                    }
                ),
                "version": STUB_IGNITION_TARGET_VERSION,
            }
        )

    def resource(
        self, value: Any, path: JsonPath, *, source_required: bool, allowed: Mapping[str, int] = _RESOURCE
    ) -> dict[str, Any]:
        """A 2.x config/CA/file-contents reference as a spec 3 resource (`source` always set)."""
        ref = self.obj(value, path, allowed)
        src = self.string(ref, "source", path, required=source_required)
        if source_required and not src:
            self.fail((*path, "source"), "must not be empty")
        scheme = self.scheme(src, (*path, "source"))
        compression = self.string(ref, "compression", path) if "compression" in allowed else None
        if compression not in (None, "", "gzip"):
            self.fail((*path, "compression"), "must be empty or gzip")
        if compression and scheme == "s3":
            self.fail((*path, "compression"), "cannot be used with an s3 source")
        verification = self.section(ref, "verification", path, _VERIFICATION)
        digest = self.string(verification, "hash", (*path, "verification"))
        if digest and not _HASH_RE.fullmatch(digest):
            self.fail((*path, "verification", "hash"), "must be sha512-<128 hex digits>")
        headers = []
        for where, item in self.items(ref, "httpHeaders", path):
            header = self.obj(item, where, _HEADER)
            name = self.string(header, "name", where, required=True)
            if not name:
                self.fail((*where, "name"), "must not be empty")
            headers.append(_clean({"name": name, "value": self.string(header, "value", where)}))
        return _clean(
            {
                "source": src or "",
                "compression": compression or None,
                "httpHeaders": headers,
                "verification": _clean({"hash": digest or None}),
            }
        )

    def scheme(self, src: str | None, where: JsonPath) -> str | None:
        """The URL scheme of a source; one Ignition 2.x could not fetch is an invalid config."""
        if not src:
            return None  # an empty file
        m = _SCHEME_RE.match(src)
        scheme = m.group(1).lower() if m else ""
        if scheme not in _SCHEMES:
            self.fail(where, "not a URL with scheme http, https, tftp, s3 or data")
        if scheme == "data" and "," not in src:
            self.fail(where, "not a valid data URL")
        return scheme

    def security(self, ign: Mapping[str, Any], path: JsonPath) -> dict[str, Any]:
        security = self.section(ign, "security", path, _SECURITY)
        tls = self.section(security, "tls", (*path, "security"), _TLS)
        tpath = (*path, "security", "tls")
        # Spec 3 requires unique CA sources; the same source twice is the same CA: keep the last.
        cas: dict[str, dict[str, Any]] = {}
        for where, item in self.items(tls, "certificateAuthorities", tpath):
            ca = self.resource(item, where, source_required=True)
            cas.pop(ca["source"], None)
            cas[ca["source"]] = ca
        return _clean({"tls": _clean({"certificateAuthorities": list(cas.values())})})

    def proxy(self, ign: Mapping[str, Any], path: JsonPath) -> dict[str, Any]:
        proxy = self.section(ign, "proxy", path, _PROXY)
        ppath = (*path, "proxy")
        return _clean(
            {
                "httpProxy": self.string(proxy, "httpProxy", ppath),
                "httpsProxy": self.string(proxy, "httpsProxy", ppath),
                "noProxy": self.strings(proxy, "noProxy", ppath),
            }
        )

    # --- storage ---------------------------------------------------------------------------
    def storage(self, top: Mapping[str, Any], units: list[_Unit]) -> dict[str, Any]:
        storage = self.section(top, "storage", (), _STORAGE)
        files = self.files(storage)
        directories = self.last_by_path(storage, "directories", _DIRECTORY, self.directory)
        links = self.last_by_path(storage, "links", _LINK, self.link)
        self.check_paths(files, directories, links, units)
        return _clean(
            {
                "disks": self.disks(storage),
                "raid": self.raid(storage),
                "filesystems": self.filesystems(storage),
                "files": list(files.values()),
                "directories": list(directories.values()),
                "links": list(links.values()),
            }
        )

    def node(
        self, entry: Any, where: JsonPath, kind: str, allowed: Mapping[str, int]
    ) -> tuple[str, dict[str, Any], dict[str, Any]]:
        """(clean path, the raw entry, spec 3 node fields other than path) of a file/directory/link."""
        raw = self.obj(entry, where, allowed)
        path = self.string(raw, "path", where, required=True) or ""
        if not path.startswith("/"):
            self.fail((*where, "path"), f"{kind} path {path!r} is not absolute")
        # Spec 3 rejects paths that are not fully simplified; ign-converter cleans them (path.Join).
        path = posixpath.normpath(path)
        path = "/" + path.lstrip("/")
        filesystem = self.string(raw, "filesystem", where, required=True)
        if filesystem != "root":
            self.fail(
                (*where, "filesystem"),
                f"{kind} {path} is on filesystem {filesystem!r}: only 'root' can be carried to spec 3, "
                "which addresses everything by path under mounted filesystems",
            )
        attrs = {key: self.owner(raw, key, where) for key in ("user", "group")}
        return path, raw, _clean(attrs)

    def owner(self, raw: Mapping[str, Any], key: str, where: JsonPath) -> dict[str, Any]:
        owner = self.section(raw, key, where, _OWNER)
        opath = (*where, key)
        uid, name = self.integer(owner, "id", opath), self.string(owner, "name", opath)
        if uid is not None and name:
            self.fail(opath, "sets both id and name, which spec 3 does not allow")
        return _clean({"id": uid, "name": name or None})

    def mode(self, raw: Mapping[str, Any], where: JsonPath) -> int | None:
        mode = self.integer(raw, "mode", where)
        if mode is not None and not 0 <= mode <= _MAX_MODE:
            self.fail((*where, "mode"), "must be a permission mode between 0 and 07777 (as a decimal)")
        return mode

    def files(self, storage: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
        by_path: dict[str, list[_FileEntry]] = {}
        for where, item in self.items(storage, "files", ("storage",)):
            path, raw, attrs = self.node(item, where, "file", _FILE)
            append = self.boolean(raw, "append", where) or False
            overwrite = self.boolean(raw, "overwrite", where)
            if append and overwrite:
                self.fail((*where, "overwrite"), f"file {path}: append and overwrite cannot both be true")
            contents = self.resource(
                raw.get("contents"), (*where, "contents"), source_required=False, allowed=_FILE_CONTENTS
            )
            attrs = _clean({"mode": self.mode(raw, where), **attrs})
            by_path.setdefault(path, []).append(_FileEntry(where, append, overwrite, contents, attrs))
        return {path: self.merge_file(path, entries) for path, entries in by_path.items()}

    def merge_file(self, path: str, entries: list[_FileEntry]) -> dict[str, Any]:
        """One spec 3 file from the 2.x entries for `path`, applied in order as Ignition 2.x did."""
        for later in entries[1:]:
            if not later.append and later.overwrite is False:
                # The earlier entry created the file, which this one must not replace: no single
                # spec 3 entry says "write, then refuse to write", so do not guess.
                self.fail(
                    (*later.where, "overwrite"),
                    f"file {path} is written by an earlier entry and then by one with overwrite false, "
                    "which has no spec 3 equivalent",
                )
        base_at = max((i for i, e in enumerate(entries) if not e.append), default=None)
        live = entries if base_at is None else entries[base_at:]
        out: dict[str, Any] = {"path": path}
        if base_at is None:
            # Only appends: spec 3 then ensures the file exists and appends each fragment.
            out["overwrite"] = False
            appends = live
        else:
            base = entries[base_at]
            # Spec 2 files overwrite unless told not to; spec 3 files do not: say it explicitly.
            out["overwrite"] = base.overwrite is not False
            out["contents"] = base.contents
            appends = live[1:]
        if appends:
            out["append"] = [e.contents for e in appends]
        # Mode and owner are set by every write; the last entry that names one is what stuck.
        for entry in live:
            out.update(entry.attrs)
        return out

    def last_by_path(
        self, storage: Mapping[str, Any], key: str, allowed: Mapping[str, int], build: _NodeBuilder
    ) -> dict[str, dict[str, Any]]:
        out: dict[str, dict[str, Any]] = {}
        kind = "directory" if key == "directories" else "link"
        for where, item in self.items(storage, key, ("storage",)):
            path, raw, attrs = self.node(item, where, kind, allowed)
            out.pop(path, None)  # the last entry for a path wins, at its own position
            out[path] = build(path, raw, attrs, where)
        return out

    def directory(
        self, path: str, raw: Mapping[str, Any], attrs: dict[str, Any], where: JsonPath
    ) -> dict[str, Any]:
        return _clean(
            {
                "path": path,
                "overwrite": self.boolean(raw, "overwrite", where),
                "mode": self.mode(raw, where),
                **attrs,
            }
        )

    def link(
        self, path: str, raw: Mapping[str, Any], attrs: dict[str, Any], where: JsonPath
    ) -> dict[str, Any]:
        target = self.string(raw, "target", where, required=True)
        if not target:
            self.fail((*where, "target"), f"link {path}: target must not be empty")
        return _clean(
            {
                "path": path,
                "overwrite": self.boolean(raw, "overwrite", where),
                **attrs,
                "target": target,
                "hard": self.boolean(raw, "hard", where) or None,
            }
        )

    def check_paths(
        self,
        files: Mapping[str, Any],
        directories: Mapping[str, Any],
        links: Mapping[str, dict[str, Any]],
        units: list[_Unit],
    ) -> None:
        """The whole-config rules of spec 3 that 2.x did not have (or only checked at run time)."""
        where: JsonPath = ("storage",)
        for path in (
            files.keys() & directories.keys()
            | files.keys() & links.keys()
            | directories.keys() & links.keys()
        ):
            self.fail(where, f"{path} is declared as more than one of file, directory and link")
        for link_path, link in links.items():
            for path in (*files, *directories, *links):
                if path.startswith(link_path + "/"):
                    self.fail(where, f"{path} lies under {link_path}, which the config itself makes a link")
            if link.get("hard"):
                # Resolved as Ignition does: relative to the link's own path.
                target = posixpath.normpath(posixpath.join(link_path, link["target"]))
                if target in directories:
                    self.fail(where, f"hard link {link_path} points at directory {target}")
        for path in _unit_paths(units) & (files.keys() | directories.keys() | links.keys()):
            self.fail(where, f"{path} is also written by a systemd unit or drop-in of the config")

    def disks(self, storage: Mapping[str, Any]) -> list[dict[str, Any]]:
        out: dict[str, dict[str, Any]] = {}
        for where, item in self.items(storage, "disks", ("storage",)):
            disk = self.obj(item, where, _DISK)
            device = self.string(disk, "device", where, required=True) or ""
            if device in out:
                self.fail(
                    (*where, "device"), f"disk {device} is declared twice; spec 3 needs one entry per disk"
                )
            out[device] = _clean(
                {
                    "device": device,
                    "wipeTable": self.boolean(disk, "wipeTable", where) or None,
                    "partitions": [self.partition(p, w) for w, p in self.items(disk, "partitions", where)],
                }
            )
        return list(out.values())

    def partition(self, value: Any, where: JsonPath) -> dict[str, Any]:
        part = self.obj(value, where, _PARTITION)
        for legacy, modern in (("size", "sizeMiB"), ("start", "startMiB")):
            # 0 meant "as large as possible" / "first free space", the same as sizeMiB/startMiB 0.
            if self.integer(part, legacy, where):
                self.fail(
                    (*where, legacy),
                    f"given in device sectors (512 or 4096 bytes, unknowable here); spec 3 only has {modern}",
                )
        return _clean(
            {
                "label": self.string(part, "label", where),
                "number": self.integer(part, "number", where),
                "sizeMiB": self.integer(part, "sizeMiB", where),
                "startMiB": self.integer(part, "startMiB", where),
                "typeGuid": self.string(part, "typeGuid", where) or None,
                "guid": self.string(part, "guid", where) or None,
                "wipePartitionEntry": self.boolean(part, "wipePartitionEntry", where) or None,
                "shouldExist": self.boolean(part, "shouldExist", where),
            }
        )

    def raid(self, storage: Mapping[str, Any]) -> list[dict[str, Any]]:
        out: dict[str, dict[str, Any]] = {}
        for where, item in self.items(storage, "raid", ("storage",)):
            raid = self.obj(item, where, _RAID)
            name = self.string(raid, "name", where, required=True) or ""
            if name in out:
                self.fail((*where, "name"), f"raid {name} is declared twice; spec 3 needs unique names")
            out[name] = _clean(
                {
                    "name": name,
                    "level": self.string(raid, "level", where, required=True),
                    "devices": self.strings(raid, "devices", where),
                    "spares": self.integer(raid, "spares", where),
                    "options": self.strings(raid, "options", where),
                }
            )
        return list(out.values())

    def filesystems(self, storage: Mapping[str, Any]) -> list[dict[str, Any]]:
        out: dict[str, dict[str, Any]] = {}
        for where, item in self.items(storage, "filesystems", ("storage",)):
            fs = self.obj(item, where, _FILESYSTEM)
            name = self.string(fs, "name", where)
            mount_path = self.string(fs, "path", where)
            if fs.get("mount") is None:
                if name == "root" and mount_path == "/sysroot":
                    continue  # Ignition's predefined root filesystem, implied in spec 3
                self.fail(
                    (*where, "path"),
                    "a filesystem named by an already-mounted path cannot be represented in spec 3",
                )
            if mount_path is not None:
                self.fail((*where, "path"), "mount and path cannot both be set")
            if name == "root":
                self.fail((*where, "name"), "redefining the root filesystem cannot be represented in spec 3")
            converted = self.mount(fs["mount"], (*where, "mount"))
            if converted["device"] in out:
                self.fail(where, f"device {converted['device']} has two filesystems; spec 3 needs one")
            out[converted["device"]] = converted
        return list(out.values())

    def mount(self, value: Any, where: JsonPath) -> dict[str, Any]:
        mount = self.obj(value, where, _MOUNT)
        if mount.get("create") is not None:
            self.fail(
                (*where, "create"),
                "the deprecated create object cannot be represented in spec 3 (use wipeFilesystem and options)",
            )
        return _clean(
            {
                "device": self.string(mount, "device", where, required=True),
                "format": self.string(mount, "format", where, required=True),
                "wipeFilesystem": self.boolean(mount, "wipeFilesystem", where) or None,
                "label": self.string(mount, "label", where),
                "uuid": self.string(mount, "uuid", where),
                "options": self.strings(mount, "options", where),
            }
        )

    # --- systemd ---------------------------------------------------------------------------
    def systemd(self, top: Mapping[str, Any]) -> list[_Unit]:
        systemd = self.section(top, "systemd", (), _SYSTEMD)
        units: dict[str, _Unit] = {}
        for where, item in self.items(systemd, "units", ("systemd",)):
            parsed = self.unit(item, where)
            known = units.setdefault(parsed.name, _Unit(parsed.name))
            _merge_unit(known, parsed)
        return list(units.values())

    def unit(self, value: Any, where: JsonPath) -> _Unit:
        raw = self.obj(value, where, _UNIT)
        name = self.string(raw, "name", where, required=True) or ""
        if posixpath.splitext(name)[1] not in _UNIT_SUFFIXES:
            self.fail((*where, "name"), f"unit {name!r} has no valid unit type suffix")
        enabled = self.boolean(raw, "enabled", where)
        # As ign-converter: `enabled` wins over the deprecated `enable`, which could only say true.
        if enabled is None and self.boolean(raw, "enable", where):
            enabled = True
        unit = _Unit(
            name,
            enabled=enabled,
            mask=self.boolean(raw, "mask", where) or None,  # 2.x mask false meant "leave alone"
            contents=self.string(raw, "contents", where) or None,
        )
        for dwhere, ditem in self.items(raw, "dropins", where):
            dropin = self.obj(ditem, dwhere, _DROPIN)
            dname = self.string(dropin, "name", dwhere, required=True) or ""
            if not dname.endswith(".conf"):
                self.fail((*dwhere, "name"), f"drop-in {dname!r} of {name} must end in .conf")
            _merge_dropin(unit.dropins, dname, self.string(dropin, "contents", dwhere) or None)
        return unit

    # --- passwd ----------------------------------------------------------------------------
    def passwd(self, top: Mapping[str, Any]) -> dict[str, Any]:
        passwd = self.section(top, "passwd", (), _PASSWD)
        users: dict[str, dict[str, Any]] = {}
        for where, item in self.items(passwd, "users", ("passwd",)):
            user = self.user(item, where)
            users[user["name"]] = _merge_user(users.get(user["name"]), user)
        groups: dict[str, dict[str, Any]] = {}
        for where, item in self.items(passwd, "groups", ("passwd",)):
            group = self.group(item, where)
            groups[group["name"]] = {**groups.get(group["name"], {}), **group}
        return _clean({"users": [_clean(u) for u in users.values()], "groups": list(groups.values())})

    def user(self, value: Any, where: JsonPath) -> dict[str, Any]:
        raw = self.obj(value, where, _USER)
        name = self.string(raw, "name", where, required=True)
        if not name:
            self.fail((*where, "name"), "must not be empty")
        # The deprecated `create` object holds the same fields the user itself has since 2.1.
        create = self.section(raw, "create", where, _USER_CREATE)
        attrs = self.user_attrs(raw, where)
        for key, value_ in self.user_attrs(create, (*where, "create")).items():
            if value_ is None:
                continue
            if attrs.get(key) is not None and attrs[key] != value_:
                self.fail((*where, "create", key), f"contradicts {key} of the user itself")
            attrs[key] = value_
        keys = list(dict.fromkeys(self.strings(raw, "sshAuthorizedKeys", where)))
        return {
            "name": name,
            "passwordHash": self.string(raw, "passwordHash", where),
            "sshAuthorizedKeys": keys,
            **attrs,
        }

    def user_attrs(self, raw: Mapping[str, Any], where: JsonPath) -> dict[str, Any]:
        attrs: dict[str, Any] = {"uid": self.integer(raw, "uid", where)}
        attrs.update({k: self.string(raw, k, where) or None for k in _USER_STRINGS})
        attrs["groups"] = self.strings(raw, "groups", where) or None
        attrs.update({k: self.boolean(raw, k, where) or None for k in _USER_BOOLS})
        return attrs

    def group(self, value: Any, where: JsonPath) -> dict[str, Any]:
        raw = self.obj(value, where, _GROUP)
        name = self.string(raw, "name", where, required=True)
        if not name:
            self.fail((*where, "name"), "must not be empty")
        return _clean(
            {
                "name": name,
                "gid": self.integer(raw, "gid", where),
                "passwordHash": self.string(raw, "passwordHash", where),
                "system": self.boolean(raw, "system", where) or None,
            }
        )


def _merge_dropin(dropins: dict[str, str | None], name: str, contents: str | None) -> None:
    # The last drop-in of a name was the last file written; one without contents wrote nothing.
    if contents is not None or name not in dropins:
        dropins[name] = contents


def _merge_unit(known: _Unit, later: _Unit) -> None:
    known.enabled = later.enabled if later.enabled is not None else known.enabled
    known.mask = later.mask or known.mask
    known.contents = later.contents if later.contents is not None else known.contents
    for name, contents in later.dropins.items():
        _merge_dropin(known.dropins, name, contents)


def _merge_user(known: dict[str, Any] | None, later: dict[str, Any]) -> dict[str, Any]:
    if known is None:
        return later
    merged = {**known, **{k: v for k, v in later.items() if v is not None}}
    # Keys add up across entries (the Machine Config Operator's choice), without repeats.
    merged["sshAuthorizedKeys"] = list(
        dict.fromkeys([*known["sshAuthorizedKeys"], *later["sshAuthorizedKeys"]])
    )
    return merged


def _unit_out(unit: _Unit) -> dict[str, Any]:
    dropins = [_clean({"name": name, "contents": contents}) for name, contents in unit.dropins.items()]
    return _clean(
        {
            "name": unit.name,
            "enabled": unit.enabled,
            "mask": unit.mask,
            "contents": unit.contents,
            "dropins": dropins,
        }
    )


def _unit_paths(units: list[_Unit]) -> set[str]:
    """Where spec 3 Ignition writes the config's units and drop-ins (its config validation)."""
    paths = set()
    for unit in units:
        if unit.contents:
            paths.add(_SYSTEMD_DIR + unit.name)
        paths.update(
            f"{_SYSTEMD_DIR}{unit.name}.d/{name}" for name, contents in unit.dropins.items() if contents
        )
    return paths


__all__ = ["StubConversion", "convert_stub_ignition"]
