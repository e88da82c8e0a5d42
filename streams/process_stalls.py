"""Stalls of the whole worker process, and the batches they make unsafe to send.

A worker process that stood still past its session timeout (a pause: SIGSTOP, `docker pause`, a
suspended host) may have lost its partitions to another worker without knowing it yet: its
consumer's heartbeats stood still with it. Resumed mid-batch, it went on and sent the batch's
state writes to the changelog after the new owner's, which a recovery then laid over them: the
state went back thousands of events, and those events, committed by the new owner, were never
delivered again. A batch the process stood still during is not sent: the worker stops, and
starts again from the changelog (the local copy written since its last checkpoint is never
reused).

A thread of its own ticks, as the consumer's heartbeats run on a thread of theirs (Faust's
consumer thread, with a loop of its own): a gap in its ticks is a gap in theirs. The event
loop's own work does not make one: a tenant deletion of millions of keys held the loop 8 to
12 s, and the heartbeats went on (taken for a pause, it stopped the worker at every start, the
deletion delivered again); C code holding the interpreter's lock that long stops both.

A batch taken within a session timeout after a stall is not sent either: events fetched before
a pause while idle are taken as a batch on resume, before the consumer learns at its next
heartbeat that its partitions moved. What this cannot see: records the producer held, unsent,
when the pause began.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

TICK_SECONDS = 0.5
"""How often the ticking thread looks at the clock (`ProcessStalls.tick`)."""


def since_boot() -> float:
    """Seconds by a clock that runs while the host is suspended, as the broker's session timer
    does (Linux's CLOCK_BOOTTIME; the monotonic clock elsewhere, which stops then)."""
    return time.clock_gettime(_CLOCK)


_CLOCK = getattr(time, "CLOCK_BOOTTIME", time.CLOCK_MONOTONIC)


class WorkerStalled(Exception):
    """The process stood still past its allowance during a batch: it is not sent."""


class ProcessStalls:
    """When the process was last seen moving, and when it last came back from a stall."""

    def __init__(
        self,
        stall_seconds: float,
        after_seconds: float,
        clock: Callable[[], float] = since_boot,
    ) -> None:
        self.stall_seconds = stall_seconds
        """How long the process may stand still: the session timeout less a heartbeat interval
        (the last heartbeat may have gone that much before the process stopped)."""
        self.after_seconds = after_seconds
        """How long after a stall a batch's start is still unsafe (the session timeout): the
        consumer learns it lost its partitions at its next heartbeat, and events it fetched
        before the pause were taken as a batch at once (the ticking thread, back first, had
        already seen the stall end)."""
        self.clock = clock
        self.last_tick: float | None = None
        """When the ticking thread last ran (None before it first did)."""
        self.resumed: tuple[float, float] | None = None
        """The last stall past `stall_seconds`: when it ended, and how long it lasted."""
        self._ticking: threading.Thread | None = None

    def start(self) -> None:
        """Start the ticking thread (once; a daemon, gone with the process)."""
        if self._ticking is None:
            self._ticking = threading.Thread(target=self._tick_on, name="stall-ticks", daemon=True)
            self._ticking.start()

    def _tick_on(self) -> None:
        while True:
            self.tick()
            time.sleep(TICK_SECONDS)

    def tick(self) -> None:
        """The process moves."""
        now = self.clock()
        if self.last_tick is not None and now - self.last_tick > self.stall_seconds:
            self.resumed = (now, now - self.last_tick)
        self.last_tick = now

    def check(self, since: float) -> None:
        """Raise `WorkerStalled` if the process stood still past `stall_seconds` after `since`
        (a batch's start, by `clock`) or less than `after_seconds` before it, or stands still
        now as far as the ticks know (resumed, the batch ran on before the ticking thread)."""
        now = self.clock()
        if self.last_tick is not None and now - self.last_tick > self.stall_seconds:
            raise WorkerStalled(_why(now - self.last_tick, self.stall_seconds))
        if self.resumed is not None and self.resumed[0] > since - self.after_seconds:
            raise WorkerStalled(_why(self.resumed[1], self.stall_seconds))


def _why(stood: float, allowed: float) -> str:
    return (
        f"the worker stood still for {stood:.1f} s, past the {allowed:.0f} s a session allows"
        " (a pause: SIGSTOP, docker pause, a suspended host): another worker may own its"
        " partitions now, and this batch's state writes could land after its own; the batch is"
        " not sent, and a start takes the state from the changelog"
    )
