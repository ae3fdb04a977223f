"""Properties of the stub conversion: total on any input, valid spec 3.5.0 out, same machine state.

The "same machine state" tests replay a random spec 2 config the way Ignition 2.x applied it
(entries in order on a fresh machine) and the converted spec 3 config the way Ignition 3 does, and
compare the resulting files and units.
"""

from __future__ import annotations

import contextlib
import json
import posixpath
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bootimage_controller.core.ignition import convert_stub_ignition
from bootimage_controller.errors import UserDataError

from .ign35_shape import problems

SOURCE = "secret openshift-machine-api/worker-user-data"
FAST = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.floats() | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=20,
)


@FAST
@given(st.binary(max_size=300))
def test_arbitrary_bytes_raise_only_user_data_errors(raw: bytes) -> None:
    with contextlib.suppress(UserDataError):
        convert_stub_ignition(raw, SOURCE)


# Near-valid spec 2 documents: real field names, mostly right types, colliding paths, duplicates,
# links over other entries, units over files, fields too new for the version. They reach deep
# into the translator, so "valid spec 3 out, or a UserDataError" is tested where it matters.
# Each kind has its own paths; a few shared ones make the cross-kind collisions spec 3 forbids.
SHARED_PATHS = ["/etc/l/x", "/etc/systemd/system/a.service", "/etc/a", "/etc/d", "/etc/l", "rel", ""]


def node_paths(*own: str) -> st.SearchStrategy[str]:
    return st.sampled_from([*own] * 20 + SHARED_PATHS)


SOURCES = st.sampled_from(["data:,x", "data:,y", "", "https://h/c", "s3://b/k"] * 10 + [7])
MAYBE_BOOL = st.sampled_from([True, False, None] * 10 + ["yes"])
OWNERS = st.sampled_from(
    [{"id": 0}, {"name": "core"}, {}, None] * 10 + [{"id": 0, "name": "root"}, {"uid": 1}]
)
CONFIG_REF = st.fixed_dictionaries(
    {"source": SOURCES},
    optional={
        "verification": st.sampled_from([{}, {"hash": "sha512-" + "0" * 128}, {"hash": "sha512-00"}, None])
    },
)
CONTENTS = st.fixed_dictionaries(
    {"source": SOURCES},
    optional={
        "verification": st.sampled_from([{}, {"hash": "sha512-" + "0" * 128}, {"hash": "sha512-00"}, None]),
        "compression": st.sampled_from(["", "gzip"] * 10 + ["xz"]),
    },
)
FILESYSTEMS = st.sampled_from(["root"] * 40 + ["var", None])
NODE_OPT = {"overwrite": MAYBE_BOOL, "user": OWNERS, "group": OWNERS}
FILE = st.fixed_dictionaries(
    {"filesystem": FILESYSTEMS, "path": node_paths("/etc/a", "/etc//a", "/etc/b", "/etc/./b")},
    optional={
        **NODE_OPT,
        "contents": CONTENTS,
        "append": st.sampled_from([True, None] * 10 + ["yes"]),
        "mode": st.sampled_from([420, 493, 0o7777, 384] * 10 + [0o10000, -1, "420", 1.5]),
    },
)
DIRECTORY = st.fixed_dictionaries(
    {"filesystem": FILESYSTEMS, "path": node_paths("/etc/d", "/var/x")},
    optional={**NODE_OPT, "mode": st.sampled_from([493, 448])},
)
LINK = st.fixed_dictionaries(
    {
        "filesystem": FILESYSTEMS,
        "path": node_paths("/etc/l", "/usr/local/bin/k"),
        "target": st.sampled_from(["/etc/a", "/etc/d", "../d"] * 10 + [""]),
    },
    optional={**NODE_OPT, "hard": MAYBE_BOOL},
)
UNIT = st.fixed_dictionaries(
    {"name": st.sampled_from(["a.service", "b.timer", "c@.service"] * 10 + ["bad"])},
    optional={
        "contents": st.sampled_from(["[Unit]", "", None]),
        "enabled": MAYBE_BOOL,
        "enable": MAYBE_BOOL,
        "mask": MAYBE_BOOL,
        "dropins": st.lists(
            st.fixed_dictionaries(
                {"name": st.sampled_from(["x.conf", "y.conf"] * 10 + ["z.txt"])},
                optional={"contents": st.sampled_from(["[Service]", ""])},
            ),
            max_size=3,
        ),
    },
)
USER = st.fixed_dictionaries(
    {"name": st.sampled_from(["core", "admin"] * 10 + [""])},
    optional={
        "sshAuthorizedKeys": st.lists(st.sampled_from(["k1", "k2"] * 10 + [3]), max_size=3),
        "passwordHash": st.sampled_from(["$6$x", ""]),
        "uid": st.sampled_from([1000, 1001] * 10 + ["1000"]),
        "groups": st.lists(st.sampled_from(["wheel", "sudo"]), max_size=2),
        "create": st.sampled_from([{"uid": 1000}, {"shell": "/bin/sh"}, {"system": True}, {}]),
        "system": MAYBE_BOOL,
    },
)
VERSIONS = st.sampled_from(["2.0.0", "2.1.0", "2.2.0", "2.3.0"] + ["2.4.0"] * 12)
IGNITION = st.fixed_dictionaries(
    {"version": VERSIONS},
    optional={
        "config": st.fixed_dictionaries({}, optional={"append": st.lists(CONFIG_REF, max_size=2)}),
        "security": st.just(
            {"tls": {"certificateAuthorities": [{"source": "data:,ca"}, {"source": "data:,ca"}]}}
        ),
        "timeouts": st.sampled_from([{}, {"httpTotal": 5}]),
        "proxy": st.sampled_from([{}, {"httpsProxy": "http://p:3128", "noProxy": ["a"]}]),
    },
)
STORAGE = st.fixed_dictionaries(
    {"files": st.lists(FILE, max_size=5)},
    optional={"directories": st.lists(DIRECTORY, max_size=2), "links": st.lists(LINK, max_size=2)},
)
SPEC2_DOCS = st.fixed_dictionaries(
    {"ignition": IGNITION, "storage": STORAGE},
    optional={
        "systemd": st.fixed_dictionaries({"units": st.lists(UNIT, max_size=4)}),
        "passwd": st.fixed_dictionaries({"users": st.lists(USER, max_size=3)}),
        "networkd": st.sampled_from([{}, {"units": []}]),
    },
)


