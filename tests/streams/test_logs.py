"""The worker's log as machines read it: one JSON object per line, `extra` fields as keys."""

from __future__ import annotations

import asyncio
import contextlib
import io
import logging
import logging.config
import re
from collections.abc import Callable
from types import SimpleNamespace
from typing import cast

import aiohttp
import orjson
import pytest
from faust.web import Request, Web
from yarl import URL

from localbroker import free_port
from streams.forwarding import owner_answer
from streams.logs import (
    DEAD_LETTERS,
    MOST_KINDS,
    QuietRepeats,
    logger,
    logging_config,
    reason_kind,
)
from streams.settings import Settings
from streams.web import HTTPProblem


def logged(settings: Settings, emit: Callable[[logging.Logger], None]) -> list[str]:
    """The lines `emit` logs to a worker's log configured by `settings`."""
    stream = io.StringIO()
    config = logging_config(settings)
    config["handlers"]["default"]["stream"] = stream
    handlers, level = logging.root.handlers[:], logging.root.level
    logging.config.dictConfig(config)
    try:
        emit(logger("test"))
    finally:
        logging.root.handlers[:] = handlers
        logging.root.setLevel(level)
    return stream.getvalue().splitlines()


def dead_letter_then_crash(log: logging.Logger) -> None:
    log.warning("dead letter %s: %s", "events[0]@7", "not valid JSON", extra={"offset": 7})
    try:
        raise RuntimeError("the disk is full")
    except RuntimeError:
        log.exception("stopping the worker")


def test_json_log_lines_carry_the_message_the_extra_fields_and_the_exception() -> None:
    lines = logged(Settings(log_format="json"), dead_letter_then_crash)
    assert len(lines) == 2
    first, second = map(orjson.loads, lines)
    assert (first["level"], first["logger"], first["offset"]) == ("warning", "rumourmill.test", 7)
    assert first["message"] == "dead letter events[0]@7: not valid JSON"
    assert second["message"] == "stopping the worker"
    assert "RuntimeError: the disk is full" in second["exception"]


def test_text_lines_are_for_people_and_respect_the_level() -> None:
    lines = logged(Settings(log_level="error"), dead_letter_then_crash)
    assert "[ERROR] rumourmill.test: stopping the worker" in lines[0]
    assert lines[-1] == "RuntimeError: the disk is full"
    assert not any("dead letter" in line for line in lines)


def test_text_lines_show_an_events_or_a_models_terminal_escapes_not_act_on_them() -> None:
    """Found by a reviewer: a dead letter's reason names an event's field as sent, and a model
    server's answer is quoted, so an OSC sequence in either set the operator's window title
    (or wrote their clipboard) through a worker's log on their terminal."""

    def hostile(log: logging.Logger) -> None:
        log.warning(
            "dead letter %s: invalid event: entities.%s.name", "events[0]@7", "\x1b]0;X\x07"
        )
        log.warning("the model gave no answer: not a chat completion: \u202eevil")

    lines = logged(Settings(), hostile)
    assert not any(mark in line for line in lines for mark in ("\x1b", "\x07", "\u202e"))
    assert "entities.\\x1b]0;X\\x07.name" in lines[0]
    assert lines[1].endswith("not a chat completion: \\u202eevil")


def test_the_kafka_clients_same_complaint_is_logged_once_per_quiet_spell() -> None:
    """With its broker gone, aiokafka logged some 125 lines a second (measured on a real
    broker killed under a worker), burying the worker's own."""
    began = 1_000_000.0

    def broker_gone(log: logging.Logger) -> None:
        client = logging.getLogger("aiokafka")
        for second in range(40):
            for attempt in range(100):
                record = client.makeRecord(
                    client.name,
                    logging.ERROR,
                    __file__,
                    0,
                    "Unable connect to node with id %s: %s",
                    (1, f"refused {attempt}"),
                    None,
                )
                record.created = began + second
                client.handle(record)
        log.error("the worker's own line")

    lines = logged(Settings(), broker_gone)
    assert [line.split("aiokafka: ")[-1] for line in lines if "aiokafka" in line] == [
        "Unable connect to node with id 1: refused 0",
        "Unable connect to node with id 1: refused 0 (and 2999 more like it since the last one"
        " logged)",
    ]
    assert "the worker's own line" in lines[-1]


