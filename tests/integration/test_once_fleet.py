"""`run --once` on 400 stale MachineSets at the default `--qps` (issue 13 acceptance).

Every MachineSet is patched, and every `BootImageUpdated` Event is either written on its MachineSet
or folded into the summary Event on the claim holder; none is dropped at exit, and the exit log
says how many were folded. The old `--once` spent its 30 s event budget and dropped 392 of 1,000.
400 is enough to fold (more Events than the pass can write); the 1,000-MachineSet figure, with the
same check (0 dropped), is in `benchmarks/daemon_bench.py`: at 1,000 this test took 75-90 s of a
suite that must stay under 10 minutes on 2 cores.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from typing import Any

import pytest
from harness.cluster import TestCluster
from harness.objects import apply, kube_request, machineset_from_fixture

from bootimage_controller.constants import CLAIM_HOLDER_NAME, EVENT_UPDATED, MAPI_NAMESPACE, MCO_NAMESPACE

from .daemon_helpers import REPO
from .fleet import AWS_422, AWS_FIXTURE, ami, base_cluster, machinesets

pytestmark = [pytest.mark.integration, pytest.mark.heavy]

FLEET = 400
EVENTS_PATH = f"/api/v1/namespaces/{MAPI_NAMESPACE}/events"


async def create_fleet(api: Any, n: int) -> None:
    gate = asyncio.Semaphore(16)

    async def one(i: int) -> None:
        ms = machineset_from_fixture(AWS_FIXTURE, f"fleet-{i:04d}")
        ms.pop("status", None)  # one request each, not three (create, read, status): nothing here reads it
        async with gate:
            await apply(api, ms)

    await asyncio.gather(*(one(i) for i in range(n)))


def log_lines(text: str) -> list[dict[str, Any]]:
    out = []
    for line in text.splitlines():
        try:
            out.append(json.loads(line))
        except ValueError:
            continue
    return out


async def test_once_on_400_stale_machinesets_writes_or_folds_every_event(
    kube_cluster: TestCluster, kube_api: Any
) -> None:
    await base_cluster(kube_api)
    await create_fleet(kube_api, FLEET)
    env = {**os.environ, "POD_NAME": "once", "POD_NAMESPACE": MCO_NAMESPACE}
    argv = [sys.executable, "-m", "bootimage_controller", "run", "--once", "--no-leader-elect",
            "--kubeconfig", str(kube_cluster.kubeconfig), "--health-addr", "127.0.0.1:0",
            "--metrics-addr", "127.0.0.1:0", "--log-format", "json"]  # the default --qps
    done = await asyncio.to_thread(
        subprocess.run, argv, env=env, cwd=REPO, capture_output=True, text=True, timeout=400, check=False
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "Traceback" not in done.stderr
    fleet = await machinesets(kube_api)
    assert {ami(obj) for obj in fleet.values()} == {AWS_422}

    logs = log_lines(done.stdout + done.stderr)
    assert not [e for e in logs if e.get("event", "").startswith("events dropped")]
    flushed = [e for e in logs if e.get("event") == "events flushed"]
    assert flushed and flushed[-1]["dropped"] == 0, flushed
    folded = flushed[-1]["folded_into_summaries"]

    events = (await kube_request(kube_api, "GET", EVENTS_PATH))["items"]
    updated = [e for e in events if e["reason"] == EVENT_UPDATED]
    on_machinesets = {e["involvedObject"]["name"] for e in updated if e["involvedObject"]["kind"] == "MachineSet"}
    summaries = [e for e in updated if e["involvedObject"]["name"] == CLAIM_HOLDER_NAME]
    named_in_summaries = {name for name in fleet if any(name in s["message"] for s in summaries)}
    assert folded == FLEET - len(on_machinesets) and folded > 0
    assert len(summaries) == 1
    assert summaries[0]["message"].startswith(f"{EVENT_UPDATED} for {folded} more MachineSets")
    # Every MachineSet accounted for: its own Event, or counted in the summary (which lists 20 names).
    assert len(on_machinesets) + folded == FLEET
    assert len(named_in_summaries) == 20 and not (named_in_summaries & on_machinesets)
