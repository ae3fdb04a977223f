"""No write before the caches' first lists are answered (issue 36).

Since Kubernetes 1.31 the API server answers a list from its watch cache once that cache has caught
up with etcd. A write to another resource, such as the daemon's own Lease, leaves every other cache
behind until etcd's next progress notification, so each list sent after it waits about 100 ms. The
daemon therefore campaigns only once its caches have listed. The API server's audit log shows the
order: every list the daemon sent before its first write was answered before that write arrived.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from harness.cluster import ClusterFactory
from harness.objects import api_client_for, apply, machineset_from_fixture

from .daemon_helpers import WRITE_VERBS, audited_cluster, list_machinesets, start_daemon_process, wait_for
from .fleet import AWS_FIXTURE, base_cluster

pytestmark = [pytest.mark.integration, pytest.mark.heavy]

USER = "replica-a"


def at(stamp: str) -> float:
    return datetime.strptime(stamp, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=UTC).timestamp()


def requests_of(log: Path, user: str) -> list[dict[str, Any]]:
    """Each request `user` sent: verb, resource, when received and when answered."""
    by_id: dict[str, dict[str, Any]] = {}
    for line in log.read_text().splitlines():
        event = json.loads(line)
        if event["user"]["username"] != user:
            continue
        seen = by_id.setdefault(event["auditID"], {"verb": event["verb"], "resource": event.get("objectRef", {}).get("resource"),
                                                   "received": at(event["requestReceivedTimestamp"])})
        if event["stage"] == "ResponseComplete":
            seen["answered"] = at(event["stageTimestamp"])
    return sorted(by_id.values(), key=lambda r: r["received"])


@pytest.mark.parametrize("once", [False, True], ids=["continuous", "once"])
async def test_the_lease_is_written_only_after_every_first_list_is_answered(
    fresh_cluster: ClusterFactory, tmp_path: Path, once: bool
) -> None:
    cluster, audit_log = audited_cluster(fresh_cluster, tmp_path)
    async with await api_client_for(cluster.kubeconfig) as api:
        await base_cluster(api)
        for i in range(3):
            await apply(api, machineset_from_fixture(AWS_FIXTURE, f"worker-{i}"))
        log = tmp_path / "daemon.log"
        daemon = start_daemon_process(cluster.kubeconfig_for(USER), USER, log, *(["--once"] if once else []))
        try:
            async def patched() -> bool:
                return all("ownerReferences" in ms["metadata"] for ms in (await list_machinesets(api)).values())

            await wait_for(patched, 60, "the MachineSets claimed and patched")
        finally:
            if not once:
                daemon.terminate()
            assert daemon.wait(60) == 0 or not once, log.read_text()[-3000:]
    requests = requests_of(audit_log, USER)
    writes = [r for r in requests if r["verb"] in WRITE_VERBS]
    assert writes and writes[0]["resource"] == "leases", [(w["verb"], w["resource"]) for w in writes[:3]]
    first_write = writes[0]["received"]
    lists = [r for r in requests if r["verb"] == "list" and r["received"] < first_write]
    assert len(lists) >= 10, "the informers' lists are in the audit log"
    late = [(r["resource"], round(r.get("answered", float("inf")) - first_write, 3)) for r in lists
            if r.get("answered", float("inf")) > first_write]
    assert late == [], f"lists still in flight when the Lease was written (seconds after it): {late}"
