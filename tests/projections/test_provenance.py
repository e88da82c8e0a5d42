"""Provenance of news told with no memory behind it: where a timeline saw it start.

The tavern example: Mara tells Tomas (main 5) that Ilse beat the drunk sailor senseless, naming
no memory of hers. The news is its claim; it starts at the first `told` a timeline sees.
"""

from __future__ import annotations

from typing import Any

import orjson

from projections.digest import world_digest
from projections.memories import belief_id
from projections.provenance import provenance
from projections.runtime_read import runtime_read
from projections.state import MemoryState
from streams.replay import replay_lines
from tests.reads import answer
from tests.tavern import MAIN

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


SAILOR_DOWN = [{"subject": "npc-drunk-sailor", "attribute": "status", "value": "defeated"}]
TOLD_SAILOR_DOWN = {
    "content": "The sailor was beaten",
    "about": ["npc-drunk-sailor"],
    "facts": SAILOR_DOWN,
}


def happened(seq: int, key: str, timeline: str = "main", **fields: Any) -> bytes:
    return orjson.dumps(
        {"world_instance_id": "save-1", "timeline_id": timeline, "seq": seq, "key": key} | fields
    )


MARA_SEES_THE_FIGHT = happened(
    1,
    "combat.enemy-defeated",
    actor="player-1",
    target="npc-drunk-sailor",
    players=["player-1"],
    witnesses=["npc-mara"],
    facts=SAILOR_DOWN,
)
"""Mara sees Ilse defeat the sailor, at seq 1 of main."""


def test_a_fact_said_again_unchanged_is_still_news_of_the_event_that_made_it() -> None:
    """Mara sees Ilse defeat the sailor (1); a guard's round says so again (2), on main and on a
    branch of it. News claiming it, told to Mara with Tomas listening, is news of the fight:
    Mara, who saw it, takes nothing in, and Tomas's started at the fight, not at the round."""
    lines = [MARA_SEES_THE_FIGHT]
    branch = {"parent_timeline_id": "main", "after_seq": 1}
    for timeline, forked in (("main", {}), ("reload", {"branch": branch})):
        lines += [
            happened(
                2, "guard.round-made", timeline, actor="npc-guard", facts=SAILOR_DOWN, **forked
            ),
            happened(
                3,
                "loreweaver.conversation.told",
                timeline,
                actor="npc-ilka",
                target="npc-mara",
                witnesses=["npc-tomas"],
                payload=TOLD_SAILOR_DOWN,
            ),
        ]
    state = replay_lines(lines).state
    for timeline in ("main", "reload"):
        mara = answer(runtime_read(state, "default", "save-1", timeline, "npc-mara"))
        assert mara["beliefs"] == []
        assert origin_for(state, timeline, "npc-tomas") == ("main", 1, "combat.enemy-defeated")


def test_a_fact_changed_and_changed_back_is_news_of_the_change_back() -> None:
    """The sailor gets up (2) and is beaten again (3), which Mara did not see: she takes news
    of it in, as news that started at the second fight."""
    got_up = [{"subject": "npc-drunk-sailor", "attribute": "status", "value": "fine"}]
    lines = [
        happened(
            1, "combat.enemy-defeated", actor="npc-ilse", witnesses=["npc-mara"], facts=SAILOR_DOWN
        ),
        happened(2, "combat.recovered", actor="npc-drunk-sailor", facts=got_up),
        happened(3, "combat.enemy-defeated", actor="npc-bram", facts=SAILOR_DOWN),
        happened(
            4,
            "loreweaver.conversation.told",
            actor="npc-ilka",
            target="npc-mara",
            payload=TOLD_SAILOR_DOWN,
        ),
    ]
    state = replay_lines(lines).state
    assert origin_for(state, "main", "npc-mara") == ("main", 3, "combat.enemy-defeated")


