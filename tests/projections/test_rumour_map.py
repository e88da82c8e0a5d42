"""A rumour's map: everyone the news reached on a timeline, and who told whom, in story time."""

from __future__ import annotations

import orjson
import pytest

from projections.delivery import SourceMessage, world_key
from projections.key_prefixes import MEMORIES
from projections.keys import pack
from projections.memory_store import DECODED
from projections.policy import resolve
from projections.projector import Projector
from projections.provenance import provenance
from projections.rumour_map import rumour_map
from projections.runtime_read import NotFound, runtime_read
from projections.state import MemoryState
from schemas.memory import Memory
from streams.show import provenance_chain
from tests.projections.counted_reads import CountedReads
from tests.streams.noisy_story import story

WORLD = "tavern-5-0"
MET = "loreweaver.social.characters-met"
POLICY = resolve(None, {"memory": {"spreading": {"enabled": True}}})


def spread_story() -> MemoryState:
    """A town where news travels (a branch "reload" leaves main after seq 20)."""
    state = MemoryState()
    projector = Projector(policies=lambda tenant, world: POLICY)
    for offset, raw in enumerate(story(worlds=1, events_per_world=40, seed=5)):
        projector.receive(state, SourceMessage("events", 0, offset, world_key(raw), raw))
    return state


STATE = spread_story()
MEMORIES_HELD = [DECODED.decode(raw) for _, raw in STATE.scan(pack(MEMORIES, "default", WORLD))]


def farthest_travelled() -> Memory:
    return max(
        (m for m in MEMORIES_HELD if m.timeline_id == "main"),
        key=lambda m: (m.hops, m.seq),
    )


def test_the_map_holds_everyone_who_heard_the_news_and_who_told_them() -> None:
    named = farthest_travelled()
    assert named.hops >= 3
    found = rumour_map(STATE, "default", WORLD, named.belief_id, POLICY)
    assert (found.timeline_id, found.content) == ("main", named.content)
    same_news = [m for m in MEMORIES_HELD if m.origin == named.origin and m.timeline_id == "main"]
    held = {h.entity_id: h for h in found.holders if h.hops is not None}
    assert set(held) == {m.character_id for m in same_news}
    told = [m for m in same_news if m.lineage]
    assert len(found.tellings) == len(told) >= 3
    assert [t.seq for t in found.tellings] == sorted(t.seq for t in found.tellings)
    assert {(t.listener, t.seq, t.hops, t.confidence) for t in found.tellings} == {
        (m.character_id, m.seq, m.hops, m.confidence) for m in told
    }
    # the named memory's own chain of tellers is on the map, step by step
    chain = provenance(STATE, "default", WORLD, "main", named.character_id, named.belief_id).chain
    steps = {(t.teller, t.listener) for t in found.tellings}
    assert {(link.told_by, link.entity_id) for link in chain if link.told_by} <= steps
    characters = [h for h in found.holders if h.entity_id.startswith("npc-")]
    assert characters and all(h.name == h.entity_id[4:].title() for h in characters)


def test_a_branch_does_not_see_news_its_parent_heard_after_the_branch_point() -> None:
    after_branch = next(m for m in MEMORIES_HELD if m.timeline_id == "main" and m.seq > 20)
    with pytest.raises(NotFound, match="does not see"):
        rumour_map(STATE, "default", WORLD, after_branch.belief_id, POLICY, "reload")
    assert rumour_map(STATE, "default", WORLD, after_branch.belief_id, POLICY).timeline_id == "main"


def test_an_unknown_belief_or_timeline_is_not_found() -> None:
    with pytest.raises(NotFound, match="no memory 'nope'"):
        rumour_map(STATE, "default", WORLD, "nope", POLICY)
    with pytest.raises(NotFound, match="never received events"):
        rumour_map(STATE, "default", WORLD, farthest_travelled().belief_id, POLICY, "elsewhere")


