"""`fleet` on a Hive hub: every ClusterDeployment a row, with its MachinePools, and a MachinePool whose
`amiID` is not the golden image of its ClusterDeployment's release flagged with the value to set
(issue 34, item 3). Read from a must-gather-like tree, as `fleet` reads one; the live read lists the
same kinds (plan_cluster)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

from bootimage_controller.data import bundled_index

AWS_416_EAST1 = "ami-05483066c3caaccf5"  # 416.94.202405291527-0, us-east-1


def _catalog_ami(release_minor: str, region: str) -> str:
    streams = bundled_index().release_streams[release_minor]
    return str(streams["rhel-9"]["x86_64"]["aws"][region])


def cluster_deployment(name: str, version: str, region: str = "us-east-1") -> dict[str, Any]:
    return {"apiVersion": "hive.openshift.io/v1", "kind": "ClusterDeployment",
            "metadata": {"name": name, "namespace": name,
                         "labels": {"hive.openshift.io/version-major-minor-patch": version}},
            "spec": {"clusterName": name, "baseDomain": "example.com", "platform": {"aws": {"region": region}}},
            "status": {"installVersion": "4.16.3"}}


def machine_pool(cd: str, name: str, ami: str | None = None, instance: str = "m6i.xlarge") -> dict[str, Any]:
    aws: dict[str, Any] = {"type": instance, "zones": ["us-east-1a"]}
    if ami:
        aws["amiID"] = ami
    return {"apiVersion": "hive.openshift.io/v1", "kind": "MachinePool",
            "metadata": {"name": f"{cd}-{name}", "namespace": cd},
            "spec": {"clusterDeploymentRef": {"name": cd}, "name": name, "replicas": 3, "platform": {"aws": aws}}}


def test_a_hub_lists_machinepools_whose_ami_id_is_not_their_releases(tmp_path: Path) -> None:
    golden_422 = _catalog_ami("4.22", "us-east-1")
    hub = tmp_path / "hub"
    objs = [
        cluster_deployment("spoke-a", "4.22.1"),
        machine_pool("spoke-a", "pinned-old", AWS_416_EAST1),
        machine_pool("spoke-a", "current", golden_422),
        machine_pool("spoke-a", "release-image"),
        machine_pool("spoke-a", "arm", AWS_416_EAST1, instance="m7g.large"),
        cluster_deployment("spoke-b", "4.16.3"),
        machine_pool("spoke-b", "worker", _catalog_ami("4.16", "us-east-1")),
        # 4.16.3 (July 2024) on the 4.16 GA image: 4.16's newest build (October 2025) is not its
        # release's, and which one 4.16.3 shipped is not in the bundled data (issue 49).
        cluster_deployment("spoke-c", "4.16.3"),
        machine_pool("spoke-c", "worker", AWS_416_EAST1),
        # 4.16.0's own images are known (the GA installer data): judged exactly.
        cluster_deployment("spoke-d", "4.16.0"),
        machine_pool("spoke-d", "worker", AWS_416_EAST1),
        machine_pool("spoke-d", "newer", _catalog_ami("4.16", "us-east-1")),
    ]
    for i, obj in enumerate(objs):
        (hub / f"{i}.yaml").parent.mkdir(parents=True, exist_ok=True)
        (hub / f"{i}.yaml").write_text(yaml.safe_dump(obj))
    result = subprocess.run([sys.executable, "-m", "bootimage_controller", "fleet", str(hub), "-o", "json"],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    rows = {r["name"]: r for r in json.loads(result.stdout)["clusters"]}
    a = rows["spoke-a/spoke-a"]
    assert (a["managementCluster"], a["release"], a["status"]) == ("hub", "4.22.1", "outdated")
    pools = {p["name"]: p for p in a["pools"]}
    old = pools["spoke-a-pinned-old"]
    assert (old["kind"], old["manager"], old["action"], old["reason"]) == ("MachinePool", "hive", "patch", "AmiIdOutdated")
    assert (old["current"], old["target"], old["currentRelease"]) == (AWS_416_EAST1, golden_422, "416.94.202405291527-0")
    assert (pools["spoke-a-current"]["action"], pools["spoke-a-current"]["reason"]) == ("noop", "UpToDate")
    assert (pools["spoke-a-release-image"]["action"], pools["spoke-a-release-image"]["reason"]) == (
        "noop", "BootsReleaseImage")
    assert pools["spoke-a-arm"]["architecture"] == "aarch64"
    # Still at 4.16, its amiID the 4.16 golden image: nothing to change.
    b = rows["spoke-b/spoke-b"]
    assert (b["status"], b["pools"][0]["action"]) == ("ok", "noop")
    (c,) = rows["spoke-c/spoke-c"]["pools"]
    assert (c["action"], c["reason"]) == ("skip", "ReleaseBootImageUnknown"), c
    d = {p["name"]: p for p in rows["spoke-d/spoke-d"]["pools"]}
    assert (d["spoke-d-worker"]["action"], d["spoke-d-worker"]["reason"]) == ("noop", "UpToDate")
    # A later 4.16 build than 4.16.0's own: newer, never flagged to go back.
    assert (d["spoke-d-newer"]["action"], d["spoke-d-newer"]["reason"]) == ("noop", "UpToDate"), d["spoke-d-newer"]
    # An older minor's image on a 4.22.1 spoke stays outdated whatever 4.22.1 shipped, and says so.
    from datetime import UTC, datetime

    from bootimage_controller.core.hive import machine_pool_row
    from bootimage_controller.core.hypershift import PlatformImageCatalog

    index = bundled_index()
    row = machine_pool_row(machine_pool("spoke-a", "pinned-old", AWS_416_EAST1), cluster_deployment("spoke-a", "4.22.1"),
                           "4.22.1", PlatformImageCatalog(index.release_streams), index, datetime.now(UTC))
    assert row.reason == "AmiIdOutdated" and "4.22.1 may have shipped an earlier one" in row.message


def _hub(tmp_path: Path, objs: list[dict[str, Any]]) -> Path:
    hub = tmp_path / "hub"
    hub.mkdir()
    for i, obj in enumerate(objs):
        (hub / f"{i}.yaml").write_text(yaml.safe_dump(obj))
    return hub


def _fleet(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "bootimage_controller", "fleet", *argv, "-o", "json"],
                          capture_output=True, text=True, timeout=120)


GA_416 = Path(__file__).resolve().parents[2] / "data" / "stream-metadata" / "installer-4.16-416.94.202405291527-0-rhcos.json"


def test_a_spoke_is_judged_by_the_images_its_own_release_shipped_when_given(tmp_path: Path) -> None:
    """`--bootimages 4.16.3=FILE`: a 4.16.3 spoke against 4.16.3's own images (here the installer data
    4.16.3 shipped with, the GA build), never a later build of its minor; other spokes as before."""
    newest_416 = _catalog_ami("4.16", "us-east-1")
    hub = _hub(tmp_path, [
        cluster_deployment("spoke-c", "4.16.3"),
        machine_pool("spoke-c", "worker", AWS_416_EAST1),
        machine_pool("spoke-c", "later", newest_416),
        cluster_deployment("spoke-a", "4.22.1"),
        machine_pool("spoke-a", "pinned-old", AWS_416_EAST1),
    ])
    result = _fleet(str(hub), "--bootimages", f"4.16.3={GA_416}")
    assert result.returncode == 0, result.stderr
    rows = {r["name"]: r for r in json.loads(result.stdout)["clusters"]}
    c = {p["name"]: p for p in rows["spoke-c/spoke-c"]["pools"]}
    worker = c["spoke-c-worker"]
    assert (worker["action"], worker["reason"], worker["target"]) == ("noop", "UpToDate", AWS_416_EAST1), worker
    # A later build than its release's own: newer, not flagged to go back.
    assert (c["spoke-c-later"]["action"], c["spoke-c-later"]["target"]) == ("noop", AWS_416_EAST1), c["spoke-c-later"]
    (a,) = rows["spoke-a/spoke-a"]["pools"]
    assert (a["action"], a["reason"]) == ("patch", "AmiIdOutdated")
    assert a["target"] == _catalog_ami("4.22", "us-east-1")


def test_release_data_is_refused_for_another_release(tmp_path: Path) -> None:
    hub = _hub(tmp_path, [cluster_deployment("spoke-c", "4.16.3"), machine_pool("spoke-c", "worker", AWS_416_EAST1)])
    cm = Path(__file__).resolve().parents[1] / "fixtures" / "configmaps" / "coreos-bootimages-4.18.yaml"
    result = _fleet(str(hub), "--bootimages", f"4.16.3={cm}")
    assert result.returncode != 0
    assert "data.releaseVersion: is 4.18.33, not 4.16.3" in result.stderr, result.stderr
    assert "Traceback" not in result.stderr
    result = _fleet(str(hub), "--bootimages", f"4.16={GA_416}")
    assert result.returncode != 0 and "a whole release, such as 4.16.3" in result.stderr, result.stderr
