"""A fault-injecting proxy between the daemon and the test kube-apiserver (loopback only).

The daemon's kubeconfig points at `http://127.0.0.1:PORT` (plain HTTP on loopback, the bearer
token in the kubeconfig); the proxy forwards every request to the real API server over TLS
(verified with the cluster CA) and, by a seeded plan, answers some with a fault instead:

- `500`, `503`, `429` (with `Retry-After: 1`): a Kubernetes `Status` body, nothing forwarded;
- `reset-request`: the connection is reset (RST) before forwarding: the request is lost;
- `reset-response`: forwarded, the API server acted on it, then the connection is reset: the
  answer is lost (the classic "did my write land?" case);
- `stall`: 2 s of silence, then forwarded;
- `hang`: never answered (only forced with `FaultPlan.first`): the client must time out itself;
- `watch-cut`: a watch stream is forwarded event by event and cut in the middle of a JSON line
  after a few events.

Every decision is drawn from `random.Random(f"{seed}|{verb}|{path}|{n}")` where `n` counts the
requests with that verb and path, so a run is reproducible as far as the daemon's own request
order is (it is not perfectly: concurrent workers interleave). Every request is counted by
(verb, resource), every fault by kind, and every MachineSet PATCH is recorded with its body and
the API server's answer, so tests can assert "exactly one successful patch per MachineSet".

Tests can also hold traffic deterministically: `hold_watches()` parks new watch requests until
`release_watches()` (used around an etcd compaction), `cut_watches()` cuts every open watch, and
`hold_patches_after(n)` parks MachineSet PATCHes once `n` were forwarded, until `release_held()`
forwards them in arrival order, even when the client that sent them was killed meanwhile (its
request had fully arrived: a real API server would still act on it).

Bounded: it binds 127.0.0.1 only, refuses a non-loopback upstream, records at most
`MAX_RECORDS` patches, and stops by itself after `max_lifetime` seconds.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import random
import socket
import ssl
import struct
import time
from collections import Counter
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final
from urllib.parse import urlsplit

import aiohttp
import yaml
from aiohttp import web

from bootimage_controller.kube.client import classify_request

LOOPBACK: Final = frozenset({"127.0.0.1", "::1", "localhost"})
MAX_RECORDS: Final = 10_000
DEFAULT_LIFETIME: Final = 300.0
UPSTREAM_TIMEOUT: Final = 60.0
MAX_LINE: Final = 16 * 1024 * 1024
# Hop-by-hop and framing headers: the proxy frames its own answers.
_SKIP_HEADERS: Final = frozenset(
    {"connection", "keep-alive", "transfer-encoding", "content-length", "content-encoding", "host", "upgrade",
     "proxy-connection", "te", "trailer", "accept-encoding"}
)

ERROR_FAULTS: Final = ("500", "503", "429")
_STATUS_REASONS: Final = {"500": "InternalError", "503": "ServiceUnavailable", "429": "TooManyRequests"}


@dataclass(frozen=True)
class FaultPlan:
    """What to inject. Rates are probabilities per request, drawn once per request:
    `error_rate` (500/503/429, evenly), `reset_rate` (half before, half after forwarding) and
    `stall_rate` apply to non-watch requests; `watch_stall_rate` to watch requests;
    `watch_cut` = (a, b) cuts each watch stream in the middle of event k+1, k uniform in [a, b]."""

    seed: int = 0
    error_rate: float = 0.0
    reset_rate: float = 0.0
    stall_rate: float = 0.0
    watch_stall_rate: float = 0.0
    stall_seconds: float = 2.0
    watch_cut: tuple[int, int] | None = None
    # (verb, path suffix, fault, k): the first k such requests get that fault, whatever the dice
    # (aiohttp itself retries an idempotent request once when a reused connection drops).
    first: tuple[tuple[str, str, str, int], ...] = ()

    def __post_init__(self) -> None:
        if self.error_rate + self.reset_rate + self.stall_rate > 1.0:
            raise ValueError("fault rates add up to more than 1")
        if self.watch_cut is not None and not 1 <= self.watch_cut[0] <= self.watch_cut[1]:
            raise ValueError("watch_cut needs 1 <= a <= b: every cut watch must deliver an event first")

    def choose(self, rng: random.Random, watch: bool) -> str | None:
        roll = rng.random()
        if watch:
            return "stall" if roll < self.watch_stall_rate else None
        if roll < self.error_rate:
            return rng.choice(ERROR_FAULTS)
        roll -= self.error_rate
        if roll < self.reset_rate:
            return rng.choice(("reset-request", "reset-response"))
        roll -= self.reset_rate
        if roll < self.stall_rate:
            return "stall"
        return None


@dataclass(frozen=True)
class PatchRecord:
    """One MachineSet PATCH that reached the proxy, and what became of it."""

    name: str
    ops: Any  # the JSON patch (a list of ops) as sent
    status: int | None  # the API server's answer; None when it never got the request
    delivered: bool  # the answer reached the client
    late: bool  # forwarded after its client had gone (held, then released after a kill)

    @property
    def applied(self) -> bool:
        return self.status is not None and 200 <= self.status < 300

    @property
    def writes_spec(self) -> bool:
        return isinstance(self.ops, list) and any(
            op.get("op") != "test" and str(op.get("path", "")).startswith("/spec/") for op in self.ops
        )


@dataclass
class ProxyStats:
    requests: Counter[tuple[str, str]] = field(default_factory=Counter)  # (verb, resource) -> n
    faults: Counter[str] = field(default_factory=Counter)  # fault kind -> n
    answers: Counter[tuple[str, str, int]] = field(default_factory=Counter)  # (verb, resource, code) -> n
    gone_410: Counter[str] = field(default_factory=Counter)  # resource -> 410s seen on list/watch
    hang_seconds: list[float] = field(default_factory=list)  # how long each `hang` lasted
    # Seconds from a `watch-cut` fault to the client's next watch of the same thing.
    reconnect_gaps: list[float] = field(default_factory=list)
    patches: list[PatchRecord] = field(default_factory=list)

    def total_requests(self) -> int:
        return sum(self.requests.values())

    def applied_spec_patches(self) -> Counter[str]:
        """MachineSet name -> successful PATCHes that changed its spec (boot image writes)."""
        return Counter(p.name for p in self.patches if p.applied and p.writes_spec)

    def summary(self) -> dict[str, Any]:
        by_verb: Counter[str] = Counter()
        for (verb, _resource), n in self.requests.items():
            by_verb[verb] += n
        conflicts = sum(n for (verb, res, code), n in self.answers.items() if res == "machinesets" and code in (409, 422))
        return {
            "requests": self.total_requests(),
            "by_verb": dict(sorted(by_verb.items())),
            "faults": dict(sorted(self.faults.items())),
            "machineset_patches": len(self.patches),
            "machineset_patches_applied": sum(1 for p in self.patches if p.applied),
            "machineset_patch_conflicts": conflicts,
            # Applied by the API server, answer never delivered: the daemon cannot know it wrote.
            "machineset_patches_answer_lost": sum(1 for p in self.patches if p.applied and not p.delivered),
            "by_resource": {f"{verb} {res}": n for (verb, res), n in sorted(self.requests.items())},
            "gone_410": dict(sorted(self.gone_410.items())),
            "hangs_ended_after": [round(t, 1) for t in self.hang_seconds],
            "max_watch_reconnect_gap": round(max(self.reconnect_gaps), 2) if self.reconnect_gaps else None,
        }


@dataclass
class _Held:
    name: str
    go: asyncio.Event = field(default_factory=asyncio.Event)
    done: asyncio.Event = field(default_factory=asyncio.Event)


class FaultProxy:
    """`async with FaultProxy(upstream, ca_file, plan) as proxy:`; `proxy.url`, `proxy.kubeconfig(...)`."""

    def __init__(
        self, upstream: str, ca_file: Path, plan: FaultPlan | None = None, *, max_lifetime: float = DEFAULT_LIFETIME
    ) -> None:
        parts = urlsplit(upstream)
        if parts.hostname not in LOOPBACK:
            raise ValueError(f"the fault proxy only forwards to loopback, not {upstream}")
        self.upstream = upstream.rstrip("/")
        self.ca_file = ca_file
        self.plan = plan or FaultPlan()
        self.max_lifetime = max_lifetime
        self.stats = ProxyStats()
        self.port = 0
        self._seen: Counter[tuple[str, str]] = Counter()
        # Open watch streams by serial number (aiohttp requests are mappings, not hashable).
        self._watches: dict[int, tuple[web.BaseRequest, aiohttp.ClientResponse]] = {}
        self._watch_serial = 0
        self._cut_at: dict[str, float] = {}  # watch identity -> when a `watch-cut` fault ended it
        self._watch_gate = asyncio.Event()
        self._watch_gate.set()
        self._hold_after: int | None = None
        self._forwarded_patches = 0
        self._held: list[_Held] = []
        self._session: aiohttp.ClientSession | None = None
        self._runner: web.AppRunner | None = None
        self._lifetime: asyncio.TimerHandle | None = None
        self._closed = False

    # ---- lifecycle ----------------------------------------------------------------------------------
    async def __aenter__(self) -> FaultProxy:
        await self.start()
        return self

    async def __aexit__(self, *_exc: object) -> None:
        await self.close()

    async def start(self) -> None:
        context = ssl.create_default_context(cafile=str(self.ca_file))
        self._session = aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(ssl=context, limit=64),
            timeout=aiohttp.ClientTimeout(total=None, connect=10),
            auto_decompress=False,
        )
        app = web.Application(client_max_size=16 * 1024 * 1024)
        app.router.add_route("*", "/{tail:.*}", self._handle)
        self._runner = web.AppRunner(app, access_log=None, shutdown_timeout=1.0, handle_signals=False)
        await self._runner.setup()
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.bind(("127.0.0.1", 0))  # loopback only
        self.port = int(sock.getsockname()[1])
        await web.SockSite(self._runner, sock).start()
        loop = asyncio.get_running_loop()
        self._lifetime = loop.call_later(self.max_lifetime, lambda: loop.create_task(self.close()))

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self._lifetime is not None:
            self._lifetime.cancel()
        self._watch_gate.set()
        for held in self._held:
            held.go.set()
        self.cut_watches(count=False)
        if self._runner is not None:
            await self._runner.cleanup()
        if self._session is not None:
            await self._session.close()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def kubeconfig(self, path: Path, token: str) -> Path:
        """A kubeconfig that reaches the API server through this proxy, as the owner of `token`."""
        config = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "proxy", "cluster": {"server": self.url}}],
            "users": [{"name": "user", "user": {"token": token}}],
            "contexts": [{"name": "proxy", "context": {"cluster": "proxy", "user": "user"}}],
            "current-context": "proxy",
        }
        path.write_text(yaml.safe_dump(config, sort_keys=False))
        path.chmod(0o600)
        return path

    # ---- test controls ------------------------------------------------------------------------------
    def hold_watches(self) -> None:
        """Park new watch requests (they are forwarded, unchanged, on `release_watches`)."""
        self._watch_gate.clear()

    def release_watches(self) -> None:
        self._watch_gate.set()

    def cut_watches(self, *, count: bool = True) -> int:
        """Cut every open watch stream now; returns how many were cut."""
        cut = 0
        for request, upstream in list(self._watches.values()):
            _reset(request)
            upstream.close()
            cut += 1
        self._watches.clear()
        if count and cut:
            self.stats.faults["watch-cut-on-demand"] += cut
        return cut

    @property
    def open_watches(self) -> int:
        return len(self._watches)

    def hold_patches_after(self, forwarded: int) -> None:
        """Park every MachineSet PATCH that arrives once `forwarded` of them were forwarded."""
        self._hold_after = forwarded

    @property
    def held(self) -> int:
        return sum(1 for h in self._held if not h.go.is_set())

    async def release_held(self) -> int:
        """Forward the parked PATCHes one at a time, oldest first; stop holding. Returns how many."""
        self._hold_after = None
        released = 0
        while True:
            pending = [h for h in self._held if not h.go.is_set()]
            if not pending:
                break
            pending[0].go.set()
            await pending[0].done.wait()
            released += 1
        self._held.clear()
        return released

    async def wait_until(self, check: Any, timeout: float, what: str) -> None:
        deadline = time.monotonic() + timeout
        while not check():
            if time.monotonic() > deadline:
                raise AssertionError(f"proxy: timed out after {timeout}s waiting for {what}")
            await asyncio.sleep(0.05)

    # ---- the handler ----------------------------------------------------------------------------------
    async def _handle(self, request: web.Request) -> web.StreamResponse:
        verb, resource = classify_request(request.method, request.path, list(request.query.items()))
        self.stats.requests[(verb, resource)] += 1
        n = self._seen[(verb, request.path)]
        self._seen[(verb, request.path)] += 1
        rng = random.Random(f"{self.plan.seed}|{verb}|{request.path}|{n}")
        fault = self.plan.choose(rng, watch=verb == "watch")
        fault = next(
            (f for v, suffix, f, k in self.plan.first if v == verb and n < k and request.path.endswith(suffix)), fault
        )
        body = await request.read()
        if fault is not None:
            self.stats.faults[fault] += 1
        if fault in ERROR_FAULTS:
            assert fault is not None
            self.stats.answers[(verb, resource, int(fault))] += 1
            return _status_response(int(fault))
        if fault == "reset-request":
            _reset(request)
            return web.Response(status=500)  # never sent: the connection is gone
        if fault == "stall":
            await asyncio.sleep(self.plan.stall_seconds)
        if fault == "hang":
            await self._hang(request)
            return web.Response(status=500)  # never sent: the client gave up, or the proxy closed
        if verb == "watch":
            return await self._forward_watch(request, resource, rng)
        record_patch = verb == "patch" and resource == "machinesets"
        held = await self._maybe_hold(request) if record_patch else None
        try:
            # Shielded: a client that disconnects (or was killed) does not stop a request that arrived.
            status, headers, data = await asyncio.shield(self._forward(request, body))
            self.stats.answers[(verb, resource, status)] += 1
            if status == 410:
                self.stats.gone_410[resource] += 1
            late = request.transport is None or request.transport.is_closing()
            if record_patch:
                self._record_patch(request, body, status, delivered=fault != "reset-response" and not late, late=late)
        finally:
            if held is not None:
                held.done.set()  # `release_held` forwards the next parked PATCH only now
        if fault == "reset-response":
            _reset(request)
        return web.Response(status=status, body=data, headers=headers)

    async def _hang(self, request: web.Request) -> None:
        """Say nothing until the client gives up on the request (or the proxy closes)."""
        started = time.monotonic()
        while not self._closed and request.transport is not None and not request.transport.is_closing():
            await asyncio.sleep(0.1)
        self.stats.hang_seconds.append(time.monotonic() - started)
        _reset(request)

    async def _maybe_hold(self, request: web.Request) -> _Held | None:
        held = None
        if self._hold_after is not None and self._forwarded_patches >= self._hold_after:
            held = _Held(request.path.rsplit("/", 1)[-1])
            self._held.append(held)
            await held.go.wait()
        self._forwarded_patches += 1
        return held

    def _record_patch(self, request: web.Request, body: bytes, status: int | None, *, delivered: bool, late: bool) -> None:
        if len(self.stats.patches) >= MAX_RECORDS:
            return
        try:
            ops = json.loads(body)
        except ValueError:
            ops = None
        name = request.path.rsplit("/", 1)[-1]
        self.stats.patches.append(PatchRecord(name, ops, status, delivered, late))
        if late:
            self.stats.faults["late-write-after-kill"] += 1

    async def _forward(self, request: web.Request, body: bytes) -> tuple[int, dict[str, str], bytes]:
        assert self._session is not None
        async with self._session.request(
            request.method,
            self.upstream + request.path_qs,
            headers=_forward_headers(request.headers),
            data=body or None,
            timeout=aiohttp.ClientTimeout(total=UPSTREAM_TIMEOUT),
        ) as upstream:
            data = await upstream.read()
            return upstream.status, _answer_headers(upstream.headers), data

    async def _forward_watch(self, request: web.Request, resource: str, rng: random.Random) -> web.StreamResponse:
        identity = _watch_identity(request)
        cut_at = self._cut_at.pop(identity, None)
        if cut_at is not None:
            self.stats.reconnect_gaps.append(time.monotonic() - cut_at)
        await self._watch_gate.wait()
        assert self._session is not None
        cut_after = rng.randint(*self.plan.watch_cut) if self.plan.watch_cut else None
        upstream = await self._session.request(
            request.method, self.upstream + request.path_qs, headers=_forward_headers(request.headers)
        )
        self._watch_serial += 1
        key = self._watch_serial
        self._watches[key] = (request, upstream)
        response = web.StreamResponse(status=upstream.status, headers=_answer_headers(upstream.headers))
        if upstream.status == 410:
            self.stats.gone_410[resource] += 1
        events = 0
        try:
            await response.prepare(request)
            while True:
                line = await _read_line(upstream)
                if not line:
                    break
                if _is_gone_event(line):
                    self.stats.gone_410[resource] += 1
                if cut_after is not None and events >= cut_after and len(line) > 2:
                    # Half a JSON line, then a reset: the client holds an unparseable fragment.
                    await response.write(line[: len(line) // 2])
                    await asyncio.sleep(0.01)  # let the fragment leave before the reset
                    self.stats.faults["watch-cut"] += 1
                    self._cut_at[identity] = time.monotonic()
                    _reset(request)
                    return response
                await response.write(line)
                events += 1
            await response.write_eof()
        except (TimeoutError, aiohttp.ClientError, ConnectionError):
            pass  # cut on demand, or the client went away
        finally:
            self._watches.pop(key, None)
            upstream.close()
        return response


async def _read_line(upstream: aiohttp.ClientResponse) -> bytes:
    """One watch event line (b"" at the end of the stream); events may be large (ConfigMaps)."""
    return await upstream.content.readuntil(b"\n", max_size=MAX_LINE)


def _watch_identity(request: web.BaseRequest) -> str:
    """What a watch is of: its path and selectors (two informers may share a path)."""
    query = request.query
    return f"{request.path}?{query.get('labelSelector', '')}&{query.get('fieldSelector', '')}"


def _forward_headers(headers: Any) -> dict[str, str]:
    out = {k: v for k, v in headers.items() if k.lower() not in _SKIP_HEADERS}
    out["Accept-Encoding"] = "identity"  # keep bodies line-readable
    return out


def _answer_headers(headers: Any) -> dict[str, str]:
    return {k: v for k, v in headers.items() if k.lower() not in _SKIP_HEADERS}


def _status_response(code: int) -> web.Response:
    reason = _STATUS_REASONS[str(code)]
    status = {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": f"injected by the fault proxy: {reason}",
        "reason": reason,
        "code": code,
    }
    headers = {"Retry-After": "1"} if code == 429 else {}
    return web.json_response(status, status=code, headers=headers)


def _reset(request: web.BaseRequest) -> None:
    """Close the client's connection with a TCP RST (SO_LINGER 0), no answer."""
    transport = request.transport
    if transport is None or transport.is_closing():
        return
    sock = transport.get_extra_info("socket")
    if sock is not None:
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    transport.abort()


def _is_gone_event(line: bytes) -> bool:
    if b'"ERROR"' not in line:
        return False
    try:
        event = json.loads(line)
    except ValueError:
        return False
    return bool(event.get("type") == "ERROR" and (event.get("object") or {}).get("code") == 410)


@contextlib.asynccontextmanager
async def fault_proxy(upstream: str, ca_file: Path, plan: FaultPlan | None = None) -> AsyncIterator[FaultProxy]:
    async with FaultProxy(upstream, ca_file, plan) as proxy:
        yield proxy