def test_news_told_by_nobody_named_is_not_held_first_hand() -> None:
    """A `told` without actor: provenance said the listener had it first hand (hops 0) and the
    picture drew them as one who saw it, though the memory says told, one hop."""
    told = (
        b'{"world_instance_id": "w", "timeline_id": "main", "seq": 1, '
        b'"key": "loreweaver.conversation.told", "target": "npc-cy", '
        b'"payload": {"content": "the mayor is a thief", "about": ["npc-mayor"]}}'
    )
    state = MemoryState()
    Projector().receive(state, SourceMessage("events", 0, 0, b"w", told))
    [held] = [DECODED.decode(raw) for _, raw in state.scan(pack(MEMORIES, "default", "w"))]
    assert (held.source, held.hops) == ("told", 1)
    found = provenance(state, "default", "w", "main", "npc-cy", held.belief_id)
    assert [(link.entity_id, link.hops, link.told_by) for link in found.chain] == [
        ("npc-cy", 1, None)
    ]
    shown = provenance_chain(orjson.loads(found.to_json()))
    assert shown.splitlines()[-1] == "  npc-cy, told by nobody named (hops 1, confidence 0.8)"
    [holder] = rumour_map(state, "default", "w", held.belief_id, POLICY).holders
    assert (holder.entity_id, holder.hops, holder.witnessed) == ("npc-cy", 1, False)
    # passed on at a meeting: the command failed on the first link, which has no confidence
    met = (
        b'{"world_instance_id": "w", "timeline_id": "main", "seq": 2, '
        b'"key": "loreweaver.social.characters-met", "actor": "npc-cy", "target": "npc-di"}'
    )
    Projector(lambda tenant, world: POLICY).receive(state, SourceMessage("events", 0, 1, b"w", met))
    [heard] = runtime_read(state, "default", "w", "main", "npc-di").beliefs
    passed = provenance(state, "default", "w", "main", "npc-di", heard.belief_id)
    assert provenance_chain(orjson.loads(passed.to_json())).splitlines()[-2:] == [
        "  npc-cy, told by nobody named (hops 1)",
        "  -> npc-di, told by npc-cy (hops 2, confidence 0.64)",
    ]


def theft_among_omens(omens: int) -> tuple[CountedReads, str]:
    """Ada is robbed and tells Bo, who tells Cy, among `omens` sights that other characters
    see, each of them alone; the state, and the belief id of what Cy heard."""
    events = [
        {"key": "crime.purse-stolen", "actor": "npc-thief", "target": "npc-ada"},
        {"key": MET, "actor": "npc-ada", "target": "npc-bo"},
        {"key": MET, "actor": "npc-bo", "target": "npc-cy"},
        *({"key": "sight.omen", "actor": f"npc-seer-{n}"} for n in range(omens)),
    ]
    state = CountedReads()
    projector = Projector(policies=lambda tenant, world: POLICY)
    for seq, event in enumerate(events, start=1):
        raw = orjson.dumps({"world_instance_id": "w", "timeline_id": "main", "seq": seq, **event})
        projector.receive(state, SourceMessage("events", 0, seq, b"w", raw))
    [heard] = runtime_read(state, "default", "w", "main", "npc-cy").beliefs
    return state, heard.belief_id


def test_a_rumour_map_reads_what_it_draws_not_every_memory_of_its_world() -> None:
    """The same map in a world of 5 other memories and of 500: it looks at as much in both (it
    looked at every memory of the world, and every origin each character learned)."""
    looked_at = []
    for omens in (5, 500):
        state, heard = theft_among_omens(omens)
        state.looked_at = 0
        found = rumour_map(state, "default", "w", heard, POLICY)
        assert [(t.teller, t.listener) for t in found.tellings] == [
            ("npc-ada", "npc-bo"),
            ("npc-bo", "npc-cy"),
        ]
        looked_at.append(state.looked_at)
    assert looked_at[0] == looked_at[1]
