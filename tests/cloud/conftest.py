"""Fixtures for the cloud lookup tests: moto (subprocess), the GCP/Azure fake, credentials."""

from __future__ import annotations

import base64
import json
import logging
import os
import select
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
from azure.core.credentials import AccessToken
from azure.core.pipeline.policies import HeadersPolicy
from azure.mgmt.compute import ComputeManagementClient
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from bootimage_controller.cloud.aws import AwsOptions
from bootimage_controller.cloud.azure import AzureOptions
from bootimage_controller.cloud.credentials import (
    AwsCredentials,
    AzureCredentials,
    GcpCredentials,
    parse_aws_credentials,
    parse_azure_credentials,
    parse_gcp_credentials,
)
from bootimage_controller.cloud.gcp import GcpOptions
from bootimage_controller.cloud.verifier import ClientFactories, VerifierSettings

from .amis import write_catalogue
from .fakes import FakeCloud, FaultProxy, running

# Distinctive values so a leak is unmistakable in captured output.
AWS_KEY_ID = "AKIATESTLEAKCANARY01"
AWS_SECRET_KEY = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYLEAKCANARY02"
AZURE_CLIENT_SECRET = "azure~client~secret~LEAKCANARY03"
AZURE_SUBSCRIPTION = "00000000-0000-0000-0000-000000000000"

FAST = VerifierSettings(
    # The ceiling on a whole lookup, not what a test waits for (test_cloud_verifier sets its own 0.2 s):
    # a cold boto3 client under the full suite's load took over 10 s once.
    call_timeout=60.0,
    concurrency=4,
    cache_ttl=300.0,
    # moto answers in milliseconds, but under the full suite's load a first DescribeImages once
    # passed botocore's 5 s read timeout; nothing here tests that timeout firing.
    aws=AwsOptions(max_attempts=3, connect_timeout=10.0, read_timeout=30.0),
    gcp=GcpOptions(attempt_timeout=5.0, retry_deadline=0.5, initial_backoff=0.01, max_backoff=0.05),
    azure=AzureOptions(retry_total=2, retry_backoff_factor=0.01, retry_backoff_max=0.05,
                       connection_timeout=2.0, read_timeout=5.0),
)


# google-auth looks up a "regional access boundary" in a background thread after each token refresh;
# here that goes to the dead proxy below, and urllib3's retry warnings arrive after pytest has closed
# the captured stream ("--- Logging error ---" tracebacks in the suite's output). Not the code under
# test, which neither starts nor waits for that thread.
logging.getLogger("urllib3.connectionpool").setLevel(logging.ERROR)


@pytest.fixture(autouse=True)
def no_internet(monkeypatch: pytest.MonkeyPatch) -> None:
    """Anything not on 127.0.0.1 goes to a dead proxy and fails at once (e.g. google-auth's
    background regional-access-boundary lookup to iamcredentials.googleapis.com)."""
    for var in ("HTTPS_PROXY", "HTTP_PROXY", "https_proxy", "http_proxy"):
        monkeypatch.setenv(var, "http://127.0.0.1:9")
    for var in ("NO_PROXY", "no_proxy"):
        monkeypatch.setenv(var, "127.0.0.1,localhost")


def b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def secret(name: str, data: Mapping[str, str], rv: str = "1") -> dict[str, Any]:
    """A Secret as the API returns it (values base64-encoded)."""
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": name, "namespace": "openshift-machine-api", "resourceVersion": rv},
        "data": {k: b64(v) for k, v in data.items()},
    }


# --- moto ---------------------------------------------------------------------------------------------


