"""EC2 lookups with boto3 against moto over HTTP (catalogue built from the real stream metadata)."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import boto3
import pytest

from bootimage_controller.cloud.aws import AwsImages, AwsOptions
from bootimage_controller.cloud.credentials import AwsAuthMode, AwsCredentials, parse_aws_credentials
from bootimage_controller.cloud.verifier import CloudVerifier, VerifierSettings
from bootimage_controller.constants import AWS_MARKETPLACE_OWNER, AWS_RED_HAT_OWNER
from bootimage_controller.core.cloud.facts import ImageKey
from bootimage_controller.core.cloud.marketplace import marketplace_product_id, pick_marketplace_image
from bootimage_controller.data import EC2_API_VERSION

from .amis import CUSTOM_AMI, CUSTOM_OWNER, MARKETPLACE_AMIS, OCP_X86_PRODUCT, OKE_X86_PRODUCT, STREAM_DIR
from .conftest import FAST, moto_reset, secret
from .fakes import FaultProxy

REPO = Path(__file__).resolve().parents[2]
OPTIONS = AwsOptions(max_attempts=3, connect_timeout=10.0, read_timeout=30.0)  # load, not the test's subject


def stream_ami(file: str, arch: str, region: str) -> tuple[str, str]:
    doc = json.loads((STREAM_DIR / file).read_text())
    entry = doc["architectures"][arch]["images"]["aws"]["regions"][region]
    return entry["image"], entry["release"]


@pytest.fixture
def ec2(aws_env: str, aws_creds: AwsCredentials) -> Iterator[AwsImages]:
    images = AwsImages(aws_creds, OPTIONS)
    yield images
    images.close()


@pytest.mark.parametrize(
    ("file", "arch", "region"),
    [
        ("installer-4.16-416.94.202405291527-0-rhcos.json", "x86_64", "us-east-1"),
        ("installer-release-4.18-rhcos.json", "aarch64", "us-east-2"),
        ("installer-release-4.19-rhcos.json", "x86_64", "eu-west-1"),
        ("installer-release-4.22-coreos-rhel-10.json", "x86_64", "ap-southeast-2"),
    ],
)
def test_standard_rhcos_ami_is_red_hat_owned_with_release(ec2: AwsImages, file: str, arch: str, region: str) -> None:
    ami, release = stream_ami(file, arch, region)
    image = ec2.describe_image(region, ami)
    assert image.key == ImageKey("AWS", region, ami)
    assert image.exists and image.available
    assert image.owner == AWS_RED_HAT_OWNER
    assert image.release == release
    assert image.name is not None and image.name.startswith("rhcos-")


def test_marketplace_ami_resolves_product_and_best_candidate(ec2: AwsImages) -> None:
    current = next(m for m in MARKETPLACE_AMIS if m.release == "9.6.20250402-0")
    image = ec2.describe_image("us-east-1", current.ami_id)
    assert image.owner == AWS_MARKETPLACE_OWNER
    assert image.release == "9.6.20250402-0"  # from the description
    product = marketplace_product_id(image.name)
    assert product == OCP_X86_PRODUCT

    candidates = ec2.marketplace_candidates("us-east-1", product)
    ids = {c.key.image for c in candidates.images}
    assert ids == {m.ami_id for m in MARKETPLACE_AMIS if m.product == OCP_X86_PRODUCT}  # OKE's AMI is not one
    assert all(c.owner == AWS_MARKETPLACE_OWNER for c in candidates.images)

    # The 4.19 stream's AWS release is 9.6.20260112-0: the newest 9.6 AMI wins, 9.8 and 10.2 are too new.
    _ami, target_release = stream_ami("installer-release-4.19-rhcos.json", "x86_64", "us-east-1")
    best = pick_marketplace_image(candidates, target_release)
    assert best is not None and best.release == "9.6.20260210-0"
    # The 4.22 RHEL 9 stream (9.8) moves to the 9.8 AMI; the RHEL 10 stream to 10.2.
    _ami, rhel9_release = stream_ami("installer-release-4.22-coreos-rhel-9.json", "x86_64", "us-east-1")
    best = pick_marketplace_image(candidates, rhel9_release)
    assert best is not None and best.release == "9.8.20260403-0"
    # A 4.18 stream only accepts the OCP-encoded AMI.
    _ami, old_release = stream_ami("installer-release-4.18-rhcos.json", "x86_64", "us-east-1")
    best = pick_marketplace_image(candidates, old_release)
    assert best is not None and best.release == "418.94.202501221327-0"


def test_marketplace_candidates_of_other_product_are_separate(ec2: AwsImages) -> None:
    candidates = ec2.marketplace_candidates("us-east-2", OKE_X86_PRODUCT)
    assert [c.key.image for c in candidates.images] == [
        m.ami_id for m in MARKETPLACE_AMIS if m.product == OKE_X86_PRODUCT
    ]
    assert candidates.region == "us-east-2" and candidates.product_id == OKE_X86_PRODUCT


def test_custom_ami_has_another_owner_and_no_release(ec2: AwsImages) -> None:
    image = ec2.describe_image("us-east-1", CUSTOM_AMI)
    assert image.exists
    assert image.owner == CUSTOM_OWNER
    assert image.release is None
    assert marketplace_product_id(image.name) is None


@pytest.mark.parametrize("ami", ["ami-0123456789abcdef0", "not-an-ami-id"])
def test_missing_or_malformed_ami_does_not_exist(ec2: AwsImages, ami: str) -> None:
    image = ec2.describe_image("us-east-1", ami)
    assert not image.exists and not image.available


def test_deregistered_target_is_gone_in_that_region_only(aws_env: str, ec2: AwsImages) -> None:
    ami, _release = stream_ami("installer-release-4.22-coreos-rhel-9.json", "x86_64", "us-east-1")
    try:
        # With botocore's whole model: the daemon's own client knows DescribeImages only.
        boto3.client("ec2", region_name="us-east-1", aws_access_key_id="k", aws_secret_access_key="s").deregister_image(
            ImageId=ami)
        assert not ec2.describe_image("us-east-1", ami).exists
        assert ec2.describe_image("eu-west-1", ami).exists
    finally:
        moto_reset(aws_env)


def test_clients_are_cached_per_region_and_rebuilt_on_rotation(ec2: AwsImages) -> None:
    first = ec2.client("us-east-1")
    assert ec2.client("us-east-1") is first
    assert ec2.client("us-east-2") is not first
    same = parse_aws_credentials(secret("aws-cloud-credentials", {
        "aws_access_key_id": ec2.credentials.access_key_id or "", "aws_secret_access_key": "x" * 40}, rv="1"))
    assert ec2.set_credentials(same)  # different secret key, same resourceVersion: still a change
    rotated = ec2.client("us-east-1")
    assert rotated is not first
    assert not ec2.set_credentials(same)
    assert ec2.client("us-east-1") is rotated


def test_web_identity_credentials_assume_role_through_sts(aws_env: str, tmp_path: Path) -> None:
    token = tmp_path / "token"
    token.write_text("eyJhbGciOiJSUzI1NiJ9.e30.c2lnbmF0dXJl")
    creds = parse_aws_credentials(secret("aws-cloud-credentials", {
        "credentials": "[default]\nrole_arn = arn:aws:iam::123456789012:role/machine-api\n"
                       f"web_identity_token_file = {token}\n"}))
    assert creds.mode is AwsAuthMode.WEB_IDENTITY
    images = AwsImages(creds, OPTIONS)
    ami, release = stream_ami("installer-release-4.21-rhcos.json", "x86_64", "ca-central-1")
    image = images.describe_image("ca-central-1", ami)
    assert image.exists and image.release == release
    images.close()


# --- through the verifier: errors are recorded, never raised --------------------------------------


async def test_throttling_is_retried_then_recorded(ec2_proxy: FaultProxy, aws_creds: AwsCredentials) -> None:
    ec2_proxy.fail_ec2(503, "RequestLimitExceeded", "Request limit exceeded.")
    # Two attempts keep botocore's jittered throttling backoff under a second.
    settings = VerifierSettings(call_timeout=10, aws=AwsOptions(max_attempts=2, connect_timeout=2, read_timeout=5))
    verifier = CloudVerifier(aws=aws_creds, settings=settings)
    key = ImageKey("AWS", "us-east-1", stream_ami("installer-release-4.19-rhcos.json", "x86_64", "us-east-1")[0])
    facts = await verifier.verify([key])
    assert key not in facts.images
    message = facts.error(key)
    assert message is not None and "RequestLimitExceeded" in message and "after 1 retries" in message
    assert ec2_proxy.count() == 2
    verifier.close()


async def test_transient_server_error_is_retried_by_the_sdk(ec2_proxy: FaultProxy, aws_creds: AwsCredentials) -> None:
    ec2_proxy.fail_ec2(500, "InternalError", "An internal error has occurred.", times=1)
    verifier = CloudVerifier(aws=aws_creds, settings=FAST)
    ami, release = stream_ami("installer-release-4.19-rhcos.json", "x86_64", "us-east-1")
    key = ImageKey("AWS", "us-east-1", ami)
    facts = await verifier.verify([key])
    assert facts.errors == {}
    image = facts.image(key)
    assert image is not None and image.release == release
    assert ec2_proxy.count() == 2
    verifier.close()


async def test_auth_failure_is_recorded(ec2_proxy: FaultProxy, aws_creds: AwsCredentials) -> None:
    ec2_proxy.fail_ec2(401, "AuthFailure", "AWS was not able to validate the provided access credentials")
    verifier = CloudVerifier(aws=aws_creds, settings=FAST)
    key = ImageKey("AWS", "us-east-1", CUSTOM_AMI)
    facts = await verifier.verify([key], marketplace=[("us-east-1", OCP_X86_PRODUCT)])
    assert "AuthFailure" in (facts.error(key) or "")
    assert "AuthFailure" in facts.marketplace_errors[("us-east-1", OCP_X86_PRODUCT)]
    verifier.close()


async def test_verifier_fills_marketplace_candidates(aws_env: str, aws_creds: AwsCredentials) -> None:
    verifier = CloudVerifier(aws=aws_creds, settings=FAST)
    facts = await verifier.verify([], marketplace=[("eu-west-1", OCP_X86_PRODUCT)])
    found = facts.marketplace[("eu-west-1", OCP_X86_PRODUCT)]
    assert len(found.images) == sum(1 for m in MARKETPLACE_AMIS if m.product == OCP_X86_PRODUCT)
    # Newest first, so a reader sees the latest AMI at the top.
    dates = [c.creation_date or "" for c in found.images]
    assert dates == sorted(dates, reverse=True)
    verifier.close()


def test_deprecation_time_in_the_past_makes_an_ami_deprecated_over_http(
    aws_env: str, aws_creds: AwsCredentials, monkeypatch: pytest.MonkeyPatch
) -> None:
    """EC2's `DeprecationTime` (moto does not model it: a responder in front of moto adds it, as EC2
    sends it): past is deprecated, future is not yet (issue 34, item 4)."""
    from .deprecating import deprecating_ec2

    old, _ = stream_ami("installer-4.16-416.94.202405291527-0-rhcos.json", "x86_64", "us-east-1")
    new, _ = stream_ami("installer-release-4.19-rhcos.json", "x86_64", "us-east-1")
    with deprecating_ec2(aws_env, {old: "2025-06-01T00:00:00.000Z", new: "2099-01-01T00:00:00.000Z"}) as url:
        monkeypatch.setenv("AWS_ENDPOINT_URL_EC2", url)
        images = AwsImages(aws_creds, OPTIONS)
        try:
            stale = images.describe_image("us-east-1", old)
            fresh = images.describe_image("us-east-1", new)
        finally:
            images.close()
    assert stale.exists and stale.available
    assert stale.deprecated == "deprecated since 2025-06-01T00:00:00.000Z (EC2 DeprecationTime)"
    assert fresh.exists and fresh.deprecated is None, "a DeprecationTime still ahead is not deprecated yet"


def test_deprecation_reads_iso_times_and_names_an_unreadable_one() -> None:
    from datetime import UTC, datetime

    from bootimage_controller.cloud.aws import deprecation

    now = datetime(2026, 11, 27, tzinfo=UTC)
    assert deprecation("2026-11-26T23:59:59.000Z", now) is not None
    assert deprecation("2026-11-28T00:00:00Z", now) is None
    assert deprecation(None, now) is None and deprecation("", now) is None
    assert deprecation("next tuesday", now) == "deprecated (DeprecationTime 'next tuesday')"


def test_the_ec2_client_is_built_from_the_model_cut_to_describe_images(ec2: AwsImages) -> None:
    """The daemon's EC2 clients load the package's cut model (issue 48, 16 MiB less per process),
    and the cut model is botocore's own DescribeImages, shapes and all (`hack/gen_botocore_data.py`)."""
    client = ec2.client("us-east-1")
    assert client.meta.service_model.operation_names == ["DescribeImages"]
    assert client.meta.service_model.api_version == EC2_API_VERSION
    # The paginator the Marketplace lookup pages with comes from botocore's own data.
    assert client.can_paginate("describe_images")
    regenerated = subprocess.run([sys.executable, str(REPO / "hack" / "gen_botocore_data.py"), "--check"],
                                 capture_output=True, text=True, check=False)
    assert regenerated.returncode == 0, regenerated.stdout + regenerated.stderr
