"""Which local copies a start keeps, restores or throws away, over real RocksDB files."""

from __future__ import annotations

import asyncio
import logging
import os
import time
from dataclasses import replace
from pathlib import Path

import faust
import pytest
from faust import Event
from faust.types import TP, Message, RecordMetadata
from rocksdict import Checkpoint, Options, Rdict

from streams import app as app_module
from streams import durability, stopping
from streams.app import Rumourmill, StateTable, create_app, partition_db
from streams.changelog import RECORD_HEADER
from streams.durability import (
    Changelog,
    PartitionFiles,
    Stamp,
    TableDirInUse,
    hold_table_dir,
    prepare_partition,
    reason_to_discard,
)
from streams.recovery import COMPLETING
from streams.settings import Settings
from streams.state import Changes, encode_changes
from streams.stopping import GAVE_UP_EXIT_CODE, BoundedStopWorker

NOW_MS = 1_000_000_000
CHANGELOG = Changelog("cluster-a", earliest={0: 0}, end={0: 100}, delete_retention_ms=60_000)


def stamp(offset: int = 50, cluster: str = "cluster-a", age_ms: int = 1_000) -> Stamp:
    return Stamp(cluster, offset, NOW_MS - age_ms)


def test_a_recent_copy_of_the_same_cluster_within_the_changelog_is_kept() -> None:
    assert reason_to_discard(stamp(), CHANGELOG, 0, NOW_MS) is None
    assert reason_to_discard(stamp(offset=99), CHANGELOG, 0, NOW_MS) is None
    assert reason_to_discard(stamp(age_ms=-5_000), CHANGELOG, 0, NOW_MS) is None  # clock slack


@pytest.mark.parametrize(
    ("kept", "why"),
    [
        (None, "no stamp"),
        (stamp(cluster="cluster-b"), "cluster"),
        (stamp(offset=100), "changelog ends at 100"),
        (stamp(age_ms=59_000), "deletes are kept"),
        (Stamp("cluster-a", 50, NOW_MS - 1_000, changelog_format=1), "changelog format 1"),
        (stamp(offset=-1), "no changelog offset"),  # what a release before stamped, wrongly
        (stamp(age_ms=-30 * 86_400_000), "ahead of this machine's clock"),  # the clock went back
    ],
)
def test_a_copy_that_could_be_wrong_is_discarded(kept: Stamp | None, why: str) -> None:
    reason = reason_to_discard(kept, CHANGELOG, 0, NOW_MS)
    assert reason is not None and why in reason


def test_a_stamp_of_a_release_before_changelog_formats_reads_as_format_1(tmp_path: Path) -> None:
    path = tmp_path / "stamp.json"
    path.write_bytes(b'{"cluster_id": "cluster-a", "changelog_offset": 50, "taken_at_ms": 1}')
    assert Stamp.read(path) == Stamp("cluster-a", 50, 1, changelog_format=1)


def test_a_copy_older_than_the_start_of_the_changelog_is_discarded() -> None:
    trimmed = Changelog("cluster-a", {0: 60}, {0: 100}, 60_000)
    assert reason_to_discard(stamp(offset=58), trimmed, 0, NOW_MS) is not None
    assert reason_to_discard(stamp(offset=59), trimmed, 0, NOW_MS) is None


def open_db(path: Path) -> Rdict:
    options = Options(raw_mode=True)
    options.create_if_missing(True)
    return Rdict(str(path), options=options)


def live_copy(tmp_path: Path, checkpointed: bool, partition: int = 0) -> PartitionFiles:
    """A partition database; `checkpointed`: with a checkpoint holding only `before`."""
    files = PartitionFiles(tmp_path / f"state-{partition}.db")
    db = open_db(files.db)
    db.put(b"key", b"before")
    if checkpointed:
        files.checkpoint.parent.mkdir(parents=True)
        Checkpoint(db).create_checkpoint(str(files.checkpoint))
        files.checkpoint_stamp.write_bytes(stamp(offset=40).to_bytes())
    db.put(b"key", b"after, never confirmed")
    db.close()
    files.stamp.write_bytes(stamp().to_bytes())
    return files


def value_in(files: PartitionFiles) -> bytes | None:
    db = open_db(files.db)
    try:
        value: bytes | None = db.get(b"key")
        return value
    finally:
        db.close()


def test_a_clean_copy_is_kept_as_it_is(tmp_path: Path) -> None:
    files = live_copy(tmp_path, checkpointed=True)
    assert "kept" in prepare_partition(files, CHANGELOG, NOW_MS)
    assert value_in(files) == b"after, never confirmed"


def test_a_copy_that_does_not_open_is_thrown_away_not_kept_by_its_stamp(tmp_path: Path) -> None:
    """A table file lost on the disk: kept by its stamp alone, the copy stopped the worker at
    every start (RocksDB's `Corruption`), where the changelog holds all of it."""
    files = live_copy(tmp_path, checkpointed=True)
    for table in files.db.glob("*.sst"):
        table.unlink()
    outcome = prepare_partition(files, CHANGELOG, NOW_MS)
    assert outcome.startswith("local state discarded (it does not open: Corruption")
    assert outcome.endswith("recovery replays the whole changelog")
    assert not files.db.exists()


