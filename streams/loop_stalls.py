"""Stalls of the worker's event loop, and the batches they make unsafe to send.

A worker whose loop stood still past its session timeout (a pause: SIGSTOP, `docker pause`, a
frozen VM or host) may have lost its partitions to another worker without knowing it yet: its
heartbeats run on the same loop. Resumed mid-batch, it went on and sent the batch's state writes
to the changelog after the new owner's, which a recovery then laid over them: the state went
back thousands of events, and those events, committed by the new owner, were never delivered
again. A batch the loop stalled during is not sent: the worker stops, and starts again from the
changelog (the local copy written since its last checkpoint is never reused).

A stall is the loop's thread standing still, not working: a loop held by its own work (the
deletion of a tenant of millions of keys took 8 to 12 s) used the CPU all along, and stopping
for it stopped the worker at every start, the deletion delivered again each time.

What this cannot see: a stall that ended before a batch was taken (a pause while idle, events
already fetched taken on resume), records the producer held, unsent, when the pause began, and
a loop held by its own work past the session timeout.
"""

from __future__ import annotations

import time
from collections.abc import Callable

TICK_SECONDS = 0.5
"""How often the loop is seen moving (`LoopStalls.tick`)."""
WORKING_SHARE = 0.5
"""A loop that stood still past the allowance is taken for paused, not for working, when its
thread ran on the CPU for less than this share of the time."""


class WorkerStalled(Exception):
    """The loop stood still past its allowance during a batch: it is not sent."""


class LoopStalls:
    """When the loop was last seen moving, and when it last came back from a stall."""

    def __init__(
        self,
        stall_seconds: float,
        clock: Callable[[], float] = time.monotonic,
        cpu: Callable[[], float] = time.thread_time,
    ) -> None:
        self.stall_seconds = stall_seconds
        """How long the loop may stand still: the session timeout less a heartbeat interval
        (the last heartbeat may have gone that much before the loop stopped)."""
        self.clock = clock
        self.cpu = cpu
        """The CPU time of the loop's thread (`tick` and `check` run on it)."""
        self.last_tick: tuple[float, float] | None = None
        """When the loop was last seen moving, by `clock` and by `cpu` (None before a tick)."""
        self.resumed: tuple[float, float] | None = None
        """The last stall past `stall_seconds`: when it ended, and how long it lasted."""

    def tick(self) -> None:
        """The loop moves (called every `TICK_SECONDS` by a task of its own)."""
        stood = self._standing()
        if stood is not None:
            self.resumed = (self.clock(), stood)
        self.last_tick = (self.clock(), self.cpu())

    def check(self, since: float) -> None:
        """Raise `WorkerStalled` if the loop stood still past `stall_seconds` after `since` (a
        batch's start, by `clock`), or stands still now (no tick has run since it stopped)."""
        stood = self._standing()
        if stood is not None:
            raise WorkerStalled(_why(stood, self.stall_seconds))
        if self.resumed is not None and self.resumed[0] >= since:
            raise WorkerStalled(_why(self.resumed[1], self.stall_seconds))

    def _standing(self) -> float | None:
        """How long the loop has stood still since the last tick, if past `stall_seconds` and
        not working (its thread off the CPU for most of it)."""
        if self.last_tick is None:
            return None
        wall, worked = self.clock() - self.last_tick[0], self.cpu() - self.last_tick[1]
        if wall > self.stall_seconds and worked < WORKING_SHARE * wall:
            return wall
        return None


def _why(stood: float, allowed: float) -> str:
    return (
        f"the event loop stood still for {stood:.1f} s, past the {allowed:.0f} s a"
        " session allows (a pause: SIGSTOP, a frozen VM or host): another worker may own this"
        " worker's partitions now, and this batch's state writes could land after its own;"
        " the batch is not sent, and a start takes the state from the changelog"
    )
