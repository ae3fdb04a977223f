"""Parsing the Machine API credentials Secrets: every key form CCO writes, and safe errors."""

from __future__ import annotations

import json

import pytest
from kubernetes_asyncio.client import V1ObjectMeta, V1Secret

from bootimage_controller.cloud.credentials import (
    AwsAuthMode,
    CredentialsError,
    parse_aws_credentials,
    parse_azure_credentials,
    parse_credentials,
    parse_gcp_credentials,
)
from bootimage_controller.errors import InputError

from .conftest import AWS_KEY_ID, AWS_SECRET_KEY, AZURE_CLIENT_SECRET, b64, secret

AWS_SECRET = "aws-cloud-credentials"


def test_aws_static_keys() -> None:
    creds = parse_aws_credentials(
        secret(AWS_SECRET, {"aws_access_key_id": AWS_KEY_ID, "aws_secret_access_key": AWS_SECRET_KEY}, rv="42")
    )
    assert creds.mode is AwsAuthMode.STATIC_KEYS
    assert (creds.access_key_id, creds.secret_access_key) == (AWS_KEY_ID, AWS_SECRET_KEY)
    assert str(creds.source) == "openshift-machine-api/aws-cloud-credentials"
    assert creds.source.resource_version == "42"


def test_aws_web_identity_keys_win_over_static_keys() -> None:
    creds = parse_aws_credentials(secret(AWS_SECRET, {
        "role_arn": "arn:aws:iam::123456789012:role/openshift-machine-api-aws",
        "web_identity_token_file": "/var/run/secrets/openshift/serviceaccount/token",
        "aws_access_key_id": AWS_KEY_ID, "aws_secret_access_key": AWS_SECRET_KEY,
    }))
    assert creds.mode is AwsAuthMode.WEB_IDENTITY
    assert creds.role_arn == "arn:aws:iam::123456789012:role/openshift-machine-api-aws"


def test_aws_credentials_ini_as_cco_writes_it() -> None:
    ini = f"[default]\naws_access_key_id = {AWS_KEY_ID}\naws_secret_access_key = {AWS_SECRET_KEY}\n"
    creds = parse_aws_credentials(secret(AWS_SECRET, {"credentials": ini}))
    assert creds.mode is AwsAuthMode.STATIC_KEYS and creds.secret_access_key == AWS_SECRET_KEY

    sts_ini = ("[default]\nsts_regional_endpoints = regional\nrole_arn = arn:aws:iam::1:role/r\n"
               "web_identity_token_file = /var/run/secrets/openshift/serviceaccount/token\n")
    creds = parse_aws_credentials(secret(AWS_SECRET, {"credentials": sts_ini}))
    assert creds.mode is AwsAuthMode.WEB_IDENTITY
    assert creds.web_identity_token_file == "/var/run/secrets/openshift/serviceaccount/token"


def test_aws_missing_secret_key_names_secret_and_key_only() -> None:
    with pytest.raises(CredentialsError) as info:
        parse_aws_credentials(secret(AWS_SECRET, {"aws_access_key_id": AWS_KEY_ID}))
    err = info.value
    assert isinstance(err, InputError)
    assert err.obj == "Secret openshift-machine-api/aws-cloud-credentials"
    assert err.field == "data.aws_secret_access_key"
    assert AWS_KEY_ID not in str(err)


def test_aws_role_without_token_file_names_the_token_key() -> None:
    with pytest.raises(CredentialsError) as info:
        parse_aws_credentials(secret(AWS_SECRET, {"role_arn": "arn:aws:iam::1:role/r"}))
    assert info.value.field == "data.web_identity_token_file"


def test_undecodable_value_names_the_key_not_the_value() -> None:
    raw = secret(AWS_SECRET, {"aws_access_key_id": AWS_KEY_ID})
    raw["data"]["aws_secret_access_key"] = AWS_SECRET_KEY + "!!"  # not base64
    with pytest.raises(CredentialsError) as info:
        parse_aws_credentials(raw)
    assert info.value.field == "data.aws_secret_access_key"
    assert "base64" in str(info.value) and AWS_SECRET_KEY not in str(info.value)


def test_broken_ini_does_not_quote_its_lines() -> None:
    with pytest.raises(CredentialsError) as info:
        parse_aws_credentials(secret(AWS_SECRET, {"credentials": f"aws_secret_access_key = {AWS_SECRET_KEY}\n"}))
    assert info.value.field == "data.credentials" and AWS_SECRET_KEY not in str(info.value)


