"""The fleet's pure parts (core/fleet.py) and its sources, reading and run loop without a cluster."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

import pytest
import yaml

from bootimage_controller.core.fleet import ClusterRow, PoolRow, releases_behind, worst_first
from bootimage_controller.core.hypershift import PlatformImageCatalog, default_stream, release_of_image
from bootimage_controller.data import bundled_index
from bootimage_controller.errors import InputError
from bootimage_controller.fleet import read as fleet_read
from bootimage_controller.fleet.run import read_fleet
from bootimage_controller.fleet.sources import ClusterSource, discover

from .fleetgen import write_fleet

REPO = Path(__file__).resolve().parents[2]


def test_release_and_stream_of_a_node_pool() -> None:
    assert release_of_image("quay.io/openshift-release-dev/ocp-release:4.21.3-x86_64") == "4.21.3"
    assert release_of_image("quay.io/openshift-release-dev/ocp-release:5.0.0-ec.2-multi") == "5.0.0-ec.2"
    assert release_of_image("quay.io/openshift-release-dev/ocp-release@sha256:" + "a" * 64) is None
    assert release_of_image({"image": "4.21.3"}) is None and release_of_image(None) is None
    assert default_stream("4.22.1") == "rhel-9" and default_stream("5.0.0-ec.2") == "rhel-10"
    assert default_stream(None) == "rhel-9"
    assert releases_behind("4.16", "4.22") == 6 and releases_behind("4.22", "5.0") is None


def test_the_bundled_catalog_knows_each_release_stream_and_region() -> None:
    catalog = PlatformImageCatalog(bundled_index().release_streams)
    found = catalog.find("4.22.0", "rhel-10", "aarch64", "AWS", "us-east-1")
    assert found.image and found.image.startswith("ami-") and found.missing is None
    gone = catalog.find("4.22.0", "rhel-9", "x86_64", "AWS", "me-south-1")  # 4.22 dropped the region
    assert gone.image is None and gone.missing == "aws/me-south-1/x86_64 in stream rhel-9 of OpenShift 4.22"
    assert catalog.find("4.21.5", "rhel-9", "x86_64", "AWS", "me-south-1").image  # 4.21 still had it
    assert catalog.find("4.19.4", "rhel-10", "x86_64", "AWS", "us-east-1").missing == "stream rhel-10 in OpenShift 4.19"
    assert catalog.find("4.20.1", "rhel-9", "x86_64", "AWS", "us-east-1").unknown  # no bundled 4.20 data
    assert catalog.find("4.22.0", "rhel-9", "x86_64", "GCP", None).image
    assert catalog.find("4.22.0", "rhel-9", "x86_64", "Agent", None).unknown


def row(name: str, **kw: object) -> ClusterRow:
    return ClusterRow(name=name, source="test", **kw)  # type: ignore[arg-type]


def pool(action: str, age: int | None = None, valid: bool | None = None) -> PoolRow:
    return PoolRow("ns", "p", "MachineSet", "rhel-9", "x86_64", "bootimage-controller", None, None, age, action,
                   "Reason", valid_platform_image=valid)


def test_worst_first() -> None:
    rows = [
        row("ok-young", pools=(pool("noop", 10),)),
        row("outdated", pools=(pool("patch", 500),)),
        row("unreadable", error="connection refused"),
        row("held", skew={"upgradeable": False}),
        row("ok-old", pools=(pool("noop", 900),)),
        row("hosted-bad", node_pools=(pool("error", valid=False),)),
    ]
    assert [r.name for r in worst_first(rows)] == ["unreadable", "held", "hosted-bad", "outdated", "ok-old", "ok-young"]


def test_sources_from_trees_kubeconfig_files_and_contexts(tmp_path: Path) -> None:
    tree = tmp_path / "prod-east"
    tree.mkdir()

    def kubeconfig(path: Path, *contexts: str, current: str | None = None) -> Path:
        path.write_text(yaml.safe_dump({"contexts": [{"name": c, "context": {}} for c in contexts],
                                        "current-context": current}))
        return path

    folder = tmp_path / "configs"
    folder.mkdir()
    kubeconfig(folder / "a.yaml", "hub", "spoke", current="hub")
    kubeconfig(folder / "b.yaml", "hub", current="hub")
    sources = discover([str(tree)], [str(folder)], [], False)
    assert [s.name for s in sources] == ["prod-east", "hub (a.yaml)", "hub (b.yaml)"]
    assert [s.context for s in discover([], [str(folder / "a.yaml")], [], True)] == ["hub", "spoke"]
    assert [s.context for s in discover([], [str(folder / "a.yaml")], ["spoke"], False)] == ["spoke"]
    with pytest.raises(InputError, match="no context named nope"):
        discover([], [str(folder / "a.yaml")], ["nope"], False)
    # Every input is a row: a missing path is a source that carries its error (issue 33).
    (missing,) = discover([str(tmp_path / "missing")], [], [], False)
    assert (missing.name, missing.error) == ("missing", "no such file or folder")


def test_a_folder_with_one_must_gather_is_named_after_the_tree(tmp_path: Path) -> None:
    """Issue 47: `fleet examples/` called the example cluster "examples"; a folder around one
    must-gather is that tree's cluster, read whole (loose manifests beside the tree included)."""
    examples = Path(__file__).resolve().parents[2] / "examples"
    (source,) = discover([str(examples)], [], [], False)
    assert (source.name, source.tree) == ("aws-4.16-cluster", examples)
    (alone,) = discover([str(examples / "aws-4.16-cluster")], [], [], False)
    assert alone.name == "aws-4.16-cluster"


