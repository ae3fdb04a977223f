"""An informer: a local cache of one kind of object kept current by list + watch.

client-go's reflector/informer pattern, in one asyncio task:
1. LIST (paged, a consistent read), replace the cache, emit add/update/delete for the difference
   with what the cache held, set `has_synced`. Not client-go's resourceVersion "0" (answered from
   the API server's watch cache): that is twice as fast for 1,000 MachineSets, but a 1.20 server
   ignores `limit` there, and decoding 5,000 MachineSets in one page took the daemon's peak
   memory from 138 to 169 MiB; it can also be stale, which `run --once` cannot afford.
2. WATCH from the list's resourceVersion with bookmarks and a server-side timeout; apply each
   event to the cache and emit it. A timeout ends the stream normally: watch again from the last
   resourceVersion seen (bookmarks keep it fresh on quiet selectors).
3. 410 Gone (an HTTP 410, or an ERROR event with code 410, after etcd compaction): back to 1. The
   diff in step 1 delivers every change made while the watch was broken, deletions included.
4. Any other error: capped exponential backoff, then watch (or list) again.

Objects are the API server's JSON as dicts (`kind`/`apiVersion` filled in for list items, which
the server omits for built-in kinds). Handlers run synchronously on the event loop and must not
block or mutate the objects: they typically put a key on a `WorkQueue`.

kubernetes_asyncio's `Watch` helper is not used: it deserialises into models we do not want, sends
a stale resourceVersion once more after a 410 when no timeout is set, and hides the HTTP status
of the watch request. Reading the newline-delimited JSON stream ourselves is shorter than working
around it.
"""

from __future__ import annotations

import asyncio
import builtins
import json
import logging
import random
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

import structlog
from kubernetes_asyncio.client import ApiextensionsV1Api, CustomObjectsApi
from kubernetes_asyncio.client.exceptions import ApiException

from .client import raise_for_status, read_json
from .core_api import CoreApi
from .retry import Backoff, describe

log = structlog.get_logger(__name__)

KubeObject = dict[str, Any]
AddHandler = Callable[[KubeObject], None]
UpdateHandler = Callable[[KubeObject, KubeObject], None]
DeleteHandler = Callable[[KubeObject], None]
ManagedFieldsFilter = Callable[[list[Any]], list[Any]]

LIST_PAGE_SIZE = 500
LIST_TIMEOUT = 60.0
CONNECT_TIMEOUT = 10.0
# A watch that ends this quickly without events counts as a failure (backoff), not a timeout.
MIN_HEALTHY_WATCH = 1.0
# A LIST refused with 403 on an optional kind is tried again this often (seconds), not on the
# backoff: a left-out part of the install must not show up as a rising count of refused requests.
FORBIDDEN_RETRY = 600.0
# Watches end after this long and are re-opened (with up to 20% jitter): an idle daemon re-opens each
# at most once per 10 minutes (issue 48). Bookmarks keep the resourceVersion fresh meanwhile.
WATCH_TIMEOUT = 600.0
# A kind that is not served (no CRD) is learnt of from one watch of its CRD (`KindWatch`); where the
# CRD cannot be watched (no rights, no apiextensions API) it is listed this often instead.
ABSENT_POLL = 600.0
# An informer shares the strings of its cached objects (`SharedStrings`) once it holds this many.
# Sharing saves about 5 KB per MachineSet and costs about 55 us per listed or watched object: at
# 1,000 MachineSets that is 5 MB for 0.1 s of CPU a pass, worth it; at 100 it is half a megabyte
# for 11 ms on the way to the first patch (issue 36), and every smaller informer (nodes, the
# ConfigMaps, the singletons) never gets there.
SHARE_STRINGS_FROM = 1000


def object_key(obj: KubeObject) -> str:
    """`namespace/name`, or `name` for cluster-scoped objects (client-go's MetaNamespaceKeyFunc)."""
    meta = obj.get("metadata") or {}
    namespace = meta.get("namespace")
    name = str(meta.get("name", ""))
    return f"{namespace}/{name}" if namespace else name


