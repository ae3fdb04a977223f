"""GCP lookups: the real compute_v1 REST client and google-auth service account flow, on a local fake."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from cryptography.hazmat.primitives import serialization
from google.auth import jwt as google_jwt

from bootimage_controller.cloud.credentials import GcpCredentials
from bootimage_controller.cloud.gcp import GCP_ENDPOINT_ENV, GcpImages, parse_image_path
from bootimage_controller.cloud.verifier import CloudVerifier
from bootimage_controller.core.cloud.facts import ImageKey
from bootimage_controller.errors import InputError

from .amis import STREAM_DIR
from .conftest import FAST
from .fakes import FakeCloud


def stream_gcp(file: str, arch: str = "x86_64") -> tuple[str, str, str]:
    gcp = json.loads((STREAM_DIR / file).read_text())["architectures"][arch]["images"]["gcp"]
    return gcp["project"], gcp["name"], gcp["release"]


@pytest.fixture
def images(fake_cloud: FakeCloud, gcp_creds: GcpCredentials) -> Iterator[GcpImages]:
    client = GcpImages(gcp_creds, endpoint=fake_cloud.url, options=FAST.gcp)
    yield client
    client.close()


@pytest.mark.parametrize(
    "file",
    ["installer-release-4.19-rhcos.json", "installer-release-4.18-rhcos.json", "installer-release-4.22-coreos-rhel-10.json"],
)
def test_ready_image_is_available_with_release_from_name(
    fake_cloud: FakeCloud, images: GcpImages, file: str
) -> None:
    project, name, release = stream_gcp(file)
    fake_cloud.add_gcp_image(project, name)
    path = f"projects/{project}/global/images/{name}"
    image = images.get_image(path, zone="us-central1-a")
    assert image.key == ImageKey("GCP", "us-central1-a", path)
    assert image.exists and image.available
    assert image.release == release
    assert image.owner == project


def test_requests_are_signed_with_the_service_account_key(
    fake_cloud: FakeCloud, images: GcpImages, service_account_key: tuple[str, str]
) -> None:
    """compute_v1 uses self-signed JWTs for service account keys: no token endpoint round trip."""
    project, name, _release = stream_gcp("installer-release-4.21-rhcos.json")
    fake_cloud.add_gcp_image(project, name)
    images.get_image(f"projects/{project}/global/images/{name}")
    (get,) = [r for r in fake_cloud.requests if r.method == "GET"]
    scheme, _, token = get.headers["authorization"].partition(" ")
    assert scheme == "Bearer"
    public_pem = (
        serialization.load_pem_private_key(service_account_key[0].encode(), None)
        .public_key()
        .public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    )
    claims = google_jwt.decode(token, certs=public_pem, verify=True)  # type: ignore[no-untyped-call]
    assert claims["iss"] == images.credentials.info()["client_email"]
    assert google_jwt.decode_header(token)["kid"] == service_account_key[1]  # type: ignore[no-untyped-call]
    assert fake_cloud.count("/token") == 0


def test_missing_image_does_not_exist(images: GcpImages) -> None:
    image = images.get_image("projects/rhcos-cloud/global/images/rhcos-9-9-20990101-0-gcp-x86-64")
    assert not image.exists and not image.available


def test_pending_image_exists_but_is_not_available(fake_cloud: FakeCloud, images: GcpImages) -> None:
    project, name, _release = stream_gcp("installer-release-4.22-coreos-rhel-9.json")
    fake_cloud.add_gcp_image(project, name, status="PENDING")
    image = images.get_image(f"projects/{project}/global/images/{name}")
    assert image.exists and not image.available


def test_obsolete_image_is_not_available(fake_cloud: FakeCloud, images: GcpImages) -> None:
    project, name, _release = stream_gcp("installer-release-4.16-rhcos.json")
    fake_cloud.add_gcp_image(project, name, deprecated={"state": "OBSOLETE"})
    image = images.get_image(f"projects/{project}/global/images/{name}")
    assert image.exists and not image.available


def test_full_url_and_family_references(fake_cloud: FakeCloud, images: GcpImages) -> None:
    project, name, release = stream_gcp("installer-release-4.19-rhcos.json")
    fake_cloud.add_gcp_image(project, name, family="rhcos-9-6")
    url = f"https://www.googleapis.com/compute/v1/projects/{project}/global/images/{name}"
    assert images.get_image(url).release == release
    by_family = images.get_image(f"projects/{project}/global/images/family/rhcos-9-6")
    assert by_family.exists and by_family.name == name


def test_not_an_image_path_is_input_error() -> None:
    with pytest.raises(InputError, match="projects/<project>/global/images/<name>"):
        parse_image_path("rhcos-9-6-20260112-0-gcp-x86-64")


def test_throttled_once_then_answered(fake_cloud: FakeCloud, images: GcpImages) -> None:
    project, name, _release = stream_gcp("installer-release-4.19-rhcos.json")
    fake_cloud.add_gcp_image(project, name)
    fake_cloud.fail("/global/images/", 429, times=1)
    assert images.get_image(f"projects/{project}/global/images/{name}").available
    assert fake_cloud.count("/global/images/") == 2


@pytest.mark.parametrize("status", [429, 500, 503])
async def test_persistent_throttling_or_5xx_is_recorded_after_retries(
    fake_cloud: FakeCloud, gcp_creds: GcpCredentials, status: int
) -> None:
    project, name, _release = stream_gcp("installer-release-4.19-rhcos.json")
    fake_cloud.add_gcp_image(project, name)
    fake_cloud.fail("/global/images/", status)
    verifier = CloudVerifier(gcp=gcp_creds, gcp_endpoint=fake_cloud.url, settings=FAST)
    key = ImageKey("GCP", "us-central1-a", f"projects/{project}/global/images/{name}")
    facts = await verifier.verify([key])
    assert key not in facts.images
    message = facts.error(key) or ""
    assert message.startswith("gave up retrying") and f"HTTP {status}" in message
    assert fake_cloud.count("/global/images/") >= 2
    verifier.close()


def test_endpoint_comes_from_environment(
    fake_cloud: FakeCloud, gcp_creds: GcpCredentials, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(GCP_ENDPOINT_ENV, fake_cloud.url)
    project, name, _release = stream_gcp("installer-release-4.19-rhcos.json")
    fake_cloud.add_gcp_image(project, name)
    images = GcpImages(gcp_creds, options=FAST.gcp)
    assert images.endpoint == fake_cloud.url
    assert images.get_image(f"projects/{project}/global/images/{name}").exists
    images.close()


async def test_one_lookup_serves_every_zone(fake_cloud: FakeCloud, gcp_creds: GcpCredentials) -> None:
    project, name, release = stream_gcp("installer-release-4.19-rhcos.json")
    fake_cloud.add_gcp_image(project, name)
    verifier = CloudVerifier(gcp=gcp_creds, gcp_endpoint=fake_cloud.url, settings=FAST)
    path = f"projects/{project}/global/images/{name}"
    keys = [ImageKey("GCP", zone, path) for zone in ("us-central1-a", "us-central1-b", "us-central1-c")]
    facts = await verifier.verify(keys)
    assert fake_cloud.count("/global/images/") == 1
    assert [facts.images[k].key for k in keys] == keys
    assert {facts.images[k].release for k in keys} == {release}
    verifier.close()


@pytest.mark.parametrize(("state", "available"), [("DEPRECATED", True), ("OBSOLETE", False), ("DELETED", False)])
def test_a_deprecated_image_says_so(fake_cloud: FakeCloud, images: GcpImages, state: str, available: bool) -> None:
    project, name, _release = stream_gcp("installer-release-4.16-rhcos.json")
    fake_cloud.add_gcp_image(project, name, deprecated={"state": state})
    image = images.get_image(f"projects/{project}/global/images/{name}")
    assert image.available is available
    assert image.deprecated == f"{state} (GCP deprecated.state)"
    fake_cloud.add_gcp_image(project, name)
    assert images.get_image(f"projects/{project}/global/images/{name}").deprecated is None
