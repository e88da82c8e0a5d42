"""As-of reads of a world whose characters keep memories for the whole world: every read as of
a position shows the persistent memories formed up to it, as the runtime read does
(`MemoryKeys.persistent_upto`), never later ones, whichever timeline formed them."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from projections.branch_diff import branch_diff
from projections.chronicle import chronicle_read
from projections.key_prefixes import MEMORIES
from projections.keys import pack
from projections.memory_store import DECODED
from projections.policy import resolve
from projections.projector import Projector
from projections.provenance import provenance
from projections.recall import RecallQuery, recall
from projections.rumour_map import rumour_map
from projections.runtime_read import NotFound, read_position, runtime_read
from projections.state import MemoryState
from schemas.policy import ChroniclePolicy
from streams.recall_index import SqliteRecallIndex
from streams.replay import messages, replay_lines
from tests.reads import answer
from tests.tavern import PERSISTENT, TAVERN_LINES

STATE = replay_lines(TAVERN_LINES, Projector(policies=lambda tenant, world: PERSISTENT)).state
MEMORIES_HELD = [DECODED.decode(raw) for _, raw in STATE.scan(pack(MEMORIES, "default", "save-1"))]
CHARACTERS = sorted({memory.character_id for memory in MEMORIES_HELD})
POSITIONS = [("main", seq) for seq in range(1, 6)] + [("reload", seq) for seq in range(1, 4)]
"""Every position of the tavern's two timelines (the reload branches from main after 2)."""


def shown(state: MemoryState, world: str, timeline: str, npc: str, seq: int) -> set[str]:
    """The belief ids the runtime read as of `seq` shows (the tavern's minds are small: all)."""
    try:
        read = answer(runtime_read(state, "default", world, timeline, npc, seq))
    except NotFound:
        return set()
    return {memory["belief_id"] for memory in read["beliefs"] + read["recollections"]}


def test_the_tavern_forms_persistent_memories_on_both_timelines_after_the_first_positions() -> None:
    formed = {(memory.timeline_id, memory.seq) for memory in MEMORIES_HELD if memory.persistent}
    assert formed == {("main", 2), ("main", 3), ("main", 4), ("main", 5), ("reload", 3)}


@pytest.mark.parametrize(("timeline", "seq"), POSITIONS)
def test_provenance_as_of_a_position_finds_the_memories_the_runtime_read_shows(
    timeline: str, seq: int
) -> None:
    """It found every persistent memory, later ones too: Tomas's news of main 5 as of main 1,
    Mara's locket of the reload's 3 as of main 2 (37 memories over the tavern's positions)."""
    for npc in CHARACTERS:
        found = set()
        for memory in MEMORIES_HELD:
            if memory.character_id == npc:
                try:
                    provenance(STATE, "default", "save-1", timeline, npc, memory.belief_id, seq)
                except NotFound:
                    continue
                found.add(memory.belief_id)
        assert found == shown(STATE, "save-1", timeline, npc, seq)


@pytest.mark.parametrize(("timeline", "seq"), POSITIONS)
def test_a_rumour_map_as_of_a_position_is_of_a_memory_the_runtime_read_shows(
    timeline: str, seq: int
) -> None:
    """A memory formed after the position is a 404 (the README says so): a persistent one was
    drawn."""
    for memory in MEMORIES_HELD:
        try:
            rumour_map(STATE, "default", "save-1", memory.belief_id, PERSISTENT, timeline, seq)
        except NotFound:
            drawn = False
        else:
            drawn = True
        held = shown(STATE, "save-1", timeline, memory.character_id, seq)
        assert drawn == (memory.belief_id in held), (memory.character_id, memory.seq)


@pytest.mark.parametrize(("timeline", "seq"), POSITIONS)
def test_chronicle_recall_and_diff_as_of_a_position_hold_what_the_runtime_read_shows(
    timeline: str, seq: int
) -> None:
    other = "reload" if timeline == "main" else "main"
    for npc in CHARACTERS:
        held = shown(STATE, "save-1", timeline, npc, seq)
        try:
            told = chronicle_read(
                STATE, "default", "save-1", timeline, npc, ChroniclePolicy(), len, as_of_seq=seq
            )
        except NotFound:
            chronicled: set[str] = set()
        else:
            chronicled = {one for chapter in told.chapters for one in chapter.belief_ids}
            chronicled |= {digest.belief_id for digest in told.digests}
        assert chronicled == held
        query = RecallQuery("sailor son locket Ilse Mara", (), 50)
        index = SqliteRecallIndex()
        try:
            found = recall(
                STATE, index, "default", "save-1", timeline, npc, query, PERSISTENT, seq
            ).read()
        except NotFound:
            recalled: set[str] = set()
        else:
            recalled = {memory.belief_id for memory in found.memories}
        assert recalled <= held
        both = min(seq, 3)  # the reload has processed 3
        try:
            diff = branch_diff(STATE, "default", "save-1", npc, timeline, other, both)
        except NotFound:
            continue
        only_here = {memory.belief_id for memory in diff.only_on_timeline}
        assert only_here <= shown(STATE, "save-1", timeline, npc, both)


def line(seq: int, timeline: str, key: str, **fields: Any) -> bytes:
    return orjson.dumps(
        {"world_instance_id": "w", "timeline_id": timeline, "seq": seq, "key": key, **fields}
    )


