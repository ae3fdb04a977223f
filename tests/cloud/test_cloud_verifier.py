"""CloudVerifier: caching, shared calls, bounded concurrency, timeouts, missing or rotated credentials."""

from __future__ import annotations

import asyncio
import dataclasses
import io
import json
import logging
import subprocess
import sys
from typing import Any

import pytest
import structlog

from bootimage_controller.cloud.azure import AzureOptions, image_urn
from bootimage_controller.cloud.credentials import AzureCredentials, CredentialsError
from bootimage_controller.cloud.verifier import CloudVerifier
from bootimage_controller.constants import Platform
from bootimage_controller.core.cloud.facts import ImageKey
from bootimage_controller.observability import configure_logging

from .conftest import FAST, TEST_FACTORIES, secret
from .fakes import FakeCloud

URN = ("redhat", "rh-ocp-worker", "rh-ocp-worker", "4.18.2025031114")


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def azure_keys(fake: FakeCloud, locations: list[str], publish: bool = True) -> list[ImageKey]:
    keys = []
    for loc in locations:
        if publish:
            fake.add_azure_image(loc, *URN)
        keys.append(ImageKey("Azure", loc, image_urn(*URN)))
    return keys


def verifier_for(fake: FakeCloud, creds: AzureCredentials, **kwargs: Any) -> CloudVerifier:
    settings = kwargs.pop("settings", FAST)
    return CloudVerifier(azure=creds, azure_endpoint=fake.url, settings=settings, factories=TEST_FACTORIES, **kwargs)


async def test_answers_are_cached_for_the_ttl(fake_cloud: FakeCloud, azure_creds: AzureCredentials) -> None:
    clock = FakeClock()
    verifier = verifier_for(fake_cloud, azure_creds, clock=clock)
    found, missing = azure_keys(fake_cloud, ["eastus"])[0], azure_keys(fake_cloud, ["westus"], publish=False)[0]

    first = await verifier.verify([found, missing])
    assert fake_cloud.count("/versions/") == 2
    clock.now += FAST.cache_ttl - 1
    second = await verifier.verify([found, missing])
    assert fake_cloud.count("/versions/") == 2  # no request within the TTL, "not found" included
    assert second.images == first.images and not second.images[missing].exists

    clock.now += 2
    await verifier.verify([found])
    assert fake_cloud.count("/versions/") == 3
    verifier.close()


async def test_failures_are_not_cached(fake_cloud: FakeCloud, azure_creds: AzureCredentials) -> None:
    verifier = verifier_for(fake_cloud, azure_creds)
    (key,) = azure_keys(fake_cloud, ["eastus"])
    fault = fake_cloud.fail("/versions/", 500)
    assert key in (await verifier.verify([key])).errors
    fault.times = 0  # the cloud recovers
    facts = await verifier.verify([key])
    assert facts.errors == {} and facts.image(key) is not None
    verifier.close()


async def test_concurrent_asks_for_one_image_share_one_call(fake_cloud: FakeCloud, azure_creds: AzureCredentials) -> None:
    verifier = verifier_for(fake_cloud, azure_creds)
    (key,) = azure_keys(fake_cloud, ["eastus"])
    fake_cloud.delay("/versions/", 0.2)
    results = await asyncio.gather(*(verifier.verify([key, key]) for _ in range(5)))
    assert fake_cloud.count("/versions/") == 1
    assert all(r.image(key) == results[0].image(key) for r in results)
    verifier.close()


async def test_concurrency_is_bounded(fake_cloud: FakeCloud, azure_creds: AzureCredentials) -> None:
    settings = dataclasses.replace(FAST, concurrency=2)
    verifier = verifier_for(fake_cloud, azure_creds, settings=settings)
    keys = azure_keys(fake_cloud, [f"region{i}" for i in range(6)])
    fake_cloud.delay("/versions/", 0.1)
    facts = await verifier.verify(keys)
    assert len(facts.images) == 6
    assert fake_cloud.max_in_flight == 2
    verifier.close()


