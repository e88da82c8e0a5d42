"""A `MemoryContext` over a plain list of memories: what storage answers, for rule tests."""

from __future__ import annotations

from dataclasses import dataclass, field

from pydantic import JsonValue

from projections.catalogue import Catalogue
from projections.world import same_json
from schemas import Fact
from schemas.memory import Memory

WorldRecord = dict[tuple[str, str], tuple[JsonValue, str]]
"""(subject, attribute) -> (value, origin of the event that made it the value)."""


@dataclass(frozen=True)
class Context:
    """What form_memories looks up, over the memories formed so far (storage stands in)."""

    catalogue: Catalogue
    memories: list[Memory]
    record: WorldRecord = field(default_factory=dict)

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

    def teller_news(self, teller: str, origin: str) -> Memory | None:
        held = [
            memory
            for memory in self.memories
            if memory.character_id == teller
            and memory.origin == origin
            and memory.kind != "impression"
        ]
        return min(held, key=lambda memory: (memory.hops, -memory.confidence), default=None)

    def fact_origin(self, fact: Fact) -> str | None:
        recorded = self.record.get((fact.subject, fact.attribute))
        if recorded is None or not same_json(recorded[0], fact.value):
            return None
        return recorded[1]
