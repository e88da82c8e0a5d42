"""The state changelog compacts down to the live state, and a worker that starts from nothing
but the compacted changelog (deletes included) ends on the same state, on Apache Kafka.

The changelog topic is created here, before the worker, with compaction forced (segments roll
after 100 ms, any overwritten record makes a segment worth cleaning); the broker's cleaner looks
for work every 15 s.
"""

from __future__ import annotations

import asyncio
import itertools
import shutil
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from rocksdict import AccessType, Options, Rdict

from localbroker import free_port
from projections.digest import world_digest
from projections.state import MemoryState
from streams.partitioning import partition_of
from streams.replay import replay_lines
from streams.settings import Settings
from streams.topics import STATE_TABLE, changelog_topic
from tests.streams.noisy_story import story
from tests.streams.test_deletion import deletion_acks, rumourmill, status_of
from tests.streams.test_deletion import read as runtime_read
from tests.streams.test_deletion import story as tavern
from tests.streams.test_faults import (
    assert_same_as_replay,
    expected_processed,
    get_json,
    wait_for_everything,
)
from tests.support import WorkerProcess, read_topic, send_events, unique_settings

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]
COMPACTION_TIMEOUT = 120.0
FAUST_OFFSET_KEY = b"__faust\x00offset__"
"""Faust's own key in each partition database (never in the changelog)."""

Log = dict[int, list[tuple[int, bytes, bytes | None]]]
"""Per partition, the (offset, key, value) records the changelog holds now, in order."""


def create_compacting_changelog(settings: Settings, delete_retention_ms: int = 3_600_000) -> None:
    async def create() -> None:
        admin = AIOKafkaAdminClient(bootstrap_servers=settings.bootstrap)
        await admin.start()
        try:
            await admin.create_topics(
                [
                    NewTopic(
                        changelog_topic(settings),
                        settings.partitions,
                        1,
                        topic_configs={
                            "cleanup.policy": "compact",
                            "segment.ms": "100",
                            "min.cleanable.dirty.ratio": "0.01",
                            "delete.retention.ms": str(delete_retention_ms),
                        },
                    )
                ]
            )
        finally:
            await admin.close()

    asyncio.run(create())


def read_changelog(settings: Settings) -> tuple[Log, dict[int, int]]:
    """The records the changelog holds now, and its end offsets (how many were ever written)."""

    async def read() -> tuple[Log, dict[int, int]]:
        consumer = AIOKafkaConsumer(bootstrap_servers=settings.bootstrap, enable_auto_commit=False)
        await consumer.start()
        try:
            partitions = [
                TopicPartition(changelog_topic(settings), n) for n in range(settings.partitions)
            ]
            consumer.assign(partitions)
            await consumer.seek_to_beginning(*partitions)
            ends = await consumer.end_offsets(partitions)
            log: Log = {tp.partition: [] for tp in partitions}
            while [tp for tp in partitions if await consumer.position(tp) < ends[tp]]:
                for tp, records in (await consumer.getmany(timeout_ms=500)).items():
                    log[tp.partition] += [
                        (record.offset, record.key, record.value)
                        for record in records
                        if record.offset < ends[tp] and record.key is not None
                    ]
            return log, {tp.partition: end for tp, end in ends.items()}
        finally:
            await consumer.stop()

    return asyncio.run(read())


def live_records(log: Log) -> int:
    """How many keys replaying `log` leaves, over all partitions (a key may be in several)."""
    return sum(
        sum(value is not None for value in {key: value for _, key, value in records}.values())
        for records in log.values()
    )


def live_keys(data_dir: Path) -> int:
    """The keys in a stopped worker's state databases."""
    count = 0
    for path in data_dir.rglob(f"{STATE_TABLE}-*.db"):
        db = Rdict(str(path), options=Options(raw_mode=True), access_type=AccessType.read_only())
        try:
            count += sum(1 for key in db.keys() if key != FAUST_OFFSET_KEY)  # noqa: SIM118
        finally:
            db.close()
    return count


