"""Logging setup and redaction, the metric registry, and the health/metrics server."""

from __future__ import annotations

import io
import json
import logging
import weakref
from collections.abc import Iterator

import aiohttp
import pytest
import structlog

from bootimage_controller import observability as obs
from bootimage_controller.constants import METRIC_POOL_BOOT_IMAGE_AGE, METRIC_POOL_RELEASES_BEHIND
from bootimage_controller.daemon.serving import Address, HealthServer, LoopHeartbeat
from bootimage_controller.observability import (
    REDACTED,
    REGISTRY,
    choose_format,
    configure_logging,
    redact_secrets,
)


@pytest.fixture
def restore_logging() -> Iterator[None]:
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    yield
    root.handlers, root.level = handlers, level
    structlog.reset_defaults()


def test_redaction_masks_secret_keys_at_any_depth_and_keeps_the_rest() -> None:
    event = {
        "event": "calling cloud",
        "token": "t0p",
        "password": "pw",
        "client_secret": "cs",
        "aws_access_key_id": "AKIA-visible",
        "secret_name": "aws-cloud-credentials",
        "headers": {"Authorization": "Bearer abc.def", "Accept": "json"},
        "creds": [{"aws_secret_access_key": "sk", "region": "us-east-1"}],
        "message": "got 401 for Bearer eyJhbGciOi.payload.sig",
    }
    out = redact_secrets(None, "info", dict(event))
    assert out["token"] == out["password"] == out["client_secret"] == REDACTED
    assert out["headers"] == {"Authorization": REDACTED, "Accept": "json"}
    assert out["creds"] == [{"aws_secret_access_key": REDACTED, "region": "us-east-1"}]
    assert out["aws_access_key_id"] == "AKIA-visible"
    assert out["secret_name"] == "aws-cloud-credentials"
    assert "eyJhbGciOi" not in out["message"]
    assert out["event"] == "calling cloud"


def test_choose_format(monkeypatch: pytest.MonkeyPatch) -> None:
    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    assert choose_format(None, Tty()) == "console"
    assert choose_format(None, io.StringIO()) == "json"
    assert choose_format("json", Tty()) == "json"
    assert choose_format("console", io.StringIO()) == "console"
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "10.0.0.1")
    assert choose_format(None, Tty()) == "json"
    with pytest.raises(ValueError):
        choose_format("xml")


def test_json_logs_from_structlog_and_stdlib_share_one_format(restore_logging: None) -> None:
    out = io.StringIO()
    assert configure_logging("json", "INFO", stream=out) == "json"
    structlog.get_logger("bootimage_controller.test").info(
        "decision", name="w1", action="patch", token="s3cret"
    )
    logging.getLogger("aiohttp.client").warning("stdlib says %s", "hi")
    structlog.get_logger("x").debug("hidden at INFO")
    lines = [json.loads(line) for line in out.getvalue().splitlines()]
    assert len(lines) == 2
    ours, theirs = lines
    assert ours["event"] == "decision" and ours["action"] == "patch" and ours["level"] == "info"
    assert ours["logger"] == "bootimage_controller.test"
    assert ours["timestamp"].endswith("Z") and "T" in ours["timestamp"]
    assert ours["token"] == REDACTED
    assert "s3cret" not in out.getvalue()
    assert theirs["event"] == "stdlib says hi" and theirs["level"] == "warning"
    assert theirs["logger"] == "aiohttp.client"


def test_exceptions_are_rendered_in_json(restore_logging: None) -> None:
    out = io.StringIO()
    configure_logging("json", stream=out)
    try:
        raise RuntimeError("kaboom")
    except RuntimeError:
        structlog.get_logger("t").exception("failed")
    line = json.loads(out.getvalue())
    assert "RuntimeError: kaboom" in line["exception"]


