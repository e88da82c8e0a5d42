"""As-of reads: the state once a position was processed, never later (the paragraph before
SPEC section 8)."""

from __future__ import annotations

from pathlib import Path

import pytest

from projections.runtime_read import BadRead, runtime_read
from streams.replay import replay_lines
from tests.reads import answer

TAVERN = (Path(__file__).resolve().parents[2] / "examples" / "tavern.ndjson").read_bytes()
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
    same = {"timeline_id": "main", "acknowledged_seq": 0}
    assert {**on_reload, **same} == {**on_main, **same}


def test_a_position_not_processed_yet_is_refused() -> None:
    with pytest.raises(BadRead, match="beyond the processed_seq 5"):
        runtime_read(STATE, "default", "save-1", "main", "npc-mara", 6)