async def test_a_broken_or_slow_cluster_is_a_row_and_the_others_complete(tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    trees = write_fleet(tmp_path, 6)
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "ms.yaml").write_text("kind: MachineSet\nmetadata: [not, a, map\n")
    slow = ClusterSource("slow", tree=trees[0])
    real = fleet_read.read_tree
    running = 0
    most = 0

    def counting(source: ClusterSource, options: fleet_read.FleetOptions) -> list[ClusterRow]:
        nonlocal running, most
        running += 1
        most = max(most, running)
        try:
            if source.name == "slow":
                time.sleep(3)
            return real(source, options)
        finally:
            running -= 1

    monkeypatch.setattr(fleet_read, "read_tree", counting)
    from bootimage_controller.core.hypershift import PlatformImageCatalog as Catalog
    from bootimage_controller.core.skew.verdict import SkewLimits

    options = fleet_read.FleetOptions(None, SkewLimits.from_flags("4.13.0", "9.2", ocp_flag="o", rhel_flag="r"),
                                      Catalog({}), bundled_index(), datetime.now(UTC))
    rows: list[ClusterRow] = []
    sources = [slow, ClusterSource("broken", tree=broken), *(ClusterSource(t.name, tree=t) for t in trees)]
    await read_fleet(sources, options, parallel=2, timeout=1.0, on_rows=rows.extend)
    by_name = {r.name: r for r in rows}
    assert by_name["slow"].error == "not read within 1 s (--timeout)"
    assert by_name["broken"].error and "ms.yaml" in by_name["broken"].error
    assert all(by_name[t.name].error is None and by_name[t.name].pools for t in trees)
    assert most <= 3  # 2 at a time, plus the slow one's thread finishing after its time was up
    await asyncio.sleep(0)


def test_fleet_exit_codes_and_table(tmp_path: Path) -> None:
    trees = write_fleet(tmp_path, 12)

    def run(*argv: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "bootimage_controller", "fleet", *argv], capture_output=True,
                              text=True, timeout=120, cwd=REPO, check=False)

    done = run(*map(str, trees))
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].split()[:3] == ["CLUSTER", "STATUS", "PLATFORM"]
    assert "12 clusters:" in done.stdout and "held" in done.stdout
    held = run(*map(str, trees), "--fail-on-skew", "-o", "json")
    assert held.returncode == 3
    assert any(c["status"] == "held" for c in json.loads(held.stdout)["clusters"])
    usage = run()
    assert usage.returncode == 2 and "give must-gather PATHs" in usage.stderr


def test_bootimages_is_read_once_and_judges_every_cluster_as_plan_does(tmp_path: Path) -> None:
    trees = write_fleet(tmp_path, 4)
    golden = REPO / "tests" / "fixtures" / "configmaps" / "coreos-bootimages-4.18.yaml"

    def run(*argv: str) -> dict[str, object]:
        done = subprocess.run([sys.executable, "-m", "bootimage_controller", *argv, "--bootimages", str(golden),
                               "-o", "json"], capture_output=True, text=True, timeout=120, cwd=REPO, check=False)
        assert done.returncode in (0, 3), done.stderr
        return json.loads(done.stdout)  # type: ignore[no-any-return]

    rows = {c["name"]: c for c in run("fleet", *map(str, trees))["clusters"]}  # type: ignore[attr-defined]
    for tree in trees:
        plan = run("plan", str(tree))
        assert [(p["name"], p["targetRelease"], p["action"]) for p in rows[tree.name]["pools"]] == [
            (m["name"], m["targetRelease"], m["action"]) for m in plan["machineSets"]]  # type: ignore[attr-defined]
        assert rows[tree.name]["skew"] == plan["skew"]


