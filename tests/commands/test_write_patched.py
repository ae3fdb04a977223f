"""`plan --write-patched DIR`: the input object with only the boot image field changed."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from bootimage_controller.constants import Action
from bootimage_controller.core.model import FieldChange
from bootimage_controller.core.patching import PatchConflictError, apply_changes, changed_paths

from .conftest import (
    EXAMPLE,
    EXAMPLE_MACHINESETS,
    PROVIDER_SPEC,
    Run,
    by_name,
    cluster_dir,
    load_yaml,
    machineset,
)

AMI_PATH = (*PROVIDER_SPEC, "ami")
SERVER_OWNED = ("managedFields", "resourceVersion", "uid")


def without_server_metadata(obj: dict[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(obj)
    for key in SERVER_OWNED:
        out["metadata"].pop(key, None)
    return out


def test_example_manifests_differ_only_in_the_boot_image(run: Run, tmp_path: Path) -> None:
    out = tmp_path / "patched"
    result = run("plan", EXAMPLE, "--write-patched", out, "-o", "json")
    assert result.code == 0, result.err
    plan = result.json()
    # Only what this controller (or Git) carries: the MCO writes its three itself (issue 49).
    patches = [m for m in plan["machineSets"] if m["action"] == Action.PATCH and m["manager"] == "bootimage-controller"]
    assert len(patches) == 1 and len([m for m in plan["machineSets"] if m["action"] == Action.PATCH]) == 4
    assert sorted(p.name for p in out.iterdir()) == sorted(f"{m['namespace']}_{m['name']}.yaml" for m in patches)
    assert "wrote 1 patched manifest(s) to" in result.err
    assert "(3 left to the MCO, Hive or a policy, which write their own)" in result.err
    for m in patches:
        original = load_yaml(EXAMPLE_MACHINESETS / f"{m['name']}.yaml")
        written = yaml.safe_load((out / f"{m['namespace']}_{m['name']}.yaml").read_text())
        assert changed_paths(without_server_metadata(original), written) == [(*AMI_PATH, "id")]
        assert written["spec"]["template"]["spec"]["providerSpec"]["value"]["ami"] == m["target"]
        # Everything the API server owns is gone; the rest of metadata (and status) is as given.
        assert not set(SERVER_OWNED) & set(written["metadata"])
        assert written["metadata"]["creationTimestamp"] == original["metadata"]["creationTimestamp"]
        assert written["status"] == original["status"]


def test_unknown_keys_and_odd_values_survive(run: Run, tmp_path: Path) -> None:
    ms = machineset()
    spec = ms["spec"]["template"]["spec"]["providerSpec"]["value"]
    spec["futureField"] = {"nested": [1, "2", None, {"deep": True}], "when": "2024-05-29T15:27:00Z"}
    spec["ami"]["filtersIgnored"] = []  # an extra key inside the replaced object goes with it
    ms["metadata"]["managedFields"] = [{"manager": "kubectl", "operation": "Update"}]
    ms["metadata"]["resourceVersion"] = "123"
    ms["metadata"]["annotations"]["note"] = "yes"  # a YAML 1.1 boolean word, kept a string
    ms["spec"]["template"]["spec"]["taints"] = [{"key": "k", "value": "0755", "effect": "NoSchedule"}]
    d = cluster_dir(tmp_path, [ms])
    # Unquoted, as people write it: still a string (the API server sees JSON), not a datetime.
    ms_file = d / "machineset-0.yaml"
    ms_file.write_text(ms_file.read_text().replace("'2024-05-29T15:27:00Z'", "2024-05-29T15:27:00Z"))
    assert "when: 2024-05-29T15:27:00Z" in ms_file.read_text()
    out = tmp_path / "out"
    plan = run("plan", d, "--write-patched", out, "-o", "json").json()
    row = by_name(plan)[ms["metadata"]["name"]]
    written = yaml.safe_load((out / f"openshift-machine-api_{row['name']}.yaml").read_text())
    assert changed_paths(without_server_metadata(ms), written) == [(*AMI_PATH, "filtersIgnored"), (*AMI_PATH, "id")]
    value = written["spec"]["template"]["spec"]["providerSpec"]["value"]
    assert value["futureField"] == spec["futureField"]
    assert isinstance(value["futureField"]["when"], str)
    assert value["ami"] == row["target"]


def test_no_patches_no_files(run: Run, tmp_path: Path) -> None:
    out = tmp_path / "empty"
    ms = machineset()
    ms["metadata"]["annotations"]["machineconfiguration.openshift.io/boot-image-updates"] = "Disabled"
    result = run("plan", cluster_dir(tmp_path, [ms]), "--write-patched", out)
    assert result.code == 0
    assert list(out.iterdir()) == []


def test_unwritable_directory_is_bad_input(run: Run, tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("x")
    result = run("plan", EXAMPLE, "--write-patched", blocker / "sub")
    assert result.code == 1
    assert "Traceback" not in result.err
    assert "--write-patched" in result.err


# ---- patching (pure) ----------------------------------------------------------------------------


def test_apply_changes_copies_and_checks_the_old_value() -> None:
    obj = machineset()
    before = copy.deepcopy(obj)
    old = obj["spec"]["template"]["spec"]["providerSpec"]["value"]["ami"]
    patched = apply_changes(obj, [FieldChange(AMI_PATH, old, {"id": "ami-new"})])
    assert obj == before, "the input is never modified"
    assert changed_paths(obj, patched) == [(*AMI_PATH, "id")]
    with pytest.raises(PatchConflictError, match=r"providerSpec\.value\.ami: expected"):
        apply_changes(obj, [FieldChange(AMI_PATH, {"id": "ami-someone-else"}, {"id": "ami-new"})])


def test_apply_changes_in_lists_and_missing_fields() -> None:
    obj = {"spec": {"disks": [{"boot": False, "image": "a"}, {"boot": True, "image": "b"}]}}
    patched = apply_changes(obj, [FieldChange(("spec", "disks", 1, "image"), "b", "c")])
    assert patched["spec"]["disks"][1]["image"] == "c"
    assert patched["spec"]["disks"][0] == obj["spec"]["disks"][0]
    # A missing last key counts as None and may be created; a missing parent may not.
    assert apply_changes(obj, [FieldChange(("spec", "template"), None, "t")])["spec"]["template"] == "t"
    with pytest.raises(PatchConflictError):
        apply_changes(obj, [FieldChange(("spec", "missing", "x"), None, "t")])
    with pytest.raises(PatchConflictError):
        apply_changes(obj, [FieldChange(("spec", "disks", 5, "image"), None, "t")])
    with pytest.raises(PatchConflictError):
        apply_changes(obj, [FieldChange(("spec", "disks", "image"), None, "t")])
    # Unchecked (rollback restores whatever is there).
    assert apply_changes(obj, [FieldChange(("spec", "disks", 0, "image"), "zzz", "d")], check_old=False)


def test_changed_paths() -> None:
    assert changed_paths({"a": [1, {"b": 2}]}, {"a": [1, {"b": 3}]}) == [("a", 1, "b")]
    assert changed_paths({"a": 1}, {"a": 1, "b": 2}) == [("b",)]
    assert changed_paths({"a": [1]}, {"a": [1, 2]}) == [("a",)]
    assert changed_paths({"a": 1}, {"a": True}) == [("a",)]
    assert changed_paths({"a": {"x": None}}, {"a": {"x": None}}) == []


def test_a_gitops_machineset_gets_a_kustomize_patch_that_makes_the_same_change(run: Run, tmp_path: Path) -> None:
    """Issue 22: for MachineSets applied from Git, `--write-patched` also writes a kustomize JSON 6902
    patch (with the `patches:` entry in its header) whose ops make exactly the manifest's change."""
    argo = machineset("tracked")
    argo["metadata"].setdefault("annotations", {})["argocd.argoproj.io/tracking-id"] = "workers:machine.openshift.io/MachineSet:x/tracked"
    flux = machineset("fluxed")
    flux["metadata"].setdefault("labels", {})["kustomize.toolkit.fluxcd.io/name"] = "workers"
    plain = machineset("plain")
    out = tmp_path / "patched"
    result = run("plan", cluster_dir(tmp_path, [argo, flux, plain]), "--write-patched", out, "-o", "json")
    assert result.code == 0, result.err
    managers = {m["name"]: m["manager"] for m in result.json()["machineSets"]}
    assert managers == {"tracked": "gitops", "fluxed": "gitops", "plain": "bootimage-controller"}
    patches = sorted(p.name for p in out.glob("*.patch.yaml"))
    assert patches == ["openshift-machine-api_fluxed.patch.yaml", "openshift-machine-api_tracked.patch.yaml"]
    text = (out / "openshift-machine-api_tracked.patch.yaml").read_text()
    header = "\n".join(line[2:] for line in text.splitlines() if line.startswith("# ") and not line.startswith("# Proposed"))
    entry = yaml.safe_load(header.split("patches:\n", 1)[1])
    assert entry == [{"path": "openshift-machine-api_tracked.patch.yaml", "target": {
        "group": "machine.openshift.io", "version": "v1beta1", "kind": "MachineSet",
        "namespace": "openshift-machine-api", "name": "tracked"}}]
    ops = yaml.safe_load(text)
    assert [op["op"] for op in ops] == ["test", "replace"]
    manifest = yaml.safe_load((out / "openshift-machine-api_tracked.yaml").read_text())
    new_ami = manifest["spec"]["template"]["spec"]["providerSpec"]["value"]["ami"]
    assert ops[1] == {"op": "replace", "path": "/spec/template/spec/providerSpec/value/ami", "value": new_ami}
    assert ops[0]["value"] == argo["spec"]["template"]["spec"]["providerSpec"]["value"]["ami"]
