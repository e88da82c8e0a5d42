"""Provenance of news told with no memory behind it: where a timeline saw it start.

The tavern example: Mara tells Tomas (main 5) that Ilse beat the drunk sailor senseless, naming
no memory of hers. The news is its claim; it starts at the first `told` a timeline sees.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson

from projections.digest import world_digest
from projections.provenance import provenance
from projections.runtime_read import runtime_read
from projections.state import MemoryState
from streams.replay import replay_lines
from tests.reads import answer

TAVERN = (Path(__file__).resolve().parents[2] / "examples" / "tavern.ndjson").read_bytes()
MAIN = [line for line in TAVERN.splitlines() if orjson.loads(line)["timeline_id"] == "main"]
THE_NEWS = orjson.loads(MAIN[4])["payload"]


def told(timeline: str, seq: int, listener: str, **fields: Any) -> bytes:
    return orjson.dumps(
        {
            "world_instance_id": "save-1",
            "timeline_id": timeline,
            "seq": seq,
            "key": "loreweaver.conversation.told",
            "actor": "npc-mara",
            "target": listener,
            "payload": THE_NEWS,
        }
        | fields
    )


def origin_for(state: MemoryState, timeline: str, npc: str) -> tuple[str, int, str]:
    """(timeline, seq, key) of where `npc`'s only belief started, as `timeline` sees it."""
    [belief] = answer(runtime_read(state, "default", "save-1", timeline, npc))["beliefs"]
    found = answer(provenance(state, "default", "save-1", timeline, npc, belief["belief_id"]))
    origin = found["origin"]
    return origin["timeline_id"], origin["seq"], origin["key"]


def test_news_told_again_still_started_where_it_was_first_told() -> None:
    state = replay_lines([*MAIN, told("main", 6, "npc-ilka")]).state
    first = ("main", 5, "loreweaver.conversation.told")
    assert origin_for(state, "main", "npc-tomas") == first
    assert origin_for(state, "main", "npc-ilka") == first


def test_a_branch_names_where_it_saw_news_start_whatever_the_delivery_order() -> None:
    """The reload branches from main after 4: main's `told` at 5 is its abandoned future. The
    same news told on the reload starts there, whether main 5 arrived first or not."""
    reload = told("reload", 5, "npc-tomas", branch={"parent_timeline_id": "main", "after_seq": 4})
    parent_first = replay_lines([*MAIN, reload]).state
    branch_first = replay_lines([*MAIN[:4], reload, MAIN[4]]).state
    for state in (parent_first, branch_first):
        assert origin_for(state, "reload", "npc-tomas") == (
            "reload",
            5,
            "loreweaver.conversation.told",
        )
        assert origin_for(state, "main", "npc-tomas") == ("main", 5, "loreweaver.conversation.told")
    assert world_digest(parent_first, "default", "save-1") == world_digest(
        branch_first, "default", "save-1"
    )
