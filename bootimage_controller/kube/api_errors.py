"""Typed API errors built where responses come in, carrying what the API server said.

kubernetes_asyncio raises one `ApiException` for everything, with the server's `Status` object as
a JSON string in `body`. Callers that must tell an admin what went wrong (a Degraded condition, an
Event, a log line) need the server's own reason and message, and must not call every 422 a
conflict: a JSON-patch `test` that failed is a conflict (someone wrote first: re-read), any other
422 is an invalid request (re-reading will not help; the message says which field).

How to tell them apart, as kube-apiserver answers (checked on the test server, 1.20): a JSON patch
that does not apply to the stored object (a failed `test`, or an op whose path is gone) is a 422
`Invalid` with the generic message "the server rejected our request due to an error in our
request" and empty `details`; a validation failure names the object and lists `details.causes`
with the field ("metadata.annotations: Too long: must have at most 262144 bytes").
"""

from __future__ import annotations

import json
from typing import Any

from kubernetes_asyncio.client.exceptions import ApiException

_KINDS = {
    400: "bad request",
    401: "unauthorized",
    403: "forbidden",
    404: "not found",
    409: "conflict",
    410: "gone",
    422: "invalid",
    429: "too many requests",
}


def _status_body(exc: ApiException) -> dict[str, Any]:
    body: Any = exc.body
    if isinstance(body, bytes):
        body = body.decode("utf-8", "replace")
    try:
        status = json.loads(body) if isinstance(body, str) and body else {}
    except ValueError:
        return {}
    return status if isinstance(status, dict) else {}


def status_of(exc: ApiException) -> tuple[str, str]:
    """(reason, message) of the server's `Status` body, falling back to the HTTP reason.

    A generic message ("the server rejected our request due to an error in our request", which
    is what a failed JSON-patch op gets) is followed by the `details.causes` that say what.
    """
    status = _status_body(exc)
    reason = str(status.get("reason") or exc.reason or "")
    message = str(status.get("message") or "")
    details = status.get("details")
    details = details if isinstance(details, dict) else {}
    causes = [
        str(c.get("message"))
        for c in (details.get("causes") or [])
        if isinstance(c, dict) and c.get("message") and str(c.get("message")) not in message
    ]
    if causes:
        message = f"{message}: {'; '.join(causes)}" if message else "; ".join(causes)
    return reason, message


def is_failed_test(exc: ApiException) -> bool:
    """A 422 because our JSON patch no longer applies (its `test` failed): the object changed
    since we read it. A validation failure has `details` naming the object and its causes."""
    if exc.status != 422:
        return False
    details = _status_body(exc).get("details")
    return not details  # absent or {}: a patch-application failure, not a field validation


class ApiError(Exception):
    """A request the API server refused (after retries), with its words.

    Raised as one of the subclasses below (kopf's `_cogs/clients/errors.py` is the model), so a
    caller says `except NotFound` rather than compare status codes: only `kube/` looks at HTTP
    statuses. `permanent` tells the reconcile loop whether asking again can help.
    """

    permanent = False  # asking again later without a change cannot succeed

    def __init__(self, what: str, status: int, reason: str, message: str) -> None:
        self.what = what
        self.status = status
        self.reason = reason
        self.message = message
        super().__init__(self.describe())

    @classmethod
    def from_exception(cls, what: str, exc: ApiException) -> ApiError:
        """The typed error for a client exception (`NotFound` for a 404, and so on)."""
        reason, message = status_of(exc)
        status = int(exc.status or 0)
        return _error_class(status, is_failed_test(exc))(what, status, reason, message)

    @property
    def kind(self) -> str:
        if self.status >= 500:
            return "server error"
        return _KINDS.get(self.status, f"HTTP {self.status}")

    def describe(self) -> str:
        """`422 Invalid: <server message>` (the message names the field): `describe_status`."""
        return describe_status(self.status, self.reason, self.message)


def describe_status(status: int | None, reason: str, message: str) -> str:
    """The one way an API answer is said in a log, a condition or an `error:` line: the status, the
    server's reason and its message (`422 Invalid: ... metadata.annotations: Too long ...`), not
    only `422 Unprocessable Entity`."""
    return f"{status} {reason}".rstrip() + (f": {message}" if message else "")


class NotFound(ApiError):
    """404: the object (or its kind: no CRD) does not exist."""


class Gone(ApiError):
    """410: a watch's resourceVersion is too old (the informer lists again)."""


class Conflict(ApiError):
    """409, or a JSON-patch `test` that failed: someone wrote first. Re-read and re-plan."""


class Invalid(ApiError):
    """422 (or 400): the server refuses this request as written; `message` names the field."""

    permanent = True


class Forbidden(ApiError):
    """401 or 403: this identity may not do it. RBAC must change first."""

    permanent = True


class Unauthorized(Forbidden):
    """401: the credentials were not accepted (expired token, wrong kubeconfig). A `Forbidden` for
    whoever only asks whether the request was allowed; said apart where the fix differs."""


class TooManyRequests(ApiError):
    """429: the server asks us to slow down (retries exhausted)."""


class ServerError(ApiError):
    """5xx: the server failed (retries exhausted)."""


def _error_class(status: int, failed_test: bool) -> type[ApiError]:
    if status == 404:
        return NotFound
    if status == 410:
        return Gone
    if status == 409 or failed_test:
        return Conflict
    if status in (400, 422):
        return Invalid
    if status == 401:
        return Unauthorized
    if status == 403:
        return Forbidden
    if status == 429:
        return TooManyRequests
    if status >= 500:
        return ServerError
    return ApiError


def conflict(what: str, message: str) -> Conflict:
    """A conflict found on our side (an object kept changing under us), worded as the server's."""
    return Conflict(what, 409, "Conflict", message)


__all__ = [
    "ApiError",
    "Conflict",
    "Forbidden",
    "Gone",
    "Invalid",
    "NotFound",
    "ServerError",
    "TooManyRequests",
    "Unauthorized",
    "conflict",
    "is_failed_test",
    "status_of",
]
