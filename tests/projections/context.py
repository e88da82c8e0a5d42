"""A `MemoryContext` over a plain list of memories: what storage answers, for rule tests."""

from __future__ import annotations

from dataclasses import dataclass

from projections.catalogue import Catalogue
from schemas.memory import Memory


@dataclass(frozen=True)
class Context:
    """What form_memories looks up, over the memories formed so far (storage stands in)."""

    catalogue: Catalogue
    memories: list[Memory]

    def kind_of(self, entity_id: str) -> str:
        return self.catalogue.kind_of(entity_id)

    def name_of(self, entity_id: str) -> str:
        return self.catalogue.name_of(entity_id)

    def teller_belief(self, teller: str, belief_id: str) -> Memory | None:
        return next(
            (
                memory
                for memory in self.memories
                if memory.character_id == teller and memory.belief_id == belief_id
            ),
            None,
        )

    def knows(self, character: str, origin: str) -> bool:
        return any(
            memory.character_id == character and memory.origin == origin for memory in self.memories
        )
