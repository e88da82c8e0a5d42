"""No event may write a state record larger than the state changelog takes.

An entity's declaration adds up the fields the events declaring it give, and who is at a place
grows with every arrival: the event that made one larger than the changelog topic takes
(`RUMOURMILL_CHANGELOG_BATCH_BYTES` and 64 KiB more) was refused by the broker, and the worker
stopped on it at every restart, for every world of its partition. It is refused instead, whole:
acked `rejected`, dead-lettered with its bytes and what grew too large, none of its writes kept;
the timeline goes on with the next event at its seq.
"""

from __future__ import annotations

import base64
from typing import Any

import orjson
import pytest
from aiokafka.record.default_records import DefaultRecordBatchBuilder

from projections.delivery import Intake, SourceMessage
from projections.key_prefixes import OUTBOX, PENDING
from projections.keys import pack
from projections.projector import Projector
from projections.record_bounds import changelog_message_bytes, most_record_bytes
from projections.state import MemoryState
from schemas import Outcome
from streams.changelog import RECORD_HEADER
from tests.streams.test_judgement_parts import SMALLEST_BATCH_BYTES

TOPIC = "rumourmill.events"
PROJECTOR = Projector(record_bytes=SMALLEST_BATCH_BYTES, max_event_bytes=8192)
MOST = most_record_bytes(SMALLEST_BATCH_BYTES)
NOTE_CHARS = 7_000
"""A field each declaration adds: twelve of them make a declaration of 84 KB."""
LONG_ID_CHARS = 128
"""The longest id: 131 bytes in a list of who is at a place, which 625 of them fill."""


def event(seq: int, **fields: Any) -> bytes:
    return orjson.dumps(
        {"world_instance_id": "save-1", "timeline_id": "main", "seq": seq, "key": "trade.done"}
        | fields
    )


class Story:
    """Events of one world taken in one after the other, at consecutive offsets."""

    def __init__(self) -> None:
        self.state = MemoryState()
        self.offset = 0

    def take(self, value: bytes) -> tuple[SourceMessage, Intake]:
        message = SourceMessage(TOPIC, 0, self.offset, b"save-1", value)
        self.offset += 1
        return message, PROJECTOR.receive(self.state, message)

    def kept(self) -> dict[bytes, bytes]:
        """The state but for the outbox (which keeps what each message produced)."""
        return {key: value for key, value in self.state.items() if not key.startswith(pack(OUTBOX))}


def noted(seq: int) -> bytes:
    """An event at `seq` declaring Mara again, with a note of its own."""
    return event(seq, entities={"npc-mara": {f"note_{seq}": "x" * NOTE_CHARS}})


def assert_refused_whole(story: Story, value: bytes, grew: str) -> str:
    """`value` taken into `story` is refused, `grew` too large, and none of its writes kept;
    its reason."""
    before = story.kept()
    message, intake = story.take(value)
    [ack] = intake.acks
    assert ack.outcome is Outcome.REJECTED
    assert ack.reason is not None and ack.reason.startswith(grew)
    assert f"more than a state record takes ({MOST:,}" in ack.reason
    [letter] = intake.dead_letters
    assert base64.b64decode(letter.value_base64) == message.value
    assert letter.reason == ack.reason
    assert story.kept() == before
    assert max(len(key) + len(value) for key, value in story.state.items()) <= MOST
    return ack.reason


def test_a_declaration_grown_past_a_record_is_refused_and_the_timeline_goes_on() -> None:
    story = Story()
    for seq in range(1, 12):  # a declaration of 77 KB
        assert story.take(noted(seq))[1].acks[0].outcome is Outcome.PROCESSED
    assert_refused_whole(story, noted(12), "the declaration of entity 'npc-mara' would take 84,")

    _, intake = story.take(event(12, entities={"npc-mara": {"name": "Mara Vell"}}))
    assert [(ack.seq, ack.outcome) for ack in intake.acks] == [(12, Outcome.PROCESSED)]


def long_id(number: int) -> str:
    return f"npc-{number:04d}".ljust(LONG_ID_CHARS, "x")


def arrival(seq: int, character: str, place: str = "tavern") -> bytes:
    return event(seq, key="loreweaver.movement.location-entered", actor=character, location=place)


def test_an_arrival_that_would_crowd_a_place_past_a_record_is_refused() -> None:
    story = Story()
    for seq in range(1, 625):  # its head: a record of 81,800 bytes
        assert story.take(arrival(seq, long_id(seq)))[1].acks[0].outcome is Outcome.PROCESSED
    seq = 625
    assert_refused_whole(
        story, arrival(seq, long_id(seq)), "the list of who is at 'tavern' (625 ids) would take "
    )

    _, intake = story.take(arrival(seq, long_id(seq), place="harbour"))
    assert [(ack.seq, ack.outcome) for ack in intake.acks] == [(seq, Outcome.PROCESSED)]


