"""Every ack and dead letter of a message fits one record the worker's producer sends, whatever
the message: one it refused stopped the worker, and every restart stopped on the same message.

The messages are the hostile ones that did not fit: reasons listing thousands of problems or
quoting a long key, keys of hundreds of kilobytes, a value at the size limit in base64 beside a
key as long as a broker's message leaves. Each record is measured as aiokafka measures it, with
the key and value the worker sends (`streams.app`: acks by world or the message's kept key,
dead letters by the kept key, in the worker's encodings).
"""

from __future__ import annotations

import base64
from typing import Any

import orjson
import pytest
from aiokafka.record.default_records import DefaultRecordBatchBuilder

from projections.delivery import (
    MOST_KEY_BYTES_KEPT,
    MOST_REASON_CHARS,
    MOST_RECORD_BYTES,
    REFUSALS_SHARE_OF_RECORD,
    SourceMessage,
    bounded_reason,
    dead_letter,
    kept_key,
    with_refusals_bounded,
)
from projections.key_prefixes import OUTBOX
from projections.keys import pack
from projections.projector import Projector
from projections.state import MemoryState
from schemas import Ack, Outcome
from schemas.judgements import RefusedJudgement
from schemas.records import OutboxRecord
from streams.codec import dumps
from streams.settings import EVENT_SHARE_OF_BATCH

LARGEST_EVENT_BYTES = int(MOST_RECORD_BYTES * EVENT_SHARE_OF_BATCH)
"""The most `RUMOURMILL_MAX_EVENT_BYTES` may be (with the changelog batch at its 1 MB most)."""
BROKER_MESSAGE_BYTES = 1_048_588
"""The broker's default `message.max.bytes`: what a message's key and value may fill."""
EVENT: dict[str, Any] = {
    "world_instance_id": "save-1",
    "timeline_id": "main",
    "seq": 1,
    "key": "trade.done",
}
OUT_OF_RANGE = 15_000
"""Numbers past 64 bits in one event of 75 KB: a problem each, a reason of 1.2 MB."""


def hostile(name: str) -> tuple[bytes | None, bytes, str]:
    """A message (key, value) whose ack or dead letter did not fit, and what its reason says."""
    if name == "thousands of problems":
        numbers = b",".join([b"1e30"] * OUT_OF_RANGE)
        value = orjson.dumps(EVENT | {"payload": {"ids": []}}).replace(b"[]", b"[" + numbers + b"]")
        return b"save-1", value, "payload.ids.list.0.float: Input should be less than"
    if name == "a field name of 100,000 control characters":
        value = orjson.dumps(EVENT | {"payload": {"\x01" * 100_000: 1e30}})
        return b"save-1", value, "... (100014 characters): Input should be"
    if name == "a key of 400 KB":
        return b"k" * 400_000, orjson.dumps(EVENT), f"'{'k' * 100}'... (400000 bytes) is not"
    if name == "a key of 260 KB not UTF-8":
        return b"\xff" * 260_000, orjson.dumps(EVENT), "... (260000 bytes) is not the event's"
    if name == "not JSON under a key of 1 MB":
        return b"k" * (BROKER_MESSAGE_BYTES - 100), b"\x00 not json", "not valid JSON"
    if name == "a value at the size limit beside the longest key left":
        value = orjson.dumps(EVENT | {"seq": "1", "payload": {"blob": ""}})
        value = value.replace(b'""', b'"' + b"y" * (LARGEST_EVENT_BYTES - len(value)) + b'"')
        return b"k" * (BROKER_MESSAGE_BYTES - 100 - len(value)), value, "seq: Input should be"
    assert name == "a value over the size limit"
    value = orjson.dumps(EVENT | {"payload": {"blob": "y" * (BROKER_MESSAGE_BYTES - 200)}})
    return b"save-1", value, f"over the limit of {LARGEST_EVENT_BYTES}"


HOSTILE = [
    "thousands of problems",
    "a field name of 100,000 control characters",
    "a key of 400 KB",
    "a key of 260 KB not UTF-8",
    "not JSON under a key of 1 MB",
    "a value at the size limit beside the longest key left",
    "a value over the size limit",
]


def records(message: SourceMessage, acks: list[Ack], letters: list[Any]) -> list[int]:
    """The size of each record the worker sends for these acks and dead letters."""
    sizes = [
        DefaultRecordBatchBuilder.estimate_size_in_bytes(
            kept_key(message.key) if ack.world_instance_id is None else b"save-1",
            Ack.__pydantic_serializer__.to_json(ack),
            [],
        )
        for ack in acks
    ]
    sizes += [
        DefaultRecordBatchBuilder.estimate_size_in_bytes(kept_key(message.key), dumps(letter), [])
        for letter in letters
    ]
    return sizes


