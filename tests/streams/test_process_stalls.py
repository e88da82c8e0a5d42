"""The stall guard alone: a batch the worker process stood still during (a pause past the
session timeout) is not sent; one it did not is, however long it took."""

from __future__ import annotations

import time

import pytest

from streams.process_stalls import TICK_SECONDS, ProcessStalls, WorkerStalled


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def ticking(clock: Clock, seconds: float) -> ProcessStalls:
    """A guard of 8 s whose thread has ticked every half second for `seconds`."""
    stalls = ProcessStalls(8.0, 10.0, clock)
    for _ in range(int(seconds / TICK_SECONDS)):
        stalls.tick()
        clock.now += TICK_SECONDS
    return stalls


def test_a_batch_the_process_moved_through_is_sent_however_long_it_takes() -> None:
    """A tenant deletion of millions of keys holds the event loop 8 to 12 s, the ticks (and
    the heartbeats) going on: taken for a pause, it stopped the worker at every start."""
    clock = Clock()
    started = clock.now
    stalls = ticking(clock, 30)
    stalls.check(since=started)


@pytest.mark.parametrize("ticked_after", [False, True], ids=["before a tick", "after a tick"])
def test_a_batch_the_process_stood_still_during_is_not_sent(ticked_after: bool) -> None:
    """Paused mid-batch and resumed: the batch may run on to its send before the ticking
    thread sees the pause, or after."""
    clock = Clock()
    stalls = ticking(clock, 2)
    started = clock.now
    clock.now += 12
    if ticked_after:
        stalls.tick()
        clock.now += 0.1
    with pytest.raises(WorkerStalled, match=r"stood still for 12\.5 s, past the 8 s"):
        stalls.check(since=started)


def test_a_batch_taken_soon_after_a_stall_is_not_sent_and_one_taken_later_is() -> None:
    """Paused while idle: events fetched before the pause are taken on resume, before the
    consumer's next heartbeat says its partitions moved."""
    clock = Clock()
    stalls = ticking(clock, 2)
    clock.now += 20
    stalls.tick()  # a stall of 20 s, over before the batch
    clock.now += 1
    with pytest.raises(WorkerStalled, match=r"stood still for 20\.5 s"):
        stalls.check(since=clock.now)
    for _ in range(20):  # ten seconds of ticks
        clock.now += TICK_SECONDS
        stalls.tick()
    stalls.check(since=clock.now)


def test_nothing_stops_a_batch_before_the_first_tick() -> None:
    clock = Clock()
    stalls = ProcessStalls(8.0, 10.0, clock)
    clock.now += 30  # a start: the ticking thread has not run yet
    stalls.check(since=clock.now - 1)


def test_the_ticks_go_on_while_the_main_thread_holds_on_to_its_own_work() -> None:
    stalls = ProcessStalls(8.0, 10.0)
    stalls.start()
    first = stalls.last_tick
    busy_until = time.monotonic() + 3 * TICK_SECONDS
    while time.monotonic() < busy_until:  # pure Python work, never yielding
        sum(range(1000))
    assert first is not None and stalls.last_tick is not None and stalls.last_tick > first
