"""Cloud credentials read from the Secrets in `openshift-machine-api` (SPEC section 1).

The Secrets are the ones the cloud-credential-operator provisions for the Machine API:

- `aws-cloud-credentials`: `aws_access_key_id` + `aws_secret_access_key`, or `role_arn` +
  `web_identity_token_file` (STS), or the same keys inside the `credentials` ini file CCO writes.
- `gcp-cloud-credentials`: `service_account.json` (a service account key, or an
  `external_account` configuration for workload identity federation).
- `azure-cloud-credentials`: `azure_client_id`, `azure_tenant_id`, `azure_subscription_id`, and
  `azure_client_secret` or `azure_federated_token_file` (workload identity).

Every parser raises `CredentialsError` (an `InputError`) naming the Secret and the key, never the
value. The credential objects print only where they came from and which kind they are: `repr`,
`str` and f-strings of them are safe to log.
"""

from __future__ import annotations

import base64
import binascii
import configparser
import json
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from ..constants import (
    AWS_CREDENTIALS_SECRET,
    AZURE_CREDENTIALS_SECRET,
    GCP_CREDENTIALS_SECRET,
    MAPI_NAMESPACE,
    VSPHERE_CREDENTIALS_SECRET,
    Platform,
)
from ..errors import InputError

# Keys inside the Secrets' `data`.
AWS_KEY_ACCESS_KEY_ID = "aws_access_key_id"
AWS_KEY_SECRET_ACCESS_KEY = "aws_secret_access_key"
AWS_KEY_ROLE_ARN = "role_arn"
AWS_KEY_WEB_IDENTITY_TOKEN_FILE = "web_identity_token_file"
AWS_KEY_CREDENTIALS_INI = "credentials"
GCP_KEY_SERVICE_ACCOUNT = "service_account.json"
AZURE_KEY_CLIENT_ID = "azure_client_id"
AZURE_KEY_CLIENT_SECRET = "azure_client_secret"
AZURE_KEY_TENANT_ID = "azure_tenant_id"
AZURE_KEY_SUBSCRIPTION_ID = "azure_subscription_id"
AZURE_KEY_FEDERATED_TOKEN_FILE = "azure_federated_token_file"

# The Secret each platform reads (name only: the namespace is always openshift-machine-api).
CREDENTIALS_SECRETS: Mapping[Platform, str] = {
    Platform.AWS: AWS_CREDENTIALS_SECRET,
    Platform.GCP: GCP_CREDENTIALS_SECRET,
    Platform.AZURE: AZURE_CREDENTIALS_SECRET,
}

# Secret values shorter than this are not worth scrubbing from text (they would match everywhere).
_MIN_SCRUB_LEN = 6


class CredentialsError(InputError):
    """A credentials Secret that lacks a key, or whose value cannot be decoded or parsed."""


