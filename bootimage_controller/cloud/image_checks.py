"""Cloud lookups for the daemon's planner (SPEC section 2, rule 9), with credentials read from the cluster."""

from __future__ import annotations

import asyncio
import functools
from typing import Any, Protocol

import structlog

from ..constants import (
    AWS_CREDENTIALS_SECRET,
    AZURE_CREDENTIALS_SECRET,
    GCP_CREDENTIALS_SECRET,
    MAPI_NAMESPACE,
    Platform,
)
from ..core.cloud.facts import CloudFacts
from ..kube.api_errors import ApiError, Forbidden, NotFound, ServerError, TooManyRequests
from ..kube.core_api import CoreApi
from ..kube.retry import REQUEST_FAILURES, api_call, describe
from .facts_refresh import AtMostEvery
from .queries import image_queries, verify_decisions
from .verifier import CloudVerifier

log = structlog.get_logger(__name__)


class TemplateLookups(Protocol):
    """vCenter's answers for vSphere MachineSets (vsphere.checks.VSphereChecks): a protocol, so the
    cloud package does not depend on the vSphere one, which reads its credentials through this one."""

    async def lookup(self, work: Any, target_release: str | None = None) -> CloudFacts: ...

    def close(self) -> None: ...


class CloudChecks:
    """Cloud verification for the daemon: on by default, used when credentials exist (SPEC 2 rule 9).

    The credentials Secrets are read by name (RBAC grants `get` on those names only, so they cannot
    be watched) and re-read at most once a minute; the verifier rebuilds its clients when one changes.
    A platform without credentials is reported once by the verifier and planned with offline rules.
    """

    def __init__(
        self, core: CoreApi, gcp_endpoint: str | None, azure_endpoint: str | None, vsphere: TemplateLookups | None = None,
        platform: str | None = None, azure_authority: str | None = None,
    ) -> None:
        """`platform`: the cluster's (Infrastructure); only its credentials are read, once a minute.
        None (not known) reads all three."""
        self.core = core
        self.vsphere = vsphere
        self.gcp_endpoint = gcp_endpoint
        self.azure_endpoint = azure_endpoint
        self.azure_authority = azure_authority
        self.verifier: Any = None
        self._every = AtMostEvery()
        self._secrets = tuple(s for s in self._SECRETS if platform is None or s[0] == platform)

    _SECRETS = (
        (Platform.AWS, AWS_CREDENTIALS_SECRET),
        (Platform.GCP, GCP_CREDENTIALS_SECRET),
        (Platform.AZURE, AZURE_CREDENTIALS_SECRET),
    )

    async def prime(self) -> None:
        """Read the credentials while the caches sync: the first reconcile need not wait for them.
        A failure is left to that reconcile, which reads them again."""
        try:
            await self._refresh()
        except REQUEST_FAILURES as exc:
            log.debug("cloud credentials not read yet", error=describe(exc))

    async def _refresh(self) -> None:
        await self._every.run(self._load)

    async def _load(self) -> None:
        read = await asyncio.gather(*(self._read(name) for _, name in self._secrets), return_exceptions=True)
        for answer in read:
            if isinstance(answer, BaseException):
                raise answer
        secrets: dict[Platform | str, Any] = {platform: answer for (platform, _), answer in zip(self._secrets, read, strict=True)}
        if self.verifier is None:
            self.verifier = CloudVerifier.from_secrets(
                secrets, gcp_endpoint=self.gcp_endpoint, azure_endpoint=self.azure_endpoint,
                azure_authority=self.azure_authority
            )
        else:
            for platform, secret in secrets.items():
                self.verifier.update_secret(platform, secret)

    async def _read(self, name: str) -> Any:
        """The Secret, or None when it does not exist or is not ours to read."""
        try:
            return await api_call(
                functools.partial(self.core.read_namespaced_secret, name, MAPI_NAMESPACE), what=f"get secret {name}"
            )
        except (TooManyRequests, ServerError):
            # Still failing after retries: not knowing whether credentials exist is no reason to
            # plan offline (or to drop working ones): fail this reconcile, it is retried, and so
            # is this read (the minute in _refresh only starts after success).
            raise
        except (Forbidden, NotFound):
            return None
        except ApiError as exc:
            log.warning("cannot read cloud credentials", secret_name=name, code=exc.status)
            return None

    async def __call__(self, decision: Any) -> tuple[Any, frozenset[str]] | None:
        if decision.platform == Platform.VSPHERE:
            if self.vsphere is None or decision.template is None:
                return None
            facts = await self.vsphere.lookup(decision.template, decision.target_release)
            return facts, frozenset({str(Platform.VSPHERE)})
        await self._refresh()
        platforms = frozenset(str(p) for p in self.verifier.platforms)
        if decision.platform not in platforms or not image_queries([decision]):
            return None
        return await verify_decisions(self.verifier, [decision]), platforms

    def reset(self) -> None:
        """Drop every client (the proxy changed): the next lookup builds them anew."""
        if self.verifier is not None:
            self.verifier.close()
        self.verifier = None
        self._every.expire()
        if self.vsphere is not None:
            self.vsphere.close()

    def close(self) -> None:
        if self.vsphere is not None:
            self.vsphere.close()
        if self.verifier is not None:
            self.verifier.close()
