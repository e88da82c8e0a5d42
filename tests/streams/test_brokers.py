"""The local brokers really serve Kafka clients, and Apache Kafka keeps data across restarts."""

from __future__ import annotations

import asyncio
import uuid

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

from localbroker import LocalBroker, TansuBroker, port_open
from streams.dev import apache_kafka
from streams.durability import read_changelog
from streams.rebuild import events_to_fold
from streams.settings import Settings
from streams.topics import ensure_topics


async def _produce(bootstrap: str, topic: str, value: bytes) -> None:
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all")
    await producer.start()
    try:
        await producer.send_and_wait(topic, value)
    finally:
        await producer.stop()


async def _consume_one(bootstrap: str, topic: str, group: str) -> bytes:
    """Next value for `group`, committing it, so a later call resumes after it."""
    consumer = AIOKafkaConsumer(
        topic,
        bootstrap_servers=bootstrap,
        group_id=group,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
    )
    await consumer.start()
    try:
        msg = await asyncio.wait_for(consumer.getone(), timeout=60)
        await consumer.commit()
        assert isinstance(msg.value, bytes)
        return msg.value
    finally:
        await consumer.stop()


def _roundtrip(broker: LocalBroker, topic: str, group: str, value: bytes) -> bytes:
    asyncio.run(_produce(broker.bootstrap, topic, value))
    return asyncio.run(_consume_one(broker.bootstrap, topic, group))


@pytest.mark.integration
@pytest.mark.timeout(300)
def test_apache_kafka_produce_consume_restart() -> None:
    topic, group = f"t-{uuid.uuid4().hex[:8]}", "g"
    broker = apache_kafka(Settings.from_env())
    with broker:
        assert broker.bootstrap.startswith("127.0.0.1:")
        assert _roundtrip(broker, topic, group, b"before") == b"before"

        broker.restart()  # clean shutdown: data and committed offsets survive
        assert _roundtrip(broker, topic, group, b"after") == b"after"

        broker.restart(kill=True)  # crash: still recovers its log
        assert _roundtrip(broker, topic, group, b"crash") == b"crash"
        ports = (broker.port, broker.controller_port)
    assert not any(port_open(p) for p in ports)
    assert not broker.running


@pytest.mark.integration
@pytest.mark.timeout(120)
def test_tansu_produce_consume() -> None:
    topic = f"t-{uuid.uuid4().hex[:8]}"
    with TansuBroker() as broker:
        assert _roundtrip(broker, topic, "g", b"hello") == b"hello"
        broker.restart()  # memory-only: comes back empty, on the same port
        assert _roundtrip(broker, topic, "g2", b"again") == b"again"
        port = broker.port
    assert not port_open(port)


@pytest.mark.integration
@pytest.mark.timeout(120)
def test_tansu_takes_a_second_worker_start_and_a_rebuild_look_at_existing_topics() -> None:
    """`make run`'s broker: a worker started again, or `rumourmill rebuild`, reads the existing
    topics' configs, its state changelog's too (Tansu closed the connection when a request
    named them)."""
    with TansuBroker() as broker:
        settings = Settings(broker=broker.bootstrap)
        asyncio.run(ensure_topics(settings, changelog=True))  # the first start: topics made
        asyncio.run(ensure_topics(settings, changelog=True))  # again: their configs checked
        to_fold = asyncio.run(events_to_fold(settings, None))
        changelog = asyncio.run(read_changelog(settings, settings.topics.events, [0]))
    assert to_fold == {partition: (0, 0) for partition in range(settings.partitions)}
    assert changelog.end == {0: 0}  # a start's check of its local copies reads it so