@pytest.mark.parametrize("name", HOSTILE)
def test_every_ack_and_dead_letter_fits_one_record_and_says_what_is_wrong(name: str) -> None:
    key, value, said = hostile(name)
    assert len(value) + len(key or b"") < BROKER_MESSAGE_BYTES  # a message Kafka takes
    message = SourceMessage("rumourmill.events", 0, 7, key, value)
    projector = Projector(max_event_bytes=LARGEST_EVENT_BYTES)
    state = MemoryState()
    intake = projector.receive(state, message)
    [ack] = intake.acks
    [letter] = intake.dead_letters
    assert max(records(message, intake.acks, intake.dead_letters)) <= MOST_RECORD_BYTES
    assert ack.reason == letter.reason
    assert said in letter.reason
    assert len(letter.reason) <= MOST_REASON_CHARS
    assert base64.b64decode(letter.value_base64) == value[:LARGEST_EVENT_BYTES]
    assert base64.b64decode(letter.key_base64 or "") == (key or b"")[:MOST_KEY_BYTES_KEPT]
    assert letter.key_bytes == (len(key) if key and len(key) > MOST_KEY_BYTES_KEPT else None)
    again = projector.receive(state, message)  # a redelivery sends the very same
    assert (again.redelivered, again.acks, again.dead_letters) == (
        True,
        intake.acks,
        intake.dead_letters,
    )


def test_thousands_of_problems_are_the_first_five_and_how_many_more() -> None:
    key, value, _ = hostile("thousands of problems")
    intake = Projector().receive(MemoryState(), SourceMessage("events", 0, 0, key, value))
    reason = intake.dead_letters[0].reason
    assert reason.startswith("invalid event: payload.ids.list.0.float: ")
    assert reason.count("payload.ids.list.") == 5
    assert reason.endswith(f"; and {OUT_OF_RANGE - 5} more")


def test_a_redelivery_sends_a_reason_stored_unbounded_bounded() -> None:
    """A release that did not bound reasons kept them in the outbox, and stopped sending its
    dead letter: a redelivery to this one, read from that row, must fit."""
    key, value, said = hostile("thousands of problems")
    message = SourceMessage("rumourmill.events", 0, 7, key, value)
    state = MemoryState()
    Projector().receive(state, message)
    row_key = pack(OUTBOX, message.topic, message.partition, message.offset)
    row = OutboxRecord.from_bytes(state.get(row_key) or b"")
    unbounded = "invalid event: " + "; ".join([f"{said} 18446744073709552000"] * OUT_OF_RANGE)
    state.put(
        row_key,
        OutboxRecord.encode(
            row.message_digest,
            [ack | {"reason": unbounded} for ack in row.acks],
            [letter | {"reason": unbounded} for letter in row.dead_letters],
        ),
    )
    again = Projector().receive(state, message)
    assert again.redelivered
    assert max(records(message, again.acks, again.dead_letters)) <= MOST_RECORD_BYTES
    [letter] = again.dead_letters
    assert letter.reason.startswith(f"invalid event: {said}")
    assert letter.reason.endswith(f"({len(unbounded)} characters in all)")
    assert again.acks[0].reason == letter.reason


def test_a_reason_of_exactly_the_most_characters_is_kept_whole() -> None:
    reason = "x" * MOST_REASON_CHARS
    assert bounded_reason(reason) == reason
    assert bounded_reason(reason + "y").endswith(f"({MOST_REASON_CHARS + 1} characters in all)")


def test_a_dead_letter_says_the_whole_length_only_of_a_value_it_cut() -> None:
    message = SourceMessage("events", 0, 0, b"w", b"y" * 10)
    assert dead_letter(message, "too large", kept_bytes=10).value_bytes is None
    assert dead_letter(message, "too large", kept_bytes=9).value_bytes == 10


def test_a_message_naming_no_world_is_dead_lettered_naming_no_tenant() -> None:
    """The contract's `default` tenant is a world's: a message naming no world names none."""
    intake = Projector().receive(MemoryState(), SourceMessage("events", 0, 0, None, b'{"seq": 1}'))
    [letter] = intake.dead_letters
    assert (letter.tenant_id, letter.world_instance_id) == (None, None)
    assert all(ack.tenant_id is None for ack in intake.acks)


def refused(npc: str, reason: str) -> RefusedJudgement:
    return RefusedJudgement(npc_id=npc, belief_id="b", judgement="feeling", reason=reason)


def refusing(seq: int, *judgements: RefusedJudgement) -> Ack:
    return Ack(
        tenant_id="t",
        world_instance_id="w",
        timeline_id="main",
        seq=seq,
        outcome=Outcome.PROCESSED,
        refused_judgements=list(judgements),
    )


def test_no_refusal_is_listed_past_one_left_out_in_any_ack_of_the_message() -> None:
    """The listed ones are the first the rules made, in their order, across the message's acks:
    once one is left out, the later ones are counted, however small."""
    first = refusing(
        1, refused("npc-0", "z" * 300), refused("npc-1", "x" * 600), refused("npc-2", "y")
    )
    second = refusing(2, refused("npc-3", "y"))
    bounded = with_refusals_bounded([first, second], 2000)  # room for 1,000 bytes of them
    assert [[j.npc_id for j in ack.refused_judgements] for ack in bounded] == [["npc-0"], []]
    assert [ack.more_refused_judgements for ack in bounded] == [2, 1]


def test_a_refusal_costing_exactly_the_room_left_is_listed() -> None:
    one = refused("npc-3", "q")
    cost = len(orjson.dumps(one.model_dump(mode="json"))) + 1  # as JSON, and its comma
    [ack] = with_refusals_bounded([refusing(1, one)], round(cost / REFUSALS_SHARE_OF_RECORD))
    assert ([j.npc_id for j in ack.refused_judgements], ack.more_refused_judgements) == (
        ["npc-3"],
        0,
    )