@dataclass(frozen=True)
class SecretRef:
    """Where credentials came from: enough to name them in a message and to notice rotation."""

    namespace: str
    name: str
    resource_version: str | None = None

    def __str__(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def display(self) -> str:
        return f"Secret {self}"


class AwsAuthMode(StrEnum):
    STATIC_KEYS = "static-keys"
    WEB_IDENTITY = "web-identity"


@dataclass(frozen=True, repr=False)
class AwsCredentials:
    source: SecretRef
    mode: AwsAuthMode
    access_key_id: str | None = None
    secret_access_key: str | None = None
    role_arn: str | None = None
    web_identity_token_file: str | None = None

    def __repr__(self) -> str:
        return _safe_repr(self, self.source, mode=self.mode.value)

    __str__ = __repr__

    def secret_values(self) -> tuple[str, ...]:
        return _scrubbable(self.access_key_id, self.secret_access_key)


@dataclass(frozen=True, repr=False)
class GcpCredentials:
    source: SecretRef
    info_json: str  # the service_account.json text, validated as a JSON object
    credential_type: str  # `service_account`, `external_account`, ...
    project_id: str | None = None

    def __repr__(self) -> str:
        return _safe_repr(self, self.source, type=self.credential_type, project=self.project_id)

    __str__ = __repr__

    def info(self) -> dict[str, Any]:
        parsed: dict[str, Any] = json.loads(self.info_json)
        return parsed

    def secret_values(self) -> tuple[str, ...]:
        info = self.info()
        keys = ("private_key", "private_key_id", "client_secret", "refresh_token")
        return _scrubbable(*(info.get(k) for k in keys))


@dataclass(frozen=True, repr=False)
class AzureCredentials:
    source: SecretRef
    client_id: str
    tenant_id: str
    subscription_id: str
    client_secret: str | None = None
    federated_token_file: str | None = None

    def __repr__(self) -> str:
        mode = "workload-identity" if self.federated_token_file else "client-secret"
        return _safe_repr(self, self.source, mode=mode)

    __str__ = __repr__

    def secret_values(self) -> tuple[str, ...]:
        return _scrubbable(self.client_secret)


CloudCredentials = AwsCredentials | GcpCredentials | AzureCredentials


def _safe_repr(obj: object, source: SecretRef, **extra: str | None) -> str:
    parts = [f"secret={source}", f"resourceVersion={source.resource_version}"]
    parts += [f"{k}={v}" for k, v in extra.items() if v is not None]
    return f"{type(obj).__name__}({', '.join(parts)})"


def _scrubbable(*values: Any) -> tuple[str, ...]:
    return tuple(v for v in values if isinstance(v, str) and len(v) >= _MIN_SCRUB_LEN)


# --- parsing ---------------------------------------------------------------------------------------


class _SecretData:
    """The decoded `data` of one Secret, with errors that name the Secret and key only."""

    def __init__(self, secret: Mapping[str, Any], default_name: str) -> None:
        meta = secret.get("metadata")
        meta = meta if isinstance(meta, Mapping) else {}
        rv = meta.get("resourceVersion")
        self.ref = SecretRef(
            namespace=str(meta.get("namespace") or MAPI_NAMESPACE),
            name=str(meta.get("name") or default_name),
            resource_version=str(rv) if rv is not None else None,
        )
        data = secret.get("data")
        if data is not None and not isinstance(data, Mapping):
            raise self.error("data", "must be a map of base64 strings")
        self._data: Mapping[str, Any] = data or {}

    def error(self, key: str | None, problem: str) -> CredentialsError:
        field = f"data.{key}" if key and key != "data" else "data"
        return CredentialsError(self.ref.display, field, problem)

    def keys_present(self) -> list[str]:
        return [str(k) for k in self._data]

    def has(self, key: str) -> bool:
        return self._data.get(key) not in (None, "")

    def get(self, key: str) -> str | None:
        raw = self._data.get(key)
        if raw in (None, ""):
            return None
        if not isinstance(raw, str):
            raise self.error(key, "must be a base64 string")
        try:
            text = base64.b64decode(raw, validate=True).decode("utf-8")
        except (binascii.Error, ValueError):
            # Deliberately no detail from the decoder: it can quote the value.
            raise self.error(key, "is not valid base64-encoded UTF-8") from None
        text = text.strip()
        return text or None

    def require(self, key: str) -> str:
        value = self.get(key)
        if value is None:
            raise self.error(key, "missing or empty")
        return value


def _secret_mapping(secret: Any) -> Mapping[str, Any]:
    if isinstance(secret, Mapping):
        return secret
    # kubernetes_asyncio V1Secret and similar models.
    to_dict = getattr(secret, "to_dict", None)
    if callable(to_dict):
        d = to_dict()
        meta = d.get("metadata") or {}
        if "resource_version" in meta and "resourceVersion" not in meta:
            meta = {**meta, "resourceVersion": meta["resource_version"]}
        return {**d, "metadata": meta}
    raise CredentialsError("Secret", None, f"expected a Secret object, got {type(secret).__name__}")


def parse_aws_credentials(secret: Mapping[str, Any] | Any) -> AwsCredentials:
    """Static keys or STS web identity; top-level keys win over the `credentials` ini file."""
    d = _SecretData(_secret_mapping(secret), AWS_CREDENTIALS_SECRET)
    values = {
        k: d.get(k)
        for k in (AWS_KEY_ACCESS_KEY_ID, AWS_KEY_SECRET_ACCESS_KEY, AWS_KEY_ROLE_ARN, AWS_KEY_WEB_IDENTITY_TOKEN_FILE)
    }
    ini_text = d.get(AWS_KEY_CREDENTIALS_INI)
    if ini_text is not None:
        for k, v in _aws_ini(d, ini_text).items():
            if values.get(k) is None:
                values[k] = v
    role, token_file = values[AWS_KEY_ROLE_ARN], values[AWS_KEY_WEB_IDENTITY_TOKEN_FILE]
    if role and token_file:
        return AwsCredentials(d.ref, AwsAuthMode.WEB_IDENTITY, role_arn=role, web_identity_token_file=token_file)
    key_id, secret_key = values[AWS_KEY_ACCESS_KEY_ID], values[AWS_KEY_SECRET_ACCESS_KEY]
    if key_id and secret_key:
        return AwsCredentials(d.ref, AwsAuthMode.STATIC_KEYS, access_key_id=key_id, secret_access_key=secret_key)
    missing = _aws_missing(values)
    raise d.error(missing, f"missing or empty (need {AWS_KEY_ACCESS_KEY_ID} and {AWS_KEY_SECRET_ACCESS_KEY}, "
                           f"or {AWS_KEY_ROLE_ARN} and {AWS_KEY_WEB_IDENTITY_TOKEN_FILE})")


def _aws_missing(values: Mapping[str, str | None]) -> str:
    if values[AWS_KEY_ROLE_ARN] and not values[AWS_KEY_WEB_IDENTITY_TOKEN_FILE]:
        return AWS_KEY_WEB_IDENTITY_TOKEN_FILE
    if values[AWS_KEY_ACCESS_KEY_ID]:
        return AWS_KEY_SECRET_ACCESS_KEY
    return AWS_KEY_ACCESS_KEY_ID


def _aws_ini(d: _SecretData, text: str) -> dict[str, str]:
    """The `[default]` profile of the shared-credentials file CCO writes under `credentials`."""
    parser = configparser.ConfigParser(interpolation=None)
    try:
        parser.read_string(text)
    except configparser.Error:
        # configparser errors quote the offending line, which may hold a key.
        raise d.error(AWS_KEY_CREDENTIALS_INI, "is not an ini file with a [default] profile") from None
    sections = parser.sections()
    if not sections:
        raise d.error(AWS_KEY_CREDENTIALS_INI, "has no profile section")
    section = "default" if "default" in sections else sections[0]
    return {k: v.strip() for k, v in parser.items(section) if v.strip()}


def parse_gcp_credentials(secret: Mapping[str, Any] | Any) -> GcpCredentials:
    d = _SecretData(_secret_mapping(secret), GCP_CREDENTIALS_SECRET)
    text = d.require(GCP_KEY_SERVICE_ACCOUNT)
    try:
        info = json.loads(text)
    except ValueError:
        raise d.error(GCP_KEY_SERVICE_ACCOUNT, "is not valid JSON") from None
    if not isinstance(info, dict):
        raise d.error(GCP_KEY_SERVICE_ACCOUNT, "must be a JSON object")
    ctype = info.get("type")
    if not isinstance(ctype, str) or not ctype:
        raise d.error(GCP_KEY_SERVICE_ACCOUNT, "has no `type` (expected service_account or external_account)")
    if ctype == "service_account":
        for k in ("client_email", "private_key", "token_uri"):
            if not isinstance(info.get(k), str) or not info[k]:
                raise d.error(GCP_KEY_SERVICE_ACCOUNT, f"service account key lacks `{k}`")
    project = info.get("project_id") or info.get("quota_project_id")
    return GcpCredentials(d.ref, text, ctype, project if isinstance(project, str) else None)


def parse_azure_credentials(secret: Mapping[str, Any] | Any) -> AzureCredentials:
    d = _SecretData(_secret_mapping(secret), AZURE_CREDENTIALS_SECRET)
    client_id = d.require(AZURE_KEY_CLIENT_ID)
    tenant_id = d.require(AZURE_KEY_TENANT_ID)
    subscription_id = d.require(AZURE_KEY_SUBSCRIPTION_ID)
    token_file = d.get(AZURE_KEY_FEDERATED_TOKEN_FILE)
    client_secret = d.get(AZURE_KEY_CLIENT_SECRET)
    if token_file is None and client_secret is None:
        raise d.error(
            AZURE_KEY_CLIENT_SECRET,
            f"missing or empty (need {AZURE_KEY_CLIENT_SECRET} or {AZURE_KEY_FEDERATED_TOKEN_FILE})",
        )
    return AzureCredentials(
        d.ref,
        client_id=client_id,
        tenant_id=tenant_id,
        subscription_id=subscription_id,
        client_secret=client_secret,
        federated_token_file=token_file,
    )


def parse_credentials(platform: Platform | str, secret: Mapping[str, Any] | Any) -> CloudCredentials:
    """Dispatch on the platform (`constants.Platform` value)."""
    p = Platform(platform)
    if p is Platform.AWS:
        return parse_aws_credentials(secret)
    if p is Platform.GCP:
        return parse_gcp_credentials(secret)
    if p is Platform.AZURE:
        return parse_azure_credentials(secret)
    raise CredentialsError("cloud credentials", None, f"no cloud credentials for platform {p.value}")


def platform_of(credentials: CloudCredentials) -> Platform:
    if isinstance(credentials, AwsCredentials):
        return Platform.AWS
    if isinstance(credentials, GcpCredentials):
        return Platform.GCP
    return Platform.AZURE


@dataclass(frozen=True, repr=False)
class VSphereCredentials:
    """The machine API's vCenter credentials: `<server>.username` / `<server>.password` per vCenter."""

    source: SecretRef
    logins: Mapping[str, tuple[str, str]]  # server -> (username, password)

    def __repr__(self) -> str:
        return _safe_repr(self, self.source, servers=",".join(sorted(self.logins)) or None)

    __str__ = __repr__

    def secret_values(self) -> tuple[str, ...]:
        return _scrubbable(*(password for _, password in self.logins.values()))


def parse_vsphere_credentials(secret: Mapping[str, Any] | Any) -> VSphereCredentials:
    """Every server with both keys; a server with one of the two is an error naming the other."""
    d = _SecretData(_secret_mapping(secret), VSPHERE_CREDENTIALS_SECRET)
    servers = {k.rsplit(".", 1)[0] for k in d.keys_present() if k.endswith((".username", ".password"))}
    logins = {server: (d.require(f"{server}.username"), d.require(f"{server}.password")) for server in sorted(servers)}
    return VSphereCredentials(d.ref, logins)
