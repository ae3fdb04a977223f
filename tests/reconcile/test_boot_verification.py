"""The daemon's boot verification step (reconcile/verification.py) against a writer that refuses,
races or is held back: what is reported is what was written (SPEC section 3b)."""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import pytest
from core.planner.support import machineset, plan

from bootimage_controller.constants import (
    ANNOTATION_HOT_LOOP,
    ANNOTATION_PREVIOUS,
    EVENT_FIRST_BOOT_FAILED,
    EVENT_ROLLED_BACK,
    Manager,
)
from bootimage_controller.core.claims import HotLoopRecord, fingerprint
from bootimage_controller.core.verification import Verdict
from bootimage_controller.kube.api_errors import ApiError, Conflict, Invalid
from bootimage_controller.reconcile.claim_reconciler import ClaimGate
from bootimage_controller.reconcile.event_rules import new_first_boot_failure, verification_events
from bootimage_controller.reconcile.state import MachineSetState
from bootimage_controller.reconcile.verification import BootVerification, VerificationOptions
from bootimage_controller.reconcile.writer import Holder

AWS_416 = "ami-05483066c3caaccf5"
AWS_422 = "ami-06a6b025350ff1e23"  # the 4.22 golden image for us-east-1
NOW = datetime(2026, 11, 28, 12, 0, tzinfo=UTC)


@dataclass
class FakeStore:
    machines: list[dict[str, Any]]
    informers: dict[str, Any] = field(default_factory=dict)

    def list(self, role: str) -> list[dict[str, Any]]:
        return self.machines if role == "machines" else []


@dataclass
class FakeWriter:
    refusal: ApiError | None = None
    sent: list[list[dict[str, Any]]] = field(default_factory=list)

    async def patch(self, obj: Any, ops: list[dict[str, Any]], what: str) -> None:
        if self.refusal is not None:
            raise self.refusal
        self.sent.append(ops)


@dataclass
class FakeScope:
    writer: FakeWriter


@dataclass
class FakeKind:
    scope: FakeScope


@dataclass
class FakeHolders:
    deleting: bool = False
    gate: ClaimGate = field(default_factory=ClaimGate)

    async def current(self, scope: Any) -> Holder:
        return Holder("holder-uid", self.deleting)

    @contextlib.asynccontextmanager
    async def claiming(self, scope: Any) -> AsyncIterator[Holder]:
        async with self.gate.claiming():
            yield await self.current(scope)


def written_by_us() -> dict[str, Any]:
    """A MachineSet our last write moved to the 4.22 image, from 4.16, with a Machine from 4.22
    whose instance has run for an hour without a Node."""
    ms = machineset("aws-x86_64-us-east-1a-4.16.yaml")
    ms["metadata"].update(uid="ms-uid", resourceVersion="10")
    ms["spec"]["template"]["spec"]["providerSpec"]["value"]["ami"] = {"id": AWS_422}
    ms["metadata"]["annotations"] = {ANNOTATION_PREVIOUS: fingerprint({"id": AWS_416}),
                                     ANNOTATION_HOT_LOOP: HotLoopRecord(fingerprint({"id": AWS_422}), 1).to_annotation()}
    return ms


def stuck_machine() -> dict[str, Any]:
    return {"metadata": {"name": "m1", "namespace": "openshift-machine-api", "creationTimestamp": "2026-11-28T11:00:00Z",
                         "ownerReferences": [{"kind": "MachineSet", "name": "x", "uid": "ms-uid"}]},
            "spec": {"providerSpec": {"value": {"ami": {"id": AWS_422}}}},
            "status": {"phase": "Provisioned", "providerStatus": {"instanceId": "i-1"}}}


async def verify(writer: FakeWriter, holders: FakeHolders | None = None) -> MachineSetState:
    ms = written_by_us()
    decision = plan(ms)
    assert decision.manager is Manager.OURS and decision.current == {"id": AWS_422}
    checks = BootVerification(FakeStore([stuck_machine()]), holders or FakeHolders(),  # type: ignore[arg-type]
                              VerificationOptions(first_boot_timeout=1200), lambda: None, lambda: NOW)
    outcome = await checks.verify(ms, decision, FakeKind(FakeScope(writer)), may_write=True)  # type: ignore[arg-type]
    return MachineSetState(decision, verification=outcome)


def reasons(state: MachineSetState) -> list[str]:
    return [reason for _type, reason, _message in verification_events(None, state)]


async def test_an_applied_roll_back_is_said_once_with_the_image_put_back() -> None:
    writer = FakeWriter()
    state = await verify(writer)
    assert state.verification is not None and state.verification.rolled_back_to == AWS_416
    assert len(writer.sent) == 1
    replaced = [op for op in writer.sent[0] if op["op"] == "replace"]
    assert [op["value"] for op in replaced] == [{"id": AWS_416}]
    assert reasons(state) == [EVENT_FIRST_BOOT_FAILED, EVENT_ROLLED_BACK]
    assert new_first_boot_failure(None, state)


@pytest.mark.parametrize("holders", [None, FakeHolders(deleting=True)], ids=["conflict", "holder-deleting"])
async def test_a_roll_back_not_written_is_not_said_to_have_happened(holders: FakeHolders | None) -> None:
    """Someone wrote the MachineSet first (the `test` of its resourceVersion failed), or the claims
    are being released: nothing was written, so no roll back is reported and no failure counted
    yet; the watch event of that change (or the new holder) brings the MachineSet back."""
    writer = FakeWriter(Conflict("roll back", 409, "Conflict", "the object has been modified") if holders is None
                        else None)
    state = await verify(writer, holders)
    v = state.verification
    assert v is not None and v.rolled_back_to is None and v.rollback_pending
    assert v.verdict.verdict is Verdict.FAILED and not v.verdict.failed_images
    assert writer.sent == [] and reasons(state) == [] and not new_first_boot_failure(None, state)
    assert "being rolled back" in v.failure_text() and state.boot_failure is not None  # still degraded


async def test_a_refused_roll_back_says_the_refusal() -> None:
    state = await verify(FakeWriter(Invalid("roll back", 422, "Invalid", "annotations too long")))
    v = state.verification
    assert v is not None and v.rolled_back_to is None and not v.rollback_pending
    assert v.write_error is not None and "annotations too long" in v.failure_text()
    assert reasons(state) == [EVENT_FIRST_BOOT_FAILED]
    assert json.dumps(v.verdict.to_json())  # still a plain verdict for the reports
