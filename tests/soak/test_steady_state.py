"""A settled fleet with a leader writes nothing for 6 minutes (issue 25, item 6), and asks nothing
but its Lease (issue 48, item 2: the resync costs no API request).

Everything periodic gets its turn in the window: Lease renewals (the only writes allowed), two
resyncs that plan every MachineSet again (`--resync-period 2m`), credential and vCenter re-reads,
the status reporter at every status key. The witness is the API server's audit log: a write of any
kind by the daemon's user, to any object but its Lease, fails the test; so does any other request
(its watches were opened before the window and last 10 to 12 minutes).

It waits more than it works, so `hack/test.sh` runs it beside the rest of the suite, in a pytest
process (and a control plane) of its own: `pytest --soak tests/soak`.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import pytest
from harness.cluster import ClusterFactory
from harness.objects import (
    api_client_for,
    apply,
    bootimages_configmap,
    cluster_version,
    infrastructure,
    kube_request,
    machine_configuration,
    machineset_from_fixture,
)
from integration.daemon_helpers import (
    FAST_LEASE,
    audit_events,
    audit_writes,
    audited_cluster,
    list_machinesets,
    start_daemon_process,
    user_data_secret,
    wait_for,
)

from bootimage_controller.constants import LEASE_NAME, MCO_NAMESPACE

pytestmark = [pytest.mark.integration, pytest.mark.soak]

WINDOW = 360.0
FLEET = 30
TARGET = {"id": "ami-06a6b025350ff1e23"}  # the 4.22 multistream AMI in us-east-1
MC_PATH = "/apis/operator.openshift.io/v1/machineconfigurations/cluster"


def but_the_lease(events: list[dict[str, Any]]) -> list[tuple[str, str, str]]:
    """(verb, resource, name) of every request in `events` but to the daemon's Lease."""
    out = []
    for event in events:
        ref = event.get("objectRef") or {}
        if not (ref.get("resource") == "leases" and ref.get("name") == LEASE_NAME):
            out.append((event["verb"], str(ref.get("resource")), str(ref.get("name"))))
    return out


async def test_a_settled_fleet_writes_nothing_for_six_minutes(fresh_cluster: ClusterFactory, tmp_path: Path) -> None:
    cluster, audit = audited_cluster(fresh_cluster, tmp_path)
    async with await api_client_for(cluster.kubeconfig) as api:
        for obj in (infrastructure("AWS"), cluster_version(), machine_configuration(),
                    bootimages_configmap("coreos-bootimages-4.22-multistream.yaml"), user_data_secret()):
            await apply(api, obj)
        for i in range(FLEET):
            await apply(api, machineset_from_fixture("aws-x86_64-us-east-1a-4.16.yaml", f"pool-{i:02d}"))
        daemon = start_daemon_process(cluster.kubeconfig_for("replica-a"), "steady", tmp_path / "daemon.log",
                                      *FAST_LEASE, "--resync-period", "2m")
        try:
            async def settled() -> bool:
                fleet = await list_machinesets(api)
                if any(o["spec"]["template"]["spec"]["providerSpec"]["value"]["ami"] != TARGET for o in fleet.values()):
                    return False
                mc = await kube_request(api, "GET", MC_PATH)
                progressing = [c for c in mc.get("status", {}).get("conditions", [])
                               if c["type"] == "BootImageUpdateProgressing"]
                return bool(progressing) and progressing[0]["status"] == "False"

            await wait_for(settled, 90, "the fleet to settle")
            await asyncio.sleep(10.0)  # the last batched status write and Events
            since = time.time()
            await asyncio.sleep(WINDOW)
            assert daemon.poll() is None, (tmp_path / "daemon.log").read_text()[-3000:]
            lease = await kube_request(api, "GET", f"/apis/coordination.k8s.io/v1/namespaces/{MCO_NAMESPACE}/leases/{LEASE_NAME}")
            assert lease["spec"].get("holderIdentity") == "steady", "the daemon led through the window"
            await asyncio.sleep(1.0)  # the audit log is written asynchronously
            found = but_the_lease(audit_writes(audit, "replica-a", since))
            renewals = [line for line in audit.read_text().splitlines() if '"leases"' in line and '"update"' in line]
            assert renewals, "the witness sees the Lease renewals: the log is live"
            assert found == [], found
            asked = but_the_lease(audit_events(audit, "replica-a", since))
            assert asked == [], f"two resyncs and every periodic task cost no API request: {asked}"
        finally:
            daemon.terminate()
            await asyncio.to_thread(daemon.wait, 15)
