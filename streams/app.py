"""The Faust app: topics, the state table and the agent that feeds the projector.

Everything domain-shaped happens in `projections.Projector`; this module only moves bytes
between Kafka and it. At-least-once with one in-flight message per partition (concurrency=1,
faust-streaming #606); redelivery is harmless because the projector recognises it.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from typing import Any

import faust
from aiokafka.partitioner import murmur2
from faust.types import EventT, TableT

from projections.intake import SourceMessage
from projections.policy import PolicyBook
from projections.projector import Projector
from schemas import Ack, DeadLetter
from streams import codec
from streams.policies import PolicyFeed
from streams.settings import Settings
from streams.state import RocksTransaction
from streams.web import register_views

STATE_TABLE = "state"
PRODUCER_BUFFER_MESSAGES = 2000


@dataclass(frozen=True)
class Rumourmill:
    """The app and the handles the web views and tests need."""

    app: faust.App
    settings: Settings
    state: TableT[bytes, bytes]
    projector: Projector

    def transaction(self, partition: int) -> RocksTransaction:
        """State access for one partition, writing through the table's changelog."""
        db = self.state.data._db_for_partition(partition)  # type: ignore[attr-defined]
        return RocksTransaction(db, self._write)

    def discard_local_tables(self) -> None:
        """Start from the changelog alone: the local RocksDB copy is only a cache of it.

        After a crash the local copy can hold writes the changelog never received, and Faust's
        recovery would lay older changelog values over some keys but not others. The changelog
        is always a prefix of the writes, which the projector is built to resume from.
        """
        shutil.rmtree(self.app.conf.tabledir, ignore_errors=True)

    def read_transaction(self, world_id: str) -> RocksTransaction:
        """Read-only state access for the partition that holds `world_id`."""
        partition = partition_of(world_id.encode(), self.settings.partitions)
        db = self.state.data._db_for_partition(partition)  # type: ignore[attr-defined]
        return RocksTransaction(db, _read_only)

    def _write(self, key: bytes, value: bytes | None) -> None:
        if value is None:
            del self.state[key]
        else:
            self.state[key] = value


def create_app(settings: Settings) -> Rumourmill:
    """Build the worker's Faust app from settings (no I/O until it starts)."""
    app = faust.App(
        settings.app_id,
        broker=f"kafka://{settings.broker}",
        store="rocksdb://",
        datadir=str(settings.data_dir),
        web_host=settings.web_host,
        web_bind=settings.web_host,
        web_port=settings.web_port,
        canonical_url=settings.canonical_url,
        topic_partitions=settings.partitions,
        topic_replication_factor=settings.replication,
        processing_guarantee="at_least_once",
        value_serializer=codec.CODEC_NAME,
        key_serializer="raw",
        autodiscover=False,
        table_standby_replicas=0,
        broker_session_timeout=10.0,  # a crashed worker's partitions move on after 10 s
        broker_heartbeat_interval=2.0,
    )
    topic_options: dict[str, Any] = {
        "partitions": settings.partitions,
        "key_type": bytes,
        "key_serializer": "raw",
    }
    events = app.topic(
        settings.events_topic, value_type=bytes, value_serializer="raw", **topic_options
    )
    acks = app.topic(settings.acks_topic, **topic_options)
    deadletters = app.topic(settings.deadletter_topic, **topic_options)
    block_cache = settings.block_cache_mb * 1024 * 1024
    state = app.Table(
        STATE_TABLE,
        key_type=bytes,
        value_type=bytes,  # bytes in, bytes out: Faust picks the raw codec for bytes
        partitions=settings.partitions,
        options={"block_cache_size": block_cache, "write_buffer_size": block_cache},
    )
    policies = PolicyFeed(settings.broker, settings.policies_topic)
    projector = Projector(policies=PolicyBook(policies), max_event_bytes=settings.max_event_bytes)
    mill = Rumourmill(app, settings, state, projector)
    register_views(mill)

    @app.task  # type: ignore[untyped-decorator]
    async def widen_producer_buffer() -> None:
        """Each event writes a few table keys; let a batch of events buffer their changelog."""
        app.producer.buffer.max_messages = PRODUCER_BUFFER_MESSAGES

    @app.task  # type: ignore[untyped-decorator]
    async def follow_policies() -> None:
        await policies.follow()

    @app.agent(events, concurrency=1)
    async def ingest(stream: faust.StreamT[bytes]) -> None:
        event: EventT[bytes]
        await policies.caught_up.wait()
        async for event in stream.events():
            message = event.message
            try:
                intake = mill.projector.receive(
                    mill.transaction(message.partition),
                    SourceMessage(
                        topic=message.topic,
                        partition=message.partition,
                        offset=message.offset,
                        key=message.key,
                        value=message.value or b"",
                    ),
                )
            except Exception as error:  # a bug, not bad input: stop rather than skip the event
                await app.crash(error)
                raise
            for ack in intake.acks:
                await acks.send(key=_world_key(ack, message.key), value=ack, force=True)
            for letter in intake.dead_letters:
                await deadletters.send(key=message.key, value=letter, force=True)

    return mill


def partition_of(key: bytes, partitions: int) -> int:
    """The partition Kafka's default partitioner gives `key` (murmur2, as producers use)."""
    hashed: int = murmur2(key)
    return (hashed & 0x7FFFFFFF) % partitions


def _read_only(key: bytes, value: bytes | None) -> None:
    raise PermissionError("reads never write state")


def _world_key(item: Ack | DeadLetter, fallback: bytes | None) -> bytes | None:
    """Key outputs by world, like the events, so a world's acks stay in order."""
    world = item.world_instance_id
    return fallback if world is None else world.encode()
