"""An event applied again over part of its own writes (the worker is at-least-once, and a worker
killed mid-event keeps a prefix of them: what its changelog got) ends where applying it once
does, in a world whose characters keep memories for the whole world: every timeline reads
those, the event's own among them once it stored some."""

from __future__ import annotations

from collections.abc import Iterator

import orjson
import pytest

from projections.delivery import SourceMessage, world_key
from projections.digest import world_digest
from projections.key_prefixes import (
    KEY_SPACES,
    PERSISTENT_COUNTED,
    PERSISTENT_RELATIONS,
    PERSISTENT_WORLDS,
    TIMELINES,
    Role,
)
from projections.keys import pack, unpack
from projections.migrations import FORMAT_KEY, upgrade
from projections.policy import resolve
from projections.projector import Projector
from projections.runtime_read import runtime_read
from projections.state import MemoryState
from schemas import Ack
from streams.replay import replay_lines
from tests.projections.recorded import Recorded, laid_in
from tests.reads import answer
from tests.tavern import PERSISTENT, TAVERN, TAVERN_LINES

PROJECTOR = Projector(policies=lambda tenant, world: PERSISTENT)


def projected(state: MemoryState) -> dict[bytes, bytes]:
    """Every entry but delivery bookkeeping: the digest's, and the shortcuts reads take."""
    return {
        key: value
        for key, value in state.items()
        if KEY_SPACES.get(str(unpack(key)[0])) is not Role.BOOKKEEPING
    }


def test_an_event_applied_again_over_any_prefix_of_its_writes_ends_as_applied_once() -> None:
    """Mara told by the player, Tomas entering (Mara tells him what she saw), Mara telling him:
    applied again, each formed none of the memories its first part had stored (they are
    persistent, so its reads saw them, and its characters knew the news already), and the world
    stayed short of a clean replay. Killed again while applying it again, then applied a third
    time, it ends there too."""
    lines = TAVERN.splitlines()
    before = MemoryState()
    for offset, line in enumerate(lines):
        message = SourceMessage("events", 0, offset, world_key(line), line)
        once = Recorded(before)
        PROJECTOR.receive(once, message)
        digest, entries = world_digest(once, "default", "save-1"), projected(once)
        for cut in range(len(once.writes)):
            partly = laid_in(before, once.writes[:cut])
            again = Recorded(partly)
            PROJECTOR.receive(again, message)
            assert world_digest(again, "default", "save-1") == digest, (offset, cut)
            assert projected(again) == entries, (offset, cut)
            for cut_again in range(len(again.writes)):
                thrice = laid_in(partly, again.writes[:cut_again])
                PROJECTOR.receive(thrice, message)
                assert projected(thrice) == entries, (offset, cut, cut_again)
        before = once


def test_an_event_reads_the_persistent_memories_another_timeline_formed_at_later_positions() -> (
    None
):
    """Tomas learned at main's 5th event that Ilse beat the sailor; on a timeline loaded at the
    2nd, Mara telling him so at the 3rd teaches him nothing: he keeps his memories for the whole
    world, those of later positions too. (So an event's reads cannot simply stop at the
    persistent memories of positions before its own to pass over those it stored itself.)"""
    lines = TAVERN.splitlines()
    told_on_main = orjson.loads(lines[4])
    told_again = told_on_main | {
        "timeline_id": "reload",
        "seq": 3,
        "branch": {"parent_timeline_id": "main", "after_seq": 2},
    }
    state = replay_lines([*lines[:5], orjson.dumps(told_again)], PROJECTOR).state
    read = answer(runtime_read(state, "default", "save-1", "reload", "npc-tomas"))
    told = [belief for belief in read["beliefs"] if "sailor" in belief["content"]]
    assert [(belief["seq"], belief["persistent"]) for belief in told] == [(5, True)]


