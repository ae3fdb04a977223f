"""The daemon's API client against a real kube-apiserver."""

from __future__ import annotations

import asyncio

import pytest
from harness.cluster import TestCluster
from kubernetes_asyncio.client import VersionApi

from bootimage_controller.kube.client import make_api_client
from bootimage_controller.kube.tls import ResumingTLSContext

pytestmark = pytest.mark.integration


async def test_connections_after_the_first_resume_its_tls_session(kube_cluster: TestCluster) -> None:
    """The informers' ~20 connections at start skip the full handshake (kube/tls.py): the API
    server (Go's crypto/tls) issues tickets and accepts them."""
    api = await make_api_client(str(kube_cluster.kubeconfig), qps=0)
    try:
        await VersionApi(api).get_code()
        await asyncio.gather(*(VersionApi(api).get_code() for _ in range(4)))  # the first one's and three new
        context = api.rest_client.pool_manager.connector._ssl
        assert isinstance(context, ResumingTLSContext)
        opened = context.recent_connections()
        assert len(opened) == 4
        assert not opened[0].session_reused
        assert all(obj.session_reused for obj in opened[1:])
    finally:
        await api.close()
