"""Leader election on a real coordination.k8s.io/v1 Lease: one leader, release, crash takeover."""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import AsyncIterator, Callable, Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from harness.cluster import TestCluster
from kubernetes_asyncio import client as k8s_client

from bootimage_controller.constants import LEASE_NAME, MCO_NAMESPACE
from bootimage_controller.kube.client import make_api_client
from bootimage_controller.kube.leader import LeaderElector

pytestmark = pytest.mark.integration

LEASE_DURATION = 3.0
RENEW_DEADLINE = 2.0
RETRY_PERIOD = 0.25
WAIT = 20.0


async def eventually(pred: Callable[[], bool], timeout: float = WAIT) -> None:
    async with asyncio.timeout(timeout):
        while not pred():
            await asyncio.sleep(0.02)


class Candidate:
    """One replica of the daemon: its own client, elector and run task."""

    def __init__(self, api: k8s_client.ApiClient, identity: str) -> None:
        self.elector = LeaderElector(
            api, identity, MCO_NAMESPACE, LEASE_DURATION, RENEW_DEADLINE, RETRY_PERIOD
        )
        self.started = 0
        self.stopped = 0
        self.task: asyncio.Task[None] | None = None

    async def _lead(self) -> None:
        self.started += 1
        await asyncio.Event().wait()

    async def _stop(self) -> None:
        self.stopped += 1

    def start(self) -> None:
        self.task = asyncio.create_task(self.elector.run(self._lead, self._stop))

    async def kill(self) -> None:
        """A crash: the task dies, nothing is released."""
        assert self.task is not None
        self.task.cancel()
        await asyncio.gather(self.task, return_exceptions=True)


@pytest.fixture
def tokyo_tz() -> Iterator[None]:
    """Lease times must be UTC even when the process' local time is not."""
    old = os.environ.get("TZ")
    os.environ["TZ"] = "Asia/Tokyo"
    time.tzset()
    yield
    if old is None:
        os.environ.pop("TZ", None)
    else:
        os.environ["TZ"] = old
    time.tzset()


@pytest.fixture
async def candidates(
    kube_cluster: TestCluster, kube_api: k8s_client.ApiClient, tokyo_tz: None
) -> AsyncIterator[tuple[Candidate, Candidate]]:
    clients = [await make_api_client(str(kube_cluster.kubeconfig)) for _ in range(2)]
    pair = (Candidate(clients[0], "replica-a"), Candidate(clients[1], "replica-b"))
    try:
        for c in pair:
            c.start()
        yield pair
    finally:
        for c in pair:
            if c.task is not None:
                c.task.cancel()
        await asyncio.gather(*(c.task for c in pair if c.task is not None), return_exceptions=True)
        for api in clients:
            await api.close()


async def read_lease(api: k8s_client.ApiClient) -> Any:
    return await k8s_client.CoordinationV1Api(api).read_namespaced_lease(LEASE_NAME, MCO_NAMESPACE)


def leader_and_follower(pair: tuple[Candidate, Candidate]) -> tuple[Candidate, Candidate]:
    a, b = pair
    return (a, b) if a.elector.is_leader else (b, a)


async def test_only_one_candidate_leads(
    candidates: tuple[Candidate, Candidate], kube_api: k8s_client.ApiClient
) -> None:
    a, b = candidates
    await eventually(lambda: a.elector.is_leader or b.elector.is_leader)
    leader, follower = leader_and_follower(candidates)
    first = await read_lease(kube_api)
    renewals = 0
    last_renew = first.spec.renew_time
    # Across several renewals of the Lease, exactly one candidate leads, and it is the holder.
    async with asyncio.timeout(WAIT):
        while renewals < 4:
            assert a.elector.is_leader + b.elector.is_leader == 1
            lease = await read_lease(kube_api)
            assert lease.spec.holder_identity == leader.elector.identity
            if lease.spec.renew_time != last_renew:
                renewals, last_renew = renewals + 1, lease.spec.renew_time
            await asyncio.sleep(RETRY_PERIOD / 2)
    assert (leader.started, follower.started) == (1, 0)
    assert follower.elector.leader == leader.elector.identity
    assert lease.spec.lease_duration_seconds == 3
    # Written in UTC although TZ=Asia/Tokyo (+9 h): within seconds of the real time.
    assert abs(lease.spec.renew_time - datetime.now(UTC)) < timedelta(seconds=30)


async def test_release_hands_over_at_once(
    candidates: tuple[Candidate, Candidate], kube_api: k8s_client.ApiClient
) -> None:
    a, b = candidates
    await eventually(lambda: a.elector.is_leader or b.elector.is_leader)
    leader, follower = leader_and_follower(candidates)
    assert await leader.elector.release()
    assert not leader.elector.is_leader and leader.stopped == 1
    # Without release the follower would wait the full 3 s lease; released, its next retry wins.
    await eventually(lambda: follower.elector.is_leader, timeout=LEASE_DURATION - 1.0)
    lease = await read_lease(kube_api)
    assert lease.spec.holder_identity == follower.elector.identity
    assert lease.spec.lease_transitions == 1


async def test_killed_leader_is_replaced_within_the_lease_duration(
    candidates: tuple[Candidate, Candidate], kube_api: k8s_client.ApiClient
) -> None:
    a, b = candidates
    await eventually(lambda: a.elector.is_leader or b.elector.is_leader)
    leader, follower = leader_and_follower(candidates)
    await leader.kill()
    killed_at = time.monotonic()
    lease = await read_lease(kube_api)
    assert lease.spec.holder_identity == leader.elector.identity, "a crash does not release the Lease"
    assert not follower.elector.is_leader
    # The follower saw the last renewal at most a retry period before the kill.
    await eventually(lambda: follower.elector.is_leader, timeout=LEASE_DURATION + 2 * RETRY_PERIOD + 2.0)
    assert time.monotonic() - killed_at >= LEASE_DURATION - 2 * RETRY_PERIOD, "took over a still-valid Lease"
    lease = await read_lease(kube_api)
    assert lease.spec.holder_identity == follower.elector.identity
