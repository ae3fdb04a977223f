"""The stub Ignition upgrade against the real API server: convert, annotate, no-op, leave broken alone."""

from __future__ import annotations

import base64
import json
from datetime import UTC, datetime
from typing import Any, cast

import pytest
from kubernetes_asyncio import client as k8s_client

from bootimage_controller.constants import (
    ANNOTATION_STUB_UPGRADED_AT,
    ANNOTATION_STUB_UPGRADED_TO,
    MAPI_NAMESPACE,
)
from bootimage_controller.reconcile.stub_ignition import StubOutcome, ensure_stub_ignition_v3

pytestmark = pytest.mark.integration

NOW = datetime(2025, 3, 4, 5, 6, 7, tzinfo=UTC)
MCS = "https://api-int.ci-op-abc123.example.com:22623/config/worker"
CA = "data:text/plain;charset=utf-8;base64,LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCg=="
STUB_V2 = {
    "ignition": {
        "config": {"append": [{"source": MCS, "verification": {}}]},
        "security": {"tls": {"certificateAuthorities": [{"source": CA, "verification": {}}]}},
        "timeouts": {},
        "version": "2.2.0",
    },
    "networkd": {},
    "passwd": {},
    "storage": {},
    "systemd": {},
}


async def _create(core: k8s_client.CoreV1Api, name: str, user_data: bytes) -> Any:
    body = k8s_client.V1Secret(
        metadata=k8s_client.V1ObjectMeta(name=name, namespace=MAPI_NAMESPACE),
        type="Opaque",
        data={"userData": base64.b64encode(user_data).decode(), "disableTemplating": "dHJ1ZQ=="},
    )
    return await core.create_namespaced_secret(MAPI_NAMESPACE, body)


async def _read(core: k8s_client.CoreV1Api, name: str) -> Any:
    return await core.read_namespaced_secret(name, MAPI_NAMESPACE)


async def test_v2_stub_is_upgraded_annotated_and_then_left_alone(kube_api: k8s_client.ApiClient) -> None:
    core = k8s_client.CoreV1Api(kube_api)
    await _create(core, "worker-user-data", json.dumps(STUB_V2).encode())

    first = await ensure_stub_ignition_v3(core, MAPI_NAMESPACE, "worker-user-data", now=NOW)

    assert (first.outcome, first.from_version, first.to_version) == (StubOutcome.UPGRADED, "2.2.0", "3.5.0")
    secret = await _read(core, "worker-user-data")
    assert secret.metadata.annotations[ANNOTATION_STUB_UPGRADED_TO] == "3.5.0"
    assert secret.metadata.annotations[ANNOTATION_STUB_UPGRADED_AT] == "2025-03-04T05:06:07Z"
    assert secret.data["disableTemplating"] == "dHJ1ZQ=="
    assert json.loads(base64.b64decode(secret.data["userData"])) == {
        "ignition": {
            "config": {"merge": [{"source": MCS}]},
            "security": {"tls": {"certificateAuthorities": [{"source": CA}]}},
            "version": "3.5.0",
        }
    }

    second = await ensure_stub_ignition_v3(core, MAPI_NAMESPACE, "worker-user-data", now=NOW)

    assert second.outcome is StubOutcome.ALREADY_V3
    assert (
        await _read(core, "worker-user-data")
    ).metadata.resource_version == secret.metadata.resource_version


async def test_broken_secret_is_an_error_result_and_untouched(kube_api: k8s_client.ApiClient) -> None:
    core = k8s_client.CoreV1Api(kube_api)
    created = await _create(
        core, "broken-user-data", b'{"ignition":{"version":"2.2.0"},"networkd":{"units":[{}]}}'
    )

    result = await ensure_stub_ignition_v3(core, MAPI_NAMESPACE, "broken-user-data", now=NOW)

    assert result.outcome is StubOutcome.INVALID and not result.ok
    assert "networkd.units" in (result.error or "")
    after = await _read(core, "broken-user-data")
    assert after.metadata.resource_version == created.metadata.resource_version
    assert after.data == created.data and not (after.metadata.annotations or {})


async def test_missing_secret_is_an_error_result(kube_api: k8s_client.ApiClient) -> None:
    core = k8s_client.CoreV1Api(kube_api)

    result = await ensure_stub_ignition_v3(core, MAPI_NAMESPACE, "no-such-user-data", now=NOW)

    assert result.outcome is StubOutcome.INVALID and "not found" in (result.error or "")


class _WriterInBetween:
    """A CoreV1Api whose first patch is preceded by someone else's write (a real 409 follows)."""

    def __init__(self, core: k8s_client.CoreV1Api, name: str, new_user_data: bytes) -> None:
        self.core, self.name, self.new = core, name, new_user_data
        self.patches = 0

    async def read_namespaced_secret(self, name: str, namespace: str, **kwargs: Any) -> Any:
        return await self.core.read_namespaced_secret(name, namespace, **kwargs)

    async def patch_namespaced_secret(self, name: str, namespace: str, body: Any, **kw: Any) -> Any:
        self.patches += 1
        if self.patches == 1:
            other = {"data": {"userData": base64.b64encode(self.new).decode()}}
            await self.core.patch_namespaced_secret(  # type: ignore[call-arg]
                name, namespace, other, _content_type="application/merge-patch+json"
            )
        return await self.core.patch_namespaced_secret(name, namespace, body, **kw)


async def test_concurrent_write_is_detected_and_the_new_content_converted(
    kube_api: k8s_client.ApiClient,
) -> None:
    core = k8s_client.CoreV1Api(kube_api)
    await _create(core, "worker-user-data", json.dumps(STUB_V2).encode())
    rewritten = json.loads(json.dumps(STUB_V2))
    rewritten["ignition"]["config"]["append"][0]["source"] = MCS.replace("worker", "infra")
    api = _WriterInBetween(core, "worker-user-data", json.dumps(rewritten).encode())

    result = await ensure_stub_ignition_v3(
        cast(k8s_client.CoreV1Api, api), MAPI_NAMESPACE, "worker-user-data", now=NOW
    )

    assert result.outcome is StubOutcome.UPGRADED
    assert api.patches == 2  # the first carried a stale resourceVersion and got 409
    cfg = json.loads(base64.b64decode((await _read(core, "worker-user-data")).data["userData"]))
    assert cfg["ignition"]["config"]["merge"] == [{"source": MCS.replace("worker", "infra")}]
