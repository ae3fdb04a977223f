"""`fleet` over 200 must-gather trees and 3 live API servers (one a HyperShift management cluster)
plus one whose API server is dead, in one run (issue 26 acceptance): every row agrees with `plan` on
the same input, the dead cluster is a row with its error, and the others are complete."""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
import os
import socket
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import yaml
from harness.cluster import ClusterFactory, TestCluster
from harness.objects import api_client_for, apply, bootimages_configmap

from bootimage_controller.commands import cli
from bootimage_controller.core.skew.versions import parse_rhcos_version
from bootimage_controller.errors import VersionError

from . import hosted
from .fleetgen import GOLDEN, fleet_spec, tree_objects, write_fleet

pytestmark = [pytest.mark.integration, pytest.mark.heavy]

REPO = Path(__file__).resolve().parents[2]
TREES = 200
POOL_FIELDS = ("namespace", "name", "kind", "stream", "architecture", "manager", "currentRelease", "targetRelease",
               "action", "reason", "current", "target")


def plan_json(*argv: str) -> dict[str, Any]:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = cli.main(["plan", *argv, "-o", "json"])
    assert code in (0, 3), f"plan {argv}: exit {code}"
    return json.loads(out.getvalue())


def agrees_with_plan(row: dict[str, Any], plan: dict[str, Any], now: datetime) -> None:
    assert row["error"] is None, row["error"]
    assert row["skew"] == plan["skew"], row["name"]
    pools = [{k: p[k] for k in POOL_FIELDS} for p in row["pools"]]
    assert pools == [{k: m[k] for k in POOL_FIELDS} for m in plan["machineSets"]], row["name"]
    for p in row["pools"]:
        built = build_date(p["currentRelease"])
        assert p["bootImageAge"] == ((now - built).days if built else None), (row["name"], p["name"])
    held = not plan["skew"]["upgradeable"]
    assert (row["status"] == "held") == held and bool(row["heldBy"]) == held, row["name"]


def build_date(release: str | None) -> datetime | None:
    """An RHCOS build id's date; Azure marketplace versions (`9.6.20251015`) are not build ids."""
    try:
        return parse_rhcos_version(release).built if release else None
    except VersionError:
        return None


def kubeconfig_named(source: Path, context: str, dest: Path, server: str | None = None) -> Path:
    doc = yaml.safe_load(source.read_text())
    doc["contexts"][0]["name"] = doc["current-context"] = context
    if server is not None:
        doc["clusters"][0]["cluster"]["server"] = server
    dest.write_text(yaml.safe_dump(doc))
    return dest


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def populate(cluster: TestCluster, objects: list[dict[str, Any]]) -> None:
    async with await api_client_for(cluster.kubeconfig) as api:
        for obj in objects:
            await apply(api, obj)


async def populate_management(cluster: TestCluster) -> None:
    async with await api_client_for(cluster.kubeconfig) as api:
        for crd in hosted.crds():
            await apply(api, crd)
        await apply(api, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": hosted.NAMESPACE}})
        for _ in range(50):  # the CRDs are served a moment after they are created
            try:
                for obj in [*hosted.HOSTED, *hosted.POOLS]:
                    await apply(api, obj)
                return
            except Exception:
                await asyncio.sleep(0.2)
        raise AssertionError("HostedCluster/NodePool CRDs never served")


async def test_200_trees_3_live_clusters_and_a_dead_one_in_one_run(
    tmp_path: Path, fresh_cluster: ClusterFactory
) -> None:
    trees = write_fleet(tmp_path / "trees", TREES)
    live = {name: fresh_cluster(with_controller_manager=False) for name in ("alpha", "bravo", "mgmt")}
    live_specs = {"alpha": fleet_spec(1), "bravo": fleet_spec(10), "mgmt": fleet_spec(4)}
    for name, cluster in live.items():
        spec = live_specs[name]
        await populate(cluster, [bootimages_configmap(GOLDEN[spec.golden][0]), *tree_objects(spec)])
    await populate_management(live["mgmt"])
    configs = tmp_path / "kubeconfigs"
    configs.mkdir()
    for name, cluster in live.items():
        kubeconfig_named(cluster.kubeconfig, name, configs / f"{name}.yaml")
    kubeconfig_named(live["alpha"].kubeconfig, "dead", configs / "dead.yaml",
                     server=f"https://127.0.0.1:{closed_port()}")

    page = tmp_path / "fleet.html"
    started = datetime.now(UTC)
    done = await asyncio.to_thread(
        subprocess.run,
        [sys.executable, "-m", "bootimage_controller", "fleet", *map(str, trees), "--kubeconfig", str(configs),
         "--parallel", "8", "--timeout", "30s", "-o", "json", "--html", str(page)],
        capture_output=True, text=True, timeout=300, cwd=REPO, env={**os.environ, "NO_COLOR": "1"},
    )
    assert done.returncode == 1, done.stderr  # one cluster could not be read
    assert "clusters read" in done.stderr  # the progress line
    rows = {r["name"]: r for r in json.loads(done.stdout)["clusters"]}
    assert len(rows) == TREES + 4 + len(hosted.HOSTED)

    dead = rows["dead"]
    assert dead["error"] and dead["status"] == "error" and dead["pools"] == []
    assert next(r["name"] for r in json.loads(done.stdout)["clusters"]) == "dead"  # worst first

    now = datetime.now(UTC)
    assert (now - started).days == 0
    for tree in trees:
        agrees_with_plan(rows[tree.name], plan_json(str(tree)), now)
    for name, cluster in live.items():
        plan = await asyncio.to_thread(plan_json, "--from-cluster", "--kubeconfig", str(cluster.kubeconfig))
        agrees_with_plan(rows[name], plan, now)
        assert rows[name]["source"] == f"context {name} of {configs / f'{name}.yaml'}"

    for hc in hosted.HOSTED:
        row = rows[f"mgmt/{hosted.NAMESPACE}/{hc['metadata']['name']}"]
        assert row["managementCluster"] == "mgmt" and row["release"] == hc["status"]["version"]["desired"]["version"]
        for pool in row["nodePools"]:
            stream, arch, valid, missing = hosted.EXPECTED[pool["name"]]
            assert (pool["stream"], pool["architecture"], pool["validPlatformImage"], pool["missingPlatformImage"]) == (
                stream, arch, valid, missing), pool
            assert pool["action"] == ("noop" if valid else "error")
            assert pool["release"] == hc["status"]["version"]["desired"]["version"]
            if valid:  # the AMI HyperShift would boot, and its build's age
                assert pool["current"].startswith("ami-") and pool["current"] == pool["target"]
                assert pool["currentRelease"] and pool["bootImageAge"] is not None
            else:
                assert pool["current"] is None
    by_cluster = {r["name"]: len(r["nodePools"]) for r in rows.values() if r.get("nodePools") is not None}
    assert sum(by_cluster.values()) == len(hosted.POOLS) == 5
    assert rows["mgmt/clusters/gulf"]["status"] == "invalid-image"
    assert page.is_file() and "mgmt/clusters/gulf" in page.read_text()
