"""Branch diff: what a character holds on one timeline and not on another, both ways.

A character holds on a timeline every memory that timeline sees: its own, each ancestor's up to
the branch point, and the world's persistent memories (`memory_store.visible`). Two timelines
are compared by belief id (the same memory, held or not) and by content (the same words, held
under any belief id: a reload that lived the same scene again forms new ids for it).
"""

from __future__ import annotations

from dataclasses import dataclass

from projections.memory_store import held_in_order
from projections.runtime_read import NotFound, timeline_view
from projections.state import StateTransaction
from schemas.memory import Memory


@dataclass(frozen=True, slots=True)
class HeldMemory:
    """One memory in a diff: enough to tell what it is and where it was formed."""

    belief_id: str
    kind: str
    content: str
    source: str
    timeline_id: str
    seq: int
    persistent: bool


@dataclass(frozen=True, slots=True)
class BranchDiff:
    """Both ways of a diff; memories in story order (timeline position, then belief id)."""

    world_instance_id: str
    npc_id: str
    timeline_id: str
    other_timeline_id: str
    only_on_timeline: list[HeldMemory]
    only_on_other: list[HeldMemory]
    content_only_on_timeline: list[str]
    content_only_on_other: list[str]
    held_on_both: int


def branch_diff(
    tx: StateTransaction,
    tenant_id: str,
    world_id: str,
    npc_id: str,
    timeline_id: str,
    other_timeline_id: str,
    as_of_seq: int | None = None,
) -> BranchDiff:
    """The diff of the character between two timelines (each as of a position: BadRead where
    either has not processed it yet); NotFound for a timeline never seen, or a character holding
    nothing on either."""
    one = _held(tx, tenant_id, world_id, npc_id, timeline_id, as_of_seq)
    other = _held(tx, tenant_id, world_id, npc_id, other_timeline_id, as_of_seq)
    if not one and not other:
        raise NotFound(
            f"{npc_id!r} holds no memory on timeline {timeline_id!r} or {other_timeline_id!r}"
        )
    one_words = {memory.content for memory in one.values()}
    other_words = {memory.content for memory in other.values()}
    return BranchDiff(
        world_instance_id=world_id,
        npc_id=npc_id,
        timeline_id=timeline_id,
        other_timeline_id=other_timeline_id,
        only_on_timeline=_listed(one, other),
        only_on_other=_listed(other, one),
        content_only_on_timeline=sorted(one_words - other_words),
        content_only_on_other=sorted(other_words - one_words),
        held_on_both=len(one.keys() & other.keys()),
    )


def _held(
    tx: StateTransaction,
    tenant_id: str,
    world_id: str,
    npc_id: str,
    timeline_id: str,
    as_of_seq: int | None,
) -> dict[str, Memory]:
    """Every memory the character holds on the timeline (as of a position), by belief id:
    read from the timeline's own scopes, not from every memory the character holds in the world
    (a diff of two timelines took 1.1 s beside 3,000 other saves)."""
    _, keys, ancestry = timeline_view(tx, tenant_id, world_id, timeline_id, as_of_seq)
    return {memory.belief_id: memory for memory in held_in_order(tx, keys, ancestry, npc_id)}


def _listed(held: dict[str, Memory], against: dict[str, Memory]) -> list[HeldMemory]:
    missing = sorted(
        (memory for belief_id, memory in held.items() if belief_id not in against),
        key=lambda memory: (memory.seq, memory.timeline_id, memory.belief_id),
    )
    return [
        HeldMemory(
            belief_id=memory.belief_id,
            kind=memory.kind,
            content=memory.content,
            source=memory.source,
            timeline_id=memory.timeline_id,
            seq=memory.seq,
            persistent=memory.persistent,
        )
        for memory in missing
    ]
