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
"""

from __future__ import annotations

from collections import deque
from contextvars import ContextVar
from typing import Any

from faust.tables.manager import TableManager
from faust.tables.recovery import RebalanceAgain, Recovery, ServiceStopped
from faust.types import TP, AppT, EventT
from mode.services import WaitArgT
from mode.utils.queues import ThrowableQueue

from streams.logs import logger

log = logger("recovery")


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
