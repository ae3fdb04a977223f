"""Every exception the API client can raise, injected into the write of a reconcile, comes back as
one result and the key's outcome, never as an escaped exception (issue 46, item 2).

The reconcilers are assembled as the daemon assembles them (tests/reconcile/test_reconcile_writes.py's
harness: a fake writer, no API server). The daemon's workers and `run --once` both call
`Loop.reconcile`: a result with an error is a retried or parked key and a failed pass, an exception
would be "reconcile raised" with a traceback (kube/workqueue.py) and no outcome for the key."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest
import structlog
from kubernetes_asyncio.client import ApiClient

from bootimage_controller.constants import Reason
from bootimage_controller.core.skew.verdict import SkewLimits
from bootimage_controller.kube.api_errors import Conflict, Forbidden, Invalid, ServerError, TooManyRequests
from bootimage_controller.kube.fence import NotLeader, UpgradeGateClosed
from bootimage_controller.reconcile import reporting
from bootimage_controller.reconcile.ledger import LedgerWriteFailed

from .test_reconcile_writes import KEY, machineset, make_controller

WHAT = "patch boot image openshift-machine-api/ms"

# (the exception, whether the queue parks the key until a change) -> a failure with a condition.
FAILURES: dict[str, tuple[BaseException, bool]] = {
    "503": (ServerError(WHAT, 503, "ServiceUnavailable", "etcd is busy"), False),
    "429": (TooManyRequests(WHAT, 429, "TooManyRequests", "slow down"), False),
    "403": (Forbidden(WHAT, 403, "Forbidden", "machinesets is forbidden"), True),
    "422": (Invalid(WHAT, 422, "Invalid", "spec: Invalid value"), True),
    "409 every time": (Conflict(WHAT, 409, "Conflict", "the object has been modified"), False),
    "server disconnected": (aiohttp.ServerDisconnectedError(), False),
    "connection reset": (ConnectionResetError(104, "Connection reset by peer"), False),
    "client connection error": (aiohttp.ClientConnectionError("Cannot connect to host 127.0.0.1:6443"), False),
    "body cut off": (aiohttp.ClientPayloadError("Response payload is not completed"), False),
    "timeout": (TimeoutError(), False),
}


@pytest.fixture
async def api() -> AsyncIterator[ApiClient]:
    client = ApiClient()
    yield client
    await client.close()


def degraded_message(ctl: Any) -> str:
    reporter = reporting.PassReporter(None, SkewLimits())
    reporter(ctl.view())
    assert reporter.summary.degraded, "a failed write is a Degraded condition"
    return reporter.summary.degraded_message()


@pytest.mark.parametrize("case", sorted(FAILURES))
async def test_an_exception_in_the_write_is_one_result_and_the_keys_condition(api: ApiClient, case: str) -> None:
    exc, parked = FAILURES[case]
    ctl, writer, _ = make_controller(api, machineset())
    writer.results = [exc] * 10  # every attempt, conflicts' re-reads included
    writer.fresh = machineset(rv="11")
    with structlog.testing.capture_logs() as logs:
        result = await ctl.reconcile(KEY)
    assert not [e for e in logs if e["event"] == "reconcile raised"]
    assert result.error is not None and result.permanent is parked, result
    state = ctl.states[KEY]
    assert state.error is not None and state.error_reason is Reason.PATCH_FAILED and not state.patched
    assert state.retried is not parked
    assert f"{Reason.PATCH_FAILED}" in degraded_message(ctl)


@pytest.mark.parametrize("exc", [NotLeader("the Lease was lost"), UpgradeGateClosed("an upgrade started")],
                         ids=["not the leader", "upgrade gate closed"])
async def test_a_refused_write_is_not_a_failure(api: ApiClient, exc: BaseException) -> None:
    """Not sent on purpose: not leading (the process is stopping), or the upgrade gate closed."""
    ctl, writer, _ = make_controller(api, machineset())
    writer.results = [exc]
    with structlog.testing.capture_logs() as logs:
        result = await ctl.reconcile(KEY)
    assert not [e for e in logs if e["event"] == "reconcile raised"]
    assert result.error is None, result


@pytest.mark.parametrize("exc", [LedgerWriteFailed("the holder writer is stopping"),
                                 ServerError("keep counts", 503, "ServiceUnavailable", "busy"),
                                 aiohttp.ServerDisconnectedError()],
                         ids=["ledger write cancelled", "holder 503", "holder disconnected"])
async def test_an_exception_in_the_count_before_the_write_is_the_keys_outcome(api: ApiClient, exc: BaseException) -> None:
    ctl, writer, _ = make_controller(api, machineset())
    writer.keep_results = [exc] * 10
    with structlog.testing.capture_logs() as logs:
        result = await ctl.reconcile(KEY)
    assert not [e for e in logs if e["event"] == "reconcile raised"]
    assert result.error is not None
    assert ("patch", "10") not in writer.calls, "nothing is sent without its count kept"
    assert ctl.states[KEY].error is not None
