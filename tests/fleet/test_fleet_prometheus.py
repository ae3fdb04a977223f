"""`fleet --prometheus URL` against a real Prometheus server (issue 33 item 7).

60 generated clusters, each exported as its daemon exports it (the daemon's own `pool_boot_image` and
`PoolCollector`, and the skew series the reporter sets from the verdict), served over HTTP to a real
Prometheus (Debian's package, hack/install-prometheus.sh) that scrapes each with its own `cluster`
label. The rows `fleet --prometheus` prints must equal those of `fleet` reading the same trees
directly, for every field the metrics carry. One more target is down (`up == 0`) and one stops
reporting (its series go stale): both are rows with that error.
"""

from __future__ import annotations

import json
import re
import socket
import subprocess
import sys
import threading
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import yaml
from harness.cluster import free_port
from harness.tools import tool
from prometheus_client import CollectorRegistry, Gauge, Info, generate_latest

from bootimage_controller.constants import (
    ANNOTATION_BOOT_IMAGE_VERIFIED,
    METRIC_BOOT_IMAGE_VERIFIED,
    METRIC_CLUSTER_BOOT_IMAGE,
    METRIC_SKEW_NONE,
    METRIC_SKEW_UPGRADEABLE,
    Action,
    Platform,
    SkewMode,
)
from bootimage_controller.core.model import BootImageDecision, image_label
from bootimage_controller.core.skew.verdict import SkewLimits
from bootimage_controller.core.verification import BootVerdict, Verdict, VerificationOutcome
from bootimage_controller.fleet.prometheus import PrometheusSource
from bootimage_controller.observability import PoolCollector
from bootimage_controller.plan.inputs import classify, evaluate_plan_skew, load_paths, prepare, run_planner
from bootimage_controller.reconcile.reporting import boot_image_verified_value, pool_boot_image
from bootimage_controller.reconcile.state import MachineSetState

from .fleetgen import write_fleet

REPO = Path(__file__).resolve().parents[2]
CLUSTERS = 60
JOB = "bootimage-controller-metrics"
POOL_FIELDS = ("namespace", "name", "kind", "stream", "architecture", "manager", "currentRelease", "targetRelease")


def exposition(tree: Path, now: datetime) -> bytes:
    """What this cluster's daemon serves on /metrics: its pools, and the skew series of its verdict."""
    prepared = prepare(classify(load_paths([tree])))
    decisions = run_planner(prepared)
    verdict = evaluate_plan_skew(prepared, decisions, SkewLimits()).verdict
    registry = CollectorRegistry()
    collector = PoolCollector()
    pools = [pool_boot_image(MachineSetState(d), now) for d in decisions if d.action is not Action.ERROR]
    collector.show(lambda: pools)
    registry.register(collector)
    verified = Gauge(METRIC_BOOT_IMAGE_VERIFIED, "", ["namespace", "name", "kind"], registry=registry)
    for d in decisions:
        value = boot_image_verified_value(judged(d))
        if value is not None:
            verified.labels(namespace=d.namespace, name=d.name, kind=d.kind).set(value)
    Gauge(METRIC_SKEW_UPGRADEABLE, "", registry=registry).set(1 if verdict.upgradeable else 0)
    Gauge(METRIC_SKEW_NONE, "", registry=registry).set(1 if verdict.mode is SkewMode.NONE else 0)
    if verdict.cluster_boot_image is not None:
        Info(METRIC_CLUSTER_BOOT_IMAGE, "", registry=registry).info(
            {"release": verdict.cluster_boot_image.value, "source": str(verdict.cluster_boot_image.source)})
    return generate_latest(registry)


