"""Events off an agent's stream in whole batches, without Faust's per-event stream machinery.

Faust's `Stream.take` and `noack_take` move events one at a time from the channel's queue into
their buffer, with a loop turn, a processor and sensor calls each: with thousands waiting, the
ingest agent's batches held what that managed in 5 ms (some 25 events), and every batch's sends
to Kafka served only those. `event_batches` takes them straight off the queue instead.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import TypeVar, cast

import faust
from faust.types import AppT, EventT, Message
from mode.utils.queues import ThrowableQueue

T = TypeVar("T")


async def event_batches(
    stream: faust.StreamT[T], most: int, within: float
) -> AsyncIterator[list[EventT[T]]]:
    """The events of `stream` in lists of at most `most`: all those already waiting, then
    what comes within `within` seconds of the first. Nothing here acks them.

    What the stream did per event that matters is kept: an event fetched before a rebalance is
    dropped unacked (its partition is read again from its committed offset), and every other
    one is tracked as unacked, so Faust commits past it and lets its partition go only once
    the agent acked it.
    """
    app = stream.app
    queue = cast(ThrowableQueue[EventT[T]], cast(faust.ChannelT[T], stream.channel).queue)
    consumer = app.consumer
    acking_topics = app.topics.acking_topics
    while True:
        try:
            waited = await _waiting(queue, most, within)
        except StopAsyncIteration:  # Faust closes the channel so at a stop
            return
        events = [event for event in waited if _of_this_generation(app, event.message)]
        for event in events:
            message = event.message
            if message.topic in acking_topics and not message.tracked:
                message.tracked = True
                consumer.track_message(message)
        if events:
            yield events


async def _waiting(queue: ThrowableQueue[EventT[T]], most: int, within: float) -> list[EventT[T]]:
    """At most `most` events off `queue`: the first to come, then all that wait already, then
    those that come within `within` seconds of the first."""
    loop = asyncio.get_running_loop()
    waited = [await queue.get()]
    deadline = loop.time() + within
    while len(waited) < most:
        if not queue.empty():
            waited.append(queue.get_nowait())
        elif (remaining := deadline - loop.time()) <= 0:
            break
        else:
            try:
                waited.append(await asyncio.wait_for(queue.get(), remaining))
            except TimeoutError:
                break
    return waited


def _of_this_generation(app: AppT, message: Message) -> bool:
    """Whether `message` was fetched since the last rebalance (as Faust's streams check)."""
    return app.flow_control.is_active() and message.generation_id == app.consumer_generation_id
