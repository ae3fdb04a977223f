"""Azure Marketplace image lookups: `ComputeManagementClient.virtual_machine_images.get`.

The sync client runs in threads (`asyncio.to_thread` in the verifier), like boto3 and compute_v1,
which have no asyncio clients at all: one concurrency model, one timeout story, and no aiohttp
session or async credential to close when the Secret rotates. Lookups are few and cached, so
threads cost nothing worth the second model.

Endpoint: `--azure-endpoint` (passed in explicitly) or `BOOTIMAGE_AZURE_ENDPOINT`, for sovereign
or private clouds; the token scope follows the endpoint. Authority: `--azure-authority` or
`BOOTIMAGE_AZURE_AUTHORITY`, the Entra ID host to sign in at (a sovereign cloud's, or a loopback
fake's in tests; instance discovery is then off, as such an authority is in no public list). The
production client keeps the ARM bearer policy, which refuses plain http: a local fake serves https
with a test certificate the process trusts (`REQUESTS_CA_BUNDLE`), never by relaxing checks here.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from azure.core.exceptions import ResourceNotFoundError

from ..constants import Platform
from ..core.cloud.facts import CloudImage, ImageKey
from ..core.skew.versions import parse_rhcos_version
from ..errors import InputError, VersionError
from .clients import RebuildableClient
from .credentials import AzureCredentials

AZURE_ENDPOINT_ENV = "BOOTIMAGE_AZURE_ENDPOINT"
# Marketplace images the publisher has retired can no longer boot new VMs.
_DEPRECATED = "deprecated"


@dataclass(frozen=True)
class AzureOptions:
    retry_total: int = 4
    retry_backoff_factor: float = 0.8
    retry_backoff_max: float = 30.0
    connection_timeout: float = 10.0
    read_timeout: float = 30.0
    authority: str | None = None  # Entra ID host or URL to sign in at; None: the public cloud's

    def client_kwargs(self) -> dict[str, Any]:
        return {
            "retry_total": self.retry_total,
            "retry_backoff_factor": self.retry_backoff_factor,
            "retry_backoff_max": self.retry_backoff_max,
            "connection_timeout": self.connection_timeout,
            "read_timeout": self.read_timeout,
        }


ClientFactory = Callable[[AzureCredentials, str | None, AzureOptions], Any]


@dataclass(frozen=True)
class AzureImageUrn:
    publisher: str
    offer: str
    sku: str
    version: str

    def __str__(self) -> str:
        return f"{self.publisher}:{self.offer}:{self.sku}:{self.version}"


def parse_urn(urn: str) -> AzureImageUrn:
    parts = urn.split(":") if isinstance(urn, str) else []
    if len(parts) != 4 or not all(p.strip() for p in parts):
        raise InputError("Azure image", None, f"{urn!r} is not publisher:offer:sku:version")
    return AzureImageUrn(*(p.strip() for p in parts))


def image_urn(publisher: str, offer: str, sku: str, version: str) -> str:
    """The `ImageKey.image` form of an Azure Marketplace image."""
    return str(AzureImageUrn(publisher, offer, sku, version))


def resolve_endpoint(explicit: str | None = None) -> str | None:
    return explicit or os.environ.get(AZURE_ENDPOINT_ENV) or None


def make_credential(credentials: AzureCredentials, authority: str | None = None) -> Any:
    # Imported here, like the client: needless start-up cost on other clouds.
    from azure.identity import ClientSecretCredential, WorkloadIdentityCredential

    # A given authority is a sovereign or private one: not in Microsoft's instance list.
    where: dict[str, Any] = {"authority": authority, "disable_instance_discovery": True} if authority else {}
    if credentials.federated_token_file:
        return WorkloadIdentityCredential(
            tenant_id=credentials.tenant_id,
            client_id=credentials.client_id,
            token_file_path=credentials.federated_token_file,
            **where,
        )
    return ClientSecretCredential(
        tenant_id=credentials.tenant_id,
        client_id=credentials.client_id,
        client_secret=credentials.client_secret or "",
        **where,
    )


def make_client(credentials: AzureCredentials, endpoint: str | None, options: AzureOptions) -> Any:
    """The production client (ARM bearer policy, https only)."""
    from azure.mgmt.compute import ComputeManagementClient

    kwargs = options.client_kwargs()
    if endpoint:
        kwargs["base_url"] = endpoint
        kwargs["credential_scopes"] = [endpoint.rstrip("/") + "/.default"]
    return ComputeManagementClient(make_credential(credentials, options.authority), credentials.subscription_id,
                                   **kwargs)


class AzureImages(RebuildableClient[AzureCredentials]):
    """Marketplace image lookups for one set of credentials; `set_credentials` rebuilds."""

    def __init__(
        self,
        credentials: AzureCredentials,
        endpoint: str | None = None,
        options: AzureOptions | None = None,
        client_factory: ClientFactory = make_client,
    ) -> None:
        self._options = options or AzureOptions()
        super().__init__(credentials, resolve_endpoint(endpoint), lambda c, e: client_factory(c, e, self._options))

    def close(self) -> None:
        _close(self._take_client())

    def get_marketplace_image(self, location: str, publisher: str, offer: str, sku: str, version: str) -> CloudImage:
        key = ImageKey(Platform.AZURE.value, location, image_urn(publisher, offer, sku, version))
        try:
            image = self.client().virtual_machine_images.get(location, publisher, offer, sku, version)
        except ResourceNotFoundError:
            return CloudImage(key, exists=False)
        return to_cloud_image(key, publisher, version, image)

    def get_image(self, location: str, urn: str) -> CloudImage:
        """Same lookup from an `ImageKey`-style URN."""
        u = parse_urn(urn)
        return self.get_marketplace_image(location, u.publisher, u.offer, u.sku, u.version)


def to_cloud_image(key: ImageKey, publisher: str, version: str, image: Any) -> CloudImage:
    status = getattr(image, "image_deprecation_status", None)
    raw_state = getattr(status, "image_state", None) or ""
    # The SDK returns a str-based enum whose str() is `ImageState.DEPRECATED`: use its value.
    state = str(getattr(raw_state, "value", raw_state)).lower()
    return CloudImage(
        key=key,
        exists=True,
        available=state != _DEPRECATED,
        owner=publisher,
        name=getattr(image, "name", None) or version,
        description=None,
        release=_release(version),
        creation_date=None,
    )


def _release(version: str) -> str | None:
    # Marketplace versions are RHCOS build ids only sometimes (`4.18.2025031114` is not one).
    try:
        parse_rhcos_version(version)
    except VersionError:
        return None
    return version


def _close(client: Any) -> None:
    close = getattr(client, "close", None)
    if callable(close):
        # Closing a stale client must never break a lookup.
        with contextlib.suppress(Exception):
            close()
