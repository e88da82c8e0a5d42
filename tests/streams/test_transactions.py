"""Events a game backend writes in Kafka transactions (exactly once), on a real Apache Kafka
broker: the worker and `rumourmill rebuild` take in what the transactions committed, never an
aborted one's events, and a partition whose last offset is a commit marker is no event short."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import orjson
import pytest
from aiokafka import AIOKafkaProducer

from streams.kafka_clients import kafka_options
from streams.rebuild import rebuild
from streams.replay import replay_lines
from streams.settings import Settings
from streams.topics import ensure_topics
from tests.streams.test_worker import acks_for, get_json
from tests.support import WorkerProcess, event, unique_settings

pytestmark = pytest.mark.integration

COMMITTED = [event("save-1", 1), event("save-1", 2), event("save-1", 3)]
ABORTED = event("save-1", 3, key="crime.purse-stolen", actor="npc-rook", target="npc-mara")
"""The game took the theft back: its transaction was aborted, and seq 3 sent again as it was."""


async def send_in_transactions(settings: Settings) -> None:
    """Seqs 1 and 2 committed, the theft at 3 aborted, then seq 3 committed."""
    producer = AIOKafkaProducer(**kafka_options(settings), transactional_id=settings.app_id)
    await producer.start()
    try:
        for batch, commit in ((COMMITTED[:2], True), ([ABORTED], False), (COMMITTED[2:], True)):
            await producer.begin_transaction()
            for value in batch:
                await producer.send(settings.topics.events, orjson.dumps(value), key=b"save-1")
            if commit:
                await producer.commit_transaction()
            else:
                await producer.abort_transaction()
    finally:
        await producer.stop()


def test_an_aborted_transactions_events_are_never_taken_in(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    settings = unique_settings(kafka_bootstrap, tmp_path / "data", partitions=1)
    asyncio.run(ensure_topics(settings))
    asyncio.run(send_in_transactions(settings))
    worker = WorkerProcess(settings, tmp_path / "worker.log").start()
    try:
        acks: list[dict[str, Any]] = acks_for(settings, "save-1", 3)
        assert [(ack["seq"], ack["outcome"]) for ack in acks] == [
            (1, "processed"),
            (2, "processed"),
            (3, "processed"),
        ]
        clean = replay_lines([orjson.dumps(value) for value in COMMITTED])
        digest = clean.digests[("default", "save-1")]
        assert get_json(settings, "/v2/admin/digest?world_instance_id=save-1")["digest"] == digest
    finally:
        worker.stop()
    target = settings.model_copy(
        update={"app_id": f"{settings.app_id}-rebuilt", "data_dir": tmp_path / "rebuilt"}
    )
    rebuilt = asyncio.run(rebuild(settings, target, stall_seconds=20))
    assert rebuilt.events == len(COMMITTED)
    assert rebuilt.digests == {("default", "save-1"): digest}


def test_a_rebuild_folds_what_was_committed_while_a_transaction_is_open(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    """The game is mid-transaction as the rebuild starts: the log's end holds its event, which
    no committed read reaches until the transaction ends; the rebuild waited for it, stalled and
    failed. It folds what was committed."""
    settings = unique_settings(kafka_bootstrap, tmp_path / "data", partitions=1)
    asyncio.run(ensure_topics(settings))
    target = settings.model_copy(
        update={"app_id": f"{settings.app_id}-rebuilt", "data_dir": tmp_path / "rebuilt"}
    )

    async def rebuild_while_open() -> int:
        producer = AIOKafkaProducer(**kafka_options(settings), transactional_id=settings.app_id)
        await producer.start()
        try:
            async with producer.transaction():
                for value in COMMITTED:
                    await producer.send(settings.topics.events, orjson.dumps(value), key=b"save-1")
            await producer.begin_transaction()
            await producer.send(settings.topics.events, orjson.dumps(ABORTED), key=b"save-1")
            await producer.flush()
            rebuilt = await rebuild(settings, target, stall_seconds=10)
            await producer.abort_transaction()
            return rebuilt.events
        finally:
            await producer.stop()

    assert asyncio.run(rebuild_while_open()) == len(COMMITTED)
