"""`StatusWriter`: the only thing that writes the MachineConfiguration and ClusterOperator statuses.

The controller tells it the desired state (built by the pure `status` module) as often as it likes;
it coalesces (latest wins), writes when the status clock allows (`status_clock`: the spacing, the
backoff and the ClusterOperator's Progressing hold-off), and writes nothing when the cluster already
holds the desired state.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import Enum
from typing import TYPE_CHECKING, Any, Generic, Protocol, TypeVar, cast

import structlog

from ..constants import (
    CLUSTEROPERATOR_PLURAL,
    CONFIG_GROUP,
    CONFIG_VERSION,
    DEFAULT_CLUSTER_OPERATOR,
    MACHINE_API_GROUP,
    MACHINECONFIGURATION_NAME,
    MACHINECONFIGURATION_PLURAL,
    MACHINESET_PLURAL,
    MERGE_PATCH,
    OPERATOR_GROUP,
    OPERATOR_VERSION,
)
from ..core.status import ClusterOperatorStatus, Condition, find_condition, merge_conditions
from ..kube.api_errors import ApiError, Conflict, NotFound, conflict
from ..kube.fence import WriteRefused
from ..kube.retry import Sleep, api_call, describe, retry_on_conflict
from .status_clock import StatusClock

if TYPE_CHECKING:
    from kubernetes_asyncio.client import CustomObjectsApi

log = structlog.get_logger(__name__)


class StatusWriteResult(Enum):
    """How a status write ended (MachineSet patches end in the machine reconciler's outcome instead)."""

    WRITTEN = "written"  # the cluster now holds the desired state
    UNCHANGED = "unchanged"  # it already did: nothing was written
    DEFERRED = "deferred"  # the object is missing; write when the controller calls again
    FAILED = "failed"  # retry with backoff


T = TypeVar("T")


class _Channel(Generic[T]):
    """Latest-wins coalescing of one object's desired status, written when the clock allows.

    `offer` never blocks: it records the state and makes sure a drain task runs. The drain
    writes at once after a quiet period, else waits what the clock says (`StatusClock.write_delay`);
    states offered meanwhile replace each other. A state equal to what the cluster is known to
    hold (last written, or read) is not written.
    """

    def __init__(
        self,
        name: str,
        write: Callable[[T], Awaitable[StatusWriteResult]],
        *,
        clock: StatusClock,
        sleep: Sleep,
    ) -> None:
        self.name = name
        self._write = write
        self._clock = clock
        self._sleep = sleep
        self._desired: T | None = None
        self._desired_key: Hashable = None
        self._synced_key: Hashable = None  # what the cluster is known to hold
        self._inflight_key: Hashable = None
        self._dirty = False
        self._flushing = False
        self._task: asyncio.Task[None] | None = None
        self._wake = asyncio.Event()

    def offer(self, desired: T, key: Hashable) -> None:
        self._desired, self._desired_key = desired, key
        settled = self._inflight_key is None and key == self._synced_key
        if settled or (self._inflight_key is not None and key == self._inflight_key):
            self._dirty = False
            return
        self._dirty = True
        self._start()

    def observed(self, key: Hashable) -> None:
        """The cluster was seen holding `key` (a watch event): write again if that is not ours."""
        if self._inflight_key is not None:
            return  # the event races our own write; the write compares against a fresh read
        self._synced_key = key
        if self._desired is not None and key != self._desired_key:
            self._dirty = True
            self._start()

    def _start(self) -> None:
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._drain(), name=f"status-{self.name}")

    async def _pause(self, delay: float) -> None:
        """Sleep `delay`, or less if `flush` wakes us."""
        sleeper = asyncio.ensure_future(self._sleep(delay))
        waker = asyncio.ensure_future(self._wake.wait())
        try:
            await asyncio.wait({sleeper, waker}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            sleeper.cancel()
            waker.cancel()
        self._wake.clear()

    async def _drain(self) -> None:
        while self._dirty and self._desired is not None:
            delay = self._clock.write_delay(self.name)
            if delay > 0 and not self._flushing:
                await self._pause(delay)
                continue
            desired, key = self._desired, self._desired_key
            self._dirty = False
            self._inflight_key = key
            started = self._clock.now()
            try:
                result = await self._write(desired)
            except ApiError as exc:  # 403, 422, retries exhausted: try again after a backoff
                log.error("status write failed", object=self.name, error=describe(exc))
                result = StatusWriteResult.FAILED
            except WriteRefused as exc:
                # Not sent: this process stopped leading (the last write of a shutdown races the
                # end of its work) or a gate closed. Said, not a fault: no traceback.
                log.info("status not written", object=self.name, why=str(exc))
                result = StatusWriteResult.FAILED
            except Exception as exc:  # connection errors after retries, or a bug: keep the loop alive
                log.error("status write failed", object=self.name, error=describe(exc), exc_info=True)
                result = StatusWriteResult.FAILED
            finally:
                self._inflight_key = None
            if result in (StatusWriteResult.WRITTEN, StatusWriteResult.UNCHANGED):
                self._synced_key = key
                self._clock.wrote(self.name, started)
            elif result is StatusWriteResult.DEFERRED:
                self._synced_key = None
                self._clock.deferred(self.name, started)
            else:
                self._dirty = True
                if self._flushing:
                    self._clock.deferred(self.name, started)  # one attempt on a flush
                    return
                self._clock.write_failed(self.name, started)

    async def flush(self) -> None:
        """Write the latest state now, ignoring the interval (shutdown); one attempt on failure."""
        self._flushing = True
        try:
            if self._dirty:
                self._start()
            self._wake.set()
            if self._task is not None:
                await self._task
        finally:
            self._flushing = False
            self._wake.clear()

    async def aclose(self) -> None:
        try:
            await self.flush()
        finally:
            if self._task is not None and not self._task.done():
                self._task.cancel()

    async def discard(self) -> None:
        self._dirty = False
        if self._task is not None and not self._task.done():
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)


