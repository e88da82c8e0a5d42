"""Publishing NDJSON event files to `rumourmill.events`, keyed by world."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from aiokafka import AIOKafkaProducer
from aiokafka.record.default_records import DefaultRecordBatchBuilder
from pydantic import ValidationError

from projections.deletion import deletes_tenant
from projections.delivery import invalid_because, world_key
from projections.event_keys import TENANT_DELETED
from projections.intake import DEFAULT_MAX_EVENT_BYTES, too_large
from schemas import Event
from streams.codec import key_given_twice
from streams.kafka_clients import kafka_options
from streams.settings import Settings

PRODUCER_REQUEST_BYTES = 1_048_576
"""The most one record `publish` sends may be, as Kafka's producer measures it (its
`max_request_size`, aiokafka's default). The producer refuses a larger one only when it comes
to it, the lines before it sent: a `--raw` line over it is refused with the file's other
problems, before anything is sent (a checked line is far smaller: `RUMOURMILL_MAX_EVENT_BYTES`)."""


@dataclass(frozen=True)
class Line:
    """One line of an event file, ready to send (or the reason it is not)."""

    number: int
    raw: bytes
    key: bytes | None
    problem: str | None = None
    every_partition: bool = False
    """A tenant's deletion: sent to each partition, as every worker must see it (`rumourmill
    tenant delete` sends it so); keyed by its world `*`, it reached one, and deleted the
    tenant's worlds there only."""


def read_lines(
    lines: Iterable[bytes], *, raw: bool = False, max_event_bytes: int = DEFAULT_MAX_EVENT_BYTES
) -> Iterator[Line]:
    """Each non-blank line of a file's `lines`; validated unless `raw` (sent as it is, for
    tests, unless Kafka's producer would refuse it)."""
    for number, line in enumerate(lines, start=1):
        data = line.rstrip(b"\r\n")
        if data.strip():
            yield parse_line(number, data, raw=raw, max_event_bytes=max_event_bytes)


def parse_line(
    number: int, data: bytes, *, raw: bool = False, max_event_bytes: int = DEFAULT_MAX_EVENT_BYTES
) -> Line:
    """Key a line by its world; refuse one the worker would (over `max_event_bytes`, the
    worker's `RUMOURMILL_MAX_EVENT_BYTES`, or no valid event). A `raw` line may be anything,
    and is refused only over what Kafka's producer takes (`PRODUCER_REQUEST_BYTES`)."""
    if raw:
        key = world_key(data)
        problem = over_request_limit(key, data)
        return Line(number, data, key, problem, problem is None and deletes_tenant(data))
    oversized = too_large(data, max_event_bytes)
    if oversized is not None:
        return Line(number, data, None, f"{oversized} (RUMOURMILL_MAX_EVENT_BYTES)")
    try:
        event = Event.model_validate_json(data)
    except ValidationError as error:
        return Line(number, data, None, invalid_because(data, error))
    if (twice := key_given_twice(data)) is not None:  # the worker would keep the last
        return Line(number, data, None, f"{twice!r} is given twice in one object: give it once")
    return Line(number, data, event.world_instance_id.encode(), None, event.key == TENANT_DELETED)


def over_request_limit(key: bytes | None, value: bytes) -> str | None:
    """Why Kafka's producer would refuse this record, or None."""
    size = DefaultRecordBatchBuilder.estimate_size_in_bytes(key, value, [])
    if size > PRODUCER_REQUEST_BYTES:
        return (
            f"message is {size} bytes as a Kafka record, over the producer's request limit of "
            f"{PRODUCER_REQUEST_BYTES}"
        )
    return None


async def send_one(
    settings: Settings, topic: str, key: bytes, value: bytes, *, every_partition: bool = False
) -> int:
    """Send one message and wait until the broker has it; with `every_partition`, a copy to
    each partition of the topic (what every worker must see). Returns the copies sent."""
    producer = AIOKafkaProducer(**kafka_options(settings), acks="all")
    await producer.start()
    try:
        partitions = sorted(await producer.partitions_for(topic)) if every_partition else [None]
        for partition in partitions:
            await producer.send_and_wait(topic, value=value, key=key, partition=partition)
    finally:
        await producer.stop()
    return len(partitions)


async def publish(settings: Settings, topic: str, lines: list[Line]) -> int:
    """Send lines in order (one partition per world keeps a world's order; a tenant's deletion
    goes to each partition, after the lines before it there); returns the messages sent, a
    deletion's copies counted (each is acked apart)."""
    producer = AIOKafkaProducer(
        **kafka_options(settings),
        acks="all",
        linger_ms=5,
        max_request_size=PRODUCER_REQUEST_BYTES,
    )
    await producer.start()
    try:
        every = sorted(await producer.partitions_for(topic))
        pending = [
            await producer.send(topic, value=line.raw, key=line.key, partition=partition)
            for line in lines
            for partition in (every if line.every_partition else [None])
        ]
        for future in pending:
            await future
    finally:
        await producer.stop()
    return len(pending)
