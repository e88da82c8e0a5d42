"""Stalls of the worker's event loop, and the batches they make unsafe to send.

A worker whose loop stood still past its session timeout (a pause: SIGSTOP, `docker pause`, a
frozen VM or host) may have lost its partitions to another worker without knowing it yet: its
heartbeats run on the same loop. Resumed mid-batch, it went on and sent the batch's state writes
to the changelog after the new owner's, which a recovery then laid over them: the state went
back thousands of events, and those events, committed by the new owner, were never delivered
again. A batch the loop stalled during is not sent: the worker stops, and starts again from the
changelog (the local copy written since its last checkpoint is never reused).

What this cannot see: a stall that ended before a batch was taken (a pause while idle, events
already fetched taken on resume) and records the producer held, unsent, when the pause began.
"""

from __future__ import annotations

import time
from collections.abc import Callable

TICK_SECONDS = 0.5
"""How often the loop is seen moving (`LoopStalls.tick`)."""


class WorkerStalled(Exception):
    """The loop stood still past its allowance during a batch: it is not sent."""


class LoopStalls:
    """When the loop was last seen moving, and when it last came back from a stall."""

    def __init__(self, stall_seconds: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.stall_seconds = stall_seconds
        """How long the loop may stand still: the session timeout less a heartbeat interval
        (the last heartbeat may have gone that much before the loop stopped)."""
        self.clock = clock
        self.last_tick: float | None = None
        """When the loop was last seen moving (None before the first tick)."""
        self.resumed: tuple[float, float] | None = None
        """The last stall past `stall_seconds`: when it ended, and how long it lasted."""

    def tick(self) -> None:
        """The loop moves (called every `TICK_SECONDS` by a task of its own)."""
        now = self.clock()
        if self.last_tick is not None and now - self.last_tick > self.stall_seconds:
            self.resumed = (now, now - self.last_tick)
        self.last_tick = now

    def check(self, since: float) -> None:
        """Raise `WorkerStalled` if the loop stood still past `stall_seconds` after `since` (a
        batch's start, by `clock`), or stands still now (no tick has run since it stopped)."""
        now = self.clock()
        if self.last_tick is not None and now - self.last_tick > self.stall_seconds:
            raise WorkerStalled(_why(now - self.last_tick, self.stall_seconds))
        if self.resumed is not None and self.resumed[0] >= since:
            raise WorkerStalled(_why(self.resumed[1], self.stall_seconds))


def _why(stood: float, allowed: float) -> str:
    return (
        f"the event loop stood still for {stood:.1f} s, past the {allowed:.0f} s a"
        " session allows (a pause: SIGSTOP, a frozen VM or host): another worker may own this"
        " worker's partitions now, and this batch's state writes could land after its own;"
        " the batch is not sent, and a start takes the state from the changelog"
    )
