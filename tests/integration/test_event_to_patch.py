"""The line from a watch event to the PATCH on the wire, measured on a real API server (issue 46,
item 1): at most 12 files and 20 file-to-file moves, at most 3 of them back into a file already
visited.

The line is what carries the write: the calls on the stack when the key is queued (the informer's
task) and when the patch's bytes go to the HTTP layer (the worker's task). A closure handed down
and called from below (`retry_on_conflict`'s `write` in the machine reconciler, as at f8f31cf, when
the issue was filed: 8 files, 9 moves, 2 back) shows on that stack as a move back into the file that
made it; a side trip that returns before the send (a store read, the planner) is not on it. The
hot-loop count the reconcile writes to the claim holder before the patch is a line of its own to
the wire, measured and printed the same way. docs/design.md walks the same line file by file.

The reader's walk counts the side trips as well: every call the line's functions (and the helpers of
their own files) make into another file of the package, and the move back, recorded on the running
daemon with `sys.setprofile`.
"""

from __future__ import annotations

import asyncio
import inspect
import sys
import traceback
from collections import defaultdict
from pathlib import Path
from types import FrameType
from typing import Any

import pytest
from harness.cluster import TestCluster
from kubernetes_asyncio.client.rest import RESTClientObject

from bootimage_controller.constants import CLAIM_HOLDER_NAME
from bootimage_controller.kube.workqueue import WorkerPool, WorkQueue

from .daemon_helpers import daemon_task, wait_for
from .fleet import AWS_416, AWS_422, ami, aws_machinesets, base_cluster, get_ms, merge_patch_ms, set_ami_patch

pytestmark = pytest.mark.integration

PACKAGE = Path(__file__).resolve().parents[2] / "bootimage_controller"
NAME = "line"
KEY = f"MachineSet/openshift-machine-api/{NAME}"


def files_on(stack: traceback.StackSummary) -> list[str]:
    """The package files on a stack, outermost first, each run of frames in one file once."""
    out: list[str] = []
    for frame in stack:
        path = Path(frame.filename).resolve()
        if PACKAGE in path.parents:
            name = str(path.relative_to(PACKAGE))
            if not out or out[-1] != name:
                out.append(name)
    return out


_FILES: dict[str, str | None] = {}


def package_file(frame: FrameType) -> str | None:
    """The package file `frame` runs in (None: not the package's), resolved once per file: the
    profile hook asks for every call the daemon makes while it records."""
    name = frame.f_code.co_filename
    if name not in _FILES:
        path = Path(name).resolve()
        _FILES[name] = str(path.relative_to(PACKAGE)) if PACKAGE in path.parents else None
    return _FILES[name]


def caller_of(frame: FrameType) -> FrameType | None:
    """The nearest package frame below `frame` (the test's wrappers and libraries skipped)."""
    back = frame.f_back
    while back is not None and package_file(back) is None:
        back = back.f_back
    return back


def frames_here() -> set[FrameType]:
    frame, out = inspect.currentframe(), set()
    while frame is not None:
        out.add(frame)
        frame = frame.f_back
    return out


class PackageCalls:
    """Every call from a package function into a package function on this thread while installed
    (`sys.setprofile`), by task, in order: (caller frame, callee frame). A coroutine resumed after
    an await is not a new call."""

    def __init__(self) -> None:
        self.by_task: defaultdict[object, list[tuple[FrameType, FrameType]]] = defaultdict(list)
        self.seen: set[FrameType] = set()

    def __enter__(self) -> PackageCalls:
        sys.setprofile(self.hook)
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def stop(self) -> None:
        sys.setprofile(None)

    def hook(self, frame: FrameType, event: str, _arg: object) -> None:
        if event != "call" or frame in self.seen or package_file(frame) is None:
            return
        self.seen.add(frame)
        caller = caller_of(frame)
        if caller is not None:
            self.by_task[asyncio.current_task()].append((caller, frame))

    def reading(self, task: object, line: set[FrameType], first: str, start: int = 0) -> list[str]:
        """The files a reader visits from the `start`th call of `task`, reading the line (`line`:
        its frames) and what it calls in its own file, and stepping into every other file it
        calls and back, without reading on inside that side trip."""
        out, read = [first], set(line)
        for caller, callee in self.by_task[task][start:]:
            if caller not in read:
                continue
            if package_file(callee) == package_file(caller):
                read.add(callee)  # a helper of the same file: read on
            for name in (package_file(caller), package_file(callee)):
                if name is not None and out[-1] != name:
                    out.append(name)
        return out


def joined(*parts: list[str]) -> list[str]:
    """Parts of one line (a hand-off through the queue joins them): a file ending one and starting
    the next is one stay."""
    line: list[str] = []
    for part in parts:
        line += part[1:] if line and part and line[-1] == part[0] else part
    return line


def moves(line: list[str]) -> tuple[int, int, int]:
    """(files, moves, moves back into a file already visited)."""
    back = sum(1 for i, name in enumerate(line) if name in line[:i])
    return len(set(line)), len(line) - 1, back


