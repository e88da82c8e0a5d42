"""Reinforcement: a recall restarts a memory's clock (section 8).

A `loreweaver.memory.recalled` event (actor: the character, `payload.belief_ids`) is kept per
timeline by position, with the story minute it happened at. A read through the ancestry finds
the recalls it sees and hands them to `projections.retention`, which restarts the clock at the
latest and lengthens the half-life per recall. Reads never write: a read that recalls does not
reinforce; only the stream does.
"""

from __future__ import annotations

from dataclasses import dataclass

from projections.event_keys import MEMORY_RECALLED
from projections.key_prefixes import RECALLS
from projections.keys import pack, unpack
from projections.memory_store import MemoryKeys
from projections.retention import Retention, as_held, retention
from projections.state import StateTransaction
from projections.story_clock import story_now
from projections.timelines import Ancestry
from schemas import Event
from schemas.memory import Memory
from schemas.policy import Policy


def recalled_ids(event: Event) -> list[str]:
    """The belief ids a recall event names, each once (anything else in the list is ignored;
    the event's size limit bounds how many)."""
    named = event.payload.get("belief_ids")
    if event.key != MEMORY_RECALLED or event.actor is None or not isinstance(named, list):
        return []
    return sorted({item for item in named if isinstance(item, str) and item})


def record_recalls(tx: StateTransaction, event: Event, ancestry: Ancestry) -> None:
    """Keep each memory a recall event names, at its position and story minute (the event's,
    else the timeline's story "now" just before it)."""
    belief_ids = recalled_ids(event)
    if not belief_ids:
        return
    tenant, world = event.tenant_id, event.world_instance_id
    minutes = event.story_minutes
    if minutes is None:
        minutes = story_now(tx, tenant, world, ancestry)
    stored = b"" if minutes is None else minutes.to_bytes(8, "big")
    for belief_id in belief_ids:
        tx.put(
            pack(RECALLS, tenant, world, event.timeline_id, str(event.actor), belief_id)
            + pack(event.seq),
            stored,
        )


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