async def test_a_slow_cloud_times_out_into_an_error(fake_cloud: FakeCloud, azure_creds: AzureCredentials) -> None:
    settings = dataclasses.replace(FAST, call_timeout=0.2)
    verifier = verifier_for(fake_cloud, azure_creds, settings=settings)
    slow, fast = azure_keys(fake_cloud, ["slowregion", "eastus"])
    fake_cloud.delay("/locations/slowregion/", 0.6)
    facts = await verifier.verify([slow, fast])
    assert facts.error(slow) == "no answer within 0.2s"
    assert facts.image(fast) is not None  # one slow answer does not hold the others
    verifier.close()


async def test_missing_credentials_are_reported_once_and_not_looked_up(
    fake_cloud: FakeCloud, azure_creds: AzureCredentials
) -> None:
    verifier = verifier_for(fake_cloud, azure_creds)
    aws = ImageKey("AWS", "us-east-1", "ami-0e0850e74100f0f31")
    gcp = ImageKey("GCP", "us-central1-a", "projects/rhcos-cloud/global/images/rhcos-9-6-20260112-0-gcp-x86-64")
    vsphere = ImageKey("VSphere", "dc1", "rhcos-template")
    with structlog.testing.capture_logs() as logs:
        for _ in range(3):
            facts = await verifier.verify([aws, gcp, vsphere], marketplace=[("us-east-1", "product")])
            assert facts.images == {} and facts.errors == {} and facts.marketplace_errors == {}
    missing = [e for e in logs if e["event"].startswith("cloud credentials missing")]
    assert sorted((e["platform"], e["secret_name"]) for e in missing) == [
        ("AWS", "openshift-machine-api/aws-cloud-credentials"),
        ("GCP", "openshift-machine-api/gcp-cloud-credentials"),
    ]
    assert all("offline rules" in e["event"] for e in missing)
    assert verifier.platforms == frozenset({Platform.AZURE})
    verifier.close()


async def test_unusable_secret_disables_the_platform_and_says_which_key(
    fake_cloud: FakeCloud, azure_creds: AzureCredentials
) -> None:
    verifier = verifier_for(fake_cloud, azure_creds)
    bad = secret("azure-cloud-credentials", {"azure_client_id": "x", "azure_tenant_id": "y"}, rv="7")
    with structlog.testing.capture_logs() as logs:
        error = verifier.update_secret("Azure", bad)
        verifier.update_secret("Azure", bad)  # same resourceVersion: said once
        facts = await verifier.verify(azure_keys(fake_cloud, ["eastus"]))
    assert isinstance(error, CredentialsError) and error.field == "data.azure_subscription_id"
    assert facts.images == {} and fake_cloud.count() == 0
    assert [e["event"] for e in logs] == ["cloud credentials unusable; offline rules are used"]
    assert not verifier.has_credentials(Platform.AZURE)
    verifier.close()


async def test_rotated_secret_rebuilds_the_client_and_drops_cached_answers(
    fake_cloud: FakeCloud, azure_creds: AzureCredentials
) -> None:
    built: list[AzureCredentials] = []

    def factory(creds: AzureCredentials, endpoint: str | None, options: AzureOptions) -> Any:
        built.append(creds)
        return TEST_FACTORIES.azure(creds, endpoint, options)

    verifier = CloudVerifier(azure=azure_creds, azure_endpoint=fake_cloud.url, settings=FAST,
                             factories=dataclasses.replace(TEST_FACTORIES, azure=factory))
    keys = azure_keys(fake_cloud, ["eastus"])
    await verifier.verify(keys)
    verifier.set_credentials("Azure", azure_creds)  # unchanged: nothing happens
    await verifier.verify(keys)
    assert len(built) == 1 and fake_cloud.count("/versions/") == 1

    rotated = dataclasses.replace(azure_creds, source=dataclasses.replace(azure_creds.source, resource_version="2"))
    verifier.set_credentials("Azure", rotated)
    await verifier.verify(keys)
    assert [c.source.resource_version for c in built] == ["1", "2"]
    assert fake_cloud.count("/versions/") == 2
    verifier.close()