def test_an_unpinned_node_pool_is_told_it_moves_to_rhel10_at_5_0_and_whether_it_has_an_image() -> None:
    """HyperShift #9328/#9372: from 5.0 a NodePool not pinned by spec.osImageStream moves to rhel-10
    (issue 33, item 6). The forecast says so, per NodePool, with the missing key where there is none."""
    from bootimage_controller.core.hypershift import node_pool_row

    from .hosted import hosted_cluster, node_pool

    catalog = PlatformImageCatalog(bundled_index().release_streams)
    index = bundled_index()
    now = datetime(2026, 11, 27, tzinfo=UTC)
    east = hosted_cluster("east", "us-east-1", "4.21.3")
    gulf = hosted_cluster("gulf", "me-south-1", "4.21.3")
    moving = node_pool_row(node_pool("a", "east", "4.21.3"), east, catalog, index, now).to_json(node_pool=True)
    assert moving["streamAfterUpgrade"] == {"stream": "rhel-10", "at": "5.0.0", "validPlatformImage": True,
                                            "missingPlatformImage": None}
    lacking = node_pool_row(node_pool("b", "gulf", "4.21.3"), gulf, catalog, index, now).to_json(node_pool=True)
    assert lacking["streamAfterUpgrade"]["validPlatformImage"] is False
    assert lacking["streamAfterUpgrade"]["missingPlatformImage"] == "aws/me-south-1/x86_64 in stream rhel-10 of OpenShift 4.22"
    pinned = node_pool_row(node_pool("c", "east", "4.21.3", stream="rhel-9"), east, catalog, index, now)
    assert pinned.to_json(node_pool=True)["streamAfterUpgrade"] is None, "pinned: it keeps its stream"
    from bootimage_controller.core.fleet import ClusterRow
    from bootimage_controller.fleet.render import note

    row = ClusterRow(name="east", source="x", pools=(), node_pools=(
        node_pool_row(node_pool("a", "east", "4.21.3"), east, catalog, index, now),
        node_pool_row(node_pool("b", "gulf", "4.21.3"), gulf, catalog, index, now)))
    assert note(row) == "2 NodePool(s) move to rhel-10 at 5.0, no image for b"


def _judged(name: str, verdict: str, age: int | None, image: str = "ami-1") -> PoolRow:
    return PoolRow("openshift-machine-api", name, "MachineSet", "rhel-9", "x86_64", "bootimage-controller", None,
                   None, age, "noop", "UpToDate",
                   verified={"verdict": verdict, "image": image, "machine": None, "node": None, "at": None,
                             "reason": ""})


def test_each_pool_carries_its_verdict_and_the_cluster_its_oldest_unproven_image() -> None:
    """SPEC section 3b: `fleet` per pool, and the oldest unverified image per cluster."""
    from bootimage_controller.fleet.render import table

    r = row("c1", pools=(_judged("young", "unverified", 10), _judged("old", "unverified", 900, "ami-old"),
                         _judged("oldest", "verified", 1000)))
    doc = r.to_json()
    assert [p["verified"]["verdict"] for p in doc["pools"]] == ["unverified", "unverified", "verified"]
    assert doc["oldestUnverified"] == {"namespace": "openshift-machine-api", "name": "old", "kind": "MachineSet",
                                       "image": "ami-old", "verdict": "unverified", "currentRelease": None,
                                       "bootImageAge": 900}
    assert r.status == "ok"
    failed = row("c2", pools=(_judged("gpu", "failed", 5, "ami-bad"), _judged("w", "verified", 5)))
    assert failed.status == "degraded"  # as its ClusterOperator says it
    out = table([r, failed], width=200)
    assert "VERIFIED" in out.splitlines()[0]
    assert "1/3" in out and "1/2" in out
    assert "boot image failed its first boot: gpu (ami-bad)" in out
    assert row("c3", pools=(_judged("w", "verified", 5),)).to_json()["oldestUnverified"] is None


def test_the_table_counts_one_cluster_in_the_singular() -> None:
    from bootimage_controller.core.fleet import failed_cluster
    from bootimage_controller.fleet.render import table

    one = table([failed_cluster("east", "kubeconfig", "cannot reach it")], 120)
    assert "\n1 cluster: 1 error\n" in one, one
    two = table([failed_cluster("east", "k", "x"), failed_cluster("west", "k", "y")], 120)
    assert "\n2 clusters: 2 error\n" in two, two


def test_a_stray_manifest_or_bad_yaml_in_a_kubeconfig_folder_is_said_for_what_it_is(tmp_path: Path) -> None:
    """Issue 47: a MachineSet YAML there is not "no current-context", a garbage one not a parser dump."""
    folder = tmp_path / "kubeconfigs"
    folder.mkdir()
    (folder / "machineset.yaml").write_text(yaml.safe_dump({"apiVersion": "machine.openshift.io/v1beta1",
                                                            "kind": "MachineSet", "metadata": {"name": "w"}}))
    (folder / "garbage.yaml").write_text("clusters:\n  - name: [unclosed\n")
    errors = {s.name: s.error for s in discover([], [str(folder)], [], False)}
    assert errors["machineset.yaml"] == ("not a kubeconfig but a MachineSet (machine.openshift.io/v1beta1): give "
                                         "must-gather trees and manifests as PATHs, kubeconfigs with --kubeconfig")
    assert (errors["garbage.yaml"] or "").startswith("not a readable kubeconfig: invalid YAML at line 3 column 1:"), errors