def test_rest_client_body_logging_stays_off_at_debug(restore_logging: None) -> None:
    out = io.StringIO()
    configure_logging("json", "DEBUG", stream=out)
    logging.getLogger("kubernetes_asyncio.client.rest").debug(
        "response body: %s", '{"data":{"x":"c2VjcmV0"}}'
    )
    assert out.getvalue() == ""


def test_every_spec_metric_is_registered() -> None:
    obs.MACHINESETS.labels(kind="MachineSet", action="patch", reason="BootImageOutdated").set(2)
    obs.PATCHES.labels(result="success").inc()
    obs.RECONCILE_DURATION.observe(0.3)
    obs.API_REQUESTS.labels(verb="get", resource="configmaps", code="200").inc()
    obs.SKEW_UPGRADEABLE.set(1)
    obs.SKEW_ENFORCEMENT_NONE.set(0)
    obs.set_cluster_boot_image("9.6.20251212-1", "MachineSetRecord")
    get = REGISTRY.get_sample_value
    assert get("bootimage_controller_machinesets", {"kind": "MachineSet", "action": "patch", "reason": "BootImageOutdated"}) == 2
    assert (get("bootimage_controller_patches_total", {"result": "success"}) or 0) >= 1
    assert (get("bootimage_controller_reconcile_duration_seconds_count") or 0) >= 1
    assert get("bootimage_controller_skew_upgradeable") == 1
    assert get("bootimage_controller_skew_enforcement_none") == 0
    assert (
        get(
            "bootimage_controller_cluster_boot_image_info",
            {"release": "9.6.20251212-1", "source": "MachineSetRecord"},
        )
        == 1
    )


@pytest.mark.parametrize(
    ("text", "host", "port"),
    [
        ("127.0.0.1:8080", "127.0.0.1", 8080),
        (":9090", "", 9090),
        ("[::1]:0", "::1", 0),
        ("0.0.0.0:0", "0.0.0.0", 0),
    ],
)
def test_address_parse(text: str, host: str, port: int) -> None:
    assert Address.parse(text) == Address(host, port)


@pytest.mark.parametrize("text", ["8080", "host:", "host:http", "h:70000"])
def test_address_parse_rejects(text: str) -> None:
    with pytest.raises(ValueError):
        Address.parse(text)


async def fetch(port: int, path: str) -> tuple[int, str, str]:
    async with aiohttp.ClientSession() as session, session.get(f"http://127.0.0.1:{port}{path}") as resp:
        return resp.status, await resp.text(), resp.headers.get("Content-Type", "")


async def test_health_server_on_one_address() -> None:
    checks = {"informers-synced": False, "leader-election": True}
    server = HealthServer("127.0.0.1:0", "127.0.0.1:0", lambda: checks)
    await server.start()
    try:
        assert server.shared and server.health_port == server.metrics_port != 0
        port = server.health_port
        assert (await fetch(port, "/healthz"))[0] == 200
        status, body, _ = await fetch(port, "/readyz")
        assert status == 503
        assert "[-]informers-synced failed" in body and "[+]leader-election ok" in body
        checks["informers-synced"] = True
        assert (await fetch(port, "/readyz"))[0] == 200
        status, body, ctype = await fetch(port, "/metrics")
        assert status == 200 and ctype.startswith("text/plain")
        assert "# TYPE bootimage_controller_api_requests_total counter" in body
        assert "bootimage_controller_reconcile_duration_seconds_bucket" in body
    finally:
        await server.stop()


async def test_health_and_metrics_on_separate_ports() -> None:
    # Different address strings mean different listeners, each with its own free port.
    server = HealthServer("127.0.0.1:0", "localhost:0", lambda: {})
    await server.start()
    try:
        assert server.health_port != server.metrics_port
        assert (await fetch(server.health_port, "/healthz"))[0] == 200
        assert (await fetch(server.health_port, "/metrics"))[0] == 404
        assert (await fetch(server.metrics_port, "/metrics"))[0] == 200
        assert (await fetch(server.metrics_port, "/readyz"))[0] == 404
    finally:
        await server.stop()


