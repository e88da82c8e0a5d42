"""The recovery's loop (`streams.recovery.PersistentRecovery`), which takes the queued changelog
records at once: every record is laid in and the recovery ends, whatever failed on the way.

Driven with a table that keeps what it is given (the loop's own logic; the tests on Kafka
recover whole workers: `test_restart.py`, `test_failover.py`)."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

import pytest
from faust.types import TP
from mode.utils.queues import FlowControlEvent, ThrowableQueue

from streams import recovery
from streams.recovery import PersistentRecovery

CHANGELOG = TP("rumourmill-state-changelog", 0)
BUFFER = 3
"""Records a table lays in together: a take of the queue spans several buffers."""


class KeptTable:
    """A table keeping the offsets of the records laid into it; its first `failing` lay-ins
    raise (a write that fails once, as a full disk freed meanwhile would)."""

    recovery_buffer_size = BUFFER
    standby_buffer_size = BUFFER

    def __init__(self, failing: int = 0) -> None:
        self.laid: list[int] = []
        self.failing = failing

    async def on_changelog_event(self, event: Any) -> None:
        """Faust's hook for each record (no table of ours sets one)."""

    def apply_changelog_batch(self, batch: list[Any]) -> None:
        if self.failing:
            self.failing -= 1
            raise OSError("the write failed")
        self.laid.extend(event.message.offset for event in batch)


def record(offset: int) -> SimpleNamespace:
    return SimpleNamespace(message=SimpleNamespace(tp=CHANGELOG, offset=offset))


async def recovered(
    table: KeptTable, queued: range, standby: bool = False, more: range = range(0)
) -> tuple[PersistentRecovery, list[str]]:
    """The recovery after laying in `queued` (then `more`, queued once the first are taken),
    up to the last of all as the partition's highwater: active, or a `standby` copy; and what
    the recovery told: its end signalled (`ended`), the tables told `standbys ready`."""
    flow = FlowControlEvent()
    flow.resume()
    queue: ThrowableQueue[Any] = ThrowableQueue(flow_control=flow)
    told: list[str] = []
    tables = SimpleNamespace(changelog_queue=queue, standbys_ready=False)

    def on_standbys_ready() -> None:  # as Faust's table manager: told once
        tables.standbys_ready = True
        told.append("standbys ready")

    tables.on_standbys_ready = on_standbys_ready
    app = SimpleNamespace(conf=SimpleNamespace(stream_recovery_delay=0), in_recovery=True)
    loop = PersistentRecovery(app, tables)  # type: ignore[arg-type]
    last = max([*queued, *more])
    loop.tp_to_table[CHANGELOG] = table  # type: ignore[assignment]
    if standby:
        loop.standby_tps.add(CHANGELOG)
        loop.standby_offsets[CHANGELOG] = -1
        loop.standby_highwaters[CHANGELOG] = last
    else:
        loop.active_tps.add(CHANGELOG)
        loop.active_offsets[CHANGELOG] = -1
        loop.active_highwaters[CHANGELOG] = last
        loop._set_recovery_started()
    for offset in queued:
        queue.put_nowait(record(offset))
    ended = asyncio.ensure_future(loop.signal_recovery_end.wait())
    ended.add_done_callback(lambda waited: waited.cancelled() or told.append("ended"))
    running = asyncio.ensure_future(PersistentRecovery._slurp_changelogs.fun(loop))  # type: ignore[attr-defined]
    try:
        for offset in more:
            await asyncio.sleep(0.05)
            queue.put_nowait(record(offset))
        deadline = asyncio.get_running_loop().time() + 5
        while asyncio.get_running_loop().time() < deadline:
            if (standby and told) or (not standby and not loop.in_recovery):
                break
            await asyncio.sleep(0.01)
    finally:
        running.cancel()
        ended.cancel()
    return loop, told


@pytest.fixture(autouse=True)
def short_idle_wait(monkeypatch: pytest.MonkeyPatch) -> None:
    """The loop looks whether the recovery is over after a second without records, not five."""
    monkeypatch.setattr(recovery, "IDLE_WAIT_SECONDS", 1.0)


def test_a_recovery_lays_in_every_record_and_ends_at_the_highwater() -> None:
    table = KeptTable()
    loop, told = asyncio.run(recovered(table, range(recovery.READ_AT_ONCE * 2 + 7)))
    assert not loop.in_recovery and sorted(told) == ["ended", "standbys ready"]  # (none)
    assert table.laid == list(range(recovery.READ_AT_ONCE * 2 + 7))


def test_a_write_that_fails_once_loses_no_record_of_the_take() -> None:
    table = KeptTable(failing=1)
    loop, _ = asyncio.run(recovered(table, range(10)))
    assert not loop.in_recovery
    assert sorted(table.laid) == list(range(10))


def test_records_after_a_failed_write_leave_no_hole_in_the_state() -> None:
    table = KeptTable(failing=1)
    loop, _ = asyncio.run(recovered(table, range(10), more=range(10, 13)))
    assert not loop.in_recovery
    assert sorted(table.laid) == list(range(13))


def test_a_standby_copy_lays_in_every_record_and_is_told_caught_up() -> None:
    table = KeptTable(failing=1)
    loop, told = asyncio.run(recovered(table, range(10), standby=True))
    assert told == ["standbys ready"]  # (a standby has no end to signal)
    assert sorted(table.laid) == list(range(10))
    assert loop.standby_offsets[CHANGELOG] == 9


def test_the_loop_gives_way_to_other_work_between_takes(monkeypatch: pytest.MonkeyPatch) -> None:
    """A standby copy reads while its worker serves: a queue of records laid in all at once
    held every read and event of the worker behind it."""
    monkeypatch.setattr(recovery, "READ_AT_ONCE", 100)
    turns = 0

    class WatchedTable(KeptTable):
        """Notes, at each lay-in, how often the other work had run."""

        seen: set[int] = set()

        def apply_changelog_batch(self, batch: list[Any]) -> None:
            super().apply_changelog_batch(batch)
            self.seen.add(turns)

    async def other_work() -> None:
        nonlocal turns
        while True:
            turns += 1
            await asyncio.sleep(0)

    async def laid_in_beside_other_work() -> None:
        beside = asyncio.ensure_future(other_work())
        await recovered(WatchedTable(), range(1_000))
        beside.cancel()

    asyncio.run(laid_in_beside_other_work())
    assert len(WatchedTable.seen) >= 10  # 1,000 records, 100 at once at most


def test_a_record_read_again_is_laid_in_once() -> None:
    table = KeptTable()
    asyncio.run(recovered(table, range(6), more=range(4, 8)))  # a fetch gave 4 and 5 again
    assert table.laid == list(range(8))
