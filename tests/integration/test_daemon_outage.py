"""An API server outage shorter than the renew deadline, on a real kube-apiserver (issue 13
acceptance): the leader keeps its Lease, nobody takes over, and nothing is written twice, witnessed
by the API server's audit log. Its own file (from test_daemon_core.py): the 60 s outage alone is the
longest wait of the suite, and the suite's workers take a file at a time.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from harness.cluster import ClusterFactory
from harness.objects import api_client_for, apply, bootimages_configmap, kube_request
from kubernetes_asyncio.client.exceptions import ApiException

from .daemon_helpers import (
    audit_writes,
    audited_cluster,
    configmap_from_stream,
    start_daemon_process,
    wait_for,
)
from .test_daemon_core import AWS_416, AWS_422, GA_416, LEASE_PATH, NAMES, amis, mc_reconciled, setup

pytestmark = pytest.mark.integration

# ---- an API server outage shorter than the renew deadline -----------------------------------------

# library-go's defaults, spelled out: FAST_LEASE (the helpers' default) would hand over in seconds.
OPENSHIFT_LEASE = ("--leader-elect-lease-duration", "137s", "--leader-elect-renew-deadline", "107s",
                   "--leader-elect-retry-period", "26s")
OUTAGE = 60.0


def boot_image_patches(log: Path, user: str, since: float) -> dict[str, int]:
    """MachineSet PATCHes `user` sent after `since`, by MachineSet name."""
    out: dict[str, int] = {}
    for event in audit_writes(log, user, since):
        ref = event.get("objectRef") or {}
        if ref.get("resource") == "machinesets" and event["verb"] == "patch":
            out[ref["name"]] = out.get(ref["name"], 0) + 1
    return out


@pytest.mark.reliability
async def test_a_60s_api_server_outage_keeps_leadership_and_writes_nothing_twice(
    fresh_cluster: ClusterFactory, tmp_path: Path
) -> None:
    cluster, audit_log = audited_cluster(fresh_cluster, tmp_path)
    apiserver = cluster.pids["kube-apiserver"]
    async with await api_client_for(cluster.kubeconfig) as api:
        await setup(api, configmap_from_stream(GA_416, "4.16.0"))
        a = start_daemon_process(cluster.kubeconfig_for("replica-a"), "replica-a", tmp_path / "a.log", *OPENSHIFT_LEASE)
        b: subprocess.Popen[bytes] | None = None
        try:
            async def lease() -> dict[str, Any]:
                spec: dict[str, Any] = (await kube_request(api, "GET", LEASE_PATH))["spec"]
                return spec

            async def a_leads() -> bool:
                try:
                    return (await lease()).get("holderIdentity") == "replica-a" and await mc_reconciled(api)
                except ApiException:
                    return False

            await wait_for(a_leads, 40, "replica-a to lead")
            b = start_daemon_process(cluster.kubeconfig_for("replica-b"), "replica-b", tmp_path / "b.log", *OPENSHIFT_LEASE)
            started = time.time()
            before = await lease()
            # New golden data, and the API server stops answering right behind it: whatever the
            # daemon was doing with it (watch event, plan, patch in flight) straddles the outage.
            await apply(api, bootimages_configmap("coreos-bootimages-4.22-multistream.yaml"))
            os.kill(apiserver, signal.SIGSTOP)  # every request and watch hangs
            try:
                await asyncio.sleep(OUTAGE)
            finally:
                os.kill(apiserver, signal.SIGCONT)
            resumed = datetime.now(UTC)

            async def renewed_after_outage() -> bool:
                renew = datetime.strptime((await lease())["renewTime"], "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=UTC)
                return renew > resumed

            await wait_for(renewed_after_outage, 60, "replica-a to renew after the outage")
            await wait_for(lambda: _amis_are(api, AWS_422), 30, "replica-a to patch to 4.22")
            after = await lease()
            assert after["holderIdentity"] == "replica-a"
            assert after.get("leaseTransitions") == before.get("leaseTransitions"), "nobody took the Lease over"
            assert a.poll() is None and b.poll() is None, "neither replica exited"

            # Still leading, still working: new golden data is acted on by a, and only by a.
            await apply(api, configmap_from_stream(GA_416, "4.16.0"))
            await wait_for(lambda: _amis_are(api, AWS_416), 30, "replica-a to patch back to 4.16")
            await asyncio.sleep(1.0)  # the audit log is written asynchronously
            assert boot_image_patches(audit_log, "replica-a", started) == dict.fromkeys(NAMES, 2), (
                "one patch per MachineSet per golden change: nothing written twice across the outage"
            )
            assert audit_writes(audit_log, "replica-b", started) == []
            assert "leadership lost" not in (tmp_path / "a.log").read_text()
        finally:
            os.kill(apiserver, signal.SIGCONT)
            for proc in (a, b):
                if proc is not None and proc.poll() is None:
                    proc.kill()
                    proc.wait(10)


async def _amis_are(api: Any, expected: dict[str, str]) -> bool:
    return await amis(api) == dict.fromkeys(NAMES, expected)