def resource_version(obj: KubeObject) -> str | None:
    rv = (obj.get("metadata") or {}).get("resourceVersion")
    return str(rv) if rv is not None else None


def _name_selector(name: str | None, field_selector: str | None) -> str | None:
    parts = [p for p in (f"metadata.name={name}" if name else None, field_selector) if p]
    return ",".join(parts) or None


@dataclass(frozen=True)
class ListWatch:
    """What an informer lists and watches: a kubernetes_asyncio list method, its positional
    arguments, and selectors (so only what is needed crosses the wire)."""

    resource: str
    list_fn: Callable[..., Awaitable[Any]]
    args: tuple[Any, ...] = ()
    label_selector: str | None = None
    field_selector: str | None = None
    # A custom resource's CustomResourceDefinition (by name) and the version listed: while the kind
    # is not served, its informer watches that CRD instead of listing the kind (`KindWatch`).
    crd: ListWatch | None = None
    version: str = ""

    @classmethod
    def custom_objects(
        cls,
        api: Any,
        group: str,
        version: str,
        plural: str,
        namespace: str | None = None,
        *,
        name: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
    ) -> ListWatch:
        """A custom resource, namespaced (`namespace` given) or cluster-scoped."""
        co = CustomObjectsApi(api)
        fields = _name_selector(name, field_selector)
        crd = cls.custom_resource_definition(api, f"{plural}.{group}")
        if namespace is None:
            return cls(plural, co.list_cluster_custom_object, (group, version, plural), label_selector, fields,
                       crd, version)
        return cls(plural, co.list_namespaced_custom_object, (group, version, namespace, plural), label_selector,
                   fields, crd, version)

    @classmethod
    def custom_resource_definition(cls, api: Any, name: str) -> ListWatch:
        """One CustomResourceDefinition, by name (`machinesets.cluster.x-k8s.io`)."""
        return cls("customresourcedefinitions", ApiextensionsV1Api(api).list_custom_resource_definition, (),
                   None, _name_selector(name, None))

    @classmethod
    def config_maps(
        cls,
        api: Any,
        namespace: str,
        *,
        name: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
    ) -> ListWatch:
        core = CoreApi(api)
        fields = _name_selector(name, field_selector)
        return cls("configmaps", core.list_namespaced_config_map, (namespace,), label_selector, fields)

    @classmethod
    def nodes(
        cls,
        api: Any,
        *,
        label_selector: str | None = None,
        field_selector: str | None = None,
    ) -> ListWatch:
        return cls("nodes", CoreApi(api).list_node, (), label_selector, field_selector)

    def selectors(self) -> dict[str, str]:
        out: dict[str, str] = {}
        if self.label_selector:
            out["label_selector"] = self.label_selector
        if self.field_selector:
            out["field_selector"] = self.field_selector
        return out

    def describe(self) -> str:
        where = "/".join(str(a) for a in self.args if a)
        sel = ",".join(f"{k}={v}" for k, v in self.selectors().items())
        return f"{where or self.resource}" + (f" [{sel}]" if sel else "")


@dataclass(frozen=True)
class _Handler:
    on_add: AddHandler | None
    on_update: UpdateHandler | None
    on_delete: DeleteHandler | None


