"""Running `bootimage-controller plan` in-process on a folder of objects, for the bad-input corpus."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from bootimage_controller.commands.cli import main

from .corpus import AWS, configmap, machineset

MAX_MESSAGE = 10_000  # an error message must never carry megabytes of the input back


@dataclass(frozen=True)
class Result:
    code: int
    out: str
    err: str

    def rows(self) -> dict[str, dict[str, Any]]:
        return {row["name"]: row for row in json.loads(self.out)["machineSets"]}

    def assert_no_traceback(self) -> None:
        assert "Traceback" not in self.err, self.err[-3000:]
        assert len(self.err) < MAX_MESSAGE, f"stderr is {len(self.err)} characters long"

    def assert_bad_input(self, *needles: str) -> None:
        """Exit 1 with one `error: ...` line naming each needle, nothing on stdout, no traceback."""
        self.assert_no_traceback()
        assert self.code == 1, (self.code, self.err[-2000:])
        assert self.out == ""
        assert self.err.startswith("error: "), self.err[:2000]
        for needle in needles:
            assert needle in self.err, f"{needle!r} not in {self.err[:2000]!r}"


Plan = Callable[..., Result]


@pytest.fixture
def plan(capsys: pytest.CaptureFixture[str]) -> Plan:
    """`plan(path, "-o", "json")`: `bootimage-controller plan` in this process."""

    def _run(*argv: str | Path) -> Result:
        capsys.readouterr()
        code = main(["plan", *(str(a) for a in argv)])
        captured = capsys.readouterr()
        return Result(code, captured.out, captured.err)

    return _run


def write_yaml(path: Path, *docs: Any) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    # The C emitter: a megabyte-sized value takes the pure-Python one tens of seconds.
    dumper = getattr(yaml, "CSafeDumper", yaml.SafeDumper)
    path.write_text(yaml.dump_all(list(docs), Dumper=dumper, sort_keys=False))
    return path


def infrastructure(platform: str = "AWS") -> dict[str, Any]:
    return {
        "apiVersion": "config.openshift.io/v1",
        "kind": "Infrastructure",
        "metadata": {"name": "cluster"},
        "status": {"platform": platform, "platformStatus": {"type": platform}, "controlPlaneTopology": "HighlyAvailable"},
    }


def cluster_version(version: Any = "4.22.0") -> dict[str, Any]:
    history = [{"state": "Completed", "version": version}, {"state": "Completed", "version": "4.16.0"}]
    return {
        "apiVersion": "config.openshift.io/v1",
        "kind": "ClusterVersion",
        "metadata": {"name": "version"},
        "status": {"desired": {"version": version}, "history": history},
    }


def machine_configuration(spec: Mapping[str, Any]) -> dict[str, Any]:
    return {"apiVersion": "operator.openshift.io/v1", "kind": "MachineConfiguration", "metadata": {"name": "cluster"}, "spec": dict(spec)}


def control_plane_node(aleph: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": "master-0",
            "labels": {"node-role.kubernetes.io/master": "", "kubernetes.io/arch": "amd64"},
            "annotations": {"machineconfiguration.openshift.io/aleph-version": aleph},
        },
    }


HEALTHY = "healthy"


def cluster_dir(
    root: Path,
    machinesets: Sequence[Mapping[str, Any]] = (),
    *,
    configmap_obj: Mapping[str, Any] | None = None,
    extra: Sequence[Mapping[str, Any]] = (),
    healthy: bool = True,
) -> Path:
    """A folder an administrator might point `plan` at: AWS Infrastructure, ClusterVersion, the
    (possibly broken) ConfigMap, the given MachineSets and, unless told otherwise, one healthy
    MachineSet named `healthy` that must still be planned."""
    d = root / "cluster"
    write_yaml(d / "infrastructure.yaml", infrastructure())
    write_yaml(d / "clusterversion.yaml", cluster_version())
    write_yaml(d / "coreos-bootimages.yaml", configmap_obj if configmap_obj is not None else configmap())
    for i, ms in enumerate(machinesets):
        write_yaml(d / f"machineset-{i}.yaml", ms)
    if healthy:
        write_yaml(d / "machineset-healthy.yaml", machineset(AWS, HEALTHY))
    for i, obj in enumerate(extra):
        write_yaml(d / f"extra-{i}.yaml", obj)
    return d
