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


async def test_an_entry_the_write_in_flight_carries_waits_for_it_and_is_not_written_again() -> None:
    """The pass's first worker keeps every other worker's count ahead with its own: the others,
    arriving while that write is in flight, return when it is answered (one holder write, not
    two), and only an entry it does not carry, or carries with another value, is written after."""
    holder = SlowHolder()
    ledger = HotLoopLedger(holder.commit)
    ahead = {f"hot-loop.{c}": "1:" + c * 16 for c in "abc"}
    first = asyncio.create_task(ledger.keep(ahead))
    await asyncio.sleep(0)  # the group {a, b, c} is in flight
    b = asyncio.create_task(ledger.keep({"hot-loop.b": ahead["hot-loop.b"]}))
    c = asyncio.create_task(ledger.keep({"hot-loop.c": ahead["hot-loop.c"]}))
    await asyncio.wait({b, c}, timeout=0.005)  # not before the holder has them
    assert not b.done() and not c.done() and not holder.writes
    await asyncio.gather(first, b, c)
    assert holder.writes == [ahead]
    recount = {"hot-loop.a": "2:" + "a" * 16}  # another value: a write of its own
    second = asyncio.create_task(ledger.keep({"hot-loop.d": "1:" + "d" * 16}))
    await asyncio.sleep(0)  # {d} in flight
    await asyncio.gather(second, ledger.keep({**recount, "hot-loop.d": "1:" + "d" * 16}))
    assert holder.writes[1:] == [{"hot-loop.d": "1:" + "d" * 16}, recount]


async def test_a_failed_holder_write_fails_every_waiter_it_carried_with_its_own_error() -> None:
    """Each caller sees the holder write's error as if it were its own write's (an `ApiError`,
    `NotLeader` from the write fence), so callers keep one vocabulary of write failures."""
    refused = RuntimeError("holder too large")
    holder = SlowHolder(fail=refused)
    ledger = HotLoopLedger(holder.commit)
    results = await asyncio.gather(*(ledger.keep({f"hot-loop.{i}": "1:" + "0" * 16}) for i in range(5)),
                                   return_exceptions=True)
    assert all(r is refused for r in results), results
    first = asyncio.create_task(ledger.keep({"hot-loop.0": "1:" + "0" * 16, "hot-loop.1": "1:" + "1" * 16}))
    await asyncio.sleep(0)  # in flight: a waiter it carries fails with it
    carried = await asyncio.gather(first, ledger.keep({"hot-loop.1": "1:" + "1" * 16}), return_exceptions=True)
    assert carried == [refused, refused]
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