async def test_readyz_reports_a_raising_check_as_not_ready() -> None:
    def broken() -> dict[str, bool]:
        raise RuntimeError("no elector")

    server = HealthServer("127.0.0.1:0", "127.0.0.1:0", broken)
    await server.start()
    try:
        status, body, _ = await fetch(server.health_port, "/readyz")
        assert status == 500 and "no elector" in body
    finally:
        await server.stop()


async def test_healthz_fails_when_the_event_loop_stalls() -> None:
    now = [0.0]
    server = HealthServer("127.0.0.1:0", "127.0.0.1:0", lambda: {}, max_loop_lag=5.0,
                          heartbeat=LoopHeartbeat(interval=3600, clock=lambda: now[0]))
    await server.start()
    try:
        assert (await fetch(server.health_port, "/healthz"))[0] == 200
        now[0] += 3600 + 10  # the heartbeat has not ticked for 10 s past its interval
        status, body, _ = await fetch(server.health_port, "/healthz")
        assert status == 500 and "stalled" in body
    finally:
        await server.stop()


async def test_metrics_negotiate_openmetrics_filter_by_name_and_carry_process_series() -> None:
    server = HealthServer("127.0.0.1:0", "127.0.0.1:0", lambda: {})
    await server.start()
    url = f"http://127.0.0.1:{server.metrics_port}/metrics"
    try:
        async with aiohttp.ClientSession() as session:
            async with session.get(url) as resp:
                body = await resp.text()
            assert "process_resident_memory_bytes" in body and "python_gc_objects_collected_total" in body
            assert 'python_info{' in body
            headers = {"Accept": "application/openmetrics-text; version=1.0.0"}
            async with session.get(url, headers=headers) as resp:
                assert resp.headers["Content-Type"].startswith("application/openmetrics-text")
                assert (await resp.text()).rstrip().endswith("# EOF")
            async with session.get(url, params=[("name[]", "bootimage_controller_leader")]) as resp:
                only = await resp.text()
            assert "bootimage_controller_leader" in only and "process_" not in only
    finally:
        await server.stop()


def test_one_shot_commands_log_sentences(restore_logging: None) -> None:
    """SPEC section 6: `warning: <subject>: <event> (key value)`, no JSON, no timestamps, secrets redacted."""
    out = io.StringIO()
    assert configure_logging("sentences", "WARNING", stream=out) == "sentences"
    log = structlog.get_logger("bootimage_controller.test")
    log.info("hidden below WARNING")
    log.warning("not allowed to read", object="ConfigMap coreos-bootimages", attempt=2, token="s3cret")
    logging.getLogger("aiohttp.client").warning("stdlib says %s", "hi")
    try:
        raise RuntimeError("kaboom")
    except RuntimeError:
        log.exception("failed")
    assert out.getvalue().splitlines() == [
        f"warning: ConfigMap coreos-bootimages: not allowed to read (attempt 2, token {REDACTED})",
        "warning: stdlib says hi",
        "error: failed: RuntimeError: kaboom",
    ]


def test_the_pool_families_are_built_one_at_a_time_and_not_kept() -> None:
    """/metrics writes each per-pool family before the next is built (daemon/exposition.py): the
    collector must not hold one while it builds the next, or a scrape at 5,000 pools holds all three."""
    pools = [
        obs.PoolBootImage("openshift-machine-api", f"w-{i}", "MachineSet", "rhel-9", "x86_64", "9.6.1", "9.6.2", "mco",
                          10.0, 1)
        for i in range(3)
    ]
    collector = obs.PoolCollector()
    collector.show(lambda: pools)
    families = collector.collect()
    first = next(families)
    assert [s.labels["name"] for s in first.samples] == ["w-0", "w-1", "w-2"]
    gone = weakref.ref(first)
    del first
    assert gone() is None, "the collector still holds the family it yielded"
    assert [f.name for f in families] == [METRIC_POOL_BOOT_IMAGE_AGE, METRIC_POOL_RELEASES_BEHIND]
