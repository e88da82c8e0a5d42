"""The state digest: equal for the same stream however it was delivered, different as soon as
anything a read shows is different, blind to delivery bookkeeping (the outbox, the deferral
buffer) and to every other world."""

from __future__ import annotations

import random
from typing import Any

import orjson

from projections import timelines
from projections.catalogue import StoredDeclarations
from projections.digest import world_digest
from projections.intake import SourceMessage
from projections.memories import belief_id
from projections.policy import resolve
from projections.projector import Projector
from projections.provenance import provenance
from projections.runtime_read import NotFound, runtime_read
from projections.state import MemoryState
from projections.timelines import Segment
from schemas import MAX_SEQ, EntityDeclaration
from streams.replay import replay_lines
from tests.reads import answer
from tests.tavern import TAVERN_LINES as LINES

CHARACTERS = ("npc-mara", "npc-tomas", "npc-drunk-sailor", "npc-ilka")
TIMELINES = ("main", "reload", "early", "late")
RICH = Projector(
    policies=lambda tenant, world: resolve(
        None,
        {"memory": {"persistent": {"characters": ["npc-tomas"]}, "spreading": {"enabled": True}}},
    )
)
"""Rumours spread and Tomas remembers for the whole world: every kind of projection is written."""


def digest(state: MemoryState, world: str = "save-1") -> str:
    return world_digest(state, "default", world)


def copy_of(state: MemoryState) -> MemoryState:
    copy = MemoryState()
    for key, value in state.items():
        copy.put(key, value)
    return copy


def timeline_of(line: bytes) -> str:
    return str(orjson.loads(line)["timeline_id"])


def everything_read(state: MemoryState) -> list[object]:
    """Every answer the world's state gives: minds, timelines, the catalogue."""
    answers: list[object] = []
    for timeline_id in TIMELINES:
        record = timelines.load(state, "default", "save-1", timeline_id)
        answers.append(record)
        if record is not None:
            ancestry = timelines.ancestry(state, record)
            answers.append(StoredDeclarations(state, "default", "save-1", ancestry).declared())
        for npc in CHARACTERS:
            try:
                read: Any = answer(runtime_read(state, "default", "save-1", timeline_id, npc))
            except NotFound as missing:
                answers.append(str(missing))
                continue
            answers.append(read)
            for belief in [*read["beliefs"], *read["recollections"]]:
                answers.append(
                    answer(
                        provenance(
                            state, "default", "save-1", timeline_id, npc, belief["belief_id"]
                        )
                    )
                )
    return answers


def test_the_same_stream_gives_the_same_digest_in_a_fresh_state() -> None:
    assert digest(replay_lines(LINES).state) == digest(replay_lines(LINES).state)
    assert len(digest(replay_lines(LINES).state)) == 64


def test_duplicates_and_reordering_within_a_timeline_leave_the_digest_as_it_is() -> None:
    """Delivered in order once, or shuffled with every line twice: the projections agree while
    the bookkeeping (outbox entries, events held back) differs."""
    clean = replay_lines(LINES)
    rng = random.Random(8)
    for _ in range(5):
        noisy = [*LINES, *rng.sample(LINES, k=len(LINES))]
        main = [line for line in noisy if timeline_of(line) == "main"]
        rng.shuffle(main)
        again = replay_lines(main + [line for line in noisy if timeline_of(line) != "main"])
        assert again.outcomes["processed"] == clean.outcomes["processed"]
        assert again.outcomes["duplicate"] == len(LINES)
        assert digest(again.state) == digest(clean.state)
        assert list(again.state.items()) != list(clean.state.items())


def test_a_branch_gives_the_same_digest_whether_it_comes_before_or_after_the_parents_future() -> (
    None
):
    """Seed 001: a child timeline sees nothing from the future the player abandoned. The reload
    branches from main after seq 2; main 3 (the fight, which declares the player's name) is that
    abandoned future, so whether it arrives before or after the reload cannot matter."""
    reload = [line for line in LINES if timeline_of(line) == "reload"]
    main = [line for line in LINES if timeline_of(line) == "main"]
    reload_last = replay_lines(main + reload)
    reload_early = replay_lines(main[:2] + reload + main[2:])
    assert reload_early.outcomes == reload_last.outcomes
    assert digest(reload_early.state) == digest(reload_last.state)


def test_a_duplicate_at_a_new_offset_writes_bookkeeping_only() -> None:
    state = replay_lines(LINES).state
    before, entries = digest(state), len(list(state.items()))
    Projector().receive(state, SourceMessage("replay", 0, len(LINES), b"save-1", LINES[2]))
    assert len(list(state.items())) > entries  # the duplicate's outbox entry
    assert digest(state) == before


def test_a_different_event_gives_a_different_digest() -> None:
    words = orjson.loads(LINES[4])
    words["payload"]["content"] = "Ilse beat the drunk sailor black and blue"
    changed = [*LINES[:4], orjson.dumps(words), *LINES[5:]]
    assert digest(replay_lines(changed).state) != digest(replay_lines(LINES).state)


