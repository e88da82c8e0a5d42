"""What a character remembers, and the reads that serve one character's mind.

A `Memory` is the stored record; a `BeliefRead` is the part of it a game may see. The read
models keep seed 001's exact key order ("The runtime read"): fields are declared in that order
and pydantic dumps them in declaration order. A `Memory` placed where a `BeliefRead` is
declared is dumped as a `BeliefRead`: pydantic serialises an instance by the declared type,
so a read never shows the stored fields.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from schemas.events import Contract, Fact, Identifier

MemoryKind = Literal["event", "knowledge", "impression"]
"""`event`: perceived; `knowledge`: told or said; `impression`: a feeling formed."""

EventKind = Literal[
    "theft", "fight", "threat", "help", "gift", "conversation", "movement", "generic"
]
"""What sort of thing happened, as far as weighing cares (read off the event key)."""

Source = Literal["seen", "told", "rumour", "player"]
"""How the character came by it: own eyes, a first-hand teller, a longer chain, a player."""

Share = Annotated[float, Field(ge=0.0, le=1.0)]
"""A share from 0 to 1: confidence, importance, arousal."""
Feeling = Annotated[float, Field(ge=-1.0, le=1.0)]
"""How good (up to 1) or bad (down to -1) something feels."""
Hops = Annotated[int, Field(ge=0)]
Position = Annotated[int, Field(ge=1)]


Verdict = Literal["unconvinced", "doubting", "convinced"]
"""The referee's judgement of a player's line (section 11)."""


def _absent(value: object) -> bool:
    return value is None


class BeliefRead(Contract):
    """One memory as the runtime read shows it."""

    belief_id: str
    kind: MemoryKind
    content: str
    about: list[Identifier]
    source: Source
    source_entity: Identifier | None
    hops: Hops
    confidence: Share
    importance: Share
    feeling: Feeling
    arousal: Share
    diverging: bool
    uncertain: bool
    seq: Position
    game_time: str | None
    persistent: bool


class Teller(Contract):
    """One step news took to reach a character: who told it, and how it arrived."""

    entity_id: Identifier
    hops: Hops
    confidence: Share


class Memory(BeliefRead):
    """A memory as stored: the read's fields, and what rumourmill needs to reason about it."""

    character_id: Identifier
    timeline_id: Identifier
    facts: list[Fact]
    """What the memory asserts; it is diverging while any differs from the world record."""
    origin: str
    """The original event or claim: the same news reached by two routes shares it."""
    lineage: list[Teller]
    """The tellers it passed through, first teller first; empty for what was seen."""
    story_minutes: int | None
    event_kind: EventKind | None = None
    """The kind of event the memory is of, or tells of: news is weighed by it wherever it
    travels. None in memories stored before it was kept (their words tell it instead)."""
    verdict: Verdict | None = Field(default=None, exclude_if=_absent)
    """The referee's verdict on the player's line this memory keeps; None (and left out of
    the stored record) for every other memory."""


class ReadModel(Contract):
    """An answer of a read, served as JSON."""

    def to_json(self) -> bytes:
        """The JSON body, compact, in declaration order."""
        return self.__pydantic_serializer__.to_json(self)


class RelationRead(Contract):
    """How a character stands to another entity, read off the memories about it."""

    entity_id: Identifier
    feeling: Feeling
    memories: Annotated[int, Field(ge=1)]
    last_seq: Position


class RuntimeRead(ReadModel):
    """`GET /v2/memory/runtime/npcs/{npc_id}`: one character's mind on one timeline."""

    world_instance_id: Identifier
    timeline_id: Identifier
    npc_id: Identifier
    acknowledged_seq: Annotated[int, Field(ge=0)]
    processed_seq: Annotated[int, Field(ge=0)]
    location: Identifier | None
    beliefs: list[BeliefRead]
    relations: list[RelationRead]
    recollections: list[BeliefRead]


class RecalledMemory(BeliefRead):
    """A memory as recall answers it: as the character holds it now, how much, and why chosen."""

    retention: Share
    score: float


class SearchCounts(Contract):
    """How many candidates each search of a recall found (0 for a search that did not run),
    and how many of the candidates a reranker scored (0 without one, or without its answer)."""

    cues: Annotated[int, Field(ge=0)]
    words: Annotated[int, Field(ge=0)]
    vectors: Annotated[int, Field(ge=0)]
    reranked: Annotated[int, Field(ge=0)] = 0


class RecallRead(ReadModel):
    """`GET /v2/memory/runtime/npcs/{npc_id}/recall`: what a character recalls for a query,
    chronologically."""

    memories: list[RecalledMemory]
    searched: SearchCounts


Speaker = Literal["player", "character"]
"""Who said a line of dialogue (section 13)."""


class TurnRead(Contract):
    """One line of a conversation, word for word, as the dialogue read shows it."""

    seq: Position
    speaker: Speaker
    speaker_id: Identifier
    text: str
    occurred_at: str | None
    """The line's real time (ISO 8601, UTC), or None when it came with none."""


class KnowledgeRead(Contract):
    """One memory as a decision model may be given it: a `BeliefRead` without `diverging`,
    which says whether the memory agrees with the world record. The record never reaches the
    model that writes the reply (seed 001, "Memory in a decision"): only the referee's verdict
    does. `uncertain` is the character's own doubt, and stays."""

    belief_id: str
    kind: MemoryKind
    content: str
    about: list[Identifier]
    source: Source
    source_entity: Identifier | None
    hops: Hops
    confidence: Share
    importance: Share
    feeling: Feeling
    arousal: Share
    uncertain: bool
    seq: Position
    game_time: str | None
    persistent: bool


class DecisionRead(ReadModel):
    """`GET /v2/memory/runtime/npcs/{npc_id}/decision`: what a decision model may be given."""

    knowledge: list[KnowledgeRead]
    recent_turns: list[TurnRead]
    """The player scope's turns as of the event, oldest first (none once expired)."""
    verdict: Verdict | None
    prompt: str


InventionKind = Literal["name", "relation"]
"""What a reply invented: a name nobody gave it, or (a model finds these) a new relation."""


class Invention(Contract):
    """One thing a reply names that its decision was not given."""

    name: str
    kind: InventionKind


class InventionRead(ReadModel):
    """`POST /v2/memory/runtime/npcs/{npc_id}/reply-check`: what a reply invented, and what
    the policy (`memory.invention`) does about it."""

    inventions: list[Invention]
    action: Literal["allow", "flag", "reject"]


class OriginRead(Contract):
    """The event where news started, as provenance names it."""

    timeline_id: Identifier
    seq: Position
    key: str
    actor: Identifier | None
    location: Identifier | None
    game_time: str | None


class ChainLink(Contract):
    """One holder of news in turn: how far from the origin, how surely they hold it, and who
    told them. The first holder of news that was passed on has neither a teller nor, in the
    chain, a confidence (the next holder's link says how surely it was passed)."""

    entity_id: Identifier
    hops: Hops
    confidence: Share | None = Field(default=None, exclude_if=_absent)
    told_by: Identifier | None = Field(default=None, exclude_if=_absent)


class ProvenanceRead(ReadModel):
    """`GET /v2/memory/runtime/npcs/{npc_id}/beliefs/{belief_id}/provenance`: where one of a
    character's memories came from."""

    world_instance_id: Identifier
    timeline_id: Identifier
    npc_id: Identifier
    belief_id: str
    origin: OriginRead | None
    chain: list[ChainLink]
    memory: BeliefRead
