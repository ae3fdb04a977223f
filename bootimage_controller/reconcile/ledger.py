"""The hot-loop ledger: every boot image write counted in the claim holder before it is sent.

SPEC section 3 allows three writes of one target to one MachineSet, whatever reverts them and
whenever the daemon restarts. The count must therefore be somewhere a writer of the MachineSet
cannot erase (a whole-object PUT takes our annotations with it), and it must be there before the
patch goes, the first write included. The claim holder's `data` is that place.

One write to the holder per MachineSet patch would serialise a fleet-wide pass on one ConfigMap
(measured: 5,000 MachineSets went from 23 s to about 25 times that). So the ledger commits in
groups: every worker that needs a count hands its entry in and waits; one of them writes all the
entries handed in so far in a single merge patch of those keys, and wakes everyone the write
covered. A pass with N workers costs about one holder write per N patches. Entries are compact
(a digest of the target, not the target) so that a scope of 5,000 MachineSets stays far below a
ConfigMap's 1 MiB.

The ledger also remembers what it wrote in this process, because the watch cache of the holder
lags our own writes.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping

from ..core.claims import LedgerEntry

Commit = Callable[[Mapping[str, str | None]], Awaitable[None]]


class LedgerWriteFailed(Exception):
    """The holder write that carried an entry was cancelled (its writer is shutting down): nothing
    is known to be kept, so its patch must not be sent."""


class HotLoopLedger:
    """Group commit of hot-loop counts to one claim holder. The caller names entries by data key
    (`hot-loop.<uid>`); None removes one."""

    def __init__(self, commit: Commit) -> None:
        self._commit = commit
        self._lock = asyncio.Lock()  # one holder write at a time
        self._pending: dict[str, str | None] = {}
        self._next: asyncio.Future[None] | None = None
        # The group being written (empty when none is) and the future its waiters share: an entry
        # it already carries waits for it rather than being written again in the next group.
        self._flying: dict[str, str | None] = {}
        self._flying_done: asyncio.Future[None] | None = None
        # key -> the value written (None: removed); parsed when asked, as most are never asked again
        self._written: dict[str, str | None] = {}
        self.commits = 0  # holder writes sent, for the logs and the tests of the batching

    def written(self, key: str) -> tuple[bool, LedgerEntry | None]:
        """(known, record): what this process last wrote under `key`, when it wrote anything."""
        if key in self._written:
            return True, LedgerEntry.from_data(self._written[key])
        return False, None

    async def keep(self, entries: Mapping[str, str | None]) -> None:
        """Return once `entries` are in the holder. When the holder write that carried them fails,
        every caller it carried gets that write's own error (an `ApiError`, `NotLeader` from the
        write fence, a broken connection), as from a write of its own; `LedgerWriteFailed` when
        it was cancelled. Either way nothing is known to be kept: do not send the patch."""
        rest = {k: v for k, v in entries.items() if k not in self._flying or self._flying[k] != v}
        carried = self._flying_done if len(rest) < len(entries) else None
        if rest:
            await self._keep_in_next_group(rest)
        if carried is not None:
            # The pass's first workers all arrive while the holder write counting them ahead is in
            # flight: each of their patches goes as soon as that write is answered, not one
            # holder write later (issue 36).
            await asyncio.shield(carried)

    async def _keep_in_next_group(self, entries: Mapping[str, str | None]) -> None:
        self._pending.update(entries)
        if self._next is None:
            self._next = asyncio.get_running_loop().create_future()
        batch_done = self._next
        async with self._lock:
            if not batch_done.done():
                # Nobody has written our group yet: write it, with everything handed in meanwhile.
                await self._write_group(batch_done)
        await asyncio.shield(batch_done)

    async def _write_group(self, done: asyncio.Future[None]) -> None:
        group, self._pending, self._next = self._pending, {}, None
        self._flying, self._flying_done = group, done
        self.commits += 1
        try:
            await self._commit(group)
        except Exception as exc:
            # Every waiter of the group learns it, the writer included, and none sends its patch.
            done.set_exception(exc)
            done.exception()  # retrieved: a group whose waiters were all cancelled is no error
            return
        except BaseException:
            done.set_exception(LedgerWriteFailed("the claim holder write carrying this count was cancelled"))
            done.exception()
            raise  # cancelled (shutdown): the writer's own task ends as asked
        finally:
            self._flying, self._flying_done = {}, None
        self._written.update(group)
        done.set_result(None)
