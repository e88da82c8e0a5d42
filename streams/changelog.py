"""The state table's changelog: one Kafka record per state key, so compaction can shrink it.

A record's key is the state key and its value the state value; a delete is a tombstone (no
value). Compaction keeps the last record of each key, so the changelog tends to the live state
instead of growing with all history, and recovery replays live keys rather than every event.
Each record carries the `RECORD_HEADER`: a message without it is a changeset of an earlier
release (all the writes of one event, `streams.state.decode_changes`), which recovery still reads.

The writes of consecutive events of one partition go out as one Kafka record batch, which the
broker appends, replicates and hands to a reader whole: an event's writes, its outbox row with
them, are in the changelog all together or not at all. Within a batch the last write of a key
wins (the batch is atomic, so no reader sees a state between two of its events). A batch is
sent only once the partition's previous one is stored, so a lost batch never leaves a later one
behind it in the log.
"""

from __future__ import annotations

import asyncio
from collections import defaultdict, deque
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from aiokafka import AIOKafkaProducer
from aiokafka.producer.message_accumulator import BatchBuilder
from faust.types import RecordMetadata
from faust.types.core import HeadersArg

from projections.record_bounds import BATCH_OVERHEAD, CHANGELOG_HEADROOM, RECORD_OVERHEAD
from streams.process_stalls import ProcessStalls

Records = dict[bytes, bytes | None]
"""State keys and their last value in a batch (None: deleted), in the order of their last
write."""

BATCH_BYTES = 1_000_000
"""The most a record batch holds, below Kafka's default 1 MiB message limit (the producer's
`max_batch_size` is set to it). A batch is cut between events; an event larger than this is
split in the order of its last writes (the projector writes positions after the state they
produced, the outbox row after them, its first record last of all, and only then takes the
events the message released out of the deferral buffer: so each part leaves a state a
redelivery completes, and acks again what the lost outbox row would have re-sent)."""
FORMAT = 2
"""The changelog format this release writes: 1 was a changeset per event, 2 a record per key.
A local copy stamped with an earlier format is not reused (`streams.durability`): recovery must
read the whole changelog to find every changeset to retire."""
RECORD_HEADER = ("r", b"")
"""Marks a per-key record (4 bytes a record)."""


def topic_config(batch_bytes: int = BATCH_BYTES) -> dict[str, str]:
    """The changelog topic's configuration, for record batches of at most `batch_bytes`.

    Compaction once a quarter of the log is overwritten records, so the changelog stays within
    about 4/3 of the live state plus the active segment, which compaction never touches and which
    rolls hourly or at 64 MiB. Deletes are kept a week: a local copy older than that is not reused
    (`streams.durability`), since compaction may have dropped a delete it never saw.
    """
    return {
        "cleanup.policy": "compact",
        "min.cleanable.dirty.ratio": "0.25",
        "segment.ms": str(3_600_000),
        "segment.bytes": str(64 * 1024 * 1024),
        "delete.retention.ms": str(7 * 86_400_000),
        "max.message.bytes": str(batch_bytes + CHANGELOG_HEADROOM),
    }


def record_size(key: bytes, value: bytes | None) -> int:
    """An upper bound of the bytes one record takes in a batch."""
    return len(key) + len(value or b"") + RECORD_OVERHEAD


class PartitionWrites:
    """The writes consecutive events made to one partition, as the record batches to send."""

    def __init__(self, limit: int = BATCH_BYTES) -> None:
        self.limit = limit
        self.batches: list[Records] = []
        self.event: Records = {}
        """The current event's writes, each key moved to the end at its last: `write` adds to
        it, and so does `streams.state.BatchTransaction` itself (a dict operation a write, not a
        call: the agent's commonest)."""
        self._open_size = limit
        """The estimated size of the last batch (`limit` once it takes no more events)."""

    def write(self, key: bytes, value: bytes | None) -> None:
        """A write of the current event (None deletes); a later write of the key replaces it."""
        event = self.event
        event.pop(key, None)
        event[key] = value

    def end_event(self) -> None:
        """The current event is complete: into the open batch if it fits, else a new one."""
        event, self.event = self.event, {}
        if not event:  # a redelivered event: its outputs come from the outbox, nothing changes
            return
        size = (
            RECORD_OVERHEAD * len(event)
            + sum(map(len, event))
            + sum(map(len, filter(None, event.values())))
        )  # `record_size` of each, summed in C
        if self.batches and self._open_size + size <= self.limit:
            last = self.batches[-1]
            for key in event.keys() & last.keys():  # to the end, in the order of last writes
                del last[key]
            last.update(event)
            self._open_size += size
        elif BATCH_OVERHEAD + size <= self.limit:
            self.batches.append(event)
            self._open_size = BATCH_OVERHEAD + size
        else:
            self.batches.extend(_split(event, self.limit))
            self._open_size = self.limit


def _split(event: Records, limit: int) -> Iterator[Records]:
    """An event too large for one batch, in parts of at most `limit` (one record at least)."""
    part: Records = {}
    size = BATCH_OVERHEAD
    for key, value in event.items():
        cost = record_size(key, value)
        if part and size + cost > limit:
            yield part
            part, size = {}, BATCH_OVERHEAD
        part[key] = value
        size += cost
    if part:
        yield part


