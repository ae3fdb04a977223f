"""Bad input: exit 1 with a message naming file, object and field, never a traceback; per-MachineSet
problems are `error` rows while the others are still planned; usage errors exit 2."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from .conftest import (
    CONFIGMAP_422,
    EXAMPLE,
    Result,
    Run,
    by_name,
    cluster_dir,
    configmap_422,
    machine_configuration,
    machineset,
    write_yaml,
)

MS_416 = "mycluster-7xk2p-worker-us-east-1a"


def assert_clean_failure(result: Result, *needles: str) -> None:
    assert result.code == 1, (result.out, result.err)
    assert "Traceback" not in result.err
    assert result.err.startswith("error: ")
    for needle in needles:
        assert needle.lower() in result.err.lower(), result.err
    assert result.out == ""


def test_broken_json_in_the_configmap_stream(run: Run, tmp_path: Path) -> None:
    cm = configmap_422()
    cm["data"]["stream"] = cm["data"]["stream"][:500]  # cut off mid-document
    d = cluster_dir(tmp_path, [machineset()], with_configmap=False)
    path = write_yaml(d / "cm.yaml", cm)
    result = run("plan", d)
    assert_clean_failure(result, "coreos-bootimages", "data.stream", "invalid JSON at line", str(path))


def test_missing_configmap_names_what_is_missing(run: Run, tmp_path: Path) -> None:
    d = cluster_dir(tmp_path, [machineset()], with_configmap=False)
    assert_clean_failure(run("plan", d), "coreos-bootimages", "--bootimages")


def test_bootimages_file_that_is_neither(run: Run, tmp_path: Path) -> None:
    d = cluster_dir(tmp_path, [machineset()], with_configmap=False)
    other = write_yaml(tmp_path / "other.yaml", machineset())
    assert_clean_failure(run("plan", d, "--bootimages", other), str(other), "coreos-bootimages")
    assert_clean_failure(run("plan", d, "--bootimages", tmp_path / "nope.json"), "nope.json", "no such file")


def test_yaml_syntax_error_names_file_and_line(run: Run, tmp_path: Path) -> None:
    d = cluster_dir(tmp_path, [machineset()])
    broken = d / "broken.yaml"
    broken.write_text("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\n data: [unclosed\n")
    assert_clean_failure(run("plan", d), str(broken), "invalid YAML at line 5")


def test_json_syntax_error_names_file_and_line(run: Run, tmp_path: Path) -> None:
    broken = tmp_path / "ms.json"
    broken.write_text('{\n  "apiVersion": "v1",\n  "kind": "List"\n  "items": []\n}\n')
    assert_clean_failure(run("plan", broken, CONFIGMAP_422), str(broken), "invalid JSON at line 4")


def test_missing_path(run: Run, tmp_path: Path) -> None:
    assert_clean_failure(run("plan", tmp_path / "does-not-exist"), "does-not-exist", "no such file")


def test_unparseable_selector_in_machine_configuration(run: Run, tmp_path: Path) -> None:
    selector = {"matchExpressions": [{"key": "role", "operator": "Near", "values": ["x"]}]}
    mc = machine_configuration({"managedBootImages": {"machineManagers": [{
        "resource": "machinesets", "apiGroup": "machine.openshift.io",
        "selection": {"mode": "Partial", "partial": {"machineResourceSelector": selector}},
    }]}})
    d = cluster_dir(tmp_path, [machineset()], extra=[mc])
    result = run("plan", d)
    assert_clean_failure(
        result,
        "MachineConfiguration cluster",
        "spec.managedBootImages.machineManagers[0].selection.partial.machineResourceSelector.matchExpressions[0].operator",
        "extra-0.yaml",
    )


def test_invalid_skew_setting_names_the_field(run: Run, tmp_path: Path) -> None:
    mc = machine_configuration({"bootImageSkewEnforcement": {"mode": "Sometimes"}})
    d = cluster_dir(tmp_path, [machineset()], extra=[mc])
    assert_clean_failure(run("plan", d), "MachineConfiguration cluster", "spec.bootImageSkewEnforcement.mode")


def _rows(run: Run, tmp_path: Path, *machinesets: dict[str, Any]) -> dict[str, dict[str, Any]]:
    result = run("plan", cluster_dir(tmp_path, list(machinesets)), "-o", "json")
    assert result.code == 0, result.err
    return by_name(result.json())


def test_provider_spec_that_is_a_string_is_an_error_row(run: Run, tmp_path: Path) -> None:
    bad = machineset("bad")
    bad["spec"]["template"]["spec"]["providerSpec"]["value"] = "ami-05483066c3caaccf5"
    rows = _rows(run, tmp_path, bad, machineset())
    assert (rows["bad"]["action"], rows["bad"]["reason"]) == ("error", "InvalidProviderSpec")
    assert rows["bad"]["field"] == "spec.template.spec.providerSpec.value"
    assert rows[MS_416]["action"] == "patch", "the other MachineSets are still planned"


def test_missing_region_is_an_error_row(run: Run, tmp_path: Path) -> None:
    bad = machineset("no-region")
    del bad["spec"]["template"]["spec"]["providerSpec"]["value"]["placement"]["region"]
    rows = _rows(run, tmp_path, bad, machineset())
    assert (rows["no-region"]["action"], rows["no-region"]["reason"]) == ("error", "InvalidProviderSpec")
    assert rows["no-region"]["field"] == "spec.template.spec.providerSpec.value.placement.region"
    assert rows[MS_416]["action"] == "patch"


def test_unknown_arch_value_is_an_error_row(run: Run, tmp_path: Path) -> None:
    bad = machineset("riscv")
    bad["metadata"]["annotations"]["capacity.cluster-autoscaler.kubernetes.io/labels"] = "kubernetes.io/arch=riscv64"
    rows = _rows(run, tmp_path, bad, machineset())
    assert (rows["riscv"]["action"], rows["riscv"]["reason"]) == ("error", "InvalidArchitecture")
    assert "riscv64" in rows["riscv"]["message"]
    assert rows[MS_416]["action"] == "patch"


def test_error_rows_are_explained_in_the_table(run: Run, tmp_path: Path) -> None:
    bad = machineset("bad")
    bad["spec"]["template"]["spec"]["providerSpec"]["value"] = "oops"
    result = run("plan", cluster_dir(tmp_path, [bad, machineset()]))
    assert result.code == 0
    assert "Plan: this controller patches 1 now; 0 up to date, 0 skipped, 1 errors" in result.out
    assert "openshift-machine-api/bad: error InvalidProviderSpec" in result.out


def test_one_broken_stream_in_streams_fails_only_its_machinesets(run: Run, tmp_path: Path) -> None:
    cm = configmap_422()
    streams = json.loads(cm["data"]["streams"])
    streams["rhel-10"] = {"architectures": "not an object"}
    cm["data"]["streams"] = json.dumps(streams)
    rhel10 = machineset("rhel10")
    rhel10["metadata"]["labels"]["machineconfiguration.openshift.io/osstream"] = "rhel-10"
    d = cluster_dir(tmp_path, [rhel10, machineset()], with_configmap=False)
    write_yaml(d / "cm.yaml", cm)
    rows = by_name(run("plan", d, "-o", "json").json())
    assert (rows["rhel10"]["action"], rows["rhel10"]["reason"]) == ("error", "InvalidStreamData")
    assert rows[MS_416]["action"] == "patch"


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["plan"], "give PATHs"),
        (["plan", str(EXAMPLE), "--from-cluster"], "not both"),
        (["plan", str(EXAMPLE), "-o", "xml"], "invalid choice"),
        (["plan", str(EXAMPLE), "--control-plane-arch", "sparc"], "not an architecture"),
        (["plan", str(EXAMPLE), "--ocp-skew-limit", "four"], "not an OCP version"),
        (["plan", str(EXAMPLE), "--rhel-skew-limit", "9"], "not a RHEL version"),
        (["plan", str(EXAMPLE), "--kubeconfig", "k"], "--from-cluster"),
        (["frobnicate"], "invalid choice"),
        ([], "required"),
        (["run", "--concurrency", "0"], "at least 1"),
        (["run", "--log-format", "xml"], "invalid choice"),
        (["rollback"], "NAME"),
    ],
)
def test_usage_errors_exit_2(run: Run, argv: list[str], needle: str) -> None:
    result = run(*argv)
    assert result.code == 2
    assert needle in result.err
    assert "Traceback" not in result.err


def test_help_exits_0(run: Run) -> None:
    result = run("plan", "--help")
    assert result.code == 0
    for flag in ("--bootimages", "--from-cluster", "--write-patched", "--cloud-verify", "--control-plane-arch",
                 "--fail-on-skew", "--ocp-skew-limit", "--rhel-skew-limit", "--gcp-endpoint", "--azure-endpoint"):
        assert flag in result.out


@pytest.mark.parametrize("argv", [["plan", str(EXAMPLE), "--output", "xml"], ["rollback"], ["frobnicate"]])
def test_a_usage_error_is_one_line_and_where_the_help_is(run: Run, argv: list[str]) -> None:
    """As kubectl says it (issue 47): not the whole usage block before the line that matters."""
    result = run(*argv)
    lines = result.err.strip().splitlines()
    assert result.code == 2 and len(lines) == 2, result.err
    assert lines[0].startswith("error: ") and lines[1].startswith("See 'bootimage-controller")
    assert lines[1].endswith("--help' for usage.") and "usage:" not in result.err
