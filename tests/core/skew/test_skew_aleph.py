"""Aleph files: every real format parses to the right build id; garbage is refused naming the file."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from bootimage_controller.commands.aleph_file import read_aleph
from bootimage_controller.core.skew.aleph import AlephFormat, parse_aleph
from bootimage_controller.errors import AlephError

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "aleph"


@pytest.mark.parametrize(
    ("name", "build_id", "fmt", "ref", "rhel"),
    [
        (
            "rhcos-cosa-legacy-48.84.202109241901-0.json",
            "48.84.202109241901-0",
            AlephFormat.COSA,
            None,
            "8.4",
        ),
        (
            "rhcos-osbuild-418.94.202511191518-0.json",
            "418.94.202511191518-0",
            AlephFormat.OSBUILD,
            "docker://ostree-image-signed:oci-archive:/rhcos-418.94.202511191518-0-ostree.x86_64.ociarchive",
            "9.4",
        ),
        (
            "rhcos-osbuild-9.6.20251212-1.json",
            "9.6.20251212-1",
            AlephFormat.OSBUILD,
            "docker://ostree-image-signed:oci-archive:/rhcos-9.6.20251212-1-ostree.x86_64.ociarchive",
            "9.6",
        ),
        (
            "fcos-cosa-legacy-32.20201002.dev.2.json",
            "32.20201002.dev.2",
            AlephFormat.COSA,
            "fedora/x86_64/coreos/testing-devel",
            None,
        ),
        (
            "fcos-bootc-aleph-43.20260301.20.dev1.json",
            "43.20260301.20.dev1",
            AlephFormat.BOOTC,
            "ostree-image-signed:docker://quay.io/fedora/fedora-coreos:testing-devel",
            None,
        ),
    ],
)
def test_every_fixture_parses(
    name: str, build_id: str, fmt: AlephFormat, ref: str | None, rhel: str | None
) -> None:
    info = parse_aleph((FIXTURES / name).read_text(), name)
    assert info.build_id == build_id
    assert info.format is fmt
    assert info.ref == ref  # the synthesized cosa RHCOS file has an empty ref
    # FCOS ids are valid aleph files but not RHCOS build ids: unknown to the skew check.
    assert (str(info.rhcos.rhel) if info.rhcos else None) == rhel


@pytest.mark.parametrize(
    ("text", "field", "problem"),
    [
        ("", None, "not JSON"),
        ("{not json", None, "not JSON"),
        ("[1, 2]", None, "expected a JSON object, got list"),
        ('"9.6.20251212-1"', None, "expected a JSON object, got str"),
        ("{}", "version", "neither `version` nor `build`"),
        ('{"version": null, "build": ""}', "version", "neither `version` nor `build`"),
        ('{"version": 9.6}', "version", "expected a string, got float"),
        ('{"build": ["48.84.202109241901-0"]}', "build", "expected a string, got list"),
        ('{"version": "9.6.20251212-1 rm -rf"}', "version", "is not a build id"),
        ('{"version": "' + "9" * 200 + '"}', "version", "too long"),
        ("[" * 100000 + "]" * 100000, None, "not JSON"),
        ('{"version": ' + "1" * 5000 + "}", None, "not JSON"),
    ],
)
def test_garbage_is_rejected_naming_the_file_and_field(text: str, field: str | None, problem: str) -> None:
    with pytest.raises(AlephError) as info:
        parse_aleph(text, "/sysroot/.coreos-aleph-version.json")
    assert info.value.obj == "/sysroot/.coreos-aleph-version.json"
    assert info.value.field == field
    assert problem in info.value.problem


def test_version_wins_over_build_and_empty_version_falls_back() -> None:
    assert parse_aleph('{"version": "9.6.20251212-1", "build": "x"}', "f").build_id == "9.6.20251212-1"
    info = parse_aleph('{"version": "", "build": "48.84.202109241901-0"}', "f")
    assert (info.build_id, info.format) == ("48.84.202109241901-0", AlephFormat.COSA)


def test_read_aleph_prefers_the_coreos_file_then_bootc(tmp_path: Path) -> None:
    bootc = (FIXTURES / "fcos-bootc-aleph-43.20260301.20.dev1.json").read_text()
    (tmp_path / ".bootc-aleph.json").write_text(bootc)
    assert read_aleph(tmp_path).build_id == "43.20260301.20.dev1"
    assert read_aleph(tmp_path / ".coreos-aleph-version.json").format is AlephFormat.BOOTC
    # osbuild writes .aleph-version.json with the CoreOS name as a symlink to it.
    (tmp_path / ".aleph-version.json").write_text(
        (FIXTURES / "rhcos-osbuild-9.6.20251212-1.json").read_text()
    )
    os.symlink(".aleph-version.json", tmp_path / ".coreos-aleph-version.json")
    info = read_aleph(tmp_path)
    assert (info.build_id, info.source) == ("9.6.20251212-1", str(tmp_path / ".coreos-aleph-version.json"))


def test_read_aleph_names_what_is_missing_or_unreadable(tmp_path: Path) -> None:
    with pytest.raises(
        AlephError, match=r"\.coreos-aleph-version\.json or .*\.bootc-aleph\.json: no aleph file"
    ):
        read_aleph(tmp_path)
    os.symlink("nowhere.json", tmp_path / ".coreos-aleph-version.json")  # dangling: counts as missing
    with pytest.raises(AlephError, match="no aleph file"):
        read_aleph(tmp_path)
    bad = tmp_path / "latin1.json"
    bad.write_bytes(b'{"version": "9.6.\xff"}')
    with pytest.raises(AlephError, match="not UTF-8") as info:
        read_aleph(bad)
    assert info.value.obj == str(bad)
    garbage = tmp_path / "garbage.json"
    garbage.write_text(json.dumps({"build": 48}))
    with pytest.raises(AlephError) as info:
        read_aleph(garbage)
    assert (info.value.obj, info.value.field) == (str(garbage), "build")
