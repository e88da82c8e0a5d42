"""The Kafka transport the worker runs on: Faust's aiokafka driver without stranded events.

Faust (faust-streaming #629) can drop records it fetched while a rebalance pauses partitions,
and then move on past them:
- the consumer thread filters fetched records by the live set of active partitions, which a
  rebalance empties in place, and an empty filter hands over every partition's records;
- records fetched while the flow is stopped, or for a partition paused meanwhile, are dropped,
  although the fetch position has moved past them;
- after a rebalance Faust rewinds stream partitions to their committed offsets, which leaves a
  partition that never had an offset committed where the dropped records left it, and its
  first commit then jumps over the hole for good.
Faust also empties the streams' buffers when it resumes the flow, which its recovery does once
more after the seek that places the stream partitions: records fetched in between are lost, the
fetch position past them, until the next rebalance (the events a failover hands over among
them).
`RewindingConsumer` hands the thread a copy of the active partitions, seeks dropped records
back, and rewinds never-committed stream partitions to their log start, keeping them paused
until then and until the flow resumes. Redelivery is harmless: the projector recognises what it
already took in.

It also hands each fetched record to the streams without the four tasks Faust makes for it
(`RewindingConsumer.wait_first`) whenever the hand-over cannot wait.
"""

from __future__ import annotations

from collections.abc import Coroutine, Iterable, Mapping, Set
from typing import Any, ClassVar, cast

import aiokafka
from faust.transport import drivers
from faust.transport.consumer import RecordMap
from faust.transport.drivers import aiokafka as aiokafka_driver
from faust.types import TP, ConsumerT
from mode.services import WaitArgT, WaitResults
from mode.utils.queues import FlowControlQueue

SCHEME = "rumourmill"
"""The broker URL scheme that selects this transport (`rumourmill://host:port`)."""

drivers.TRANSPORTS.aliases[SCHEME] = f"{__name__}:Transport"


class CommittedReadsThread(aiokafka_driver.AIOKafkaConsumerThread):
    """Faust's consumer thread, its consumer reading committed records only: a game backend
    writing its events in transactions (exactly once) aborts some, and Faust's consumer read
    them (`read_uncommitted`, unless Faust's own exactly-once is on), so an aborted action
    became memories. Topics no transaction writes read as before."""

    def _create_worker_consumer(
        self, transport: aiokafka_driver.Transport
    ) -> aiokafka.AIOKafkaConsumer:
        consumer = super()._create_worker_consumer(transport)
        consumer._isolation_level = "read_committed"  # aiokafka reads it as it starts
        return consumer


