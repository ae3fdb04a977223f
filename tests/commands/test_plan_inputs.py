"""What `plan` reads: folders of plain YAML, must-gather trees, `kind: List`, `--bootimages`."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import yaml

from .conftest import (
    CONFIGMAP_422,
    EXAMPLE,
    MACHINESETS,
    STREAMS,
    Run,
    aws_image,
    by_name,
    cluster_dir,
    cluster_version,
    configmap_422,
    golden_stream,
    infrastructure,
    machine_configuration,
    machineset,
    node,
    write_yaml,
)

MS_416 = "mycluster-7xk2p-worker-us-east-1a"  # fixture aws-x86_64-us-east-1a-4.16.yaml


def test_plain_yaml_files_and_folders(run: Run, tmp_path: Path) -> None:
    # The fixture folder (MachineSets of several platforms) plus the ConfigMap as a second path.
    result = run("plan", MACHINESETS, CONFIGMAP_422, infra := write_yaml(tmp_path / "infra.yaml", infrastructure()), "-o", "json")
    assert result.code == 0, result.err
    rows = by_name(result.json())
    fixture_names = {yaml.safe_load(p.read_text())["metadata"]["name"] for p in MACHINESETS.glob("*.yaml")}
    assert set(rows) == fixture_names
    assert rows[MS_416]["action"] == "patch"
    assert rows[MS_416]["target"] == {"id": aws_image(golden_stream(), "x86_64", "us-east-1")}
    # Infrastructure says AWS: the GCP MachineSet is still judged by its own providerSpec kind.
    assert rows["mycluster-4kqzx-worker-a"]["platform"] == "GCP"
    assert infra.exists()


def test_must_gather_tree_and_plain_files_give_the_same_plan(run: Run, tmp_path: Path) -> None:
    # The same cluster flattened into one multi-document YAML file: identical decisions.
    docs: list[Any] = []
    for path in sorted(EXAMPLE.rglob("*.yaml")):
        for doc in yaml.safe_load_all(path.read_text()):
            if doc is None:
                continue
            docs.extend(doc["items"] if doc.get("kind", "").endswith("List") else [doc])
    flat = write_yaml(tmp_path / "everything.yaml", *docs)
    from_tree = run("plan", EXAMPLE, "-o", "json").json()
    from_file = run("plan", flat, "-o", "json").json()
    assert from_file == from_tree
    assert len(from_tree["machineSets"]) == 7


def test_non_kubernetes_files_in_a_tree_are_ignored(run: Run, example_copy: Path) -> None:
    (example_copy / "event-filter.html").write_text("<html>not yaml: [</html>")
    (example_copy / "namespaces" / "notes.json").write_text(json.dumps({"just": "data"}))
    (example_copy / "namespaces" / "values.yaml").write_text("- a plain list\n- of strings\n")
    assert run("plan", example_copy, "-o", "json").json() == run("plan", EXAMPLE, "-o", "json").json()


def test_kind_list_and_typed_lists(run: Run, tmp_path: Path) -> None:
    ms = machineset()
    # `kind: List` (oc get -o yaml) and a typed list whose items carry no kind/apiVersion (raw API).
    generic = {"apiVersion": "v1", "kind": "List", "items": [ms, infrastructure(), cluster_version("4.22.0", "4.16.0")]}
    cm = configmap_422()
    cm.pop("kind")
    cm.pop("apiVersion")
    typed = {"apiVersion": "v1", "kind": "ConfigMapList", "items": [cm]}
    path = write_yaml(tmp_path / "lists.yaml", generic, typed)
    result = run("plan", path, "-o", "json")
    assert result.code == 0, result.err
    assert by_name(result.json())[MS_416]["action"] == "patch"


def test_json_input_files(run: Run, tmp_path: Path) -> None:
    lst = {"apiVersion": "v1", "kind": "List", "items": [machineset(), infrastructure(), configmap_422()]}
    path = tmp_path / "cluster.json"
    path.write_text(json.dumps(lst, indent=1))
    assert by_name(run("plan", path, "-o", "json").json())[MS_416]["action"] == "patch"


def test_bootimages_bare_stream_json(run: Run, tmp_path: Path) -> None:
    stream_file = STREAMS / "installer-release-4.19-rhcos.json"
    d = cluster_dir(tmp_path, [machineset()], with_configmap=False)
    result = run("plan", d, "--bootimages", stream_file, "-o", "json")
    assert result.code == 0, result.err
    row = by_name(result.json())[MS_416]
    stream = json.loads(stream_file.read_text())
    assert row["target"] == {"id": aws_image(stream, "x86_64", "us-east-1")}
    assert row["stream"] == "rhel-9"


def test_bootimages_configmap_file_wins_over_the_inputs(run: Run, tmp_path: Path) -> None:
    d = cluster_dir(tmp_path, [machineset()])  # has the 4.22 ConfigMap
    older = tmp_path / "cm-4.18.yaml"
    shutil.copy(CONFIGMAP_422.with_name("coreos-bootimages-4.18.yaml"), older)
    row = by_name(run("plan", d, "--bootimages", older, "-o", "json").json())[MS_416]
    stream_418 = json.loads(yaml.safe_load(older.read_text())["data"]["stream"])
    assert row["target"] == {"id": aws_image(stream_418, "x86_64", "us-east-1")}


def test_later_duplicates_win(run: Run, tmp_path: Path) -> None:
    # An edited MachineConfiguration given after a cluster dump replaces the dump's copy.
    d = cluster_dir(tmp_path, [machineset()])
    opt_out = write_yaml(tmp_path / "mc.yaml", machine_configuration({"managedBootImages": {"machineManagers": []}}))
    rows = by_name(run("plan", d, opt_out, "-o", "json").json())
    assert (rows[MS_416]["action"], rows[MS_416]["reason"]) == ("skip", "NotEnrolled")


def test_control_plane_arch_flag_then_nodes_then_default(run: Run, tmp_path: Path) -> None:
    ms = machineset()
    del ms["metadata"]["annotations"]["capacity.cluster-autoscaler.kubernetes.io/labels"]
    bare = cluster_dir(tmp_path / "bare", [ms])
    assert by_name(run("plan", bare, "-o", "json").json())[MS_416]["architecture"] == "x86_64"
    arm_nodes = cluster_dir(tmp_path / "arm", [ms], extra=[node("m0", "arm64"), node("w0", "amd64", control_plane=False)])
    assert by_name(run("plan", arm_nodes, "-o", "json").json())[MS_416]["architecture"] == "aarch64"
    for flag in ("amd64", "x86_64"):
        result = run("plan", arm_nodes, "--control-plane-arch", flag, "-o", "json")
        assert by_name(result.json())[MS_416]["architecture"] == "x86_64"


def test_multi_arch_cluster_needs_the_annotation(run: Run, tmp_path: Path) -> None:
    ms = machineset()
    del ms["metadata"]["annotations"]["capacity.cluster-autoscaler.kubernetes.io/labels"]
    d = cluster_dir(tmp_path, [ms], extra=[cluster_version("4.22.0", "4.16.0", architecture="Multi")])
    row = by_name(run("plan", d, "-o", "json").json())[MS_416]
    assert (row["action"], row["reason"]) == ("skip", "ArchitectureUnknown")


def test_platform_inferred_without_infrastructure(run: Run, tmp_path: Path) -> None:
    path = write_yaml(tmp_path / "ms.yaml", machineset())
    result = run("plan", path, CONFIGMAP_422)
    assert result.code == 0
    # No ClusterVersion: the upgrade state is unknown, so nothing would be written before it is known.
    assert "after-upgrade  BootImageOutdated" in result.out.splitlines()[1]
    assert "taken from the MachineSets' providerSpec kind" in " ".join(result.out.split())


def test_a_folder_holding_two_must_gathers_is_refused_naming_both(run: Run, tmp_path: Path) -> None:
    """Two clusters planned as one would mix their MachineSets and keep one Infrastructure (issue 32)."""
    folder = tmp_path / "must-gathers"
    shutil.copytree(EXAMPLE, folder / "east")
    shutil.copytree(EXAMPLE, folder / "west")
    result = run("plan", folder)
    assert result.code == 1 and result.out == ""
    assert f"{folder / 'east'} and {folder / 'west'}" in result.err
    assert "two must-gather trees" in result.err and "Traceback" not in result.err
    # The same as two paths on the command line; one tree is planned as before.
    assert run("plan", folder / "east", folder / "west").code == 1
    assert run("plan", folder / "east").code == 0


def test_two_clusters_infrastructure_objects_are_refused_an_edited_copy_is_not(run: Run, tmp_path: Path) -> None:
    mine = infrastructure()
    mine["status"]["infrastructureName"] = "mycluster-7xk2p"
    first = write_yaml(tmp_path / "a" / "infra.yaml", mine)
    other = infrastructure()
    other["status"]["infrastructureName"] = "othercluster-9zz9z"
    second = write_yaml(tmp_path / "b" / "infra.yaml", other)
    result = run("plan", first, second, CONFIGMAP_422, write_yaml(tmp_path / "ms.yaml", machineset()))
    assert result.code == 1
    assert str(first) in result.err and str(second) in result.err and "two clusters" in result.err
    edited = json.loads(json.dumps(mine))
    edited["status"]["platformStatus"]["aws"] = {"region": "us-east-1"}
    same = write_yaml(tmp_path / "c" / "infra.yaml", edited)
    assert run("plan", first, same, CONFIGMAP_422, tmp_path / "ms.yaml").code == 0


def test_a_kind_one_typo_away_is_a_warning_naming_file_and_line(run: Run, tmp_path: Path) -> None:
    typo = machineset()
    typo["kind"] = "MachineSett"
    path = write_yaml(tmp_path / "typo.yaml", typo)
    result = run("plan", path, CONFIGMAP_422, write_yaml(tmp_path / "ms.yaml", machineset()))
    assert result.code == 0
    line = next(n for n, text in enumerate(path.read_text().splitlines(), 1) if text.startswith("kind:"))
    assert f"{path}:{line}" in result.err and "'MachineSett'" in result.err and "MachineSet?" in result.err
    # Real kinds near a known one are not typos: Role and Pod are two edits from Node.
    role = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": {"name": "r", "namespace": "x"}}
    result = run("plan", write_yaml(tmp_path / "role.yaml", role), CONFIGMAP_422, tmp_path / "ms.yaml")
    assert "did you mean" not in result.err
