"""A worker SIGKILLed in the middle of deleting a big world ends with the world deleted after
its restart, on a real Apache Kafka broker: every key of the world gone from its state,
persistent memories included, other worlds untouched, reads 404."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import orjson
import pytest
from aiokafka import AIOKafkaConsumer, TopicPartition
from rocksdict import AccessType, Options, Rdict

from projections.deletion import deletion_event
from projections.digest import world_digest
from projections.key_prefixes import WORLD_PREFIXES
from projections.keys import pack
from projections.policy import policy_key
from projections.state import MemoryState
from streams.app import table_dir
from streams.partitioning import partition_of
from streams.publish import send_one
from streams.settings import Settings
from streams.topics import ensure_topics
from tests.streams.noisy_story import story
from tests.streams.test_deletion import read, status_of
from tests.streams.test_rebuild import live_digest, mind, wait_for_acks
from tests.support import (
    WorkerProcess,
    changelog_ends,
    read_topic,
    send_events,
    unique_settings,
    wait_until_checkpointed,
)

pytestmark = [pytest.mark.integration, pytest.mark.timeout(900)]

BIG_EVENTS = 2_500
"""Events of the big world: ~36,000 keys, a deletion of ~12 changesets of 512 KiB."""
PERSISTENT = ["npc-mara", "npc-tomas"]


def renamed(lines: list[bytes], names: dict[str, str]) -> list[bytes]:
    """The lines with their worlds renamed as `names` says."""
    events = map(orjson.loads, lines)
    return [
        orjson.dumps(event | {"world_instance_id": names[event["world_instance_id"]]})
        for event in events
    ]


def world_on(partition: int, partitions: int, prefix: str) -> str:
    return next(
        name
        for number in range(1000)
        if partition_of((name := f"{prefix}-{number}").encode(), partitions) == partition
    )


async def kill_once_the_changelog_grows(
    settings: Settings, partition: int, before: int, worker: WorkerProcess
) -> None:
    """SIGKILL the worker as soon as the first changeset of the deletion is in the changelog."""
    consumer = AIOKafkaConsumer(bootstrap_servers=settings.bootstrap, group_id=None)
    await consumer.start()
    try:
        tp = TopicPartition(f"{settings.app_id}-state-changelog", partition)
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            end = int((await consumer.end_offsets([tp]))[tp])
            if end > before:
                worker.kill()
                return
        raise AssertionError("the deletion never reached the changelog")
    finally:
        await consumer.stop()


def keys_left(settings: Settings, partition: int, world: str) -> list[bytes]:
    """Every key of the world in the stopped worker's RocksDB copy of its partition."""
    path = settings.data_dir / "v1" / table_dir(settings.app_id) / f"state-{partition}.db"
    db = Rdict(str(path), Options(raw_mode=True), access_type=AccessType.read_only())
    try:
        left = []
        for prefix in WORLD_PREFIXES:
            start = pack(prefix, "default", world)
            for key in db.keys(from_key=start):
                if not key.startswith(start):
                    break
                left.append(key)
        return left
    finally:
        db.close()


def test_a_worker_killed_mid_deletion_ends_with_the_world_deleted(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    # small changelog batches: the deletion goes out as ~100 batches, one after the other, so
    # the kill lands between two of them
    settings = unique_settings(
        kafka_bootstrap, tmp_path / "data", changelog_batch_bytes=16_384, max_event_bytes=8192
    )
    big = world_on(0, settings.partitions, "big")
    beside, elsewhere = (
        world_on(0, settings.partitions, "beside"),
        world_on(1, settings.partitions, "far"),
    )
    asyncio.run(ensure_topics(settings))
    document = {"memory": {"persistent": {"characters": PERSISTENT, "kinds": ["event"]}}}
    asyncio.run(
        send_one(
            settings,
            settings.topics.policies,
            policy_key("default", big),
            orjson.dumps(document),
        )
    )
    lines = renamed(story(worlds=1, events_per_world=BIG_EVENTS, seed=21), {"tavern-21-0": big})
    small = story(worlds=2, events_per_world=60, seed=22)
    lines += renamed(small, {"tavern-22-0": beside, "tavern-22-1": elsewhere})
    worker = WorkerProcess(settings, tmp_path / "worker.log").start()
    try:
        send_events(settings, lines)
        wait_for_acks(settings, lines, timeout=600)
        assert any(
            m["persistent"] for npc in PERSISTENT for m in mind(settings, "default", big, npc)
        )
        others = {world: live_digest(settings, "default", world) for world in (beside, elsewhere)}
        wait_until_checkpointed(settings)  # idle: the partition is checkpointed before the deletion

        before = changelog_ends(settings)[0]
        event = deletion_event("default", big)
        asyncio.run(
            send_one(
                settings,
                settings.topics.events,
                big.encode(),
                event.model_dump_json(exclude_defaults=True).encode(),
            )
        )
        asyncio.run(kill_once_the_changelog_grows(settings, 0, before, worker))
        at_kill = changelog_ends(settings)[0]
        worker.start()
        read_topic(
            settings,
            settings.topics.acks,
            lambda got: any(a["timeline_id"] == "*" and a["outcome"] == "processed" for a in got),
        )
        after = changelog_ends(settings)[0]
        assert after > at_kill, "killed after the deletion was complete: not mid-deletion"
        assert status_of(settings, read(big)) == 404
        assert live_digest(settings, "default", big) == world_digest(MemoryState(), "default", big)
        assert {world: live_digest(settings, "default", world) for world in others} == others
        assert status_of(settings, read(beside)) == 200
    finally:
        worker.stop()
    assert keys_left(settings, 0, big) == []
