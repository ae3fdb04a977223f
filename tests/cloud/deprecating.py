"""An EC2 endpoint in front of moto that says some AMIs are deprecated (moto does not model
`DeprecationTime`): every request goes to moto unchanged; DescribeImages answers gain
`<deprecationTime>` for the AMIs named, as EC2 sends it."""

from __future__ import annotations

import threading
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@contextmanager
def deprecating_ec2(moto_url: str, deprecated: dict[str, str]) -> Iterator[str]:
    """`deprecated`: AMI id -> its DeprecationTime (ISO 8601). Yields the endpoint's URL."""
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            pass

        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            headers = {k: v for k, v in self.headers.items() if k.lower() not in ("host", "content-length")}
            request = urllib.request.Request(moto_url + self.path, data=body, headers=headers, method="POST")
            try:
                with opener.open(request, timeout=30) as answer:
                    status, data, kind = answer.status, answer.read(), answer.headers.get("Content-Type", "text/xml")
            except urllib.error.HTTPError as exc:
                status, data, kind = exc.code, exc.read(), exc.headers.get("Content-Type", "text/xml")
            if b"Action=DescribeImages" in body:
                for ami, when in deprecated.items():
                    tag = f"<imageId>{ami}</imageId>".encode()
                    data = data.replace(tag, tag + f"<deprecationTime>{when}</deprecationTime>".encode())
            try:
                self.send_response(status)
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the daemon stopped with a lookup in flight (the end of its test): nobody to answer

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