def test_a_waiting_event_too_large_is_refused_as_its_gap_fills() -> None:
    """Released by the message filling its gap, it is refused with its own bytes; the events
    before it are applied, and its timeline waits again for its seq."""
    story = Story()
    for seq in range(1, 11):
        assert story.take(noted(seq))[1].acks[0].outcome is Outcome.PROCESSED
    for value in (noted(12), event(13)):
        assert story.take(value)[1].acks[0].outcome is Outcome.DEFERRED
    _, intake = story.take(noted(11))
    assert [(ack.seq, ack.outcome) for ack in intake.acks] == [
        (11, Outcome.PROCESSED),
        (12, Outcome.REJECTED),
    ]
    [letter] = intake.dead_letters
    assert base64.b64decode(letter.value_base64) == noted(12)
    assert intake.acks[1].reason == letter.reason
    assert letter.reason is not None
    assert "the declaration of entity 'npc-mara' would take" in letter.reason
    assert max(len(key) + len(value) for key, value in story.state.items()) <= MOST

    _, intake = story.take(event(12))
    assert [(ack.seq, ack.outcome) for ack in intake.acks] == [
        (12, Outcome.PROCESSED),
        (13, Outcome.PROCESSED),
    ]


def test_a_waiting_event_refused_too_large_and_left_by_a_crash_takes_no_place_of_the_next() -> None:
    """A worker killed after the outbox row of the message that refused it, and before the
    delete written after the row, keeps the refused event waiting: it reads as an event, so the
    corrected event sent at its seq was acked `duplicate` and lost, and the refused one refused
    again. The message, taken in again after the crash, deletes it now."""
    story = Story()
    for seq in range(1, 11):
        story.take(noted(seq))
    for value in (noted(12), event(13)):
        story.take(value)
    gap, _ = story.take(noted(11))
    story.state.put(pack(PENDING, "default", "save-1", "main", 12), noted(12))  # delete lost
    again = PROJECTOR.receive(story.state, gap)
    assert again.redelivered
    assert [(ack.seq, ack.outcome) for ack in again.acks] == [
        (11, Outcome.PROCESSED),
        (12, Outcome.REJECTED),
    ]

    _, intake = story.take(event(12))
    assert [(ack.seq, ack.outcome) for ack in intake.acks] == [
        (12, Outcome.PROCESSED),
        (13, Outcome.PROCESSED),
    ]
    assert intake.dead_letters == []


@pytest.mark.parametrize("batch_bytes", [SMALLEST_BATCH_BYTES, 1_000_000])
def test_the_largest_state_record_alone_in_a_batch_fits_what_the_changelog_takes(
    batch_bytes: int,
) -> None:
    """Built as the worker's producer builds it (aiokafka's record batch, with the changelog's
    record header): the most a record may take leaves room for its batch and record overheads."""
    key = b"k" * 100
    value = b"v" * (most_record_bytes(batch_bytes) - len(key))
    batch = DefaultRecordBatchBuilder(2, 0, False, -1, -1, -1, 2**30)
    batch.append(0, 0, key, value, [RECORD_HEADER])
    assert len(batch.build()) <= changelog_message_bytes(batch_bytes)


def test_a_declaration_as_large_as_a_record_takes_is_kept_and_a_byte_more_refused() -> None:
    """The bound holds the larger of a declaration's two records (its head repeats the version
    after its position) to the most a record takes, that size included."""

    projector = Projector(record_bytes=SMALLEST_BATCH_BYTES, max_event_bytes=2 * MOST)

    def declared(note_chars: int) -> tuple[MemoryState, Outcome]:
        state = MemoryState()
        value = event(1, entities={"npc-mara": {"note": "x" * note_chars}})
        [ack] = projector.receive(state, SourceMessage(TOPIC, 0, 0, b"save-1", value)).acks
        return state, ack.outcome

    shortest_refused, longest_kept = MOST, 0
    while shortest_refused - longest_kept > 1:
        middle = (shortest_refused + longest_kept) // 2
        if declared(middle)[1] is Outcome.PROCESSED:
            longest_kept = middle
        else:
            shortest_refused = middle
    state, _ = declared(longest_kept)
    assert max(len(key) + len(value) for key, value in state.items()) == MOST