class RewindingConsumer(aiokafka_driver.Consumer):
    """Faust's aiokafka consumer that never moves past a record it did not deliver, and reads
    only what transactions committed (`CommittedReadsThread`)."""

    held: set[TP]
    """Stream partitions resumed by recovery, kept paused until `perform_seek` rewound them."""
    placed: set[TP]
    """Stream partitions `perform_seek` rewound, kept paused until the flow resumes."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.held = set()
        self.placed = set()

    def _new_consumer_thread(self) -> CommittedReadsThread:
        return CommittedReadsThread(self, loop=self.loop, beacon=self.beacon)

    async def _getmany(self, active_partitions: Set[TP] | None, timeout: float) -> RecordMap:
        wanted = None if active_partitions is None else set(active_partitions)
        records = await super()._getmany(wanted, timeout)
        active = self._get_active_partitions()
        dropped = {
            tp: batch
            for tp, batch in records.items()
            if batch and (not self.flow_active or tp not in active)
        }
        if dropped:
            await self._thread.call_thread(
                _seek_back,
                self._thread._ensure_consumer(),
                {tp: (batch[0].offset, batch[-1].offset) for tp, batch in dropped.items()},
            )
        return {tp: batch for tp, batch in records.items() if tp not in dropped}

    async def group_committed(self, *partitions: TP) -> Mapping[TP, int]:
        """The offsets the group committed of `partitions`, asked of Kafka (none for one never
        committed): the consumer knows its own only once a recovery ended in their seek."""
        consumer = self._thread._ensure_consumer()
        found = await self._thread.call_thread(
            consumer._coordinator.fetch_committed_offsets, list(partitions)
        )
        return {
            TP(tp.topic, tp.partition): meta.offset
            for tp, meta in found.items()
            if meta.offset >= 0
        }

    def resume_partitions(self, tps: Iterable[TP]) -> None:
        """Resume changelog partitions now, stream partitions once `perform_seek` placed them
        and the flow resumed.

        Recovery resumes stream partitions right before it calls `perform_seek`, and the flow is
        already running: without holding them back, a fetch could read from the stale position.
        """
        tps = set(tps)
        streams = {tp for tp in tps if not self._is_changelog_tp(tp)}
        self.held |= streams
        super().resume_partitions(tps - streams)

    async def perform_seek(self) -> None:
        """Seek stream partitions to their committed offsets, never-committed ones to the start."""
        committed = await self.seek_to_committed()
        self._read_offset.update(
            {
                tp: offset if offset is not None and offset >= 0 else None
                for tp, offset in committed.items()
            }
        )
        self._committed_offset.update(
            {tp: offset or None for tp, offset in committed.items() if offset is not None}
        )
        never = {
            tp for tp, offset in committed.items() if not offset and not self._is_changelog_tp(tp)
        }
        if never:
            earliest = await self.earliest_offsets(*never)
            await self.seek_wait({tp: earliest.get(tp) or 0 for tp in never})
        self.placed |= self.held
        self.held = set()

    def resume_flow(self) -> None:
        """Resume the flow, then the stream partitions `perform_seek` placed.

        Faust's recovery seeks, then resumes the flow control, which empties every stream's
        buffer, then the consumer's flow: a partition resumed at its seek could have records
        fetched and buffered in between, and lost."""
        super().resume_flow()
        if self.placed:
            placed, self.placed = self.placed, set()
            super().resume_partitions(placed & self.assignment())

    def pause_partitions(self, tps: Iterable[TP]) -> None:
        """Pause, and forget a pending resume of the same partitions: a rebalance pauses the
        whole assignment, and a resume held over from before it would otherwise take effect at
        the next seek, in the middle of the recovery that follows."""
        tps = set(tps)
        self.held -= tps
        self.placed -= tps
        super().pause_partitions(tps)

    def on_buffer_drop(self, tp: TP) -> None:
        """Faust puts a partition back into the fetch once its stream buffer drains, even when a
        rebalance paused it meanwhile (the buffer's pending callback outlives the clearing of the
        buffer): that would fetch it from a stale position. Only an unpaused one goes back (a
        held or placed one is still paused)."""
        if tp in self._paused_partitions:
            self._buffered_partitions.discard(tp)
            return
        super().on_buffer_drop(tp)

    async def on_partitions_revoked(self, revoked: Set[TP]) -> None:
        self.held -= revoked
        self.placed -= revoked
        await super().on_partitions_revoked(set(revoked))

    async def wait_first(self, *coros: WaitArgT, timeout: Any = None) -> WaitResults:
        """Faust's fetch loop hands each record to the streams as
        `wait_first(on_message(record), suspend_flow.wait())`, so that a hand-over stuck on a
        full stream buffer gives way when a rebalance suspends the flow; that costs four tasks
        and several loop turns a record. When the flow runs and no stream buffer is full, the
        hand-over cannot get stuck (at most it flushes Faust's producer buffer, which the worker
        leaves empty): it is awaited here directly."""
        if len(coros) == 2 and self._hands_over_at_once():
            delivery, suspended = coros
            cast(Coroutine[Any, Any, Any], suspended).close()
            return WaitResults([delivery], [await cast(Coroutine[Any, Any, Any], delivery)], False)
        return await super().wait_first(*coros, timeout=timeout)

    def _hands_over_at_once(self) -> bool:
        app = self.app
        return (
            app.flow_control.is_active()
            and not self.suspend_flow.is_set()
            and not self.should_stop
            and not any(cast(FlowControlQueue[Any], topic.queue).full() for topic in app.topics)
        )


async def _seek_back(
    consumer: aiokafka.AIOKafkaConsumer, spans: Mapping[TP, tuple[int, int]]
) -> None:
    """Put dropped records back: seek to the first, unless a seek moved the position since."""
    assigned = consumer.assignment()
    for tp, (first, last) in spans.items():
        if tp in assigned and first <= await consumer.position(tp) <= last + 1:
            consumer.seek(tp, first)


class Transport(aiokafka_driver.Transport):
    """Faust's aiokafka transport with `RewindingConsumer`."""

    Consumer: ClassVar[type[ConsumerT]] = RewindingConsumer
