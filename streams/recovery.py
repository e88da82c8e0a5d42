"""Faust's table recovery, made to start again where Faust's would stop for good.

Faust runs each step of a recovery (flushing the producer, reading highwaters and offsets,
seeking, placing the stream partitions) under `broker_request_timeout`; a step that times out
ends its recovery loop as if the worker were stopping (mode's `wait_first` reports a timeout as
"stopped"), or a seek that times out crashes it. Either way the worker keeps running with its
partitions paused: it serves nothing until it is restarted. `PersistentRecovery` logs the step
that timed out and starts the recovery over, as another rebalance would.

Faust also empties the queue of fetched changelog records each time it resumes the flow, which
it does twice more once the standby partitions are already being read: the standby records
still queued then are lost, although the fetch position has moved past them, and the standby's
copy keeps a hole for good (its next records carry its offset past it). `ChangelogQueue` empties
only what a rebalance made stale.

Faust's recovery loop takes the fetched changelog records one at a time: a task and a timer to
wait for each, whether the recovery is over asked after each (a counter built of every active
partition), and two debug lines formatted. A worker restoring its state spent some 175 us a
record, most of it there, and with the queue full the fetch hand-over took its slow path too.
`PersistentRecovery` takes what is queued at once (`READ_AT_ONCE`), record by record as before,
and asks whether the recovery is over once per take.
"""

from __future__ import annotations

import asyncio
from collections import deque
from contextvars import ContextVar
from time import monotonic
from typing import Any

from faust.tables.manager import TableManager
from faust.tables.recovery import RebalanceAgain, Recovery, ServiceStopped
from faust.types import TP, AppT, EventT
from faust.utils.tracing import finish_span
from mode import Service
from mode.services import WaitArgT
from mode.utils.queues import ThrowableQueue

from streams.logs import logger

log = logger("recovery")

READ_AT_ONCE = 200
"""The most changelog records the recovery takes from its queue at once: some 15 ms of work that
nothing else on the event loop waits behind (a standby copy reads while its worker serves), and
the queue is looked at once per take."""
IDLE_WAIT_SECONDS = 5.0
"""How long the recovery waits for a record before it looks whether it is over (as Faust's)."""


COMPLETING: ContextVar[tuple[int, int]] = ContextVar("completing")
"""The recovery whose completion the running task tells: its consumer generation, and the
app's count of rebalances begun when its assignment was made. Faust makes each table's
`on_recovery_completed` a task of its own as a recovery completes, and a task keeps the
context it was made in: a later completion cannot change what an earlier one's tasks see."""


