"""The catalogue: what kind of thing an id names, and what to call it.

Games declare names, kinds and groups in an event's `entities` (or with
`world.entity-declared`); declarations persist for the world. An id never declared is
classified by the policy's id patterns. Whoever an event lists in `players` is a player, whatever
else was declared: players never form memories, and only characters do.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from functools import lru_cache
from typing import Protocol

from projections.key_prefixes import ENTITIES
from projections.keys import pack, unpack
from projections.state import StateTransaction
from schemas import EntityDeclaration, Event
from schemas.policy import Policy

PLAYER = "player"
CHARACTER = "character"
UNKNOWN = "unknown"

KindOf = Callable[[str], str]
"""The kind of an id as one event sees it (`Catalogue.kind_of`)."""


class Declarations(Protocol):
    """The world's declarations by id (a plain dict will do)."""

    def get(self, entity_id: str, /) -> EntityDeclaration | None:
        """The declaration of `entity_id`, or None if never declared."""


def classify(
    entity_id: str, players: Collection[str], declarations: Declarations, policy: Policy
) -> str:
    """The kind of `entity_id`: player, else declared kind, else by id pattern, else unknown."""
    if entity_id in players:
        return PLAYER
    declared = declarations.get(entity_id)
    if declared is not None and declared.kind is not None:
        return declared.kind
    for kind, patterns in policy.memory.entity_patterns.items():
        if any(fnmatchcase(entity_id, pattern) for pattern in patterns):
            return kind
    return UNKNOWN


def display_name(entity_id: str, declarations: Declarations) -> str:
    """What a character calls `entity_id`: its declared name, else the id itself."""
    declared = declarations.get(entity_id)
    if declared is None or declared.name is None:
        return entity_id
    return declared.name


def merge_declaration(
    earlier: EntityDeclaration | None, later: EntityDeclaration
) -> EntityDeclaration:
    """A later declaration adds to an earlier one: what it sets wins, what it leaves out stays."""
    if earlier is None:
        return later
    return EntityDeclaration.model_validate(
        earlier.model_dump(exclude_none=True) | later.model_dump(exclude_none=True)
    )


@dataclass(frozen=True, slots=True)
class Catalogue:
    """Kinds and names as one event sees them: its own declarations over the world's."""

    known: Declarations
    event: Event
    policy: Policy

    def get(self, entity_id: str, /) -> EntityDeclaration | None:
        """The declaration in force for this event."""
        own = self.event.entities.get(entity_id)
        if own is None:
            return self.known.get(entity_id)
        return merge_declaration(self.known.get(entity_id), own)

    def kind_of(self, entity_id: str) -> str:
        """The kind of `entity_id` in this event (see `classify`)."""
        return classify(entity_id, self.event.players, self, self.policy)

    def name_of(self, entity_id: str) -> str:
        """What a character calls `entity_id` (see `display_name`)."""
        return display_name(entity_id, self)


@dataclass(frozen=True, slots=True)
class StoredDeclarations:
    """The world's catalogue as kept in state: one merged declaration per entity id.

    Made for one event: what it looked up is remembered for the rest of it (an event asks
    about the same few ids dozens of times).
    """

    tx: StateTransaction
    tenant_id: str
    world_id: str
    _looked_up: dict[str, EntityDeclaration | None] = field(default_factory=dict)

    def get(self, entity_id: str, /) -> EntityDeclaration | None:
        if entity_id not in self._looked_up:
            raw = self.tx.get(pack(ENTITIES, self.tenant_id, self.world_id, entity_id))
            self._looked_up[entity_id] = None if raw is None else _decode_declaration(raw)
        return self._looked_up[entity_id]

    def declared(self) -> dict[str, EntityDeclaration]:
        """Every declaration of the world, by entity id."""
        prefix = pack(ENTITIES, self.tenant_id, self.world_id)
        return {
            str(unpack(key[len(prefix) :])[0]): _decode_declaration(raw)
            for key, raw in self.tx.scan(prefix)
        }

    def declare(self, entity_id: str, declaration: EntityDeclaration) -> None:
        """Merge a declaration in; declaring the same thing again changes nothing."""
        merged = merge_declaration(self.get(entity_id), declaration)
        self._looked_up[entity_id] = merged
        self.tx.put(
            pack(ENTITIES, self.tenant_id, self.world_id, entity_id),
            merged.model_dump_json(exclude_none=True).encode(),
        )


@lru_cache(maxsize=1 << 12)
def _decode_declaration(raw: bytes) -> EntityDeclaration:
    """A stored declaration, decoded once (they are immutable models, safe to share)."""
    return EntityDeclaration.model_validate_json(raw)