def test_a_dirty_copy_gives_way_to_its_checkpoint(tmp_path: Path) -> None:
    files = live_copy(tmp_path, checkpointed=True)
    files.dirty.touch()
    assert "after offset 40" in prepare_partition(files, CHANGELOG, NOW_MS)
    assert value_in(files) == b"before"
    assert not files.dirty.exists() and Stamp.read(files.stamp) == stamp(offset=40)


def test_a_dirty_copy_without_a_checkpoint_is_thrown_away(tmp_path: Path) -> None:
    files = live_copy(tmp_path, checkpointed=False)
    files.dirty.touch()
    assert "whole changelog" in prepare_partition(files, CHANGELOG, NOW_MS)
    assert not files.db.exists() and not files.dirty.exists()


def test_a_stale_copy_is_thrown_away(tmp_path: Path) -> None:
    files = live_copy(tmp_path, checkpointed=False)
    assert "discarded" in prepare_partition(files, CHANGELOG, NOW_MS + 120_000)
    assert not files.db.exists()


def test_a_checkpoint_swap_cut_short_by_a_crash_is_finished(tmp_path: Path) -> None:
    files = live_copy(tmp_path, checkpointed=True)
    files.checkpoint.rename(files.with_suffix(files.checkpoint, ".old"))
    files.with_suffix(files.checkpoint, ".tmp").mkdir()  # a half-written new checkpoint
    files.dirty.touch()
    assert "checkpoint restored" in prepare_partition(files, CHANGELOG, NOW_MS)
    assert value_in(files) == b"before"
    assert not files.with_suffix(files.checkpoint, ".tmp").exists()


def test_a_worker_switched_to_another_app_id_never_takes_the_copies_of_the_one_before(
    tmp_path: Path,
) -> None:
    """The switch to a rebuild (README, "Rebuilding") restarts workers on their data dirs with a
    fresh app id. A copy the old app id left there, stamped by the same cluster at an offset the
    fresh changelog also reaches, passes every check of its stamp: taken for the fresh app id's,
    recovery replayed the fresh changelog's tail over the old state, a mix of both. Each app id
    keeps its copies apart; the old one's stay, for a switch back."""
    before, after = (
        create_app(Settings(data_dir=tmp_path, app_id=app_id)).durability
        for app_id in ("town", "town-rebuilt")
    )
    assert before is not None and after is not None
    old = live_copy(before.files(0).db.parent, checkpointed=True)
    assert old == before.files(0)
    assert reason_to_discard(Stamp.read(old.stamp), CHANGELOG, 0, NOW_MS) is None
    fresh = after.files(0)
    assert fresh.db == after.store.partition_path(0)  # where Faust opens it
    assert not fresh.db.exists() and not fresh.checkpoint.exists() and not fresh.stamp.exists()
    assert "kept" in prepare_partition(old, CHANGELOG, NOW_MS)  # a switch back keeps them


def test_a_partition_given_only_events_it_held_already_is_stamped_at_what_recovery_laid_in(
    tmp_path: Path,
) -> None:
    """Events given again after a kill (their offsets not committed, their state in the
    changelog) write nothing, so no changelog offset is confirmed. The checkpoint and the clean
    stop that followed stamped the copy as holding offset -1 (and put -1 in the database as
    Faust's recovery offset): the next start replayed the whole changelog."""

    async def given_again() -> tuple[int | None, Stamp | None, Stamp | None]:
        mill = create_app(Settings(data_dir=tmp_path, app_id="town"))
        kept = mill.durability
        kept.cluster_id = "cluster-a"
        changelog = TP(mill.state.changelog_topic.get_topic_name(), 0)
        partition_db(mill.state, 0).put(b"key", b"recovered")
        kept.store.set_persisted_offset(changelog, 41)  # recovery laid in up to 41
        kept.recovered = {0}
        async with kept.writing({0: 3}):  # three events recognised: nothing written, sent
            kept.sent(0, [])
        await kept.take_checkpoint(0, kept.partitions[0])
        checkpointed = Stamp.read(kept.files(0).checkpoint_stamp)
        await kept.finish()
        return kept.store.persisted_offset(changelog), checkpointed, Stamp.read(kept.files(0).stamp)

    recovery_offset, checkpointed, stopped = asyncio.run(given_again())
    assert recovery_offset == 41
    assert checkpointed is not None and checkpointed.changelog_offset == 41
    assert stopped is not None and stopped.changelog_offset == 41