_HEADERS = [RECORD_HEADER]


def is_record(headers: HeadersArg) -> bool:
    """Whether a changelog message with these headers is a per-key record (not a changeset)."""
    if headers is None:
        return False
    pairs = headers.items() if isinstance(headers, Mapping) else headers
    return any(tuple(pair) == RECORD_HEADER for pair in pairs)


class BatchOverflow(RuntimeError):
    """A record batch refused a record its size estimate allowed (a bug: never split silently)."""


MOST_WAITING = 4
"""Batches of a partition that may wait to be stored before a send waits itself: a slow broker
slows the agent."""


@dataclass
class ChangelogWriter:
    """Sends each partition's record batches in order, each once the one before is stored."""

    stalls: ProcessStalls | None = None
    """Asked right before each batch goes to the producer whether the process stood still since
    the batch was asked to be sent: a batch waits for those before it, and a pause during that
    wait let it go out after another worker took its partition."""

    last: dict[int, asyncio.Future[RecordMetadata]] = field(default_factory=dict)
    """Per partition, the delivery of the last batch sent."""
    waiting: defaultdict[int, deque[asyncio.Future[RecordMetadata]]] = field(
        default_factory=lambda: defaultdict(deque)
    )
    """Per partition, the deliveries of its batches not yet stored, oldest first."""
    sending: set[asyncio.Task[None]] = field(default_factory=set)
    """The batches handed to their wait, not yet to the producer."""

    async def stop(self) -> None:
        """Give up the sends still waiting (at a stop that did not wait for them: their
        partitions stay dirty, `streams.durability`)."""
        for sending in self.sending:
            sending.cancel()
        await asyncio.gather(*self.sending, return_exceptions=True)

    async def send(
        self,
        producer: AIOKafkaProducer,
        topic: str,
        partition: int,
        batches: list[Records],
        after: Sequence[Awaitable[Any]] = (),
    ) -> list[asyncio.Future[RecordMetadata]]:
        """Send `batches` to `partition`, each once the partition's batch before it is stored
        and the first also once `after` are (what its records must follow: the change feed's
        deliveries). Returns without waiting for that, but waits before a batch while
        `MOST_WAITING` batches of the partition wait already. Each delivery resolves to its
        batch's last record's metadata, or fails as a batch before it or `after` failed (then
        it is never sent).
        """
        waiting = self.waiting[partition]
        deliveries = []
        guard = None if self.stalls is None else partial(self.stalls.check, self.stalls.clock())
        for records in batches:
            while waiting and waiting[0].done():
                waiting.popleft()
            while len(waiting) >= MOST_WAITING:
                await asyncio.wait([waiting.popleft()])
            batch = producer.create_batch()
            for key, value in records.items():
                if batch.append(key=key, value=value, timestamp=None, headers=_HEADERS) is None:
                    raise BatchOverflow(f"{len(records)} records over {batch.size()} bytes")
            previous = self.last.get(partition)
            before = [*after, *([] if previous is None else [previous])]
            delivery: asyncio.Future[RecordMetadata] = asyncio.get_running_loop().create_future()
            sending = asyncio.ensure_future(
                _send_after(
                    before,
                    producer,
                    batch,
                    (topic, partition, len(records)),
                    delivery,
                    guard,
                )
            )
            self.sending.add(sending)
            sending.add_done_callback(self.sending.discard)
            self.last[partition] = delivery
            waiting.append(delivery)
            deliveries.append(delivery)
            after = ()
        return deliveries


async def _send_after(
    before: Sequence[Awaitable[Any]],
    producer: AIOKafkaProducer,
    batch: BatchBuilder,
    where: tuple[str, int, int],
    delivery: asyncio.Future[RecordMetadata],
    guard: Callable[[], None] | None,
) -> None:
    """Send `batch` (to topic and partition, `where`, with how many records) once every one of
    `before` is stored and `guard` raises nothing; `delivery` resolves as it does."""
    topic, partition, count = where
    try:
        if before:
            await asyncio.gather(*map(asyncio.shield, before))
        if guard is not None:
            guard()
        stored = await producer.send_batch(batch, topic, partition=partition)
    except asyncio.CancelledError:
        delivery.cancel()
        raise
    except Exception as failure:  # the agent's acking stops the worker
        if not delivery.done():  # else cancelled by whoever gave up waiting for it
            delivery.set_exception(failure)
        return
    _settle_with_last_record(stored, count, delivery)


def _settle_with_last_record(
    stored: asyncio.Future[RecordMetadata], count: int, last: asyncio.Future[RecordMetadata]
) -> None:
    """Resolve `last` with the metadata of a batch's last record, from the batch's (which
    gives its first offset)."""

    def settle(outcome: asyncio.Future[RecordMetadata]) -> None:
        if outcome.cancelled():
            last.cancel()
            return
        failure = outcome.exception()  # seen, whatever became of `last`
        if last.done():  # cancelled by whoever gave up waiting for it (a rebuild stopped)
            return
        if failure is not None:
            last.set_exception(failure)
        else:
            first = outcome.result()
            last.set_result(first._replace(offset=first.offset + count - 1))

    stored.add_done_callback(settle)
