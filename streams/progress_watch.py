"""A watch on the worker's own progress: warns when a rebalance does not end, or when an assigned
partition of the events topic has events waiting and commits none, with everything the consumer
and the recovery know about it.

A partition that a rebalance leaves unfetched, unresumed or stuck in recovery otherwise shows
nothing in the log: the worker looks idle while events wait. The warning names the partition,
how many events wait, and why the consumer may not hand them over (paused, held for a seek,
taken out of the fetch for a full buffer, recovery still laying changelog records...), so that
the tail of a log is enough to tell where the events stopped.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, cast

import faust
from faust.tables.manager import TableManager
from faust.types import TP
from mode import Service

from streams.kafka_consumer import RewindingConsumer
from streams.logs import logger

log = logger("progress")

WATCH_SECONDS = 5.0
"""How often the worker compares its committed offsets with the ends of its partitions."""
STALL_SECONDS = 30.0
"""A partition with events waiting and no commit for this long is reported (then as often), and
so is a rebalance that lasts as long."""
LOOKUP_SECONDS = 3.0
"""How long a look waits for Kafka to tell the partitions' offsets. Unbounded, a broker gone
held the watch for as long as it was gone, saying nothing of the stall it exists to report."""


@dataclass
class _Progress:
    committed: int | None
    since: float
    reported_at: float | None = None

    def report_due(self, now: float, stall_seconds: float) -> float:
        """Seconds since `since` once they pass `stall_seconds` and as long again has passed
        since the last report (which this counts as made); 0.0 otherwise."""
        still = now - self.since
        recent = self.reported_at is not None and now - self.reported_at < stall_seconds
        if still < stall_seconds or recent:
            return 0.0
        self.reported_at = now
        return still


@dataclass
class Stalls:
    """Per partition, since when its committed offset has stood still with events waiting."""

    stall_seconds: float = STALL_SECONDS
    progress: dict[TP, _Progress] = field(default_factory=dict)

    def observe(self, now: float, tp: TP, committed: int | None, start: int, end: int) -> float:
        """Seconds `tp` has stood still with events waiting, when that is worth a report now
        (past `stall_seconds`, and as long again since the last report); 0.0 otherwise.

        `committed` is the consumer's committed offset (None before the first commit), `start`
        and `end` the partition's first offset and log end."""
        last = self.progress.get(tp)
        waiting = end > (start if committed is None else max(committed, start))
        if last is None or last.committed != committed or not waiting:
            self.progress[tp] = _Progress(committed, now)
            return 0.0
        return last.report_due(now, self.stall_seconds)

    def keep_only(self, tps: set[TP]) -> None:
        """Forget partitions no longer assigned."""
        for tp in set(self.progress) - tps:
            del self.progress[tp]


async def only_markers_left(consumer: RewindingConsumer, tp: TP, committed: int, end: int) -> bool:
    """Whether the offsets of `tp` from `committed` to `end` hold no event: the consumer has
    been handed every record up to the end, and committed all it was handed. A transactional
    producer's commit marker takes an offset, and no consumer is given it: past the last
    event of a transaction, the partition looked one event short of its end, and was reported
    standing still every `STALL_SECONDS`, for as long as no other event came."""
    if committed >= end:
        return False
    read = cast(Mapping[TP, int | None], consumer._read_offset).get(tp)
    if read is not None and read >= committed:
        return False
    position = await consumer.position(tp)
    return position is not None and position >= end


