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
"""

from __future__ import annotations

import traceback
from pathlib import Path
from typing import Any

import pytest
from harness.cluster import TestCluster
from kubernetes_asyncio.client.rest import RESTClientObject

from bootimage_controller.constants import CLAIM_HOLDER_NAME
from bootimage_controller.kube.workqueue import WorkQueue

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
        real_add(self, key)

    real_request = RESTClientObject.request

    async def request(self: RESTClientObject, method: str, url: str, *args: Any, **kwargs: Any) -> Any:
        path = url.split("?")[0]
        if queued and not sent and method == "PATCH" and path.endswith(f"/machinesets/{NAME}"):
            sent.append(files_on(traceback.extract_stack()))
        if queued and not counted and method == "PATCH" and path.endswith(f"/configmaps/{CLAIM_HOLDER_NAME}"):
            counted.append(files_on(traceback.extract_stack()))
        return await real_request(self, method, url, *args, **kwargs)

    monkeypatch.setattr(WorkQueue, "add", add)
    monkeypatch.setattr(RESTClientObject, "request", request)

    async def at_target() -> bool:
        ms = await get_ms(kube_api, NAME)
        return ms is not None and ami(ms) == AWS_422

    async with daemon_task(kube_cluster.kubeconfig):
        await wait_for(at_target, 30, "the first patch")
        reverted = True  # another writer puts the old image back: a watch event, then our patch
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