@FAST
@given(SPEC2_DOCS)
def test_near_valid_spec_2_documents_give_valid_spec_3_or_a_user_data_error(doc: dict[str, Any]) -> None:
    try:
        result = convert_stub_ignition(json.dumps(doc).encode(), SOURCE)
    except UserDataError as exc:
        assert exc.field and exc.field.startswith("userData")
        return
    assert result.changed
    assert problems(json.loads(result.user_data)) == []


@FAST
@given(json_values)
def test_random_json_raises_only_user_data_errors(value: Any) -> None:
    try:
        raw = json.dumps(value).encode()
    except ValueError:
        return
    with contextlib.suppress(UserDataError):
        convert_stub_ignition(raw, SOURCE)


# --- replaying files ------------------------------------------------------------------------------

PATHS = ["/etc/a", "/etc/b", "/etc//a", "/etc/./b"]


@st.composite
def file_entries(draw: st.DrawFn) -> list[dict[str, Any]]:
    out = []
    for _ in range(draw(st.integers(1, 6))):
        append = draw(st.booleans())
        entry: dict[str, Any] = {"filesystem": "root", "path": draw(st.sampled_from(PATHS))}
        overwrite = draw(st.sampled_from([None, False] if append else [None, False, True]))
        if append:
            entry["append"] = True
        if overwrite is not None:
            entry["overwrite"] = overwrite
        if draw(st.booleans()):
            entry["contents"] = {"source": "data:," + draw(st.text("xyz", min_size=1, max_size=3))}
        out.append(entry)
    return out


def _text(source: str | None) -> str:
    return (source or "").removeprefix("data:,")


def replay_spec2_files(entries: list[dict[str, Any]]) -> dict[str, str] | None:
    """Ignition 2.x on a fresh machine; None where an entry forbids overwriting a file written before."""
    fs: dict[str, str] = {}
    for e in entries:
        path, text = posixpath.normpath(e["path"]), _text(e.get("contents", {}).get("source"))
        if e.get("append"):
            fs[path] = fs.get(path, "") + text
        elif path in fs and e.get("overwrite", True) is False:
            return None
        else:
            fs[path] = text
    return fs


def replay_spec3_files(files: list[dict[str, Any]]) -> dict[str, str]:
    fs: dict[str, str] = {}
    for f in files:
        assert f["path"] not in fs, "spec 3 paths are unique"
        if "source" in f.get("contents", {}):
            fs[f["path"]] = _text(f["contents"]["source"])
        else:
            fs.setdefault(f["path"], "")  # overwrite false, no source: ensure it exists
        for fragment in f.get("append", []):
            fs[f["path"]] += _text(fragment.get("source"))
    return fs


@FAST
@given(file_entries())
def test_converted_files_leave_a_machine_as_spec_2_did(entries: list[dict[str, Any]]) -> None:
    doc = {"ignition": {"version": "2.2.0"}, "storage": {"files": entries}}
    expected = replay_spec2_files(entries)

    if expected is None:
        with pytest.raises(UserDataError):
            convert_stub_ignition(json.dumps(doc).encode(), SOURCE)
        return
    out = json.loads(convert_stub_ignition(json.dumps(doc).encode(), SOURCE).user_data)

    assert problems(out) == []
    assert replay_spec3_files(out["storage"]["files"]) == expected


# --- replaying units -------------------------------------------------------------------------------


