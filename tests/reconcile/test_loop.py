"""reconcile/loop.py: a key goes to the reconciler registered for its kind; what escapes is mapped
to a result; a machine key's outcome goes to the status reconciler (the one way back) and asks for a
status report; `KeyList` is `run --once`'s sink (issue 35)."""

from __future__ import annotations

from typing import Any

import pytest

from bootimage_controller.constants import MACHINESET_KIND, Action, Reason
from bootimage_controller.core.model import BootImageDecision
from bootimage_controller.kube.api_errors import Forbidden, ServerError
from bootimage_controller.kube.fence import NotLeader
from bootimage_controller.kube.workqueue import DONE, ReconcileResult
from bootimage_controller.reconcile.keys import CLAIMS_KEY, STATUS_KEY
from bootimage_controller.reconcile.loop import CACHE_WAIT, KeyList, KeySink, Loop
from bootimage_controller.reconcile.state import MachineSetState

MS_KEY = f"{MACHINESET_KIND}/openshift-machine-api/worker-a"


class Status:
    """The status reconciler as the loop sees it: a reconcile, and told after every machine key."""

    def __init__(self) -> None:
        self.machine_keys = 0
        self.reconciled = 0
        self.recorded: dict[str, MachineSetState | None] = {}

    def record(self, key: str, state: MachineSetState | None) -> None:
        self.recorded[key] = state

    async def reconcile(self, _key: str) -> ReconcileResult[None]:
        self.reconciled += 1
        return DONE

    def after_machine_key(self) -> None:
        self.machine_keys += 1


class Store:
    def __init__(self, objects: dict[str, list[dict[str, Any]]]) -> None:
        self.objects = objects

        self.listed = True

    def list(self, kind: str) -> list[dict[str, Any]]:
        return self.objects.get(kind, [])

    def synced(self) -> bool:
        return self.listed


def loop_with(sink: KeySink, machines: Any, claims: Any = None, objects: dict[str, list[dict[str, Any]]] | None = None,
              ) -> tuple[Loop, Status]:
    status = Status()
    loop = Loop(Store(objects or {}), status, sink)  # type: ignore[arg-type]
    loop.register_machines([MACHINESET_KIND], machines)
    if claims is not None:
        loop.register([CLAIMS_KEY], claims)
    return loop, status


async def test_a_key_goes_to_its_kinds_reconciler_and_a_machine_key_asks_for_a_report() -> None:
    seen: list[str] = []

    state = MachineSetState(BootImageDecision(MACHINESET_KIND, "openshift-machine-api", "worker-a", Action.NOOP,
                                              Reason.UP_TO_DATE, "up to date"))

    async def machines(key: str) -> ReconcileResult[MachineSetState]:
        seen.append(key)
        return ReconcileResult(requeue_after=5.0, state=state)

    sink = KeyList()
    loop, status = loop_with(sink, machines)
    assert await loop.reconcile(MS_KEY) == ReconcileResult(requeue_after=5.0, state=state)  # one answer
    assert seen == [MS_KEY]
    assert status.recorded == {MS_KEY: state}  # the outcome goes back through the loop, nowhere else
    assert list(sink.keys) == [STATUS_KEY] and status.machine_keys == 1
    assert await loop.reconcile(STATUS_KEY) == DONE and status.reconciled == 1
    assert status.machine_keys == 1  # the status key is not a machine key


async def test_an_unknown_kind_is_dropped() -> None:
    async def machines(key: str) -> ReconcileResult[MachineSetState]:
        raise AssertionError("not a MachineSet key")

    loop, _ = loop_with(KeyList(), machines)
    assert await loop.reconcile("Unknown/ns/x") == DONE


async def test_an_api_refusal_that_escapes_is_a_transient_or_permanent_failure() -> None:
    errors = {"a": Forbidden("patch worker-a", 403, "Forbidden", "no"), "b": ServerError("patch worker-b", 500, "Internal", "boom")}

    async def machines(key: str) -> ReconcileResult[MachineSetState]:
        raise errors[key.rsplit("/", 1)[1]]

    loop, _ = loop_with(KeyList(), machines)
    forbidden = await loop.reconcile(f"{MACHINESET_KIND}/ns/a")
    assert forbidden.error is not None and "patch worker-a" in forbidden.error and forbidden.permanent
    server = await loop.reconcile(f"{MACHINESET_KIND}/ns/b")
    assert server.error is not None and not server.permanent


async def test_not_the_leader_is_done_not_a_failure() -> None:
    async def machines(_key: str) -> ReconcileResult[MachineSetState]:
        raise NotLeader("the Lease is held by replica-b")

    loop, _ = loop_with(KeyList(), machines)
    assert await loop.reconcile(MS_KEY) == DONE


def test_enqueue_all_asks_for_every_machine_then_status_and_claims() -> None:
    objects = {MACHINESET_KIND: [{"kind": MACHINESET_KIND, "metadata": {"namespace": "ns", "name": n}} for n in "ab"]}

    async def machines(key: str) -> ReconcileResult[MachineSetState]:
        return DONE

    sink = KeyList()
    loop, _ = loop_with(sink, machines, objects=objects)
    loop.enqueue_all()
    loop.enqueue_all()  # de-duplicated, first order kept
    assert list(sink.keys) == [f"{MACHINESET_KIND}/ns/a", f"{MACHINESET_KIND}/ns/b", STATUS_KEY, CLAIMS_KEY]
    sink.add_after("later", 5.0)  # --once does not wait: a delayed key is not part of the pass
    assert "later" not in sink.keys


async def test_no_answer_from_the_api_server_is_a_transient_failure_not_a_traceback() -> None:
    """Issue 46: a connection error that outlasted `api_call`'s retries (the server went away) escaped
    `Loop.reconcile`; the workqueue logged it as a bug with a traceback, and `run --once` did not
    count it. It is the key's transient failure, with the reason and the error in words."""
    import aiohttp

    async def disconnected(_key: str) -> ReconcileResult[MachineSetState]:
        raise aiohttp.ServerDisconnectedError("Server disconnected")

    loop, _ = loop_with(KeyList(), disconnected)
    result = await loop.reconcile(MS_KEY)
    assert (result.reason, result.permanent) == ("APIServerUnreachable", False)
    assert result.error == "no answer from the API server: ServerDisconnectedError: Server disconnected"

    async def bug(_key: str) -> ReconcileResult[MachineSetState]:
        raise KeyError("not a request failure")

    loop, _ = loop_with(KeyList(), bug)
    with pytest.raises(KeyError):  # a bug is still a bug: the workqueue logs it with its traceback
        await loop.reconcile(MS_KEY)


async def test_a_key_on_a_cache_not_listed_yet_comes_back_and_reaches_no_reconciler() -> None:
    # A cache started on demand (the Cluster API's, when its first pool appears) lists after the key
    # of that pool is queued: nothing may be planned or claimed before it has.
    seen: list[str] = []

    async def machines(key: str) -> ReconcileResult[MachineSetState]:
        seen.append(key)
        return DONE

    loop, status = loop_with(KeyList(), machines)
    loop.store.listed = False  # type: ignore[attr-defined]
    assert await loop.reconcile(MS_KEY) == ReconcileResult(requeue_after=CACHE_WAIT)
    assert seen == [] and status.recorded == {} and status.machine_keys == 0
    loop.store.listed = True  # type: ignore[attr-defined]
    assert await loop.reconcile(MS_KEY) == DONE and seen == [MS_KEY]
