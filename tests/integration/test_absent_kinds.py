"""A kind the cluster does not serve costs nothing while it is absent (issue 48, item 1).

On a real kube-apiserver without the Cluster API's CRDs and without the Proxy's, a settled daemon is
watched for five idle minutes through the API server's audit log: each absent kind costs at most
one request (its CRD's watch, re-opened every 10 minutes), where it used to be listed every ~30 s.
What only a Cluster API pool needs (its templates and Machines) is not asked about at all. Then
the Cluster API's MachineSet CRD is created: the daemon lists the kind within a minute.

Five minutes of waiting: it runs beside the suite (hack/test.sh), with the API server outage test.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import pytest
from harness.cluster import ClusterFactory
from harness.objects import api_client_for, apply, kube_request

from .daemon_helpers import audit_events, audited_cluster, start_daemon_process, wait_for
from .fleet import ami, aws_machinesets, base_cluster

pytestmark = pytest.mark.integration

USER = "replica-a"
IDLE = 300.0  # the window of the acceptance: at most one request per absent kind in 5 minutes
CRD_PATH = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
CAPI_GROUP = "cluster.x-k8s.io"
INFRA_GROUP = "infrastructure.cluster.x-k8s.io"
# Removed before the daemon starts: every Cluster API kind it could read, and the Proxy.
ABSENT = [f"{plural}.{CAPI_GROUP}" for plural in ("machinesets", "machinedeployments", "machines", "clusters")] + [
    f"{plural}.{INFRA_GROUP}" for plural in ("awsmachinetemplates", "awsmachines", "gcpmachinetemplates",
                                             "gcpmachines", "azuremachinetemplates", "azuremachines",
                                             "vspheremachinetemplates", "vspheremachines")] + [
    "proxies.config.openshift.io"]


# Read only once a Cluster API pool exists (daemon/caches.py): with none, never asked for at all.
ON_DEMAND = {f"machines.{CAPI_GROUP}"} | {name for name in ABSENT if name.endswith(INFRA_GROUP)}


def absent_kind_of(event: dict[str, Any]) -> str | None:
    """The absent kind a request was about (the kind itself, or its CRD by name), else None."""
    ref = event.get("objectRef") or {}
    if ref.get("resource") == "customresourcedefinitions":
        name = ref.get("name") or ""
        return name if name in ABSENT else None
    name = f"{ref.get('resource')}.{ref.get('apiGroup')}"
    return name if name in ABSENT else None


def served_list_after(log: Path, resource: str, group: str, since: float) -> bool:
    """A LIST of the kind the daemon sent after `since` and the server answered with 200."""
    return any(e["verb"] == "list" and (e.get("objectRef") or {}).get("resource") == resource
               and (e.get("objectRef") or {}).get("apiGroup") == group
               and (e.get("responseStatus") or {}).get("code") == 200
               for e in audit_events(log, USER, since, stage="ResponseComplete"))


async def test_an_absent_kind_costs_one_request_in_five_minutes_and_is_used_within_a_minute_of_its_crd(
    fresh_cluster: ClusterFactory, tmp_path: Path
) -> None:
    cluster, audit_log = audited_cluster(fresh_cluster, tmp_path)
    async with await api_client_for(cluster.kubeconfig) as api:
        capi_crd = await kube_request(api, "GET", f"{CRD_PATH}/machinesets.{CAPI_GROUP}")
        for name in ABSENT:
            await kube_request(api, "DELETE", f"{CRD_PATH}/{name}")

        async def gone() -> bool:
            listed = await kube_request(api, "GET", CRD_PATH)
            return not {c["metadata"]["name"] for c in listed["items"]} & set(ABSENT)

        await wait_for(gone, 60, "the Cluster API and Proxy CRDs deleted")
        await base_cluster(api)
        await aws_machinesets(api, ["w1"])
        began = time.time()
        daemon = start_daemon_process(cluster.kubeconfig_for(USER), USER, tmp_path / "daemon.log")
        try:
            async def settled() -> bool:
                ms = await kube_request(api, "GET", "/apis/machine.openshift.io/v1beta1/namespaces/"
                                        "openshift-machine-api/machinesets/w1")
                return ami(ms) != "ami-05483066c3caaccf5"

            await wait_for(settled, 90, "the MachineSet written: the daemon is up and settled")
            await asyncio.sleep(10)  # past its start-up reads
            start = time.time()
            await asyncio.sleep(IDLE)
            idle = audit_events(audit_log, USER, start, start + IDLE)
            per_kind: dict[str, int] = {}
            for event in idle:
                kind = absent_kind_of(event)
                if kind is not None:
                    per_kind[kind] = per_kind.get(kind, 0) + 1
            assert all(n <= 1 for n in per_kind.values()), per_kind
            # What only a Cluster API pool needs is not even watched for while there is none.
            asked = {absent_kind_of(e) for e in audit_events(audit_log, USER, began)} & ON_DEMAND
            assert not asked, f"asked about {sorted(asked)} without a Cluster API pool"
            assert daemon.poll() is None, (tmp_path / "daemon.log").read_text()[-3000:]

            # The Cluster API appears: its MachineSets are listed within a minute.
            created = time.time()
            crd = {k: v for k, v in capi_crd.items() if k != "status"}
            crd["metadata"] = {"name": capi_crd["metadata"]["name"]}
            await apply(api, crd)
            await wait_for(lambda: _true(served_list_after(audit_log, "machinesets", CAPI_GROUP, created)), 60,
                           "a successful LIST of machinesets.cluster.x-k8s.io after its CRD was created")
        finally:
            daemon.terminate()
            daemon.wait(timeout=30)


async def _true(value: bool) -> bool:
    return value