def test_a_second_worker_of_the_app_id_on_the_same_data_dir_is_refused_and_touches_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two workers given one RUMOURMILL_DATA_DIR (a restart begun before the worker it replaces
    had stopped, two containers on one volume): the second took the first's dirty markers for a
    crash's and threw its live databases away, restoring checkpoints under it."""
    monkeypatch.setattr(durability, "LOCK_WAIT_SECONDS", 0.3)
    settings = Settings(data_dir=tmp_path, app_id="town")
    first, second = (create_app(settings).durability for _ in range(2))
    tabledir = first.files(0).db.parent
    first.lock = asyncio.run(hold_table_dir(tabledir, 0))
    files = live_copy(tabledir, checkpointed=True)
    files.dirty.touch()  # the first worker is writing to it
    with pytest.raises(TableDirInUse, match="RUMOURMILL_DATA_DIR"):
        asyncio.run(second.prepare([0]))
    assert files.dirty.exists() and value_in(files) == b"after, never confirmed"


def test_a_start_waits_for_the_worker_before_it_to_stop(tmp_path: Path) -> None:
    """The lock goes with the process holding it, however it ends (a stop, a kill): a start
    that found it held goes on once it is free."""

    async def start_after_a_stop() -> None:
        held = await hold_table_dir(tmp_path, 0)
        with pytest.raises(TableDirInUse):
            await hold_table_dir(tmp_path, 0.3)
        asyncio.get_running_loop().call_later(0.3, os.close, held)  # the worker before stops
        os.close(await hold_table_dir(tmp_path, 5))

    asyncio.run(start_after_a_stop())


DAY_MS = 86_400_000


def test_a_copy_a_stop_caught_behind_the_changelog_keeps_the_time_it_last_followed_it(
    tmp_path: Path,
) -> None:
    """A clean stop stamped every open copy as of the stop, one whose recovery it cut short too
    (or a standby behind): a copy kept six days, stopped a minute into replaying those days,
    read as a minute old at the next start, and was kept past the week deletes are kept, with
    deletes compaction dropped meanwhile missing from it."""

    async def stopped_mid_recovery() -> Stamp | None:
        mill = create_app(Settings(data_dir=tmp_path, app_id="town"))
        kept = mill.durability
        kept.cluster_id = "cluster-a"
        kept.followed_at[0] = NOW_MS - 6 * DAY_MS  # as `prepare` found its stamp
        changelog = TP(mill.state.changelog_topic.get_topic_name(), 0)
        partition_db(mill.state, 0).put(b"key", b"recovered so far")
        kept.store.set_persisted_offset(changelog, 41)  # the changelog goes on past 41
        await kept.finish()
        return Stamp.read(kept.files(0).stamp)

    stopped = asyncio.run(stopped_mid_recovery())
    assert stopped == Stamp("cluster-a", 41, NOW_MS - 6 * DAY_MS)


