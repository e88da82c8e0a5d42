"""Provenance: where one of a character's memories came from, and who passed it on.

The origin is the event the news started with, as the timeline saw it: the first one that
formed a memory of it (for news with no event behind it, the `told` that first claimed it). The
chain names every holder in turn, first holder first, with how far and how surely it reached
each and who told them. A memory the character does not hold on the timeline is NotFound.
"""

from __future__ import annotations

from projections.divergence import as_judged
from projections.memory_store import as_revised, load_memory, origin_event, visible
from projections.runtime_read import NotFound, timeline_view
from projections.state import StateTransaction
from schemas.memory import ChainLink, Memory, OriginRead, ProvenanceRead


def news_chain(memory: Memory) -> list[ChainLink]:
    """Who held the news in turn, first holder first, with how far and how surely it came.

    A lineage entry names a teller and how the news arrived at the next holder, so holder i
    (after the first) arrived with lineage entry i - 1.
    """
    tellers = [(t.entity_id, t.hops, t.confidence) for t in memory.lineage]
    if not tellers and memory.source_entity is not None:
        tellers = [(memory.source_entity, memory.hops, memory.confidence)]
    if not tellers:  # seen (0 hops), or told by nobody named (a `told` without actor)
        return [
            ChainLink(entity_id=memory.character_id, hops=memory.hops, confidence=memory.confidence)
        ]
    holders = [entity for entity, _, _ in tellers] + [memory.character_id]
    chain = [ChainLink(entity_id=holders[0], hops=tellers[0][1] - 1)]
    for step, (teller, hops, confidence) in enumerate(tellers, start=1):
        chain.append(
            ChainLink(entity_id=holders[step], hops=hops, confidence=confidence, told_by=teller)
        )
    return chain


def provenance(
    tx: StateTransaction,
    tenant_id: str,
    world_id: str,
    timeline_id: str,
    npc_id: str,
    belief_id: str,
    as_of_seq: int | None = None,
) -> ProvenanceRead:
    """Where one of a character's memories came from: the original event and every teller
    (as of a position, as every read may be: `timeline_view`)."""
    _, keys, ancestry = timeline_view(tx, tenant_id, world_id, timeline_id, as_of_seq)
    memory = load_memory(tx, keys, npc_id, belief_id)
    if memory is None or not visible(memory, keys, ancestry):
        raise NotFound(f"{npc_id!r} holds no memory {belief_id!r} on timeline {timeline_id!r}")
    origin = origin_event(tx, keys, ancestry, memory.origin)
    return ProvenanceRead(
        world_instance_id=world_id,
        timeline_id=timeline_id,
        npc_id=npc_id,
        belief_id=belief_id,
        origin=None if origin is None else OriginRead.model_validate_json(origin),
        chain=news_chain(memory),
        memory=as_judged(tx, tenant_id, world_id, ancestry, as_revised(tx, keys, ancestry, memory)),
    )
