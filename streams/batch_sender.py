"""The worker's way to Kafka for the acks and the change feed: a message's records in one open
batch per partition, and one delivery future per batch rather than one per record.

There are a dozen changes a message and an ack or more. Sent one by one, each would cost the
worker a producer call and a future of its own, more than working the change out. Here the
records of each partition fill an open batch; a sender per partition hands the oldest batch to
the producer as soon as the one before it has left (the producer takes one batch a partition at
a time), so records leave as early as single sends would, and one future tells every message
with records in a batch that they are stored.

As `streams.changelog.ChangelogWriter` does, a failed batch fails every batch of its partition
not yet handed to the producer, and every later send to it: none of them is sent, so nothing
reaches the topic after records that did not (the worker stops at the failure anyway).
"""

from __future__ import annotations

import asyncio
from collections import defaultdict, deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from functools import partial

from aiokafka import AIOKafkaProducer
from aiokafka.producer.message_accumulator import BatchBuilder
from aiokafka.structs import RecordMetadata

MOST_WAITING = 4
"""Batches a partition keeps before the producer takes them: a slow broker slows the sender."""


@dataclass(slots=True)
class _Batch:
    """Records not yet handed to the producer, and the future their delivery resolves."""

    builder: BatchBuilder
    delivered: asyncio.Future[RecordMetadata] = field(
        default_factory=lambda: asyncio.get_running_loop().create_future()
    )


class BatchSender:
    """Sends records to one topic in batches, keeping each partition's records in order."""

    def __init__(self, producer: Callable[[], AIOKafkaProducer], topic: str) -> None:
        self._producer = producer
        self._topic = topic
        self._waiting: defaultdict[int, deque[_Batch]] = defaultdict(deque)
        self._senders: dict[int, asyncio.Task[None]] = {}
        self._failed: dict[int, BaseException] = {}
        """Per partition, the failure of one of its batches: all after it fail with it."""

    async def send(
        self, partition: int, key: bytes | None, values: Iterable[bytes]
    ) -> list[asyncio.Future[RecordMetadata]]:
        """Add the records `values`, keyed `key`, to `partition`'s open batch (a new one when it
        is full); returns the futures that resolve once they are all stored. Waits while
        `MOST_WAITING` full batches wait already, as the producer waits for a full batch. Once a
        batch of `partition` failed, the records are not sent and the future fails as it did."""
        waiting = self._waiting[partition]
        while len(waiting) > MOST_WAITING:
            await asyncio.wait([waiting[0].delivered])
        if (failure := self._failed.get(partition)) is not None:
            refused: asyncio.Future[RecordMetadata] = asyncio.get_running_loop().create_future()
            refused.set_exception(failure)
            return [refused]
        if not waiting:
            waiting.append(_Batch(self._producer().create_batch()))
        batch = waiting[-1]
        deliveries = [batch.delivered]
        for value in values:
            if batch.builder.append(timestamp=None, key=key, value=value) is None:  # full
                batch = _Batch(self._producer().create_batch())
                waiting.append(batch)
                deliveries.append(batch.delivered)
                batch.builder.append(timestamp=None, key=key, value=value)  # takes any first
        if partition not in self._senders:
            self._senders[partition] = asyncio.ensure_future(self._send_waiting(partition))
        return deliveries

    async def _send_waiting(self, partition: int) -> None:
        """Hand `partition`'s batches to the producer, oldest first, until none waits; once one
        failed, fail the rest with it instead."""
        waiting = self._waiting[partition]
        try:
            while waiting:
                batch = waiting.popleft()
                if (failure := self._failed.get(partition)) is not None:
                    batch.delivered.set_exception(failure)
                    continue
                try:
                    sent = await self._producer().send_batch(
                        batch.builder, self._topic, partition=partition
                    )
                except Exception as error:  # their messages are not acked: the worker stops
                    self._failed[partition] = error
                    batch.delivered.set_exception(error)
                    continue
                sent.add_done_callback(partial(self._pass_on, partition, batch.delivered))
        finally:
            del self._senders[partition]

    def _pass_on(
        self,
        partition: int,
        delivered: asyncio.Future[RecordMetadata],
        sent: asyncio.Future[RecordMetadata],
    ) -> None:
        """Resolve `delivered` as the producer resolved `sent`, a batch of `partition`."""
        if sent.cancelled():
            delivered.cancel()
        elif (error := sent.exception()) is not None:
            self._failed.setdefault(partition, error)
            delivered.set_exception(error)
        else:
            delivered.set_result(sent.result())
