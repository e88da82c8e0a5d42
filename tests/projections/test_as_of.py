"""As-of reads: the state once a position was processed, never later (the paragraph before
SPEC section 8)."""

from __future__ import annotations

import orjson
import pytest

from projections.runtime_read import BadRead, runtime_read
from streams.replay import replay_lines
from tests.reads import answer
from tests.tavern import TAVERN

STATE = replay_lines(TAVERN.splitlines()).state


def test_a_read_at_seq_2_of_the_tavern_shows_no_fight() -> None:
    before = answer(runtime_read(STATE, "default", "save-1", "main", "npc-mara", as_of_seq=2))
    assert before["processed_seq"] == 2
    assert before["recollections"] == []
    assert [belief["seq"] for belief in before["beliefs"]] == [2]
    assert "npc-drunk-sailor" not in {relation["entity_id"] for relation in before["relations"]}
    after = answer(runtime_read(STATE, "default", "save-1", "main", "npc-mara"))
    assert [memory["seq"] for memory in after["recollections"]] == [3]
    assert "npc-drunk-sailor" in {relation["entity_id"] for relation in after["relations"]}


def test_a_read_at_the_latest_position_is_the_read_itself() -> None:
    latest = runtime_read(STATE, "default", "save-1", "main", "npc-mara")
    assert runtime_read(STATE, "default", "save-1", "main", "npc-mara", 5) == latest


def test_a_branch_read_before_its_own_events_is_its_parents_past() -> None:
    on_reload = answer(runtime_read(STATE, "default", "save-1", "reload", "npc-mara", 2))
    on_main = answer(runtime_read(STATE, "default", "save-1", "main", "npc-mara", 2))
    assert {**on_reload, "timeline_id": "main"} == on_main


def test_a_position_not_processed_yet_is_refused() -> None:
    with pytest.raises(BadRead, match="beyond the processed_seq 5"):
        runtime_read(STATE, "default", "save-1", "main", "npc-mara", 6)


def test_a_read_as_of_a_position_was_acknowledged_there_not_later() -> None:
    """It said today's acknowledged_seq: beyond its processed_seq, the sign of a gap (SPEC 3)."""
    before = answer(runtime_read(STATE, "default", "save-1", "main", "npc-mara", as_of_seq=2))
    assert (before["acknowledged_seq"], before["processed_seq"]) == (2, 2)


def test_a_branch_waiting_for_its_parent_has_reached_only_what_the_parent_has() -> None:
    """Main has 1 and 3 (2 is missing); a branch after main's 3 waits. Its reads said
    processed_seq 3 and took as_of_seq 3, then answered otherwise once main's 2 came."""
    entered = {"actor": "npc-mara", "location": "loc-tavern"}
    stolen = {"actor": "npc-thief", "target": "npc-mara", "location": "loc-tavern"}
    branch = {"branch": {"parent_timeline_id": "main", "after_seq": 3}}
    lines = [
        line(1, "main", "loreweaver.movement.location-entered", entered),
        line(3, "main", "crime.purse-stolen", stolen),
        line(4, "b", "weather.rain-began", {"location": "loc-tavern", **branch}),
    ]
    waiting = replay_lines(lines).state
    read = answer(runtime_read(waiting, "default", "w", "b", "npc-mara"))
    assert (read["acknowledged_seq"], read["processed_seq"]) == (4, 1)
    with pytest.raises(BadRead, match="as_of_seq 3 is beyond the processed_seq 1 of timeline 'b'"):
        runtime_read(waiting, "default", "w", "b", "npc-mara", 3)
    caught_up = replay_lines([*lines, line(2, "main", "weather.fog-rose", {})]).state
    read = answer(runtime_read(caught_up, "default", "w", "b", "npc-mara", 3))
    assert [memory["seq"] for memory in read["recollections"]] == [3]
    assert answer(runtime_read(caught_up, "default", "w", "b", "npc-mara"))["processed_seq"] == 4


def line(seq: int, timeline: str, key: str, fields: dict[str, object]) -> bytes:
    return orjson.dumps(
        {"world_instance_id": "w", "timeline_id": timeline, "seq": seq, "key": key, **fields}
    )