class CustomObjectsApiLike(Protocol):
    """The subset of `kubernetes_asyncio.client.CustomObjectsApi` the writer calls.

    The real class qualifies at run time; its bundled stubs leave out `_content_type`, so the
    writer also accepts it by name.
    """

    def get_cluster_custom_object(
        self, group: str, version: str, plural: str, name: str
    ) -> Awaitable[Any]: ...
    def create_cluster_custom_object(
        self, group: str, version: str, plural: str, body: Any
    ) -> Awaitable[Any]: ...
    def patch_cluster_custom_object_status(
        self, group: str, version: str, plural: str, name: str, body: Any, *, _content_type: str
    ) -> Awaitable[Any]: ...


@dataclass(frozen=True)
class _McDesired:
    conditions: tuple[Condition, ...]
    skew_status: Mapping[str, Any] | None


# What Automatic skew enforcement implies (SPEC section 5: every Machine API MachineSet enrolled).
ALL_MACHINESETS: Mapping[str, Any] = {
    "resource": MACHINESET_PLURAL, "apiGroup": MACHINE_API_GROUP, "selection": {"mode": "All"},
}


def _needs_boot_image_config(obj: Mapping[str, Any], skew_status: Mapping[str, Any]) -> bool:
    """OpenShift refuses an Automatic skew status on a MachineConfiguration that has neither
    `spec.managedBootImages` nor `status.managedBootImagesStatus` ("when skew enforcement is in
    Automatic mode, a boot image configuration is required"). That is a cluster where the defaults
    apply and no MCO wrote its validated copy: the status then says which default we act on. It is
    only ever filled in where absent, never rewritten (where present it is the MCO's)."""
    if skew_status.get("mode") != "Automatic":
        return False
    spec, status = obj.get("spec") or {}, obj.get("status") or {}
    return spec.get("managedBootImages") is None and status.get("managedBootImagesStatus") is None


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), default=str)


def _mc_key(conditions: Iterable[Condition], skew_status: Mapping[str, Any] | None) -> Hashable:
    return (tuple(sorted(c.state for c in conditions)), _canonical(skew_status))


def _co_key(status: ClusterOperatorStatus) -> Hashable:
    return (
        tuple(sorted(c.state for c in status.conditions)),
        _canonical(status.versions_list()),
        _canonical(status.related_list()),
    )


_SAME = object()


def _without_nulls(value: Mapping[str, Any]) -> dict[str, Any]:
    return {k: _without_nulls(v) if isinstance(v, Mapping) else v for k, v in value.items() if v is not None}


def merge_patch_diff(old: Any, new: Any) -> Any:
    """An RFC 7386 merge patch turning `old` into `new`, or `_SAME` (module private) if equal.

    Keys of `old` missing from `new` become explicit nulls: a merge patch merges objects, so
    without them a stale `automatic.ocpVersion` would survive a switch to `rhcosVersion`.
    """
    if isinstance(old, Mapping) and isinstance(new, Mapping):
        out: dict[str, Any] = {k: None for k in old if k not in new}
        for k, v in new.items():
            if k not in old:
                out[k] = v
                continue
            sub = merge_patch_diff(old[k], v)
            if sub is not _SAME:
                out[k] = sub
        return out if out else _SAME
    return _SAME if old == new else new