class Informer:
    """Cache + event source for one `ListWatch`. Run with `start()` (or `await run()`), end with `stop()`."""

    def __init__(
        self,
        source: ListWatch,
        *,
        watch_timeout: float = WATCH_TIMEOUT,
        backoff: Backoff | None = None,
        name: str | None = None,
        absent_ok: bool = False,
        forbidden_ok: bool = False,
        share_strings_from: int = SHARE_STRINGS_FROM,
        trim: Callable[[KubeObject], KubeObject] | None = None,
        page_size: int = LIST_PAGE_SIZE,
        keep_managed_fields: ManagedFieldsFilter | None = None,
    ) -> None:
        """`absent_ok`: a 404 on LIST (the kind is not served, e.g. its CRD is not installed)
        counts as synced-and-empty, `absent` says so, and the kind is listed again once its CRD
        serves it (`KindWatch`: one watch of the CRD, re-opened every 10 minutes; without rights on
        CRDs, a LIST every `ABSENT_POLL`), not every half minute (issue 48). `forbidden_ok`: so does a 403 (served, but no rights to list it:
        an optional part of the install left out, the Cluster API's), with `forbidden` set and a
        retry only every FORBIDDEN_RETRY seconds, so refused requests do not pile up. Only for kinds
        the daemon can do without: a refused read of what decides a write (the MCO's version, say)
        must keep the caches unsynced, so nothing is written on a guess. Otherwise the informer
        stays unsynced until the list works. `share_strings_from`: the cache size from which cached
        objects share their strings (`SharedStrings`); objects cached before it is reached keep
        their own. `trim`: what the cache keeps of each object (the rest is dropped as it arrives;
        handlers see the trimmed object), for kinds of which only a few fields are read.
        `page_size`: objects per list page; a page is decoded whole before it is trimmed, so a
        trimmed cache of large objects lists in smaller pages (its peak is a page, not the list).
        `keep_managed_fields`: the `metadata.managedFields` entries the cache keeps (the caller knows
        which writers matter; core.manager's `other_writer_entries` for the daemon); none when None."""
        self.source = source
        self.keep_managed_fields = keep_managed_fields
        self.page_size = page_size
        self.trim = trim
        self.share_strings_from = share_strings_from
        self.absent_ok = absent_ok
        self.forbidden_ok = forbidden_ok
        self.absent = False
        self.forbidden = False
        self.name = name or source.resource
        self.watch_timeout = watch_timeout
        self.backoff = backoff or Backoff(base=0.5, cap=30.0)
        self.has_synced = asyncio.Event()
        self.resource_version: str | None = None
        self.last_error: str | None = None
        self.list_count = 0
        self._events_since_list = 0
        self._events_applied = 0  # every watch event ever applied (bookmarks too): progress
        self._cache: dict[str, KubeObject] = {}
        self._handlers: list[_Handler] = []
        self._task: asyncio.Task[None] | None = None
        self._stopping = False
        self._kind_watch: KindWatch | None = None  # while absent: the watch of its CRD
        self._log = log.bind(informer=self.name, source=source.describe())

    # --- cache reads ---------------------------------------------------------------------------

    def get(self, key: str) -> KubeObject | None:
        return self._cache.get(key)

    def list(self) -> builtins.list[KubeObject]:
        return list(self._cache.values())

    def keys(self) -> builtins.list[str]:
        return list(self._cache)

    def __len__(self) -> int:
        return len(self._cache)

    async def wait_synced(self, timeout: float | None = None) -> bool:
        try:
            await asyncio.wait_for(self.has_synced.wait(), timeout)
        except TimeoutError:
            return False
        return True

    # --- handlers --------------------------------------------------------------------------------

    @property
    def handler_count(self) -> int:
        """How many handler sets `add_handler` registered."""
        return len(self._handlers)

    def add_handler(
        self,
        *,
        on_add: AddHandler | None = None,
        on_update: UpdateHandler | None = None,
        on_delete: DeleteHandler | None = None,
    ) -> None:
        """Register callbacks. Objects already cached are replayed to `on_add`, as in client-go."""
        handler = _Handler(on_add, on_update, on_delete)
        self._handlers.append(handler)
        if on_add is not None:
            for obj in list(self._cache.values()):
                self._call(on_add, obj)

    def _call(self, fn: Callable[..., None], *objs: KubeObject) -> None:
        try:
            fn(*objs)
        except Exception:  # one bad handler must not stop the cache from following the server
            self._log.exception("informer event handler failed", key=object_key(objs[-1]))

    def _emit_add(self, obj: KubeObject) -> None:
        for h in self._handlers:
            if h.on_add is not None:
                self._call(h.on_add, obj)

    def _emit_update(self, old: KubeObject, new: KubeObject) -> None:
        for h in self._handlers:
            if h.on_update is not None:
                self._call(h.on_update, old, new)

    def _emit_delete(self, obj: KubeObject) -> None:
        for h in self._handlers:
            if h.on_delete is not None:
                self._call(h.on_delete, obj)

    # --- lifecycle -----------------------------------------------------------------------------

    @property
    def started(self) -> bool:
        """Whether `start()` was ever called: an informer never started has asked nothing."""
        return self._task is not None

    def start(self) -> asyncio.Task[None]:
        """Run the informer in its own task (idempotent); `stop()` ends it."""
        if self._task is None or self._task.done():
            self._stopping = False
            self._task = asyncio.get_running_loop().create_task(
                self._list_and_watch(), name=f"informer-{self.name}"
            )
        return self._task

    async def run(self) -> None:
        """`start()` and wait: returns after `stop()`; cancelling it stops the informer."""
        task = self.start()
        try:
            await task
        except asyncio.CancelledError:
            current = asyncio.current_task()
            if self._stopping and not (current is not None and current.cancelling()):
                return  # stop() cancelled the inner task, nobody cancelled us
            raise

    async def stop(self) -> None:
        self._stopping = True
        task = self._task
        if task is not None and task is not asyncio.current_task() and not task.done():
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
        await self._stop_kind_watch()

    async def _list_and_watch(self) -> None:
        """List and watch until stopped or cancelled. API errors never end it."""
        need_list = True
        attempt = 0
        while not self._stopping:
            error: str | None = None
            applied_before = self._events_applied
            try:
                if need_list:
                    await self._relist()
                    need_list = False
                started = time.monotonic()
                events = await self._watch_once()
                if not events and time.monotonic() - started < MIN_HEALTHY_WATCH:
                    error = "watch closed at once"
            except asyncio.CancelledError:
                raise
            except ApiException as exc:
                error = describe(exc)
                if exc.status == 404:
                    if need_list and self.absent_ok:
                        self._mark_absent()
                    need_list = True  # a kind that vanished mid-watch (CRD deleted): list again
                elif exc.status == 403 and need_list and self.forbidden_ok:
                    self._mark_forbidden(error)
                elif exc.status == 410:
                    need_list = True
                    self._log.info("watch expired (410), re-listing", resource_version=self.resource_version)
                    # 410 straight after a list (no event since) would spin: back off instead.
                    if self._events_since_list:
                        error = None
            except Exception as exc:
                error = describe(exc)
            self.last_error = error
            if error is None:
                attempt = 0
                continue
            if self._events_applied > applied_before:
                # The stream broke after delivering events (a proxy or load balancer cutting long
                # connections): it was healthy, so reconnect promptly instead of escalating the
                # backoff at every cut. Only new events count, so this cannot spin.
                attempt = 0
            if self.absent and not self.forbidden and self.source.crd is not None:
                # Not served: wait for its CRD to serve it, not a list every backoff step.
                served = await self._until_served()
                if not served:
                    continue  # the CRD cannot be watched: list now, ABSENT_POLL after the last
            delay = FORBIDDEN_RETRY if self.forbidden else self.backoff.delay(attempt)
            attempt += 1
            self._log.log(
                logging.DEBUG if self.absent else logging.WARNING,
                "list/watch failed, retrying",
                error=error,
                phase="list" if need_list else "watch",
                attempt=attempt,
                retry_in=round(delay, 3),
            )
            await asyncio.sleep(delay)

    def _kept(self, obj: KubeObject, share: bool) -> KubeObject:
        """What the cache holds of a listed or watched object: the trimmed form when the informer
        has a `trim` (which keeps none of what `_cached_form` prunes or shares), else the object
        less its other writers' managedFields, its strings shared when `share`."""
        return self.trim(obj) if self.trim is not None else _cached_form(obj, share, self.keep_managed_fields)

    async def _until_served(self) -> bool:
        """While the kind is absent: True once its CRD serves it (then it is listed again at once,
        after a short backoff while the new CRD is established); False after `ABSENT_POLL` when the
        CRD cannot be watched (no rights on CRDs, no apiextensions API), so a LIST says instead."""
        assert self.source.crd is not None
        if self._kind_watch is None:
            self._kind_watch = KindWatch(self.source.crd, self.source.version)
            self._kind_watch.informer.start()
        watch = self._kind_watch
        while not self._stopping:
            try:
                async with asyncio.timeout(ABSENT_POLL):
                    await watch.served.wait()
                return True
            except TimeoutError:
                if not watch.usable():
                    return False
        return False

    async def _stop_kind_watch(self) -> None:
        watch, self._kind_watch = self._kind_watch, None
        if watch is not None:
            await watch.informer.stop()

    # --- list ----------------------------------------------------------------------------------

    async def _list_all(self) -> tuple[builtins.list[KubeObject], str | None]:
        items: builtins.list[KubeObject] = []
        cont: str | None = None
        rv: str | None = None
        share = False
        while True:
            kwargs: dict[str, Any] = {
                **self.source.selectors(),
                "limit": self.page_size,
                "_preload_content": False,
                "_request_timeout": LIST_TIMEOUT,
            }
            if cont:
                kwargs["_continue"] = cont
            page = await read_json(await self.source.list_fn(*self.source.args, **kwargs))
            kind = str(page.get("kind", ""))
            item_kind = kind[: -len("List")] if kind.endswith("List") else kind
            # Each decoded item is dropped as its cached form is made: a page of 500 MachineSets
            # never lives twice (decoded and cached), which was the peak of a 5,000 list.
            raw = page.pop("items", None) or []
            meta = page.get("metadata") or {}
            # Once a page was shared, so is the rest of the list: one list is one cache's worth.
            share = share or self._list_total(len(items) + len(raw), meta) >= self.share_strings_from
            raw.reverse()
            while raw:
                item = raw.pop()
                item.setdefault("apiVersion", page.get("apiVersion"))
                item.setdefault("kind", item_kind)
                items.append(self._kept(item, share))
                del item
            rv = meta.get("resourceVersion")
            cont = meta.get("continue")
            if not cont:
                return items, rv

    @staticmethod
    def _list_total(so_far: int, meta: Mapping[str, Any]) -> float:
        """How many objects a paged list holds: `so_far` and the server's `remainingItemCount`;
        unbounded when more pages follow and it does not say how many (then strings are shared:
        the list is at least a page long, and memory is the safe side)."""
        if not meta.get("continue"):
            return so_far
        remaining = meta.get("remainingItemCount")
        return so_far + remaining if isinstance(remaining, int) else float("inf")

    def _mark_forbidden(self, error: str) -> None:
        if not self.forbidden:
            self._log.warning("no rights to list this resource; treating it as empty until they are granted",
                              error=error, retry_every=FORBIDDEN_RETRY)
        self.forbidden = True
        self._mark_absent()

    def _mark_absent(self) -> None:
        if not self.absent and not self.forbidden:
            self._log.info("resource is not served by the API server; treating it as empty until it is")
        self.absent = True
        self.replace_all([], None)

    async def _relist(self) -> None:
        items, rv = await self._list_all()
        if self.absent:
            self._log.info("resource is served now")
            await self._stop_kind_watch()
        self.absent = False
        self.forbidden = False
        self.list_count += 1
        self._events_since_list = 0
        self.last_error = None
        self.replace_all(items, rv)

    def replace_all(self, items: builtins.list[KubeObject], rv: str | None) -> None:
        """Swap in a full listing, as a re-list does; emit add/update/delete for what differs from the
        cache. Public for a cache filled without a server (the reconcile tests)."""
        fresh = {object_key(o): o for o in items}
        old_cache = self._cache
        self._cache = fresh
        self.resource_version = rv
        added = updated = 0
        for key, obj in fresh.items():
            old = old_cache.get(key)
            if old is None:
                added += 1
                self._emit_add(obj)
            elif resource_version(old) != resource_version(obj):
                updated += 1
                self._emit_update(old, obj)
        gone = [old_cache[k] for k in old_cache.keys() - fresh.keys()]
        for obj in gone:
            self._emit_delete(obj)
        self._log.debug(
            "listed", count=len(fresh), resource_version=rv, added=added, updated=updated, deleted=len(gone)
        )
        if not self.has_synced.is_set():
            self._log.info("cache synced", count=len(fresh), resource_version=rv)
            self.has_synced.set()

    # --- watch ---------------------------------------------------------------------------------

    def _watch_timeout(self) -> int:
        # Jitter spreads reconnects of many informers (client-go: min timeout * (1 + rand)).
        return max(1, int(self.watch_timeout * (1.0 + 0.2 * random.random())))

    async def _watch_once(self) -> int:
        """One watch request until the server ends it; returns the number of events applied."""
        timeout = self._watch_timeout()
        resp = await self.source.list_fn(
            *self.source.args,
            **self.source.selectors(),
            watch=True,
            resource_version=self.resource_version,
            allow_watch_bookmarks=True,
            timeout_seconds=timeout,
            _preload_content=False,
            # connect, then per-read: longer than the server timeout so a silent stream is an error.
            _request_timeout=(CONNECT_TIMEOUT, timeout + 30),
        )
        events = 0
        try:
            await raise_for_status(resp)
            self.last_error = None  # connected: whatever failed before has recovered
            while not self._stopping:
                line = await resp.content.readline()
                if not line:
                    break  # server-side timeout: the normal end of a watch
                if line.strip():
                    self._apply(json.loads(line))
                    events += 1
        finally:
            resp.close()
        return events

    def _apply(self, event: dict[str, Any]) -> None:
        kind = event.get("type")
        obj = event.get("object") or {}
        if kind == "ERROR":
            code = obj.get("code") if isinstance(obj, dict) else None
            raise ApiException(status=code or 500, reason=f"{obj.get('reason')}: {obj.get('message')}")
        self._events_since_list += 1
        self._events_applied += 1
        rv = resource_version(obj)
        if kind == "BOOKMARK":
            if rv:
                self.resource_version = rv
            return
        key = object_key(obj)
        if kind in ("ADDED", "MODIFIED"):
            obj = self._kept(obj, len(self._cache) >= self.share_strings_from)
            old = self._cache.get(key)
            self._cache[key] = obj
            if old is None:
                self._emit_add(obj)
            else:
                self._emit_update(old, obj)
        elif kind == "DELETED":
            self._cache.pop(key, None)
            self._emit_delete(obj)
        else:
            self._log.warning("unknown watch event type", type=kind)
        if rv:
            self.resource_version = rv


