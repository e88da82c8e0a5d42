"""World and tenant deletion on a real Apache Kafka broker, through the command line."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
from aiokafka import AIOKafkaConsumer, TopicPartition

from projections.digest import world_digest
from projections.keys import unpack
from projections.policy import policy_key
from projections.state import MemoryState
from schemas.judgements import EventJudgements
from streams.judging import topic_reader
from streams.partitioning import partition_of
from streams.publish import send_one
from streams.settings import Settings
from streams.topics import ensure_topics
from tests.model_server import scripted_model
from tests.support import (
    WorkerProcess,
    read_topic,
    send_events,
    settings_env,
    topic_ends,
    unique_settings,
)
from tests.tavern import TAVERN

pytestmark = pytest.mark.integration


@pytest.fixture
def settings(kafka_bootstrap: str, tmp_path: Path) -> Settings:
    return unique_settings(kafka_bootstrap, tmp_path / "data")


@pytest.fixture
def worker(settings: Settings, tmp_path: Path) -> Iterator[WorkerProcess]:
    process = WorkerProcess(settings, tmp_path / "worker.log").start()
    yield process
    process.stop()


def story(world: str, tenant: str = "default") -> list[dict[str, Any]]:
    return [
        orjson.loads(line) | {"world_instance_id": world, "tenant_id": tenant}
        for line in TAVERN.splitlines()
    ]


def status_of(settings: Settings, path: str) -> int:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{settings.web_port}{path}", timeout=10):
            return 200
    except urllib.error.HTTPError as error:
        return error.code


def read(world: str, tenant: str = "default") -> str:
    return (
        f"/v2/memory/runtime/npcs/npc-mara?world_instance_id={world}"
        f"&timeline_id=main&tenant_id={tenant}"
    )


def rumourmill(settings: Settings, *args: str) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "streams", *args],
        env=settings_env(settings),
        check=True,
        capture_output=True,
        text=True,
    )
    return done.stdout


def deletion_acks(settings: Settings, count: int) -> list[dict[str, Any]]:
    def deletions(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return [ack for ack in messages if ack["timeline_id"] == "*"]

    return deletions(
        read_topic(settings, settings.topics.acks, lambda got: len(deletions(got)) >= count)
    )


def test_a_world_and_a_tenant_deleted_from_the_command_line_read_404(
    settings: Settings, worker: WorkerProcess
) -> None:
    worlds = [("save-1", "default"), ("save-2", "default"), ("a-1", "acme"), ("a-2", "acme")]
    events = [item for world, tenant in worlds for item in story(world, tenant)]
    send_events(settings, events)
    read_topic(settings, settings.topics.acks, lambda got: len(got) >= len(events))
    assert {status_of(settings, read(world, tenant)) for world, tenant in worlds} == {200}

    said = rumourmill(settings, "world", "delete", "save-1")
    assert "world.deleted for world 'save-1'" in said
    (ack,) = deletion_acks(settings, 1)
    assert (ack["outcome"], ack["world_instance_id"]) == ("processed", "save-1")
    assert ack["reason"].startswith("deleted ")
    assert status_of(settings, read("save-1")) == 404
    digest = f"http://127.0.0.1:{settings.web_port}/v2/admin/digest?world_instance_id=save-1"
    with urllib.request.urlopen(digest, timeout=10) as reply:
        assert orjson.loads(reply.read())["digest"] == world_digest(
            MemoryState(), "default", "save-1"
        )
    assert status_of(settings, read("save-2")) == 200

    rumourmill(settings, "world", "delete", "never-seen")
    unknown = [ack for ack in deletion_acks(settings, 2) if ack["world_instance_id"] != "save-1"]
    assert [ack["reason"] for ack in unknown] == [
        "world 'never-seen' of tenant 'default': nothing to delete"
    ]

    said = rumourmill(settings, "tenant", "delete", "acme")
    assert f"({settings.partitions}x)" in said
    acks = deletion_acks(settings, 2 + settings.partitions)
    assert sum(ack["tenant_id"] == "acme" for ack in acks) == settings.partitions
    assert status_of(settings, read("a-1", "acme")) == 404
    assert status_of(settings, read("a-2", "acme")) == 404
    assert status_of(settings, read("save-2")) == 200

    anew = story("save-1")  # the world begins anew, from seq 1
    send_events(settings, anew)
    total = len(events) + len(acks) + len(anew)
    acked = read_topic(settings, settings.topics.acks, lambda got: len(got) >= total)
    again = [a for a in acked if a["world_instance_id"] == "save-1" and a["timeline_id"] != "*"]
    assert [a["outcome"] for a in again] == ["processed"] * 2 * len(anew)  # no duplicates
    assert status_of(settings, read("save-1")) == 200


def latest_of_each_key(settings: Settings, topic: str) -> dict[tuple[int, bytes], bytes | None]:
    """The last value of each (partition, key) `topic` holds now, None for a tombstone."""
    ends = {TopicPartition(topic, p): end for p, end in topic_ends(settings, topic).items()}

    async def read() -> dict[tuple[int, bytes], bytes | None]:
        consumer = AIOKafkaConsumer(bootstrap_servers=settings.bootstrap, enable_auto_commit=False)
        await consumer.start()
        latest: dict[tuple[int, bytes], bytes | None] = {}
        try:
            consumer.assign(list(ends))
            await consumer.seek_to_beginning(*ends)
            while any([await consumer.position(tp) < end for tp, end in ends.items()]):
                for records in (await consumer.getmany(timeout_ms=1000)).values():
                    latest.update(((r.partition, r.key or b""), r.value) for r in records)
        finally:
            await consumer.stop()
        return latest

    return asyncio.run(read())


def test_deleting_a_world_in_model_mode_tombstones_the_models_answers_on_the_judgements_topic(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    """The model's answers (feelings, retold rumours) are the world's content: each of the
    deleted world's keys on the compacted judgements topic ends with a tombstone, so compaction
    removes them, and the worker's read-back takes none of them; another world's stay."""
    with scripted_model() as model:
        settings = unique_settings(
            kafka_bootstrap, tmp_path / "data", model_url=model.url, model_name="scripted"
        )
        asyncio.run(ensure_topics(settings))
        document = {"memory": {"weighing": "model", "spreading": {"enabled": True}}}
        asyncio.run(
            send_one(
                settings,
                settings.topics.policies,
                policy_key("default", None),
                orjson.dumps(document),
            )
        )

        async def read_back_of(world: str) -> list[EventJudgements]:
            """What a worker reads back of the world's partition (at its next assignment)."""
            read = topic_reader(settings, settings.topics.judgements)
            return await read(partition_of(world.encode(), settings.partitions), lambda _: True)

        worker = WorkerProcess(settings, tmp_path / "worker.log").start()
        try:
            events = [*story("save-1"), *story("save-2")]
            send_events(settings, events)
            read_topic(settings, settings.topics.acks, lambda got: len(got) >= len(events), 120)
            before = latest_of_each_key(settings, settings.topics.judgements)
            rumourmill(settings, "world", "delete", "save-1")
            deletion_acks(settings, 1)  # sent once the tombstones are stored
            after = latest_of_each_key(settings, settings.topics.judgements)
            read_back = asyncio.run(read_back_of("save-1"))
        finally:
            worker.stop()

    def of(world: str, latest: dict[tuple[int, bytes], bytes | None]) -> dict[Any, Any]:
        return {key: value for key, value in latest.items() if unpack(key[1])[2] == world}

    assert of("save-1", before) and of("save-2", before)
    assert None not in before.values()
    assert of("save-1", after) == dict.fromkeys(of("save-1", before))  # each key: a tombstone
    assert of("save-2", after) == of("save-2", before)
    assert "save-1" not in {record.world_instance_id for record in read_back}
    said = worker.log_path.read_text()
    assert "judgements topic, partition " in said
    assert "record(s) of world 'save-1' of tenant 'default' tombstoned" in said