def test_a_declaration_or_a_timeline_position_alone_changes_the_digest() -> None:
    state = replay_lines(LINES).state
    before = digest(state)
    declared = copy_of(state)
    StoredDeclarations(declared, "default", "save-1", (Segment("main", MAX_SEQ),)).declaration(
        "npc-tomas", EntityDeclaration(name="Tomas the Younger")
    ).write(declared, 5)
    assert digest(declared) != before
    moved = copy_of(state)
    main = timelines.load(moved, "default", "save-1", "main")
    assert main is not None
    timelines.save(moved, main.model_copy(update={"applied_events": main.applied_events + 1}))
    assert digest(moved) != before


def line(timeline: str, seq: int, time: str, key: str, **fields: object) -> bytes:
    return orjson.dumps(
        {"world_instance_id": "save-1", "timeline_id": timeline, "seq": seq, "key": key}
        | {"game_time": time, **fields}
    )


def a_load(timeline: str, after_seq: int, time: str, key: str) -> bytes:
    """A load of main after `after_seq`, where the player first does something to Mara."""
    return line(
        timeline,
        after_seq + 1,
        time,
        key,
        actor="player-1",
        target="npc-mara",
        players=["player-1"],
        branch={"parent_timeline_id": "main", "after_seq": after_seq},
    )


STAFF = {"group": "staff"}
SAILOR = {"name": "the sailor", "kind": "character", "group": "staff"}
LIE = {"subject": "npc-drunk-sailor", "attribute": "status", "value": "fine"}
MARAS_NEWS = belief_id("default", "save-1", "main", 2, "npc-mara", "knowledge")
SEQUEL = [
    line("main", 6, "day 1, 22:00", "world.entity-declared", entities={"npc-mara": STAFF}),
    line("main", 7, "day 1, 22:05", "world.entity-declared", entities={"npc-tomas": STAFF}),
    line(
        "main",
        8,
        "day 2, 10:00",
        "story.happened",
        actor="npc-drunk-sailor",
        location="loc-tavern",
        entities={"npc-drunk-sailor": SAILOR},
    ),
    line(
        "main",
        9,
        "day 2, 10:05",
        "loreweaver.social.characters-met",
        actor="npc-tomas",
        target="npc-drunk-sailor",
    ),
    line(
        "main",
        10,
        "day 2, 10:10",
        "loreweaver.conversation.told",
        actor="npc-tomas",
        target="npc-mara",
        payload={"content": "The sailor is fine", "facts": [LIE]},
    ),
    line(
        "main",
        11,
        "day 2, 10:15",
        "loreweaver.conversation.told",
        actor="npc-mara",
        target="npc-tomas",
        payload={"content": "She asked for my son", "belief_id": MARAS_NEWS},
    ),
    line(
        "main",
        12,
        "day 2, 10:20",
        "loreweaver.social.characters-met",
        actor="npc-mara",
        target="npc-tomas",
    ),
    line(
        "main",
        13,
        "day 2, 10:25",
        "loreweaver.movement.location-entered",
        actor="npc-ilka",
        location="loc-tavern",
    ),
    line(
        "reload",
        4,
        "day 1, 20:30",
        "item.stolen",
        actor="npc-drunk-sailor",
        target="npc-mara",
        location="loc-tavern",
    ),
    line(
        "reload",
        5,
        "day 1, 20:40",
        "loreweaver.movement.location-entered",
        actor="npc-drunk-sailor",
        location="loc-tavern",
    ),
    a_load("early", 2, "day 1, 19:50", "trade.gift-given"),
    a_load("late", 4, "day 1, 21:35", "quest.helped"),
]
"""More of the story: groups form, news is told again and spreads to a newcomer, a lie is told,
the reload goes on and two more loads branch off. What it forms depends on what the state
remembers: who knows what, who is where, when a group last talked, what the record says, and
each relation as it stood at a branch point."""


def story_goes_on(state: MemoryState) -> MemoryState:
    for offset, raw in enumerate(SEQUEL, start=1000):
        RICH.receive(state, SourceMessage("replay", 0, offset, b"save-1", raw))
    return state


def test_any_change_that_shows_now_or_later_changes_the_digest() -> None:
    """Remove each stored entry in turn: whenever the reads answer differently, now or after
    more of the story, so does the digest. A projection left out of the digest escapes this
    (and with it every redelivery proof)."""
    state = replay_lines(LINES, RICH).state
    before = digest(state)
    now, later = everything_read(state), everything_read(story_goes_on(copy_of(state)))
    seen = 0
    for key, _ in list(state.items()):
        without = copy_of(state)
        without.delete(key)
        if (
            everything_read(without) != now
            or everything_read(story_goes_on(copy_of(without))) != later
        ):
            seen += 1
            assert digest(without) != before, f"the digest misses {key!r}"
    assert seen >= 45


def test_other_worlds_and_tenants_leave_a_worlds_digest_alone() -> None:
    alone = digest(replay_lines(LINES).state)
    other_world = [line.replace(b'"save-1"', b'"save-10"') for line in LINES]
    other_tenant = [b'{"tenant_id":"acme",' + line[1:] for line in LINES]
    crowded = replay_lines([*other_world[:3], *LINES, *other_tenant, *other_world[3:]])
    assert crowded.outcomes["processed"] == 3 * len(LINES)
    assert digest(crowded.state) == alone
