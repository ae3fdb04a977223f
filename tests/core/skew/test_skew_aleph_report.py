"""The aleph-report node agent against an in-memory Node (the real API server test is integration)."""

from __future__ import annotations

import asyncio
import os
import signal
from collections.abc import Mapping
from pathlib import Path

import pytest
from kubernetes_asyncio.client.exceptions import ApiException

from bootimage_controller.commands.aleph_report import Outcome, RetryPolicy, report_once, run_aleph_report
from bootimage_controller.constants import ANNOTATION_ALEPH_VERSION

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "aleph"
RHCOS_96 = FIXTURES / "rhcos-osbuild-9.6.20251212-1.json"
NO_WAIT = RetryPolicy(attempts=4, base_delay=0.0, max_delay=0.0)


class FakeNodes:
    """A Node's annotations, with scripted failures for the next calls."""

    def __init__(self, annotations: dict[str, str] | None = None) -> None:
        self.annotations = dict(annotations or {})
        self.get_failures: list[Exception] = []
        self.set_failures: list[Exception] = []
        self.sets = 0

    async def get(self, node_name: str) -> Mapping[str, str]:
        assert node_name == "master-0"
        if self.get_failures:
            raise self.get_failures.pop(0)
        return dict(self.annotations)

    async def set(self, node_name: str, key: str, value: str) -> None:
        if self.set_failures:
            raise self.set_failures.pop(0)
        self.sets += 1
        self.annotations[key] = value


async def once(path: Path, nodes: FakeNodes) -> int:
    return await run_aleph_report("master-0", path, None, once=True, nodes=nodes, retry=NO_WAIT)


async def test_annotates_then_writes_nothing_when_current() -> None:
    nodes = FakeNodes({"other": "kept"})
    assert await once(RHCOS_96, nodes) == 0
    assert nodes.annotations == {"other": "kept", ANNOTATION_ALEPH_VERSION: "9.6.20251212-1"}
    assert await once(RHCOS_96, nodes) == 0
    assert nodes.sets == 1


@pytest.mark.parametrize(
    ("name", "build_id"),
    [
        ("rhcos-cosa-legacy-48.84.202109241901-0.json", "48.84.202109241901-0"),
        ("rhcos-osbuild-418.94.202511191518-0.json", "418.94.202511191518-0"),
        ("fcos-cosa-legacy-32.20201002.dev.2.json", "32.20201002.dev.2"),
        ("fcos-bootc-aleph-43.20260301.20.dev1.json", "43.20260301.20.dev1"),
    ],
)
async def test_each_format_is_reported(name: str, build_id: str) -> None:
    nodes = FakeNodes({ANNOTATION_ALEPH_VERSION: "9.6.20251212-1"})
    assert await once(FIXTURES / name, nodes) == 0
    assert nodes.annotations[ANNOTATION_ALEPH_VERSION] == build_id


async def test_garbage_leaves_the_annotation_alone_and_fails(tmp_path: Path) -> None:
    bad = tmp_path / ".coreos-aleph-version.json"
    bad.write_text('{"version": 42}')
    nodes = FakeNodes({ANNOTATION_ALEPH_VERSION: "9.6.20251212-1"})
    assert await once(bad, nodes) == 1
    assert nodes.annotations == {ANNOTATION_ALEPH_VERSION: "9.6.20251212-1"}
    # Also in the long-running mode: an aleph file does not heal by waiting.
    assert (
        await run_aleph_report("master-0", tmp_path, None, nodes=nodes, retry=NO_WAIT, handle_signals=False)
        == 1
    )
    assert nodes.sets == 0


async def test_transient_errors_and_conflicts_are_retried() -> None:
    nodes = FakeNodes()
    nodes.get_failures = [ApiException(status=503), ApiException(status=429)]
    nodes.set_failures = [ApiException(status=500), ApiException(status=409)]
    assert await report_once("master-0", RHCOS_96, nodes, NO_WAIT) is Outcome.ANNOTATED
    assert nodes.annotations[ANNOTATION_ALEPH_VERSION] == "9.6.20251212-1"


async def test_persistent_api_failure_is_reported_not_raised() -> None:
    nodes = FakeNodes()
    nodes.get_failures = [ApiException(status=404, reason="Not Found")]
    assert await report_once("master-0", RHCOS_96, nodes, NO_WAIT) is Outcome.API_FAILED
    nodes.set_failures = [ApiException(status=503)] * 4
    assert await once(RHCOS_96, nodes) == 1
    assert ANNOTATION_ALEPH_VERSION not in nodes.annotations


async def test_loop_restores_a_removed_annotation_and_stops_cleanly() -> None:
    nodes = FakeNodes()
    stop = asyncio.Event()
    task = asyncio.create_task(
        run_aleph_report(
            "master-0",
            RHCOS_96,
            None,
            interval=0.01,
            nodes=nodes,
            stop=stop,
            retry=NO_WAIT,
            handle_signals=False,
        )
    )
    for _ in range(500):
        await asyncio.sleep(0.002)
        if nodes.sets == 1:
            break
    nodes.annotations.pop(ANNOTATION_ALEPH_VERSION)  # someone removes it
    for _ in range(500):
        await asyncio.sleep(0.002)
        if nodes.sets == 2:
            break
    assert nodes.annotations[ANNOTATION_ALEPH_VERSION] == "9.6.20251212-1"
    stop.set()
    assert await asyncio.wait_for(task, timeout=5) == 0
    assert nodes.sets == 2


async def test_sigterm_ends_the_loop_with_exit_0() -> None:
    nodes = FakeNodes()
    task = asyncio.create_task(
        run_aleph_report("master-0", RHCOS_96, None, interval=3600, nodes=nodes, retry=NO_WAIT)
    )
    for _ in range(500):
        await asyncio.sleep(0.002)
        if nodes.sets == 1:
            break
    assert nodes.sets == 1  # the agent is in its loop, its handler installed
    os.kill(os.getpid(), signal.SIGTERM)
    assert await asyncio.wait_for(task, timeout=5) == 0


async def test_a_missing_node_name_is_a_usage_error() -> None:
    assert await run_aleph_report("", RHCOS_96, None, once=True, nodes=FakeNodes()) == 2