def wait_for_compaction(settings: Settings, rolled_at: dict[int, int]) -> Log:
    """Until, in every partition written to since `rolled_at` (its end offsets then), the
    records before that offset hold each key once: only the last record of a key is left.

    An event's ack can be read before its changelog records are (the worker sends acks without
    waiting for them; only the commit waits for both, and with the change feed on, the changelog
    waits for the feed): until some partition is written to past the roll, it waits too."""
    deadline = time.monotonic() + COMPACTION_TIMEOUT
    while True:
        log, ends = read_changelog(settings)
        rolled = [partition for partition, end in ends.items() if end > rolled_at[partition]]
        if not rolled:
            assert time.monotonic() < deadline, "no partition was written to after the roll"
            time.sleep(0.5)
            continue
        repeated = {
            partition: len(keys) - len(set(keys))
            for partition in rolled
            if (keys := [key for offset, key, _ in log[partition] if offset < rolled_at[partition]])
        }
        if not any(repeated.values()):
            return log
        if time.monotonic() > deadline:
            raise AssertionError(f"not compacted: keys repeated per partition {repeated}")
        time.sleep(2)


@pytest.fixture
def settings(kafka_bootstrap: str, tmp_path: Path) -> Settings:
    settings = unique_settings(kafka_bootstrap, tmp_path / "data")
    create_compacting_changelog(settings)
    return settings


def test_compaction_shrinks_the_changelog_to_the_live_state_and_a_start_from_it_is_the_same(
    settings: Settings, tmp_path: Path
) -> None:
    lines = story(worlds=2, events_per_world=300, seed=23)
    history, tail = lines[:-40], lines[-40:]
    clean = replay_lines(lines)
    worker = WorkerProcess(settings, tmp_path / "worker.log").start()
    try:
        send_events(settings, history)
        wait_for_everything(settings, expected_processed(replay_lines(history), history), 120)
        _, rolled_at = read_changelog(settings)
        time.sleep(1)  # past segment.ms: the tail's records open new segments
        send_events(settings, tail)
        wait_for_everything(settings, expected_processed(clean, lines), 120)
        wait_for_compaction(settings, rolled_at)
        worker.stop()
        log, ends = read_changelog(settings)  # read after the stop: all its records are written
        held, written = sum(map(len, log.values())), sum(ends.values())
        assert held < written, "compaction dropped the overwritten records"
        live = live_records(log)
        assert live == live_keys(settings.data_dir), "the changelog's live keys are the state's"

        shutil.rmtree(settings.data_dir)  # nothing local: the start rebuilds from the changelog
        worker.start()
        assert_same_as_replay(settings, lines, clean)
    finally:
        worker.stop()


def test_a_deleted_world_stays_deleted_in_a_state_rebuilt_from_the_compacted_changelog(
    settings: Settings, tmp_path: Path
) -> None:
    deleted = "save-1"
    partition = partition_of(deleted.encode(), settings.partitions)
    neighbour = next(
        world
        for number in range(100)
        if partition_of((world := f"neighbour-{number}").encode(), settings.partitions) == partition
    )
    kept = next(
        world
        for number in range(100)
        if partition_of((world := f"kept-{number}").encode(), settings.partitions) != partition
    )
    events = tavern(deleted) + tavern(kept)
    worker = WorkerProcess(settings, tmp_path / "worker.log").start()
    try:
        send_events(settings, events)
        read_topic(settings, settings.topics.acks, lambda got: len(got) >= len(events))
        rumourmill(settings, "world", "delete", deleted)
        deletion_acks(settings, 1)
        rolled_at = after_tombstones_of(settings, deleted, partition)
        time.sleep(1)  # past segment.ms: the next events open a new segment on both partitions
        rolling = tavern(neighbour)[:3] + tavern(kept)[:1]
        send_events(settings, rolling)
        total = len(events) + 1 + len(rolling)
        read_topic(settings, settings.topics.acks, lambda got: len(got) >= total)
        log = wait_for_compaction(settings, rolled_at)  # the deleted values are gone
        assert [
            key
            for offset, key, value in log[partition]
            if value is None and deleted.encode() in key and offset < rolled_at[partition]
        ], "the deletion left tombstones in the changelog"
        kept_digest = digest_of(settings, kept)

        worker.stop()
        shutil.rmtree(settings.data_dir)
        worker.start()
        assert status_of(settings, runtime_read(deleted)) == 404
        assert digest_of(settings, deleted) == world_digest(MemoryState(), "default", deleted)
        assert digest_of(settings, kept) == kept_digest
    finally:
        worker.stop()


