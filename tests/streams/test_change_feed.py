"""The change feed on Apache Kafka: a generated town ingested by a real worker, the feed loaded
into DuckDB, and its answers checked against the projections' own output and reads."""

from __future__ import annotations

import asyncio
import urllib.request
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import duckdb
import orjson
import pytest
from aiokafka import AIOKafkaProducer
from aiokafka.structs import RecordMetadata

from benchmarks.story import encoded, tavern_story
from projections.delivery import Intake
from projections.policy import policy_key, resolve
from projections.projector import Projector
from schemas.memory import Memory
from streams.app import create_app
from streams.batch_sender import BatchSender
from streams.publish import send_one
from streams.settings import Settings
from streams.topics import ensure_topics
from tests.support import (
    WorkerProcess,
    feed_holding,
    read_topic,
    replayed_change_ids,
    send_events,
    topics_on,
    unique_settings,
)

KEEPING = ["npc-008", "npc-011"]
"""Characters who keep all their memories for the whole world (persistent), as does everyone
their impressions: the busiest relation is one of theirs."""
TOWN_POLICY = {
    "memory": {
        "spreading": {"enabled": True},
        "persistent": {"characters": KEEPING, "kinds": ["impression"]},
    }
}
TOWN = encoded(tavern_story(500, seed=12, worlds=("town-0", "town-1"), characters=16, places=3))

WHO_PASSED_MOST = """
    SELECT teller_id, count(*) AS passed
    FROM (SELECT DISTINCT change_id, teller_id FROM changes WHERE kind = 'rumour-passed')
    GROUP BY teller_id ORDER BY passed DESC, teller_id
"""
BUSIEST_RELATION = """
    SELECT world_instance_id, character_id, entity_id
    FROM (SELECT DISTINCT change_id, world_instance_id, character_id, entity_id
          FROM changes WHERE kind = 'relation-changed')
    GROUP BY ALL ORDER BY count(*) DESC, world_instance_id, character_id, entity_id LIMIT 1
"""
RELATION_OVER_STORY_TIME = """
    SELECT DISTINCT story_minutes, seq, feeling, memories
    FROM changes
    WHERE kind = 'relation-changed' AND world_instance_id = ? AND character_id = ?
      AND entity_id = ?
    ORDER BY story_minutes, seq
"""


def set_policy(settings: Settings) -> None:
    """`TOWN_POLICY` in every world of the tenant."""
    key, document = policy_key("default", None), orjson.dumps(TOWN_POLICY)
    asyncio.run(ensure_topics(settings))
    asyncio.run(send_one(settings, settings.topics.policies, key, document))


def acked(processed: int, duplicates: int) -> Any:
    """Whether the acks read hold this many events processed and this many duplicates."""

    def enough(got: list[dict[str, Any]]) -> bool:
        outcomes = Counter(ack["outcome"] for ack in got)
        return outcomes["processed"] >= processed and outcomes["duplicate"] >= duplicates

    return enough


def get(settings: Settings, path: str) -> Any:
    with urllib.request.urlopen(f"http://127.0.0.1:{settings.web_port}{path}", timeout=10) as r:
        return orjson.loads(r.read())


