"""`plan` on partial inputs says what it does not know instead of inventing it (issue 13, item 5)."""

from __future__ import annotations

import copy
import json
import shutil
from pathlib import Path

import pytest
import yaml

from .conftest import CONFIGMAP_422, EXAMPLE, MACHINESETS, Run, load_yaml

CLUSTER_VERSION = "clusterversions"


def test_no_clusterversion_means_an_unknown_install_version_not_0_0_0(run: Run, tmp_path: Path) -> None:
    # A MachineSet nothing identifies (AMI filters): its boot image is unknown without a ClusterVersion.
    shutil.copy(MACHINESETS / "aws-x86_64-ami-filters.yaml", tmp_path)
    shutil.copy(CONFIGMAP_422, tmp_path)
    result = run("plan", tmp_path, "-o", "json", "--fail-on-skew")
    assert result.code == 0, result.err
    skew = result.json()["skew"]
    assert skew["clusterBootImage"] is None
    assert skew["upgradeable"] is True
    assert "0.0.0" not in skew["message"]
    assert "is unknown" in skew["message"] and "mycluster-7xk2p-worker-us-west-2a" in skew["message"]


def test_example_without_clusterversion_keeps_what_other_evidence_says(run: Run, tmp_path: Path) -> None:
    tree = tmp_path / "cluster"
    shutil.copytree(EXAMPLE, tree)
    shutil.rmtree(next(tree.rglob(CLUSTER_VERSION)))
    full = run("plan", EXAMPLE, "-o", "json").json()
    partial = run("plan", tree, "-o", "json").json()
    # The decisions do not depend on the ClusterVersion (no multi-arch here); the skew verdict is
    # judged from the MachineSets' own images, which the bundled index identifies.
    # Only when they are written changes: never before the upgrade state is known (the gate).
    assert [{k: v for k, v in m.items() if k != "nextWrite"} for m in partial["machineSets"]] == [
        {k: v for k, v in m.items() if k != "nextWrite"} for m in full["machineSets"]]
    assert partial["gate"]["open"] is False and "not found" in partial["gate"]["message"]
    assert partial["skew"]["clusterBootImage"] == full["skew"]["clusterBootImage"]


def test_broken_providerspec_without_infrastructure_is_an_error_not_not_enrolled(run: Run, tmp_path: Path) -> None:
    good = load_yaml(MACHINESETS / "aws-x86_64-us-east-1a-4.16.yaml")
    broken = copy.deepcopy(good)
    broken["metadata"]["name"] = "broken"
    broken["spec"]["template"]["spec"]["providerSpec"]["value"]["ami"] = "not-a-map"
    (tmp_path / "machinesets.yaml").write_text(yaml.safe_dump_all([good, broken]))
    shutil.copy(CONFIGMAP_422, tmp_path)
    result = run("plan", tmp_path, "-o", "json")
    rows = {m["name"]: (m["action"], m["reason"]) for m in result.json()["machineSets"]}
    assert rows["broken"] == ("error", "InvalidProviderSpec"), result.out
    assert rows[good["metadata"]["name"]][0] == "patch"


def test_the_skew_explanation_names_machinesets_opted_out_by_annotation(run: Run, tmp_path: Path) -> None:
    tree = tmp_path / "cluster"
    shutil.copytree(EXAMPLE, tree)
    # The rhel-10 pool, which the MCO leaves alone; and an x86_64 rhel-9 one, which the MCO writes
    # all the same (it reads no such annotation: issue 49).
    names = []
    for victim in (sorted(tree.rglob("machinesets/*rhel10*.yaml"))[0], sorted(tree.rglob("machinesets/*-us-east-1b.yaml"))[-1]):
        obj = load_yaml(victim)
        obj["metadata"].setdefault("annotations", {})["machineconfiguration.openshift.io/boot-image-updates"] = "Disabled"
        victim.write_text(yaml.safe_dump(obj))
        names.append(obj["metadata"]["name"])
    result = run("plan", tree)
    assert result.code == 0, result.err
    line = next(line for line in result.out.splitlines() if "skew mode Automatic" in line)
    text = " ".join(result.out[result.out.index(line):].split())
    assert f"opted out by annotation (judged by their own boot image): openshift-machine-api/{names[0]}" in text
    assert ("opted out by annotation but written by the Machine Config Operator all the same (it reads no such "
            f"annotation; see the writer conflict): openshift-machine-api/{names[1]}") in text


def test_cloud_verify_without_credentials_does_not_advise_cloud_verify(
    run: Run, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for var in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_ROLE_ARN", "AWS_WEB_IDENTITY_TOKEN_FILE",
                "AWS_PROFILE", "AWS_SHARED_CREDENTIALS_FILE"):
        monkeypatch.delenv(var, raising=False)
    ms = load_yaml(MACHINESETS / "aws-x86_64-us-east-1a-4.16.yaml")
    ms["spec"]["template"]["spec"]["providerSpec"]["value"]["ami"]["id"] = "ami-0123456789abcdef0"
    (tmp_path / "ms.yaml").write_text(yaml.safe_dump(ms))
    shutil.copy(CONFIGMAP_422, tmp_path)
    result = run("plan", tmp_path, "--cloud-verify", "-o", "json")
    [row] = result.json()["machineSets"]
    assert row["reason"] == "UnknownBootImage"
    assert "had no AWS credentials" in row["message"] and "--cloud-verify" not in row["message"]


def test_plan_reads_standard_input(tmp_path: Path) -> None:
    import subprocess
    import sys

    from .conftest import ROOT

    objects = "".join(f"---\n{p.read_text()}" for p in sorted(EXAMPLE.rglob("*.yaml")))
    done = subprocess.run([sys.executable, "-m", "bootimage_controller", "plan", "-", "-o", "json"], input=objects,
                          cwd=ROOT, capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    from_files = subprocess.run([sys.executable, "-m", "bootimage_controller", "plan", str(EXAMPLE), "-o", "json"],
                                cwd=ROOT, capture_output=True, text=True, timeout=60, check=True)
    assert json.loads(done.stdout)["machineSets"] == json.loads(from_files.stdout)["machineSets"]
