"""`bootimage-controller aleph-report`: the node agent (SPEC section 5).

Runs as a DaemonSet on control-plane nodes. It reads the node's aleph file (the build id of the boot
image the node was installed from) and keeps its own Node annotated with
`machineconfiguration.openshift.io/aleph-version: <build id>`. The skew check reads the oldest of
these as the install-time boot image, which MachineSets that were never updated still boot.

Behaviour:

- The annotation is written with a JSON merge patch of that one key, only when it differs from the
  value on the Node (steady state writes nothing).
- An aleph file that is missing or garbage: one structured error line naming the file and field,
  the annotation is left alone (a wrong value is worse than none) and the command exits 1. The file
  is written once when the disk image is built, so waiting would not fix it; a crash-looping pod is
  how Kubernetes shows an administrator that this node's agent cannot do its job.
- Transient API errors (429, 5xx, broken connections) are retried with capped exponential backoff
  (`kube.retry.with_retries`); a 409 Conflict re-reads the Node and compares again.
- A DaemonSet pod must keep running: after reporting, the command re-checks every `interval`
  seconds (flag `--interval`, default 600), re-reading the file and restoring the annotation if
  someone removed or changed it. API failures that outlast the retries are logged and tried again at
  the next check. SIGTERM or SIGINT end the loop and the command exits 0. With `once=True` (flag
  `--once`) it reports once and exits: 0 on success, 1 on any failure.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
from collections.abc import Awaitable, Callable, Iterator, Mapping
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Any, Protocol

import structlog

from ..constants import ANNOTATION_ALEPH_VERSION, DEFAULT_ALEPH_REPORT_INTERVAL, MERGE_PATCH
from ..core.skew.aleph import AlephInfo
from ..errors import AlephError
from ..kube.api_errors import ApiError
from ..kube.core_api import CoreApi
from ..kube.retry import CONNECTION_ERRORS, api_call, describe, retry_on_conflict
from .aleph_file import read_aleph

log = structlog.get_logger(__name__)

# How many times a 409 Conflict sends us back to re-read the Node before giving up for this check.
CONFLICT_ATTEMPTS = 3

Sleep = Callable[[float], Awaitable[None]]
# Failures that end one check (after retries) without ending the agent.
_API_FAILURES: tuple[type[BaseException], ...] = (ApiError, *CONNECTION_ERRORS)


class NodeAnnotations(Protocol):
    """The two Node operations the agent needs (a seam for tests)."""

    async def get(self, node_name: str) -> Mapping[str, str]: ...

    async def set(self, node_name: str, key: str, value: str) -> None: ...


class KubeNodeAnnotations:
    """`NodeAnnotations` over the Kubernetes API."""

    def __init__(self, api_client: Any) -> None:
        self._core = CoreApi(api_client)

    async def get(self, node_name: str) -> Mapping[str, str]:
        node = await self._core.read_node(node_name)
        return dict(node.metadata.annotations or {})

    async def set(self, node_name: str, key: str, value: str) -> None:
        # A dict body would go out as strategic-merge-patch by default; say merge patch explicitly.
        body = {"metadata": {"annotations": {key: value}}}
        await self._core.patch_node(node_name, body, _content_type=MERGE_PATCH)


@dataclass(frozen=True)
class RetryPolicy:
    attempts: int = 5
    base_delay: float = 1.0
    max_delay: float = 30.0


class Outcome(StrEnum):
    ANNOTATED = "annotated"
    UNCHANGED = "unchanged"
    INVALID_ALEPH = "invalid-aleph"
    API_FAILED = "api-failed"


async def report_once(
    node_name: str,
    aleph_path: Path,
    nodes: NodeAnnotations,
    retry: RetryPolicy = RetryPolicy(),
    sleep: Sleep = asyncio.sleep,
) -> Outcome:
    """Read the aleph and bring the Node's annotation in line with it, once."""
    try:
        aleph = read_aleph(aleph_path)
    except AlephError as exc:
        log.error(
            "aleph_invalid",
            node=node_name,
            file=exc.obj,
            field=exc.field,
            problem=exc.problem,
            annotation=ANNOTATION_ALEPH_VERSION,
            action="annotation left unchanged",
        )
        return Outcome.INVALID_ALEPH
    try:
        return await _sync_annotation(node_name, aleph, nodes, retry, sleep)
    except _API_FAILURES as exc:
        log.error("node_annotation_failed", node=node_name, error=describe(exc), build_id=aleph.build_id)
        return Outcome.API_FAILED