@pytest.mark.integration
def test_the_change_feed_in_duckdb_answers_who_passed_rumours_and_how_a_relation_moved(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    settings = unique_settings(kafka_bootstrap, tmp_path / "data")
    set_policy(settings)
    rumours = Counter[str]()

    def count_tellers(memories: Sequence[Memory], passed: Sequence[Memory]) -> None:
        """The rumours spread at the event, and the news a `told` passed its listener."""
        told = [memory for memory in memories if memory.source in ("told", "rumour")]
        rumours.update(
            memory.source_entity for memory in [*passed, *told] if memory.source_entity is not None
        )

    policy = resolve(TOWN_POLICY, None)
    projector = Projector(lambda tenant, world: policy, on_formed=count_tellers, changes=True)
    replayed = replayed_change_ids(TOWN, projector)

    worker = WorkerProcess(settings, tmp_path / "worker.log").start()
    try:
        send_events(settings, [*TOWN, *TOWN[:40]])  # the repeats: duplicates, nothing changes
        read_topic(settings, settings.topics.acks, acked(len(TOWN), 40), timeout=180)
        feed = feed_holding(settings, replayed)
        ids = [change["change_id"] for change in feed]
        assert len(ids) == len(set(ids)), "each change once: the repeated events changed nothing"
        lines = tmp_path / "changes.ndjson"
        lines.write_bytes(b"\n".join(orjson.dumps(change) for change in feed))
        db = duckdb.connect()
        db.execute(
            "CREATE TABLE changes AS SELECT * FROM read_json_auto(?, "
            "format = 'newline_delimited', sample_size = -1)",
            [str(lines)],
        )
        assert {row[0] for row in db.execute("SELECT change_id FROM changes").fetchall()} == (
            replayed
        )

        tellers = db.execute(WHO_PASSED_MOST).fetchall()
        assert tellers == sorted(rumours.items(), key=lambda item: (-item[1], item[0]))
        assert tellers[0][1] > 1

        world, character, entity = db.execute(BUSIEST_RELATION).fetchone() or ()
        assert character in KEEPING  # moved by persistent memories alone
        moves = db.execute(RELATION_OVER_STORY_TIME, [world, character, entity]).fetchall()
        assert len(moves) > 2
        assert [seq for _, seq, _, _ in moves] == sorted(seq for _, seq, _, _ in moves)
        for _, seq, feeling, memories in moves:
            read = get(
                settings,
                f"/v2/memory/runtime/npcs/{character}?world_instance_id={world}"
                f"&timeline_id=main&as_of_seq={seq}",
            )
            shown = {relation["entity_id"]: relation for relation in read["relations"]}[entity]
            assert (shown["feeling"], shown["memories"], shown["last_seq"]) == (
                feeling,
                memories,
                seq,
            )
    finally:
        worker.stop()


@pytest.mark.integration
def test_a_worker_with_the_feed_off_has_no_changes_topic(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    settings = unique_settings(kafka_bootstrap, tmp_path / "data", changes=False)
    set_policy(settings)
    worker = WorkerProcess(settings, tmp_path / "worker.log").start()
    try:
        send_events(settings, TOWN[:100])
        read_topic(settings, settings.topics.acks, acked(100, 0), timeout=120)
    finally:
        worker.stop()
    assert settings.topics.changes == ""
    assert f"{settings.topic_prefix}.changes" not in topics_on(settings)


@pytest.mark.integration
def test_changes_sent_in_batches_arrive_one_record_each_in_the_order_sent(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    settings = unique_settings(kafka_bootstrap, tmp_path / "data")
    asyncio.run(ensure_topics(settings))
    records = [orjson.dumps({"n": n, "padding": "x" * 400}) for n in range(600)]  # many batches

    async def send() -> list[RecordMetadata]:
        producer = AIOKafkaProducer(bootstrap_servers=kafka_bootstrap)
        await producer.start()
        try:
            feed = BatchSender(lambda: producer, settings.topics.changes)
            deliveries = [
                delivery
                for start in range(0, len(records), 13)  # a message's dozen changes at a time
                for delivery in await feed.send(1, b"town-0", records[start : start + 13])
            ]
            return list(await asyncio.gather(*deliveries))
        finally:
            await producer.stop()

    stored = asyncio.run(send())
    assert {metadata.partition for metadata in stored} == {1}
    feed = read_topic(settings, settings.topics.changes, lambda got: len(got) >= 600, timeout=60)
    assert [change["n"] for change in feed] == list(range(600))


def test_with_the_feed_off_a_redelivery_sends_no_change_an_earlier_release_kept(
    tmp_path: Path,
) -> None:
    """Outbox rows of earlier releases kept their changes; with RUMOURMILL_CHANGES=false they
    went to a topic named '' (the send failed, the worker stopped, on every redelivery)."""
    settings = Settings(broker="127.0.0.1:1", data_dir=tmp_path, app_id="feed-off", changes=False)
    mill = create_app(settings)
    kept = Intake(redelivered=True, changes={"save-1": [b'{"change_id": "c-1"}']})
    assert asyncio.run(asyncio.wait_for(mill.send_changes([kept]), 10)) == []