class KindWatch:
    """Whether a CustomResourceDefinition serves one version of its kind, learnt from one watch of
    that CRD (by name), re-opened every `WATCH_TIMEOUT`: what an informer of an absent kind waits on
    instead of listing the kind (issue 48). The CRD is cached as three facts, not its schema."""

    def __init__(self, crd: ListWatch, version: str) -> None:
        self.version = version
        self.served = asyncio.Event()
        self.informer = Informer(crd, absent_ok=True, forbidden_ok=True, trim=trim_crd, name=f"crd:{crd.describe()}")
        self.informer.add_handler(on_add=self._seen, on_update=self._changed, on_delete=self._gone)

    def usable(self) -> bool:
        """The watch works: listed, with rights, on a server with CRDs."""
        i = self.informer
        return i.has_synced.is_set() and not i.absent and not i.forbidden

    def _seen(self, crd: KubeObject) -> None:
        if self.version in crd.get("served", ()) and crd.get("established"):
            self.served.set()

    def _changed(self, _old: KubeObject, crd: KubeObject) -> None:
        self._seen(crd)

    def _gone(self, _crd: KubeObject) -> None:
        self.served.clear()


def trim_crd(obj: KubeObject) -> KubeObject:
    """What `KindWatch` keeps of a CRD: its name and resourceVersion, the versions it serves, and
    whether it is Established (a CRD's schema can be hundreds of kilobytes)."""
    meta = obj.get("metadata") or {}
    versions = (obj.get("spec") or {}).get("versions") or []
    conditions = (obj.get("status") or {}).get("conditions") or []
    return {
        "metadata": {"name": meta.get("name"), "resourceVersion": meta.get("resourceVersion")},
        "served": [v.get("name") for v in versions if isinstance(v, dict) and v.get("served")],
        "established": any(isinstance(c, dict) and c.get("type") == "Established" and c.get("status") == "True"
                           for c in conditions),
    }


