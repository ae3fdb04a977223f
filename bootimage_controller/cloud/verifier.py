"""Ask the clouds about the images a plan names, and hand the answers to the planner as `CloudFacts`.

- The SDKs are synchronous: each lookup runs in a thread (`asyncio.to_thread`), at most
  `concurrency` at once, each bounded by `call_timeout` (the SDKs also get their own connect/read
  timeouts and retry budgets, below that bound, so threads do not outlive it for long).
- Answers (found, not found, state) are cached per (platform, location, image) for `cache_ttl`
  seconds; failures are not cached. Concurrent asks for the same image share one call.
- Failures (throttling after the SDK's retries, 5xx, timeouts, rejected credentials, anything) are
  recorded in `CloudFacts.errors` / `marketplace_errors` as a short message, logged, never raised.
- A platform without usable credentials is said once (one log line naming the Secret) and its
  lookups are not made: the planner then uses its offline rules.
- No credential value reaches a log line or a message: credential objects print only their
  source, messages are scrubbed of every secret value known, and the SDK loggers that dump
  request headers or STS responses at DEBUG are held at INFO.
- A platform's SDK is imported only once it has credentials: boto3, the Azure and the Google
  libraries together weigh about 25 MiB and a quarter of a second, which a cluster on one cloud
  (or with no credentials at all) should not pay for the other two.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import re
import time
from collections.abc import Callable, Hashable, Iterable, Mapping
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Generic, TypeVar

import structlog

from ..constants import MAPI_NAMESPACE, Platform
from ..core.cloud.facts import CloudFacts, CloudImage, ImageKey, MarketplaceCandidates
from ..errors import InputError
from .cache import Clock, TtlCache
from .credentials import (
    CREDENTIALS_SECRETS,
    AwsCredentials,
    AzureCredentials,
    CloudCredentials,
    CredentialsError,
    GcpCredentials,
    parse_credentials,
    platform_of,
)

if TYPE_CHECKING:
    from . import aws as aws_mod
    from . import azure as azure_mod
    from . import gcp as gcp_mod

log = structlog.get_logger(__name__)

T = TypeVar("T")
MarketplaceQuery = tuple[str, str]  # (region, product id)
CLOUD_PLATFORMS = (Platform.AWS, Platform.GCP, Platform.AZURE)
# The package extra that installs each platform's SDK (pyproject.toml).
SDK_EXTRAS = {Platform.AWS: "aws", Platform.GCP: "gcp", Platform.AZURE: "azure"}
_MAX_MESSAGE = 300
_SETUP_TIMEOUT = 120.0
REDACTED = "[REDACTED]"

# SDK loggers that, at DEBUG, print signed request headers, request bodies (STS web identity
# tokens) or response bodies (STS session keys). Held at INFO unless someone set a level.
CHATTY_SDK_LOGGERS = ("botocore", "boto3", "google.auth", "msal", "azure.identity")
# The Azure HTTP logging policy writes every request at INFO: useful to nobody here.
NOISY_AT_INFO = ("azure.core.pipeline.policies.http_logging_policy",)


def quiet_sdk_loggers() -> None:
    for name in CHATTY_SDK_LOGGERS:
        logger = logging.getLogger(name)
        if logger.level == logging.NOTSET:
            logger.setLevel(logging.INFO)
    for name in NOISY_AT_INFO:
        logger = logging.getLogger(name)
        if logger.level == logging.NOTSET:
            logger.setLevel(logging.WARNING)


@dataclass(frozen=True)
class VerifierSettings:
    """Timeouts and limits; a platform's options left None take that module's defaults."""

    call_timeout: float = 30.0  # seconds, one lookup including the SDK's own retries
    concurrency: int = 8
    cache_ttl: float = 300.0
    aws: aws_mod.AwsOptions | None = None
    gcp: gcp_mod.GcpOptions | None = None
    azure: azure_mod.AzureOptions | None = None


@dataclass(frozen=True)
class ClientFactories:
    """Seams for tests: how each platform's SDK client (or boto3 session) is built (None: the
    module's own `make_session` / `make_client`)."""

    aws_session: aws_mod.SessionFactory | None = None
    gcp: gcp_mod.ClientFactory | None = None
    azure: azure_mod.ClientFactory | None = None