class StatusWriter:
    """Writes the MachineConfiguration `cluster` status and our ClusterOperator, batched.

    Offers are merged while one waits (the newest wins) and nothing is sent when nothing changed;
    when a write may go is the status clock's (`StatusClock`: spacing, backoff, the ClusterOperator's
    Progressing hold-off), shared with the status reconciler's mid-pass reports.

    Call `set_machineconfiguration` / `set_cluster_operator` (plain methods, they never block)
    as often as convenient, from inside the event loop; `flush()` (or `aclose()`) on shutdown.
    Every write request sent is counted in `writes` (and per object in `writes_by_object`).
    """

    def __init__(
        self,
        custom_api: CustomObjectsApi | CustomObjectsApiLike,
        *,
        cluster_operator: str = DEFAULT_CLUSTER_OPERATOR,
        clock: StatusClock | None = None,
        sleep: Sleep = asyncio.sleep,
        retry_attempts: int = 5,
    ) -> None:
        self._api = cast(CustomObjectsApiLike, custom_api)
        self.cluster_operator = cluster_operator
        self._sleep = sleep
        self._attempts = retry_attempts
        self.writes = 0
        self.writes_by_object: dict[str, int] = {}
        self._mc_missing_logged = False
        self.clock = clock = clock or StatusClock()
        self._mc = _Channel[_McDesired](
            f"machineconfiguration/{MACHINECONFIGURATION_NAME}",
            self._write_machineconfiguration,
            clock=clock,
            sleep=sleep,
        )
        self._co = _Channel[ClusterOperatorStatus](
            f"clusteroperator/{cluster_operator}",
            self._write_cluster_operator,
            clock=clock,
            sleep=sleep,
        )

    # -- what the controller calls

    def set_machineconfiguration(
        self, conditions: Sequence[Condition], skew_status: Mapping[str, Any] | None = None
    ) -> None:
        """Desired `status.conditions` (only these types are touched) and, when given,
        `status.bootImageSkewEnforcementStatus` (replaced whole; None leaves it alone). Null
        values in `skew_status` mean "absent", so a full object and a merge patch both work."""
        desired = _McDesired(
            tuple(conditions), _without_nulls(skew_status) if skew_status is not None else None
        )
        self._mc.offer(desired, _mc_key(desired.conditions, desired.skew_status))

    def set_cluster_operator(self, status: ClusterOperatorStatus) -> None:
        if not self.cluster_operator:
            return  # --cluster-operator "" disables it
        if self.clock.cluster_operator_due(status):
            self._co.offer(status, _co_key(status))

    def observe_machineconfiguration(self, obj: Mapping[str, Any]) -> None:
        """Optional: feed watch events so a status someone else rewrote is written back.

        Only our condition types (the ones last set) and the skew status are compared.
        """
        desired = self._mc._desired
        if desired is None:
            return
        status = obj.get("status") or {}
        ours = [find_condition(status.get("conditions") or (), c.type) for c in desired.conditions]
        held = tuple(c for c in ours if c is not None)
        skew = status.get("bootImageSkewEnforcementStatus") if desired.skew_status is not None else None
        self._mc.observed(_mc_key(held, skew))

    async def flush(self) -> None:
        await asyncio.gather(self._mc.flush(), self._co.flush())

    async def aclose(self) -> None:
        await asyncio.gather(self._mc.aclose(), self._co.aclose())

    async def discard(self) -> None:
        """Stop without writing what is pending (the leader's last flush already ran, or this
        process no longer leads and must not write)."""
        await asyncio.gather(self._mc.discard(), self._co.discard())

    # -- the writes

    def _count(self, what: str) -> None:
        self.writes += 1
        self.writes_by_object[what] = self.writes_by_object.get(what, 0) + 1

    async def _call(self, what: str, fn: Callable[[], Awaitable[Any]]) -> Any:
        return await api_call(fn, what=what, attempts=self._attempts, sleep=self._sleep)

    async def _patch_status(self, group: str, version: str, plural: str, name: str, body: Any) -> Any:
        what = f"{plural}/{name}/status"

        async def call() -> Any:
            self._count(what)
            return await self._api.patch_cluster_custom_object_status(
                group, version, plural, name, body, _content_type=MERGE_PATCH
            )

        return await self._call(f"patch {what}", call)

    async def _get(self, group: str, version: str, plural: str, name: str) -> Any:
        return await self._call(
            f"get {plural}/{name}",
            lambda: self._api.get_cluster_custom_object(group, version, plural, name),
        )

    async def _write_machineconfiguration(self, desired: _McDesired) -> StatusWriteResult:
        g, v, p, n = OPERATOR_GROUP, OPERATOR_VERSION, MACHINECONFIGURATION_PLURAL, MACHINECONFIGURATION_NAME

        async def plan(obj: Mapping[str, Any]) -> dict[str, Any] | None:
            return self._machineconfiguration_patch(obj, desired)

        async def write(_obj: Mapping[str, Any], body: dict[str, Any]) -> StatusWriteResult:
            await self._patch_status(g, v, p, n, body)
            return StatusWriteResult.WRITTEN

        try:
            result = await retry_on_conflict(lambda: self._get(g, v, p, n), plan, write, what="MachineConfiguration status")
        except NotFound:
            return self._machineconfiguration_missing()
        except Conflict:
            log.warning("MachineConfiguration status kept conflicting; will retry")
            return StatusWriteResult.FAILED
        self._mc_missing_logged = False
        if result is None:
            return StatusWriteResult.UNCHANGED
        log.debug("MachineConfiguration status written", conditions=[c.state[:2] for c in desired.conditions])
        return result

    def _machineconfiguration_missing(self) -> StatusWriteResult:
        if not self._mc_missing_logged:
            log.warning(
                "MachineConfiguration not found; its status will be written when it exists",
                name=MACHINECONFIGURATION_NAME,
            )
            self._mc_missing_logged = True
        return StatusWriteResult.DEFERRED

    @staticmethod
    def _machineconfiguration_patch(obj: Mapping[str, Any], desired: _McDesired) -> dict[str, Any] | None:
        status = obj.get("status") or {}
        current = status.get("conditions") or []
        patch: dict[str, Any] = {}
        merged = merge_conditions(current, desired.conditions)
        if merged != list(current):
            patch["conditions"] = merged  # lists are replaced whole by a merge patch
        if desired.skew_status is not None:
            diff = merge_patch_diff(status.get("bootImageSkewEnforcementStatus"), desired.skew_status)
            if diff is not _SAME:
                patch["bootImageSkewEnforcementStatus"] = diff
                if _needs_boot_image_config(obj, desired.skew_status):
                    patch["managedBootImagesStatus"] = {"machineManagers": [dict(ALL_MACHINESETS)]}
        if not patch:
            return None
        rv = (obj.get("metadata") or {}).get("resourceVersion")
        return {"metadata": {"resourceVersion": rv}, "status": patch}

    async def _write_cluster_operator(self, desired: ClusterOperatorStatus) -> StatusWriteResult:
        g, v, p, n = CONFIG_GROUP, CONFIG_VERSION, CLUSTEROPERATOR_PLURAL, self.cluster_operator

        async def read() -> Any:
            try:
                return await self._get(g, v, p, n)
            except NotFound:
                created = await self._create_cluster_operator()
                return created if created is not None else await self._get(g, v, p, n)  # created meanwhile

        async def plan(obj: Mapping[str, Any]) -> dict[str, Any] | None:
            return self._cluster_operator_patch(obj, desired)

        async def write(_obj: Mapping[str, Any], body: dict[str, Any]) -> StatusWriteResult:
            try:
                await self._patch_status(g, v, p, n, body)
            except NotFound:  # deleted under us: read again, which creates it again
                raise conflict(f"{p}/{n}", "deleted while its status was written") from None
            return StatusWriteResult.WRITTEN

        try:
            result = await retry_on_conflict(read, plan, write, what=f"ClusterOperator {n} status")
        except Conflict:
            log.warning("ClusterOperator status kept conflicting; will retry", name=n)
            return StatusWriteResult.FAILED
        if result is None:
            return StatusWriteResult.UNCHANGED
        log.debug("ClusterOperator status written", name=n)
        return result

    async def _create_cluster_operator(self) -> Any:
        """Create our ClusterOperator (status is ignored on create: it is a subresource)."""
        body = {
            "apiVersion": f"{CONFIG_GROUP}/{CONFIG_VERSION}",
            "kind": "ClusterOperator",
            "metadata": {"name": self.cluster_operator},
            "spec": {},
        }
        what = f"{CLUSTEROPERATOR_PLURAL}/{self.cluster_operator}"

        async def call() -> Any:
            self._count(what)
            return await self._api.create_cluster_custom_object(
                CONFIG_GROUP, CONFIG_VERSION, CLUSTEROPERATOR_PLURAL, body
            )

        try:
            created = await self._call(f"create {what}", call)
        except Conflict:
            return None
        log.info("ClusterOperator created", name=self.cluster_operator)
        return created

    @staticmethod
    def _cluster_operator_patch(
        obj: Mapping[str, Any], desired: ClusterOperatorStatus
    ) -> dict[str, Any] | None:
        status = obj.get("status") or {}
        patch: dict[str, Any] = {}
        current = status.get("conditions") or []
        merged = merge_conditions(current, desired.conditions)
        if merged != list(current):
            patch["conditions"] = merged
        if status.get("versions") != desired.versions_list():
            patch["versions"] = desired.versions_list()
        if status.get("relatedObjects") != desired.related_list():
            patch["relatedObjects"] = desired.related_list()
        if not patch:
            return None
        rv = (obj.get("metadata") or {}).get("resourceVersion")
        return {"metadata": {"resourceVersion": rv}, "status": patch}