def judged(d: BootImageDecision) -> MachineSetState:
    """The outcome the daemon reaches for a MachineSet whose Machines are all gone: the recorded
    verdict stands (a pool at zero keeps what its last Machine proved). Judged as the daemon judges:
    Machine API MachineSets whose image is known, not vSphere (`BootVerification.applies_to`)."""
    if d.kind != "MachineSet" or d.platform == Platform.VSPHERE or d.current is None:
        return MachineSetState(d)
    recorded = BootVerdict.from_annotations({ANNOTATION_BOOT_IMAGE_VERIFIED: json.dumps(d.verified)}) \
        if d.verified is not None else None
    verdict = recorded or BootVerdict(Verdict.UNVERIFIED, image_label(d.current))
    return MachineSetState(d, verification=VerificationOutcome(verdict, recorded, d.manager))


class Targets:
    """One HTTP server for every cluster's /metrics; a cluster in `silenced` serves nothing."""

    def __init__(self, bodies: dict[str, bytes]) -> None:
        self.bodies = bodies
        self.silenced: set[str] = set()
        targets = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                name = self.path.strip("/").split("/")[0]
                body = b"" if name in targets.silenced else targets.bodies.get(name, b"")
                self.send_response(200 if name in targets.bodies else 404)
                self.send_header("Content-Type", "text/plain; version=0.0.4")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.server.server_address[1]}"


def query(url: str, promql: str) -> list[dict[str, Any]]:
    with urllib.request.urlopen(f"{url}/api/v1/query?{urllib.parse.urlencode({'query': promql})}", timeout=10) as r:
        result: list[dict[str, Any]] = json.load(r)["data"]["result"]
        return result