class ProgressWatch:
    """Reports a rebalance that does not end, and assigned partitions of `topic` that stand
    still with events waiting."""

    def __init__(self, app: faust.App, topic: str) -> None:
        self.app = app
        self.topic = topic
        self.stalls = Stalls()
        self.rebalance: _Progress | None = None
        """Since when the worker has been rebalancing (revoking, assigning or recovering)."""
        self.markers: dict[TP, tuple[int, int]] = {}
        """Per partition, the committed offset and end between which Kafka last said only
        commit markers lie (`_only_markers_left`)."""
        self.unanswered: _Progress | None = None
        """Since when Kafka has not told the partitions' offsets (`_ends`)."""
        self.starts: dict[TP, int] = {}
        """The first offset of each assigned partition of `topic`, as last looked up: where
        its consumer starts before any commit (retention may have removed what came before)."""
        self.ends: dict[TP, int] = {}
        """The log end of each assigned partition of `topic`, as last looked up: the
        consumer's own (its highwater) is none until it fetched the partition, after a recovery
        of minutes, and stands still while the partition is paused."""
        self.committed: dict[TP, int] = {}
        """The group's committed offset of each assigned partition of `topic` the consumer
        knows none of (before the seek that ends a recovery), as last looked up."""

    async def check(self) -> None:
        """One look (from a timer): never raises, a rebalance may be under way."""
        try:
            await self._check()
        except Exception as error:  # the consumer may be rebalancing or stopping
            log.debug("progress not checked: %r", error)

    async def _check(self) -> None:
        consumer = cast(RewindingConsumer, self.app.consumer)
        self._check_rebalance(consumer, time.monotonic())
        tps = {tp for tp in consumer.assignment() if tp.topic == self.topic}
        self.stalls.keep_only(tps)
        if not tps:
            return
        deadline = asyncio.get_running_loop().time() + LOOKUP_SECONDS  # the whole look's
        ends = await self._ends(consumer, tps, deadline)
        committed = cast(Mapping[TP, int | None], consumer._committed_offset)
        await self._look_up_committed(consumer, {tp for tp in tps if committed.get(tp) is None})
        now = time.monotonic()
        for tp in sorted(tps):
            end = ends.get(tp)
            if end is None:
                continue
            offset = committed.get(tp)
            if offset is None:  # recovering: the group's, as looked up
                offset = self.committed.get(tp)
            start = self.starts.get(tp, 0)
            if offset is not None and await self._only_markers_left(
                consumer, tp, offset, end, deadline
            ):
                end = offset
            if still := self.stalls.observe(now, tp, offset, start, end):
                log.warning(
                    "partition %d of %s: %d event(s) waiting, nothing committed for %.0f s "
                    "(committed %s, log end %d); %s",
                    tp.partition,
                    self.topic,
                    end - (start if offset is None else max(offset, start)),
                    still,
                    offset,
                    end,
                    self.describe(consumer, tp),
                    extra={"partition": tp.partition, "stalled_seconds": round(still)},
                )

    async def _ends(
        self, consumer: RewindingConsumer, tps: set[TP], deadline: float
    ) -> Mapping[TP, int | None]:
        """The log end of each of `tps` (and their starts, kept in `starts`), asked of Kafka;
        when it does not answer by `deadline` (the loop's time), the ends the consumer last
        fetched, and a warning once per `stall_seconds` that Kafka does not answer."""
        try:
            async with asyncio.timeout_at(deadline):
                ends = await consumer.highwaters(*tps)
                starts = await consumer.earliest_offsets(*tps)
        except TimeoutError:
            now = time.monotonic()
            self.unanswered = self.unanswered or _Progress(None, now, reported_at=now)
            if still := self.unanswered.report_due(now, self.stalls.stall_seconds):
                log.warning(
                    "Kafka has not told the offsets of %s for %.0f s: progress is judged by"
                    " the ends last fetched",
                    self.topic,
                    still,
                )
            return {tp: consumer.highwater(tp) for tp in tps}
        self.unanswered = None
        self.starts = {tp: start for tp, start in starts.items() if start is not None}
        self.ends = {tp: end for tp, end in ends.items() if end is not None}
        return ends

    async def _look_up_committed(self, consumer: RewindingConsumer, tps: set[TP]) -> None:
        """The group's committed offsets of `tps` into `committed`; what was known of them
        before, if Kafka does not answer within `LOOKUP_SECONDS`."""
        known = {tp: offset for tp, offset in self.committed.items() if tp in tps}
        if tps:
            try:
                async with asyncio.timeout(LOOKUP_SECONDS):
                    known = dict(await consumer.group_committed(*tps))
            except TimeoutError:
                pass
        self.committed = known

    async def _only_markers_left(
        self, consumer: RewindingConsumer, tp: TP, committed: int, end: int, deadline: float
    ) -> bool:
        """`only_markers_left`; when Kafka does not answer by `deadline` (the look's lookups
        share `LOOKUP_SECONDS`: each partition's had its own, 15 s for four), what it said last
        of the same offsets (a commit marker counted as an event waiting while Kafka was gone)."""
        try:
            async with asyncio.timeout_at(deadline):
                left = await only_markers_left(consumer, tp, committed, end)
        except TimeoutError:
            return self.markers.get(tp) == (committed, end)
        if left:
            self.markers[tp] = (committed, end)
        return left

    def _check_rebalance(self, consumer: RewindingConsumer, now: float) -> None:
        """A rebalance stuck in revoking (waiting for events to be acked), in recovery or in
        placing the partitions leaves the old assignment in place, with nothing waiting on it:
        only its length shows it."""
        if not self.app.rebalancing:
            self.rebalance = None
            return
        self.rebalance = self.rebalance or _Progress(None, now)
        if still := self.rebalance.report_due(now, self.stalls.stall_seconds):
            log.warning(
                "a rebalance has been under way for %.0f s; %s",
                still,
                self.describe(consumer),
                extra={"stalled_seconds": round(still)},
            )

    def describe(self, consumer: RewindingConsumer, tp: TP | None = None) -> str:
        """What the consumer and the recovery say (about `tp` first, if given), in one line
        (never raises: the warning goes out in any case)."""
        try:
            return self._describe(consumer, tp)
        except Exception as error:
            return f"consumer state unreadable: {error!r}"

    def _describe(self, consumer: RewindingConsumer, tp: TP | None) -> str:
        state: dict[str, Any] = {}
        if tp is not None:
            state |= {
                "fetching": tp in consumer._get_active_partitions(),
                "paused": tp in consumer._paused_partitions,
                "held for a seek": tp in consumer.held,
                "placed, waiting for the flow": tp in consumer.placed,
                "out for a full buffer": tp in consumer._buffered_partitions,
                "highwater seen": consumer.highwater(tp),
                "read offset": consumer._read_offset.get(tp),
            }
        recovery = cast(TableManager, self.app.tables).recovery
        state |= {
            "flow active": consumer.flow_active,
            "rebalancing": self.app.rebalancing,
            "generation": self.app.consumer_generation_id,
            "in recovery": recovery.in_recovery,
            "first recovery done": recovery.completed.is_set(),
            "changelog records left by partition": {
                changelog.partition: left
                for changelog, left in recovery.active_remaining().items()
                if left
            },
            "events buffered": sum(topic.queue.qsize() for topic in self.app.topics),
            "events taken, not acked": len(consumer._unacked_messages),
        }
        return ", ".join(f"{name}: {value}" for name, value in state.items())


class Watching(Service):
    """Looks every `WATCH_SECONDS` from the worker's start, its first recovery included: as a
    Faust timer, the watch began only once that recovery was over, and for the minutes it took
    the lag gauge showed nothing of the partitions' backlog."""

    def __init__(self, watch: ProgressWatch) -> None:
        super().__init__()
        self.watch = watch

    @Service.timer(WATCH_SECONDS)
    async def _look(self) -> None:
        await self.watch.check()
