"""Telling a lost race from an invalid write, on the bodies kube-apiserver 1.20 really sends."""

from __future__ import annotations

import json

from kubernetes_asyncio.client.exceptions import ApiException

from bootimage_controller.kube.api_errors import (
    ApiError,
    Conflict,
    Forbidden,
    Invalid,
    ServerError,
    is_failed_test,
)

# Recorded from the test server: a JSON patch whose `test` op failed ...
FAILED_TEST = {
    "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
    "message": "the server rejected our request due to an error in our request",
    "reason": "Invalid", "details": {}, "code": 422,
}
# ... and a patch that applied but made the object invalid (annotations over 256 KiB).
TOO_LONG = {
    "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
    "message": 'MachineSet.machine.openshift.io "w" is invalid: metadata.annotations: Too long: must have at most 262144 bytes',
    "reason": "Invalid",
    "details": {"name": "w", "kind": "MachineSet", "causes": [
        {"reason": "FieldValueTooLong", "message": "Too long: must have at most 262144 bytes", "field": "metadata.annotations"}]},
    "code": 422,
}


def exception(status: int, body: dict[str, object] | None) -> ApiException:
    exc = ApiException(status=status, reason="Unprocessable Entity")
    exc.body = json.dumps(body) if body is not None else None
    return exc


def test_a_failed_test_op_is_a_conflict_to_re_read() -> None:
    exc = exception(422, FAILED_TEST)
    assert is_failed_test(exc) and isinstance(ApiError.from_exception("x", exc), Conflict)


def test_an_invalid_object_is_not_a_conflict_and_says_which_field() -> None:
    exc = exception(422, TOO_LONG)
    error = ApiError.from_exception("patch boot image openshift-machine-api/w", exc)
    assert not isinstance(error, Conflict) and isinstance(error, Invalid) and error.permanent
    assert error.kind == "invalid"
    assert error.describe() == (
        '422 Invalid: MachineSet.machine.openshift.io "w" is invalid: metadata.annotations: '
        "Too long: must have at most 262144 bytes"
    )


def test_409_is_a_conflict_and_other_failures_keep_their_http_reason() -> None:
    assert isinstance(ApiError.from_exception("x", exception(409, None)), Conflict)
    error = ApiError.from_exception("x", exception(403, {"reason": "Forbidden", "message": 'user "u" cannot patch'}))
    assert isinstance(error, Forbidden) and error.describe() == '403 Forbidden: user "u" cannot patch'
    server = ApiError.from_exception("x", exception(503, None))
    assert isinstance(server, ServerError) and not server.permanent
    assert server.describe() == "503 Unprocessable Entity"  # no body: the HTTP reason, as retry.describe says it


def test_every_logged_api_failure_carries_the_servers_reason_and_message() -> None:
    # `describe` is what every failed write's log line and error text use (status writer, Events,
    # the holder, stub Ignition): it must say what the server said, not only "422 Unprocessable Entity".
    from bootimage_controller.kube.retry import describe

    text = describe(exception(422, TOO_LONG))
    assert text.startswith("422 Invalid: ") and "metadata.annotations: Too long" in text
    assert describe(exception(503, None)) == "503 Unprocessable Entity"  # no body: the HTTP reason