def wait_until(what: str, check: Any, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if check():
                return
        except OSError:
            pass
        time.sleep(0.5)
    raise AssertionError(f"timed out waiting for {what}")


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, list[Path], Targets]]:
    prometheus = tool("install-prometheus.sh", names=("prometheus",))
    work = tmp_path_factory.mktemp("prometheus-fleet")
    trees = write_fleet(work / "trees", CLUSTERS)
    now = datetime.now(UTC)
    targets = Targets({tree.name: exposition(tree, now) for tree in trees} | {"stale-cluster": exposition(trees[0], now)})
    static = [{"targets": [targets.address], "labels": {"cluster": name, "__metrics_path__": f"/{name}/metrics"}}
              for name in targets.bodies]
    # A port bound and never listened on: refused for as long as the fleet lives, and no other test
    # (in this worker or the other) can start a server there and bring the "down" cluster up.
    down = socket.socket()
    down.bind(("127.0.0.1", 0))
    static.append({"targets": [f"127.0.0.1:{down.getsockname()[1]}"], "labels": {"cluster": "down-cluster"}})
    config = work / "prometheus.yml"
    config.write_text(yaml.safe_dump({"global": {"scrape_interval": "1s", "scrape_timeout": "1s"},
                                      "scrape_configs": [{"job_name": JOB, "static_configs": static}]}))
    port = free_port()
    log = (work / "prometheus.log").open("wb")
    proc = subprocess.Popen([prometheus, f"--config.file={config}", f"--storage.tsdb.path={work / 'data'}",
                             f"--web.listen-address=127.0.0.1:{port}"], stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_until("every target scraped", lambda: len(query(url, f"{METRIC_SKEW_UPGRADEABLE}")) == CLUSTERS + 1
                   and len(query(url, f'up{{job="{JOB}"}} == 0')) == 1)
        targets.silenced.add("stale-cluster")  # its next scrape has no series: Prometheus marks them stale
        wait_until("the silenced cluster's series to go stale",
                   lambda: len(query(url, METRIC_SKEW_UPGRADEABLE)) == CLUSTERS)
        yield url, trees, targets
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        targets.server.shutdown()
        down.close()
        log.close()


def fleet_json(*argv: str) -> tuple[int, dict[str, Any]]:
    done = subprocess.run([sys.executable, "-m", "bootimage_controller", "fleet", *argv, "-o", "json"],
                          capture_output=True, text=True, timeout=300, cwd=REPO, check=False)
    assert "Traceback" not in done.stderr, done.stderr
    return done.returncode, json.loads(done.stdout)


def test_the_rows_from_prometheus_equal_the_direct_read(fleet: tuple[str, list[Path], Targets]) -> None:
    url, trees, _ = fleet
    code, from_metrics = fleet_json("--prometheus", url)
    assert code == 1  # the down and the stale cluster are rows in error
    _, direct = fleet_json(*map(str, trees))
    rows = {c["name"]: c for c in from_metrics["clusters"]}
    assert len(rows) == CLUSTERS + 2
    assert len(direct["clusters"]) == CLUSTERS and sum(len(c["pools"]) for c in direct["clusters"]) > CLUSTERS
    for cluster in direct["clusters"]:
        got = rows[cluster["name"]]
        assert got["error"] is None, got
        assert got["skew"]["upgradeable"] == cluster["skew"]["upgradeable"], cluster["name"]
        assert got["skew"]["clusterBootImage"] == cluster["skew"]["clusterBootImage"], cluster["name"]
        expected = sorted(tuple(p[f] for f in POOL_FIELDS) for p in cluster["pools"] if p["action"] != "error")
        assert sorted(tuple(p[f] for f in POOL_FIELDS) for p in got["pools"]) == expected, cluster["name"]
        ages = {p["name"]: p["bootImageAge"] for p in cluster["pools"]}
        for p in got["pools"]:  # days, computed at scrape time and at read time: a midnight may pass
            assert p["bootImageAge"] is None if ages[p["name"]] is None else abs(p["bootImageAge"] - ages[p["name"]]) <= 1
            assert (p["action"], p["reason"]) == (None, None)  # the metrics carry no decision
        # The boot verdict of each pool, and the cluster's oldest unproven image (SPEC section 3b).
        verdicts = {p["name"]: p["verified"]["verdict"] for p in cluster["pools"] if p["action"] != "error"}
        assert {p["name"]: p["verified"]["verdict"] for p in got["pools"]} == verdicts, cluster["name"]
        oldest = cluster["oldestUnverified"]
        if oldest is not None and oldest["name"] in verdicts:
            assert got["oldestUnverified"]["name"] == oldest["name"], cluster["name"]
    assert "up == 0" in rows["down-cluster"]["error"]
    assert "went stale" in rows["stale-cluster"]["error"]
    every = [p["verified"]["verdict"] for c in from_metrics["clusters"] for p in c["pools"]]
    assert {"verified", "failed", "unverified"} <= set(every), "the generated fleet should have every verdict"
    held = [c["name"] for c in direct["clusters"] if c["skew"]["upgradeable"] is False]
    assert held, "the generated fleet should hold some upgrades"
    assert {c["name"] for c in from_metrics["clusters"] if c["status"] == "held"} == set(held)


def test_errors_name_the_prometheus_url(fleet: tuple[str, list[Path], Targets], tmp_path: Path) -> None:
    url, _, _ = fleet
    done = subprocess.run([sys.executable, "-m", "bootimage_controller", "fleet", "--prometheus", f"{url}/nothing-here"],
                          capture_output=True, text=True, timeout=60, cwd=REPO, check=False)
    assert done.returncode == 1
    assert f"{url}/nothing-here" in done.stderr and "HTTP 404" in done.stderr
    done = subprocess.run([sys.executable, "-m", "bootimage_controller", "fleet", "--prometheus", url,
                           "--bearer-token-file", str(tmp_path / "no-token")],
                          capture_output=True, text=True, timeout=60, cwd=REPO, check=False)
    assert done.returncode == 1 and "--bearer-token-file" in done.stderr and "Traceback" not in done.stderr


def test_every_series_fleet_queries_is_sent_to_the_acm_hub() -> None:
    """ACM Observability forwards only allow-listed names: fleet --prometheus on the hub needs them all."""
    doc = yaml.safe_load((REPO / "manifests" / "optional" / "acm-metrics-allowlist.yaml").read_text())
    allowed = set(yaml.safe_load(doc["data"]["metrics_list.yaml"])["names"]) | {"up"}  # `up`: ACM's default list
    queried = {m for q in PrometheusSource("http://x").queries().values()
               for m in re.findall(r"\b(bootimage_controller_[a-z_]+|up)\b", q)}
    assert queried and queried <= allowed, queried - allowed
