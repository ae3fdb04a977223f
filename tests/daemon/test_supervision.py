"""Guarded root tasks: a task that ends unexpectedly is logged, fails /readyz, and fails the process."""

from __future__ import annotations

import asyncio

import aiohttp

from bootimage_controller.daemon.serving import HealthServer
from bootimage_controller.daemon.supervision import Supervisor


async def forever() -> None:
    await asyncio.Event().wait()


async def broken() -> None:
    await asyncio.sleep(0)
    raise RuntimeError("informer bug")


async def test_a_task_that_raises_fails_readiness_at_once() -> None:
    supervisor = Supervisor()
    health = HealthServer("127.0.0.1:0", "127.0.0.1:0", lambda: {"tasks": supervisor.healthy})
    await health.start()
    try:
        async with aiohttp.ClientSession() as http:
            url = f"http://127.0.0.1:{health.health_port}/readyz"
            async with http.get(url) as resp:
                assert resp.status == 200
            supervisor.spawn(broken(), "informer-machinesets")
            await asyncio.wait_for(supervisor.failed.wait(), 1.0)
            async with http.get(url) as resp:
                assert resp.status == 503
                assert "[-]tasks failed" in await resp.text()
        assert supervisor.failure == "informer-machinesets: RuntimeError: informer bug"
    finally:
        await health.stop()


async def test_returning_or_being_cancelled_is_a_failure_for_long_running_tasks_only() -> None:
    supervisor = Supervisor()
    supervisor.spawn(asyncio.sleep(0), "event-writer", finite=True)
    finite_cancelled = supervisor.spawn(forever(), "events-0", finite=True)
    await asyncio.sleep(0.01)
    finite_cancelled.cancel()
    await asyncio.sleep(0.01)
    assert supervisor.healthy, "a finite task may end or be cancelled"
    supervisor.spawn(asyncio.sleep(0), "informer-nodes")
    await asyncio.sleep(0.01)
    assert not supervisor.healthy and supervisor.failure == "informer-nodes: returned"


async def test_nothing_is_a_failure_once_stopping() -> None:
    supervisor = Supervisor()
    task = supervisor.spawn(forever(), "informer-holder")
    await asyncio.sleep(0)
    supervisor.stopping()
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    assert supervisor.healthy
