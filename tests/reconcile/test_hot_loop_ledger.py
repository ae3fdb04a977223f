"""The hot-loop ledger's group commit (reconcile/ledger.py): every entry is in the holder before its
writer goes on, many workers share one holder write, and a failed write stops every patch it
carried."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping

import pytest

from bootimage_controller.core.claims import HotLoopRecord, LedgerEntry, target_digest
from bootimage_controller.reconcile.ledger import HotLoopLedger, LedgerWriteFailed


class SlowHolder:
    """A claim holder whose writes take a while (as a large ConfigMap's do), recording each."""

    def __init__(self, fail: BaseException | None = None) -> None:
        self.writes: list[dict[str, str | None]] = []
        self.data: dict[str, str] = {}
        self.fail = fail

    async def commit(self, entries: Mapping[str, str | None]) -> None:
        await asyncio.sleep(0.01)
        if self.fail is not None:
            raise self.fail
        self.writes.append(dict(entries))
        for key, value in entries.items():
            if value is None:
                self.data.pop(key, None)
            else:
                self.data[key] = value


async def test_concurrent_workers_share_holder_writes_and_each_returns_only_once_kept() -> None:
    holder = SlowHolder()
    ledger = HotLoopLedger(holder.commit)

    async def worker(i: int) -> None:
        key = f"hot-loop.uid-{i}"
        await ledger.keep({key: f"1:{target_digest(str(i))}"})
        assert key in holder.data  # kept before the caller may send its patch

    await asyncio.gather(*(worker(i) for i in range(64)))
    assert len(holder.data) == 64
    assert len(holder.writes) < 10, f"{len(holder.writes)} holder writes for 64 counts: not grouped"
    assert ledger.commits == len(holder.writes)
    known, entry = ledger.written("hot-loop.uid-3")
    assert known and entry == LedgerEntry(target_digest("3"), 1)


async def test_a_failed_holder_write_fails_every_waiter_it_carried_with_its_own_error() -> None:
    """Each caller sees the holder write's error as if it were its own write's (an `ApiError`,
    `NotLeader` from the write fence), so callers keep one vocabulary of write failures."""
    refused = RuntimeError("holder too large")
    holder = SlowHolder(fail=refused)
    ledger = HotLoopLedger(holder.commit)
    results = await asyncio.gather(*(ledger.keep({f"hot-loop.{i}": "1:" + "0" * 16}) for i in range(5)),
                                   return_exceptions=True)
    assert all(r is refused for r in results), results
    assert ledger.written("hot-loop.0") == (False, None)
    holder.fail = None
    await ledger.keep({"hot-loop.0": "1:" + "0" * 16})  # the ledger works again afterwards
    assert holder.data == {"hot-loop.0": "1:" + "0" * 16}


async def test_a_cancelled_writer_leaves_the_others_failed_not_cancelled() -> None:
    holder = SlowHolder()
    ledger = HotLoopLedger(holder.commit)
    in_flight = asyncio.create_task(ledger.keep({"hot-loop.a": "1:" + "a" * 16}))
    await asyncio.sleep(0)  # `a` is being written; `b` and `c` arrive meanwhile: one group
    writer = asyncio.create_task(ledger.keep({"hot-loop.b": "1:" + "b" * 16}))
    waiter = asyncio.create_task(ledger.keep({"hot-loop.c": "1:" + "c" * 16}))
    await in_flight
    await asyncio.sleep(0.001)  # `b` writes the group {b, c}
    writer.cancel()
    with pytest.raises(asyncio.CancelledError):
        await writer
    with pytest.raises(LedgerWriteFailed):
        await waiter
    assert holder.writes == [{"hot-loop.a": "1:" + "a" * 16}]


def test_the_holder_entry_is_compact_and_reads_the_older_json_form() -> None:
    record = HotLoopRecord('{"id":"ami-0123456789abcdef0"}', 2)
    entry = record.ledger_entry()
    assert LedgerEntry.from_data(entry.to_data()) == entry
    assert len(entry.to_data()) == 18
    assert LedgerEntry.from_data(record.to_annotation()) == entry  # what releases before kept
    for junk in ("", "x", "2:", "2:xyz", "-1:" + "0" * 16, "9999999:" + "0" * 16, "{", '{"count": 1}'):
        assert LedgerEntry.from_data(junk) is None, junk
