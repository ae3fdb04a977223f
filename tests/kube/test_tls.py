"""The API client's TLS context: kubernetes_asyncio's settings, and session resumption."""

from __future__ import annotations

import asyncio
import ssl
from pathlib import Path
from typing import Any

import pytest
from kubernetes_asyncio.client import Configuration
from kubernetes_asyncio.client.rest import RESTClientObject
from tls_certs import write_serving_cert

from bootimage_controller.kube.tls import ResumingTLSContext, api_tls_context


@pytest.fixture
def certs(tmp_path: Path) -> tuple[Path, Path]:
    cert, key = tmp_path / "tls.crt", tmp_path / "tls.key"
    write_serving_cert(cert, key)
    return cert, key


def _configuration(cert: Path, key: Path, **settings: Any) -> Any:
    """A configuration trusting `cert`; a setting given as "cert" or "key" names that file."""
    cfg = Configuration(host="https://127.0.0.1:6443")
    cfg.ssl_ca_cert = str(cert)
    for name, value in settings.items():
        setattr(cfg, name, {"cert": str(cert), "key": str(key)}.get(value, value) if isinstance(value, str) else value)
    return cfg


def _settings(context: ssl.SSLContext) -> dict[str, Any]:
    return {
        "protocol": context.protocol,
        "options": context.options,
        "verify_mode": context.verify_mode,
        "verify_flags": context.verify_flags,
        "check_hostname": context.check_hostname,
        "minimum_version": context.minimum_version,
        "maximum_version": context.maximum_version,
        "ca_certs": context.get_ca_certs(),
        "post_handshake_auth": context.post_handshake_auth,
    }


@pytest.mark.parametrize("settings", [
    {},
    {"verify_ssl": False},
    {"disable_strict_ssl_verification": True},
    {"cert_file": "cert", "key_file": "key"},
], ids=["ca", "insecure", "not-strict", "client-cert"])
async def test_the_context_has_the_settings_kubernetes_asyncio_gives_its_own(
    certs: tuple[Path, Path], settings: dict[str, Any]
) -> None:
    """The client replaces kubernetes_asyncio's connector; its TLS settings must not change with it."""
    cert, key = certs
    cfg = _configuration(cert, key, **settings)
    stock = RESTClientObject(cfg)
    try:
        theirs = stock.pool_manager.connector._ssl  # type: ignore[union-attr]
        ours = api_tls_context(cfg)
        assert isinstance(ours, ResumingTLSContext)
        assert _settings(ours) == _settings(theirs)
    finally:
        await stock.close()


async def _serve(cert: Path, key: Path) -> tuple[asyncio.Server, int]:
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(cert, key)

    async def answer(_reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(b"hello")  # the session ticket travels with the first bytes after the handshake
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(answer, "127.0.0.1", 0, ssl=context)
    return server, server.sockets[0].getsockname()[1]


async def _connect(port: int, context: ssl.SSLContext, server_hostname: str) -> bool:
    """Connect, read the greeting, close; whether the handshake resumed a session."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port, ssl=context, server_hostname=server_hostname)
    try:
        assert await reader.read() == b"hello"
        return bool(writer.get_extra_info("ssl_object").session_reused)
    finally:
        writer.close()


async def test_later_connections_resume_the_session_of_an_earlier_one(certs: tuple[Path, Path]) -> None:
    cert, key = certs
    server, port = await _serve(cert, key)
    context = api_tls_context(_configuration(cert, key))
    try:
        assert not await _connect(port, context, "localhost")  # a full handshake: nothing to resume
        assert await _connect(port, context, "localhost")
        # Several at once, as the informers open theirs: each resumes.
        assert all(await asyncio.gather(*(_connect(port, context, "localhost") for _ in range(5))))
    finally:
        server.close()
        await server.wait_closed()


async def test_a_session_is_only_offered_to_the_server_name_it_came_from(certs: tuple[Path, Path]) -> None:
    cert, key = certs
    server, port = await _serve(cert, key)
    context = api_tls_context(_configuration(cert, key))
    try:
        assert not await _connect(port, context, "localhost")
        assert not await _connect(port, context, "127.0.0.1")  # the certificate names both; still a full handshake
        assert await _connect(port, context, "127.0.0.1")
    finally:
        server.close()
        await server.wait_closed()


async def test_a_ticket_the_server_refuses_falls_back_to_a_full_handshake(certs: tuple[Path, Path]) -> None:
    """A restarted API server has new ticket keys: the stale ticket costs a full handshake, not an error."""
    cert, key = certs
    context = api_tls_context(_configuration(cert, key))
    first, port = await _serve(cert, key)
    try:
        assert not await _connect(port, context, "localhost")
        assert await _connect(port, context, "localhost")
    finally:
        first.close()
        await first.wait_closed()
    second, port = await _serve(cert, key)  # a new server context: new ticket keys
    try:
        assert not await _connect(port, context, "localhost")
        assert await _connect(port, context, "localhost")  # and its own ticket is kept
    finally:
        second.close()
        await second.wait_closed()


async def test_connections_given_up_in_their_handshake_lend_no_session(certs: tuple[Path, Path]) -> None:
    """A server that accepts but does not answer (the API server stopped, as in an outage) leaves
    connections in their handshake; one that timed out there holds a session OpenSSL cannot copy.
    Neither may be offered: every later connection would fail to open."""
    cert, key = certs
    server, port = await _serve(cert, key)
    silent = await asyncio.start_server(lambda _r, _w: None, "127.0.0.1", 0)
    silent_port = silent.sockets[0].getsockname()[1]
    context = api_tls_context(_configuration(cert, key))

    def to_silent() -> Any:
        return asyncio.open_connection("127.0.0.1", silent_port, ssl=context, server_hostname="localhost")

    try:
        # The daemon's first connections, made while the API server is stopped: one gives up.
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(to_silent(), 0.2)
        stuck = asyncio.ensure_future(to_silent())
        await asyncio.sleep(0.2)  # its ClientHello is out; no answer comes
        assert not await _connect(port, context, "localhost")  # nothing to resume yet, and no error
        assert await _connect(port, context, "localhost")
        stuck.cancel()
        await asyncio.gather(stuck, return_exceptions=True)
    finally:
        server.close()
        silent.close()
        await server.wait_closed()