class SharedStrings:
    """One copy of each short string among every cached object.

    `json.loads` shares equal keys within one document only, and every watch event is its own
    document: 5,000 MachineSets held 5,000 copies of "providerSpec", of the region, of the
    instance type. Sharing keys and short values halves a cached MachineSet (about 11 KB of dicts,
    lists and strings down to 6 KB), and a 5,000-object list never exists twice. The objects are
    equal to what was read: only which `str` instance holds a value changes.

    It rebuilds an object that `json.loads` decoded (in C) after `_cached_form` has dropped
    `managedFields`: two thirds of a MachineSet's JSON objects are in there, so this costs half
    of what sharing every string in an `object_pairs_hook` did (about 55 instead of 100 µs for a
    4.5 KB watch event).

    The table is bounded: unique values (uids, timestamps, resourceVersions) enter it too, so when
    it is full it starts over, and the strings already shared stay with the objects that hold them.
    """

    MAX_LENGTH = 128

    def __init__(self, max_entries: int = 65536) -> None:
        self.max_entries = max_entries
        self._table: dict[str, str] = {}

    def __len__(self) -> int:
        return len(self._table)

    def share(self, obj: dict[str, Any]) -> dict[str, Any]:
        """A copy of `obj` whose keys and short strings are the table's."""
        if len(self._table) >= self.max_entries:
            self._table = {}
        return self._dict(obj)

    def _dict(self, obj: dict[str, Any]) -> dict[str, Any]:
        # Runs for every JSON object of every listed or watched object. Strings, most of the
        # values, are shared inline (a call per string made it ~15% slower); keys whatever their
        # length, as they are few.
        share = self._table.setdefault
        limit = self.MAX_LENGTH
        out = {}
        for key, value in obj.items():
            kind = value.__class__
            if kind is str:
                if len(value) <= limit:
                    value = share(value, value)
            elif kind is dict or kind is builtins.list:
                value = self._value(value)
            out[share(key, key)] = value
        return out

    def _value(self, value: Any) -> Any:
        kind = value.__class__
        if kind is dict:
            return self._dict(value)
        if kind is builtins.list:
            return [self._value(v) for v in value]
        if kind is str and len(value) <= self.MAX_LENGTH:
            return self._table.setdefault(value, value)
        return value


_SHARED = SharedStrings()


def _cached_form(obj: KubeObject, share: bool, keep: ManagedFieldsFilter | None) -> KubeObject:
    """What the cache keeps of an object, with shared strings when `share`: of
    `metadata.managedFields` (server-side-apply bookkeeping, often a third of a MachineSet's size)
    only the entries `keep` returns (the daemon's: writers that can keep the boot image field, SPEC
    rule 2b's `external`; usually none)."""
    meta = obj.get("metadata")
    if isinstance(meta, dict):
        entries = meta.pop("managedFields", None)
        if entries and keep is not None:
            kept = keep(entries)
            if kept:
                meta["managedFields"] = kept
    return _SHARED.share(obj) if share else obj
