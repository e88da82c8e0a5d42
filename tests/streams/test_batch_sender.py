"""A partition's acks and changes leave in order: after a batch fails, none of its partition's
later batches is sent, and each fails as it did."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any, cast

import pytest
from aiokafka.errors import KafkaTimeoutError
from aiokafka.producer.message_accumulator import BatchBuilder
from aiokafka.structs import RecordMetadata, TopicPartition

from streams.batch_sender import BatchSender

FAILURE = KafkaTimeoutError("the broker took too long")


@dataclass
class Producer:
    """Stands for aiokafka's producer: batches of one record each, and which of them (in the
    order they were made) were handed to it; the first it is handed fails (as it is handed, or
    later as it is delivered)."""

    fails_at: str
    made: list[BatchBuilder] = field(default_factory=list)
    handed: list[tuple[int, int]] = field(default_factory=list)
    """(partition, number of the batch in `made`) of each batch handed."""

    def create_batch(self) -> BatchBuilder:
        self.made.append(BatchBuilder(batch_size=1, compression_type=0))  # one record fills it
        return self.made[-1]

    async def send_batch(
        self, batch: BatchBuilder, topic: str, *, partition: int
    ) -> asyncio.Future[RecordMetadata]:
        await asyncio.sleep(0)  # aiokafka waits until the batch before has left
        first = batch is self.made[0]
        if first and self.fails_at == "handing":
            raise FAILURE
        self.handed.append((partition, self.made.index(batch)))
        delivered = asyncio.get_running_loop().create_future()
        if first:
            delivered.set_exception(FAILURE)
        else:
            offset = len(self.handed)
            tp = TopicPartition(topic, partition)
            delivered.set_result(RecordMetadata(topic, partition, tp, offset, -1, 0, 0))
        return delivered


async def outcomes(futures: list[asyncio.Future[RecordMetadata]]) -> list[Any]:
    return await asyncio.gather(*futures, return_exceptions=True)


@pytest.mark.parametrize(
    ("fails_at", "handed"),
    [("handing", []), ("delivery", [0, 1])],  # the second was on its way as the first failed
)
def test_after_a_failed_batch_the_partitions_later_batches_are_not_sent_and_fail_with_it(
    fails_at: str, handed: list[int]
) -> None:
    producer = Producer(fails_at)
    sender = BatchSender(lambda: cast(Any, producer), "changes")

    async def run() -> tuple[list[Any], list[Any], list[Any]]:
        sent = await sender.send(0, b"town", [b"first", b"second", b"third", b"fourth"])
        failed = await outcomes(sent)
        later = await outcomes(await sender.send(0, b"town", [b"later"]))
        elsewhere = await outcomes(await sender.send(1, b"village", [b"elsewhere"]))
        return failed, later, elsewhere

    failed, later, elsewhere = asyncio.run(run())
    assert [outcome is FAILURE for outcome in failed] == [True, not handed, True, True]
    assert later == [FAILURE]
    assert len(producer.made) == 5  # the later records of partition 0 made no batch
    assert producer.handed == [(0, batch) for batch in handed] + [(1, 4)]
    assert [metadata.partition for metadata in elsewhere] == [1]  # other partitions go on
