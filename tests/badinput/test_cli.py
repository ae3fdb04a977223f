"""`bootimage-controller plan` on bad input: whole-run problems exit 1 with one `error:` line naming
the file, the object and the field; per-MachineSet problems are rows (exit 0) while the other
MachineSets are still planned; never a traceback, never megabytes of input echoed back."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from .conftest import (
    HEALTHY,
    Plan,
    cluster_dir,
    cluster_version,
    control_plane_node,
    machine_configuration,
    write_yaml,
)
from .corpus import (
    AWS,
    BAD_BUILD_IDS,
    CONFIGMAP_CASES,
    CONFIGMAP_OBJECT,
    GOLDEN_CASES,
    MACHINESET_CASES,
    MC_OBJECT,
    MEGABYTE,
    RELEASE,
    SELECTOR_CASES,
    GoldenCase,
    MachineSetCase,
    SelectorCase,
    WholeRunCase,
    annotate,
    configmap,
    default_stream,
    machineset,
    set_default_stream,
)


@pytest.mark.parametrize("case", MACHINESET_CASES, ids=lambda c: c.id)
def test_broken_machineset_is_a_row_and_the_others_are_planned(case: MachineSetCase, plan: Plan, tmp_path: Path) -> None:
    name = f"bad-{case.id}"
    result = plan(cluster_dir(tmp_path, [case.build(name)]), "-o", "json")
    result.assert_no_traceback()
    assert result.code == 0, result.err[-2000:]
    rows = result.rows()
    assert rows[HEALTHY]["action"] == "patch"
    bad = next(row for row in rows.values() if row["name"] != HEALTHY)
    assert (bad["action"], bad["reason"], bad["field"]) == (case.action, case.reason, case.field), bad["message"]
    if case.names_object:
        assert bad["name"] == name and name in bad["message"]
    else:
        assert "machineset-0.yaml" in bad["message"], "an object without a name is named by its file"
    for needle in case.mentions:
        assert needle in bad["message"]


@pytest.mark.parametrize("case", GOLDEN_CASES, ids=lambda c: c.id)
def test_partly_broken_golden_data_is_rows_not_a_failed_run(case: GoldenCase, plan: Plan, tmp_path: Path) -> None:
    cm = configmap()
    case.edit(cm)
    objects = []
    for i, expect in enumerate(case.machinesets):
        obj = machineset(expect.fixture, f"{case.id}-{i}")
        obj["metadata"].setdefault("labels", {}).update(expect.labels)
        objects.append(obj)
    result = plan(cluster_dir(tmp_path, objects, configmap_obj=cm, healthy=False), "-o", "json")
    result.assert_no_traceback()
    assert result.code == 0, result.err[-2000:]
    rows = result.rows()
    for i, expect in enumerate(case.machinesets):
        row = rows[f"{case.id}-{i}"]
        assert (row["action"], row["reason"]) == (expect.action, expect.reason), row["message"]
        for needle in expect.mentions:
            assert needle in row["message"]


@pytest.mark.parametrize("case", CONFIGMAP_CASES, ids=lambda c: c.id)
def test_unreadable_golden_data_fails_the_run_naming_file_configmap_and_field(
    case: WholeRunCase, plan: Plan, tmp_path: Path
) -> None:
    cm = configmap()
    case.edit(cm)
    d = cluster_dir(tmp_path, configmap_obj=cm)
    plan(d).assert_bad_input(str(d / "coreos-bootimages.yaml"), CONFIGMAP_OBJECT, *case.mentions)


@pytest.mark.parametrize("case", CONFIGMAP_CASES, ids=lambda c: c.id)
def test_unreadable_bootimages_file_fails_the_run_the_same_way(case: WholeRunCase, plan: Plan, tmp_path: Path) -> None:
    cm = configmap()
    case.edit(cm)
    bootimages = write_yaml(tmp_path / "given.yaml", cm)
    result = plan(machineset_file(tmp_path), "--bootimages", bootimages)
    result.assert_bad_input(str(bootimages), CONFIGMAP_OBJECT, *case.mentions)


def machineset_file(tmp_path: Path) -> Path:
    return write_yaml(tmp_path / "machinesets" / "ms.yaml", machineset(AWS, HEALTHY))


@pytest.mark.parametrize("case", SELECTOR_CASES, ids=lambda c: c.id)
def test_unparseable_enrollment_fails_the_run_naming_the_field(case: SelectorCase, plan: Plan, tmp_path: Path) -> None:
    d = cluster_dir(tmp_path, extra=[case.machine_configuration()])
    plan(d).assert_bad_input(str(d / "extra-0.yaml"), MC_OBJECT, case.field)


@pytest.mark.parametrize("fraction", [0.5, 0.999], ids=["half", "last-bytes"])
def test_a_50_megabyte_stream_cut_short_fails_quickly_without_echoing_it(fraction: float, plan: Plan, tmp_path: Path) -> None:
    cm = _fifty_megabyte_configmap()
    cm["data"]["stream"] = cm["data"]["stream"][: int(len(cm["data"]["stream"]) * fraction)]
    path = tmp_path / "coreos-bootimages.json"  # JSON: the same text an `oc get -o json` gives
    path.write_text(json.dumps(cm))
    plan(machineset_file(tmp_path), path).assert_bad_input(str(path), CONFIGMAP_OBJECT, "data.stream", "invalid JSON")


def test_a_50_megabyte_stream_that_parses_is_planned(plan: Plan, tmp_path: Path) -> None:
    cm = _fifty_megabyte_configmap()
    path = tmp_path / "coreos-bootimages.json"
    path.write_text(json.dumps(cm))
    result = plan(machineset_file(tmp_path), path, "-o", "json")
    result.assert_no_traceback()
    assert result.code == 0
    target = default_stream(configmap())["architectures"]["x86_64"]["images"]["aws"]["regions"]["us-east-1"]["image"]
    assert result.rows()[HEALTHY]["target"] == {"id": target}


def _fifty_megabyte_configmap() -> dict[str, Any]:
    """The 4.22 ConfigMap whose stream carries 50 MB more: an unknown key, as future streams may add."""
    cm = configmap()
    doc = default_stream(cm)
    doc["padding"] = "x" * (50 * MEGABYTE)
    set_default_stream(cm, doc)
    return cm


@pytest.mark.parametrize("value", BAD_BUILD_IDS)
def test_garbage_aleph_annotation_is_ignored_not_fatal(value: str, plan: Plan, tmp_path: Path) -> None:
    result = plan(cluster_dir(tmp_path, extra=[control_plane_node(value)]), "-o", "json")
    result.assert_no_traceback()
    assert result.code == 0
    assert json.loads(result.out)["skew"]["clusterBootImage"]["rhcosVersion"] != value


@pytest.mark.parametrize("value", BAD_BUILD_IDS)
def test_garbage_release_annotation_is_ignored_not_fatal(value: str, plan: Plan, tmp_path: Path) -> None:
    ms = machineset(AWS, "recorded")
    annotate(RELEASE, value)(ms)
    result = plan(cluster_dir(tmp_path, [ms]), "-o", "json")
    result.assert_no_traceback()
    assert result.code == 0
    assert result.rows()["recorded"]["action"] == "patch"
    assert json.loads(result.out)["skew"]["clusterBootImage"]["rhcosVersion"] != value


@pytest.mark.parametrize("value", ["9.", "abc", "4.13", "418.94.2024", "9.6.20250402", ""])
def test_garbage_manual_rhcos_version_fails_the_run_naming_it(value: str, plan: Plan, tmp_path: Path) -> None:
    mc = machine_configuration({"bootImageSkewEnforcement": {"mode": "Manual", "manual": {"mode": "RHCOSVersion", "rhcosVersion": value}}})
    d = cluster_dir(tmp_path, extra=[mc])
    plan(d).assert_bad_input(str(d / "extra-0.yaml"), MC_OBJECT, "spec.bootImageSkewEnforcement.manual.rhcosVersion")


@pytest.mark.parametrize("value", ["9.", "abc", "4.", "", 4.13])
def test_garbage_manual_ocp_version_fails_the_run_naming_it(value: object, plan: Plan, tmp_path: Path) -> None:
    mc = machine_configuration({"bootImageSkewEnforcement": {"mode": "Manual", "manual": {"mode": "OCPVersion", "ocpVersion": value}}})
    d = cluster_dir(tmp_path, extra=[mc])
    plan(d).assert_bad_input(str(d / "extra-0.yaml"), MC_OBJECT, "spec.bootImageSkewEnforcement.manual.ocpVersion")


@pytest.mark.parametrize("value", ["abc", "9.", None, 4.13, ["4.22.0"]])
def test_garbage_cluster_version_is_not_fatal(value: object, plan: Plan, tmp_path: Path) -> None:
    d = cluster_dir(tmp_path)
    write_yaml(d / "clusterversion.yaml", cluster_version(value))
    result = plan(d, "-o", "json")
    result.assert_no_traceback()
    assert result.code == 0
    assert result.rows()[HEALTHY]["action"] == "patch"


@pytest.mark.parametrize(
    ("file", "content", "needle"),
    [
        ("broken.yaml", b"\xff\xfe\x00garbage", "not a UTF-8 text file"),
        ("broken.yaml", b"kind: MachineSet\n\tmetadata: {}\n", "invalid YAML"),
        ("broken.json", b"[" * 100_000, "nested too deeply"),
        ("broken.yaml", b"[" * 10_000, "nested too deeply"),
    ],
    ids=["binary", "tab-indented-yaml", "deep-json", "deep-yaml-10k"],
)
def test_unreadable_files_fail_the_run_naming_the_file(
    file: str, content: bytes, needle: str, plan: Plan, tmp_path: Path
) -> None:
    d = cluster_dir(tmp_path)
    bad = d / file
    bad.write_bytes(content)
    plan(d).assert_bad_input(str(bad), needle)


def test_yaml_nested_far_too_deeply_is_bad_input_not_a_crash(tmp_path: Path) -> None:
    # In a subprocess: the crash would take pytest down with it. Valid YAML, just deep.
    bad = tmp_path / "deep.yaml"
    bad.write_text("[" * 50_000 + "]" * 50_000)
    proc = subprocess.run(
        [sys.executable, "-m", "bootimage_controller", "plan", str(bad)],
        capture_output=True, text=True, timeout=120, check=False,
    )
    assert proc.returncode == 1, (proc.returncode, proc.stderr[-500:])
    assert proc.stderr.startswith("error: ") and str(bad) in proc.stderr


def test_bare_stream_file_cut_short_fails_naming_it(plan: Plan, tmp_path: Path) -> None:
    stream = tmp_path / "stream.json"
    stream.write_text(configmap()["data"]["stream"][:1000])
    plan(machineset_file(tmp_path), "--bootimages", stream).assert_bad_input(str(stream), "invalid JSON at line")
