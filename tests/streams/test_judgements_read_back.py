"""The judgements topic read back on Apache Kafka (`streams.judging.read_to_end`): as compaction
leaves it, and stopped when the broker gives nothing more (a rebuild's broker gone)."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest
from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.errors import KafkaTimeoutError

from projections.judgements import event_judgements, judgement_key, position_of
from schemas.judgements import EventJudgements, RecordedJudgement
from streams.judging import read_to_end
from streams.publish import send_one
from streams.settings import Settings
from streams.topics import ensure_topics
from tests.support import unique_settings

pytestmark = pytest.mark.integration

MADE = RecordedJudgement(npc_id="npc-mara", belief_id="b", judgement="feeling", reason="x")


def published(settings: Settings) -> list[EventJudgements]:
    """Three records of one world on partition 0 of the judgements topic, the second twice."""
    records = [event_judgements(("default", "save-1", "main", seq, ""), [MADE]) for seq in (1, 2)]
    again = event_judgements(("default", "save-1", "main", 2, ""), [MADE, MADE])
    for record in (*records, again):
        key = judgement_key(position_of(record))
        asyncio.run(send_one(settings, settings.topics.judgements, key, record.to_bytes()))
    return [records[0], again]


async def read(settings: Settings, past_end: int, stall_seconds: float) -> list[EventJudgements]:
    """Partition 0 read from its start to `past_end` offsets beyond its end."""
    consumer = AIOKafkaConsumer(bootstrap_servers=settings.bootstrap, group_id=None)
    await consumer.start()
    try:
        tp = TopicPartition(settings.topics.judgements, 0)
        consumer.assign([tp])
        await consumer.seek_to_beginning(tp)
        end = (await consumer.end_offsets([tp]))[tp]
        return await read_to_end(consumer, tp, end + past_end, stall_seconds)
    finally:
        await consumer.stop()


def test_the_topic_is_read_to_its_end_and_a_read_given_nothing_more_stops(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    """Read to its end, each key's latest record; a read that the broker gives nothing for
    `stall_seconds` before its end stops with the reason (a rebuild's broker gone: its read
    would wait for ever, the progress bar standing still), rather than waiting on."""
    settings = unique_settings(kafka_bootstrap, tmp_path, partitions=1)
    asyncio.run(ensure_topics(settings))
    latest = published(settings)
    assert asyncio.run(read(settings, past_end=0, stall_seconds=3)) == latest
    began = time.monotonic()
    with pytest.raises(KafkaTimeoutError, match=r"partition 0: nothing read for 3 s, 1 offset"):
        asyncio.run(read(settings, past_end=1, stall_seconds=3))
    assert time.monotonic() - began < 30
