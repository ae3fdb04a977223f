"""Write fencing: every mutating request is allowed or refused at the moment it is sent.

Checking leadership (or the upgrade gate) when work is queued is not enough: a worker may wait on
the client-side rate limiter for many seconds, or the whole process may be frozen (SIGSTOP, a
stalled node) between the check and the send. So the check runs in `InstrumentedApiClient.request`
after the rate limiter has let the request through, immediately before it goes on the wire, and it
runs again for every retry.

Two kinds of checks:
- the client's `WriteFence` (one per process): leadership. It covers every write of every module
  (MachineSets, the claim holder, statuses, Events, Secrets) without any of them having to remember.
  Lease writes are exempt: they are how leadership is won and kept.
- `write_preconditions(...)`: checks for the writes sent inside a `with` block of the current task
  (a contextvar, so concurrent workers do not see each other's). The controller wraps boot image
  patches in the upgrade gate this way: a ClusterVersion that started an upgrade while the patch
  waited for its token stops the patch.

A refusal raises `WriteRefused` (never an `ApiException`: it must not be retried, and callers map
it to "write nothing and say why").
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Callable, Iterator

# A check returns None to allow the write, or the reason it must not be sent.
WriteCheck = Callable[[], "WriteRefused | None"]

MUTATING_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})
# Leader election's own writes: fencing them would make leadership impossible to win. Token and
# access reviews change nothing (a POST only by the API's shape): every replica checks its own
# metrics scrapers (metrics_security).
UNFENCED_RESOURCES = frozenset({"leases", "tokenreviews", "subjectaccessreviews"})


class WriteRefused(Exception):
    """A write that was not sent because a fence or precondition said no."""


class NotLeader(WriteRefused):
    """This process does not hold the Lease within its renew deadline."""


class UpgradeGateClosed(WriteRefused):
    """The cluster is not known to be stable (upgrade in progress, or ClusterVersion unreadable)."""


class WriteFence:
    """The process-wide leadership check, consulted for every mutating request."""

    def __init__(self, check: WriteCheck) -> None:
        self._check = check

    def refusal(self, resource: str) -> WriteRefused | None:
        if resource in UNFENCED_RESOURCES:
            return None
        return self._check()


_preconditions: contextvars.ContextVar[tuple[WriteCheck, ...]] = contextvars.ContextVar(
    "write_preconditions", default=()
)


@contextlib.contextmanager
def write_preconditions(*checks: WriteCheck) -> Iterator[None]:
    """Apply `checks` to every write this task sends inside the block (and only those)."""
    token = _preconditions.set(_preconditions.get() + checks)
    try:
        yield
    finally:
        _preconditions.reset(token)


def check_write(method: str, resource: str, fence: WriteFence | None) -> None:
    """Raise `WriteRefused` if a request with this method, to this resource, must not be sent now."""
    if method.upper() not in MUTATING_METHODS:
        return
    refusal = fence.refusal(resource) if fence is not None else None
    if refusal is None:
        for check in _preconditions.get():
            refusal = check()
            if refusal is not None:
                break
    if refusal is not None:
        raise refusal


__all__ = [
    "NotLeader",
    "UpgradeGateClosed",
    "WriteCheck",
    "WriteFence",
    "WriteRefused",
    "check_write",
    "write_preconditions",
]
