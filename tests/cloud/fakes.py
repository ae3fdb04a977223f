"""Local HTTP fakes for the cloud SDKs (real HTTP on 127.0.0.1, no SDK object is mocked).

- `FakeCloud`: speaks the GCP Compute REST paths (`/compute/v1/projects/{p}/global/images/{i}`,
  `.../images/family/{f}`), a Google OAuth token endpoint (`/token`), and the Azure ARM
  marketplace image path (`/subscriptions/{s}/providers/Microsoft.Compute/locations/{l}/publishers/
  {p}/artifacttypes/vmimage/offers/{o}/skus/{k}/versions/{v}`, any `api-version`).
- `FaultProxy`: forwards to the moto server, or answers with an injected EC2 error (throttling,
  5xx, auth failure) to exercise botocore's retries.

Both count requests and track the highest number served at once, so tests assert on what the
server saw rather than on timing.
"""

from __future__ import annotations

import http.client
import json
import re
import threading
import time
import urllib.parse
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

GCP_IMAGE = re.compile(r"^/compute/v1/projects/(?P<project>[^/]+)/global/images/(?P<family>family/)?(?P<name>[^/]+)$")
AZURE_IMAGE = re.compile(
    r"^/subscriptions/(?P<sub>[^/]+)/providers/Microsoft\.Compute/locations/(?P<location>[^/]+)"
    r"/publishers/(?P<publisher>[^/]+)/artifacttypes/vmimage/offers/(?P<offer>[^/]+)"
    r"/skus/(?P<sku>[^/]+)/versions/(?P<version>[^/]+)$",
    re.IGNORECASE,
)
FAKE_GOOGLE_ACCESS_TOKEN = "ya29.fake-access-token-for-tests"


@dataclass
class Fault:
    """Answer requests whose path contains `match` with `status` (`times` None: always)."""

    match: str
    status: int
    times: int | None = None
    body: Any = None
    headers: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Seen:
    method: str
    path: str
    headers: dict[str, str]


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True


