"""The change feed: one message on `rumourmill.changes` (keyed by world) per change of a mind.

For analytics consumers: what characters came to believe, stopped being sure of, how they
stand to each other, who passed news to whom, and which worlds were deleted. Every change has a
`change_id` derived from where it happened (world, timeline, seq, kind, subject), so an event
applied again (a crash before its state was stored) repeats the same ids and a consumer drops
duplicates by id.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Annotated, Any, Literal

import orjson
from pydantic import Field

from schemas.events import AsInteger, Contract, GameTime, Identifier
from schemas.memory import Feeling, MemoryKind, Share, Source

HexId = Annotated[str, Field(pattern=r"^[0-9a-f]{32}$")]
"""32 hex characters: a change's, a belief's or a piece of news's id."""
Position = Annotated[int, Field(ge=1), AsInteger]


class _Change(Contract):
    """What every change names: its id and kind, and the world it happened in."""

    change_id: HexId
    """The same for the same change however often it is sent: drop duplicates by it."""
    tenant_id: Identifier
    """The tenant the world belongs to, as the event named it (`default` when it named none)."""
    world_instance_id: Identifier
    """The world the change happened in, and the message's key."""


class _ChangeAtEvent(_Change):
    """A change one applied event made, at its position and story time."""

    timeline_id: Identifier
    """The timeline the event was applied on (`main` or a branch a load made)."""
    seq: Position
    """The event's position in its world (`seq` of the event contract)."""
    game_time: GameTime | None
    """The event's story time as the game gave it (`day D, HH:MM`), if it gave one."""
    story_minutes: Annotated[int, Field(ge=0), AsInteger] | None
    """Story time of the event (minutes since day 0, 00:00), where it gave a `game_time`."""
    life: Annotated[int, Field(ge=0), AsInteger]
    """Which life of the world the change belongs to: how many times the world was deleted
    before it (0: never). A world begun anew starts its positions and belief ids again; a
    `world-deleted` change whose `deletion` is N ends every life below N."""


class BeliefFormed(_ChangeAtEvent):
    """A character formed a memory: seen, told, said or heard as a rumour."""

    kind: Literal["belief-formed"]
    character_id: Identifier
    """The character who holds the memory."""
    belief_id: HexId
    """The memory's id in the character's mind, as reads and recall name it."""
    memory_kind: MemoryKind
    """What the memory is: `event` (something that happened), `knowledge` or `impression`."""
    content: str
    """The memory as the character would tell it (perhaps wrong)."""
    source: Source
    """How the character came by it: seen, told first-hand, a rumour, or a player's line."""
    source_entity: Identifier | None
    """Who told it (for `told`, `rumour` and `player`), if anyone."""
    confidence: Share
    """How sure the character is of it, 0 to 1."""
    importance: Share
    """How much it matters to the character, 0 to 1: important memories fade slower."""
    feeling: Feeling
    """How the character feels about it, from -1 (bad) to 1 (good)."""
    persistent: bool
    """true when it is held on every timeline of the world (a save/load does not undo it)."""


class BeliefWeakened(_ChangeAtEvent):
    """A character holds a memory less firmly than before: its new version is less sure."""

    kind: Literal["belief-weakened"]
    character_id: Identifier
    """The character who holds the memory."""
    belief_id: HexId
    """The memory held less firmly, as `belief-formed` named it."""
    confidence_before: Share
    """How sure the character was of it before the event."""
    confidence: Share
    """How sure the character is of it now (a player talked it round: the referee)."""


class RelationChanged(_ChangeAtEvent):
    """How a character stands to another entity, as it stands after the event: as a read of
    the event's timeline shows it, persistent memories (formed on any timeline) included."""

    kind: Literal["relation-changed"]
    character_id: Identifier
    """The character whose feeling changed."""
    entity_id: Identifier
    """Whom or what the feeling is toward: a character, a player, a place or another entity."""
    feeling: Feeling
    """How the character now feels toward the entity, from -1 (bad) to 1 (good)."""
    memories: Annotated[int, Field(ge=1), AsInteger]
    """How many of the character's memories the feeling is drawn from: those about the entity
    and those it told."""


class RumourPassed(_ChangeAtEvent):
    """A teller passed news on to a listener (at a meeting, in a group, or by a `told`), who
    now holds it as `belief_id`."""

    kind: Literal["rumour-passed"]
    teller_id: Identifier
    """Who passed the news on."""
    listener_id: Identifier
    """Who heard it."""
    belief_id: HexId
    """The memory the listener now holds, as `belief-formed` names it."""
    origin: HexId
    """The original event or claim: the same news passed along a chain shares it."""
    hops: Annotated[int, Field(ge=1), AsInteger]
    """How many tellings the news took from whoever saw or first said it (1: first-hand)."""
    confidence: Share
    """How sure the listener is of it, 0 to 1."""
    content: str
    """The news as the listener holds it: a retelling may shift, blur or grow a detail."""


class WorldDeleted(_Change):
    """Everything of a world was removed (`world.deleted`, or `tenant.deleted` for each world)."""

    kind: Literal["world-deleted"]
    scope: Literal["world", "tenant"]
    """What the deletion event named: this world, or its whole tenant."""
    deletion: Annotated[int, Field(ge=1), AsInteger]
    """How many times the world has been deleted, by itself or with its tenant, this one
    included: the life of the world that ends (the changes of the life after it have ids of
    their own)."""


Change = dict[str, Any]
"""A message of the change feed as plain data, ready for JSON: the fields of the model that its
`kind` names in `CHANGE_MODELS` (built without validating: rumourmill made every value)."""

ChangeRecords = dict[str, list[bytes]]
"""What one source message (or a batch of them) changed, as the feed's records: each change in
JSON, under the world it is keyed by, each world's in the order they happened. Encoded once as
they are worked out, and sent to Kafka as they are."""


def as_records(changes: Iterable[Change]) -> ChangeRecords:
    """`changes` as records, in their order."""
    records: ChangeRecords = {}
    for change in changes:
        records.setdefault(change["world_instance_id"], []).append(orjson.dumps(change))
    return records


CHANGE_MODELS: dict[str, type[Contract]] = {
    "belief-formed": BeliefFormed,
    "belief-weakened": BeliefWeakened,
    "relation-changed": RelationChanged,
    "rumour-passed": RumourPassed,
    "world-deleted": WorldDeleted,
}
"""Each change kind and its model."""
