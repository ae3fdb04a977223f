"""The hot-loop count of a boot image write, kept in the claim holder before the write is sent
(SPEC section 3: three writes of one target to one MachineSet, whatever reverts them), together
with the counts of the writes the pass is about to make.

Counting ahead is what makes a fleet-wide pass cost one holder write rather than one per
MachineSet (reconcile/ledger.py groups what arrives meanwhile). The machine reconciler calls
`HotLoopCounts.keep` once per write, under the claims gate, and sends its patch only when it
returns None.
"""

from __future__ import annotations

from ..constants import Action, Manager
from ..core.capi.resources import capi_kind_key
from ..core.claims import LedgerEntry, hot_loop_check, hot_loop_key, target_digest, target_fingerprint
from ..core.lookups import plan_object
from ..kube.api_errors import ApiError
from .claim_reconciler import ClaimScope, Holders
from .keys import split_key, uid_of
from .ledger import LedgerWriteFailed
from .state import PlannedAhead, WriteMemory
from .store import ClusterView, InformerStore


class HotLoopCounts:
    """`memory` is the machine reconciler's: the counts in flight, the counts kept for writes not
    yet sent, and the offline plans made ahead all live there."""

    def __init__(self, store: InformerStore, cluster: ClusterView, holders: Holders,
                 memory: WriteMemory) -> None:
        self.store = store
        self.cluster = cluster
        self.holders = holders
        self.memory = memory

    async def keep(self, key: str, uid: str, entry: LedgerEntry,
                   scope: ClaimScope) -> ApiError | LedgerWriteFailed | None:
        """Keep the count of `key`'s write in the claim holder, with the counts of every other write
        the pass is about to make. A count another worker's holder write already carries (in
        flight) waits for that write, without planning the fleet again or writing it a second time:
        the pass's first workers all arrive here before the first holder write is answered. The
        holder write's failure is returned: nothing is known to be kept, so the patch must not go."""
        memory = self.memory
        ahead = {} if memory.counting.get(uid) == entry else self._ahead(key, uid, scope)
        memory.counting.update(ahead)
        try:
            await scope.ledger.keep({hot_loop_key(u): e.to_data() for u, e in [(uid, entry), *ahead.items()]})
        except (ApiError, LedgerWriteFailed) as exc:
            return exc
        finally:
            for other in ahead:
                memory.counting.pop(other, None)
        # Counted, not yet written: their own reconcile finds the count there and reuses it.
        memory.unsent.update(ahead)
        return None

    def _ahead(self, key: str, uid: str, scope: ClaimScope) -> dict[str, LedgerEntry]:
        """uid -> the count of the next write of every other object of this kind that the offline
        plan says to patch now, as its own reconcile will compute it.

        Counting them ahead costs one offline plan of each (50 us) and makes the pass's other
        writes find their count already kept. Only first writes of a target are counted ahead: an
        object with a count for its target already has a write of it made or in flight (or the
        cache shows it before our write landed), and its own reconcile counts its next write. A
        count kept for a write that then does not happen (the cloud or an admin changed the
        decision) is reused by the next write of that target in this process; after a restart it
        over-counts by one, never under-counts.
        """
        ctx = self.cluster.inputs().context
        if ctx is None:
            return {}
        memory, holders = self.memory, self.holders
        ahead: dict[str, LedgerEntry] = {}
        for other in self.store.list(split_key(key)[0]):
            other_uid = uid_of(other)
            if other_uid == uid or not other_uid or other_uid in memory.counting:
                continue
            decision = plan_object(other, self.store, ctx, ctx.facts)
            if decision.action is not Action.PATCH or decision.manager is not Manager.OURS:
                continue
            if capi_kind_key(other) is None:  # a Cluster API object's plan also reads the store
                memory.planned[other_uid] = PlannedAhead(other, ctx, ctx.facts, decision)
            kept = holders.kept_hot_loop(other_uid, scope)
            if kept is not None and kept.digest == target_digest(target_fingerprint(decision)):
                continue
            # The planner parsed the object to say PATCH, its annotations included: read them as
            # they are rather than parse it all again (25 us each, before the pass's first patch).
            annotations = (other.get("metadata") or {}).get("annotations") or {}
            hot = hot_loop_check(annotations, decision, memory.hot_loops.get(other_uid), kept,
                                 memory.unsent.get(other_uid))
            if hot is not None and hot.count == 1:
                ahead[other_uid] = hot.ledger_entry()
        return ahead
