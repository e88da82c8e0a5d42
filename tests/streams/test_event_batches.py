"""The agents take whole batches of what waits, and let Faust commit only past what they ack."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

from mode.utils.queues import FlowControlEvent, ThrowableQueue

from streams.event_batches import event_batches

GENERATION = 3


@dataclass
class Message:
    """Stands for a Faust message: its topic, offset and rebalance generation."""

    offset: int
    generation_id: int = GENERATION
    topic: str = "events"
    tracked: bool = False


@dataclass
class Event:
    message: Message


@dataclass
class Consumer:
    """Stands for Faust's consumer: which messages it waits for an ack of."""

    unacked: list[int] = field(default_factory=list)

    def track_message(self, message: Message) -> None:
        self.unacked.append(message.offset)


def stream_of(events: list[Event]) -> tuple[Any, ThrowableQueue[Event], Consumer]:
    """A stand-in agent stream whose channel's queue holds `events`, flow running."""
    flow = FlowControlEvent()
    flow.resume()
    queue: ThrowableQueue[Event] = ThrowableQueue(flow_control=flow)
    for event in events:
        queue.put_nowait(event)
    consumer = Consumer()
    app = SimpleNamespace(
        flow_control=flow,
        consumer_generation_id=GENERATION,
        consumer=consumer,
        topics=SimpleNamespace(acking_topics={"events"}),
    )
    return SimpleNamespace(app=app, channel=SimpleNamespace(queue=queue)), queue, consumer


def test_waiting_events_come_in_full_batches_in_order_each_tracked_once() -> None:
    async def scenario() -> tuple[list[int], list[int], int]:
        stream, queue, consumer = stream_of([Event(Message(offset)) for offset in range(450)])
        batches = event_batches(stream, 200, 60.0)  # a full batch never waits
        taken = [event.message.offset for _ in range(2) for event in await anext(batches)]
        return taken, consumer.unacked, queue.qsize()

    taken, unacked, left = asyncio.run(asyncio.wait_for(scenario(), 5))
    assert taken == list(range(400))
    assert unacked == list(range(400))
    assert left == 50


def test_a_lone_event_is_taken_within_the_wait() -> None:
    async def scenario() -> float:
        stream, _, _ = stream_of([Event(Message(0))])
        started = asyncio.get_running_loop().time()
        await anext(event_batches(stream, 200, 0.05))
        return asyncio.get_running_loop().time() - started

    assert 0.04 <= asyncio.run(asyncio.wait_for(scenario(), 5)) < 1.0


def test_events_fetched_before_a_rebalance_are_dropped_and_not_waited_for() -> None:
    async def scenario() -> tuple[list[int], list[int]]:
        stale = [Event(Message(offset, generation_id=GENERATION - 1)) for offset in range(3)]
        stream, _, consumer = stream_of([*stale, Event(Message(3))])
        batch = await anext(event_batches(stream, 200, 0.01))
        return [event.message.offset for event in batch], consumer.unacked

    taken, unacked = asyncio.run(asyncio.wait_for(scenario(), 5))
    assert taken == [3]
    assert unacked == [3]  # the stale ones come again from the committed offset


def test_the_batches_end_when_faust_closes_the_channel() -> None:
    async def scenario() -> list[list[Event]]:
        stream, queue, _ = stream_of([])
        asyncio.get_running_loop().call_later(0.01, queue._throw, StopAsyncIteration())
        return [batch async for batch in event_batches(stream, 200, 0.01)]

    assert asyncio.run(asyncio.wait_for(scenario(), 5)) == []
