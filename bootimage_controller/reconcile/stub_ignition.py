"""Stub Ignition upgrade of a user-data Secret, before a boot image patch (SPEC section 3).

A MachineSet's `providerSpec.userDataSecret.name` names a Secret whose `userData` key holds the
stub Ignition config a new machine boots with. `ensure_stub_ignition_v3` reads it, converts a spec
2.x stub with the pure translator in `ignition.py`, and writes spec 3.5.0 back; a 3.x stub is left
alone, byte for byte. `StubIgnitionChecks` is the controller's check before each boot image patch.
The secret's contents are never logged and never put into an error message.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any

import structlog

from ..constants import (
    ANNOTATION_STUB_UPGRADED_AT,
    ANNOTATION_STUB_UPGRADED_TO,
    CLOUD_CREDENTIALS_SECRETS,
    MERGE_PATCH,
    USER_DATA_SECRET_KEY,
    Reason,
)
from ..core.ignition import StubConversion, convert_stub_ignition
from ..core.model import MachineResource, Refusal
from ..core.times import format_time
from ..errors import UserDataError
from ..kube.api_errors import Conflict, NotFound
from ..kube.client import read_json
from ..kube.core_api import CoreApi
from ..kube.retry import REQUEST_FAILURES, api_call, describe, retry_on_conflict

log = structlog.get_logger(__name__)


class StubOutcome(StrEnum):
    ALREADY_V3 = "AlreadyV3"
    UPGRADED = "Upgraded"
    WOULD_UPGRADE = "WouldUpgrade"  # dry run: a write was needed and not made
    INVALID = "Invalid"  # missing secret or key, or a config that cannot be parsed or converted
    FAILED = "Failed"  # the API refused or kept failing (after retries and conflict re-reads)


_OK_OUTCOMES = frozenset({StubOutcome.ALREADY_V3, StubOutcome.UPGRADED, StubOutcome.WOULD_UPGRADE})


@dataclass(frozen=True)
class StubUpgradeResult:
    """What `ensure_stub_ignition_v3` did. `ok` False: do not patch this MachineSet's boot image."""

    namespace: str
    secret_name: str
    outcome: StubOutcome
    message: str
    from_version: str | None = None
    to_version: str | None = None

    @property
    def ok(self) -> bool:
        return self.outcome in _OK_OUTCOMES

    @property
    def error(self) -> str | None:
        return None if self.ok else self.message


@dataclass(frozen=True)
class _StubPlan:
    """What one read of the Secret came to: a merge patch to send, or the answer as it stands."""

    result: StubUpgradeResult  # the answer when nothing is sent (or once the patch is written)
    body: dict[str, Any] | None = None


async def ensure_stub_ignition_v3(
    core_api: CoreApi,
    namespace: str,
    secret_name: str,
    *,
    now: datetime,
    dry_run: bool = False,
    conflict_attempts: int = 3,
) -> StubUpgradeResult:
    """Make the user-data Secret hold an Ignition spec 3 config; report what happened.

    `core_api` is a `kube.core_api.CoreApi`. The write is a JSON merge patch carrying the
    resourceVersion that was read (a concurrent change gives 409: re-read, re-convert, up to
    `conflict_attempts` times), and touches only `data.userData` and our two annotations. Never
    raises for API or data problems: those come back as an `INVALID` or `FAILED` result, so one bad
    secret costs only the MachineSets that use it.
    """
    where = f"secret {namespace}/{secret_name}"

    def result(outcome: StubOutcome, message: str, conv: StubConversion | None = None) -> StubUpgradeResult:
        return StubUpgradeResult(namespace, secret_name, outcome, message,
                                 conv.from_version if conv else None, conv.to_version if conv else None)

    async def get() -> Any:
        # The Secret's JSON, not a V1Secret model: building one (and importing the model modules
        # the first time) sat on the way to the pass's first patch (issue 36).
        return await read_json(await core_api.read_namespaced_secret(secret_name, namespace, _preload_content=False))

    async def read() -> Any:
        return await api_call(get, what=f"get {where}")

    async def plan(secret: Any) -> _StubPlan:
        return _plan(secret, where, format_time(now), dry_run, result)

    async def write(_secret: Any, planned: _StubPlan) -> StubUpgradeResult:
        if planned.body is not None:
            # A dict body would go out as strategic merge for a built-in type; say merge patch.
            body = planned.body
            await api_call(lambda: core_api.patch_namespaced_secret(secret_name, namespace, body, _content_type=MERGE_PATCH),
                           what=f"patch {where}")
        return planned.result

    if secret_name in CLOUD_CREDENTIALS_SECRETS:
        # Not even read: its contents are nobody's business here, and it is never written.
        found = result(
            StubOutcome.INVALID,
            f"{where}: providerSpec.userDataSecret names the cloud credentials Secret, which is never "
            "user data; point it at the Ignition stub Secret (e.g. worker-user-data)",
        )
    else:
        try:
            found = await retry_on_conflict(read, plan, write, what=where, attempts=max(1, conflict_attempts)) or result(
                StubOutcome.FAILED, f"{where}: not readable")
        except NotFound:
            found = result(StubOutcome.INVALID, f"{where}: not found")
        except Conflict:
            found = result(StubOutcome.FAILED, f"{where} kept changing under us ({conflict_attempts} conflicts)")
        except REQUEST_FAILURES as exc:
            found = result(StubOutcome.FAILED, f"{where}: cannot read or write it: {describe(exc)}")
    _log_result(found)
    return found


