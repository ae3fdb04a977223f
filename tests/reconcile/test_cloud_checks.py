"""The daemon's cloud credentials: read once a minute, all three at once, primed during cache sync."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

import pytest
from kubernetes_asyncio.client.exceptions import ApiException

from bootimage_controller.cloud.image_checks import CloudChecks
from bootimage_controller.constants import (
    AWS_CREDENTIALS_SECRET,
    AZURE_CREDENTIALS_SECRET,
    GCP_CREDENTIALS_SECRET,
)
from bootimage_controller.kube.api_errors import ServerError

AWS_DECISION = SimpleNamespace(platform="AWS")


def api_error(status: int) -> ApiException:
    exc = ApiException(status=status, reason="test")
    exc.headers = {"Retry-After": "0"}  # retried at once: the test does not wait for backoff
    return exc


class FakeCore:
    """`read_namespaced_secret` answering with an error status per Secret name (404 by default)."""

    def __init__(self, statuses: dict[str, int] | None = None) -> None:
        self.statuses = statuses or {}
        self.reads: list[str] = []
        self.in_flight = 0
        self.most_in_flight = 0

    async def read_namespaced_secret(self, name: str, namespace: str) -> Any:
        self.reads.append(name)
        self.in_flight += 1
        self.most_in_flight = max(self.most_in_flight, self.in_flight)
        try:
            await asyncio.sleep(0.01)
            raise api_error(self.statuses.get(name, 404))
        finally:
            self.in_flight -= 1


async def test_credentials_are_read_together_and_not_again_within_the_minute() -> None:
    core = FakeCore()
    checks = CloudChecks(core, None, None)  # type: ignore[arg-type]
    await checks.prime()
    assert sorted(core.reads) == sorted([AWS_CREDENTIALS_SECRET, GCP_CREDENTIALS_SECRET, AZURE_CREDENTIALS_SECRET])
    assert core.most_in_flight == 3  # one round trip, not three
    # No credentials anywhere: offline rules, and the reconcile does not read the Secrets again.
    assert await checks(AWS_DECISION) is None
    assert len(core.reads) == 3


@pytest.mark.parametrize(("platform", "read"), [
    ("AWS", [AWS_CREDENTIALS_SECRET]), ("GCP", [GCP_CREDENTIALS_SECRET]), ("Azure", [AZURE_CREDENTIALS_SECRET]),
    ("VSphere", []), ("BareMetal", []),
])
async def test_only_the_credentials_of_the_clusters_platform_are_read(platform: str, read: list[str]) -> None:
    core = FakeCore()
    checks = CloudChecks(core, None, None, platform=platform)  # type: ignore[arg-type]
    await checks.prime()
    assert core.reads == read
    assert await checks(AWS_DECISION) is None  # no AWS credentials known: offline rules
    assert core.reads == read


async def test_a_forbidden_secret_means_no_credentials_not_an_error() -> None:
    core = FakeCore({GCP_CREDENTIALS_SECRET: 403})
    checks = CloudChecks(core, None, None)  # type: ignore[arg-type]
    assert await checks(AWS_DECISION) is None
    assert checks.verifier is not None and not checks.verifier.platforms


async def test_a_transient_failure_while_priming_is_left_to_the_first_reconcile() -> None:
    core = FakeCore({AWS_CREDENTIALS_SECRET: 503})
    checks = CloudChecks(core, None, None)  # type: ignore[arg-type]
    await checks.prime()  # does not raise: the daemon goes on syncing its caches
    assert checks.verifier is None
    before = len(core.reads)
    # Not knowing whether credentials exist is no reason to plan offline: the reconcile fails
    # (and is retried), reading the Secrets again.
    with pytest.raises(ServerError) as info:
        await checks(AWS_DECISION)
    assert info.value.status == 503
    assert core.reads[before:].count(AWS_CREDENTIALS_SECRET) == 5  # with_retries' attempts
    core.statuses.clear()
    assert await checks(AWS_DECISION) is None
    assert checks.verifier is not None