class PersistentRecovery(Recovery):
    """Faust's recovery, started over when one of its steps times out, and telling the tables
    whether the recovery completing is still that of the assignment in force (`current`)."""

    recovering_since: int = -1
    """The app's count of rebalances begun (`rebalancing_count`) when the assignment being
    recovered was made."""

    async def on_rebalance(
        self, assigned: set[TP], revoked: set[TP], newly_assigned: set[TP], generation_id: int = 0
    ) -> None:
        await super().on_rebalance(assigned, revoked, newly_assigned, generation_id)
        if generation_id == self.app.consumer_generation_id:  # else Faust ignored it
            self.recovering_since = self.app.rebalancing_count

    async def on_recovery_completed(self, generation_id: int = 0) -> None:
        COMPLETING.set((generation_id, self.recovering_since))  # for the tasks made now
        await super().on_recovery_completed(generation_id)

    def need_recovery(self) -> bool:
        """Whether an active partition has changelog records left to read (Faust's builds a
        counter of every partition to say so, after each record)."""
        offsets = self.active_offsets
        return any(
            highwater is not None and (read := offsets[tp]) is not None and highwater > read
            for tp, highwater in self.active_highwaters.items()
        )

    @Service.task
    async def _slurp_changelogs(self) -> None:
        """Lay the fetched changelog records in, what is queued at once (Faust's loop waited
        for each), each as it is taken off the queue; at the end of each take, end the recovery
        if no active partition has records left, and say when the standby copies caught up."""
        queue = self.tables.changelog_queue
        while not self.should_stop:
            try:
                self.signal_recovery_end.clear()
                try:
                    first = await asyncio.wait_for(queue.get(), timeout=IDLE_WAIT_SECONDS)
                except TimeoutError:  # (Faust's loop also looked for aborted transactions here)
                    if not self.should_stop:
                        self._end_if_recovered()
                    continue
                await self._lay_in(first)
                for _ in range(READ_AT_ONCE - 1):
                    if queue.empty():
                        break
                    await self._lay_in(queue.get_nowait())
                self._end_if_recovered()
                self._note_standbys_ready()
                await asyncio.sleep(0)  # `wait_for` of a record queued already gives way on
                # Python 3.11, not on 3.12
            except Exception as error:  # records not laid in yet stay queued (as in Faust's
                # loop, where the next record lays a buffer that failed to be laid in again)
                log.warning("error in recovery: %r", error)

    async def _lay_in(self, event: EventT[Any]) -> None:
        """One changelog record into its partition's buffer, the buffer laid into the table
        once full; a record of a partition the recovery no longer reads is dropped (Faust's loop
        laid it into the table of the record before)."""
        now = monotonic()
        message = event.message
        tp, offset = message.tp, message.offset
        active = tp in self.active_tps
        if active:
            offsets = self.active_offsets
            self._active_events_received_at[tp] = now
            size = self.buffer_sizes.setdefault(tp, self.tp_to_table[tp].recovery_buffer_size)
        elif tp in self.standby_tps:
            offsets = self.standby_offsets
            size = self.buffer_sizes.setdefault(tp, self.tp_to_table[tp].standby_buffer_size)
        else:
            return
        seen = offsets.get(tp)
        if seen is not None and offset <= seen:
            return
        offsets[tp] = offset
        table = self.tp_to_table[tp]
        buffer = self.buffers[table]
        buffer.append(event)
        await table.on_changelog_event(event)
        if len(buffer) >= size:
            table.apply_changelog_batch(buffer)
            buffer.clear()
            self._last_flush_at = now
        if active:
            self._note_processing_time(monotonic())

    def _note_processing_time(self, now: float) -> None:
        """Keep the time since the last active record was laid in: Faust's estimate of the
        recovery's remaining seconds is their mean."""
        last = self._last_active_event_processed_at
        if last is not None:
            times = self._processing_times
            times.append(now - last)
            if len(times) > self.num_samples_required_for_estimate:
                times.popleft()
        self._last_active_event_processed_at = now

    def _end_if_recovered(self) -> None:
        """The active partitions read up to their highwaters: lay in what the buffers hold,
        and signal the recovery's end."""
        if self.in_recovery and not self.need_recovery():
            self.flush_buffers()
            self._set_recovery_ended()
            if self._actives_span is not None:
                self._actives_span.set_tag("Actives-Ready", True)
            self.signal_recovery_end.set()

    def _note_standbys_ready(self) -> None:
        """Tell the tables once the standby copies have read up to their highwaters."""
        if self._standbys_span is None and self.tables.standbys_ready:
            return
        if not self.standby_remaining_total():
            if self._standbys_span:
                finish_span(self._standbys_span)
                self._standbys_span = None
            self.tables.on_standbys_ready()

    def current(self) -> bool:
        """Whether the recovery whose completion the running task tells (`COMPLETING`) is of
        the assignment in force: no rebalance began since it was made. Faust runs each
        table's `on_recovery_completed` as a task of its own, which a rebalance does not
        stop, and a recovery overtaken during a rebalance's first steps still completes, with
        the partitions of the assignment before; Faust itself checks the generation only once
        the tables' callbacks are done."""
        in_force = (self.app.consumer_generation_id, self.app.rebalancing_count)
        return COMPLETING.get(None) == in_force

    async def _wait(self, coro: WaitArgT, timeout: Any = None) -> None:
        try:
            await super()._wait(coro, timeout=timeout)
        except (ServiceStopped, TimeoutError) as error:
            if self.should_stop:
                raise
            log.error(
                "a recovery step gave no answer within %s s (%r): recovery starts over",
                timeout,
                error,
            )
            consumer = self.app.consumer
            consumer.pause_partitions(consumer.assignment())  # as a rebalance would
            self.signal_recovery_start.set()
            raise RebalanceAgain() from error


class ChangelogQueue(ThrowableQueue[EventT[Any]]):
    """The fetched changelog records on their way to the recovery, emptied at a rebalance only.

    A rebalance suspends the flow, then empties the queue: what was fetched before belongs to
    another assignment and is read again after the seeks. A resume empties it too (Faust asks
    for `clear_on_resume`, to drop what was fetched during the rebalance); then it keeps the
    records fetched in the current generation for partitions the recovery reads."""

    def __init__(self, app: AppT, maxsize: int) -> None:
        super().__init__(maxsize=maxsize, flow_control=app.flow_control, clear_on_resume=True)
        self.app = app

    def clear(self) -> None:
        if not self._flow_control.is_active():
            super().clear()
            return
        recovery = self.app.tables.recovery  # type: ignore[attr-defined]
        reading = recovery.active_tps | recovery.standby_tps
        generation = self.app.consumer_generation_id
        queued: deque[EventT[Any]] = self._queue  # type: ignore[attr-defined]
        current = [
            event
            for event in queued
            if event.message.generation_id == generation and event.message.tp in reading
        ]
        queued.clear()
        queued.extend(current)


class StateTableManager(TableManager):
    """Faust's table manager with `PersistentRecovery` and `ChangelogQueue`."""

    @property
    def changelog_queue(self) -> ThrowableQueue[EventT[Any]]:
        if self._changelog_queue is None:
            self._changelog_queue = ChangelogQueue(self.app, self.app.conf.stream_buffer_maxsize)
        return self._changelog_queue

    @property
    def recovery(self) -> Recovery:
        if self._recovery is None:
            self._recovery = PersistentRecovery(self.app, self, beacon=self.beacon, loop=self.loop)
        return self._recovery
