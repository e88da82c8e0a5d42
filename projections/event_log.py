"""What happened at each position, as a decision needs it (section 10): who acted, on whom,
which players took part, where, and the words said, kept per timeline by position.

A decision names a position (`after_seq`); the event there names the player and the character
who answers. Facts of the world record are not kept here: a decision never sees them.
"""

from __future__ import annotations

import orjson

from projections.key_prefixes import EVENTS_AT
from projections.keys import pack
from projections.state import StateTransaction
from projections.timelines import Ancestry
from schemas import Event
from schemas.events import Contract, Identifier
from schemas.text import visible

WORD_FIELDS = ("text", "content")
"""Payload fields that carry words (a player's line, a teller's news)."""


class EventAt(Contract):
    """One event as a decision reads it."""

    key: str
    actor: Identifier | None
    target: Identifier | None
    players: list[Identifier]
    location: Identifier | None
    words: str | None


def record_event_at(tx: StateTransaction, event: Event) -> None:
    """Keep the event's parts a decision reads, at its position."""
    payload, words = event.payload, None
    for name in WORD_FIELDS:  # a loop, not `next` over a generator: once an event
        said = payload.get(name)
        if isinstance(said, str):  # the first field said is the words: one of nothing, none
            words = said if visible(said) else None
            break
    summary = {
        "key": event.key,
        "actor": event.actor,
        "target": event.target,
        "players": event.players,
        "location": event.location,
        "words": words,
    }
    tx.put(
        pack(EVENTS_AT, event.tenant_id, event.world_instance_id, event.timeline_id, event.seq),
        orjson.dumps(summary),
    )


def event_at(
    tx: StateTransaction, tenant_id: str, world_id: str, ancestry: Ancestry, seq: int
) -> EventAt | None:
    """The event at position `seq` as the timeline sees it (its own, or an ancestor's)."""
    for segment in ancestry:
        if seq <= segment.upto_seq:
            raw = tx.get(pack(EVENTS_AT, tenant_id, world_id, segment.timeline_id, seq))
            if raw is not None:
                return EventAt.model_validate_json(raw)
    return None