@dataclass(frozen=True)
class _Lookup(Generic[T]):
    prepare: Callable[[], object]  # builds (or returns) the SDK client
    run: Callable[[], T]  # the cloud call itself, the part bounded by `call_timeout`


def secret_ref(platform: Platform) -> str:
    return f"{MAPI_NAMESPACE}/{CREDENTIALS_SECRETS[platform]}"


class CloudVerifier:
    """Fills `CloudFacts` from AWS, GCP and Azure with whatever credentials exist."""

    def __init__(
        self,
        *,
        aws: AwsCredentials | None = None,
        gcp: GcpCredentials | None = None,
        azure: AzureCredentials | None = None,
        gcp_endpoint: str | None = None,
        azure_endpoint: str | None = None,
        azure_authority: str | None = None,
        settings: VerifierSettings | None = None,
        clock: Clock = time.monotonic,
        factories: ClientFactories | None = None,
    ) -> None:
        quiet_sdk_loggers()
        self._settings = settings or VerifierSettings()
        self._factories = factories or ClientFactories()
        self._gcp_endpoint = gcp_endpoint  # resolved (flag, then environment) by the platform module
        self._azure_endpoint = azure_endpoint
        self._azure_authority = azure_authority  # resolved (flag, then environment) by the caller
        self._cache: TtlCache[Hashable, Any] = TtlCache(self._settings.cache_ttl, clock)
        self._inflight: dict[Hashable, asyncio.Future[tuple[Any, str | None]]] = {}
        self._sem: tuple[asyncio.AbstractEventLoop, asyncio.Semaphore] | None = None
        self._aws: aws_mod.AwsImages | None = None
        self._gcp: gcp_mod.GcpImages | None = None
        self._azure: azure_mod.AzureImages | None = None
        self._missing_reported: set[Platform] = set()
        self._sdk_missing: set[Platform] = set()
        self._invalid_reported: dict[Platform, str | None] = {}
        for platform, creds in ((Platform.AWS, aws), (Platform.GCP, gcp), (Platform.AZURE, azure)):
            if creds is not None:
                self.set_credentials(platform, creds)

    @classmethod
    def from_secrets(
        cls, secrets: Mapping[Platform | str, Mapping[str, Any] | None], **kwargs: Any
    ) -> CloudVerifier:
        """Build from raw Secret objects (None: absent); an unusable Secret disables its platform."""
        verifier = cls(**kwargs)
        for platform, secret in secrets.items():
            verifier.update_secret(platform, secret)
        return verifier

    # --- credentials ------------------------------------------------------------------------

    @property
    def platforms(self) -> frozenset[Platform]:
        """The platforms lookups are made for (those with usable credentials)."""
        present = {Platform.AWS: self._aws, Platform.GCP: self._gcp, Platform.AZURE: self._azure}
        return frozenset(p for p, images in present.items() if images is not None)

    def has_credentials(self, platform: Platform | str) -> bool:
        return _platform(platform) in self.platforms

    def update_secret(self, platform: Platform | str, secret: Mapping[str, Any] | Any | None) -> CredentialsError | None:
        """Hand in the (new) Secret object, or None when it is gone; returns the parse error, if any.

        An unusable Secret is logged once per resourceVersion (naming the key, never a value) and
        its platform falls back to the offline rules.
        """
        p = _platform(platform)
        if secret is None:
            self.set_credentials(p, None)
            return None
        try:
            creds = parse_credentials(p, secret)
        except CredentialsError as exc:
            rv = _resource_version(secret)
            if self._invalid_reported.get(p, "<none>") != rv:
                self._invalid_reported[p] = rv
                log.warning(
                    "cloud credentials unusable; offline rules are used",
                    platform=p.value, secret_name=secret_ref(p), problem=str(exc),
                )
            self.set_credentials(p, None, quiet=True)
            return exc
        self._invalid_reported.pop(p, None)
        self.set_credentials(p, creds)
        return None

    def set_credentials(self, platform: Platform | str, credentials: CloudCredentials | None, *, quiet: bool = False) -> None:
        """Install, rotate or drop one platform's credentials; clients are rebuilt on change."""
        p = _platform(platform)
        if credentials is not None and platform_of(credentials) is not p:
            raise ValueError(f"{type(credentials).__name__} given for platform {p.value}")
        if credentials is None:
            self._drop(p)
            if quiet:
                self._missing_reported.add(p)  # the invalid-secret line already said it
            return
        self._missing_reported.discard(p)
        if self._install(p, credentials):
            self._cache.discard_if(lambda k: isinstance(k, tuple) and len(k) > 1 and k[1] == p.value)
            # Keys chosen to pass the log redaction (`secret`, `credentials` are masked whole).
            log.info(
                "cloud credentials loaded", platform=p.value, secret_name=str(credentials.source),
                resource_version=credentials.source.resource_version, detail=repr(credentials),
            )

    @property
    def sdk_missing(self) -> frozenset[Platform]:
        """Platforms whose credentials were given but whose SDK is not installed."""
        return frozenset(self._sdk_missing)

    def _install(self, p: Platform, creds: CloudCredentials) -> bool:
        """Make the platform's client; False (offline rules, said once) when its SDK, an extra of
        the package (`bootimage-controller[aws]`, `[gcp]`, `[azure]`, `[cloud]`), is not installed."""
        try:
            return self._install_client(p, creds)
        except ImportError as exc:
            if p not in self._sdk_missing:
                self._sdk_missing.add(p)
                log.warning(
                    "cloud checks unavailable: the platform's SDK is not installed; offline rules are used",
                    platform=p.value, missing=exc.name, install=f"pip install 'bootimage-controller[{SDK_EXTRAS[p]}]'",
                )
            return False

    def _install_client(self, p: Platform, creds: CloudCredentials) -> bool:
        s, f = self._settings, self._factories
        if isinstance(creds, AwsCredentials):
            if self._aws is None:
                from . import aws

                self._aws = aws.AwsImages(creds, s.aws or aws.AwsOptions(), f.aws_session or aws.make_session)
                return True
            return self._aws.set_credentials(creds)
        if isinstance(creds, GcpCredentials):
            if self._gcp is None:
                from . import gcp

                self._gcp = gcp.GcpImages(creds, self._gcp_endpoint, s.gcp or gcp.GcpOptions(), f.gcp or gcp.make_client)
                return True
            return self._gcp.set_credentials(creds)
        if self._azure is None:
            from . import azure

            options = s.azure or azure.AzureOptions()
            if self._azure_authority and options.authority is None:
                options = replace(options, authority=self._azure_authority)
            self._azure = azure.AzureImages(creds, self._azure_endpoint, options, f.azure or azure.make_client)
            return True
        return self._azure.set_credentials(creds)

    def _drop(self, p: Platform) -> None:
        images: Any
        if p is Platform.AWS:
            images, self._aws = self._aws, None
        elif p is Platform.GCP:
            images, self._gcp = self._gcp, None
        else:
            images, self._azure = self._azure, None
        if images is not None:
            images.close()
            self._cache.discard_if(lambda k: isinstance(k, tuple) and len(k) > 1 and k[1] == p.value)

    def _report_missing(self, p: Platform) -> None:
        if p not in self._missing_reported:
            self._missing_reported.add(p)
            log.info(
                "cloud credentials missing; offline rules are used",
                platform=p.value, secret_name=secret_ref(p),
            )

    def clear_cache(self) -> None:
        self._cache.clear()

    def close(self) -> None:
        for p in CLOUD_PLATFORMS:
            self._drop(p)

    # --- lookups ------------------------------------------------------------------------------

    async def verify(
        self, keys: Iterable[ImageKey], marketplace: Iterable[MarketplaceQuery] = ()
    ) -> CloudFacts:
        """Look up every image and marketplace query the platform has credentials for."""
        images: dict[ImageKey, CloudImage] = {}
        errors: dict[ImageKey, str] = {}
        market: dict[MarketplaceQuery, MarketplaceCandidates] = {}
        market_errors: dict[MarketplaceQuery, str] = {}

        image_jobs = {k: self._image_job(k) for k in dict.fromkeys(keys)}
        market_jobs = {q: self._marketplace_job(q) for q in dict.fromkeys(marketplace)}
        image_keys = [k for k, job in image_jobs.items() if job is not None]
        market_keys = [q for q, job in market_jobs.items() if job is not None]
        results = await asyncio.gather(
            *(image_jobs[k] for k in image_keys),
            *(market_jobs[q] for q in market_keys),
        )
        for k, (value, error) in zip(image_keys, results[: len(image_keys)], strict=True):
            if error is not None:
                errors[k] = error
            else:
                images[k] = value if value.key == k else dataclasses.replace(value, key=k)
        for q, (value, error) in zip(market_keys, results[len(image_keys) :], strict=True):
            if error is not None:
                market_errors[q] = error
            else:
                market[q] = value
        return CloudFacts(images=images, errors=errors, marketplace=market, marketplace_errors=market_errors)

    def _image_job(self, key: ImageKey) -> Any:
        lookup = self._image_lookup(key)
        if lookup is None:
            return None
        # GCP images are global: one lookup serves every zone that names the image.
        location = "" if key.platform == Platform.GCP.value else key.location
        return self._shared(("image", key.platform, location, key.image), key.platform, key, lookup)

    def _image_lookup(self, key: ImageKey) -> _Lookup[CloudImage] | None:
        try:
            p = Platform(key.platform)
        except ValueError:
            return None
        if p not in CLOUD_PLATFORMS:
            return None
        if p is Platform.AWS and self._aws is not None:
            aws_images = self._aws
            return _Lookup(
                lambda: aws_images.client(key.location), lambda: aws_images.describe_image(key.location, key.image)
            )
        if p is Platform.GCP and self._gcp is not None:
            gcp_images = self._gcp
            return _Lookup(gcp_images.client, lambda: gcp_images.get_image(key.image, zone=key.location))
        if p is Platform.AZURE and self._azure is not None:
            azure_images = self._azure
            return _Lookup(azure_images.client, lambda: azure_images.get_image(key.location, key.image))
        self._report_missing(p)
        return None

    def _marketplace_job(self, query: MarketplaceQuery) -> Any:
        if self._aws is None:
            self._report_missing(Platform.AWS)
            return None
        region, product = query
        aws_images = self._aws
        what = ImageKey(Platform.AWS.value, region, f"marketplace product {product}")
        return self._shared(
            ("marketplace", Platform.AWS.value, region, product),
            Platform.AWS.value,
            what,
            _Lookup(lambda: aws_images.client(region), lambda: aws_images.marketplace_candidates(region, product)),
        )

    async def _shared(
        self, cache_key: Hashable, platform: str, what: ImageKey, lookup: _Lookup[T]
    ) -> tuple[T | None, str | None]:
        cached = self._cache.get(cache_key)
        if cached is not None:
            return cached, None
        future = self._inflight.get(cache_key)
        if future is None:
            future = asyncio.ensure_future(self._call(cache_key, platform, what, lookup))
            self._inflight[cache_key] = future
            future.add_done_callback(lambda _f: self._inflight.pop(cache_key, None))
        # Shielded: one caller cancelled must not cancel the lookup others wait for.
        result: tuple[T | None, str | None] = await asyncio.shield(future)
        return result

    async def _call(
        self, cache_key: Hashable, platform: str, what: ImageKey, lookup: _Lookup[T]
    ) -> tuple[T | None, str | None]:
        timeout = self._settings.call_timeout
        async with self._semaphore():
            started = time.monotonic()
            phase = "set-up"
            try:
                # Client set-up (first use: SDK imports, model loading) is not the cloud's time.
                await asyncio.wait_for(asyncio.to_thread(lookup.prepare), max(timeout, _SETUP_TIMEOUT))
                phase = "lookup"
                value = await asyncio.wait_for(asyncio.to_thread(lookup.run), timeout)
            except TimeoutError:
                message = f"no answer within {timeout:g}s" if phase == "lookup" else "SDK client set-up timed out"
            except Exception as exc:  # recorded, never raised: the planner skips and retries later
                message = describe_error(exc)
            else:
                self._cache.put(cache_key, value)
                log.debug(
                    "cloud lookup", platform=platform, location=what.location, image=what.image,
                    seconds=round(time.monotonic() - started, 3), **_summary(value),
                )
                return value, None
        message = self._scrub(message)
        log.warning(
            "cloud lookup failed", platform=platform, location=what.location, image=what.image, error=message
        )
        return None, message

    def _semaphore(self) -> asyncio.Semaphore:
        loop = asyncio.get_running_loop()
        if self._sem is None or self._sem[0] is not loop:
            self._sem = (loop, asyncio.Semaphore(max(1, self._settings.concurrency)))
        return self._sem[1]

    def _scrub(self, text: str) -> str:
        for images in (self._aws, self._gcp, self._azure):
            if images is None:
                continue
            for secret in images.credentials.secret_values():
                text = text.replace(secret, REDACTED)
        return text