def sailor_news_passed_on(named: bool) -> MemoryState:
    """Mara sees Ilse defeat the sailor (1), tells Tomas (2), who tells Ilka (3): each `told`
    claims the fight's fact, naming the teller's memory of it when `named`."""
    mara_saw = belief_id("default", "save-1", "main", 1, "npc-mara", "event")
    tomas_heard = belief_id("default", "save-1", "main", 2, "npc-tomas", "knowledge")
    lines = [MARA_SEES_THE_FIGHT]
    for seq, teller, listener, belief in (
        (2, "npc-mara", "npc-tomas", mara_saw),
        (3, "npc-tomas", "npc-ilka", tomas_heard),
    ):
        payload = TOLD_SAILOR_DOWN | ({"belief_id": belief} if named else {})
        lines.append(
            happened(
                seq,
                "loreweaver.conversation.told",
                actor=teller,
                target=listener,
                payload=payload,
            )
        )
    return replay_lines(lines).state


def test_news_told_without_naming_a_memory_travels_on_from_the_tellers_own() -> None:
    """Tomas had the fight from Mara, who saw it: told on to Ilka without naming his memory, it
    reaches her two hops from the fight, as sure as a retelling of his (0.72 x 0.8), through
    Mara and Tomas, exactly as naming his memory passes it. (She held it one hop away, at the
    0.8 of news nobody stood behind, told by Tomas alone.)"""
    state = sailor_news_passed_on(named=False)
    [belief] = answer(runtime_read(state, "default", "save-1", "main", "npc-ilka"))["beliefs"]
    assert (belief["source"], belief["source_entity"], belief["hops"], belief["confidence"]) == (
        "rumour",
        "npc-tomas",
        2,
        0.58,
    )
    found = answer(provenance(state, "default", "save-1", "main", "npc-ilka", belief["belief_id"]))
    assert (found["origin"]["seq"], found["origin"]["key"]) == (1, "combat.enemy-defeated")
    assert found["chain"] == [
        {"entity_id": "npc-mara", "hops": 0},
        {"entity_id": "npc-tomas", "hops": 1, "confidence": 0.72, "told_by": "npc-mara"},
        {"entity_id": "npc-ilka", "hops": 2, "confidence": 0.58, "told_by": "npc-tomas"},
    ]
    named = sailor_news_passed_on(named=True)
    for npc in ("npc-tomas", "npc-ilka"):
        assert answer(runtime_read(state, "default", "save-1", "main", npc)) == answer(
            runtime_read(named, "default", "save-1", "main", npc)
        )


def _said(seq: int, key: str, **fields: Any) -> bytes:
    return orjson.dumps(
        {"world_instance_id": "w", "timeline_id": "main", "seq": seq, "key": key} | fields
    )


SEEN_AT_THE_TAVERN = [
    _said(
        1,
        "loreweaver.movement.location-entered",
        actor="npc-mara",
        location="loc-tavern",
        entities={
            "npc-mara": {"name": "Mara", "kind": "character"},
            "loc-tavern": {"kind": "place"},
        },
    ),
    _said(
        2,
        "combat.enemy-defeated",
        actor="player-1",
        players=["player-1"],
        location="loc-tavern",
        facts=[{"subject": "npc-sailor", "attribute": "status", "value": "defeated"}],
    ),
]


def test_provenance_judges_a_memory_diverging_as_the_runtime_read_does() -> None:
    """Each memory's `diverging` is judged as the read is made: once the record said the sailor
    was fine, the runtime read showed Mara's memory of the fight diverging and its provenance
    did not."""
    fine = [{"subject": "npc-sailor", "attribute": "status", "value": "fine"}]
    state = replay_lines([*SEEN_AT_THE_TAVERN, _said(3, "world.changed", facts=fine)]).state
    [fight] = runtime_read(state, "default", "w", "main", "npc-mara").recollections
    assert fight.diverging
    assert provenance(state, "default", "w", "main", "npc-mara", fight.belief_id).memory.diverging
