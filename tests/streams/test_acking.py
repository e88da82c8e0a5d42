"""An event is acked (its offset may be committed) only once Kafka confirmed all it produced."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest

from streams.app import Rumourmill, ack_when_delivered
from streams.settings import Settings


class Event:
    """Stands for a Faust event: records whether it was acked."""

    def __init__(self) -> None:
        self.acked = False

    def ack(self) -> bool:
        self.acked = True
        return True


async def settled(acked: asyncio.Future[bool]) -> None:
    """Until `ack_when_delivered` has decided (a fixed sleep was too short for a stalled loop)."""
    await asyncio.wait_for(asyncio.shield(acked), 5)


def test_an_event_is_acked_once_every_delivery_is_confirmed() -> None:
    async def scenario() -> tuple[bool, bool, list[BaseException]]:
        loop = asyncio.get_running_loop()
        changes, ack = loop.create_future(), loop.create_future()
        event, failures = Event(), []
        acked = ack_when_delivered([event], [changes, ack], failures.append)
        changes.set_result("stored")
        await asyncio.sleep(0)
        halfway = event.acked
        ack.set_result("stored")
        await settled(acked)
        return halfway, event.acked, failures

    halfway, acked, failures = asyncio.run(scenario())
    assert not halfway, "acked before its ack message was stored"
    assert acked and failures == []


def test_a_failed_or_cancelled_delivery_never_acks_and_stops_the_worker() -> None:
    async def scenario(outcome: str) -> tuple[bool, list[BaseException]]:
        loop = asyncio.get_running_loop()
        changes, ack = loop.create_future(), loop.create_future()
        event, failures = Event(), []
        acked = ack_when_delivered([event], [changes, ack], failures.append)
        ack.set_result("stored")
        if outcome == "failed":
            changes.set_exception(TimeoutError("broker gone"))
        else:
            changes.cancel()
        await settled(acked)
        return event.acked, failures

    acked, failures = asyncio.run(scenario("failed"))
    assert not acked
    assert [str(failure) for failure in failures] == ["broker gone"]

    acked, failures = asyncio.run(scenario("cancelled"))
    assert not acked
    assert [type(failure) for failure in failures] == [asyncio.CancelledError]


def test_events_are_acked_in_offset_order_even_when_later_ones_are_confirmed_first() -> None:
    async def scenario() -> list[list[bool]]:
        loop = asyncio.get_running_loop()
        first_sends, second_sends = loop.create_future(), loop.create_future()
        first, second = [Event(), Event()], [Event()]
        failures: list[BaseException] = []
        earlier = ack_when_delivered(first, [first_sends], failures.append)
        later = ack_when_delivered(second, [second_sends], failures.append, after=earlier)
        second_sends.set_result("stored")
        await asyncio.sleep(0.01)  # time to ack the later event, were it acked out of order
        held = [event.acked for event in first + second]
        first_sends.set_result("stored")
        await settled(later)
        assert failures == []
        return [held, [event.acked for event in first + second]]

    held, acked = asyncio.run(scenario())
    assert held == [False, False, False], "a later event was acked before an earlier one"
    assert acked == [True, True, True]


def test_events_after_a_failed_batch_are_never_acked() -> None:
    async def scenario() -> tuple[bool, list[BaseException]]:
        loop = asyncio.get_running_loop()
        first_sends, second_sends = loop.create_future(), loop.create_future()
        later, failures = Event(), []
        earlier = ack_when_delivered([Event()], [first_sends], failures.append)
        acked = ack_when_delivered([later], [second_sends], failures.append, after=earlier)
        second_sends.set_result("stored")
        first_sends.set_exception(TimeoutError("broker gone"))
        await settled(acked)
        return later.acked, failures

    acked, failures = asyncio.run(scenario())
    assert not acked
    assert [str(failure) for failure in failures] == ["broker gone"]


class StoppingApp:
    """Stands for the Faust app: records what it was crashed with."""

    def __init__(self) -> None:
        self.crashed_with: list[BaseException] = []

    async def crash(self, error: BaseException) -> None:
        self.crashed_with.append(error)


def test_a_failed_delivery_is_logged_with_its_cause_and_stops_the_worker(
    caplog: pytest.LogCaptureFixture,
) -> None:
    app = StoppingApp()
    unused: Any = None
    mill = Rumourmill(app, Settings(), *[unused] * 5)  # type: ignore[arg-type]

    async def scenario() -> None:
        delivery = asyncio.get_running_loop().create_future()
        acked = ack_when_delivered([Event()], [delivery], mill.crash_soon)
        delivery.set_exception(TimeoutError("broker gone"))
        await settled(acked)
        await asyncio.wait_for(asyncio.gather(*mill.crashing), 5)

    with caplog.at_level(logging.CRITICAL, logger="rumourmill.worker"):
        asyncio.run(scenario())
    assert [str(error) for error in app.crashed_with] == ["broker gone"]
    [record] = caplog.records
    assert record.getMessage() == "stopping the worker: a delivery to Kafka failed: broker gone"
    assert record.exc_info is not None and record.exc_info[1] is app.crashed_with[0]
