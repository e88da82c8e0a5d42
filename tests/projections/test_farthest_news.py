"""News travels at most `MAX_HOPS` hops from its start.

Each hop adds its teller to the memory's chain and the listener to whom it is about: a rumour
told on from character to character grew by some 300 bytes a hop with the longest ids, and
past 270 hops made a memory larger than one record of the state changelog takes at the least
`RUMOURMILL_CHANGELOG_BATCH_BYTES`; the broker refused it and the worker stopped on it at every
restart. News that far from its start is passed on no further, by a `told` or a meeting.
"""

from __future__ import annotations

from typing import Any

import orjson

from projections.memories import MAX_HOPS
from projections.policy import resolve
from projections.projector import Projector
from projections.record_bounds import most_record_bytes
from projections.runtime_read import NotFound, runtime_read
from projections.state import MemoryState
from streams.replay import replay_lines
from tests.streams.test_judgement_parts import SMALLEST_BATCH_BYTES

MOST = most_record_bytes(SMALLEST_BATCH_BYTES)
TOLD = "loreweaver.conversation.told"
MET = "loreweaver.social.characters-met"


def character(number: int) -> str:
    """One of a town's characters, under the longest id."""
    return f"npc-{number:04d}".ljust(128, "x")


def event(seq: int, key: str, **fields: Any) -> bytes:
    return orjson.dumps(
        {"world_instance_id": "town", "timeline_id": "main", "seq": seq, "key": key} | fields
    )


def knowledge_hops(state: MemoryState, npc: str) -> list[int]:
    """How far from its start each piece of news `npc` holds came."""
    try:
        read = runtime_read(state, "default", "town", "main", npc).model_dump(mode="json")
    except NotFound:
        return []
    return [belief["hops"] for belief in read["beliefs"] if belief["kind"] == "knowledge"]


def test_news_told_on_and_on_stops_before_its_memory_outgrows_a_record() -> None:
    """Each character tells the next what it was told (naming no memory, as a game tells of a
    rumour): 440 hops used to make a memory of 134,700 bytes."""
    tellings = [
        event(
            seq,
            TOLD,
            actor=character(seq - 1),
            target=character(seq),
            payload={"content": "The harbour master drowned"},
        )
        for seq in range(1, 441)
    ]
    projector = Projector(record_bytes=SMALLEST_BATCH_BYTES, max_event_bytes=8192)
    replayed = replay_lines(tellings, projector)
    assert replayed.outcomes == {"processed": 440}
    largest = max(len(key) + len(value) for key, value in replayed.state.items())
    assert largest < MOST // 4

    assert knowledge_hops(replayed.state, character(MAX_HOPS)) == [MAX_HOPS]
    assert knowledge_hops(replayed.state, character(MAX_HOPS + 1)) == []


def test_a_meeting_passes_no_news_as_far_from_its_start_as_news_goes() -> None:
    """A theft seen, then passed along a line of characters, each meeting the next."""
    policy = resolve(None, {"memory": {"spreading": {"enabled": True}}})
    lines = [
        event(1, "crime.purse-stolen", actor="npc-thief", target=character(0), location="inn"),
        *(
            event(seq, MET, actor=character(seq - 2), target=character(seq - 1))
            for seq in range(2, MAX_HOPS + 4)
        ),
    ]
    state = replay_lines(lines, Projector(policies=lambda tenant, world: policy)).state

    assert knowledge_hops(state, character(MAX_HOPS)) == [MAX_HOPS]
    assert knowledge_hops(state, character(MAX_HOPS + 1)) == []
