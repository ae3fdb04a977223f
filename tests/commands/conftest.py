"""Helpers for the `bootimage-controller` command tests: run `main` in-process, build inputs.

Expected values come from the input files themselves (the golden data, the MachineSets), never
from the code under test.
"""

from __future__ import annotations

import copy
import json
import shutil
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from bootimage_controller.commands.cli import main

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "aws-4.16-cluster"
EXAMPLE_MACHINESETS = EXAMPLE / "namespaces" / "openshift-machine-api" / "machine.openshift.io" / "machinesets"
FIXTURES = ROOT / "tests" / "fixtures"
MACHINESETS = FIXTURES / "machinesets"
CONFIGMAP_422 = FIXTURES / "configmaps" / "coreos-bootimages-4.22-multistream.yaml"
STREAMS = ROOT / "data" / "stream-metadata"
PROVIDER_SPEC = ("spec", "template", "spec", "providerSpec", "value")


@dataclass(frozen=True)
class Result:
    code: int
    out: str
    err: str

    def json(self) -> Any:
        return json.loads(self.out)


Run = Callable[..., Result]


@pytest.fixture
def run(capsys: pytest.CaptureFixture[str]) -> Run:
    """`run("plan", path, "-o", "json")`: main() in-process, with its exit code and output."""

    def _run(*argv: str | Path) -> Result:
        capsys.readouterr()
        code = main([str(a) for a in argv])
        captured = capsys.readouterr()
        return Result(code, captured.out, captured.err)

    return _run


def load_yaml(path: Path) -> Any:
    return yaml.safe_load(path.read_text())


def load_all_yaml(path: Path) -> list[Any]:
    return [d for d in yaml.safe_load_all(path.read_text()) if d is not None]


def write_yaml(path: Path, *docs: Any) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump_all(list(docs), sort_keys=False))
    return path


def machineset(name: str = "mycluster-7xk2p-worker-us-east-1a", fixture: str = "aws-x86_64-us-east-1a-4.16.yaml") -> dict[str, Any]:
    """A fixture MachineSet, renamed (a deep copy the test may change)."""
    obj: dict[str, Any] = copy.deepcopy(load_yaml(MACHINESETS / fixture))
    obj["metadata"]["name"] = name
    return obj


def configmap_422() -> dict[str, Any]:
    obj: dict[str, Any] = load_yaml(CONFIGMAP_422)
    return obj


def golden_stream(name: str | None = None) -> dict[str, Any]:
    """A stream document of the 4.22 ConfigMap: the default (`data.stream`) or `data.streams[name]`."""
    data = configmap_422()["data"]
    doc: dict[str, Any] = json.loads(data["stream"]) if name is None else json.loads(data["streams"])[name]
    return doc


def aws_image(stream: Mapping[str, Any], arch: str, region: str) -> str:
    image: str = stream["architectures"][arch]["images"]["aws"]["regions"][region]["image"]
    return image


def infrastructure(platform: str = "AWS", topology: str = "HighlyAvailable") -> dict[str, Any]:
    return {
        "apiVersion": "config.openshift.io/v1",
        "kind": "Infrastructure",
        "metadata": {"name": "cluster"},
        "status": {"platform": platform, "platformStatus": {"type": platform}, "controlPlaneTopology": topology},
    }


def cluster_version(*versions: str, architecture: str | None = None) -> dict[str, Any]:
    """History newest first, every entry Completed."""
    status: dict[str, Any] = {
        "desired": {"version": versions[0]},
        "history": [{"state": "Completed", "version": v} for v in versions],
    }
    if architecture:
        status["desired"]["architecture"] = architecture
    return {"apiVersion": "config.openshift.io/v1", "kind": "ClusterVersion", "metadata": {"name": "version"}, "status": status}


def machine_configuration(spec: Mapping[str, Any] | None = None) -> dict[str, Any]:
    return {
        "apiVersion": "operator.openshift.io/v1",
        "kind": "MachineConfiguration",
        "metadata": {"name": "cluster"},
        "spec": dict(spec or {}),
    }


def node(name: str, arch: str = "amd64", control_plane: bool = True, aleph: str | None = None) -> dict[str, Any]:
    labels = {"kubernetes.io/arch": arch}
    if control_plane:
        labels["node-role.kubernetes.io/master"] = ""
    meta: dict[str, Any] = {"name": name, "labels": labels}
    if aleph:
        meta["annotations"] = {"machineconfiguration.openshift.io/aleph-version": aleph}
    return {"apiVersion": "v1", "kind": "Node", "metadata": meta}


def cluster_dir(
    tmp_path: Path,
    machinesets: Sequence[Mapping[str, Any]],
    *,
    extra: Sequence[Mapping[str, Any]] = (),
    with_configmap: bool = True,
) -> Path:
    """A folder of plain YAML files: AWS Infrastructure, ClusterVersion, the 4.22 ConfigMap, MachineSets."""
    d = tmp_path / "cluster"
    write_yaml(d / "infrastructure.yaml", infrastructure())
    write_yaml(d / "clusterversion.yaml", cluster_version("4.22.0", "4.16.0"))
    if with_configmap:
        shutil.copy(CONFIGMAP_422, d / "coreos-bootimages.yaml")
    for i, ms in enumerate(machinesets):
        write_yaml(d / f"machineset-{i}.yaml", ms)
    for i, obj in enumerate(extra):
        write_yaml(d / f"extra-{i}.yaml", obj)
    return d


def by_name(plan: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    return {ms["name"]: ms for ms in plan["machineSets"]}


@pytest.fixture
def example_copy(tmp_path: Path) -> Iterator[Path]:
    """A writable copy of the bundled example cluster."""
    dest = tmp_path / "example"
    shutil.copytree(EXAMPLE, dest)
    yield dest
