"""An event applied again over part of its own writes (the worker is at-least-once, and a worker
killed mid-event keeps a prefix of them: what its changelog got) ends where applying it once
does, in a world whose characters keep memories for the whole world: every timeline reads
those, the event's own among them once it stored some."""

from __future__ import annotations

import orjson

from projections.delivery import SourceMessage, world_key
from projections.digest import world_digest
from projections.key_prefixes import KEY_SPACES, Role
from projections.keys import unpack
from projections.projector import Projector
from projections.runtime_read import runtime_read
from projections.state import MemoryState
from streams.replay import replay_lines
from tests.projections.recorded import Recorded
from tests.reads import answer
from tests.tavern import PERSISTENT, TAVERN

PROJECTOR = Projector(policies=lambda tenant, world: PERSISTENT)


def projected(state: MemoryState) -> dict[bytes, bytes]:
    """Every entry but delivery bookkeeping: the digest's, and the shortcuts reads take."""
    return {
        key: value
        for key, value in state.items()
        if KEY_SPACES.get(str(unpack(key)[0])) is not Role.BOOKKEEPING
    }


def laid_in(state: MemoryState, writes: list[tuple[bytes, bytes | None]]) -> Recorded:
    """A copy of `state` with `writes` made to it: what a worker killed mid-event restarts
    from."""
    copy = Recorded(state)
    for key, value in writes:
        copy.put(key, value) if value is not None else copy.delete(key)
    return copy


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