WELL = {"content": "The well is poisoned", "about": ["loc-well"]}
AFTER_1 = {"parent_timeline_id": "main", "after_seq": 1}
ENTERED = "loreweaver.movement.location-entered"
TOLD = "loreweaver.conversation.told"
FOG = "weather.fog-rose"


def test_a_rumour_map_as_of_a_position_draws_no_later_telling() -> None:
    """Mara, told on main 2 that the well is poisoned, keeps her memories for the whole world
    from then on (a policy applies to the events after it); told it again on the reload (from
    main after 1) at 3, she keeps that one for every timeline. Main's map as of 2 drew both
    tellings, the one at 3 too; the runtime read as of 2 shows the first alone."""
    ordinary = resolve(None, {})
    kept = resolve(None, {"memory": {"persistent": {"characters": ["npc-mara"]}}})
    in_force = [ordinary]
    projector = Projector(policies=lambda tenant, world: in_force[0])
    state = MemoryState()
    first = [
        line(1, "main", ENTERED, actor="npc-mara", location="loc-tavern"),
        line(2, "main", TOLD, actor="player-1", target="npc-mara", payload=WELL),
    ]
    for message in messages(first):
        projector.receive(state, message)
    in_force[0] = kept
    then = [
        line(3, "main", FOG),
        line(2, "reload", FOG, branch=AFTER_1),
        line(3, "reload", TOLD, actor="player-1", target="npc-mara", payload=WELL),
    ]
    for message in messages(then):
        projector.receive(state, message)
    [heard] = shown(state, "w", "main", "npc-mara", 2)
    assert len(shown(state, "w", "main", "npc-mara", 3)) == 2  # the reload's, kept for all
    as_of_2 = rumour_map(state, "default", "w", heard, kept, "main", 2)
    assert [(telling.listener, telling.seq) for telling in as_of_2.tellings] == [("npc-mara", 2)]
    as_of_3 = rumour_map(state, "default", "w", heard, kept, "main", 3)
    assert [telling.seq for telling in as_of_3.tellings] == [2, 3]


def test_provenance_as_of_a_position_names_the_earliest_origin_up_to_it() -> None:
    """The same news (the same claim) is told on two branches of main after 1: to Tomas on
    "alt" at 5, to Mara (who keeps her memories for the whole world) on main at 2. The reload,
    which saw neither, named where Mara's memory started as the first stored (by timeline id):
    alt's 5, as of 3 too, a position it had not reached. It is main's 2."""
    kept = resolve(None, {"memory": {"persistent": {"characters": ["npc-mara"]}}})
    lines = [
        line(1, "main", ENTERED, actor="npc-mara", location="loc-tavern"),
        line(2, "alt", ENTERED, actor="npc-tomas", location="loc-tavern", branch=AFTER_1),
        *(line(seq, "alt", FOG) for seq in (3, 4)),
        line(5, "alt", TOLD, actor="player-1", target="npc-tomas", payload=WELL),
        line(2, "main", TOLD, actor="player-1", target="npc-mara", payload=WELL),
        line(2, "reload", FOG, branch=AFTER_1),
        *(line(seq, "reload", FOG) for seq in (3, 4, 5, 6)),
    ]
    state = replay_lines(lines, Projector(policies=lambda tenant, world: kept)).state
    [heard] = shown(state, "w", "reload", "npc-mara", 3)
    for as_of in (3, 6):
        found = answer(provenance(state, "default", "w", "reload", "npc-mara", heard, as_of))
        assert (found["origin"]["timeline_id"], found["origin"]["seq"]) == ("main", 2)


def test_a_read_as_of_a_position_answers_alike_however_far_its_own_timeline_goes_on() -> None:
    """A reviewer asked that a read as of the position reached be the read now, which shows the
    persistent memories main formed at 4 and 5; so answered, the same read pinned to the
    reload's 3 lost them once the reload went on. As of a position never shows them."""
    later = {m.belief_id for m in MEMORIES_HELD if m.persistent and m.seq > 3}
    gift = orjson.loads(TAVERN_LINES[-1])
    del gift["branch"]
    moved_on = [*TAVERN_LINES, orjson.dumps(gift | {"seq": 4, "game_time": "day 1, 20:30"})]
    past = replay_lines(moved_on, Projector(policies=lambda tenant, world: PERSISTENT)).state
    for npc in CHARACTERS:
        pinned = shown(STATE, "save-1", "reload", npc, 3)  # the reload has reached 3
        assert pinned == shown(past, "save-1", "reload", npc, 3)  # and has gone past it
        assert not pinned & later
    now = answer(runtime_read(STATE, "default", "save-1", "reload", "npc-tomas"))
    assert {memory["belief_id"] for memory in now["beliefs"]} & later  # the read now shows them


def test_a_persistent_memory_formed_on_another_timeline_moves_the_reads_position() -> None:
    """A read is cached by its position (`read_position`: bytes that change whenever the answer
    can): the reload's persistent memory (Mara's locket) changed what main's read shows and
    not main's position, so a cached read of main went on without it."""
    main_alone = replay_lines(
        TAVERN_LINES[:5], Projector(policies=lambda tenant, world: PERSISTENT)
    ).state
    assert shown(main_alone, "save-1", "main", "npc-mara", 5) != shown(
        STATE, "save-1", "main", "npc-mara", 5
    )
    assert read_position(main_alone, "default", "save-1", "main") != read_position(
        STATE, "default", "save-1", "main"
    )
