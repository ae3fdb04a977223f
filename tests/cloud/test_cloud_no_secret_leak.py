"""No credential value in any log line (structlog or stdlib, DEBUG included) or error message.

Runs real lookups on all three clouds, succeeding and failing, with distinctive secret values,
while capturing everything logged at DEBUG, then searches the capture for those values.
"""

from __future__ import annotations

import io
import logging
from collections.abc import Iterator
from pathlib import Path

import pytest
import structlog

from bootimage_controller.cloud.credentials import (
    GcpCredentials,
    parse_aws_credentials,
    parse_azure_credentials,
    parse_gcp_credentials,
)
from bootimage_controller.cloud.verifier import CHATTY_SDK_LOGGERS, NOISY_AT_INFO, CloudVerifier
from bootimage_controller.core.cloud.facts import CloudFacts, ImageKey

from .amis import CUSTOM_AMI, OCP_X86_PRODUCT
from .conftest import (
    AWS_KEY_ID,
    AWS_SECRET_KEY,
    AZURE_CLIENT_SECRET,
    FAST,
    TEST_FACTORIES,
    secret,
    service_account_json,
)
from .fakes import FakeCloud, FaultProxy

WEB_IDENTITY_TOKEN = "eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJMRUFLQ0FOQVJZMDUifQ.LEAKCANARY05signature"
GCP_PROJECT = "rhcos-cloud"
GCP_IMAGE = "rhcos-9-6-20260112-0-gcp-x86-64"


@pytest.fixture
def capture() -> Iterator[io.StringIO]:
    """Everything: stdlib records at DEBUG from every logger, and every structlog event."""
    buf = io.StringIO()
    handler = logging.StreamHandler(buf)
    handler.setLevel(logging.DEBUG)
    handler.setFormatter(logging.Formatter("%(name)s %(levelname)s %(message)s"))
    root = logging.getLogger()
    old_level = root.level
    # Start from untouched SDK loggers: the verifier must quiet them itself.
    for name in (*CHATTY_SDK_LOGGERS, *NOISY_AT_INFO):
        logging.getLogger(name).setLevel(logging.NOTSET)
    root.addHandler(handler)
    root.setLevel(logging.DEBUG)
    structlog.configure(
        processors=[structlog.processors.add_log_level, structlog.processors.KeyValueRenderer()],
        logger_factory=structlog.WriteLoggerFactory(file=buf),
        wrapper_class=structlog.make_filtering_bound_logger(logging.DEBUG),
        cache_logger_on_first_use=False,
    )
    try:
        yield buf
    finally:
        root.removeHandler(handler)
        root.setLevel(old_level)
        structlog.reset_defaults()


def gcp_secret_values(creds: GcpCredentials) -> list[str]:
    info = creds.info()
    body_lines = [line for line in info["private_key"].splitlines() if line and not line.startswith("-----")]
    return [info["private_key_id"], *body_lines[1:4]]


