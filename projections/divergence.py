"""Divergence: whether a character's belief differs from what really happened.

A memory is `diverging` while any fact it asserts differs from the world record on the
reader's timeline, compared as JSON values. It is judged when read, not when formed: the
record may change after the memory was formed, and a branch may record something else.
"""

from __future__ import annotations

from projections.state import StateTransaction
from projections.timelines import Ancestry
from projections.world import ABSENT, fact_value, same_json
from schemas.memory import BeliefRead, Memory


def diverging(
    tx: StateTransaction, tenant_id: str, world_id: str, ancestry: Ancestry, memory: Memory
) -> bool:
    """Whether any fact the memory asserts differs from the world record."""
    for fact in memory.facts:
        recorded = fact_value(tx, tenant_id, world_id, ancestry, fact.subject, fact.attribute)
        if recorded is not ABSENT and not same_json(recorded, fact.value):
            return True
    return False


def as_judged(
    tx: StateTransaction, tenant_id: str, world_id: str, ancestry: Ancestry, memory: Memory
) -> BeliefRead:
    """The memory as a read shows it, `diverging` as judged now (a `Memory` serialises as the
    `BeliefRead` it extends: its stored fields stay out of the read)."""
    judged = diverging(tx, tenant_id, world_id, ancestry, memory)
    return memory if memory.diverging == judged else memory.model_copy(update={"diverging": judged})