def _plan(
    secret: Mapping[str, Any], where: str, stamp: str, dry_run: bool, result: Callable[..., StubUpgradeResult]
) -> _StubPlan:
    """From the Secret as read (its JSON): already spec 3, invalid, or the merge patch that upgrades it."""
    try:
        conv = convert_stub_ignition(_user_data(secret, where), where)
    except UserDataError as exc:
        return _StubPlan(result(StubOutcome.INVALID, str(exc)))
    if not conv.changed:
        return _StubPlan(result(StubOutcome.ALREADY_V3, f"{where}: Ignition {conv.from_version} is already spec 3", conv))
    upgrade = f"Ignition {conv.from_version} -> {conv.to_version}"
    if dry_run:
        return _StubPlan(result(StubOutcome.WOULD_UPGRADE, f"{where}: would upgrade {upgrade} (dry run)", conv))
    if secret.get("immutable"):
        return _StubPlan(result(StubOutcome.FAILED, f"{where}: needs {upgrade} but the secret is immutable", conv))
    body = {
        "metadata": {
            "resourceVersion": (secret.get("metadata") or {}).get("resourceVersion"),
            "annotations": {ANNOTATION_STUB_UPGRADED_TO: conv.to_version, ANNOTATION_STUB_UPGRADED_AT: stamp},
        },
        "data": {USER_DATA_SECRET_KEY: base64.b64encode(conv.user_data).decode("ascii")},
    }
    return _StubPlan(result(StubOutcome.UPGRADED, f"{where}: upgraded {upgrade}", conv), body)


def _user_data(secret: Mapping[str, Any], where: str) -> bytes:
    data = secret.get("data") or {}
    field_ = f"data.{USER_DATA_SECRET_KEY}"
    encoded = data.get(USER_DATA_SECRET_KEY)
    if encoded is None:
        raise UserDataError(where, field_, "missing")
    try:
        return base64.b64decode(encoded, validate=True)
    except (binascii.Error, ValueError):
        raise UserDataError(where, field_, "not valid base64") from None


def _log_result(result: StubUpgradeResult) -> None:
    fields = {
        "namespace": result.namespace,
        "secret": result.secret_name,
        "outcome": str(result.outcome),
        "from_version": result.from_version,
        "to_version": result.to_version,
    }
    if result.outcome is StubOutcome.UPGRADED:
        log.info("upgraded stub Ignition of user-data secret", **fields)
    elif result.ok:
        log.debug("stub Ignition check", **fields)
    else:
        # The message names fields and paths, never contents.
        log.warning("stub Ignition upgrade not possible", error=result.message, **fields)


class StubIgnitionChecks:
    """Before a boot image patch: the user-data secret must hold Ignition spec 3 (SPEC section 3).

    Every worker MachineSet of a cluster usually shares one secret (`worker-user-data`): once it is
    known to hold spec 3, it is not read again for `ttl` seconds, so a pass over 1,000 MachineSets
    reads it once, not 1,000 times. A per-secret lock makes concurrent workers wait for one read.
    """

    def __init__(self, core: CoreApi, ttl: float = 60.0) -> None:
        self.core = core
        self.ttl = ttl
        self._verified: dict[tuple[str, str], float] = {}
        self._locks: dict[tuple[str, str], asyncio.Lock] = {}

    async def __call__(self, resource: MachineResource) -> Refusal | None:
        spec = resource.provider_spec if isinstance(resource.provider_spec, Mapping) else {}
        ref = spec.get("userDataSecret")
        secret = ref.get("name") if isinstance(ref, Mapping) else None
        if not secret:
            return None
        key = (resource.namespace, str(secret))
        async with self._locks.setdefault(key, asyncio.Lock()):
            loop = asyncio.get_running_loop()
            if loop.time() - self._verified.get(key, float("-inf")) < self.ttl:
                return None
            result = await ensure_stub_ignition_v3(self.core, resource.namespace, str(secret), now=datetime.now(UTC))
            if result.ok:
                self._verified[key] = loop.time()
                return None
        # INVALID: missing secret or a config spec 3 cannot express (the admin must fix it);
        # FAILED: the API refused or kept failing (tried again when the MachineSet or an input changes).
        reason = Reason.USER_DATA_INVALID if result.outcome is StubOutcome.INVALID else Reason.PATCH_FAILED
        return Refusal(reason, result.message)


__all__ = ["StubIgnitionChecks", "StubOutcome", "StubUpgradeResult", "ensure_stub_ignition_v3"]
