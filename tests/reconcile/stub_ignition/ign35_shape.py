"""A focused structural validator for the Ignition spec 3.5.0 configs the stub upgrade emits.

Written from the spec (coreos/ignition docs/configuration-v3_5.md) and Ignition's own config
validation rules (unique paths/names/sources, overwrite needs a source, clean absolute paths, no
path under a link of the config, no file where a unit of the config goes, id or name but not
both, modes up to 07777). It covers the sections the converter can emit (no luks, no
kernelArguments): anything else is reported as an unknown field. No network, no ignition binary.
"""

from __future__ import annotations

import posixpath
import re
from dataclasses import dataclass
from typing import Any

TARGET_VERSION = "3.5.0"


@dataclass(frozen=True)
class Req:
    """A required field."""

    schema: Any


_RESOURCE: dict[str, Any] = {
    "source": str,
    "compression": str,
    "httpHeaders": [{"name": Req(str), "value": str}],
    "verification": {"hash": str},
}
_SOURCED = {**_RESOURCE, "source": Req(str)}
_OWNER = {"id": int, "name": str}
_NODE = {"path": Req(str), "overwrite": bool, "user": _OWNER, "group": _OWNER}

SCHEMA: dict[str, Any] = {
    "ignition": Req(
        {
            "version": Req(str),
            "config": {"merge": [_SOURCED], "replace": _SOURCED},
            "timeouts": {"httpResponseHeaders": int, "httpTotal": int},
            "security": {"tls": {"certificateAuthorities": [_SOURCED]}},
            "proxy": {"httpProxy": str, "httpsProxy": str, "noProxy": [str]},
        }
    ),
    "storage": {
        "disks": [
            {
                "device": Req(str),
                "wipeTable": bool,
                "partitions": [
                    {
                        "label": str,
                        "number": int,
                        "sizeMiB": int,
                        "startMiB": int,
                        "typeGuid": str,
                        "guid": str,
                        "wipePartitionEntry": bool,
                        "shouldExist": bool,
                        "resize": bool,
                    }
                ],
            }
        ],
        "raid": [
            {"name": Req(str), "level": Req(str), "devices": Req([str]), "spares": int, "options": [str]}
        ],
        "filesystems": [
            {
                "device": Req(str),
                "format": Req(str),
                "path": str,
                "wipeFilesystem": bool,
                "label": str,
                "uuid": str,
                "options": [str],
                "mountOptions": [str],
            }
        ],
        "files": [{**_NODE, "contents": _RESOURCE, "append": [_RESOURCE], "mode": int}],
        "directories": [{**_NODE, "mode": int}],
        "links": [{**_NODE, "target": Req(str), "hard": bool}],
    },
    "systemd": {
        "units": [
            {
                "name": Req(str),
                "enabled": bool,
                "mask": bool,
                "contents": str,
                "dropins": [{"name": Req(str), "contents": str}],
            }
        ]
    },
    "passwd": {
        "users": [
            {
                "name": Req(str),
                "passwordHash": str,
                "sshAuthorizedKeys": [str],
                "uid": int,
                "gecos": str,
                "homeDir": str,
                "noCreateHome": bool,
                "primaryGroup": str,
                "groups": [str],
                "noUserGroup": bool,
                "noLogInit": bool,
                "shell": str,
                "shouldExist": bool,
                "system": bool,
            }
        ],
        "groups": [{"name": Req(str), "gid": int, "passwordHash": str, "shouldExist": bool, "system": bool}],
    },
}

_UNIT_SUFFIXES = {
    ".service", ".socket", ".device", ".mount", ".automount", ".swap",
    ".target", ".path", ".timer", ".snapshot", ".slice", ".scope",
}  # fmt: skip


def problems(cfg: Any) -> list[str]:
    """Every way `cfg` is not a valid spec 3.5.0 config of the supported shape ([] = valid)."""
    out: list[str] = []
    _shape(cfg, SCHEMA, "$", out)
    if out:
        return out
    if cfg["ignition"]["version"] != TARGET_VERSION:
        out.append(f"$.ignition.version is {cfg['ignition']['version']!r}")
    _ignition_rules(cfg["ignition"], out)
    _storage_rules(cfg.get("storage", {}), cfg.get("systemd", {}).get("units", []), out)
    _systemd_rules(cfg.get("systemd", {}).get("units", []), out)
    _passwd_rules(cfg.get("passwd", {}), out)
    return out


def _shape(value: Any, schema: Any, where: str, out: list[str]) -> None:
    if isinstance(schema, Req):
        schema = schema.schema
    if isinstance(schema, dict):
        if not isinstance(value, dict):
            out.append(f"{where}: expected an object")
            return
        for key, item in value.items():
            if key not in schema:
                out.append(f"{where}.{key}: unknown field")
            else:
                _shape(item, schema[key], f"{where}.{key}", out)
        for key, sub in schema.items():
            if isinstance(sub, Req) and key not in value:
                out.append(f"{where}.{key}: required")
    elif isinstance(schema, list):
        if not isinstance(value, list):
            out.append(f"{where}: expected a list")
            return
        for i, item in enumerate(value):
            _shape(item, schema[0], f"{where}[{i}]", out)
    elif schema is int:
        if isinstance(value, bool) or not isinstance(value, int):
            out.append(f"{where}: expected an integer")
    elif not isinstance(value, schema):
        out.append(f"{where}: expected {schema.__name__}")


