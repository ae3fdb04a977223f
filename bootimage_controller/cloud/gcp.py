"""GCP image lookups: `compute_v1.ImagesClient` over REST.

compute_v1 has no asyncio client; the verifier runs these calls in threads. The SDK's default
retry for `images.get` keeps trying for 10 minutes and skips 429/500, so every call passes our
own `Retry` (throttling and 5xx, bounded deadline) and a per-attempt timeout.

Endpoint: `--gcp-endpoint` (passed in explicitly) or `BOOTIMAGE_GCP_ENDPOINT`; an `http://` URL
is kept as is by the REST transport, which is what tests and private endpoints use.
"""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import google.auth
from google.api_core import exceptions as gexc
from google.api_core.client_options import ClientOptions
from google.api_core.retry import Retry, if_exception_type

from ..constants import Platform
from ..core.cloud.facts import CloudImage, ImageKey
from ..core.cloud.releases import release_in_text
from ..errors import InputError
from .clients import RebuildableClient
from .credentials import GcpCredentials

GCP_ENDPOINT_ENV = "BOOTIMAGE_GCP_ENDPOINT"
COMPUTE_READONLY_SCOPE = "https://www.googleapis.com/auth/compute.readonly"
# `projects/<p>/global/images/<name>` or `.../images/family/<family>`, possibly inside a full URL.
_PATH = re.compile(r"(?:^|/)projects/([^/]+)/global/images/(family/)?([^/]+)$")
# Deprecation states after which new instances can no longer boot the image.
_UNUSABLE_DEPRECATION = frozenset({"OBSOLETE", "DELETED"})
_DEPRECATED_STATES = frozenset({"DEPRECATED", *_UNUSABLE_DEPRECATION})
_RETRYABLE = (
    gexc.TooManyRequests,
    gexc.InternalServerError,
    gexc.BadGateway,
    gexc.ServiceUnavailable,
    gexc.GatewayTimeout,
)


@dataclass(frozen=True)
class GcpOptions:
    attempt_timeout: float = 20.0  # one HTTP attempt
    retry_deadline: float = 25.0  # all attempts of one call (below the verifier's call timeout)
    initial_backoff: float = 0.5
    max_backoff: float = 10.0

    def retry(self) -> Retry:
        return Retry(
            predicate=if_exception_type(*_RETRYABLE),
            initial=self.initial_backoff,
            maximum=self.max_backoff,
            multiplier=2.0,
            timeout=self.retry_deadline,
        )


ClientFactory = Callable[[GcpCredentials, str | None], Any]


@dataclass(frozen=True)
class GcpImagePath:
    project: str
    name: str
    family: bool = False

    @property
    def path(self) -> str:
        middle = "family/" if self.family else ""
        return f"projects/{self.project}/global/images/{middle}{self.name}"


def parse_image_path(path: str) -> GcpImagePath:
    m = _PATH.search(path.strip()) if isinstance(path, str) else None
    if not m:
        raise InputError("GCP image", None, f"{path!r} is not projects/<project>/global/images/<name>")
    return GcpImagePath(project=m.group(1), name=m.group(3), family=bool(m.group(2)))


def resolve_endpoint(explicit: str | None = None) -> str | None:
    return explicit or os.environ.get(GCP_ENDPOINT_ENV) or None


def make_client(credentials: GcpCredentials, endpoint: str | None) -> Any:
    """The production client: credentials from the service account (or external account) JSON."""
    # Imported here: compute_v1 loads every Compute service (seconds), needless on AWS or Azure.
    from google.cloud import compute_v1

    creds, _project = google.auth.load_credentials_from_dict(  # type: ignore[no-untyped-call]
        credentials.info(), scopes=[COMPUTE_READONLY_SCOPE]
    )
    options = ClientOptions(api_endpoint=endpoint) if endpoint else None
    return compute_v1.ImagesClient(credentials=creds, transport="rest", client_options=options)


class GcpImages(RebuildableClient[GcpCredentials]):
    """Image lookups for one set of credentials; `set_credentials` rebuilds the client."""

    def __init__(
        self,
        credentials: GcpCredentials,
        endpoint: str | None = None,
        options: GcpOptions | None = None,
        client_factory: ClientFactory = make_client,
    ) -> None:
        self._options = options or GcpOptions()
        super().__init__(credentials, resolve_endpoint(endpoint), client_factory)

    def close(self) -> None:
        _close(self._take_client())

    def get_image(self, path: str, zone: str = "") -> CloudImage:
        """`path` as MachineSets write it; `zone` only labels the answer (images are global)."""
        key = ImageKey(Platform.GCP.value, zone, path)
        ref = parse_image_path(path)
        client = self.client()
        call_opts = {"retry": self._options.retry(), "timeout": self._options.attempt_timeout}
        try:
            if ref.family:
                image = client.get_from_family(project=ref.project, family=ref.name, **call_opts)
            else:
                image = client.get(project=ref.project, image=ref.name, **call_opts)
        except gexc.NotFound:
            return CloudImage(key, exists=False)
        return to_cloud_image(key, ref.project, image)


def to_cloud_image(key: ImageKey, project: str, image: Any) -> CloudImage:
    deprecated = getattr(image, "deprecated", None)
    deprecation_state = getattr(deprecated, "state", "") or ""
    name = getattr(image, "name", None) or None
    return CloudImage(
        key=key,
        exists=True,
        available=getattr(image, "status", "") == "READY" and deprecation_state not in _UNUSABLE_DEPRECATION,
        owner=project,
        name=name,
        description=getattr(image, "description", None) or None,
        release=release_in_text(name),
        creation_date=getattr(image, "creation_timestamp", None) or None,
        deprecated=f"{deprecation_state} (GCP deprecated.state)" if deprecation_state in _DEPRECATED_STATES else None,
    )


def _close(client: Any) -> None:
    transport = getattr(client, "transport", None)
    close = getattr(transport, "close", None)
    if callable(close):
        # Closing a stale client must never break a lookup.
        with contextlib.suppress(Exception):
            close()