async def test_credentials_of_the_wrong_platform_are_refused(azure_creds: AzureCredentials) -> None:
    verifier = CloudVerifier()
    with pytest.raises(ValueError, match="AzureCredentials given for platform AWS"):
        verifier.set_credentials("AWS", azure_creds)
    assert verifier.platforms == frozenset()


async def test_from_secrets_builds_what_it_can(fake_cloud: FakeCloud) -> None:
    verifier = CloudVerifier.from_secrets(
        {
            Platform.AWS: None,
            Platform.GCP: secret("gcp-cloud-credentials", {"service_account.json": "{not json"}),
            Platform.AZURE: secret("azure-cloud-credentials", {
                "azure_client_id": "c", "azure_tenant_id": "t", "azure_subscription_id": "s",
                "azure_client_secret": "shh-shh-shh"}),
        },
        azure_endpoint=fake_cloud.url, settings=FAST, factories=TEST_FACTORIES,
    )
    assert verifier.platforms == frozenset({Platform.AZURE})
    facts = await verifier.verify(azure_keys(fake_cloud, ["eastus"]))
    assert len(facts.images) == 1
    verifier.close()


async def test_missing_credentials_line_survives_the_daemon_log_redaction() -> None:
    """With the daemon's own logging set-up, the line still names the Secret (not [REDACTED])."""
    root = logging.getLogger()
    saved = (root.handlers[:], root.level)
    buf = io.StringIO()
    try:
        configure_logging(fmt="json", level="INFO", stream=buf)
        await CloudVerifier().verify([ImageKey("AWS", "us-east-1", "ami-0e0850e74100f0f31")])
    finally:
        root.handlers[:] = saved[0]
        root.setLevel(saved[1])
        structlog.reset_defaults()
    lines = [json.loads(line) for line in buf.getvalue().splitlines() if line.startswith("{")]
    (line,) = [entry for entry in lines if entry["event"].startswith("cloud credentials missing")]
    assert line["secret_name"] == "openshift-machine-api/aws-cloud-credentials"
    assert line["platform"] == "AWS" and line["level"] == "info"


def _sdks_imported(setup: str) -> list[str]:
    """Which cloud SDKs a fresh interpreter has imported after `setup` (a verifier built from
    Secrets, then the daemon's module imported, as a running daemon has them)."""
    code = f"""
import base64, sys
from bootimage_controller import daemon  # noqa: F401  (everything the daemon imports at start-up)
from bootimage_controller.cloud.verifier import CloudVerifier
def secret(data):
    return {{"metadata": {{"name": "s", "resourceVersion": "1"}},
            "data": {{k: base64.b64encode(v.encode()).decode() for k, v in data.items()}}}}
{setup}
print("SDKS=" + ",".join(m for m in ("boto3", "botocore", "google.auth", "google.cloud.compute_v1", "azure.core",
                            "azure.mgmt.compute") if m in sys.modules))
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    line = next(line for line in out.splitlines() if line.startswith("SDKS="))  # logs print too
    return [m for m in line.removeprefix("SDKS=").split(",") if m]


def test_no_cloud_sdk_is_imported_without_credentials() -> None:
    # 25 MiB and a quarter of a second at the first reconcile, for nothing, on every cluster.
    assert _sdks_imported("CloudVerifier.from_secrets({'AWS': None, 'GCP': None, 'Azure': None})") == []


def test_credentials_import_only_their_own_platforms_sdk() -> None:
    imported = _sdks_imported(
        "v = CloudVerifier.from_secrets({'AWS': secret({'aws_access_key_id': 'AKIAX', "
        "'aws_secret_access_key': 'y' * 40}), 'GCP': None, 'Azure': None})\n"
        "assert v.platforms == {'AWS'}, v.platforms"
    )
    assert "boto3" in imported
    assert not [m for m in imported if m.startswith(("google", "azure"))]
