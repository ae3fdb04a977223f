"""/metrics over TLS, for authenticated and authorised scrapers only (issue 17).

The daemon reviews each scraper's token with the loopback API server (TokenReview) and its access
to `get /metrics` (SubjectAccessReview), as kube-rbac-proxy does; probes stay plain HTTP.
"""

from __future__ import annotations

import asyncio
import ssl
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from harness.cluster import TestCluster, free_port
from harness.objects import apply
from tls_certs import write_serving_cert

from .daemon_helpers import daemon_task

pytestmark = pytest.mark.integration


async def get(url: str, token: str | None, cafile: Path) -> tuple[int, str]:
    context = ssl.create_default_context(cafile=str(cafile))
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with aiohttp.ClientSession() as session, session.get(url, headers=headers, ssl=context) as resp:
        return resp.status, await resp.text()


async def test_only_a_scraper_allowed_to_get_metrics_gets_them(kube_cluster: TestCluster, kube_api: Any, tmp_path: Path) -> None:
    await apply(kube_api, {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
                           "metadata": {"name": "test-metrics-reader"},
                           "rules": [{"nonResourceURLs": ["/metrics"], "verbs": ["get"]}]})
    await apply(kube_api, {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
                           "metadata": {"name": "test-metrics-reader"},
                           "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                                       "name": "test-metrics-reader"},
                           "subjects": [{"kind": "User", "name": "metrics-scraper"}]})
    cert, key = tmp_path / "tls.crt", tmp_path / "tls.key"
    write_serving_cert(cert, key)
    port = free_port()
    url = f"https://127.0.0.1:{port}/metrics"
    async with daemon_task(kube_cluster.kubeconfig, "--metrics-addr", f"127.0.0.1:{port}",
                           "--metrics-cert-file", str(cert), "--metrics-key-file", str(key)) as task:
        for _ in range(100):
            try:
                status, _ = await get(url, None, cert)
                break
            except aiohttp.ClientConnectionError:
                assert not task.done(), task
                await asyncio.sleep(0.1)
        assert status == 401, "no token: unauthenticated"
        assert (await get(url, "not-a-real-token", cert))[0] == 401
        assert (await get(url, kube_cluster.tokens["stranger"], cert))[0] == 403
        status, body = await get(url, kube_cluster.tokens["metrics-scraper"], cert)
        assert status == 200 and "bootimage_controller_leader" in body and "workqueue_depth" in body
        with pytest.raises(aiohttp.ClientConnectionError):  # plain HTTP is not served on the metrics port
            async with aiohttp.ClientSession() as s, s.get(f"http://127.0.0.1:{port}/metrics") as r:
                await r.read()
