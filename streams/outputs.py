"""Where what a message produced goes: its acks, dead letters and change records, each on its
topic, acks and changes keyed by their world (on the world's partition, so a world's stay in
order), a dead letter by the message's key.

The worker sends every message's; a rebuild beside stopped workers sends those of the events
they had not committed (`streams.rebuild`): after a switch to its app id, no worker would.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence

from aiokafka import AIOKafkaProducer
from aiokafka.structs import RecordMetadata

from projections.delivery import kept_key
from schemas import Ack, DeadLetter
from schemas.changes import ChangeRecords
from streams import codec
from streams.batch_sender import BatchSender
from streams.partitioning import world_partition
from streams.settings import Settings

Delivery = asyncio.Future[RecordMetadata]
"""Resolves once a record (or a batch of them) is stored in Kafka."""


_ack_bytes = Ack.__pydantic_serializer__.to_json
"""An ack's JSON, as `codec.dumps` writes it (no float to format apart), in a third of its
time."""


def outputs_named(settings: Settings) -> str:
    """What a message's outputs are under `settings`, as a message names them (no change
    records with the change feed off)."""
    if settings.changes:
        return "acks, dead letters and change records"
    return "acks and dead letters"


class Outputs:
    """The acks, dead-letter and change-feed topics of `settings`, written through `producer`
    (the feed's records only where it is on)."""

    def __init__(self, producer: Callable[[], AIOKafkaProducer], settings: Settings) -> None:
        topics = settings.topics
        self._producer = producer
        self._partitions = settings.partitions
        self._dead_letters = topics.deadletter
        self._acks = BatchSender(producer, topics.acks)
        self._changes = BatchSender(producer, topics.changes) if topics.changes else None

    @property
    def feed(self) -> bool:
        """Whether change records are published (`RUMOURMILL_CHANGES`)."""
        return self._changes is not None

    async def acks(
        self, acks: Sequence[Ack], message_key: bytes | None, message_partition: int
    ) -> list[Delivery]:
        """Acks keyed by world like the events (so a world's acks stay in order), on the world's
        partition; an ack that names no world goes with its message's key (its start,
        `kept_key`), on that key's partition, or on `message_partition` for a message with none
        (an upgrade's acks all name their world)."""
        deliveries: list[Delivery] = []
        for ack in acks:
            world = ack.world_instance_id
            key = kept_key(message_key) if world is None else world.encode()
            partition = message_partition if key is None else world_partition(key, self._partitions)
            deliveries += await self._acks.send(partition, key, [_ack_bytes(ack)])
        return deliveries

    async def changes(self, changes: ChangeRecords) -> list[Delivery]:
        """Change records, one each keyed by its world, on the world's partition (the feed has
        the events topic's partitions); none with the feed off."""
        if self._changes is None:
            return []
        deliveries: list[Delivery] = []
        for world, records in changes.items():
            key = world.encode()
            deliveries += await self._changes.send(
                world_partition(key, self._partitions), key, records
            )
        return deliveries

    async def dead_letter(self, message_key: bytes | None, letter: DeadLetter) -> Delivery:
        """A dead letter keyed by its message's key (its start), partitioned as Kafka's default
        partitioner puts that key."""
        producer = self._producer()
        sent: Delivery = await producer.send(
            self._dead_letters, codec.dumps(letter), key=kept_key(message_key)
        )
        return sent
