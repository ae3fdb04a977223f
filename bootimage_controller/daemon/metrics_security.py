"""`/metrics` as OpenShift components serve it: TLS from the service CA, authenticated, authorised.

- TLS: the certificate the service CA writes into the Secret named by the Service's
  `service.beta.openshift.io/serving-cert-secret-name` annotation, mounted into the pod. The files
  are re-read when they change (the service CA rotates them): the same `SSLContext` gets the new
  chain, so new connections use it and the listener never restarts.
- Authentication and authorisation, as kube-rbac-proxy and controller-runtime's metrics filter do
  it: the request's bearer token goes to a TokenReview; the user it names must be allowed `get` on
  the non-resource URL `/metrics` by a SubjectAccessReview (prometheus-k8s is granted that in
  manifests/rbac-controller.yaml). No token: 401. A token that is not valid: 401. Not allowed:
  403. The API server cannot answer: 503 (never an open door). Answers are cached for a minute
  per token (by its hash), so a scrape every 30 s costs two API calls a minute at most.

Probes stay plain HTTP on their own port (the kubelet has no token).
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import ssl
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import structlog
from aiohttp import web
from kubernetes_asyncio.client import (
    AuthenticationV1Api,
    AuthorizationV1Api,
    V1NonResourceAttributes,
    V1SubjectAccessReview,
    V1SubjectAccessReviewSpec,
    V1TokenReview,
    V1TokenReviewSpec,
)

from ..kube.retry import REQUEST_FAILURES, api_call, describe

log = structlog.get_logger(__name__)

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
RELOAD_SECONDS = 30.0


class ReloadingTls:
    """A server `SSLContext` whose certificate and key are re-read when their files change."""

    def __init__(self, cert_file: Path, key_file: Path) -> None:
        self.cert_file, self.key_file = cert_file, key_file
        self.context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self.context.minimum_version = ssl.TLSVersion.TLSv1_2
        self._stamp: tuple[float, float] | None = None
        self.reload()

    def _mtimes(self) -> tuple[float, float]:
        return os.stat(self.cert_file).st_mtime, os.stat(self.key_file).st_mtime

    def reload(self) -> bool:
        """Load the files if they changed; True when a new chain was loaded. A half-written pair
        (rotation in progress) fails to load and is tried again on the next check."""
        try:
            stamp = self._mtimes()
            if stamp == self._stamp:
                return False
            self.context.load_cert_chain(self.cert_file, self.key_file)
        except (OSError, ssl.SSLError) as exc:
            if self._stamp is None:
                raise  # at start-up: no certificate at all is a configuration error
            log.warning("metrics certificate not reloaded; keeping the previous one", error=str(exc))
            return False
        first = self._stamp is None
        self._stamp = stamp
        if not first:
            log.info("metrics certificate reloaded", cert_file=str(self.cert_file))
        return True

    async def watch(self, interval: float = RELOAD_SECONDS) -> None:
        while True:
            await asyncio.sleep(interval)
            self.reload()


@dataclass(frozen=True)
class _Verdict:
    http_status: int  # 200 allowed, 401, 403, 503
    reason: str
    expires: float


class MetricsAuthorizer:
    """Bearer token -> TokenReview -> SubjectAccessReview (`get` on the request's path)."""

    TTL = 60.0

    def __init__(self, api_client: Any, clock: Callable[[], float] = time.monotonic) -> None:
        self._authn = AuthenticationV1Api(api_client)
        self._authz = AuthorizationV1Api(api_client)
        self._clock = clock
        self._cache: dict[tuple[str, str], _Verdict] = {}

    @web.middleware
    async def middleware(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        verdict = await self.verdict(request.headers.get("Authorization", ""), request.path)
        if verdict.http_status != 200:
            return web.Response(status=verdict.http_status, text=f"{verdict.reason}\n")
        return await handler(request)

    async def verdict(self, authorization: str, path: str) -> _Verdict:
        scheme, _, token = authorization.partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            return _Verdict(401, "Unauthorized: a bearer token is required", 0.0)
        key = (hashlib.sha256(token.strip().encode()).hexdigest(), path)
        now = self._clock()
        cached = self._cache.get(key)
        if cached is not None and cached.expires > now:
            return cached
        verdict = await self._review(token.strip(), path, now)
        if verdict.http_status != 503:  # an API failure is not remembered: the next scrape asks again
            if len(self._cache) > 1000:
                self._cache = {k: v for k, v in self._cache.items() if v.expires > now}
            self._cache[key] = verdict
        return verdict

    async def _review(self, token: str, path: str, now: float) -> _Verdict:
        expires = now + self.TTL
        try:
            # One attempt each: a scrape that cannot be checked now is refused (503); the next asks again.
            review = await api_call(
                lambda: self._authn.create_token_review(V1TokenReview(spec=V1TokenReviewSpec(token=token))),
                what="create TokenReview", attempts=1)
            status = review.status
            if status is None or not status.authenticated or status.user is None:
                return _Verdict(401, "Unauthorized: the token was not accepted", expires)
            user = status.user
            review_body = V1SubjectAccessReview(spec=V1SubjectAccessReviewSpec(
                user=user.username,
                groups=user.groups or [],
                uid=user.uid,
                extra=user.extra or {},
                non_resource_attributes=V1NonResourceAttributes(path=path, verb="get"),
            ))
            access = await api_call(lambda: self._authz.create_subject_access_review(review_body),
                                    what="create SubjectAccessReview", attempts=1)
        except REQUEST_FAILURES as exc:
            log.warning("cannot check a metrics scraper's access", error=describe(exc))
            return _Verdict(503, "Service Unavailable: cannot check access now", 0.0)
        if access.status is not None and access.status.allowed:
            return _Verdict(200, "OK", expires)
        return _Verdict(403, f"Forbidden: {user.username} may not get {path}", expires)