@pytest.fixture(scope="session")
def moto_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """moto's server in a subprocess, so MOTO_AMIS_PATH is set before moto is imported."""
    amis = write_catalogue(tmp_path_factory.mktemp("moto") / "amis.json")
    env = {**os.environ, "MOTO_AMIS_PATH": str(amis)}
    script = Path(__file__).with_name("moto_server.py")
    proc = subprocess.Popen(
        [sys.executable, str(script)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env, text=True
    )
    assert proc.stdout is not None and proc.stdin is not None
    try:
        ready, _, _ = select.select([proc.stdout], [], [], 30)
        line = proc.stdout.readline().strip() if ready else ""
        if not line.isdigit():
            raise RuntimeError(f"moto server did not start (got {line!r}, exit code {proc.poll()})")
        yield f"http://127.0.0.1:{line}"
    finally:
        # Our own child, stopped by its handle: moto's graceful shutdown is slow and buys nothing.
        proc.stdin.close()
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def moto_reset(url: str) -> None:
    # Not `urlopen`: its first call caches a process-wide opener with the proxy variables of that
    # moment (the dead proxy of `no_internet`), which then breaks every later `urlopen` to loopback.
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    opener.open(urllib.request.Request(url + "/moto-api/reset", method="POST"), timeout=10).read()


@pytest.fixture
def aws_env(monkeypatch: pytest.MonkeyPatch, moto_url: str, tmp_path: Path) -> str:
    """boto3 pointed at moto through its own AWS_ENDPOINT_URL; nothing from the host leaks in."""
    for var in list(os.environ):
        if var.startswith("AWS_"):
            monkeypatch.delenv(var)
    monkeypatch.setenv("AWS_ENDPOINT_URL", moto_url)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-aws-config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-aws-credentials"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    return moto_url


@pytest.fixture
def ec2_proxy(aws_env: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[FaultProxy]:
    """A fault-injecting proxy in front of moto, set as the EC2 endpoint."""
    with running(FaultProxy(aws_env)) as proxy:
        monkeypatch.setenv("AWS_ENDPOINT_URL_EC2", proxy.url)
        yield proxy


@pytest.fixture
def aws_creds() -> AwsCredentials:
    return parse_aws_credentials(
        secret("aws-cloud-credentials", {"aws_access_key_id": AWS_KEY_ID, "aws_secret_access_key": AWS_SECRET_KEY})
    )


# --- GCP / Azure fake -------------------------------------------------------------------------------


@pytest.fixture
def fake_cloud() -> Iterator[FakeCloud]:
    with running(FakeCloud()) as server:
        yield server


@pytest.fixture(scope="session")
def service_account_key() -> tuple[str, str]:
    """(private key PEM, key id) of a throwaway RSA key, made once per session."""
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    pem = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    ).decode()
    return pem, "0123456789abcdef0123456789abcdefLEAKCANARY04"


def service_account_json(key: tuple[str, str], token_uri: str) -> str:
    pem, key_id = key
    return json.dumps(
        {
            "type": "service_account",
            "project_id": "openshift-ci-cluster",
            "private_key_id": key_id,
            "private_key": pem,
            "client_email": "machine-api@openshift-ci-cluster.iam.gserviceaccount.com",
            "client_id": "123456789012345678901",
            "token_uri": token_uri,
        }
    )


@pytest.fixture
def gcp_creds(fake_cloud: FakeCloud, service_account_key: tuple[str, str]) -> GcpCredentials:
    """A real service account key whose token endpoint is the fake's `/token`."""
    return parse_gcp_credentials(
        secret("gcp-cloud-credentials", {"service_account.json": service_account_json(
            service_account_key, fake_cloud.url + "/token")})
    )


@pytest.fixture
def azure_creds() -> AzureCredentials:
    return parse_azure_credentials(
        secret(
            "azure-cloud-credentials",
            {
                "azure_client_id": "11111111-2222-3333-4444-555555555555",
                "azure_client_secret": AZURE_CLIENT_SECRET,
                "azure_tenant_id": "66666666-7777-8888-9999-000000000000",
                "azure_subscription_id": AZURE_SUBSCRIPTION,
            },
        )
    )


class FakeTokenCredential:
    def get_token(self, *scopes: str, **kwargs: Any) -> AccessToken:
        return AccessToken("fake-azure-token", int(time.time()) + 3600)


def azure_test_client(creds: AzureCredentials, endpoint: str | None, options: AzureOptions) -> Any:
    """The real ComputeManagementClient against the http fake: only the auth policy is swapped."""
    return ComputeManagementClient(
        FakeTokenCredential(),
        creds.subscription_id,
        base_url=endpoint,
        authentication_policy=HeadersPolicy({"Authorization": "Bearer fake-azure-token"}),
        **options.client_kwargs(),
    )


TEST_FACTORIES = ClientFactories(azure=azure_test_client)
