"""Claims and their holders (SPEC section 3): the `@claims` key's reconciler, and the claim holder
as the machine reconcilers see it.

Each API's objects are claimed by a holder ConfigMap in their own namespace (an owner reference
must name an object in its dependent's namespace): the Machine API's in openshift-machine-api, the
Cluster API's in openshift-cluster-api. `commands/release_claims.py` (`release-claims`) uses the same listings
and release as the daemon.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import structlog

from ..constants import (
    CAPI_GROUP,
    CAPI_KINDS,
    CAPI_NAMESPACE,
    CLAIM_FINALIZER,
    CPMS_NAME,
    CPMS_PLURAL,
    CPMS_VERSION,
    HOT_LOOP_KEY_PREFIX,
    MACHINE_API_GROUP,
    MACHINESET_PLURAL,
    MACHINESET_VERSION,
    MAPI_NAMESPACE,
)
from ..core.claims import LedgerEntry, hot_loop_key
from ..core.cluster import ClusterRead
from ..kube.api_errors import Conflict, NotFound
from ..kube.retry import api_call
from ..kube.workqueue import DONE, ReconcileResult
from .keys import is_claimed, uid_of
from .ledger import HotLoopLedger
from .store import InformerStore
from .writer import Holder, MachineSetWriter

log = structlog.get_logger(__name__)

Listing = Callable[[], Awaitable[list[dict[str, Any]]]]


class ClaimGate:
    """Claim writes (shared) against the release of every claim (exclusive), within one process.

    A release lists the MachineSets, removes our references, then drops the holder's finalizer. A
    claim written between that list and the finalizer removal would point at a holder about to
    disappear, and the garbage collector would delete that MachineSet. So claim writes wait while
    a release runs, and a release waits for the claim writes in flight.
    """

    def __init__(self) -> None:
        self._cond = asyncio.Condition()
        self._writers = 0
        self._releasing = False

    def _no_release(self) -> bool:
        return not self._releasing

    def _no_claim_write(self) -> bool:
        return self._writers == 0

    @contextlib.asynccontextmanager
    async def claiming(self) -> AsyncIterator[None]:
        async with self._cond:
            await self._cond.wait_for(self._no_release)
            self._writers += 1
        try:
            yield
        finally:
            async with self._cond:
                self._writers -= 1
                self._cond.notify_all()

    @contextlib.asynccontextmanager
    async def releasing(self) -> AsyncIterator[None]:
        async with self._cond:
            await self._cond.wait_for(self._no_release)
            self._releasing = True
            await self._cond.wait_for(self._no_claim_write)
        try:
            yield
        finally:
            async with self._cond:
                self._releasing = False
                self._cond.notify_all()


@dataclass(frozen=True)
class ClaimScope:
    """One API's machine objects and the holder that claims them."""

    writer: MachineSetWriter
    holder_role: str  # the holder's informer
    listing: Listing  # a live list of the objects it may claim
    reads: tuple[ClusterRead, ...]  # their informers
    ledger: HotLoopLedger  # the hot-loop counts its holder keeps


class Holders:
    """The claim holders as the watch caches have them, and the hot-loop counts they keep."""

    def __init__(self, store: InformerStore, gate: ClaimGate) -> None:
        self.store = store
        self.gate = gate

    def kept_hot_loop(self, uid: str, scope: ClaimScope) -> LedgerEntry | None:
        """The holder's count for this object: what this process wrote last (the watch cache lags
        our own writes), else what the cache has."""
        known, entry = scope.ledger.written(hot_loop_key(uid))
        if known:
            return entry
        data = (self.store.one(scope.holder_role) or {}).get("data") or {}
        return LedgerEntry.from_data(data.get(hot_loop_key(uid)))

    def cached(self, scope: ClaimScope) -> Holder | None:
        """The holder as the watch cache has it, when usable as is: finalizer on, not being deleted.

        This saves a read per patch and is safe: the finalizer only goes in a release, which runs
        under the claims gate on a live list, so a claim written on a stale view of the holder is
        released with the rest (and when `release-claims` removed it by hand, the `@claims` key
        puts it back for claims written meanwhile). Anything else takes the live path.
        """
        meta = (self.store.one(scope.holder_role) or {}).get("metadata") or {}
        if not meta.get("uid") or meta.get("deletionTimestamp") or CLAIM_FINALIZER not in (meta.get("finalizers") or []):
            return None
        return Holder(str(meta["uid"]), deleting=False)

    async def current(self, scope: ClaimScope) -> Holder:
        return self.cached(scope) or await scope.writer.ensure_holder()

    @contextlib.asynccontextmanager
    async def claiming(self, scope: ClaimScope) -> AsyncIterator[Holder]:
        """Under the claims gate (no release runs meanwhile), the holder a claim written now names.
        A holder being deleted is yielded too: its caller writes no claim to it."""
        async with self.gate.claiming():
            yield await self.current(scope)

    async def forget_hot_loops(self, uids: list[str], scope: ClaimScope) -> None:
        """Drop the holder's counts for these objects (opted out, or gone), if it has any."""
        stale = [uid for uid in uids if self.kept_hot_loop(uid, scope) is not None]
        if stale:
            await scope.ledger.keep(dict.fromkeys((hot_loop_key(uid) for uid in stale), None))


