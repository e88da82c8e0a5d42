"""The changelog's record batches: one record per state key, events never cut in two, each
sent after what it must follow.

Recovery lays the records over an empty RocksDB in order, so the batches must hold exactly the
last write of every key (deletes as tombstones, an empty value as an empty value), and every
event must sit whole in one batch unless it alone is larger than a batch.
"""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import cast

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.errors import ProducerClosed
from aiokafka.producer.message_accumulator import BatchBuilder
from aiokafka.structs import RecordMetadata
from hypothesis import given
from hypothesis import strategies as st

from streams.changelog import ChangelogWriter, PartitionWrites, Records, record_size
from streams.process_stalls import ProcessStalls, WorkerStalled
from streams.topics import ensure_topics
from tests.support import unique_settings

Event = list[tuple[bytes, bytes | None]]


def batched(events: list[Event], limit: int) -> list[Records]:
    writes = PartitionWrites(limit)
    for event in events:
        for key, value in event:
            writes.write(key, value)
        writes.end_event()
    return writes.batches


def laid(batches: list[Records]) -> dict[bytes, bytes | None]:
    """What recovery leaves: each record in order, the last of a key winning."""
    state: dict[bytes, bytes | None] = {}
    for batch in batches:
        state.update(batch)
    return state


def test_the_last_write_of_a_key_wins_and_a_delete_stays_a_tombstone() -> None:
    events: list[Event] = [
        [(b"memory", b"the sailor fell"), (b"empty", b""), (b"gone", b"soon")],
        [(b"memory", b"the sailor drowned"), (b"gone", None), (b"outbox", b"acks")],
    ]
    [batch] = batched(events, 10_000)
    assert batch == {
        b"memory": b"the sailor drowned",
        b"empty": b"",
        b"gone": None,
        b"outbox": b"acks",
    }


def test_an_event_without_writes_adds_no_batch() -> None:
    assert batched([[], []], 10_000) == []
    assert batched([[(b"k", b"v")], []], 10_000) == [{b"k": b"v"}]


def test_records_follow_the_order_of_their_last_write() -> None:
    [batch] = batched([[(b"position", b"1"), (b"memory", b"m"), (b"position", b"2")]], 10_000)
    assert list(batch) == [b"memory", b"position"]