async def test_no_secret_value_is_logged_or_reported(
    capture: io.StringIO,
    ec2_proxy: FaultProxy,
    fake_cloud: FakeCloud,
    service_account_key: tuple[str, str],
    tmp_path: Path,
) -> None:
    facts: list[CloudFacts] = []
    token_file = tmp_path / "token"
    token_file.write_text(WEB_IDENTITY_TOKEN)
    aws = parse_aws_credentials(secret("aws-cloud-credentials", {
        "aws_access_key_id": AWS_KEY_ID, "aws_secret_access_key": AWS_SECRET_KEY}))
    aws_sts = parse_aws_credentials(secret("aws-cloud-credentials", {
        "role_arn": "arn:aws:iam::123456789012:role/machine-api", "web_identity_token_file": str(token_file)}, rv="2"))
    gcp = parse_gcp_credentials(secret("gcp-cloud-credentials", {
        "service_account.json": service_account_json(service_account_key, fake_cloud.url + "/token")}))
    azure = parse_azure_credentials(secret("azure-cloud-credentials", {
        "azure_client_id": "11111111-2222-3333-4444-555555555555", "azure_client_secret": AZURE_CLIENT_SECRET,
        "azure_tenant_id": "66666666-7777-8888-9999-000000000000",
        "azure_subscription_id": "00000000-0000-0000-0000-000000000000"}))
    fake_cloud.add_gcp_image(GCP_PROJECT, GCP_IMAGE)
    fake_cloud.add_azure_image("eastus", "redhat", "rh-ocp-worker", "rh-ocp-worker", "4.18.2025031114")

    aws_key = ImageKey("AWS", "us-east-1", CUSTOM_AMI)
    gcp_ok = ImageKey("GCP", "us-central1-a", f"projects/{GCP_PROJECT}/global/images/{GCP_IMAGE}")
    gcp_missing = ImageKey("GCP", "us-central1-a", f"projects/{GCP_PROJECT}/global/images/rhcos-none")
    gcp_failing = ImageKey("GCP", "us-central1-a", f"projects/{GCP_PROJECT}/global/images/rhcos-9-8-20260403-0-gcp-x86-64")
    azure_ok = ImageKey("Azure", "eastus", "redhat:rh-ocp-worker:rh-ocp-worker:4.18.2025031114")
    azure_failing = ImageKey("Azure", "westus", "redhat:rh-ocp-worker:rh-ocp-worker:4.18.2025031114")
    all_keys = [aws_key, gcp_ok, gcp_missing, gcp_failing, azure_ok, azure_failing]

    # 1. Everything answers (AWS through the proxy to moto), except the injected failures.
    fake_cloud.fail("rhcos-9-8-20260403-0", 500)
    fake_cloud.fail("/locations/westus/", 401, body={"error": {"code": "InvalidAuthenticationToken", "message": "x"}})
    verifier = CloudVerifier(aws=aws, gcp=gcp, azure=azure, gcp_endpoint=fake_cloud.url,
                             azure_endpoint=fake_cloud.url, settings=FAST, factories=TEST_FACTORIES)
    facts.append(await verifier.verify(all_keys, marketplace=[("us-east-1", OCP_X86_PRODUCT)]))
    assert facts[-1].image(aws_key) is not None and facts[-1].image(gcp_ok) is not None, facts[-1].errors
    assert gcp_failing in facts[-1].errors and azure_failing in facts[-1].errors

    # 2. EC2 rejects the keys.
    ec2_proxy.fail_ec2(401, "AuthFailure", "AWS was not able to validate the provided access credentials")
    verifier.clear_cache()
    facts.append(await verifier.verify([aws_key], marketplace=[("us-east-1", OCP_X86_PRODUCT)]))
    assert aws_key in facts[-1].errors
    verifier.close()

    # 3. STS web identity (the token file's content is a credential), through moto.
    ec2_proxy.faults.clear()
    sts = CloudVerifier(aws=aws_sts, settings=FAST)
    facts.append(await sts.verify([aws_key]))
    assert facts[-1].image(aws_key) is not None
    sts.close()

    # 4. The production Azure client over http refuses to send the token.
    prod = CloudVerifier(azure=azure, azure_endpoint=fake_cloud.url, settings=FAST)
    facts.append(await prod.verify([azure_ok]))
    assert azure_ok in facts[-1].errors
    prod.close()

    # 5. Broken Secrets carrying secret values.
    broken = CloudVerifier()
    broken.update_secret("AWS", secret("aws-cloud-credentials", {
        "credentials": f"aws_access_key_id={AWS_KEY_ID}\naws_secret_access_key={AWS_SECRET_KEY}"}))
    broken.update_secret("Azure", secret("azure-cloud-credentials", {"azure_client_secret": AZURE_CLIENT_SECRET}))

    logged = capture.getvalue()
    # The capture saw our lines and the SDKs' own (so an absence below means something).
    assert "cloud credentials loaded" in logged and "cloud lookup failed" in logged
    assert "event='cloud lookup'" in logged  # our DEBUG lines
    assert "botocore" in logged and "azure" in logged
    reported = logged + "".join(repr(f) for f in facts)
    canaries = [AWS_KEY_ID, AWS_SECRET_KEY, WEB_IDENTITY_TOKEN, AZURE_CLIENT_SECRET, *gcp_secret_values(gcp)]
    leaked = [c for c in canaries if c in reported]
    assert leaked == []