# --- messages --------------------------------------------------------------------------------------


def _summary(value: Any) -> dict[str, Any]:
    if isinstance(value, CloudImage):
        return {"exists": value.exists, "available": value.available, "release": value.release}
    if isinstance(value, MarketplaceCandidates):
        return {"candidates": len(value.images)}
    return {}


def describe_error(exc: BaseException) -> str:
    """A one-line message for a failed lookup: what failed and why, without stack or secrets."""
    text = _describe(exc)
    text = re.sub(r"\s+", " ", text).strip()
    return text if len(text) <= _MAX_MESSAGE else text[: _MAX_MESSAGE - 3] + "..."


def _describe(exc: BaseException) -> str:
    for describer in (_describe_aws, _describe_gcp, _describe_azure):
        try:
            text = describer(exc)
        except ImportError:  # that cloud's SDK is not installed: the error is not its
            continue
        if text is not None:
            return text
    if isinstance(exc, InputError):
        return str(exc)
    return f"{type(exc).__name__}: {exc}"


def _describe_aws(exc: BaseException) -> str | None:
    from botocore import exceptions as bexc

    if isinstance(exc, bexc.ClientError):
        error = exc.response.get("Error", {})
        meta = exc.response.get("ResponseMetadata", {})
        retries = meta.get("RetryAttempts") or 0
        status = meta.get("HTTPStatusCode")
        after = f" after {retries} retries" if retries else ""
        code = error.get("Code") or status or "error"
        return f"EC2 {exc.operation_name} failed{after}: {code}: {error.get('Message', '')}".rstrip(": ")
    if isinstance(exc, bexc.NoCredentialsError | bexc.PartialCredentialsError | bexc.CredentialRetrievalError):
        return f"AWS credentials unusable: {exc}"
    if isinstance(exc, bexc.BotoCoreError):
        return f"EC2 request failed: {exc}"
    return None


