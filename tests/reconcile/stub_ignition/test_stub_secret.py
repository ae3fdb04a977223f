"""ensure_stub_ignition_v3 against an in-memory Secret store with the API server's write rules.

The fake applies a JSON merge patch the way the API server does for a Secret and answers 409 when
the patch carries a stale `metadata.resourceVersion`; the real server is exercised by
tests/integration/test_stub_ignition.py.
"""

from __future__ import annotations

import base64
import copy
import json
from datetime import UTC, datetime, timedelta, timezone
from typing import Any, cast

import pytest
from kubernetes_asyncio.client import CoreV1Api
from kubernetes_asyncio.client.exceptions import ApiException
from structlog.testing import capture_logs

from bootimage_controller.constants import (
    ANNOTATION_STUB_UPGRADED_AT,
    ANNOTATION_STUB_UPGRADED_TO,
    MAPI_NAMESPACE,
)
from bootimage_controller.reconcile.stub_ignition import (
    StubOutcome,
    StubUpgradeResult,
    ensure_stub_ignition_v3,
)

from .ign35_shape import problems

NS = MAPI_NAMESPACE
NAME = "worker-user-data"
NOW = datetime(2025, 3, 4, 5, 6, 7, tzinfo=UTC)
MCS = "https://api-int.ci-op-abc123.example.com:22623/config/worker"
CA = "data:text/plain;charset=utf-8;base64,LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCk1JSURFRENDQWZpZ0F3SUJBZ0lJ"
STUB_V2 = json.dumps(
    {
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
).encode()
STUB_V3 = b'{"ignition":{"config":{"merge":[{"source":"' + MCS.encode() + b'"}]},"version":"3.2.0"}}'
MERGE_PATCH = "application/merge-patch+json"


def _merge(target: dict[str, Any], patch: dict[str, Any]) -> None:
    for key, value in patch.items():
        if value is None:
            target.pop(key, None)
        elif isinstance(value, dict) and isinstance(target.get(key), dict):
            _merge(target[key], value)
        else:
            target[key] = copy.deepcopy(value)


class RawAnswer:
    """What kubernetes_asyncio returns with `_preload_content=False`: the aiohttp response."""

    def __init__(self, body: bytes, status: int = 200) -> None:
        self.body, self.status = body, status

    async def read(self) -> bytes:
        return self.body

    def release(self) -> None:
        pass


class FakeCoreV1:
    """read_namespaced_secret / patch_namespaced_secret over a dict of Secret JSON objects."""

    def __init__(self) -> None:
        self.secrets: dict[tuple[str, str], dict[str, Any]] = {}
        self.rv = 100
        self.reads = 0
        self.patches: list[tuple[dict[str, Any], str | None]] = []
        self.fail_patch: list[int] = []  # statuses to answer the next patches with
        self.before_patch: list[Any] = []  # callables run before the next patches (concurrent writers)

    def put(
        self, name: str, user_data: bytes | None, *, immutable: bool = False, raw: str | None = None
    ) -> None:
        self.rv += 1
        data = {} if user_data is None else {"userData": base64.b64encode(user_data).decode()}
        if raw is not None:
            data = {"userData": raw}
        self.secrets[(NS, name)] = {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": name, "namespace": NS, "resourceVersion": str(self.rv)},
            "type": "Opaque",
            "data": data,
            **({"immutable": True} if immutable else {}),
        }

    def user_data(self, name: str = NAME) -> bytes:
        return base64.b64decode(self.secrets[(NS, name)]["data"]["userData"])

    async def read_namespaced_secret(self, name: str, namespace: str, _preload_content: bool = True) -> Any:
        """The raw answer (the daemon reads the Secret's JSON, not a model)."""
        assert _preload_content is False
        self.reads += 1
        obj = self.secrets.get((namespace, name))
        if obj is None:
            raise ApiException(status=404, reason="Not Found")
        return RawAnswer(json.dumps(obj).encode())

    async def patch_namespaced_secret(
        self, name: str, namespace: str, body: Any, _content_type: str | None = None
    ) -> Any:
        self.patches.append((copy.deepcopy(body), _content_type))
        if self.before_patch:
            self.before_patch.pop(0)()
        if self.fail_patch:
            raise ApiException(status=self.fail_patch.pop(0), reason="injected")
        obj = self.secrets[(namespace, name)]
        rv = body.get("metadata", {}).get("resourceVersion")
        if rv is not None and rv != obj["metadata"]["resourceVersion"]:
            raise ApiException(status=409, reason="Conflict")
        _merge(obj, body)
        self.rv += 1
        obj["metadata"]["resourceVersion"] = str(self.rv)
        return obj


@pytest.fixture
def api() -> FakeCoreV1:
    return FakeCoreV1()


async def ensure(api: FakeCoreV1, name: str = NAME, **kw: Any) -> StubUpgradeResult:
    return await ensure_stub_ignition_v3(cast(CoreV1Api, api), NS, name, **kw)


async def test_v2_stub_is_converted_annotated_and_written_with_its_resource_version(api: FakeCoreV1) -> None:
    api.put(NAME, STUB_V2)
    read_rv = api.secrets[(NS, NAME)]["metadata"]["resourceVersion"]

    result = await ensure(api, now=NOW)

    assert (result.outcome, result.ok, result.error) == (StubOutcome.UPGRADED, True, None)
    assert (result.from_version, result.to_version) == ("2.2.0", "3.5.0")
    [(body, content_type)] = api.patches
    assert content_type == MERGE_PATCH
    assert body["metadata"]["resourceVersion"] == read_rv
    assert set(body) == {"metadata", "data"} and set(body["data"]) == {"userData"}
    secret = api.secrets[(NS, NAME)]
    assert secret["metadata"]["annotations"] == {
        ANNOTATION_STUB_UPGRADED_TO: "3.5.0",
        ANNOTATION_STUB_UPGRADED_AT: "2025-03-04T05:06:07Z",
    }
    cfg = json.loads(api.user_data())
    assert problems(cfg) == []
    assert cfg["ignition"]["config"]["merge"] == [{"source": MCS}]


async def test_second_call_is_a_no_op(api: FakeCoreV1) -> None:
    api.put(NAME, STUB_V2)
    await ensure(api, now=NOW)
    written = api.user_data()

    again = await ensure(api, now=NOW + timedelta(hours=1))

    assert again.outcome is StubOutcome.ALREADY_V3 and again.ok
    assert again.from_version == "3.5.0"
    assert len(api.patches) == 1
    assert api.user_data() == written


async def test_v3_stub_is_not_written(api: FakeCoreV1) -> None:
    api.put(NAME, STUB_V3)

    result = await ensure(api, now=NOW)

    assert (result.outcome, result.from_version, result.to_version) == (
        StubOutcome.ALREADY_V3,
        "3.2.0",
        "3.2.0",
    )
    assert api.patches == [] and api.user_data() == STUB_V3


async def test_existing_annotations_and_other_keys_survive(api: FakeCoreV1) -> None:
    api.put(NAME, STUB_V2)
    secret = api.secrets[(NS, NAME)]
    secret["metadata"]["annotations"] = {"owner": "installer"}
    secret["data"]["disableTemplating"] = base64.b64encode(b"true").decode()

    await ensure(api, now=NOW)

    assert secret["metadata"]["annotations"]["owner"] == "installer"
    assert secret["data"]["disableTemplating"] == base64.b64encode(b"true").decode()


async def test_conflict_rereads_and_converts_the_new_content(api: FakeCoreV1) -> None:
    api.put(NAME, STUB_V2)
    # Someone rewrites the secret between our read and our write (still 2.x, another CA).
    other = STUB_V2.replace(CA.encode(), b"data:,other-ca")
    api.before_patch.append(lambda: api.put(NAME, other))

    result = await ensure(api, now=NOW)

    assert result.outcome is StubOutcome.UPGRADED
    assert api.reads == 2 and len(api.patches) == 2
    cfg = json.loads(api.user_data())
    assert cfg["ignition"]["security"]["tls"]["certificateAuthorities"] == [{"source": "data:,other-ca"}]


async def test_conflict_with_someone_else_upgrading_ends_as_already_v3(api: FakeCoreV1) -> None:
    api.put(NAME, STUB_V2)
    api.before_patch.append(lambda: api.put(NAME, STUB_V3))

    result = await ensure(api, now=NOW)

    assert result.outcome is StubOutcome.ALREADY_V3
    assert api.user_data() == STUB_V3


async def test_endless_conflicts_give_up_with_a_failed_result(api: FakeCoreV1) -> None:
    api.put(NAME, STUB_V2)
    api.fail_patch = [409] * 10

    result = await ensure(api, now=NOW, conflict_attempts=3)

    assert result.outcome is StubOutcome.FAILED and not result.ok
    assert len(api.patches) == 3
    assert api.user_data() == STUB_V2


async def test_forbidden_write_is_a_failed_result(api: FakeCoreV1) -> None:
    api.put(NAME, STUB_V2)
    api.fail_patch = [403]

    result = await ensure(api, now=NOW)

    assert result.outcome is StubOutcome.FAILED
    assert "403" in (result.error or "") and f"{NS}/{NAME}" in (result.error or "")


async def test_missing_secret_is_an_invalid_result(api: FakeCoreV1) -> None:
    result = await ensure(api, "nope", now=NOW)

    assert result.outcome is StubOutcome.INVALID and not result.ok
    assert "not found" in (result.error or "") and f"{NS}/nope" in (result.error or "")


@pytest.mark.parametrize(
    ("user_data", "raw", "needle"),
    [
        (None, None, "data.userData: missing"),
        (None, "!!!not base64", "data.userData: not valid base64"),
        (b'{"ignition":{"version":"2.2.0"', None, "invalid JSON"),
        (
            b'{"ignition":{"version":"2.2.0"},"networkd":{"units":[{"name":"a.network"}]}}',
            None,
            "networkd.units",
        ),
    ],
)
async def test_unusable_user_data_is_an_invalid_result_and_left_untouched(
    api: FakeCoreV1, user_data: bytes | None, raw: str | None, needle: str
) -> None:
    api.put(NAME, user_data, raw=raw)
    before = copy.deepcopy(api.secrets[(NS, NAME)])

    result = await ensure(api, now=NOW)

    assert result.outcome is StubOutcome.INVALID
    assert needle in (result.error or "")
    assert api.patches == [] and api.secrets[(NS, NAME)] == before


async def test_dry_run_reports_without_writing(api: FakeCoreV1) -> None:
    api.put(NAME, STUB_V2)

    result = await ensure(api, now=NOW, dry_run=True)

    assert result.outcome is StubOutcome.WOULD_UPGRADE and result.ok
    assert (result.from_version, result.to_version) == ("2.2.0", "3.5.0")
    assert api.patches == [] and api.user_data() == STUB_V2


async def test_immutable_secret_is_not_written(api: FakeCoreV1) -> None:
    api.put(NAME, STUB_V2, immutable=True)

    result = await ensure(api, now=NOW)

    assert result.outcome is StubOutcome.FAILED and "immutable" in (result.error or "")
    assert api.patches == []


async def test_timestamp_is_utc_rfc3339_whatever_the_zone(api: FakeCoreV1) -> None:
    api.put(NAME, STUB_V2)
    local = NOW.astimezone(timezone(timedelta(hours=5, minutes=30)))

    await ensure(api, now=local)

    assert (
        api.secrets[(NS, NAME)]["metadata"]["annotations"][ANNOTATION_STUB_UPGRADED_AT]
        == "2025-03-04T05:06:07Z"
    )


async def test_naive_time_is_taken_as_utc(api: FakeCoreV1) -> None:
    # One formatter for every timestamp we write (kube/times.py): naive means UTC, as metav1.Time does.
    api.put(NAME, STUB_V2)
    await ensure(api, now=datetime(2025, 1, 1))
    assert api.secrets[(NS, NAME)]["metadata"]["annotations"][ANNOTATION_STUB_UPGRADED_AT] == "2025-01-01T00:00:00Z"


async def test_logs_and_results_never_carry_the_secret_contents(api: FakeCoreV1) -> None:
    api.put(NAME, STUB_V2)
    api.put(
        "broken",
        b'{"ignition":{"version":"2.2.0","config":{"append":[{"source":"' + MCS.encode() + b'"}]},"x":1}',
    )

    with capture_logs() as logs:
        results = [
            await ensure(api, now=NOW),
            await ensure(api, "broken", now=NOW),
        ]

    assert [r.outcome for r in results] == [StubOutcome.UPGRADED, StubOutcome.INVALID]
    assert logs, "the outcomes are logged"
    text = repr(logs) + repr(results)
    for secret_part in (MCS, CA, "api-int"):
        assert secret_part not in text