def as_an_earlier_release_wrote(
    writes: list[tuple[bytes, bytes | None]], heads: bool
) -> list[tuple[bytes, bytes | None]]:
    """An event's writes in the order a release before this one made them: the persistent
    count's record (the event that counted last) with the count, after the event's memories,
    where this release writes it before the first of them; without `heads`, as a release before
    format 8 did, no count's record and no persistent relation heads at all."""
    counted = pack(PERSISTENT_COUNTED)
    left_out = (counted,) if heads else (counted, pack(PERSISTENT_RELATIONS))
    records = [(key, value) for key, value in writes if key.startswith(counted)]
    earlier: list[tuple[bytes, bytes | None]] = []
    for key, value in writes:
        if key.startswith(pack(PERSISTENT_WORLDS)) and heads:
            earlier += records
        if not key.startswith(left_out):
            earlier.append((key, value))
    return earlier


def of_format(state: MemoryState, version: int) -> MemoryState:
    """`state` as a release of that format left it: before format 8, without the persistent
    relation heads and the count's record (that release kept neither)."""
    old = MemoryState()
    for key, value in state.items():
        if version >= 8 or not key.startswith(
            (pack(PERSISTENT_COUNTED), pack(PERSISTENT_RELATIONS))
        ):
            old.put(key, value)
    old.put(FORMAT_KEY, b"%d" % version)
    return old


def each_event_of_an_earlier_release(
    version: int,
) -> Iterator[
    tuple[int, SourceMessage, list[tuple[bytes, bytes | None]], MemoryState, MemoryState]
]:
    """Each tavern event in turn: its offset and message, its writes as a release of format
    `version` wrote them, the store just before it (of this release: `of_format` makes the
    earlier one from it), and the store of that format upgraded whole with the event applied
    once."""
    before = MemoryState()
    for offset, line in enumerate(TAVERN.splitlines()):
        message = SourceMessage("events", 0, offset, world_key(line), line)
        once = Recorded(before)
        PROJECTOR.receive(once, message)
        earlier_writes = as_an_earlier_release_wrote(once.writes, heads=version >= 8)
        clean = of_format(before, version)
        upgrade(clean)
        PROJECTOR.receive(clean, message)
        yield offset, message, earlier_writes, before, clean
        before = once


@pytest.mark.parametrize("version", [7, 10])
def test_an_event_an_earlier_release_left_half_applied_ends_as_applied_once_after_upgrade(
    version: int,
) -> None:
    """A release before wrote the record of the event that counted persistent memories last
    after the event's memories (or none): a worker of it killed mid-event left memories no
    record names, and the event, applied again, found its characters knowing already what it
    was about to teach them. Upgraded, the store holds none of the memories the event's first
    part stored (they are at a position its timeline has not reached), and applied again, the
    event ends where applying it once does, for every prefix of its writes; the persistent
    relation heads the upgrade from before format 8 sums (from the memories stored, those left
    half-applied too) come out as for a store that never held them."""
    for offset, message, earlier_writes, before, clean in each_event_of_an_earlier_release(version):
        entries = projected(clean)
        # every prefix without the event's position (saved last): that release applied the rest
        timeline = pack(TIMELINES)
        saved = [index for index, (key, _) in enumerate(earlier_writes) if key.startswith(timeline)]
        for cut in range(saved[-1] + 1):
            partly = laid_in(of_format(before, version), earlier_writes[:cut])
            upgrade(partly)
            PROJECTOR.receive(partly, message)
            assert projected(partly) == entries, (offset, cut)