def test_the_count_sees_a_move_back() -> None:
    # The old api_call thunk: writer.py's lambda called from retry.py, on its way to client.py.
    line = joined(["kube/informer.py", "reconcile/triggers.py", "kube/workqueue.py"],
                  ["kube/workqueue.py", "reconcile/machines.py", "reconcile/writer.py", "kube/retry.py",
                   "reconcile/writer.py", "kube/client.py"])
    assert moves(line) == (7, 7, 1)


async def test_the_line_from_a_watch_event_to_the_patch_on_the_wire(
    kube_cluster: TestCluster, kube_api: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    await base_cluster(kube_api)
    await aws_machinesets(kube_api, [NAME])
    reverted = False
    queued: list[list[str]] = []
    counted: list[list[str]] = []
    sent: list[list[str]] = []

    real_add = WorkQueue.add

    def add(self: WorkQueue, key: str) -> None:
        if reverted and key == KEY and not queued:
            # This stands in for `WorkQueue.add`: the stack up to its caller, then the queue. Only
            # the watch event's add: boot verification's caches, listing late, may queue the key too.
            stack = files_on(traceback.extract_stack())
            if "reconcile/triggers.py" in stack:
                queued.append([*stack, "kube/workqueue.py"])
                read_event_line()
        real_add(self, key)

    real_request = RESTClientObject.request

    async def request(self: RESTClientObject, method: str, url: str, *args: Any, **kwargs: Any) -> Any:
        path = url.split("?")[0]
        if queued and not sent and method == "PATCH" and path.endswith(f"/machinesets/{NAME}"):
            sent.append(files_on(traceback.extract_stack()))
            read_worker_line()
            calls.stop()  # recorded: the rest of the test runs at full speed
        if queued and not counted and method == "PATCH" and path.endswith(f"/configmaps/{CLAIM_HOLDER_NAME}"):
            counted.append(files_on(traceback.extract_stack()))
        return await real_request(self, method, url, *args, **kwargs)

    # The reader's walk: what the line's functions call, each side trip into its file and back.
    calls = PackageCalls()
    walks: dict[str, list[str]] = {}
    worker_start: list[tuple[object, int]] = []

    def read_event_line() -> None:
        task, here = asyncio.current_task(), frames_here()
        handler = next(i for i, (caller, callee) in enumerate(calls.by_task[task])
                       if callee in here and package_file(callee) == "reconcile/triggers.py")
        walk = calls.reading(task, here, "kube/informer.py", handler)
        walks["event"] = joined(walk, ["reconcile/triggers.py", "kube/workqueue.py"])  # the add, from the handler

    real_one = WorkerPool.reconcile_one

    async def reconcile_one(self: WorkerPool, key: str) -> Any:
        if queued and key == KEY and not worker_start:
            task = asyncio.current_task()
            worker_start.append((task, len(calls.by_task[task])))
        return await real_one(self, key)

    def read_worker_line() -> None:
        task, start = worker_start[0]
        walks["worker"] = calls.reading(task, frames_here(), "kube/workqueue.py", start)

    monkeypatch.setattr(WorkQueue, "add", add)
    monkeypatch.setattr(WorkerPool, "reconcile_one", reconcile_one)
    monkeypatch.setattr(RESTClientObject, "request", request)

    async def at_target() -> bool:
        ms = await get_ms(kube_api, NAME)
        return ms is not None and ami(ms) == AWS_422

    async with daemon_task(kube_cluster.kubeconfig):
        await wait_for(at_target, 30, "the first patch")
        reverted = True  # another writer puts the old image back: a watch event, then our patch
        with calls:
            await merge_patch_ms(kube_api, NAME, set_ami_patch(AWS_416))
            await wait_for(at_target, 30, "the patch after the watch event")

    assert queued and counted and sent, "the watch event queued the key, the worker counted the write and sent it"
    event, count, worker = queued[0], counted[0], sent[0]
    assert event[:2] == ["kube/informer.py", "reconcile/triggers.py"] and event[-1] == "kube/workqueue.py"
    assert worker[0] == "kube/workqueue.py" and worker[-1] == "kube/client.py"
    line = joined(event, worker)
    files, steps, back = moves(line)
    print("event -> wire:", " -> ".join(line), f"({files} files, {steps} moves, {back} back)")
    assert files <= 12 and steps <= 20 and back <= 3, line
    # The count before it: the same worker, through the ledger to the holder's PATCH.
    assert count[0] == "kube/workqueue.py" and count[-1] == "kube/client.py"
    count_line = joined(event, count)
    files, steps, back = moves(count_line)
    print("event -> count:", " -> ".join(count_line), f"({files} files, {steps} moves, {back} back)")
    assert files <= 12 and steps <= 20 and back <= 3, count_line
    # The reader's walk, side trips included (the store's reads, the planner, the delegation and
    # kind checks, the holder, the count): printed for the closing note. It reads 21 files, 64
    # moves, 44 back; 98 moves and 77 back at 75440c8, before the memory answered the echo check,
    # the cluster view the plan's readiness in one call, the kinds their checks in one, the holder
    # came with its gate, the counting moved out of machines.py and the writer built its own
    # record. The 20 moves are not reached this way; this holds the gain (a side trip
    # added to the line fails here).
    reading = joined(walks["event"], walks["worker"])
    files, steps, back = moves(reading)
    print("reading event -> wire:", " -> ".join(reading), f"({files} files, {steps} moves, {back} back)")
    assert steps <= 70 and back <= 50, reading
