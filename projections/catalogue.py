"""The catalogue: what kind of thing an id names, and what to call it.

Games declare names, kinds and groups in an event's `entities` (or with
`world.entity-declared`). A declaration belongs to the timeline it was made on, from its
position on, like everything else a timeline records: a branch sees its ancestors' declarations
up to its branch point, never what the abandoned future declared. A later declaration changes
the fields it gives and keeps the others; a field given as null is cleared (`{"group": null}`:
the character leaves its group). An id never declared is classified by the policy's id patterns.
Whoever an event lists in `players` is a player, whatever else was declared: players never form
memories, and only characters do.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from functools import lru_cache
from typing import Protocol

from projections.key_prefixes import ENTITIES, ENTITY_HEADS
from projections.keys import pack, pack_scope, unpack
from projections.state import StateTransaction
from projections.timelines import Ancestry
from projections.versions import Headed, at_or_before, head_at, read_headed_through
from schemas import EntityDeclaration, Event
from schemas.policy import Policy

PLAYER = "player"
CHARACTER = "character"
PLACE = "place"
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


def declared_by(event: Event, entity_id: str) -> EntityDeclaration | None:
    """What `event` declares `entity_id` as, if anything: a player it lists is declared of no
    kind there, its kind as it was (`players` wins at the event; a player's avatar declared a
    character formed memories at later events not listing it, and a character a player took
    over for a scene, declared a player, never formed one again)."""
    declaration = event.entities.get(entity_id)
    if declaration is None or declaration.kind in (None, PLAYER) or entity_id not in event.players:
        return declaration
    return EntityDeclaration.model_validate(
        declaration.model_dump(exclude_unset=True, exclude={"kind"})
    )


def display_name(entity_id: str, declarations: Declarations) -> str:
    """What a character calls `entity_id`: its declared name, else the id itself."""
    declared = declarations.get(entity_id)
    if declared is None or declared.name is None:
        return entity_id
    return declared.name


def naming(declarations: Declarations) -> Callable[[str], str]:
    """`display_name` through `declarations`: what a character calls each id."""
    return lambda entity_id: display_name(entity_id, declarations)


def merge_declaration(
    earlier: EntityDeclaration | None, later: EntityDeclaration
) -> EntityDeclaration:
    """A later declaration adds to an earlier one: what it sets wins, what it leaves out stays,
    and what it sets to null is cleared (`"group": null` takes a character out of its group,
    `"name": null` gives back the id): a field left unset and one set to null read alike in a
    model, so the merge goes by the fields the declaration was given."""
    given = later.model_dump(exclude_unset=True)
    merged = ({} if earlier is None else earlier.model_dump(exclude_none=True)) | given
    return EntityDeclaration.model_validate(
        {field: value for field, value in merged.items() if value is not None}
    )


@dataclass(slots=True)  # not frozen: made on every event, and a frozen one costs more to make
class Catalogue:
    """Kinds and names as one event sees them: its own declarations over the world's.

    Made for one event, whose rules ask about the same few ids dozens of times: each answer is
    worked out once (declaring the event's own entities afterwards merges in what `get`
    already merges, so no answer changes within the event).
    """

    known: Declarations
    event: Event
    policy: Policy
    _declared: dict[str, EntityDeclaration | None] = field(default_factory=dict, repr=False)
    _kinds: dict[str, str] = field(default_factory=dict, repr=False)

    def get(self, entity_id: str, /) -> EntityDeclaration | None:
        """The declaration in force for this event."""
        if entity_id in self._declared:
            return self._declared[entity_id]
        own = declared_by(self.event, entity_id) if self.event.entities else None
        known = self.known.get(entity_id)
        declared = known if own is None else merge_declaration(known, own)
        self._declared[entity_id] = declared
        return declared

    def kind_of(self, entity_id: str) -> str:
        """The kind of `entity_id` in this event (see `classify`)."""
        kind = self._kinds.get(entity_id)
        if kind is None:
            kind = self._kinds[entity_id] = classify(
                entity_id, self.event.players, self, self.policy
            )
        return kind

    def name_of(self, entity_id: str) -> str:
        """What a character calls `entity_id` (see `display_name`)."""
        return display_name(entity_id, self)


@dataclass(slots=True)  # not frozen: made on every event, like `Catalogue`
class StoredDeclarations:
    """The catalogue as a timeline sees it in state: one merged declaration per entity id.

    Each declaration is a version at the position that made it, on its timeline, and that
    timeline's newest version is also its head: a lookup at the tip of a timeline is one point
    read, a branch reads its ancestors' versions as of its branch point. Made for one event (or
    one read): what it looked up is remembered for the rest of it (an event asks about the same
    few ids dozens of times).
    """

    tx: StateTransaction
    tenant_id: str
    world_id: str
    ancestry: Ancestry
    _looked_up: dict[str, EntityDeclaration | None] = field(default_factory=dict)

    def get(self, entity_id: str, /) -> EntityDeclaration | None:
        if entity_id not in self._looked_up:
            raw = read_headed_through(
                self.tx,
                self.ancestry,
                lambda timeline: self._versions(timeline, entity_id),
                lambda timeline: self._head(timeline, entity_id),
            )
            self._looked_up[entity_id] = None if raw is None else _decode_declaration(raw)
        return self._looked_up[entity_id]

    def declared(self) -> dict[str, EntityDeclaration]:
        """Every declaration the timeline sees, by entity id."""
        found: dict[str, EntityDeclaration] = {}
        for segment in self.ancestry:
            prefix = pack(ENTITY_HEADS, self.tenant_id, self.world_id, segment.timeline_id)
            for key, head in self.tx.scan(prefix):
                entity_id = str(unpack(key[len(prefix) :])[0])
                if entity_id in found:
                    continue  # a newer segment declared it
                raw = head_at(head, segment)
                if raw is None:
                    version = at_or_before(
                        self.tx, self._versions(segment.timeline_id, entity_id), segment.upto_seq
                    )
                    raw = None if version is None else version[1]
                if raw is not None:
                    found[entity_id] = _decode_declaration(raw)
        return dict(sorted(found.items()))

    def declaration(self, entity_id: str, declaration: EntityDeclaration) -> Headed:
        """What declaring `entity_id` as `declaration` writes at the tip of the timeline (the
        ancestry's first segment): the stored declaration with it merged in. Worked out before
        the event writes anything: its fields add up over the events that declare it, and an
        event that would make it too large for a record is refused whole
        (`projections.record_bounds`)."""
        merged = merge_declaration(self.get(entity_id), declaration)
        timeline = self.ancestry[0].timeline_id
        return Headed(
            self._versions(timeline, entity_id),
            self._head(timeline, entity_id),
            merged.model_dump_json(exclude_none=True).encode(),
            f"the declaration of entity {entity_id!r}",
        )

    def _versions(self, timeline_id: str, entity_id: str) -> bytes:
        return pack_scope(ENTITIES, self.tenant_id, self.world_id, timeline_id, entity_id)

    def _head(self, timeline_id: str, entity_id: str) -> bytes:
        return pack_scope(ENTITY_HEADS, self.tenant_id, self.world_id, timeline_id, entity_id)


@lru_cache(maxsize=1 << 12)
def _decode_declaration(raw: bytes) -> EntityDeclaration:
    """A stored declaration, decoded once (they are immutable models, safe to share)."""
    return EntityDeclaration.model_validate_json(raw)