def test_a_copy_given_back_after_deletes_could_be_dropped_is_thrown_away_before_it_opens(
    tmp_path: Path,
) -> None:
    """The copy of a partition a rebalance took from the worker stays on disk, and so does one
    kept at start for a partition first given to the worker later: Faust opened either as it
    was, whenever the partition came (back), and recovery resumed it past deletes compaction
    had dropped (`test_compaction`). Given back within the time a start would keep it, it is
    used; later, it is thrown away and recovery replays the whole changelog."""
    mill = create_app(Settings(data_dir=tmp_path, app_id="town"))
    kept = mill.durability
    retention_ms = kept.delete_retention_ms
    for partition, left_ms_ago in ((0, retention_ms // 2), (1, retention_ms)):
        files = live_copy(kept.files(partition).db.parent, checkpointed=False, partition=partition)
        files.dirty.touch()
        kept.followed_at[partition] = int(time.time() * 1000) - left_ms_ago
    kept.rebalanced([], [0, 1], set(), set())
    assert value_in(kept.files(0)) == b"after, never confirmed" and kept.files(0).dirty.exists()
    assert not kept.files(1).db.exists() and not kept.files(1).dirty.exists()


def changelog_message(app: faust.App, tp: TP, offset: int, key: bytes, value: bytes) -> Event:
    """A changelog message as recovery reads it: a record (with its header), or, for a
    `changeset`, one of a release before records, `value` the changes it packs."""
    message = Message(tp.topic, tp.partition, offset, 0.0, 0, [RECORD_HEADER], key, value, None)
    return Event(app, key, value, {}, message)


def changeset_message(app: faust.App, tp: TP, offset: int, changes: Changes) -> Event:
    """A changeset of a release before per-key records: no header, the changes packed."""
    value = encode_changes(changes)
    message = Message(tp.topic, tp.partition, offset, 0.0, 0, [], b"event", value, None)
    return Event(app, b"event", value, {}, message)


def confirmed(offset: int) -> asyncio.Future[RecordMetadata]:
    """A changelog send the broker stored at `offset`."""
    sent: asyncio.Future[RecordMetadata] = asyncio.get_running_loop().create_future()
    sent.set_result(RecordMetadata(TP("changelog", 0), "changelog", 0, offset, 0.0))
    return sent


def crash(kept: durability.LocalDurability) -> None:
    """SIGKILL: the databases' handles go with the process, nothing else is done."""
    for db in kept.store._dbs.values():
        db.close()


def worker(
    tmp_path: Path, partitions: int = 1
) -> tuple[Rumourmill, durability.LocalDurability, str]:
    """A worker's app (nothing started) whose local state knows its Kafka cluster, and the
    state changelog's topic."""
    mill = create_app(Settings(data_dir=tmp_path, app_id="town", partitions=partitions))
    mill.durability.cluster_id = "cluster-a"
    return mill, mill.durability, mill.state.changelog_topic.get_topic_name()


async def recovered_and_written(mill: Rumourmill, changelog: TP) -> None:
    """Partition 0 recovered up to changelog offset 99, then an event's write stored at 100
    (the copy checkpointed at 99 before it)."""
    kept = mill.durability
    kept.store.set_persisted_offset(changelog, 99)
    kept.recovered = {0}
    async with kept.writing({0: 1}):
        partition_db(mill.state, 0).put(b"mood", b"angry")
        kept.sent(0, [confirmed(100)])


async def back_here_written_and_killed(
    mill: Rumourmill, changelog: TP
) -> durability.LocalDurability:
    """Partition 0, active here again, recovered up to what another worker wrote meanwhile (up
    to changelog offset 4999); then an event's write stored at 5000, and a SIGKILL."""
    kept = mill.durability
    mill.state.apply_changelog_batch(
        [changelog_message(mill.app, changelog, 4999, b"mood", b"what the other wrote")]
    )
    kept.recovered = {0}
    async with kept.writing({0: 1}):
        partition_db(mill.state, 0).put(b"mood", b"back here")
        kept.sent(0, [confirmed(5000)])
    crash(kept)
    return kept


def restarted(kept: durability.LocalDurability, changelog_end: int, partition: int = 0) -> str:
    """What the next start does with the partition's copy, the changelog ending at
    `changelog_end` and keeping deletes a day."""
    changelog = Changelog("cluster-a", {partition: 0}, {partition: changelog_end}, DAY_MS)
    return prepare_partition(kept.files(partition), changelog, int(time.time() * 1000))


def restored_after(offset: int) -> str:
    """What a start says of a copy it restored from its checkpoint at changelog `offset`."""
    return f"checkpoint restored: recovery replays the changelog after offset {offset}"


def test_a_copy_holding_changesets_not_yet_retired_is_neither_stamped_nor_checkpointed(
    tmp_path: Path,
) -> None:
    """An upgrade from a release before per-key records retires each partition's changesets in
    turn, once recovery read them all. The 30 s stamp of copies not written to, and a clean
    stop, stamped the partitions still waiting their turn as clean copies of this changelog
    format: the next start kept them, replayed only the changelog past them, and never retired
    their changesets (kept in memory alone). Once compaction dropped a delete, a full replay
    (a new worker, a lost disk) brought the deleted keys back from the changeset. A copy kept
    at start by its stamp, whose recovery then read changesets (an older worker wrote them
    since), kept that stamp until a clean stop: a kill before it left it trusted."""

    async def upgrade_cut_short() -> durability.LocalDurability:
        mill, kept, topic = worker(tmp_path, 3)
        kept.files(1).stamp.parent.mkdir(parents=True, exist_ok=True)
        kept.files(1).stamp.write_bytes(stamp(offset=0).to_bytes())  # kept at start
        mill.state.apply_changelog_batch(
            [
                changelog_message(mill.app, TP(topic, 0), 0, b"key", b"a record"),
                changeset_message(mill.app, TP(topic, 1), 0, [(b"key", b"from a changeset")]),
                changeset_message(mill.app, TP(topic, 2), 0, [(b"key", b"from a changeset")]),
            ]
        )
        assert not kept.files(1).stamp.exists()  # a kill now reads them again
        kept.recovered = {0, 1, 2}  # recovery completed: now each partition's turn comes
        await kept.stamp_due()
        async with kept.writing({2: 1}):  # partition 2's changesets being retired
            kept.sent(2, [])
        await kept.take_checkpoint(2, kept.partitions[2])
        await kept.finish()
        crash(kept)
        return kept

    kept = asyncio.run(upgrade_cut_short())
    assert Stamp.read(kept.files(0).stamp) is not None  # no changeset: a clean copy
    assert not kept.files(1).stamp.exists() and not kept.files(1).checkpoint.exists()
    assert not kept.files(2).stamp.exists() and not kept.files(2).checkpoint.exists()
    changelog = Changelog("cluster-a", {0: 0, 1: 0, 2: 0}, {0: 1, 1: 1, 2: 1}, DAY_MS)
    now_ms = int(time.time() * 1000)
    assert "kept" in prepare_partition(kept.files(0), changelog, now_ms)
    for partition in (1, 2):  # their changesets are read again, and retired then
        outcome = prepare_partition(kept.files(partition), changelog, now_ms)
        assert outcome.endswith("recovery replays the whole changelog")


def test_a_partition_faust_replays_into_is_not_taken_for_whole_until_it_caught_up(
    tmp_path: Path,
) -> None:
    """A rebalance that keeps an active partition on the worker as a standby (it stays
    assigned: neither revoked nor newly assigned) left it counted as recovered, while Faust
    replayed its changelog from the last checkpoint over its newer state. A checkpoint (after a
    second idle) or a clean stop in the meantime stamped the half-replayed copy as holding every
    write the worker had confirmed, and the next start kept the older values it held then."""

    async def turned_standby() -> durability.LocalDurability:
        mill, kept, topic = worker(tmp_path)
        changelog = TP(topic, 0)
        db = partition_db(mill.state, 0)
        db.put(b"mood", b"calm")
        kept.store.set_persisted_offset(changelog, 99)  # recovery laid in up to 99
        kept.recovered = {0}
        async with kept.writing({0: 2}):  # two events, each sent and stored
            db.put(b"mood", b"angry")
            db.put(b"mood", b"calm again")
            kept.sent(0, [confirmed(100), confirmed(101)])
        mill.app.tables.recovery.standby_tps.add(changelog)  # type: ignore[attr-defined]
        kept.rebalanced([], [], set(), set())
        mill.state.apply_changelog_batch(  # Faust's replay, from the checkpoint on
            [changelog_message(mill.app, changelog, 100, b"mood", b"angry")]
        )
        kept.partitions[0].last_event -= durability.IDLE_SECONDS + 1
        await kept.checkpoint_due()
        await kept.finish()
        crash(kept)
        return kept

    kept = asyncio.run(turned_standby())
    checkpointed = Stamp.read(kept.files(0).checkpoint_stamp)
    assert checkpointed is not None and checkpointed.changelog_offset == 99
    assert not kept.files(0).stamp.exists() and kept.files(0).dirty.exists()
    assert restarted(kept, 102) == restored_after(99)


def test_a_copy_is_checkpointed_before_its_first_write_so_a_crash_replays_what_came_after(
    tmp_path: Path,
) -> None:
    """A copy recovered whole (or kept at start) had no checkpoint of what it held, and its
    first event marked it dirty: a crash before the first checkpoint (a second idle, or 30 s of
    a backlog) threw it away and replayed the whole changelog, at every start of a worker
    crashing in a loop on an event."""

    async def killed_after_a_write() -> durability.LocalDurability:
        mill, kept, topic = worker(tmp_path)
        db = partition_db(mill.state, 0)
        for offset in range(1000):
            db.put(b"key-%04d" % offset, b"recovered")
        kept.store.set_persisted_offset(TP(topic, 0), 999)
        kept.recovered = {0}
        async with kept.writing({0: 1}):
            db.put(b"key-0000", b"written by an event")
            kept.sent(0, [confirmed(1000)])
        crash(kept)
        return kept

    kept = asyncio.run(killed_after_a_write())
    assert restarted(kept, 1001) == restored_after(999)
    db = open_db(kept.files(0).db)
    try:
        assert db.get(b"key-0000") == b"recovered" and db.get(b"key-0999") == b"recovered"
    finally:
        db.close()


def test_a_checkpoint_waiting_for_its_sends_through_a_rebalance_is_not_taken_of_a_replay(
    tmp_path: Path,
) -> None:
    """A checkpoint asked whether its copy was whole, then waited for a send the broker was
    slow to store. A rebalance meanwhile (which could not hold the partition: the checkpoint
    held it) had Faust replay the changelog into the copy from the last checkpoint; once the
    send was stored, the checkpoint went on, and a crash then restored the half-replayed copy
    as holding every write confirmed."""

    async def rebalanced_while_waiting() -> durability.LocalDurability:
        mill, kept, topic = worker(tmp_path)
        changelog = TP(topic, 0)
        db = partition_db(mill.state, 0)
        await recovered_and_written(mill, changelog)
        slow: asyncio.Future[RecordMetadata] = asyncio.get_running_loop().create_future()
        async with kept.writing({0: 1}):
            db.put(b"mood", b"calm again")
            kept.sent(0, [slow])
        kept.partitions[0].last_event -= durability.IDLE_SECONDS + 1
        checkpointing = asyncio.ensure_future(kept.checkpoint_due())
        await asyncio.sleep(0.05)
        kept.rebalanced([], [], set(), set())  # the partition could not be held
        mill.state.apply_changelog_batch(  # Faust's replay from the checkpoint on
            [changelog_message(mill.app, changelog, 100, b"mood", b"angry")]
        )
        slow.set_result(RecordMetadata(changelog, topic, 0, 101, 0.0))
        await checkpointing
        crash(kept)
        return kept

    kept = asyncio.run(rebalanced_while_waiting())
    assert restarted(kept, 102) == restored_after(99)


def test_a_partition_given_back_is_checkpointed_before_its_first_write_there(
    tmp_path: Path,
) -> None:
    """A partition taken from the worker and given back (or turned standby and active again)
    kept being counted as written to, so its first write after recovery caught up took no
    checkpoint: a crash restored its checkpoint of before, and replayed all another worker had
    written meanwhile."""

    async def given_back() -> durability.LocalDurability:
        mill, kept, topic = worker(tmp_path)
        changelog = TP(topic, 0)
        await recovered_and_written(mill, changelog)
        kept.rebalanced([0], [], set(), set())  # taken away
        kept.rebalanced([], [0], set(), set())  # given back, its copy young enough to keep
        return await back_here_written_and_killed(mill, changelog)

    kept = asyncio.run(given_back())
    assert restarted(kept, 5001) == restored_after(4999)


def test_a_recovery_a_rebalance_overtook_neither_upgrades_nor_retires_nor_marks_its_partitions(
    tmp_path: Path,
) -> None:
    """Faust runs the table's `on_recovery_completed` as a task of its own, which a rebalance
    does not cancel, and a recovery overtaken during a rebalance's first steps still completes,
    with the partitions of the assignment before: the upgrade and the retiring of changesets
    went on to partitions the rebalance had given another worker, opened their databases again
    and sent their older state to the changelog after the new owner's writes, and the
    partitions were marked whole (readable, and checkpointed) while replayed into again."""

    async def overtaken() -> tuple[durability.LocalDurability, StateTable]:
        mill, kept, topic = worker(tmp_path, 2)
        mill.state.apply_changelog_batch(
            [changeset_message(mill.app, TP(topic, 1), 0, [(b"mood", b"calm")])]
        )
        mill.app.consumer_generation_id = 1  # the assignment of generation 1 ...
        COMPLETING.set((1, mill.app.rebalancing_count))  # ... is recovered
        assert not mill.state.overtaken()
        mill.app.rebalancing_count += 1  # a rebalance begins (Faust counts it as it revokes)
        await mill.state.on_recovery_completed({TP(topic, 0), TP(topic, 1)}, set())
        return kept, mill.state

    kept, table = asyncio.run(overtaken())
    assert kept.recovered == set() and table.readable == set()
    assert not kept.files(1).dirty.exists() and table.changesets[1]


def test_a_standby_made_active_again_is_checkpointed_before_its_first_write(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A partition written here, then a standby (checkpointed once caught up), then active here
    again: its first write took no checkpoint, so a crash restored the standby's and replayed
    all the other worker had written since."""

    async def back_and_forth() -> durability.LocalDurability:
        mill, kept, topic = worker(tmp_path)
        changelog = TP(topic, 0)
        await recovered_and_written(mill, changelog)
        kept.rebalanced([], [], set(), set())  # a standby now
        standbys = mill.app.tables.recovery.standby_tps  # type: ignore[attr-defined]
        standbys.add(changelog)
        mill.state.apply_changelog_batch(
            [changelog_message(mill.app, changelog, 300, b"mood", b"the other's")]
        )
        with monkeypatch.context() as caught_up:  # the consumer's highwater: read to the end
            caught_up.setattr(kept, "at_changelog_end", lambda partition: True)
            kept.partitions[0].last_event -= durability.IDLE_SECONDS + 1
            await kept.checkpoint_due()
        standbys.discard(changelog)
        kept.rebalanced([], [], set(), set())  # active here again
        return await back_here_written_and_killed(mill, changelog)

    kept = asyncio.run(back_and_forth())
    assert restarted(kept, 5001) == restored_after(4999)


def test_changesets_of_a_partition_given_back_with_a_copy_begun_afresh_are_forgotten(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Changesets a retiring left (a rebalance overtook it) were held for the partition for as
    long as the worker ran: given back long after, its copy too old to keep, recovery replayed
    a changelog whose compaction had dropped them, and the partition was never stamped again,
    each start replaying it whole. Recovery finds what is still there."""

    async def given_back_late() -> StateTable:
        mill = create_app(Settings(data_dir=tmp_path, app_id="town", partitions=2))
        kept, topic = mill.durability, mill.state.changelog_topic.get_topic_name()
        mill.state.apply_changelog_batch(
            [changeset_message(mill.app, TP(topic, 1), 0, [(b"mood", b"calm")])]
        )
        assignor = mill.app.assignor
        monkeypatch.setattr(assignor, "is_active", lambda tp: True)
        monkeypatch.setattr(assignor, "assigned_actives", lambda: {TP(topic, 0), TP(topic, 1)})
        monkeypatch.setattr(assignor, "assigned_standbys", set)
        kept.followed_at[1] = int(time.time() * 1000) - 2 * DAY_MS  # let go two days ago
        await mill.state.on_rebalance({TP(topic, 0), TP(topic, 1)}, set(), {TP(topic, 1)}, 2)
        return mill.state

    table = asyncio.run(given_back_late())
    assert not table.local_durability.files(1).db.exists() and not table.changesets.get(1)


def test_a_completion_a_rebalance_overtook_stays_overtaken_once_the_next_one_completed(
    tmp_path: Path,
) -> None:
    """A table's `on_recovery_completed` is a task made as its recovery completes; waiting on
    the broker through the next rebalance's whole recovery, it took that one's completion for
    its own, and went on to upgrade and retire the partitions it had lost, and to mark them
    readable in place of those just given."""

    async def two_completions() -> tuple[bool, bool]:
        mill = create_app(Settings(data_dir=tmp_path, app_id="town"))
        app, table = mill.app, mill.state
        go_on = asyncio.Event()

        async def overtaken_once_told() -> bool:
            await go_on.wait()
            return table.overtaken()

        app.consumer_generation_id = 1
        COMPLETING.set((1, app.rebalancing_count))  # as PersistentRecovery completes, ...
        first = asyncio.ensure_future(overtaken_once_told())  # ... making the table's task
        app.rebalancing_count += 1  # a rebalance begins, and assigns generation 2
        app.consumer_generation_id = 2
        COMPLETING.set((2, app.rebalancing_count))
        second = asyncio.ensure_future(overtaken_once_told())
        go_on.set()
        return await first, await second

    assert asyncio.run(two_completions()) == (True, False)


HOUR_MS = 3_600_000
WHOLE_REPLAY = "recovery replays the whole changelog"


async def standby_stamped_at_the_end(
    kept: durability.LocalDurability, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Partition 0 a standby since the worker started 23 hours ago (its copy begun afresh then:
    nearly the day the changelog keeps deletes), laid in up to changelog offset 500, and
    stamped once it read the changelog to its end (`stamp_due`)."""
    kept.followed_at[0] = int(time.time() * 1000) - 23 * HOUR_MS
    partition_db(kept.table, 0).put(b"mood", b"the other's")
    kept.store.set_persisted_offset(TP(kept.table.changelog_topic.get_topic_name(), 0), 500)
    with monkeypatch.context() as caught_up:  # the consumer's highwater: read to the end
        caught_up.setattr(kept, "at_changelog_end", lambda partition: True)
        await kept.stamp_due()


def test_a_standby_a_clean_stop_caught_a_record_behind_is_kept_at_the_next_start(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A standby stamped at the changelog's end every 30 s was still taken as last following it
    when the worker started: a clean stop that caught it a record behind (fetched, not laid in
    yet: usual under load) stamped it as of then, over the stamp of seconds before, and a
    worker that had been up most of a week threw the copy away at its next start and replayed
    the whole changelog."""

    async def stopped_a_record_behind() -> durability.LocalDurability:
        _, kept, _ = worker(tmp_path)
        await standby_stamped_at_the_end(kept, monkeypatch)
        await kept.finish()  # a record on, fetched and not laid in yet
        crash(kept)
        return kept

    kept = asyncio.run(stopped_a_record_behind())
    assert restarted(kept, 502) == (
        "local state kept: recovery replays the changelog after offset 500"
    )


def test_a_standby_let_go_a_record_behind_and_given_back_keeps_its_copy(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A standby a rebalance took from the worker a record behind the changelog was taken as
    last following it when the worker started, not when it was last stamped at the end:
    given back, its copy was thrown away and recovery replayed the whole changelog."""

    async def let_go_and_given_back() -> tuple[durability.LocalDurability, list[int]]:
        _, kept, _ = worker(tmp_path)
        await standby_stamped_at_the_end(kept, monkeypatch)
        kept.rebalanced([0], [], set(), set())  # let go a record behind
        return kept, kept.rebalanced([], [0], set(), set())

    kept, afresh = asyncio.run(let_go_and_given_back())
    assert afresh == [] and kept.files(0).db.exists()


def test_a_checkpoint_holding_all_its_idle_copy_does_is_kept_fresh_for_a_crash(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A partition written to, checkpointed, then without an event for most of the changelog's
    delete retention (a week on stock Kafka), its copy at the changelog's end all along: its
    checkpoint kept the time it was taken, so a crash threw away both the dirty copy and that
    checkpoint, and replayed the whole changelog. Its checkpoint is stamped again as of now,
    but only while it holds all the copy does: not once an event went past it (partition 1),
    nor once the copy, a standby now, laid in another worker's writes (partition 2)."""

    async def idle_then_killed() -> durability.LocalDurability:
        mill, kept, topic = worker(tmp_path, 3)
        kept.recovered = {0, 1, 2}
        for partition in (0, 1, 2):  # 23 hours ago: an event, then its checkpoint
            kept.store.set_persisted_offset(TP(topic, partition), 99)
            async with kept.writing({partition: 1}):
                partition_db(mill.state, partition).put(b"mood", b"angry")
                kept.sent(partition, [confirmed(100)])
            await kept.take_checkpoint(partition, kept.partitions[partition])
            checkpoint = kept.files(partition).checkpoint_stamp
            taken = Stamp.read(checkpoint)
            assert taken is not None and taken.changelog_offset == 100
            aged = replace(taken, taken_at_ms=taken.taken_at_ms - 23 * HOUR_MS)
            checkpoint.write_bytes(aged.to_bytes())
        standby = TP(topic, 2)
        mill.app.tables.recovery.standby_tps.add(standby)  # type: ignore[attr-defined]
        kept.rebalanced([], [], {0, 1}, set())
        mill.state.apply_changelog_batch(
            [changelog_message(mill.app, standby, 300, b"mood", b"the other's")]
        )
        async with kept.writing({1: 1}):  # now, an event not checkpointed yet
            partition_db(mill.state, 1).put(b"mood", b"calm")
            kept.sent(1, [confirmed(101)])
        with monkeypatch.context() as caught_up:  # the standby read the changelog to its end
            caught_up.setattr(kept, "at_changelog_end", lambda partition: True)
            await kept.stamp_due()
        crash(kept)
        return kept

    kept = asyncio.run(idle_then_killed())
    assert restarted(kept, 101) == restored_after(100)
    assert restarted(kept, 102, partition=1).endswith(WHOLE_REPLAY)
    assert restarted(kept, 301, partition=2).endswith(WHOLE_REPLAY)


def test_a_crash_while_a_copy_is_stamped_again_keeps_the_stamp_before(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A copy not written to is stamped again every 30 s: the stamp was written in place, and a
    crash in the middle of it left a stamp cut short, so the next start threw the copy away and
    replayed the whole changelog. The new stamp is written whole beside it, then put in its
    place: the crash leaves the stamp of 30 s before, and the start keeps the copy."""

    def cut_short(path: Path, data: bytes) -> None:
        path.write_bytes(data[: len(data) // 2])
        raise KeyboardInterrupt("killed while stamping")

    async def killed_while_stamping() -> durability.LocalDurability:
        _, kept, _ = worker(tmp_path)
        await standby_stamped_at_the_end(kept, monkeypatch)
        kept.stamped_at.clear()  # 30 s on: due again
        with monkeypatch.context() as dying:
            dying.setattr(durability, "_write_durably", cut_short)
            dying.setattr(kept, "at_changelog_end", lambda partition: True)
            with pytest.raises(KeyboardInterrupt):
                await kept.stamp_due()
        crash(kept)
        return kept

    kept = asyncio.run(killed_while_stamping())
    assert restarted(kept, 501) == (
        "local state kept: recovery replays the changelog after offset 500"
    )
    assert not kept.files(0).stamp_draft.exists()


def test_a_disk_full_while_the_changelog_is_laid_in_stops_the_worker_saying_where(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Faust's recovery takes a batch that failed for a warning and lays it again for ever: a
    disk full during a recovery warned every 5 s, the worker never ready and never stopped,
    and nothing named the data dir. It stops, saying so once; the batch Faust lays again (at
    its stop too, where it raised once more) is let go."""

    class FullDisk:
        def write(self, batch: object) -> None:
            raise Exception("IO error: No space left on device: While appending to file: 9.sst")

    monkeypatch.setattr(app_module, "without_write_ahead_log", lambda db: FullDisk())

    async def laid_twice() -> list[asyncio.Future[None] | None]:
        mill, _, topic = worker(tmp_path)
        record = changelog_message(mill.app, TP(topic, 0), 1, b"mood", b"angry")
        with pytest.raises(Exception, match="No space left on device"):
            mill.state.apply_changelog_batch([record])
        crashed = mill.state.stopping
        mill.state.apply_changelog_batch([record])  # laid again (the stop too): let go
        if crashed is not None:
            crashed.cancel()
        return [crashed, mill.state.stopping]

    with caplog.at_level(logging.CRITICAL, logger="rumourmill.worker"):
        first, again = asyncio.run(laid_twice())
    assert first is not None and again is first  # one stop
    [said] = [record.getMessage() for record in caplog.records if record.levelname == "CRITICAL"]
    assert said.startswith("stopping the worker: laying the state changelog in: IO error: No")
    assert f"RUMOURMILL_DATA_DIR={str(tmp_path)!r} could not be written" in said


def test_a_worker_that_crashed_and_did_not_stop_in_time_does_not_blame_kafka(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """A crash while taking events in (a disk full) leaves them unacked, and Faust's stop waits
    for them until the bound: the last line asked whether Kafka was reachable, as if it
    were what had gone wrong."""
    mill, _, _ = worker(tmp_path)
    stopper = BoundedStopWorker(mill.app, loglevel="info")
    mill.app.crash_reason = RuntimeError("the disk is full")
    exits: list[int] = []
    monkeypatch.setattr(stopping.os, "_exit", exits.append)
    with caplog.at_level(logging.CRITICAL, logger="rumourmill.worker"):
        stopper.give_up()
    [said] = [record.getMessage() for record in caplog.records if record.levelname == "CRITICAL"]
    assert said.startswith("the worker did not stop within 15 s after it crashed (the disk is")
    assert "Kafka" not in said and exits == [GAVE_UP_EXIT_CODE]