@pytest.mark.parametrize("version", [7, 10])
def test_the_upgrade_taking_out_half_applied_memories_run_again_after_a_crash_ends_as_run_once(
    version: int,
) -> None:
    """The upgrade of such a store, run again after a crash that kept any prefix of its writes
    (as the worker sends them: in the order of their last write), leaves the store a whole
    upgrade leaves, and the event applied again ends where applying it once does. The step once
    took the memories out before it counted those left, and each memory before its log entry:
    run again, it found none to take out, kept the stale count (the event counted on from it)
    and the log entries of memories gone."""
    for offset, message, earlier_writes, before, clean in each_event_of_an_earlier_release(version):
        digest = world_digest(clean, "default", "save-1")
        for cut in range(len(earlier_writes)):
            partly = laid_in(of_format(before, version), earlier_writes[:cut])
            whole = Recorded(partly)
            upgrade(whole)
            if not whole.writes:
                continue
            upgraded = list(whole.items())
            writes = whole.last_writes()
            for kept in range(len(writes)):
                crashed = laid_in(partly, writes[:kept])
                upgrade(crashed)
                assert list(crashed.items()) == upgraded, (offset, cut, kept)
                PROJECTOR.receive(crashed, message)
                assert world_digest(crashed, "default", "save-1") == digest, (offset, cut, kept)


def test_a_message_filling_a_gap_applied_again_over_any_prefix_ends_as_applied_once() -> None:
    """Found by a reviewer: a message that fills a gap applies several events, and the worker
    sends its writes in the order of their last write, so one killed in its middle kept the
    theft's persistent memory (seq 4) while the timeline's position, saved last, said 2.
    Applied again, the meeting (seq 3) read it: Mara told Tomas of a theft that had not
    happened yet. Each event the message applies again first takes out what the world stores
    past its timelines' positions, its count and relation heads made again."""
    spreading = resolve(
        None,
        {"memory": {"spreading": {"enabled": True}, "persistent": {"characters": ["npc-mara"]}}},
    )
    projector = Projector(policies=lambda tenant, world: spreading)
    inn = {"location": "loc-inn"}
    story = [
        {"seq": 1, "key": "loreweaver.movement.location-entered", "actor": "npc-mara"} | inn,
        {"seq": 2, "key": "loreweaver.movement.location-entered", "actor": "npc-tomas"} | inn,
        {"seq": 4, "key": "crime.theft", "actor": "npc-x", "target": "npc-mara", "witnesses": []},
        {"seq": 3, "key": "loreweaver.social.characters-met", "actor": "npc-mara"}
        | {"target": "npc-tomas"}
        | inn,
    ]
    lines = [orjson.dumps({"world_instance_id": "w", "timeline_id": "main"} | e) for e in story]
    applied = last_applied_again_over_each_prefix(projector, lines)
    assert [(ack.timeline_id, ack.seq) for ack in applied] == [("main", 3), ("main", 4)]


def test_a_message_filling_a_gap_and_releasing_a_branch_applied_again_ends_as_applied_once() -> (
    None
):
    """Found by a reviewer: main's seq 3 and the reload's first event wait until Mara hears the
    player at main's seq 2, which applies both; every one stores persistent memories. Main's
    position was saved before the reload's events rewrote the world's count of them, so a
    worker killed between the two kept main applied (its event not applied again) and the
    count without its memories: the persistent scope every timeline reads stayed short."""
    lines = TAVERN_LINES
    applied = last_applied_again_over_each_prefix(
        PROJECTOR, [lines[0], lines[2], lines[5], lines[1]]
    )
    assert [(ack.timeline_id, ack.seq) for ack in applied] == [
        ("main", 2),
        ("main", 3),
        ("reload", 3),
    ]


def last_applied_again_over_each_prefix(projector: Projector, lines: list[bytes]) -> list[Ack]:
    """Take in `lines`, then the last of them again over each prefix of the writes it made
    (in the order of their last write: what a worker killed in its middle keeps), asserting
    that each ends with the entries taking it in once left. The last message's acks."""
    messages = [
        SourceMessage("events", 0, at, world_key(line), line) for at, line in enumerate(lines)
    ]
    before = MemoryState()
    for message in messages[:-1]:
        projector.receive(before, message)
    once = Recorded(before)
    acks = projector.receive(once, messages[-1]).acks
    entries = projected(once)
    writes = once.last_writes()
    for cut in range(len(writes)):
        again = laid_in(before, writes[:cut])
        projector.receive(again, messages[-1])
        assert projected(again) == entries, cut
    return acks
