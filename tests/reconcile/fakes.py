"""Test doubles for the status writer and the event recorder: a fake clock and fake APIs.

The fake APIs keep real semantics where the code depends on them: resourceVersion preconditions
(409), merge patches applied to `status` only, 404 for missing objects, status ignored on create.
"""

from __future__ import annotations

import asyncio
import copy
import json
from collections.abc import Callable
from typing import Any

from kubernetes_asyncio.client.exceptions import ApiException

MERGE_PATCH = "application/merge-patch+json"


async def settle(rounds: int = 50) -> None:
    """Let every runnable task run until it blocks (no real time passes)."""
    for _ in range(rounds):
        await asyncio.sleep(0)


class FakeClock:
    """A monotonic clock and a `sleep` that only returns when `advance` passes its deadline."""

    def __init__(self, start: float = 1000.0) -> None:
        self.now = start
        self._sleepers: list[tuple[float, asyncio.Future[None]]] = []

    def __call__(self) -> float:
        return self.now

    async def sleep(self, delay: float) -> None:
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        entry = (self.now + max(delay, 0.0), fut)
        self._sleepers.append(entry)
        try:
            await fut
        finally:
            if entry in self._sleepers:
                self._sleepers.remove(entry)

    async def advance(self, seconds: float) -> None:
        """Move time forward in small steps, waking sleepers in order, letting tasks run."""
        end = self.now + seconds
        while True:
            await settle()
            due = [d for d, f in self._sleepers if not f.done() and d <= end]
            if not due:
                break
            self.now = max(self.now, min(due))
            for d, f in list(self._sleepers):
                if d <= self.now and not f.done():
                    f.set_result(None)
        self.now = end
        await settle()


def api_error(status: int) -> ApiException:
    exc = ApiException(status=status, reason=f"test {status}")
    exc.headers = None
    return exc


def apply_merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    out = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        else:
            out[key] = apply_merge_patch(out.get(key), value)
    return out


class FakeCustomObjects:
    """Cluster-scoped custom objects with a status subresource, keyed by (plural, name)."""

    def __init__(self) -> None:
        self.objects: dict[tuple[str, str], dict[str, Any]] = {}
        self._rv = 100
        self.gets = 0
        self.creates: list[dict[str, Any]] = []
        self.patches: list[tuple[str, str, dict[str, Any]]] = []
        # errors to raise from the next patch calls, in order
        self.patch_errors: list[ApiException] = []
        # run once just before the next patch is applied (simulates a concurrent writer)
        self.before_patch: Callable[[], None] | None = None

    def _next_rv(self) -> str:
        self._rv += 1
        return str(self._rv)

    def put(self, plural: str, name: str, obj: dict[str, Any]) -> None:
        """Store an object as if another client created or updated it."""
        stored = copy.deepcopy(obj)
        stored.setdefault("metadata", {})["name"] = name
        stored["metadata"]["resourceVersion"] = self._next_rv()
        self.objects[(plural, name)] = stored

    def status(self, plural: str, name: str) -> dict[str, Any]:
        return self.objects[(plural, name)].get("status") or {}

    async def get_cluster_custom_object(self, group: str, version: str, plural: str, name: str) -> Any:
        await asyncio.sleep(0)
        self.gets += 1
        obj = self.objects.get((plural, name))
        if obj is None:
            raise api_error(404)
        return copy.deepcopy(obj)

    async def create_cluster_custom_object(self, group: str, version: str, plural: str, body: Any) -> Any:
        await asyncio.sleep(0)
        name = body["metadata"]["name"]
        self.creates.append(copy.deepcopy(body))
        if (plural, name) in self.objects:
            raise api_error(409)
        stored = {k: v for k, v in copy.deepcopy(body).items() if k != "status"}
        self.put(plural, name, stored)
        return copy.deepcopy(self.objects[(plural, name)])

    async def patch_cluster_custom_object_status(
        self, group: str, version: str, plural: str, name: str, body: Any, *, _content_type: str
    ) -> Any:
        await asyncio.sleep(0)
        assert _content_type == MERGE_PATCH
        self.patches.append((plural, name, copy.deepcopy(body)))
        if self.patch_errors:
            raise self.patch_errors.pop(0)
        if self.before_patch is not None:
            hook, self.before_patch = self.before_patch, None
            hook()
        obj = self.objects.get((plural, name))
        if obj is None:
            raise api_error(404)
        want_rv = (body.get("metadata") or {}).get("resourceVersion")
        if want_rv is not None and want_rv != obj["metadata"]["resourceVersion"]:
            raise api_error(409)
        obj["status"] = apply_merge_patch(obj.get("status") or {}, body.get("status") or {})
        obj["metadata"]["resourceVersion"] = self._next_rv()
        return copy.deepcopy(obj)


class FakeEvents:
    """core/v1 Events: create and merge-patch, with scripted failures."""

    def __init__(self) -> None:
        self.events: dict[tuple[str, str], dict[str, Any]] = {}
        self.calls: list[str] = []
        self.create_errors: list[BaseException] = []
        self.patch_errors: list[BaseException] = []

    async def create_namespaced_event(self, namespace: str, body: Any, *, _preload_content: bool = True) -> Any:
        await asyncio.sleep(0)
        self.calls.append("create")
        if self.create_errors:
            raise self.create_errors.pop(0)
        key = (namespace, body["metadata"]["name"])
        assert key not in self.events, "event names must be unique"
        self.events[key] = copy.deepcopy(body)
        return _answer(body, _preload_content)

    async def patch_namespaced_event(
        self, name: str, namespace: str, body: Any, *, _content_type: str, _preload_content: bool = True
    ) -> Any:
        await asyncio.sleep(0)
        assert _content_type == MERGE_PATCH
        self.calls.append("patch")
        if self.patch_errors:
            raise self.patch_errors.pop(0)
        if (namespace, name) not in self.events:
            raise api_error(404)
        self.events[(namespace, name)] = apply_merge_patch(self.events[(namespace, name)], body)
        return _answer(self.events[(namespace, name)], _preload_content)


class RawResponse:
    """What kubernetes_asyncio returns with `_preload_content=False`: the HTTP response."""

    def __init__(self, status: int, body: Any) -> None:
        self.status = status
        self.reason = "OK"
        self._body = json.dumps(body).encode()
        self.released = False

    async def read(self) -> bytes:
        return self._body

    def release(self) -> None:
        self.released = True


def _answer(body: Any, preload: bool) -> Any:
    return copy.deepcopy(body) if preload else RawResponse(201, body)
