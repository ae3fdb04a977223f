"""Azure Marketplace image lookups: the real ComputeManagementClient on a local http fake.

Only the authentication policy differs from production (the ARM bearer policy refuses plain
http); the test factory swaps it, production code keeps it.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from azure.identity import ClientSecretCredential, WorkloadIdentityCredential

from bootimage_controller.cloud.azure import (
    AZURE_ENDPOINT_ENV,
    AzureImages,
    AzureOptions,
    image_urn,
    make_client,
    make_credential,
    parse_urn,
)
from bootimage_controller.cloud.credentials import AzureCredentials, parse_azure_credentials
from bootimage_controller.cloud.verifier import CloudVerifier
from bootimage_controller.core.cloud.facts import ImageKey
from bootimage_controller.errors import InputError

from .amis import STREAM_DIR
from .conftest import FAST, TEST_FACTORIES, azure_test_client, secret
from .fakes import FakeCloud

MARKETPLACE_RHEL9 = "installer-release-4.22-marketplace-coreos-rhel-9.json"
MARKETPLACE_RHEL10 = "openshift-installer-main-marketplace-coreos-rhel-10.json"


def marketplace(file: str, variant: str, gen: str) -> tuple[str, str, str, str]:
    img = json.loads((STREAM_DIR / file).read_text())["x86_64"]["azure"][variant][gen]
    return img["publisher"], img["offer"], img["sku"], img["version"]


@pytest.fixture
def images(fake_cloud: FakeCloud, azure_creds: AzureCredentials) -> Iterator[AzureImages]:
    client = AzureImages(azure_creds, endpoint=fake_cloud.url, options=FAST.azure, client_factory=azure_test_client)
    yield client
    client.close()


@pytest.mark.parametrize(
    ("file", "variant", "gen"),
    [(MARKETPLACE_RHEL9, "ocp", "hyperVGen2"), (MARKETPLACE_RHEL9, "no-purchase-plan", "hyperVGen1"),
     (MARKETPLACE_RHEL10, "no-purchase-plan", "hyperVGen2")],
)
def test_published_marketplace_image_is_available(
    fake_cloud: FakeCloud, images: AzureImages, file: str, variant: str, gen: str
) -> None:
    publisher, offer, sku, version = marketplace(file, variant, gen)
    fake_cloud.add_azure_image("eastus", publisher, offer, sku, version)
    image = images.get_marketplace_image("eastus", publisher, offer, sku, version)
    assert image.key == ImageKey("Azure", "eastus", f"{publisher}:{offer}:{sku}:{version}")
    assert image.exists and image.available
    assert image.owner == publisher and image.name == version
    path = f"/subscriptions/{images.credentials.subscription_id}/providers/Microsoft.Compute/locations/eastus/"
    assert any(r.path.startswith(path) for r in fake_cloud.requests)


def test_version_missing_in_location_does_not_exist(fake_cloud: FakeCloud, images: AzureImages) -> None:
    publisher, offer, sku, version = marketplace(MARKETPLACE_RHEL9, "ocp", "hyperVGen2")
    fake_cloud.add_azure_image("eastus", publisher, offer, sku, version)
    image = images.get_image("westeurope", image_urn(publisher, offer, sku, version))
    assert not image.exists and not image.available


def test_deprecated_image_is_not_available(fake_cloud: FakeCloud, images: AzureImages) -> None:
    publisher, offer, sku, version = marketplace(MARKETPLACE_RHEL9, "oke", "hyperVGen1")
    fake_cloud.add_azure_image("centralus", publisher, offer, sku, version, image_state="Deprecated")
    image = images.get_marketplace_image("centralus", publisher, offer, sku, version)
    assert image.exists and not image.available


def test_urn_must_have_four_parts() -> None:
    assert parse_urn("redhat:rh-ocp-worker:rh-ocp-worker:4.18.2025031114").version == "4.18.2025031114"
    with pytest.raises(InputError, match="publisher:offer:sku:version"):
        parse_urn("redhat:rh-ocp-worker:rh-ocp-worker")


@pytest.mark.parametrize("status", [429, 500])
async def test_throttling_and_5xx_are_retried_then_recorded(
    fake_cloud: FakeCloud, azure_creds: AzureCredentials, status: int
) -> None:
    publisher, offer, sku, version = marketplace(MARKETPLACE_RHEL9, "ocp", "hyperVGen2")
    fake_cloud.add_azure_image("eastus", publisher, offer, sku, version)
    fake_cloud.fail("/versions/", status)
    verifier = CloudVerifier(azure=azure_creds, azure_endpoint=fake_cloud.url, settings=FAST, factories=TEST_FACTORIES)
    key = ImageKey("Azure", "eastus", image_urn(publisher, offer, sku, version))
    facts = await verifier.verify([key])
    assert f"HTTP {status}" in (facts.error(key) or "")
    assert fake_cloud.count("/versions/") == FAST.azure.retry_total + 1
    verifier.close()


async def test_throttled_once_then_answered(fake_cloud: FakeCloud, azure_creds: AzureCredentials) -> None:
    publisher, offer, sku, version = marketplace(MARKETPLACE_RHEL10, "ocp", "hyperVGen2")
    fake_cloud.add_azure_image("eastus2", publisher, offer, sku, version)
    fake_cloud.fail("/versions/", 429, times=1)
    verifier = CloudVerifier(azure=azure_creds, azure_endpoint=fake_cloud.url, settings=FAST, factories=TEST_FACTORIES)
    key = ImageKey("Azure", "eastus2", image_urn(publisher, offer, sku, version))
    facts = await verifier.verify([key])
    assert facts.errors == {}
    image = facts.image(key)
    assert image is not None and image.available
    verifier.close()


async def test_auth_failure_is_recorded(fake_cloud: FakeCloud, azure_creds: AzureCredentials) -> None:
    fake_cloud.fail("/versions/", 401, body={"error": {"code": "AuthenticationFailed", "message": "token expired"}})
    verifier = CloudVerifier(azure=azure_creds, azure_endpoint=fake_cloud.url, settings=FAST, factories=TEST_FACTORIES)
    key = ImageKey("Azure", "eastus", "redhat:rh-ocp-worker:rh-ocp-worker:4.18.2025031114")
    facts = await verifier.verify([key])
    assert (facts.error(key) or "").startswith("Azure authentication failed: AuthenticationFailed")
    verifier.close()


async def test_production_client_refuses_plain_http(fake_cloud: FakeCloud, azure_creds: AzureCredentials) -> None:
    """The ARM bearer policy stays in place: an http endpoint is an error, not a token leak."""
    verifier = CloudVerifier(azure=azure_creds, azure_endpoint=fake_cloud.url, settings=FAST)
    key = ImageKey("Azure", "eastus", "redhat:rh-ocp-worker:rh-ocp-worker:4.18.2025031114")
    facts = await verifier.verify([key])
    assert "non-TLS" in (facts.error(key) or "") or "https" in (facts.error(key) or "")
    assert fake_cloud.count() == 0
    verifier.close()


def test_production_credentials_by_secret_kind(azure_creds: AzureCredentials, tmp_path: Path) -> None:
    assert isinstance(make_credential(azure_creds), ClientSecretCredential)
    token = tmp_path / "token"
    token.write_text("federated-token")
    federated = parse_azure_credentials(secret("azure-cloud-credentials", {
        "azure_client_id": "11111111-2222-3333-4444-555555555555",
        "azure_tenant_id": "66666666-7777-8888-9999-000000000000",
        "azure_subscription_id": "00000000-0000-0000-0000-000000000000",
        "azure_federated_token_file": str(token),
    }))
    assert isinstance(make_credential(federated), WorkloadIdentityCredential)


def test_endpoint_override_sets_base_url_and_token_scope(
    azure_creds: AzureCredentials, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(AZURE_ENDPOINT_ENV, "https://management.usgovcloudapi.net/")
    images = AzureImages(azure_creds, options=AzureOptions())
    assert images.endpoint == "https://management.usgovcloudapi.net/"
    client = make_client(azure_creds, images.endpoint, AzureOptions())
    assert client._config.credential_scopes == ["https://management.usgovcloudapi.net/.default"]
    client.close()