class _Base:
    """Threaded server plumbing shared by the fakes: faults, delays, request log, concurrency."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.requests: list[Seen] = []
        self.faults: list[Fault] = []
        self.delays: dict[str, float] = {}
        self.in_flight = 0
        self.max_in_flight = 0
        owner = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:  # quiet test output
                pass

            def do_GET(self) -> None:
                owner._handle(self)

            def do_POST(self) -> None:
                owner._handle(self)

        self._httpd = _Server(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=lambda: self._httpd.serve_forever(poll_interval=0.05), name=type(self).__name__, daemon=True)

    @property
    def url(self) -> str:
        host, port = self._httpd.server_address[:2]
        assert isinstance(host, str)
        return f"http://{host}:{port}"

    def start(self) -> _Base:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()

    def fail(self, match: str, status: int, times: int | None = None, body: Any = None) -> Fault:
        fault = Fault(match, status, times, body)
        with self._lock:
            self.faults.append(fault)
        return fault

    def delay(self, match: str, seconds: float) -> None:
        with self._lock:
            self.delays[match] = seconds

    def count(self, match: str = "") -> int:
        with self._lock:
            return sum(1 for r in self.requests if match in r.path)

    def _take_fault(self, path: str) -> Fault | None:
        with self._lock:
            for fault in self.faults:
                if fault.match in path and (fault.times is None or fault.times > 0):
                    if fault.times is not None:
                        fault.times -= 1
                    return fault
        return None

    def _handle(self, h: BaseHTTPRequestHandler) -> None:
        length = int(h.headers.get("Content-Length") or 0)
        body = h.rfile.read(length) if length else b""
        path = urllib.parse.urlsplit(h.path).path
        with self._lock:
            self.requests.append(Seen(h.command, path, {k.lower(): v for k, v in h.headers.items()}))
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
            pause = next((s for m, s in self.delays.items() if m in path), 0.0)
        try:
            if pause:
                time.sleep(pause)
            fault = self._take_fault(path)
            if fault is not None:
                self._fault_response(h, fault)
            else:
                self.route(h, path, body)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up (a timeout test): nothing to answer
        finally:
            with self._lock:
                self.in_flight -= 1

    def _fault_response(self, h: BaseHTTPRequestHandler, fault: Fault) -> None:
        payload = fault.body if fault.body is not None else {"error": {"code": fault.status, "message": "injected"}}
        send_json(h, fault.status, payload, fault.headers)

    def route(self, h: BaseHTTPRequestHandler, path: str, body: bytes) -> None:
        raise NotImplementedError


def send_json(h: BaseHTTPRequestHandler, status: int, payload: Any, headers: dict[str, str] | None = None) -> None:
    data = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
    h.send_response(status)
    h.send_header("Content-Type", "application/json; charset=utf-8")
    h.send_header("Content-Length", str(len(data)))
    for k, v in (headers or {}).items():
        h.send_header(k, v)
    h.end_headers()
    h.wfile.write(data)


class FakeCloud(_Base):
    """GCP Compute images + OAuth token endpoint + Azure marketplace images, in one server."""

    def __init__(self) -> None:
        super().__init__()
        self.gcp_images: dict[tuple[str, str], dict[str, Any]] = {}
        self.gcp_families: dict[tuple[str, str], str] = {}
        self.azure_images: dict[tuple[str, str, str, str, str], dict[str, Any]] = {}

    # --- GCP -------------------------------------------------------------------------------------
    def add_gcp_image(
        self, project: str, name: str, status: str = "READY", family: str | None = None, **extra: Any
    ) -> None:
        self.gcp_images[(project, name)] = {
            "kind": "compute#image",
            "id": str(abs(hash((project, name))) % 10**18),
            "name": name,
            "status": status,
            "creationTimestamp": extra.pop("creation_timestamp", "2026-01-12T10:00:00.000-08:00"),
            "selfLink": f"https://www.googleapis.com/compute/v1/projects/{project}/global/images/{name}",
            **({"family": family} if family else {}),
            **extra,
        }
        if family:
            self.gcp_families[(project, family)] = name

    # --- Azure ------------------------------------------------------------------------------------
    def add_azure_image(
        self, location: str, publisher: str, offer: str, sku: str, version: str, image_state: str = "Active"
    ) -> None:
        self.azure_images[(location.lower(), publisher.lower(), offer.lower(), sku.lower(), version)] = {
            "name": version,
            "location": location,
            "id": (
                f"/Subscriptions/00000000-0000-0000-0000-000000000000/Providers/Microsoft.Compute/Locations/"
                f"{location}/Publishers/{publisher}/ArtifactTypes/VMImage/Offers/{offer}/Skus/{sku}/Versions/{version}"
            ),
            "properties": {
                "osDiskImage": {"operatingSystem": "Linux"},
                "hyperVGeneration": "V2",
                "architecture": "x64",
                "imageDeprecationStatus": {"imageState": image_state},
            },
        }

    def route(self, h: BaseHTTPRequestHandler, path: str, body: bytes) -> None:
        if h.command == "POST" and path == "/token":
            send_json(h, 200, {"access_token": FAKE_GOOGLE_ACCESS_TOKEN, "expires_in": 3600, "token_type": "Bearer"})
            return
        if h.command == "GET" and (m := GCP_IMAGE.match(path)):
            self._gcp_get(h, m)
            return
        if h.command == "GET" and (m := AZURE_IMAGE.match(path)):
            self._azure_get(h, m)
            return
        send_json(h, 404, {"error": {"code": 404, "message": f"no route for {h.command} {path}"}})

    def _gcp_get(self, h: BaseHTTPRequestHandler, m: re.Match[str]) -> None:
        project, name = m.group("project"), m.group("name")
        if m.group("family"):
            name = self.gcp_families.get((project, name), "")
        image = self.gcp_images.get((project, name))
        if image is None:
            msg = f"The resource 'projects/{project}/global/images/{name}' was not found"
            send_json(h, 404, {"error": {"code": 404, "message": msg, "errors": [{"reason": "notFound", "message": msg}]}})
            return
        send_json(h, 200, image)

    def _azure_get(self, h: BaseHTTPRequestHandler, m: re.Match[str]) -> None:
        k = (m.group("location").lower(), m.group("publisher").lower(), m.group("offer").lower(),
             m.group("sku").lower(), m.group("version"))
        image = self.azure_images.get(k)
        if image is None:
            send_json(h, 404, {"error": {"code": "NotFound", "message": "Artifact: VMImage was not found."}})
            return
        send_json(h, 200, image)


class FaultProxy(_Base):
    """In front of moto: injects EC2 errors, forwards everything else unchanged."""

    def __init__(self, upstream: str) -> None:
        super().__init__()
        parsed = urllib.parse.urlsplit(upstream)
        self._upstream = (parsed.hostname or "127.0.0.1", parsed.port or 80)

    def fail_ec2(self, status: int, code: str, message: str, times: int | None = None) -> Fault:
        xml = (
            '<?xml version="1.0" encoding="UTF-8"?>\n'
            f"<Response><Errors><Error><Code>{code}</Code><Message>{message}</Message></Error></Errors>"
            "<RequestID>00000000-0000-0000-0000-000000000000</RequestID></Response>"
        ).encode()
        return self.fail("/", status, times, body=xml)

    def _fault_response(self, h: BaseHTTPRequestHandler, fault: Fault) -> None:
        data = fault.body if isinstance(fault.body, bytes) else b""
        h.send_response(fault.status)
        h.send_header("Content-Type", "text/xml;charset=UTF-8")
        h.send_header("Content-Length", str(len(data)))
        h.end_headers()
        h.wfile.write(data)

    def route(self, h: BaseHTTPRequestHandler, path: str, body: bytes) -> None:
        conn = http.client.HTTPConnection(*self._upstream, timeout=30)
        try:
            headers = {k: v for k, v in h.headers.items() if k.lower() not in ("host", "connection")}
            conn.request(h.command, h.path, body=body, headers=headers)
            resp = conn.getresponse()
            data = resp.read()
        finally:
            conn.close()
        h.send_response(resp.status)
        for k, v in resp.getheaders():
            if k.lower() not in ("content-length", "connection", "transfer-encoding", "server", "date"):
                h.send_header(k, v)
        h.send_header("Content-Length", str(len(data)))
        h.end_headers()
        h.wfile.write(data)


@contextmanager
def running(server: _Base) -> Iterator[Any]:
    server.start()
    try:
        yield server
    finally:
        server.stop()
