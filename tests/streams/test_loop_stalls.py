"""The loop-stall guard alone, on clocks of its own: a batch the event loop stood still during
(a pause past the session timeout) is not sent; one it did not, or one the loop worked through
all along, is."""

from __future__ import annotations

import pytest

from streams.loop_stalls import LoopStalls, WorkerStalled


class Clocks:
    """The wall clock, and the CPU time of the loop's thread."""

    def __init__(self) -> None:
        self.now, self.worked = 100.0, 10.0

    def wall(self) -> float:
        return self.now

    def cpu(self) -> float:
        return self.worked

    def pass_time(self, seconds: float, working: float = 0.0) -> None:
        self.now += seconds
        self.worked += working


def ticking(clocks: Clocks, seconds: float) -> LoopStalls:
    """A guard of 8 s whose loop has ticked every half second for `seconds`."""
    stalls = LoopStalls(8.0, clocks.wall, clocks.cpu)
    for _ in range(int(seconds / 0.5)):
        stalls.tick()
        clocks.pass_time(0.5, working=0.1)
    return stalls


def test_a_batch_over_a_moving_loop_is_sent_however_long_it_takes() -> None:
    clocks = Clocks()
    started = clocks.now
    stalls = ticking(clocks, 30)  # a model waited for, say: the loop moved all along
    stalls.check(since=started)


def test_a_batch_the_loop_stands_still_during_is_not_sent_before_a_tick_sees_it() -> None:
    """Paused mid-batch and resumed: the projection runs on to the send, no tick in between."""
    clocks = Clocks()
    stalls = ticking(clocks, 2)
    started = clocks.now
    clocks.pass_time(12, working=0.3)
    with pytest.raises(WorkerStalled, match=r"stood still for 12\.5 s, past the 8 s"):
        stalls.check(since=started)


def test_a_batch_the_loop_stood_still_during_is_not_sent_after_a_tick_saw_it() -> None:
    clocks = Clocks()
    stalls = ticking(clocks, 2)
    started = clocks.now
    clocks.pass_time(12, working=0.3)
    stalls.tick()  # resumed: a tick ran at an await of the batch
    clocks.pass_time(0.1, working=0.1)
    with pytest.raises(WorkerStalled):
        stalls.check(since=started)


def test_a_batch_the_loop_worked_through_for_long_is_sent() -> None:
    """A tenant of millions of keys deleted in one event held the loop 8 to 12 s, working: it
    was taken for a pause, and the worker stopped at every start, the deletion coming again."""
    clocks = Clocks()
    stalls = ticking(clocks, 2)
    started = clocks.now
    clocks.pass_time(12, working=11.5)
    stalls.check(since=started)
    stalls.tick()
    stalls.check(since=started)


def test_a_stall_before_the_batch_or_before_the_first_tick_stops_nothing() -> None:
    clocks = Clocks()
    stalls = LoopStalls(8.0, clocks.wall, clocks.cpu)
    clocks.pass_time(30)  # a start's recovery: no tick has run yet
    stalls.check(since=clocks.now - 1)
    stalls.tick()
    clocks.pass_time(20)
    stalls.tick()  # a stall of 20 s, over before the batch
    clocks.pass_time(1, working=0.5)
    stalls.check(since=clocks.now)
