"""Perception: which characters take an event in, and in what part (seed 001).

- The actor and the target perceive it, unless that one is a player or not a character.
- Named `witnesses` perceive it, and then nobody else; an empty list says nobody else saw.
- With no `witnesses` (null), the characters known to be at the event's location perceive it,
  unless `memory.perception_location_fallback` is off.
- Words said (`told`, `player-said`, `npc-replied`) are heard by the listener (the target) and
  named witnesses only: never by bystanders, and never by the speaker, who knows what they
  said. A character's reply to a player is heard by no character unless one is named.
- Movement only teaches where characters are (unless `memory.remember_movement`), and a
  declaration is no story at all: neither forms a memory.

Each character perceives an event once, in its first part: actor, target, then the
witnesses or occupants in id order.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass

from projections.catalogue import CHARACTER, KindOf
from projections.event_keys import (
    CHARACTERS_MET,
    DIALOGUE_SUMMARISED,
    ENTITY_DECLARED,
    MEMORY_RECALLED,
    MOVEMENT_KEYS,
    SPOKEN_KEYS,
)
from schemas import Event
from schemas.policy import Part, Policy


@dataclass(frozen=True, slots=True)
class Perception:
    """One character who took an event in, and their part in it."""

    character_id: str
    part: Part


def perceivers(
    event: Event, kind_of: KindOf, occupants: Collection[str], policy: Policy
) -> list[Perception]:
    """The characters who perceive `event`; `occupants` are those known at its location."""
    if not forms_memories(event.key, policy):
        return []
    spoken = event.key in SPOKEN_KEYS
    candidates: list[tuple[str | None, Part]] = [(event.actor, "actor"), (event.target, "target")]
    candidates += [
        (character, "witness") for character in sorted(_bystanders(event, occupants, policy))
    ]

    taken: set[str | None] = {event.actor} if spoken else set()
    perceptions = []
    for character, part in candidates:
        if character is None or character in taken or kind_of(character) != CHARACTER:
            continue
        taken.add(character)
        perceptions.append(Perception(character, part))
    return perceptions


BOOKKEEPING_KEYS = frozenset(
    {ENTITY_DECLARED, CHARACTERS_MET, MEMORY_RECALLED, DIALOGUE_SUMMARISED}
)
"""Events that tell the projections something and form no memory."""


def forms_memories(key: str, policy: Policy) -> bool:
    """Whether an event with `key` can form memories at all under `policy`: declarations,
    meetings, recalls and dialogue summaries are bookkeeping, not deeds anyone sees (a summary
    seen by everyone at the place put a private conversation's gist in their memories)."""
    if not policy.memory.npc or key in BOOKKEEPING_KEYS:
        return False
    return key not in MOVEMENT_KEYS or policy.memory.remember_movement


def _bystanders(event: Event, occupants: Collection[str], policy: Policy) -> Collection[str]:
    """Who saw it besides the actor and target: the named witnesses, else those present."""
    if event.witnesses is not None:
        return event.witnesses
    if event.key in SPOKEN_KEYS or event.location is None:
        return ()
    return occupants if policy.memory.perception_location_fallback else ()
