#!/usr/bin/env python3
"""`fleet --prometheus URL` over a real Prometheus holding N clusters (issue 33 item 7).

    python benchmarks/fleet_prometheus_bench.py                 # 10,000 clusters
    python benchmarks/fleet_prometheus_bench.py --clusters 1000

Prometheus (Debian's package, hack/install-prometheus.sh) scrapes N targets, each with its own
`cluster` label. Their bodies are the daemon's /metrics for 100 generated must-gather trees
(tests/fleet/test_fleet_prometheus.py builds them the same way), cycled: the queries and the
rows cost the same whatever the pools hold. Once every cluster's series are in, `fleet --prometheus
URL -o json` runs in its own process (benchmarks/daemon_child.py: peak RSS is its VmHWM) and its
time in the command, CPU and peak memory are printed. The Prometheus server's own cost is not counted.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))

from fleet.fleetgen import write_fleet  # noqa: E402
from fleet.test_fleet_prometheus import JOB, Targets, exposition, free_port, query  # noqa: E402

from bootimage_controller.observability import configure_logging  # noqa: E402

DISTINCT = 100


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--clusters", type=int, default=10_000)
    args = p.parse_args()
    configure_logging("sentences", "WARNING")
    prometheus = subprocess.run(["bash", str(REPO / "hack" / "install-prometheus.sh")], capture_output=True,
                                text=True, check=True).stdout.strip().splitlines()[-1]
    print(f"machine: {os.cpu_count()} CPUs, Python {sys.version.split()[0]}, load {os.getloadavg()[0]:.2f}")
    with tempfile.TemporaryDirectory(prefix="bootimage-fleet-prom-bench-") as tmp:
        work = Path(tmp)
        now = datetime.now(UTC)
        bodies = [exposition(tree, now) for tree in write_fleet(work / "trees", DISTINCT)]
        names = [f"cluster-{i:05d}" for i in range(args.clusters)]
        targets = Targets({name: bodies[i % DISTINCT] for i, name in enumerate(names)})
        static = [{"targets": [targets.address], "labels": {"cluster": n, "__metrics_path__": f"/{n}/metrics"}}
                  for n in names]
        config = work / "prometheus.yml"
        config.write_text(yaml.safe_dump({"global": {"scrape_interval": "30s", "scrape_timeout": "10s"},
                                          "scrape_configs": [{"job_name": JOB, "static_configs": static}]}))
        port = free_port()
        url = f"http://127.0.0.1:{port}"
        with (work / "prometheus.log").open("wb") as log:
            proc = subprocess.Popen([prometheus, f"--config.file={config}", f"--storage.tsdb.path={work / 'data'}",
                                     f"--web.listen-address=127.0.0.1:{port}"], stdout=log, stderr=subprocess.STDOUT)
            try:
                started = time.monotonic()
                while True:
                    try:
                        found = query(url, "count(bootimage_controller_skew_upgradeable)")
                    except OSError:
                        found = []
                    count = int(float(found[0]["value"][1])) if found else 0
                    if count >= args.clusters:
                        break
                    if time.monotonic() - started > 600:
                        raise SystemExit(f"only {count} of {args.clusters} clusters scraped after 600 s")
                    time.sleep(2)
                print(f"prometheus: {args.clusters} clusters scraped in {time.monotonic() - started:.0f} s")
                out = work / "fleet.json"
                began = time.monotonic()
                done = subprocess.run([sys.executable, str(REPO / "benchmarks" / "daemon_child.py"), str(out), "fleet",
                                       "--prometheus", url, "-o", "json"], capture_output=True,
                                      text=True, cwd=REPO, check=False)
                wall = time.monotonic() - began
            finally:
                proc.terminate()
                proc.wait(timeout=60)
                targets.server.shutdown()
        if done.returncode not in (0, 1):
            raise SystemExit(f"fleet failed ({done.returncode}): {done.stderr[-2000:]}")
        rows = json.loads(done.stdout)["clusters"]
        doc = json.loads(out.read_text())
        pools = sum(len(r["pools"]) for r in rows)
        print(f"fleet --prometheus: {len(rows)} clusters, {pools} pools; "
              f"{doc['main_finished'] - doc['main_started']:.1f} s in the command ({wall:.1f} s with start-up), "
              f"CPU {doc['cpu_seconds']:.1f} s, peak RSS {doc['vmhwm_kb'] / 1024:.0f} MiB")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
