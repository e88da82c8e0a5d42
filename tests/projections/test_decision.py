"""Memory in a decision (section 10) over the seed's tavern, by value."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest

from projections.decision import decision
from projections.runtime_read import BadRead, NotFound
from schemas.policy import Policy
from streams.recall_index import SqliteRecallIndex
from streams.replay import replay_lines
from tests.reads import answer

TAVERN = (Path(__file__).resolve().parents[2] / "examples" / "tavern.ndjson").read_bytes()
ASKED = orjson.dumps(
    {
        "world_instance_id": "save-1",
        "timeline_id": "main",
        "seq": 6,
        "key": "loreweaver.conversation.player-said",
        "actor": "player-1",
        "target": "npc-mara",
        "players": ["player-1"],
        "payload": {"text": "Who started the fight?"},
        "game_time": "day 1, 22:00",
    }
)
STATE = replay_lines([*TAVERN.splitlines(), ASKED]).state
FIGHT = "Ilse enemy defeated at The Crooked Lantern (enemy: npc-drunk-sailor)"


def decide(after_seq: int, npc: str = "npc-mara", player: str | None = None) -> Any:
    found = decision(
        STATE, SqliteRecallIndex(), "default", "save-1", "main", npc, after_seq, player, Policy()
    )
    return answer(found)


def test_maras_memories_about_ilse_and_the_tavern_come_first() -> None:
    context = decide(6)
    knowledge = context["knowledge"]
    assert 1 <= len(knowledge) <= 10
    about_ilse = [m for m in knowledge if "player-1" in m["about"]]
    assert knowledge[: len(about_ilse)] == about_ilse  # the player first
    assert [m["importance"] for m in about_ilse] == sorted(
        (m["importance"] for m in about_ilse), reverse=True
    )
    assert knowledge[0]["content"] == FIGHT  # the most important about Ilse, at the tavern
    assert context["verdict"] is None


def test_the_prompt_holds_the_knowledge_labelled_and_nothing_of_the_world_record() -> None:
    context = decide(6)
    lines = context["prompt"].splitlines()
    assert lines[0] == "What Mara knows (from memory; any of it may be wrong):"
    assert lines[1:-2] == [f"- {m['content']}" for m in context["knowledge"]]
    assert lines[-2:] == [
        "Mara knows nothing beyond this.",
        "The referee's verdict on what Ilse just said: none.",
    ]
    assert "status" not in context["prompt"]  # the record says the sailor's status: defeated


def test_the_context_is_as_of_the_event() -> None:
    earlier = decide(2)  # the promise: the fight has not happened yet
    assert FIGHT not in [m["content"] for m in earlier["knowledge"]]
    assert [m["seq"] for m in earlier["knowledge"]] == [2]


@pytest.mark.parametrize(
    ("after_seq", "npc", "player", "error", "detail"),
    [
        (5, "npc-mara", None, BadRead, "names 0 players"),
        (6, "npc-mara", "player-2", BadRead, "'player-2' is not a player"),
        (6, "npc-tomas", None, NotFound, "neither by nor to 'npc-tomas'"),
        (7, "npc-mara", None, BadRead, "beyond the processed_seq 6"),
    ],
)
def test_a_decision_that_cannot_be_made_is_refused(
    after_seq: int, npc: str, player: str | None, error: type[Exception], detail: str
) -> None:
    with pytest.raises(error, match=detail):
        decide(after_seq, npc, player)
