"""SIGTERM in the middle of a pass (issue 25, item 6): the pod exits 0 within 10 s.

Kubernetes gives a terminating pod 30 s by default, and a rolling update or a drain waits on it;
an operator that needs all of it (or more) delays every node drain of the cluster. The leader
stops taking keys, lets the reconciles in flight finish or abandons them (a JSON patch carries its
resourceVersion test, so an abandoned one either landed whole or not at all), writes its last
status and Events within what is left, releases the Lease so a follower takes over at once, and
exits 0. The keys it did not get to are the next leader's (it plans every MachineSet on start).
"""

from __future__ import annotations

import asyncio
import signal
import time
from pathlib import Path
from typing import Any

import pytest
from harness.cluster import TestCluster
from harness.objects import (
    apply,
    bootimages_configmap,
    cluster_version,
    infrastructure,
    kube_request,
    machine_configuration,
    machineset_from_fixture,
)

from bootimage_controller.constants import LEASE_NAME, MCO_NAMESPACE

from .daemon_helpers import list_machinesets, start_daemon_process, user_data_secret, wait_for

pytestmark = [pytest.mark.integration, pytest.mark.heavy]

LEASE_PATH = f"/apis/coordination.k8s.io/v1/namespaces/{MCO_NAMESPACE}/leases/{LEASE_NAME}"
FLEET = 120
AWS_422 = {"id": "ami-06a6b025350ff1e23"}


def ami(obj: dict[str, Any]) -> Any:
    return obj["spec"]["template"]["spec"]["providerSpec"]["value"]["ami"]


async def test_sigterm_mid_pass_exits_0_within_10s_with_the_lease_released(
    kube_cluster: TestCluster, kube_api: Any, tmp_path: Path
) -> None:
    for obj in (infrastructure("AWS"), cluster_version(), machine_configuration(),
                bootimages_configmap("coreos-bootimages-4.22-multistream.yaml"), user_data_secret()):
        await apply(kube_api, obj)
    await asyncio.gather(*(apply(kube_api, machineset_from_fixture("aws-x86_64-us-east-1a-4.16.yaml", f"pool-{i:03d}"))
                           for i in range(FLEET)))
    log = tmp_path / "daemon.log"
    # A slow client (5 requests/s) keeps the pass going for about half a minute: the signal lands mid-pass.
    daemon = start_daemon_process(kube_cluster.kubeconfig, "terminated", log, "--qps", "5", "--burst", "5")
    try:
        async def patched_some() -> bool:
            fleet = await list_machinesets(kube_api)
            return sum(ami(o) == AWS_422 for o in fleet.values()) >= 3

        await wait_for(patched_some, 60, "the pass to be under way")
        daemon.send_signal(signal.SIGTERM)
        signalled = time.monotonic()
        code = await asyncio.to_thread(daemon.wait, 15)
        took = time.monotonic() - signalled
    finally:
        if daemon.poll() is None:
            daemon.kill()
            daemon.wait()
    text = log.read_text()
    assert code == 0, text[-3000:]
    assert took <= 10.0, f"exited {took:.1f} s after SIGTERM"
    assert "Traceback" not in text, text[-3000:]
    fleet = await list_machinesets(kube_api)
    assert sum(ami(o) == AWS_422 for o in fleet.values()) < FLEET, "the signal landed mid-pass"
    lease = await kube_request(kube_api, "GET", LEASE_PATH)
    assert not lease["spec"].get("holderIdentity"), "the Lease is released for a follower to take over at once"