def _dupes(values: list[Any]) -> set[Any]:
    seen: set[Any] = set()
    return {v for v in values if v in seen or seen.add(v)}  # type: ignore[func-returns-value]


_SCHEMES = ("http:", "https:", "tftp:", "s3:", "arn:", "gs:", "data:")
_HASH = re.compile(r"sha512-[0-9a-fA-F]{128}|sha256-[0-9a-fA-F]{64}")


def _resource_rules(res: dict[str, Any], where: str, out: list[str]) -> None:
    if res.get("compression") not in (None, "", "gzip"):
        out.append(f"{where}.compression: invalid")
    source = res.get("source")
    if source and not source.lower().startswith(_SCHEMES):
        out.append(f"{where}.source: unsupported scheme")
    if source and source.lower().startswith("data:") and "," not in source:
        out.append(f"{where}.source: bad data URL")
    if source and source.lower().startswith("s3:") and res.get("compression"):
        out.append(f"{where}: compression with s3")
    digest = res.get("verification", {}).get("hash")
    if digest and "source" not in res:
        out.append(f"{where}: verification without source")
    if digest is not None and not _HASH.fullmatch(digest):
        out.append(f"{where}.verification.hash: malformed")


def _ignition_rules(ign: dict[str, Any], out: list[str]) -> None:
    refs = [*ign.get("config", {}).get("merge", [])]
    if "replace" in ign.get("config", {}):
        refs.append(ign["config"]["replace"])
    cas = ign.get("security", {}).get("tls", {}).get("certificateAuthorities", [])
    for i, ref in enumerate([*refs, *cas]):
        if not ref["source"]:
            out.append(f"$.ignition reference {i}: empty source")
        _resource_rules(ref, f"$.ignition reference {i}", out)
    for dup in _dupes([ca["source"] for ca in cas]):
        out.append(f"$.ignition.security.tls.certificateAuthorities: duplicate source {dup[:40]}")


def _clean_abs(path: str) -> bool:
    return path.startswith("/") and not path.startswith("//") and posixpath.normpath(path) == path


def _storage_rules(storage: dict[str, Any], units: list[dict[str, Any]], out: list[str]) -> None:
    nodes = [(kind, n) for kind in ("files", "directories", "links") for n in storage.get(kind, [])]
    for kind, node in nodes:
        where = f"$.storage.{kind}[{node['path']}]"
        if not _clean_abs(node["path"]):
            out.append(f"{where}: path not absolute and clean")
        for owner in ("user", "group"):
            if {"id", "name"} <= node.get(owner, {}).keys():
                out.append(f"{where}.{owner}: both id and name")
        if not 0 <= node.get("mode", 0) <= 0o7777:
            out.append(f"{where}.mode: out of range")
    for dup in _dupes([n["path"] for _, n in nodes]):
        out.append(f"$.storage: duplicate path {dup}")
    links = [n["path"] for n in storage.get("links", [])]
    for _, node in nodes:
        if any(node["path"].startswith(link + "/") for link in links):
            out.append(f"$.storage: {node['path']} is under a link of the config")
    for f in storage.get("files", []):
        where = f"$.storage.files[{f['path']}]"
        if f.get("overwrite") and "source" not in f.get("contents", {}):
            out.append(f"{where}: overwrite without contents.source")
        for res in [f.get("contents", {}), *f.get("append", [])]:
            _resource_rules(res, where, out)
    unit_paths = set()
    for u in units:
        if u.get("contents"):
            unit_paths.add(f"/etc/systemd/system/{u['name']}")
        unit_paths |= {
            f"/etc/systemd/system/{u['name']}.d/{d['name']}"
            for d in u.get("dropins", [])
            if d.get("contents")
        }
    for _, node in nodes:
        if node["path"] in unit_paths:
            out.append(f"$.storage: {node['path']} conflicts with a systemd unit")
    for key, name in (("disks", "device"), ("raid", "name"), ("filesystems", "device")):
        for dup in _dupes([item[name] for item in storage.get(key, [])]):
            out.append(f"$.storage.{key}: duplicate {name} {dup}")


def _systemd_rules(units: list[dict[str, Any]], out: list[str]) -> None:
    for dup in _dupes([u["name"] for u in units]):
        out.append(f"$.systemd.units: duplicate {dup}")
    for u in units:
        if posixpath.splitext(u["name"])[1] not in _UNIT_SUFFIXES:
            out.append(f"$.systemd.units[{u['name']}]: bad suffix")
        dropins = [d["name"] for d in u.get("dropins", [])]
        for dup in _dupes(dropins):
            out.append(f"$.systemd.units[{u['name']}].dropins: duplicate {dup}")
        out.extend(
            f"$.systemd.units[{u['name']}]: drop-in {d} not .conf" for d in dropins if not d.endswith(".conf")
        )


def _passwd_rules(passwd: dict[str, Any], out: list[str]) -> None:
    users = passwd.get("users", [])
    for dup in _dupes([u["name"] for u in users]):
        out.append(f"$.passwd.users: duplicate {dup}")
    for u in users:
        if _dupes(u.get("sshAuthorizedKeys", [])):
            out.append(f"$.passwd.users[{u['name']}]: duplicate ssh key")
    for dup in _dupes([g["name"] for g in passwd.get("groups", [])]):
        out.append(f"$.passwd.groups: duplicate {dup}")
