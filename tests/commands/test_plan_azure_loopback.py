"""`plan --cloud-verify` on Azure against a loopback fake of Entra ID and Azure Resource Manager
(issue 49): `--azure-endpoint` and `--azure-authority` point the real SDK (azure-identity and
azure-mgmt-compute, https and the ARM bearer policy kept) at a local https server whose test
certificate the process trusts. Nothing is faked inside the project: the fake plays only the cloud."""

from __future__ import annotations

import json
import ssl
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from tls_certs import write_serving_cert

from .conftest import FIXTURES, Run, load_yaml, write_yaml

LEGACY = FIXTURES / "machinesets" / "azure-x86_64-legacy-gallery-gen2-4.16.yaml"
CONFIGMAP_422 = FIXTURES / "configmaps" / "coreos-bootimages-4.22-multistream.yaml"
TARGET_VERSION = "9.6.20251015"  # the no-plan Gen2 image the 4.22 data names


@dataclass
class FakeAzure:
    url: str
    seen: list[tuple[str, str]] = field(default_factory=list)
    images: dict[str, dict[str, Any]] = field(default_factory=dict)  # version -> properties; absent: 404


@pytest.fixture
def fake_azure(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeAzure]:
    cert, key = tmp_path / "azure.pem", tmp_path / "azure.key"
    write_serving_cert(cert, key)
    state = FakeAzure("")

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *_args: Any) -> None:
            pass

        def _send(self, code: int, doc: Any) -> None:
            body = json.dumps(doc).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self) -> None:
            state.seen.append(("GET", self.path))
            if self.path.endswith("/.well-known/openid-configuration"):
                tenant = self.path.split("/")[1]
                base = f"{state.url}/{tenant}"
                return self._send(200, {"token_endpoint": f"{base}/oauth2/v2.0/token", "issuer": f"{base}/v2.0",
                                        "authorization_endpoint": f"{base}/oauth2/v2.0/authorize"})
            if "/artifacttypes/vmimage/" in self.path:
                version = self.path.split("/versions/")[1].split("?")[0]
                found = state.images.get(version)
                if found is None:
                    return self._send(404, {"error": {"code": "ImageNotFound", "message": f"{version} not found"}})
                return self._send(200, {"name": version, "location": "eastus", "id": "/x", "properties": found})
            return self._send(404, {"error": {"code": "NotFound", "message": self.path}})

        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            state.seen.append(("POST", self.path))
            self._send(200, {"access_token": "loopback-token", "expires_in": 3600, "ext_expires_in": 3600,
                             "token_type": "Bearer"})

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    state.url = f"https://localhost:{server.server_port}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    monkeypatch.setenv("REQUESTS_CA_BUNDLE", str(cert))  # the SDKs' transport (requests) trusts the fake
    for var, value in (("AZURE_CLIENT_ID", "client-1"), ("AZURE_CLIENT_SECRET", "not-a-secret"),
                       ("AZURE_TENANT_ID", "tenant-1"), ("AZURE_SUBSCRIPTION_ID", "sub-1")):
        monkeypatch.setenv(var, value)
    try:
        yield state
    finally:
        server.shutdown()
        server.server_close()


def _cluster(tmp_path: Path) -> Path:
    d = tmp_path / "cluster"
    write_yaml(d / "infrastructure.yaml", {
        "apiVersion": "config.openshift.io/v1", "kind": "Infrastructure", "metadata": {"name": "cluster"},
        "status": {"platform": "Azure", "platformStatus": {"type": "Azure", "azure": {"cloudName": "AzurePublicCloud"}}}})
    write_yaml(d / "coreos-bootimages.yaml", load_yaml(CONFIGMAP_422))
    write_yaml(d / "machineset.yaml", load_yaml(LEGACY))
    return d


def test_cloud_verify_asks_a_local_authority_and_endpoint_and_follows_the_answer(
    run: Run, tmp_path: Path, fake_azure: FakeAzure
) -> None:
    cluster = _cluster(tmp_path)
    offline = run("plan", cluster, "-o", "json").json()["machineSets"][0]
    assert offline["action"] == "patch"
    where = ("--azure-endpoint", fake_azure.url, "--azure-authority", fake_azure.url)
    # The target image is not there: the cloud's answer turns the patch into a skip.
    missing = run("plan", cluster, "--cloud-verify", *where, "-o", "json")
    assert missing.code == 0, missing.err
    row = missing.json()["machineSets"][0]
    assert (row["action"], row["reason"]) == ("skip", "TargetImageNotFound"), row["message"]
    assert ("GET", "/tenant-1/v2.0/.well-known/openid-configuration") in fake_azure.seen
    assert ("POST", "/tenant-1/oauth2/v2.0/token") in fake_azure.seen
    assert any(f"/versions/{TARGET_VERSION}?" in path for _, path in fake_azure.seen)
    # Published and active: the patch stands, now checked against the cloud.
    fake_azure.images[TARGET_VERSION] = {"hyperVGeneration": "V2"}
    found = run("plan", cluster, "--cloud-verify", *where, "-o", "json").json()["machineSets"][0]
    assert (found["action"], found["reason"]) == ("patch", "BootImageOutdated"), found["message"]