def test_events_that_do_not_fit_start_a_new_batch_whole() -> None:
    event: Event = [(b"a%d" % number, b"x" * 100) for number in range(3)]
    other: Event = [(b"b%d" % number, b"y" * 100) for number in range(3)]
    size = sum(record_size(key, value) for key, value in event)
    batches = batched([event, other], limit=61 + size + size // 2)
    assert batches == [dict(event), dict(other)]
    assert batched([event, other], limit=61 + 2 * size) == [dict(event) | dict(other)]


def test_an_event_larger_than_a_batch_is_split_in_the_order_of_its_writes() -> None:
    event: Event = [(b"k%d" % number, b"v" * 50) for number in range(5)]
    batches = batched([[(b"small", b"1")], event, [(b"after", b"2")]], limit=200)
    assert batches[0] == {b"small": b"1"}
    assert [key for batch in batches[1:-1] for key in batch] == [key for key, _ in event]
    assert batches[-1] == {b"after": b"2"}, "the next event does not join a split one"


@given(
    st.lists(
        st.lists(
            st.tuples(
                st.sampled_from([b"a", b"b", b"c", b"d" * 30]), st.none() | st.binary(max_size=120)
            ),
            max_size=6,
        ),
        max_size=12,
    ),
    st.integers(120, 800),
)
def test_recovery_from_the_batches_equals_the_writes_and_each_fits(
    events: list[Event], limit: int
) -> None:
    batches = batched(events, limit)
    expected: dict[bytes, bytes | None] = {}
    for event in events:
        expected.update(event)
    assert laid(batches) == expected
    for batch in batches:
        size = 61 + sum(record_size(key, value) for key, value in batch.items())
        assert len(batch) == 1 or size <= limit


@pytest.mark.integration
def test_a_batch_waits_for_what_it_must_follow_and_is_never_sent_after_a_failure(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    """The change feed's deliveries gate the changelog batch of their events: stored only once
    they are, and never if one fails (nor any later batch of the partition)."""
    settings = unique_settings(kafka_bootstrap, tmp_path / "data")
    topic = settings.topics.acks  # any topic of this test's own, with its partitions
    asyncio.run(ensure_topics(settings))

    async def run() -> None:
        producer = AIOKafkaProducer(bootstrap_servers=kafka_bootstrap)
        await producer.start()
        try:
            writer = ChangelogWriter()
            loop = asyncio.get_running_loop()
            feed: asyncio.Future[None] = loop.create_future()
            [gated] = await writer.send(producer, topic, 0, [{b"k": b"1"}], after=[feed])
            [later] = await writer.send(producer, topic, 0, [{b"k": b"2"}])
            await asyncio.sleep(1.0)  # sent at once, both would be stored within milliseconds
            assert not gated.done() and not later.done()
            feed.set_result(None)
            assert (await gated).offset == 0 and (await later).offset == 1

            failed: asyncio.Future[None] = loop.create_future()
            [refused] = await writer.send(producer, topic, 1, [{b"k": b"3"}], after=[failed])
            [behind] = await writer.send(producer, topic, 1, [{b"k": b"4"}])
            failed.set_exception(RuntimeError("the feed's broker went away"))
            for delivery in (refused, behind):
                with pytest.raises(RuntimeError, match="went away"):
                    await delivery
            ends = await end_offsets(kafka_bootstrap, topic, [0, 1])
            assert ends == {0: 2, 1: 0}
        finally:
            await producer.stop()

    asyncio.run(run())


async def end_offsets(bootstrap: str, topic: str, partitions: list[int]) -> dict[int, int]:
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap)
    await consumer.start()
    try:
        ends = await consumer.end_offsets([TopicPartition(topic, p) for p in partitions])
        return {tp.partition: offset for tp, offset in ends.items()}
    finally:
        await consumer.stop()


class HeldProducer:
    """Stands for aiokafka's producer: takes each batch and keeps its delivery pending, until
    `stop` fails them all as a stopping producer does."""

    def __init__(self) -> None:
        self.held: list[asyncio.Future[RecordMetadata]] = []

    def create_batch(self) -> BatchBuilder:
        return BatchBuilder(batch_size=1 << 16, compression_type=0)

    async def send_batch(
        self, batch: BatchBuilder, topic: str, *, partition: int
    ) -> asyncio.Future[RecordMetadata]:
        self.held.append(asyncio.get_running_loop().create_future())
        return self.held[-1]

    def stop(self) -> None:
        for delivery in self.held:
            delivery.set_exception(ProducerClosed())


def test_deliveries_their_waiter_gave_up_on_fail_quietly_as_the_producer_stops(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A rebuild interrupted while it waited for its sends (Ctrl-C): the producer's stop then
    failed each batch, and settling the delivery its waiter had cancelled logged `Exception in
    callback ... InvalidStateError` with a traceback."""

    async def interrupted() -> None:
        producer, writer = HeldProducer(), ChangelogWriter()
        sent = cast(AIOKafkaProducer, producer)
        deliveries = await writer.send(sent, "changelog", 0, [{b"k": b"v"}, {b"k": b"w"}])
        await asyncio.sleep(0.01)  # handed to the producer
        waiting = asyncio.ensure_future(asyncio.gather(*deliveries))
        await asyncio.sleep(0.01)
        waiting.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiting
        producer.stop()
        await asyncio.sleep(0.05)

    with caplog.at_level(logging.ERROR, logger="asyncio"):
        asyncio.run(interrupted())
    assert [record.getMessage() for record in caplog.records] == []


def test_a_batch_the_process_stood_still_behind_is_refused_as_it_goes_to_the_producer() -> None:
    """A changelog batch waits for the change feed's deliveries: a pause during that wait (after
    the batch's own check) let it go to the producer after another worker took the partition."""

    async def run() -> None:
        now = [100.0]
        stalls = ProcessStalls(8.0, 10.0, lambda: now[0])
        for _ in range(4):
            stalls.tick()
            now[0] += 0.5
        producer = HeldProducer()
        writer = ChangelogWriter(stalls=stalls)
        feed: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        [gated] = await writer.send(
            cast(AIOKafkaProducer, producer), "t", 0, [{b"k": b"1"}], [feed]
        )
        now[0] += 20.0  # paused, then resumed: the feed's delivery is read
        feed.set_result(None)
        with pytest.raises(WorkerStalled, match="stood still for 20"):
            await gated
        assert producer.held == []  # nothing went to the producer

    asyncio.run(run())
