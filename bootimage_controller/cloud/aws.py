"""EC2 image lookups (boto3): what an AMI is, and the AWS Marketplace AMIs of a product.

- One EC2 client per region, built lazily and kept until the credentials change (a new Secret
  resourceVersion): boto3 clients are thread-safe, sessions are not, so building is locked.
- Endpoints are boto3's own business: `AWS_ENDPOINT_URL` / `AWS_ENDPOINT_URL_EC2` (and
  `AWS_ENDPOINT_URL_STS` for web identity) are read by botocore itself.
- Retries are botocore's "standard" mode (throttling and 5xx, with jittered backoff); whatever
  still fails is raised to the verifier, which records it.
- One DescribeImages call per AMI: a batched call fails as a whole when any one id is unknown.

Marketplace resolution follows the Machine Config Operator (reference section 6, main branch):
the product id is the trailing UUID of the AMI name; candidates are the `aws-marketplace` AMIs
whose name carries it; the pick is the highest `major.minor` token (from the description) not
above the stream's token, newest CreationDate first among equals.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import boto3
import botocore.loaders
import botocore.session
from botocore.config import Config
from botocore.credentials import (
    AssumeRoleWithWebIdentityCredentialFetcher,
    CredentialProvider,
    CredentialResolver,
    DeferredRefreshableCredentials,
)
from botocore.exceptions import ClientError
from botocore.utils import FileWebIdentityTokenLoader

from ..constants import AWS_MARKETPLACE_OWNER, Platform
from ..core.cloud.facts import CloudImage, ImageKey, MarketplaceCandidates
from ..core.cloud.marketplace import marketplace_product_id
from ..core.cloud.releases import release_in_text
from ..data import EC2_API_VERSION, botocore_models
from .credentials import AwsAuthMode, AwsCredentials

ROLE_SESSION_NAME = "bootimage-controller"
MARKETPLACE_OWNER_ALIAS = "aws-marketplace"
# DescribeImages error codes that mean "no such image" rather than "could not ask".
NOT_FOUND_CODES = frozenset({"InvalidAMIID.NotFound", "InvalidAMIID.Malformed", "InvalidAMIID.Unavailable"})



@dataclass(frozen=True)
class AwsOptions:
    max_attempts: int = 5  # all attempts, the first included (botocore `total_max_attempts`)
    retry_mode: str = "standard"
    connect_timeout: float = 5.0
    read_timeout: float = 20.0

    def botocore_config(self) -> Config:
        return Config(
            retries={"total_max_attempts": self.max_attempts, "mode": self.retry_mode},
            connect_timeout=self.connect_timeout,
            read_timeout=self.read_timeout,
            user_agent_extra="bootimage-controller",
        )


SessionFactory = Callable[[AwsCredentials, str], boto3.session.Session]

# One model loader for every session: parsing the EC2 service model costs about half a second,
# and each new botocore session would otherwise parse it again (per region, per rotation). It
# searches the package's EC2 model cut to DescribeImages and endpoints cut to EC2 and STS first
# (data/botocore, hack/gen_botocore_data.py): botocore's whole files are about 22 MiB more per process.
_LOADER = botocore.loaders.Loader(extra_search_paths=[botocore_models()])


def _core_session() -> botocore.session.Session:
    core = botocore.session.Session()
    core.register_component("data_loader", _LOADER)
    return core


class _WebIdentityProvider(CredentialProvider):  # type: ignore[misc]
    """STS AssumeRoleWithWebIdentity from the token file, refreshed by botocore before expiry."""

    METHOD = "assume-role-with-web-identity"
    CANONICAL_NAME = "custom-bootimage-web-identity"

    def __init__(self, role_arn: str, token_file: str, region: str) -> None:
        super().__init__()
        self._role_arn = role_arn
        self._token_file = token_file
        # A plain session for STS: the call is unsigned, and it honours AWS_ENDPOINT_URL_STS.
        self._client_creator = functools.partial(_core_session().create_client, region_name=region)

    def load(self) -> DeferredRefreshableCredentials:
        fetcher = AssumeRoleWithWebIdentityCredentialFetcher(
            client_creator=self._client_creator,
            web_identity_token_loader=FileWebIdentityTokenLoader(self._token_file),
            role_arn=self._role_arn,
            extra_args={"RoleSessionName": ROLE_SESSION_NAME},
        )
        return DeferredRefreshableCredentials(method=self.METHOD, refresh_using=fetcher.fetch_credentials)


def make_session(credentials: AwsCredentials, region: str) -> boto3.session.Session:
    """A boto3 session for one region (STS is regional: GovCloud and China need their own)."""
    if credentials.mode is AwsAuthMode.WEB_IDENTITY:
        assert credentials.role_arn and credentials.web_identity_token_file
        core = _core_session()
        provider = _WebIdentityProvider(credentials.role_arn, credentials.web_identity_token_file, region)
        core.register_component("credential_provider", CredentialResolver([provider]))
        return boto3.session.Session(botocore_session=core, region_name=region)
    return boto3.session.Session(
        aws_access_key_id=credentials.access_key_id,
        aws_secret_access_key=credentials.secret_access_key,
        region_name=region,
        botocore_session=_core_session(),
    )


class AwsImages:
    """EC2 lookups for one set of credentials; call `set_credentials` when the Secret changes."""

    def __init__(
        self,
        credentials: AwsCredentials,
        options: AwsOptions | None = None,
        session_factory: SessionFactory = make_session,
    ) -> None:
        self._options = options or AwsOptions()
        self._session_factory = session_factory
        self._lock = threading.Lock()
        self._credentials = credentials
        self._clients: dict[str, Any] = {}

    @property
    def credentials(self) -> AwsCredentials:
        return self._credentials

    def set_credentials(self, credentials: AwsCredentials) -> bool:
        """Swap credentials; returns True (and forgets every cached client) when they changed."""
        with self._lock:
            if credentials == self._credentials:
                return False
            self._credentials = credentials
            # Not closed: a lookup may still be using one; they go with their last reference.
            self._clients = {}
            return True

    def client(self, region: str) -> Any:
        with self._lock:
            client = self._clients.get(region)
            if client is None:
                session = self._session_factory(self._credentials, region)
                client = session.client("ec2", region_name=region, api_version=EC2_API_VERSION,
                                        config=self._options.botocore_config())
                self._clients[region] = client
            return client

    def close(self) -> None:
        with self._lock:
            clients, self._clients = list(self._clients.values()), {}
        for client in clients:
            client.close()

    def describe_image(self, region: str, ami_id: str) -> CloudImage:
        key = ImageKey(Platform.AWS.value, region, ami_id)
        try:
            response = self.client(region).describe_images(ImageIds=[ami_id])
        except ClientError as exc:
            if error_code(exc) in NOT_FOUND_CODES:
                return CloudImage(key, exists=False)
            raise
        for image in response.get("Images", []):
            if image.get("ImageId") == ami_id:
                return to_cloud_image(key, image)
        # Deregistered AMIs come back as an empty list rather than NotFound.
        return CloudImage(key, exists=False)

    def marketplace_candidates(self, region: str, product_id: str) -> MarketplaceCandidates:
        # Owners takes aliases and account ids alike; both are given because some EC2
        # implementations (moto, private endpoints) only match the account id.
        paginator = self.client(region).get_paginator("describe_images")
        pages = paginator.paginate(
            Owners=[MARKETPLACE_OWNER_ALIAS, AWS_MARKETPLACE_OWNER],
            Filters=[{"Name": "name", "Values": [f"*{product_id}*"]}],
        )
        images: dict[str, CloudImage] = {}
        for page in pages:
            for image in page.get("Images", []):
                ami_id = image.get("ImageId")
                if not ami_id or marketplace_product_id(image.get("Name")) != product_id:
                    continue
                images[ami_id] = to_cloud_image(ImageKey(Platform.AWS.value, region, ami_id), image)
        ordered = sorted(images.values(), key=lambda i: (i.creation_date or "", i.key.image), reverse=True)
        return MarketplaceCandidates(region=region, product_id=product_id, images=tuple(ordered))


def error_code(exc: ClientError) -> str:
    error = exc.response.get("Error", {}) if isinstance(exc.response, Mapping) else {}
    return str(error.get("Code", ""))


def to_cloud_image(key: ImageKey, image: Mapping[str, Any]) -> CloudImage:
    name = image.get("Name")
    description = image.get("Description")
    created = image.get("CreationDate")
    return CloudImage(
        key=key,
        exists=True,
        available=image.get("State") == "available",
        owner=image.get("OwnerId"),
        name=name,
        description=description,
        release=release_in_text(name) or release_in_text(description),
        creation_date=str(created) if created is not None else None,
        deprecated=deprecation(image.get("DeprecationTime"), datetime.now(UTC)),
    )


def deprecation(value: Any, now: datetime) -> str | None:
    """`DeprecationTime` (ISO 8601) in the past: the AMI is deprecated (EC2 hides it from listings
    and new launches may be refused by policy); a future one is not yet."""
    if not isinstance(value, str) or not value:
        return None
    try:
        when = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return f"deprecated (DeprecationTime {value!r})"  # unreadable: say so rather than hide it
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return f"deprecated since {value} (EC2 DeprecationTime)" if when <= now else None


# Marketplace rules are pure and shared with the planner: cloud/marketplace.py.

