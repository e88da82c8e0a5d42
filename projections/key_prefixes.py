"""Every storage key prefix, declared once: what each key space holds, and what it is for.

All state lives in one ordered key space (`projections.state`); a key's first packed part names
the space it belongs to. A space is either **projection** state, a fold of the event stream
that two runs of the same stream must hold byte for byte (the state digest proves it), or
**delivery bookkeeping**, which depends on how the stream was delivered (the outbox, events
still waiting for their turn) and stays out of the digest, or a **shortcut** to what projection
spaces hold, which a store of an earlier release lacks (out of the digest too). One key belongs
to no world: the format the whole store is written in (`projections.migrations`).

Declare a new key space here, and only here: the digest covers every projection space, and a
test fails when state is written under a prefix this registry lacks. The digest hashes the
projection spaces in declaration order, so a new one goes at the end.
"""

from __future__ import annotations

from enum import Enum


class Role(Enum):
    """What a key space is for."""

    PROJECTION = "projection"
    """A fold of the event stream: the same stream, the same bytes (in the digest)."""
    BOOKKEEPING = "bookkeeping"
    """How delivery went: differs between runs of the same stream (not in the digest)."""
    SHORTCUT = "shortcut"
    """A shortcut to what projection spaces hold, which reads answer alike with or without:
    whether a store keeps it depends on the releases and policies it was written with (not in
    the digest)."""
    FORMAT = "format"
    """Which format a whole store is written in: of no world, so in no world's digest."""


KEY_SPACES: dict[str, Role] = {}
"""Every key prefix and what its space is for, in declaration order."""


def _declare(prefix: str, role: Role) -> str:
    """Register a key space; its prefix is the constant its modules pack keys with."""
    if prefix in KEY_SPACES:
        raise ValueError(f"key prefix {prefix!r} is declared twice")
    KEY_SPACES[prefix] = role
    return prefix


def _projection(prefix: str) -> str:
    return _declare(prefix, Role.PROJECTION)


def _bookkeeping(prefix: str) -> str:
    return _declare(prefix, Role.BOOKKEEPING)


def _shortcut(prefix: str) -> str:
    return _declare(prefix, Role.SHORTCUT)


# Each comment: what follows (prefix, tenant, world) in the keys, then what an entry holds.
TIMELINES = _projection("timeline")  # timeline: positions and branch point
FACTS = _projection("fact")  # timeline, subject, attribute, seq: the world record's value
ENTITIES = _projection("entity")  # timeline, entity, seq: its merged declaration from seq on
LOCATIONS = _projection("location")  # timeline, character, seq: where the character is
OCCUPANTS = _projection("occupants")  # timeline, place, seq: who is there
MEMORIES = _projection("memory")  # character, belief: the memory itself
RECOLLECTIONS = _projection("recollection")  # scope, character, seq, belief: an `event` memory
BELIEF_RANKS = _projection("belief-rank")  # scope, character, rank, MAX_SEQ - seq, belief
ORIGINS = _projection("origin")  # scope, character, origin: the first seq it was learned at
RELATIONS = _projection("relation")  # timeline, character, entity, seq: a relation version
RELATION_HEADS = _projection("relation-head")  # timeline, character, entity: newest version
NEWS = _projection("news-by-seq")  # scope, character, seq, belief: news the character can tell
ORIGIN_EVENTS = _projection("origin-event")  # origin, timeline, seq: an event that formed it
PERSISTENT_WORLDS = _projection("persistent-world")  # count of persistent memories stored
GROUP_EXCHANGES = _projection("group-exchange")  # timeline, seq: the interval groups last met in
STORY_TIMES = _projection("story-time")  # timeline, seq: the story minute of the event there
RECALLS = _projection("recall")  # timeline, character, belief, seq: recalls counted, own minute
MEMORY_LOG = _projection("memory-log")  # timeline, seq, character, belief: formed at that position
EVENTS_AT = _projection("event-at")  # timeline, seq: who, whom, players, where and words there
DIALOGUE_TURNS = _projection("dialogue-turn")  # timeline, character, scope kind, id, seq: a line
DIALOGUE_SUMMARIES = _projection("dialogue-summary")  # timeline, character, scope, id, seq
ENTITY_HEADS = _projection("entity-head")  # timeline, entity: seq (8 bytes) + newest version
BELIEF_VERSIONS = _projection("belief-version")  # timeline, character, belief, seq: confidence
REVISED_WORLDS = _projection("revised-world")  # empty: a belief of the world was revised
JUDGEMENTS = _projection("judgement")  # timeline, seq (, life once deleted): judgements made
LOCATION_HEADS = _projection("location-head")  # timeline, character: seq + newest location
OCCUPANT_HEADS = _projection("occupants-head")  # timeline, place: seq + newest occupants
GROUP_EXCHANGE_HEADS = _projection("group-exchange-head")  # timeline: seq + newest interval
FACT_RUNS = _projection("fact-run")  # as `FACTS`, for a value said again: where its run began
ORIGIN_MEMORIES = _projection("origin-memory")  # origin, scope, character, seq, belief: empty
BELIEF_HOLDERS = _projection("belief-holder")  # belief: the character holding it (UTF-8)
PLAYER_PRIVACY = _projection("player-privacy")  # player: the privacy last declared (JSON)
NEWS_HEADS = _shortcut("news-head")  # scope, character: its newest news entries (`NEWS`)
PERSISTENT_RELATIONS = _shortcut("persistent-relation")  # character, entity: feelings summed
PERSISTENT_COUNTED = _shortcut("persistent-counted")  # the event that counted last, count before
PENDING = _bookkeeping("pending")  # timeline, seq: an event in the deferral buffer
WAITING_CHILDREN = _bookkeeping("waiting-child")  # timeline, child: a branch waiting for it
WAITED_ON = _bookkeeping("waited-on")  # timeline: some branch waits for it (no scan per event)
OUTBOX = _bookkeeping("outbox")  # keyed by topic, partition, offset instead: what it produced
DELETIONS = _bookkeeping("deletions")  # no world (a tenant's) or world: times deleted@offset
OUTBOX_PRUNED = _bookkeeping("outbox-pruned")  # topic, partition: no row kept below (8 bytes)
STATE_FORMAT = _declare("state-format", Role.FORMAT)  # nothing after it: the store's format

PROJECTION_PREFIXES = tuple(
    prefix for prefix, role in KEY_SPACES.items() if role is Role.PROJECTION
)
"""The spaces of a world's projections, in declaration order; each key starts (prefix, tenant,
world)."""

HEADS = frozenset(
    {
        RELATION_HEADS,
        ENTITY_HEADS,
        LOCATION_HEADS,
        OCCUPANT_HEADS,
        GROUP_EXCHANGE_HEADS,
        NEWS_HEADS,
        PERSISTENT_RELATIONS,
    }
)
"""The spaces of heads: one entry per scope (a pair, an entity, a character, a place, a
timeline), its newest version (or newest entries), read by every event that touches the scope.
They grow with a world's size, not with its history: what a worker keeps in memory between
batches (`streams.state.HotValues`)."""

NOT_OF_A_WORLD = frozenset({OUTBOX, OUTBOX_PRUNED, DELETIONS, STATE_FORMAT})
"""Spaces a deletion keeps: the outbox (keyed by source position, so redeliveries of events from
before a deletion stay recognised), the deletion counts themselves and the store's format."""
WORLD_PREFIXES = tuple(prefix for prefix in KEY_SPACES if prefix not in NOT_OF_A_WORLD)
"""Every space keyed (prefix, tenant, world, ...): what deleting a world removes."""
