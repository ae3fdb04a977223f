"""Cloud calls go through the cluster-wide proxy (issue 17): a forward proxy on loopback that the
daemon's EC2 calls (moto's server) must pass through, set only in the Proxy object's status."""

from __future__ import annotations

import http.server
import os
import threading
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest
from harness.cluster import TestCluster
from harness.objects import (
    apply,
    kube_request,
)

from bootimage_controller.daemon import run as daemon

from .daemon_helpers import run_args
from .test_daemon_cloud import aws_cluster_with_credentials, moto  # noqa: F401  (the moto fixture)

pytestmark = pytest.mark.integration
PROXY_VARIABLES = ("HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "http_proxy", "https_proxy", "no_proxy")


@pytest.fixture
def forward_proxy() -> Iterator[tuple[str, list[str]]]:
    """An HTTP forward proxy (absolute-form requests) that records every URL it carries."""
    seen: list[str] = []
    direct = urllib.request.build_opener(urllib.request.ProxyHandler({}))

    class Handler(http.server.BaseHTTPRequestHandler):
        def log_message(self, *_args: object) -> None:
            pass

        def _forward(self) -> None:
            seen.append(self.path)
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0)) or None
            headers = {k: v for k, v in self.headers.items() if k.lower() not in ("proxy-connection", "host")}
            request = urllib.request.Request(self.path, data=body, headers=headers, method=self.command)
            try:
                with direct.open(request, timeout=30) as resp:
                    status, payload, reply = resp.status, resp.read(), resp.headers
            except urllib.error.HTTPError as exc:
                status, payload, reply = exc.code, exc.read(), exc.headers
            self.send_response(status)
            for key, value in reply.items():
                if key.lower() not in ("transfer-encoding", "connection", "content-length"):
                    self.send_header(key, value)
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        do_GET = do_POST = _forward

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", seen
    finally:
        server.shutdown()
        server.server_close()


async def test_ec2_calls_go_through_the_proxy_the_cluster_names(
    kube_cluster: TestCluster, kube_api: Any, moto: str, forward_proxy: tuple[str, list[str]]  # noqa: F811
) -> None:
    proxy_url, seen = forward_proxy
    saved = {name: os.environ.get(name) for name in PROXY_VARIABLES}
    for name in PROXY_VARIABLES:
        os.environ.pop(name, None)
    try:
        await aws_cluster_with_credentials(kube_api)
        await apply(kube_api, {"apiVersion": "config.openshift.io/v1", "kind": "Proxy", "metadata": {"name": "cluster"},
                               "spec": {}})
        await kube_request(kube_api, "PATCH", "/apis/config.openshift.io/v1/proxies/cluster/status",
                           {"status": {"httpProxy": proxy_url, "httpsProxy": proxy_url, "noProxy": ".cluster.local"}},
                           content_type="application/merge-patch+json")

        code = await daemon.run_async(run_args(kube_cluster.kubeconfig, "--once", "--no-leader-elect"))
        assert code == 0
        assert [url for url in seen if url.startswith(moto)], f"no EC2 call went through the proxy: {seen}"
        assert all(url.startswith(moto) for url in seen), "only cloud calls: the API server is not proxied"
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
