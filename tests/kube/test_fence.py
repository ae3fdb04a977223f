"""The write fence: checked inside the API client, after the rate limiter, right before the send.

A real HTTP server records what reaches it: a refused write must never arrive.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest
from aiohttp import web
from harness.fake_http import serving
from kubernetes_asyncio.client import Configuration, CoordinationV1Api, CoreV1Api

from bootimage_controller.constants import JSON_PATCH
from bootimage_controller.kube.client import InstrumentedApiClient, object_path, write_and_discard
from bootimage_controller.kube.fence import (
    NotLeader,
    UpgradeGateClosed,
    WriteFence,
    WriteRefused,
    write_preconditions,
)


class Recorder:
    def __init__(self) -> None:
        self.requests: list[tuple[str, str]] = []
        self.created: list[str] = []  # names of the objects POSTed


@pytest.fixture
async def server() -> AsyncIterator[tuple[str, Recorder]]:
    seen = Recorder()

    async def anything(request: web.Request) -> web.Response:
        seen.requests.append((request.method, request.path))
        name = request.path.rsplit("/", 1)[-1]
        if request.method == "POST":
            name = (await request.json())["metadata"]["name"]
            seen.created.append(name)
        return web.json_response({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}})

    async with serving(anything) as url:
        yield url, seen


class Leadership:
    def __init__(self) -> None:
        self.leading = True

    def refusal(self) -> NotLeader | None:
        return None if self.leading else NotLeader("lease lost")


def configmap(name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}}


async def test_writes_wait_for_leadership_reads_do_not(server: tuple[str, Recorder]) -> None:
    url, seen = server
    leadership = Leadership()
    api = InstrumentedApiClient(Configuration(host=url), fence=WriteFence(leadership.refusal))
    core = CoreV1Api(api)
    try:
        await core.create_namespaced_config_map("ns", configmap("a"))
        leadership.leading = False
        await core.read_namespaced_config_map("a", "ns")  # reads are never fenced
        for write in (
            core.create_namespaced_config_map("ns", configmap("b")),
            core.patch_namespaced_config_map("a", "ns", [{"op": "add", "path": "/data", "value": {}}]),
            core.replace_namespaced_config_map("a", "ns", configmap("a")),
            core.delete_namespaced_config_map("a", "ns"),
            write_and_discard(api, "PATCH", object_path("", "v1", "ns", "configmaps", "a"), [], JSON_PATCH),
        ):
            with pytest.raises(NotLeader, match="lease lost"):
                await write
        assert seen.requests == [
            ("POST", "/api/v1/namespaces/ns/configmaps"),
            ("GET", "/api/v1/namespaces/ns/configmaps/a"),
        ], "no refused write reached the server"
    finally:
        await api.close()


async def test_lease_writes_are_not_fenced(server: tuple[str, Recorder]) -> None:
    """Leader election's own writes are how leadership is won: fencing them would deadlock."""
    url, seen = server
    api = InstrumentedApiClient(Configuration(host=url), fence=WriteFence(lambda: NotLeader("no")))
    try:
        body = {"metadata": {"name": "l"}, "spec": {"holderIdentity": "me"}}
        await CoordinationV1Api(api).replace_namespaced_lease("l", "ns", body, _preload_content=False)
        assert seen.requests == [("PUT", "/apis/coordination.k8s.io/v1/namespaces/ns/leases/l")]
    finally:
        await api.close()


async def test_the_check_runs_after_the_rate_limiter_wait(server: tuple[str, Recorder]) -> None:
    """Leadership lost while a write waits for its token: the write is not sent."""
    url, seen = server
    leadership = Leadership()

    class SlowBucket:
        async def acquire(self) -> None:
            await asyncio.sleep(0)
            leadership.leading = False  # lost while we waited

    api = InstrumentedApiClient(Configuration(host=url), SlowBucket(), WriteFence(leadership.refusal))  # type: ignore[arg-type]
    try:
        with pytest.raises(NotLeader):
            await CoreV1Api(api).create_namespaced_config_map("ns", configmap("x"))
        assert seen.requests == []
    finally:
        await api.close()


async def test_preconditions_apply_only_inside_their_block_and_task(server: tuple[str, Recorder]) -> None:
    url, seen = server
    api = InstrumentedApiClient(Configuration(host=url))
    core = CoreV1Api(api)
    gate_open = asyncio.Event()

    def gate() -> WriteRefused | None:
        return None if gate_open.is_set() else UpgradeGateClosed("ClusterVersion is Partial")

    async def gated_write() -> None:
        with write_preconditions(gate):
            await core.create_namespaced_config_map("ns", configmap("gated"))

    try:
        with pytest.raises(UpgradeGateClosed, match="Partial"):
            await gated_write()
        # Another task, not inside the block: unaffected at the same moment.
        other = asyncio.create_task(core.create_namespaced_config_map("ns", configmap("other")))
        await other
        await core.create_namespaced_config_map("ns", configmap("after"))  # the block has ended
        gate_open.set()
        await gated_write()
        assert seen.created == ["other", "after", "gated"], "only the gated write made while closed was held back"
    finally:
        await api.close()