def test_kubernetes_client_secret_model_is_accepted() -> None:
    model = V1Secret(
        metadata=V1ObjectMeta(name=AWS_SECRET, namespace="openshift-machine-api", resource_version="9"),
        data={"aws_access_key_id": b64(AWS_KEY_ID), "aws_secret_access_key": b64(AWS_SECRET_KEY)},
    )
    creds = parse_credentials("AWS", model)
    assert creds.source.resource_version == "9" and creds.source.name == AWS_SECRET


def test_gcp_service_account() -> None:
    sa = {"type": "service_account", "project_id": "p1", "private_key": "-----BEGIN PRIVATE KEY-----\nx\n",
          "client_email": "a@p1.iam.gserviceaccount.com", "token_uri": "https://oauth2.googleapis.com/token"}
    creds = parse_gcp_credentials(secret("gcp-cloud-credentials", {"service_account.json": json.dumps(sa)}))
    assert creds.credential_type == "service_account" and creds.project_id == "p1"
    assert creds.info() == sa


@pytest.mark.parametrize(
    ("doc", "problem"),
    [("{not json", "not valid JSON"), ("[]", "JSON object"), ('{"project_id": "p"}', "no `type`"),
     ('{"type": "service_account", "client_email": "a@b", "token_uri": "t"}', "lacks `private_key`")],
)
def test_gcp_bad_service_account_json(doc: str, problem: str) -> None:
    with pytest.raises(CredentialsError, match=problem) as info:
        parse_gcp_credentials(secret("gcp-cloud-credentials", {"service_account.json": doc}))
    assert info.value.field == "data.service_account.json"


def test_gcp_missing_key() -> None:
    with pytest.raises(CredentialsError) as info:
        parse_gcp_credentials(secret("gcp-cloud-credentials", {}))
    assert info.value.field == "data.service_account.json" and "missing" in info.value.problem


AZURE_IDS = {"azure_client_id": "cid", "azure_tenant_id": "tid", "azure_subscription_id": "sid"}


def test_azure_client_secret_and_workload_identity() -> None:
    creds = parse_azure_credentials(secret("azure-cloud-credentials",
                                           {**AZURE_IDS, "azure_client_secret": AZURE_CLIENT_SECRET}))
    assert creds.client_secret == AZURE_CLIENT_SECRET and creds.federated_token_file is None
    fed = parse_azure_credentials(secret("azure-cloud-credentials",
                                         {**AZURE_IDS, "azure_federated_token_file": "/var/run/token"}))
    assert fed.client_secret is None and fed.federated_token_file == "/var/run/token"


@pytest.mark.parametrize("drop", ["azure_client_id", "azure_tenant_id", "azure_subscription_id"])
def test_azure_missing_id_names_the_key(drop: str) -> None:
    data = {**AZURE_IDS, "azure_client_secret": AZURE_CLIENT_SECRET}
    del data[drop]
    with pytest.raises(CredentialsError) as info:
        parse_azure_credentials(secret("azure-cloud-credentials", data))
    assert info.value.field == f"data.{drop}"
    assert "Secret openshift-machine-api/azure-cloud-credentials" in str(info.value)


def test_azure_needs_a_secret_or_a_token_file() -> None:
    with pytest.raises(CredentialsError) as info:
        parse_azure_credentials(secret("azure-cloud-credentials", AZURE_IDS))
    assert info.value.field == "data.azure_client_secret"


def test_printing_credentials_shows_no_secret_value() -> None:
    aws = parse_aws_credentials(secret(AWS_SECRET, {"aws_access_key_id": AWS_KEY_ID,
                                                    "aws_secret_access_key": AWS_SECRET_KEY}))
    azure = parse_azure_credentials(secret("azure-cloud-credentials",
                                           {**AZURE_IDS, "azure_client_secret": AZURE_CLIENT_SECRET}))
    for text in (repr(aws), str(aws), f"{aws}", repr([aws, azure]), str({"c": azure}), f"{azure!r}"):
        for value in (AWS_KEY_ID, AWS_SECRET_KEY, AZURE_CLIENT_SECRET):
            assert value not in text
    assert repr(aws) == ("AwsCredentials(secret=openshift-machine-api/aws-cloud-credentials, "
                         "resourceVersion=1, mode=static-keys)")