def test_dead_letters_are_logged_once_per_kind_of_reason_per_quiet_spell() -> None:
    """A game server sending a broken event at every turn logged a warning for each (2,163 in
    3 s in a reviewer's run). Each kind of reason is logged at once, then once per spell."""
    began = 1_000_000.0
    reasons = [
        f"invalid event: seq: Input should be greater than or equal to {n}" for n in range(3)
    ]

    def broken_events(log: logging.Logger) -> None:
        letters = logging.getLogger(DEAD_LETTERS)
        for second in range(40):
            for offset, reason in enumerate([*reasons, "not valid JSON"]):
                record = letters.makeRecord(
                    letters.name,
                    logging.WARNING,
                    __file__,
                    0,
                    "dead letter %s: %s",
                    (f"events[0]@{second * 4 + offset}", reason),
                    None,
                    extra={"reason_kind": reason_kind(reason)},
                )
                record.created = began + second
                letters.handle(record)

    lines = logged(Settings(), broken_events)
    assert [line.split("deadletters: ")[-1] for line in lines] == [
        f"dead letter events[0]@0: {reasons[0]}",
        "dead letter events[0]@3: not valid JSON",
        f"dead letter events[0]@120: {reasons[0]} (and 89 more like it since the last one logged)",
        "dead letter events[0]@123: not valid JSON (and 29 more like it since the last one logged)",
    ]


@pytest.mark.parametrize(
    ("one", "other", "alike"),
    [
        (
            "invalid event: seq: Input should be greater than or equal to 1",
            "invalid event: seq: Input should be a valid integer",
            True,
        ),
        (
            "invalid event: seq: Input should be a valid integer",
            "invalid event: tenant_id: String should match pattern",
            False,
        ),
        (
            "message key 'evt-1' is not the event's world_instance_id 'w1'",
            "message key 'evt-2' is not the event's world_instance_id 'w2'",
            True,
        ),
        ("unknown branch parent 'a'", "unknown branch parent 'b'", True),
        (
            "invalid event: entities.smith.name: String should have at most 256 characters",
            "invalid event: entities.guard.name: String should have at most 256 characters",
            True,
        ),
        (
            "message key 'a: b' is not the event's world_instance_id 'w'",
            "message key 'c' is not the event's world_instance_id 'w'",
            True,
        ),
        ("not valid JSON", "unknown branch parent 'b'", False),
    ],
)
def test_dead_letters_of_one_cause_are_one_kind_whatever_ids_they_name(
    one: str, other: str, alike: bool
) -> None:
    """All refused by the contract were one kind, so a second game server's other fault was
    never logged while the first flooded; a reason quoting the message's key was a kind per
    key, and a producer keying events by their ids logged every one."""
    assert (reason_kind(one) == reason_kind(other)) is alike


def test_the_kinds_quieted_are_at_most_a_bounded_number_however_many_come_at_once() -> None:
    """Each kind was remembered for ever (20,000 held 8.9 MB); then, forgotten only once its
    spell was over, a burst of kinds in one spell rebuilt the whole memory at every record
    (1.6 ms a record at 20,000, on the event loop). The one met longest ago goes."""
    quiet = QuietRepeats()
    letters = logging.getLogger(DEAD_LETTERS)
    for number in range(5_000):
        record = letters.makeRecord(
            letters.name, logging.WARNING, __file__, 0, f"kind {number}", (), None
        )
        record.created = 1_000_000.0
        assert quiet.filter(record)
    assert len(quiet._shown) == MOST_KINDS


def test_a_read_not_forwarded_is_logged_once_per_quiet_spell_and_owner() -> None:
    """Its owner dead, every read of its worlds through another worker logged a line until the
    group rebalanced (14,674 in 15 s in a reviewer's run); quieted as one kind, one dead
    owner's lines hid another's."""
    dead = [URL(f"http://127.0.0.1:{free_port()}") for _ in range(2)]
    request = cast(Request, SimpleNamespace(rel_url=URL("/v2/read"), method="GET", headers={}))

    async def forwards() -> None:
        async with aiohttp.ClientSession() as client:
            for read in range(20):
                with contextlib.suppress(HTTPProblem):
                    here, unused = URL("http://127.0.0.1:1"), cast(Web, None)
                    await owner_answer(
                        "w", dead[read % 2], here, client, unused, request, wait_seconds=5.0
                    )

    lines = logged(Settings(), lambda log: asyncio.run(forwards()))
    assert len(lines) == 2, lines
    assert {owner.port for owner in dead} == {
        int(re.findall(r"forwarded to 127\.0\.0\.1:(\d+)", line)[0]) for line in lines
    }
