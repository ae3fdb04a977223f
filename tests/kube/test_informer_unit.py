"""Informer against a scripted in-memory API: list, watch, bookmarks, 410 re-list, errors.

The real API server versions of these (compaction, bookmarks from the watch cache) are in
tests/integration/test_informer.py; these pin the edge cases that server cannot produce on demand.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Any

import pytest
from kubernetes_asyncio.client import ApiClient, Configuration

from bootimage_controller.kube.informer import (
    Informer,
    ListWatch,
    SharedStrings,
    object_key,
)
from bootimage_controller.kube.retry import Backoff

WAIT = 5.0


async def eventually(pred: Callable[[], bool], what: str = "condition") -> None:
    async with asyncio.timeout(WAIT):
        while not pred():
            await asyncio.sleep(0.001)


def obj(name: str, rv: int, namespace: str | None = "ns", **extra: Any) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "resourceVersion": str(rv)}
    if namespace:
        meta["namespace"] = namespace
    return {"metadata": meta, **extra}


class FakeContent:
    def __init__(self) -> None:
        self.lines: asyncio.Queue[bytes] = asyncio.Queue()

    async def readline(self) -> bytes:
        return await self.lines.get()


class FakeResponse:
    def __init__(self, status: int = 200, body: Any = None) -> None:
        self.status = status
        self.reason = "OK" if status == 200 else "Error"
        self.headers: dict[str, str] = {}
        self.body = json.dumps(body).encode() if body is not None else b""
        self.content = FakeContent()
        self.closed = False

    async def read(self) -> bytes:
        return self.body

    def release(self) -> None:
        pass

    def close(self) -> None:
        self.closed = True

    def send(self, type_: str, obj_: dict[str, Any]) -> None:
        self.content.lines.put_nowait(json.dumps({"type": type_, "object": obj_}).encode() + b"\n")

    def end(self) -> None:
        self.content.lines.put_nowait(b"")


class FakeServer:
    """Serves LIST from `objects` and hands each WATCH a FakeResponse the test drives."""

    def __init__(self, *objects: dict[str, Any], rv: int = 10, kind: str = "ConfigMapList") -> None:
        self.objects = {object_key(o): o for o in objects}
        self.rv = rv
        self.kind = kind
        self.calls: list[dict[str, Any]] = []
        self.watches: list[FakeResponse] = []
        self.list_errors: list[int] = []
        self.watch_errors: list[int] = []
        self.page_size: int | None = None
        self.remaining_counts = True  # pages say how many objects follow, as the API server's do

    async def list_fn(self, *args: Any, **kwargs: Any) -> FakeResponse:
        self.calls.append({"args": args, **kwargs})
        if kwargs.get("watch"):
            if self.watch_errors:
                code = self.watch_errors.pop(0)
                return FakeResponse(
                    code, {"kind": "Status", "code": code, "reason": "Expired", "message": "x"}
                )
            resp = FakeResponse()
            self.watches.append(resp)
            return resp
        if self.list_errors:
            code = self.list_errors.pop(0)
            return FakeResponse(
                code, {"kind": "Status", "code": code, "reason": "Forbidden", "message": "no"}
            )
        items = [json.loads(json.dumps(o)) for o in self.objects.values()]
        meta: dict[str, Any] = {"resourceVersion": str(self.rv)}
        if self.page_size:
            start = int(kwargs.get("_continue") or 0)
            if start + self.page_size < len(items):
                meta["continue"] = str(start + self.page_size)
                if self.remaining_counts:
                    meta["remainingItemCount"] = len(items) - start - self.page_size
            items = items[start : start + self.page_size]
        return FakeResponse(200, {"kind": self.kind, "apiVersion": "v1", "metadata": meta, "items": items})

    def lists(self) -> list[dict[str, Any]]:
        return [c for c in self.calls if not c.get("watch")]

    def watch_calls(self) -> list[dict[str, Any]]:
        return [c for c in self.calls if c.get("watch")]


class Recorder:
    def __init__(self, informer: Informer) -> None:
        self.events: list[tuple[str, str, str | None]] = []
        informer.add_handler(on_add=self.add, on_update=self.update, on_delete=self.delete)

    def add(self, o: dict[str, Any]) -> None:
        self.events.append(("add", object_key(o), o["metadata"].get("resourceVersion")))

    def update(self, old: dict[str, Any], new: dict[str, Any]) -> None:
        assert object_key(old) == object_key(new)
        self.events.append(("update", object_key(new), new["metadata"].get("resourceVersion")))

    def delete(self, o: dict[str, Any]) -> None:
        self.events.append(("delete", object_key(o), o["metadata"].get("resourceVersion")))


def make(server: FakeServer, **kw: Any) -> Informer:
    source = ListWatch(
        "configmaps", server.list_fn, ("ns",), label_selector="app=x", field_selector="metadata.name=a"
    )
    return Informer(source, backoff=Backoff(base=0.001, cap=0.01), watch_timeout=60, **kw)


@pytest.fixture
async def running() -> Any:
    informers: list[Informer] = []

    def start(informer: Informer) -> Informer:
        informers.append(informer)
        informer.start()
        return informer

    yield start
    for informer in informers:
        await informer.stop()


async def test_lists_syncs_then_watches_from_the_list_resource_version(running: Any) -> None:
    server = FakeServer(obj("a", 3), obj("b", 4), rv=10)
    informer = make(server)
    rec = Recorder(informer)
    running(informer)
    assert await informer.wait_synced(WAIT)
    assert sorted(rec.events) == [("add", "ns/a", "3"), ("add", "ns/b", "4")]
    await eventually(lambda: len(server.watches) == 1)
    listed, watched = server.lists()[0], server.watch_calls()[0]
    assert listed["args"] == ("ns",) and listed["label_selector"] == "app=x"
    assert listed["field_selector"] == "metadata.name=a"
    assert watched["resource_version"] == "10"
    assert watched["allow_watch_bookmarks"] is True
    assert watched["timeout_seconds"] >= 60
    assert watched["label_selector"] == "app=x" and watched["field_selector"] == "metadata.name=a"
    # list items of built-in kinds come without kind/apiVersion; the cache fills them in
    cached = informer.get("ns/a")
    assert cached is not None and cached["kind"] == "ConfigMap" and cached["apiVersion"] == "v1"


async def test_watch_events_update_cache_and_call_handlers(running: Any) -> None:
    server = FakeServer(obj("a", 3), obj("b", 4))
    informer = make(server)
    rec = Recorder(informer)
    running(informer)
    await eventually(lambda: len(server.watches) == 1)
    rec.events.clear()
    w = server.watches[0]
    w.send("MODIFIED", obj("a", 11, data={"k": "v"}))
    w.send("ADDED", obj("c", 12))
    w.send("DELETED", obj("b", 13))
    await eventually(lambda: len(rec.events) == 3)
    assert rec.events == [("update", "ns/a", "11"), ("add", "ns/c", "12"), ("delete", "ns/b", "13")]
    assert sorted(informer.keys()) == ["ns/a", "ns/c"]
    assert informer.get("ns/a") == obj("a", 11, data={"k": "v"})
    assert informer.resource_version == "13"


async def test_bookmark_advances_resource_version_without_events(running: Any) -> None:
    server = FakeServer(obj("a", 3))
    informer = make(server)
    rec = Recorder(informer)
    running(informer)
    await eventually(lambda: len(server.watches) == 1)
    rec.events.clear()
    server.watches[0].send(
        "BOOKMARK", {"kind": "ConfigMap", "apiVersion": "v1", "metadata": {"resourceVersion": "99"}}
    )
    await eventually(lambda: informer.resource_version == "99")
    server.watches[0].end()  # server timeout: watch again from the bookmark
    await eventually(lambda: len(server.watches) == 2)
    assert server.watch_calls()[1]["resource_version"] == "99"
    assert rec.events == []
    assert len(server.lists()) == 1, "a normal end of a watch must not re-list"


async def test_410_error_event_relists_and_emits_what_changed_meanwhile(running: Any) -> None:
    server = FakeServer(obj("a", 3), obj("b", 4), obj("c", 5), rv=10)
    informer = make(server)
    rec = Recorder(informer)
    running(informer)
    await eventually(lambda: len(server.watches) == 1)
    rec.events.clear()
    # While the watch was broken: a changed, b deleted, d created, c untouched.
    server.objects = {"ns/a": obj("a", 20), "ns/c": obj("c", 5), "ns/d": obj("d", 21)}
    server.rv = 25
    server.watches[0].send(
        "ERROR", {"kind": "Status", "code": 410, "reason": "Expired", "message": "too old"}
    )
    await eventually(lambda: len(server.watches) == 2)
    assert sorted(rec.events) == [("add", "ns/d", "21"), ("delete", "ns/b", "4"), ("update", "ns/a", "20")]
    assert sorted(informer.keys()) == ["ns/a", "ns/c", "ns/d"]
    assert informer.list_count == 2
    assert server.watch_calls()[1]["resource_version"] == "25"
    # Consistent reads, the first list too: never from the watch cache (see the module docstring).
    assert all("resource_version" not in c for c in server.lists())


async def test_http_410_on_watch_request_relists(running: Any) -> None:
    server = FakeServer(obj("a", 3))
    informer = make(server)
    running(informer)
    await eventually(lambda: len(server.watches) == 1)
    server.watch_errors = [410]
    server.watches[0].end()
    await eventually(lambda: len(server.watches) == 2)
    assert informer.list_count == 2


async def test_410_straight_after_a_list_backs_off_instead_of_spinning() -> None:
    server = FakeServer(obj("a", 3))
    server.watch_errors = [410] * 1000
    informer = Informer(
        ListWatch("configmaps", server.list_fn, ("ns",)), backoff=Backoff(base=0.02, cap=0.02)
    )
    informer.start()
    try:
        await eventually(lambda: len(server.lists()) >= 3)
        assert "410" in (informer.last_error or ""), "reported as a failure, with backoff between lists"
        server.watch_errors.clear()
        await eventually(lambda: len(server.watches) == 1)
    finally:
        await informer.stop()
    # one list and one watch per backoff period, not a tight loop
    assert len(server.lists()) <= len(server.watch_calls()) + 1


async def test_other_watch_errors_back_off_and_resume_without_relisting(running: Any) -> None:
    server = FakeServer(obj("a", 3), rv=10)
    informer = make(server)
    running(informer)
    await eventually(lambda: len(server.watches) == 1)
    server.watches[0].send("MODIFIED", obj("a", 12))
    await eventually(lambda: informer.resource_version == "12")
    server.watch_errors = [500, 503]
    server.watches[0].end()
    await eventually(lambda: len(server.watches) == 2)
    assert [c["resource_version"] for c in server.watch_calls()] == ["10", "12", "12", "12"]
    assert informer.list_count == 1
    assert informer.last_error is None


async def test_list_failures_are_retried_and_sync_waits_for_success(running: Any) -> None:
    server = FakeServer(obj("a", 3))
    server.list_errors = [403, 500]
    informer = make(server)
    running(informer)
    assert await informer.wait_synced(WAIT)
    assert len(server.lists()) == 3
    assert informer.get("ns/a") is not None


async def test_list_failure_is_reported_until_it_succeeds() -> None:
    server = FakeServer(obj("a", 3))
    server.list_errors = [404] * 1000
    informer = Informer(
        ListWatch("configmaps", server.list_fn, ("ns",)), backoff=Backoff(base=0.001, cap=0.001)
    )
    informer.start()
    try:
        await eventually(lambda: informer.last_error is not None)
        assert "404" in (informer.last_error or "")
        assert not informer.has_synced.is_set()
        server.list_errors.clear()
        assert await informer.wait_synced(WAIT)
    finally:
        await informer.stop()


async def test_absent_ok_treats_an_unserved_kind_as_empty_until_it_appears() -> None:
    server = FakeServer(obj("cluster", 3, namespace=None))
    server.list_errors = [404] * 3
    informer = Informer(
        ListWatch("controlplanemachinesets", server.list_fn),
        backoff=Backoff(base=0.001, cap=0.001),
        absent_ok=True,
    )
    rec = Recorder(informer)
    informer.start()
    try:
        assert await informer.wait_synced(WAIT), "a missing CRD must not hold readiness forever"
        assert informer.absent and len(informer) == 0 and rec.events == []
        await eventually(lambda: len(server.watches) == 1)  # the list worked on a later retry
        assert not informer.absent
        assert rec.events == [("add", "cluster", "3")]
        # the kind disappears mid-watch (CRD deleted): list again, find nothing, say so
        server.watch_errors = [404]
        server.list_errors = [404] * 1000
        server.watches[0].end()
        await eventually(lambda: informer.absent)
        assert rec.events[-1] == ("delete", "cluster", "3")
    finally:
        await informer.stop()


async def test_a_refused_list_counts_as_empty_only_where_the_kind_is_optional() -> None:
    """A 403 means no rights: tolerated (empty, `forbidden`) only for kinds the daemon can do
    without (`forbidden_ok`, the Cluster API's); any other refused read keeps the cache unsynced,
    `absent_ok` or not, so nothing is decided on a read that never happened."""
    for forbidden_ok in (False, True):
        server = FakeServer(obj("x", 3))
        server.list_errors = [403] * 1000
        informer = Informer(ListWatch("machinesets", server.list_fn, ("ns",)), backoff=Backoff(base=0.001, cap=0.001),
                            absent_ok=True, forbidden_ok=forbidden_ok)
        informer.start()
        try:
            if forbidden_ok:
                assert await informer.wait_synced(WAIT)
                assert informer.forbidden and informer.absent and len(informer) == 0
            else:
                await eventually(lambda informer=informer: informer.last_error is not None)
                assert "403" in (informer.last_error or "")
                assert not informer.has_synced.is_set() and not informer.forbidden
        finally:
            await informer.stop()


async def test_paged_list_collects_every_page(running: Any) -> None:
    server = FakeServer(*(obj(f"o{i}", i) for i in range(7)))
    server.page_size = 3
    informer = running(make(server))
    assert await informer.wait_synced(WAIT)
    assert len(informer) == 7
    assert [c.get("_continue") for c in server.lists()] == [None, "3", "6"]


@pytest.mark.parametrize(("share_from", "remaining_counts", "shared"),
                         [(7, True, True), (8, True, False), (8, False, True)])
async def test_a_paged_list_shares_strings_by_its_whole_size(running: Any, share_from: int, remaining_counts: bool,
                                                             shared: bool) -> None:
    # The first page already knows the list's size from `remainingItemCount`; without it, a list
    # that needs more than one page is taken to be large.
    server = FakeServer(*(obj(f"o{i}", i, spec={"region": "us-east-1"}) for i in range(7)))
    server.page_size, server.remaining_counts = 3, remaining_counts
    informer = running(make(server, share_strings_from=share_from))
    assert await informer.wait_synced(WAIT)
    first, last = informer.get("ns/o0"), informer.get("ns/o6")
    assert first is not None and last is not None
    assert (first["spec"]["region"] is last["spec"]["region"]) is shared


async def test_failing_handler_does_not_stop_other_handlers_or_the_cache(running: Any) -> None:
    server = FakeServer()
    informer = make(server)

    def broken(_o: dict[str, Any]) -> None:
        raise RuntimeError("handler bug")

    informer.add_handler(on_add=broken)
    rec = Recorder(informer)
    running(informer)
    await eventually(lambda: len(server.watches) == 1)
    server.watches[0].send("ADDED", obj("a", 11))
    server.watches[0].send("ADDED", obj("b", 12))
    await eventually(lambda: len(rec.events) == 2)
    assert sorted(informer.keys()) == ["ns/a", "ns/b"]


async def test_handler_added_after_sync_gets_existing_objects(running: Any) -> None:
    server = FakeServer(obj("a", 3), obj("b", 4))
    informer = running(make(server))
    other = make(FakeServer())
    assert not other.has_synced.is_set()
    await informer.wait_synced(WAIT)
    rec = Recorder(informer)
    assert sorted(rec.events) == [("add", "ns/a", "3"), ("add", "ns/b", "4")]


async def test_cluster_scoped_keys_have_no_namespace(running: Any) -> None:
    server = FakeServer(obj("cluster", 3, namespace=None), kind="MachineConfigurationList")
    informer = running(make(server))
    await informer.wait_synced(WAIT)
    assert informer.keys() == ["cluster"]
    assert informer.get("cluster") is not None


async def test_stop_ends_the_informer_task() -> None:
    server = FakeServer(obj("a", 3))
    informer = make(server)
    task = informer.start()
    await eventually(lambda: len(server.watches) == 1)
    await informer.stop()
    assert task.done()
    assert server.watches[0].closed, "the watch connection is closed on stop"


async def test_run_returns_after_stop_and_cancelling_run_stops_the_informer() -> None:
    server = FakeServer(obj("a", 3))
    informer = make(server)
    runner = asyncio.create_task(informer.run())
    await eventually(lambda: len(server.watches) == 1)
    await informer.stop()
    await asyncio.wait_for(runner, WAIT)  # returns normally, no CancelledError for the caller

    informer = make(server)
    runner = asyncio.create_task(informer.run())
    await eventually(lambda: len(server.watches) == 2)
    runner.cancel()
    with pytest.raises(asyncio.CancelledError):
        await runner
    await eventually(lambda: server.watches[1].closed)


async def test_source_constructors_pick_the_list_call_and_selectors() -> None:
    api = ApiClient(Configuration(host="http://127.0.0.1:1"))
    lw = ListWatch.config_maps(api, "openshift-machine-config-operator", name="coreos-bootimages")
    assert lw.field_selector == "metadata.name=coreos-bootimages"
    assert lw.args == ("openshift-machine-config-operator",)
    lw = ListWatch.custom_objects(
        api, "machine.openshift.io", "v1beta1", "machinesets", "openshift-machine-api"
    )
    assert lw.args == ("machine.openshift.io", "v1beta1", "openshift-machine-api", "machinesets")
    assert lw.list_fn.__name__ == "list_namespaced_custom_object"
    lw = ListWatch.custom_objects(api, "operator.openshift.io", "v1", "machineconfigurations", name="cluster")
    assert lw.list_fn.__name__ == "list_cluster_custom_object"
    assert lw.field_selector == "metadata.name=cluster"
    lw = ListWatch.nodes(api, label_selector="node-role.kubernetes.io/master")
    assert lw.selectors() == {"label_selector": "node-role.kubernetes.io/master"}
    await api.close()


async def listed_a_then_watched_b(running: Any, spec: dict[str, Any], share_strings_from: int,
                                  ) -> tuple[Informer, FakeServer, dict[str, Any], dict[str, Any]]:
    """An informer that listed `a` and then saw `b` (with managedFields) added by its watch."""
    server = FakeServer(obj("a", 3, spec=spec))
    informer = make(server, share_strings_from=share_strings_from)
    running(informer)
    await eventually(lambda: len(server.watches) == 1)
    b = obj("b", 11, spec=spec)
    b["metadata"]["managedFields"] = [{"manager": "kubectl"}]
    server.watches[0].send("ADDED", b)
    await eventually(lambda: informer.get("ns/b") is not None)
    a, cached_b = informer.get("ns/a"), informer.get("ns/b")
    assert a is not None and cached_b is not None
    assert "managedFields" not in cached_b["metadata"]  # dropped whether strings are shared or not
    return informer, server, a, cached_b


async def test_cached_objects_share_strings_and_drop_managed_fields(running: Any) -> None:
    spec = {"region": "us-east-1", "instanceType": "m6i.xlarge", "tags": [{"name": "kubernetes.io/cluster/x"}]}
    _, _, a, cached_b = await listed_a_then_watched_b(running, spec, share_strings_from=0)
    assert cached_b["spec"] == spec  # equal to what was read...
    # ...with one copy of each string, though list and watch event were separate documents.
    assert cached_b["spec"]["region"] is a["spec"]["region"]
    assert cached_b["spec"]["tags"][0]["name"] is a["spec"]["tags"][0]["name"]
    assert next(k for k in cached_b if k == "metadata") is next(k for k in a if k == "metadata")


async def test_strings_are_shared_from_the_threshold_on(running: Any) -> None:
    # Sharing costs CPU per object and saves memory only in numbers: a small cache keeps what
    # json.loads made, and the objects cached once the threshold is reached share their strings.
    spec = {"region": "us-east-1"}
    informer, server, a, cached_b = await listed_a_then_watched_b(running, spec, share_strings_from=2)
    assert cached_b["spec"] == a["spec"] and cached_b["spec"]["region"] is not a["spec"]["region"]
    server.watches[0].send("ADDED", obj("c", 12, spec=spec))  # the cache holds 2: shared from here
    server.watches[0].send("ADDED", obj("d", 13, spec=spec))
    await eventually(lambda: informer.get("ns/d") is not None)
    c, d = informer.get("ns/c"), informer.get("ns/d")
    assert c is not None and d is not None
    assert c["spec"]["region"] is d["spec"]["region"]


def test_shared_strings_are_bounded_and_leave_long_values_alone() -> None:
    table = SharedStrings(max_entries=10)
    long_value = "x" * (SharedStrings.MAX_LENGTH + 1)
    doc = {"long": long_value, "n": 1, "none": None, "list": ["a", 2.5, True, {"b": ["c"]}, [["a"]]]}
    first = table.share(json.loads(json.dumps(doc)))
    assert first == doc
    assert len(table) == 7  # five keys, "a" and "c"; the long value is not kept
    second = table.share(json.loads(json.dumps(doc)))
    assert second["list"][3]["b"][0] is first["list"][3]["b"][0]
    assert second["list"][4][0][0] is first["list"][0]  # arrays in arrays too
    for i in range(20):
        table.share({f"key-{i}": f"value-{i}"})
    assert len(table) <= 10