@st.composite
def unit_entries(draw: st.DrawFn) -> list[dict[str, Any]]:
    out = []
    for _ in range(draw(st.integers(1, 6))):
        unit: dict[str, Any] = {"name": draw(st.sampled_from(["a.service", "b.timer"]))}
        for key, strategy in (
            ("contents", st.text("uv", min_size=1, max_size=2)),
            ("enabled", st.booleans()),
            ("enable", st.booleans()),
            ("mask", st.booleans()),
        ):
            if draw(st.booleans()):
                unit[key] = draw(strategy)
        dropins = draw(
            st.lists(
                st.fixed_dictionaries(
                    {"name": st.sampled_from(["x.conf", "y.conf"])},
                    optional={"contents": st.text("pq", min_size=1, max_size=2)},
                ),
                max_size=2,
                unique_by=lambda d: d["name"],
            )
        )
        if dropins:
            unit["dropins"] = dropins
        out.append(unit)
    return out


def _apply_unit(state: dict[str, Any], unit: dict[str, Any], enabled: bool | None) -> None:
    if unit.get("contents"):
        state["contents"] = unit["contents"]
    if enabled is not None:
        state["enabled"] = enabled
    if unit.get("mask"):
        state["masked"] = True
    for d in unit.get("dropins", []):
        if d.get("contents"):
            state["dropins"][d["name"]] = d["contents"]


def replay_units(units: list[dict[str, Any]], *, spec2: bool) -> dict[str, Any]:
    machine: dict[str, Any] = {}
    for unit in units:
        state = machine.setdefault(
            unit["name"], {"contents": None, "enabled": None, "masked": False, "dropins": {}}
        )
        enabled = unit.get("enabled")
        if spec2 and enabled is None and unit.get("enable"):
            enabled = True  # the deprecated `enable` could only enable
        _apply_unit(state, unit, enabled)
    return machine


@FAST
@given(unit_entries())
def test_converted_units_leave_a_machine_as_spec_2_did(units: list[dict[str, Any]]) -> None:
    doc = {"ignition": {"version": "2.2.0"}, "systemd": {"units": units}}

    out = json.loads(convert_stub_ignition(json.dumps(doc).encode(), SOURCE).user_data)

    assert problems(out) == []
    assert replay_units(out["systemd"]["units"], spec2=False) == replay_units(units, spec2=True)


# --- the validator itself must catch what Ignition 3 rejects -------------------------------------


VALID = {
    "ignition": {"version": "3.5.0", "config": {"merge": [{"source": "https://x/config/worker"}]}},
    "storage": {"files": [{"path": "/etc/a", "overwrite": True, "contents": {"source": ""}}]},
    "systemd": {"units": [{"name": "a.service", "dropins": [{"name": "x.conf"}]}]},
    "passwd": {"users": [{"name": "core", "sshAuthorizedKeys": ["k"]}]},
}


def test_validator_accepts_a_valid_config() -> None:
    assert problems(VALID) == []


@pytest.mark.parametrize(
    "cfg",
    [
        {"ignition": {"version": "3.4.0"}},
        {"ignition": {"version": "3.5.0", "config": {"append": []}}},
        {"ignition": {"version": "3.5.0"}, "networkd": {}},
        {"ignition": {"version": "3.5.0", "config": {"merge": [{"source": "ftp://x"}]}}},
        {"ignition": {"version": "3.5.0", "config": {"merge": [{"source": "data:x"}]}}},
        {
            "ignition": {"version": "3.5.0"},
            "storage": {
                "files": [{"path": "/a", "contents": {"source": "data:,", "verification": {"hash": "md5-0"}}}]
            },
        },
        {"ignition": {"version": "3.5.0"}, "storage": {"files": [{"path": "/a", "overwrite": True}]}},
        {"ignition": {"version": "3.5.0"}, "storage": {"files": [{"path": "/a"}, {"path": "/a"}]}},
        {"ignition": {"version": "3.5.0"}, "storage": {"files": [{"path": "/a//b"}]}},
        {"ignition": {"version": "3.5.0"}, "storage": {"files": [{"path": "/a", "filesystem": "root"}]}},
        {"ignition": {"version": "3.5.0"}, "storage": {"files": [{"path": "/a", "mode": 4096}]}},
        {
            "ignition": {"version": "3.5.0"},
            "storage": {"files": [{"path": "/a", "user": {"id": 0, "name": "r"}}]},
        },
        {
            "ignition": {"version": "3.5.0"},
            "storage": {"files": [{"path": "/l/a"}], "links": [{"path": "/l", "target": "/t"}]},
        },
        {
            "ignition": {"version": "3.5.0"},
            "systemd": {"units": [{"name": "a.service"}, {"name": "a.service"}]},
        },
        {"ignition": {"version": "3.5.0"}, "systemd": {"units": [{"name": "a.service", "enable": True}]}},
        {
            "ignition": {"version": "3.5.0"},
            "passwd": {"users": [{"name": "core", "sshAuthorizedKeys": ["k", "k"]}]},
        },
        {
            "ignition": {"version": "3.5.0"},
            "storage": {"files": [{"path": "/etc/systemd/system/a.service"}]},
            "systemd": {"units": [{"name": "a.service", "contents": "x"}]},
        },
    ],
)
def test_validator_rejects_what_ignition_3_rejects(cfg: dict[str, Any]) -> None:
    assert problems(cfg) != []