class ClaimsReconciler:
    """The `@claims` key: for each claim holder being deleted, release every claim, then drop its
    finalizer. Otherwise make sure the finalizer is there while any claim exists (someone may have
    removed it by hand), and drop the hot-loop counts of objects that are gone."""

    def __init__(self, holders: Holders, scopes: tuple[ClaimScope, ...], may_write: Callable[[], bool]) -> None:
        self.holders = holders
        self.scopes = scopes
        self.may_write = may_write

    async def reconcile(self, _key: str) -> ReconcileResult[None]:
        if not self.may_write():
            return DONE
        for scope in self.scopes:
            result = await self._reconcile_holder(scope)
            if result.error is not None:
                return result
        return DONE

    async def _reconcile_holder(self, scope: ClaimScope) -> ReconcileResult[None]:
        holder = self.holders.store.one(scope.holder_role)
        if holder is None:
            return DONE
        meta = holder.get("metadata") or {}
        if meta.get("deletionTimestamp"):
            async with self.holders.gate.releasing():
                if not await release_all_claims(scope.writer, scope.listing):
                    return ReconcileResult.transient("ClaimsRemain", "claims remain while the holder is being deleted; retrying")
            log.info("every claim released; the claim holder can go", holder=scope.holder_role)
            return DONE
        if CLAIM_FINALIZER not in (meta.get("finalizers") or []) and any(is_claimed(o) for o in await scope.listing()):
            await scope.writer.ensure_holder()  # restores the finalizer
        known = {uid_of(o) for read in scope.reads for o in self.holders.store.list(read.role)}
        kept = [k.removeprefix(HOT_LOOP_KEY_PREFIX) for k in (holder.get("data") or {}) if k.startswith(HOT_LOOP_KEY_PREFIX)]
        await self.holders.forget_hot_loops([uid for uid in kept if uid not in known], scope)
        return DONE


async def release_all_claims(writer: MachineSetWriter, list_machines: Listing, attempts: int = 5) -> bool:
    """Remove our owner reference from every MachineSet, then (only when a fresh list shows none
    left) the holder's finalizer. False when claims kept changing under us: call again."""
    for _ in range(attempts):
        claimed = [m for m in await list_machines() if is_claimed(m)]
        if not claimed:
            try:
                await writer.remove_holder_finalizer()
            except Conflict:
                continue  # the holder changed meanwhile: list again
            return True
        for obj in claimed:
            try:
                await writer.release(obj)
                result = "applied"
            except Conflict:
                result = "conflict"  # retried on the next fresh list
            except NotFound:
                result = "gone"
            log.info("claim released", name=(obj.get("metadata") or {}).get("name"), result=result)
    return False


async def fresh_machines(custom: Any) -> list[dict[str, Any]]:
    """Live lists (not a cache) of MachineSets and ControlPlaneMachineSets, for claim decisions: a
    stale cache must not let the garbage collector see a reference whose owner is gone."""
    ms = await api_call(functools.partial(custom.list_namespaced_custom_object, MACHINE_API_GROUP, MACHINESET_VERSION,
                                          MAPI_NAMESPACE, MACHINESET_PLURAL), what="list MachineSets")
    try:
        # By name: the only ControlPlaneMachineSet is `cluster`, and RBAC grants list by that name only.
        cp = await api_call(functools.partial(custom.list_namespaced_custom_object, MACHINE_API_GROUP, CPMS_VERSION,
                                              MAPI_NAMESPACE, CPMS_PLURAL, field_selector=f"metadata.name={CPMS_NAME}"),
                            what="list ControlPlaneMachineSets")
    except NotFound:  # no ControlPlaneMachineSet CRD on this cluster
        cp = {}
    return list(ms.get("items", [])) + list(cp.get("items", []))


async def fresh_capi(custom: Any, version: str) -> list[dict[str, Any]]:
    """Live lists of the Cluster API's MachineSets and MachineDeployments (none without the CRDs)."""
    out: list[dict[str, Any]] = []
    for plural in CAPI_KINDS.values():
        try:
            found = await api_call(
                functools.partial(custom.list_namespaced_custom_object, CAPI_GROUP, version, CAPI_NAMESPACE, plural),
                what=f"list {plural}.{CAPI_GROUP}")
        except NotFound:
            continue
        out.extend(found.get("items", []))
    return out


__all__ = ["ClaimGate", "ClaimScope", "ClaimsReconciler", "Holders", "fresh_capi", "fresh_machines",
           "release_all_claims"]
