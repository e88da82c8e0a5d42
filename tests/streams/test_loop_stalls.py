"""The loop-stall guard alone, on a clock of its own: a batch the event loop stood still during
(a pause past the session timeout) is not sent; one it did not is."""

from __future__ import annotations

import pytest

from streams.loop_stalls import LoopStalls, WorkerStalled


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def ticking(clock: Clock, seconds: float) -> LoopStalls:
    """A guard of 8 s whose loop has ticked every half second for `seconds`."""
    stalls = LoopStalls(8.0, clock)
    for _ in range(int(seconds / 0.5)):
        stalls.tick()
        clock.now += 0.5
    return stalls


def test_a_batch_over_a_moving_loop_is_sent_however_long_it_takes() -> None:
    clock = Clock()
    started = clock.now
    stalls = ticking(clock, 30)  # a model waited for, say: the loop moved all along
    stalls.check(since=started)


def test_a_batch_the_loop_stands_still_during_is_not_sent_before_a_tick_sees_it() -> None:
    """Paused mid-batch and resumed: the projection runs on to the send, no tick in between."""
    clock = Clock()
    stalls = ticking(clock, 2)
    started = clock.now
    clock.now += 12
    with pytest.raises(WorkerStalled, match=r"stood still for 12\.\d s, past the 8 s"):
        stalls.check(since=started)


def test_a_batch_the_loop_stood_still_during_is_not_sent_after_a_tick_saw_it() -> None:
    clock = Clock()
    stalls = ticking(clock, 2)
    started = clock.now
    clock.now += 12
    stalls.tick()  # resumed: a tick ran at an await of the batch
    clock.now += 0.1
    with pytest.raises(WorkerStalled):
        stalls.check(since=started)


def test_a_stall_before_the_batch_or_before_the_first_tick_stops_nothing() -> None:
    clock = Clock()
    stalls = LoopStalls(8.0, clock)
    clock.now += 30  # a start's recovery: no tick has run yet
    stalls.check(since=clock.now - 1)
    stalls.tick()
    clock.now += 20
    stalls.tick()  # a stall of 20 s, over before the batch
    clock.now += 1
    stalls.check(since=clock.now)