def after_tombstones_of(settings: Settings, world: str, partition: int) -> dict[int, int]:
    """The changelog's end offsets once `partition` holds tombstones of `world`'s keys: an ack
    can be read before the changelog records of its event are (`wait_for_compaction`)."""
    deadline = time.monotonic() + 60
    while True:
        log, ends = read_changelog(settings)
        if any(value is None and world.encode() in key for _, key, value in log[partition]):
            return ends
        assert time.monotonic() < deadline, f"no tombstone of {world!r} in the changelog"
        time.sleep(0.5)


def digest_of(settings: Settings, world: str) -> str:
    return str(get_json(settings, f"/v2/admin/digest?world_instance_id={world}")["digest"])


def test_a_partition_given_back_after_its_tombstones_were_compacted_away_is_recovered_whole(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    """A worker keeps the copy of a partition a rebalance took from it; given the partition
    back, it resumed that copy from its changelog offset. Once compaction had dropped the
    tombstones written meanwhile (`delete.retention.ms` after they were cleaned: a week, here a
    second), the keys they deleted stayed: a world deleted by the other worker came back. A copy
    that stopped following the changelog longer ago than deletes are kept is now thrown away
    before it is opened again, as a start throws it away."""
    settings = unique_settings(kafka_bootstrap, tmp_path / "first")
    create_compacting_changelog(settings, delete_retention_ms=1_000)
    other = settings.model_copy(update={"data_dir": tmp_path / "second", "web_port": free_port()})
    worlds = {partition: world_on(settings, partition, "save") for partition in range(2)}
    events = tavern(worlds[0]) + tavern(worlds[1])
    first = WorkerProcess(settings, tmp_path / "first.log").start()
    second = WorkerProcess(other, tmp_path / "second.log")
    try:
        send_events(settings, events)
        read_topic(settings, settings.topics.acks, lambda got: len(got) >= len(events))
        second.start()
        wait_for(lambda: len(first.owned_partitions()) == len(second.owned_partitions()) == 1)
        [moved] = second.owned_partitions()
        deleted = worlds[moved]
        rumourmill(settings, "world", "delete", deleted)
        deletion_acks(settings, 1)
        wait_until_tombstones_are_gone(settings, deleted, moved)
        second.stop()
        wait_for(lambda: first.owned_partitions() == [0, 1])  # the moved partition given back
        assert status_of(settings, runtime_read(deleted)) == 404
        assert digest_of(settings, deleted) == world_digest(MemoryState(), "default", deleted)
    finally:
        second.stop()
        first.stop()


def world_on(settings: Settings, partition: int, name: str) -> str:
    """A world id `name-N` that the worker places on `partition`."""
    return next(
        world
        for number in range(1000)
        if partition_of((world := f"{name}-{number}").encode(), settings.partitions) == partition
    )


def wait_for(condition: Callable[[], bool], timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "the workers did not share the partitions so"
        time.sleep(0.5)


def wait_until_tombstones_are_gone(settings: Settings, world: str, partition: int) -> None:
    """Until compaction has dropped every tombstone of `world`'s keys from the changelog (its
    deletion count is left), publishing an event now and then so that segments roll."""
    deadline = time.monotonic() + COMPACTION_TIMEOUT * 2
    for rolls in itertools.count():
        log, _ = read_changelog(settings)
        held = [(key, value) for _, key, value in log[partition] if world.encode() in key]
        if all(value is not None for _, value in held) and len(held) == len(dict(held)):
            return
        assert time.monotonic() < deadline, f"tombstones left: {held[:3]}"
        send_events(settings, tavern(world_on(settings, partition, f"roll-{rolls}"))[:1])
        time.sleep(3)
