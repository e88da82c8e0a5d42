"""A rumour's map: who told whom the news one memory holds, in story time, with hops and
confidence.

A rumour is named by any one of its memories (a belief id, found by a point lookup); the map
follows that memory's origin through every memory of the same origin the timeline sees, whoever
holds it (the origin's own index entries: a map costs what it draws, not the world's memories). Each
memory someone was told is one telling, from its last teller (`provenance.news_chain`) to its
holder, at the position and story time it was formed, with the hops and confidence it arrived
with; a memory of what its holder saw is where the news starts on the map. Each holder is shown
as they hold the news at the map's position (`knowing.held_at`: faded, less sure; forgotten,
holding none of it, as one who told it without holding it shows). Drawing the map is the
shell's business (`streams.rumour_picture`).
"""

from __future__ import annotations

from dataclasses import dataclass

from projections.catalogue import StoredDeclarations, display_name
from projections.knowing import held_at, minute_held_at
from projections.memory_store import (
    MemoryKeys,
    as_revised,
    memories_of_origin,
    memory_named,
    visible,
)
from projections.provenance import news_chain
from projections.rumour_rules import is_news
from projections.runtime_read import NotFound, timeline_view
from projections.state import StateTransaction
from projections.story_clock import story_now
from schemas.memory import Memory
from schemas.policy import Policy


@dataclass(frozen=True)
class Telling:
    """One step of the rumour: `teller` told `listener`, who then held it so."""

    teller: str
    listener: str
    hops: int
    confidence: float
    seq: int
    game_time: str | None


@dataclass(frozen=True)
class Holder:
    """Someone on the map: a holder of the news (their surest memory of it, as they hold it
    at the map's position), or one who holds none of it: a teller who never did (a player, a
    liar), or one who forgot it."""

    entity_id: str
    name: str
    hops: int | None
    """The fewest hops the news took to reach them; None for one who holds none."""
    confidence: float | None
    witnessed: bool
    """They saw it happen (a memory with no teller)."""
    forgot: bool = False
    """They were told it or saw it, and hold none of it at the map's position."""


@dataclass(frozen=True)
class RumourMap:
    """Everyone the news reached on a timeline, and every telling, oldest first."""

    world_id: str
    timeline_id: str
    belief_id: str
    content: str
    """What the named memory says."""
    holders: list[Holder]
    tellings: list[Telling]


def rumour_map(
    tx: StateTransaction,
    tenant_id: str,
    world_id: str,
    belief_id: str,
    policy: Policy,
    timeline_id: str | None = None,
    as_of_seq: int | None = None,
) -> RumourMap:
    """The map of the rumour `belief_id` belongs to, on `timeline_id` (default: the timeline
    the memory was formed on), as of a position if given (`timeline_view`), its holders holding
    the news as the world's `policy` lets them remember. NotFound for a belief id no one holds
    there."""
    named = memory_named(tx, MemoryKeys(tenant_id, world_id), belief_id)
    if named is None:
        raise NotFound(f"no memory {belief_id!r} in world {world_id!r}")
    timeline_id = timeline_id or named.timeline_id
    _, keys, ancestry = timeline_view(tx, tenant_id, world_id, timeline_id, as_of_seq)
    if not visible(named, keys, ancestry):
        raise NotFound(f"timeline {timeline_id!r} does not see memory {belief_id!r}")
    memories = memories_of_origin(tx, keys, ancestry, named.origin)
    tellings = sorted(
        (
            Telling(teller, m.character_id, m.hops, m.confidence, m.seq, m.game_time)
            for m in memories
            if (teller := news_chain(m)[-1].told_by) is not None
        ),
        key=lambda telling: (telling.seq, telling.teller, telling.listener),
    )
    names = StoredDeclarations(tx, tenant_id, world_id, ancestry)
    now = minute_held_at(story_now(tx, tenant_id, world_id, ancestry), policy)
    reached = {memory.character_id for memory in memories}
    held: dict[str, list[Memory]] = {}
    for memory in memories:  # held as revised (a referee weakened it); told as it was then
        if not is_news(memory):  # a feeling formed beside the news keeps it known no more
            continue
        kept = held_at(tx, keys, ancestry, as_revised(tx, keys, ancestry, memory), now, policy)
        if kept is not None:
            held.setdefault(memory.character_id, []).append(kept)
    everyone = sorted({*reached, *(telling.teller for telling in tellings)})
    return RumourMap(
        world_id=world_id,
        timeline_id=timeline_id,
        belief_id=belief_id,
        content=named.content,
        holders=[
            _holder(entity, display_name(entity, names), held.get(entity, []), entity in reached)
            for entity in everyone
        ],
        tellings=tellings,
    )


def _holder(entity_id: str, name: str, memories: list[Memory], reached: bool) -> Holder:
    if not memories:
        return Holder(entity_id, name, None, None, witnessed=False, forgot=reached)
    return Holder(
        entity_id,
        name,
        hops=min(memory.hops for memory in memories),
        confidence=max(memory.confidence for memory in memories),
        witnessed=any(memory.source == "seen" for memory in memories),
    )