async def _sync_annotation(
    node_name: str, aleph: AlephInfo, nodes: NodeAnnotations, retry: RetryPolicy, sleep: Sleep
) -> Outcome:
    def retried(fn: Callable[[], Awaitable[Any]], what: str) -> Awaitable[Any]:
        return api_call(
            fn, what=what, attempts=retry.attempts, base_delay=retry.base_delay, max_delay=retry.max_delay, sleep=sleep
        )

    async def read() -> Mapping[str, str]:
        found: Mapping[str, str] = await retried(lambda: nodes.get(node_name), f"get Node {node_name}")
        return found

    async def plan(annotations: Mapping[str, str]) -> str | None:
        if annotations.get(ANNOTATION_ALEPH_VERSION) == aleph.build_id:
            return None
        return aleph.build_id

    async def write(annotations: Mapping[str, str], build_id: str) -> Outcome:
        await retried(lambda: nodes.set(node_name, ANNOTATION_ALEPH_VERSION, build_id), f"patch Node {node_name}")
        log.info("aleph_annotated", node=node_name, build_id=build_id,
                 previous=annotations.get(ANNOTATION_ALEPH_VERSION), format=str(aleph.format), file=aleph.source)
        return Outcome.ANNOTATED

    written = await retry_on_conflict(read, plan, write, what=f"annotate Node {node_name}", attempts=CONFLICT_ATTEMPTS)
    if written is None:
        log.debug("aleph_unchanged", node=node_name, build_id=aleph.build_id)
        return Outcome.UNCHANGED
    return written


async def run_aleph_report(
    node_name: str,
    aleph_path: Path,
    api_client: Any,
    *,
    interval: float = DEFAULT_ALEPH_REPORT_INTERVAL,
    once: bool = False,
    retry: RetryPolicy = RetryPolicy(),
    stop: asyncio.Event | None = None,
    nodes: NodeAnnotations | None = None,
    handle_signals: bool = True,
) -> int:
    """The `aleph-report` command; returns the exit code (module docstring has the behaviour).

    `stop` ends the loop when set (SIGTERM/SIGINT set it when `handle_signals`); `nodes` replaces
    the Kubernetes API (tests).
    """
    if not node_name:
        log.error("aleph_report_usage", problem="a node name is required (--node-name or NODE_NAME)")
        return 2
    nodes = nodes or KubeNodeAnnotations(api_client)
    stop = stop or asyncio.Event()
    with _signals_set(stop, enabled=handle_signals and not once):
        while True:
            outcome = await report_once(node_name, aleph_path, nodes, retry)
            if outcome is Outcome.INVALID_ALEPH:
                return 1
            if once:
                return 0 if outcome in (Outcome.ANNOTATED, Outcome.UNCHANGED) else 1
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), timeout=interval)
            if stop.is_set():
                log.info("aleph_report_stopping", node=node_name)
                return 0


@contextlib.contextmanager
def _signals_set(stop: asyncio.Event, *, enabled: bool) -> Iterator[None]:
    """SIGTERM/SIGINT set `stop` while inside; handlers removed on exit."""
    installed: list[signal.Signals] = []
    if enabled:
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            try:
                loop.add_signal_handler(sig, stop.set)
            except (NotImplementedError, RuntimeError, ValueError):
                continue  # not the main thread, or no signal support: the caller stops us instead
            installed.append(sig)
    try:
        yield
    finally:
        if installed:
            loop = asyncio.get_running_loop()
            for sig in installed:
                loop.remove_signal_handler(sig)
