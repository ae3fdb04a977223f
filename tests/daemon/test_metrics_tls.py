"""The metrics certificate is re-read when the service CA rotates it (issue 17)."""

from __future__ import annotations

import asyncio
import os
import ssl
from pathlib import Path

from cryptography import x509
from tls_certs import write_serving_cert

from bootimage_controller.daemon.metrics_security import MetricsAuthorizer, ReloadingTls


async def served_serial(context: ssl.SSLContext) -> int:
    """Serve one TLS connection with `context` and return the serial of the certificate it showed."""
    server = await asyncio.start_server(lambda _r, w: w.close(), "127.0.0.1", 0, ssl=context)
    port = server.sockets[0].getsockname()[1]
    client = ssl.create_default_context()
    client.check_hostname, client.verify_mode = False, ssl.CERT_NONE
    _reader, writer = await asyncio.open_connection("127.0.0.1", port, ssl=client)
    der = writer.get_extra_info("ssl_object").getpeercert(binary_form=True)
    writer.close()
    server.close()
    await server.wait_closed()
    return int(x509.load_der_x509_certificate(der).serial_number)


async def test_a_rotated_certificate_is_served_to_new_connections(tmp_path: Path) -> None:
    cert, key = tmp_path / "tls.crt", tmp_path / "tls.key"
    first = write_serving_cert(cert, key)
    tls = ReloadingTls(cert, key)
    assert await served_serial(tls.context) == first
    assert tls.reload() is False, "unchanged files are not re-read"
    second = write_serving_cert(cert, key)
    os.utime(cert, (1, 1))
    os.utime(key, (1, 1))
    assert tls.reload() is True
    assert await served_serial(tls.context) == second


async def test_a_half_written_rotation_keeps_the_previous_certificate(tmp_path: Path) -> None:
    cert, key = tmp_path / "tls.crt", tmp_path / "tls.key"
    first = write_serving_cert(cert, key)
    tls = ReloadingTls(cert, key)
    key.write_text("not a key")
    os.utime(key, (2, 2))
    assert tls.reload() is False
    assert await served_serial(tls.context) == first


async def test_requests_without_a_bearer_token_are_refused_before_any_api_call() -> None:
    authorizer = MetricsAuthorizer(api_client=None)
    for header in ("", "Basic dXNlcjpwYXNz", "Bearer "):
        verdict = await authorizer.verdict(header, "/metrics")
        assert verdict.http_status == 401
