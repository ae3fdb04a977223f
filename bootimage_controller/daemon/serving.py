"""`/healthz`, `/readyz` and `/metrics`: the daemon's HTTP endpoints (aiohttp), apart from
`observability` so that the one-shot commands never import a web server.
"""

from __future__ import annotations

import asyncio
import socket
import ssl
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import structlog
from aiohttp import web
from prometheus_client import CollectorRegistry

from ..observability import REGISTRY
from .exposition import metrics_handler

log = structlog.get_logger(__name__)

# --- health and metrics HTTP server --------------------------------------------------------------

ReadyCheck = Callable[[], Mapping[str, bool]]


@dataclass(frozen=True)
class Address:
    host: str
    port: int

    @classmethod
    def parse(cls, text: str) -> Address:
        """`host:port`, `:port` (all interfaces) or `[v6]:port`; port 0 picks a free port."""
        host, sep, port = text.rpartition(":")
        if not sep or not port.isdigit() or int(port) > 65535:
            raise ValueError(f"invalid address {text!r}: expected host:port")
        if host.startswith("[") and host.endswith("]"):
            host = host[1:-1]
        return cls(host, int(port))


def _listen(addr: Address) -> socket.socket:
    if addr.host in ("", "0.0.0.0", "::") and socket.has_dualstack_ipv6():
        return socket.create_server(("", addr.port), family=socket.AF_INET6, dualstack_ipv6=True)
    host = addr.host or "0.0.0.0"
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    return socket.create_server((host, addr.port), family=family)


# Each tick wakes an idle daemon, and a wakeup of the event loop costs about 0.3-0.45 ms of CPU on
# a 2-core VM: at 1 s the ticks were 60 of its 77 wakeups a minute, settled (issue 48,
# docs/benchmarks.md "Footprint"). A loop stuck for good fails the kubelet's probe by its timeout
# anyway; the tick tells a loop that answers, but starved (every tick late by `max_loop_lag`).
HEARTBEAT_INTERVAL = 30.0


class LoopHeartbeat:
    """A task that ticks every `interval`; a stale tick means the event loop is starved or stuck."""

    def __init__(self, interval: float = HEARTBEAT_INTERVAL, clock: Callable[[], float] = time.monotonic) -> None:
        self.interval = interval
        self._clock = clock
        self.last_tick = clock()
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self.last_tick = self._clock()
        self._task = asyncio.get_running_loop().create_task(self._run(), name="loop-heartbeat")

    async def _run(self) -> None:
        while True:
            self.last_tick = self._clock()
            await asyncio.sleep(self.interval)

    def lag(self) -> float:
        return max(0.0, self._clock() - self.last_tick - self.interval)

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None


class HealthServer:
    """Serves `/healthz` and `/readyz` on `health_addr`, `/metrics` on `metrics_addr`.

    Equal addresses (as written, so two `127.0.0.1:0` share one free port) share one listener
    serving all three paths; different ones get a listener each. `ready` returns named checks
    (e.g. `{"informers-synced": True, "leader-election": True}`); `/readyz` is 200 only when all
    pass and lists the failing ones otherwise, as the kube-apiserver's `/readyz?verbose` does.
    """

    def __init__(
        self,
        health_addr: str,
        metrics_addr: str,
        ready: ReadyCheck,
        registry: CollectorRegistry = REGISTRY,
        max_loop_lag: float = 10.0,
        *,
        metrics_ssl: ssl.SSLContext | None = None,
        metrics_middlewares: Sequence[Any] = (),
        heartbeat: LoopHeartbeat | None = None,
    ) -> None:
        """`metrics_ssl` / `metrics_middlewares`: TLS and access checks for `/metrics` only (see
        metrics_security); they need `/metrics` on its own address, probes stay plain.
        `heartbeat`: what `/healthz` reads the event loop's lag from (a default one)."""
        self._metrics_ssl = metrics_ssl
        self._metrics_middlewares = tuple(metrics_middlewares)
        if (metrics_ssl is not None or self._metrics_middlewares) and health_addr == metrics_addr:
            raise ValueError("--metrics-addr must differ from --health-addr when /metrics is served over TLS")
        self._health = Address.parse(health_addr)
        self._metrics = Address.parse(metrics_addr)
        self._ready = ready
        self._registry = registry
        self._max_loop_lag = max_loop_lag
        self._heartbeat = heartbeat or LoopHeartbeat()
        self._runners: list[web.AppRunner] = []
        self.health_port = 0
        self.metrics_port = 0

    @property
    def shared(self) -> bool:
        return self._health == self._metrics

    async def start(self) -> None:
        self._heartbeat.start()
        if self.shared:
            port = await self._serve(self._health, health=True, metrics=True)
            self.health_port = self.metrics_port = port
        else:
            self.health_port = await self._serve(self._health, health=True, metrics=False)
            self.metrics_port = await self._serve(self._metrics, health=False, metrics=True)
        log.info("serving health and metrics", health_port=self.health_port, metrics_port=self.metrics_port)

    async def _serve(self, addr: Address, *, health: bool, metrics: bool) -> int:
        secured = metrics and not health
        app = web.Application(middlewares=list(self._metrics_middlewares) if secured else [])
        if health:
            app.router.add_get("/healthz", self._healthz)
            app.router.add_get("/readyz", self._readyz)
        if metrics:
            # prometheus-client's encoders, streamed: content negotiation (OpenMetrics), `name[]`
            # filters, gzip (exposition.py says why not its own handler).
            app.router.add_get("/metrics", metrics_handler(self._registry))
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        self._runners.append(runner)
        sock = _listen(addr)
        await web.SockSite(runner, sock, ssl_context=self._metrics_ssl if secured else None).start()
        port: int = sock.getsockname()[1]
        return port

    async def stop(self) -> None:
        for runner in reversed(self._runners):
            await runner.cleanup()
        self._runners.clear()
        await self._heartbeat.stop()

    async def _healthz(self, _request: web.Request) -> web.Response:
        lag = self._heartbeat.lag()
        if lag > self._max_loop_lag:
            return web.Response(status=500, text=f"event loop stalled for {lag:.1f}s\n")
        return web.Response(text="ok\n")

    async def _readyz(self, _request: web.Request) -> web.Response:
        try:
            checks = dict(self._ready())
        except Exception as exc:  # a broken check must not turn into a 500 traceback page
            log.warning("readiness check failed", error=str(exc))
            return web.Response(status=500, text=f"readiness check raised: {exc}\n")
        lines = [f"[{'+' if ok else '-'}]{name} {'ok' if ok else 'failed'}" for name, ok in checks.items()]
        ok = all(checks.values())
        body = "\n".join([*lines, "readyz check passed" if ok else "readyz check failed"]) + "\n"
        return web.Response(status=200 if ok else 503, text=body)