def _describe_gcp(exc: BaseException) -> str | None:
    from google.api_core import exceptions as gexc
    from google.auth import exceptions as aexc

    if isinstance(exc, gexc.RetryError):
        cause = exc.cause
        inner = _describe(cause) if cause is not None else str(exc)
        return f"gave up retrying: {inner}"
    if isinstance(exc, gexc.GoogleAPICallError):
        return f"GCP Compute API HTTP {exc.code}: {exc.message}"
    if isinstance(exc, aexc.RefreshError):
        return f"GCP credentials rejected (no access token): {exc.args[0] if exc.args else exc}"
    if isinstance(exc, aexc.GoogleAuthError):
        return f"GCP credentials unusable: {exc}"
    return None


def _describe_azure(exc: BaseException) -> str | None:
    from azure.core import exceptions as zexc

    if isinstance(exc, zexc.ClientAuthenticationError):
        return f"Azure authentication failed: {_azure_reason(exc)}"
    if isinstance(exc, zexc.HttpResponseError):
        return f"Azure Compute API HTTP {exc.status_code}: {_azure_reason(exc)}"
    if isinstance(exc, zexc.AzureError):
        return f"Azure request failed: {exc.message}"
    return None


def _azure_reason(exc: Any) -> str:
    error = getattr(exc, "error", None)
    if error is not None and getattr(error, "code", None):
        return f"{error.code}: {getattr(error, 'message', '')}"
    return str(getattr(exc, "reason", None) or getattr(exc, "message", None) or exc)


def _platform(platform: Platform | str) -> Platform:
    p = Platform(platform)
    if p not in CLOUD_PLATFORMS:
        raise ValueError(f"no cloud lookups for platform {p.value}")
    return p


def _resource_version(secret: Any) -> str | None:
    meta = secret.get("metadata") if isinstance(secret, Mapping) else getattr(secret, "metadata", None)
    rv = meta.get("resourceVersion") if isinstance(meta, Mapping) else getattr(meta, "resource_version", None)
    return str(rv) if rv is not None else None
