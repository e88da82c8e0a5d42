"""Reinforcement: a recall restarts a memory's clock (section 8).

A `loreweaver.memory.recalled` event (actor: the character, `payload.belief_ids`) is kept per
timeline by position, with the story minute it happened at, for each memory it names that the
character held before it: an id of a memory not formed yet (a belief id is a function of its
position, so a game can name one before it forms, or keep one from a world deleted and begun
anew), held by someone else or forgotten by the recall's story time (forgotten is gone from
recall and decisions: a game naming an id the runtime read still lists brought it back whole)
reinforces nothing. A read through the ancestry finds
the recalls it sees and hands them to `projections.retention`, which restarts the clock at the
latest and lengthens the half-life per recall. Reads never write: a read that recalls does not
reinforce; only the stream does.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from projections.delivery import MOST_QUOTED_CHARS
from projections.event_keys import MEMORY_RECALLED
from projections.key_prefixes import RECALLS
from projections.keys import pack, unpack
from projections.memory_store import MemoryKeys, load_memory, memory_keys, visible
from projections.retention import Retention, as_held, retention
from projections.state import StateTransaction
from projections.story_clock import minute_of
from projections.timelines import Ancestry, as_of
from projections.wording import cut
from schemas import Event
from schemas.memory import Memory
from schemas.policy import Policy

UNHELD_NAMED = 3
"""The ids an ack's note names of those a recall event names in vain (then how many more)."""


def record_recalls(
    tx: StateTransaction, event: Event, ancestry: Ancestry, policy: Policy
) -> str | None:
    """Keep each memory a recall event names that its actor held before it, and had not
    forgotten by then, at its position and story minute (the event's, else the timeline's story
    "now" just before it). Returns the ack's note for what it names that reinforces nothing (a
    recall sent wrong otherwise looked like one that worked while the memories faded); None
    when every id counted."""
    if event.key != MEMORY_RECALLED:
        return None
    if event.actor is None:
        return "a memory.recalled names no actor (the character who recalls): nothing reinforced"
    named = event.payload.get("belief_ids")
    if not isinstance(named, list):
        return "payload.belief_ids is not a list of belief ids: nothing reinforced"
    ids = sorted({item for item in named if isinstance(item, str) and item})  # each once
    tenant, world = event.tenant_id, event.world_instance_id
    keys = memory_keys(tx, tenant, world)
    minutes = minute_of(tx, event, ancestry)
    before = as_of(ancestry, event.seq - 1)  # applied again, its own recalls are no part of it
    belief_ids: list[str] = []
    forgotten: list[str] = []
    for one in ids:
        memory = _held_before(tx, keys, ancestry, event, one)
        if memory is not None:
            held = held_now(tx, keys, before, memory, minutes, policy).memory is not None
            (belief_ids if held else forgotten).append(one)
    stored = b"" if minutes is None else minutes.to_bytes(8, "big")
    for belief_id in belief_ids:
        tx.put(
            pack(RECALLS, tenant, world, event.timeline_id, str(event.actor), belief_id)
            + pack(event.seq),
            stored,
        )
    return _in_vain(event, named, ids, belief_ids, forgotten)


def _in_vain(
    event: Event, named: Sequence[object], ids: list[str], held: list[str], forgotten: list[str]
) -> str | None:
    """The note for the items of `belief_ids` that reinforced nothing: no id at all, an id of
    no memory the actor held before the event, or of one it had forgotten by then."""
    notes = []
    if not_ids := sum(not isinstance(item, str) or not item for item in named):
        notes.append(f"{not_ids} item(s) of payload.belief_ids are no belief id")
    counted = {*held, *forgotten}
    if unheld := [one for one in ids if one not in counted]:
        notes.append(
            f"{len(unheld)} belief id(s) name no memory {event.actor!r} held before this event"
            f" ({_shown(unheld)})"
        )
    if forgotten:
        notes.append(
            f"{len(forgotten)} belief id(s) name memories {event.actor!r} had forgotten by then"
            f" ({_shown(forgotten)})"
        )
    if not named:
        notes.append("payload.belief_ids is empty")
    return "; ".join(notes) + ": not reinforced" if notes else None


def _shown(ids: list[str]) -> str:
    """The first `UNHELD_NAMED` of `ids`, quoted and cut, then how many more."""
    shown = ", ".join(repr(cut(one, MOST_QUOTED_CHARS)) for one in ids[:UNHELD_NAMED])
    return shown + (f" and {len(ids) - UNHELD_NAMED} more" if len(ids) > UNHELD_NAMED else "")


def _held_before(
    tx: StateTransaction, keys: MemoryKeys, ancestry: Ancestry, event: Event, belief_id: str
) -> Memory | None:
    """The memory `belief_id` if the recall event's actor held it before the event: stored,
    seen by its timeline, and formed by an earlier event (this one's are stored already)."""
    memory = load_memory(tx, keys, str(event.actor), belief_id)
    if memory is None or not visible(memory, keys, ancestry):
        return None
    return None if (memory.timeline_id, memory.seq) == (event.timeline_id, event.seq) else memory


def reinforced_at(
    tx: StateTransaction, keys: MemoryKeys, ancestry: Ancestry, memory: Memory
) -> list[int]:
    """The story minutes of the recalls of `memory` the timeline sees (with a story time)."""
    found = []
    for segment in ancestry:
        prefix = pack(
            RECALLS,
            keys.tenant_id,
            keys.world_id,
            segment.timeline_id,
            memory.character_id,
            memory.belief_id,
        )
        for key, minutes in tx.scan(prefix):
            if int(unpack(key[len(prefix) :])[0]) <= segment.upto_seq and minutes:
                found.append(int.from_bytes(minutes, "big"))
    return found


@dataclass(frozen=True, slots=True)
class Held:
    """A memory as its character holds it at a moment: retold when faded, None if forgotten."""

    memory: Memory | None
    retention: Retention


def held_now(
    tx: StateTransaction,
    keys: MemoryKeys,
    ancestry: Ancestry,
    memory: Memory,
    now: int | None,
    policy: Policy,
) -> Held:
    """How much of `memory` its character holds at story minute `now` on the timeline."""
    if not policy.memory.flaky:
        held = retention(memory, now, [], policy)
    else:
        held = retention(memory, now, reinforced_at(tx, keys, ancestry, memory), policy)
    return Held(as_held(memory, held), held)
