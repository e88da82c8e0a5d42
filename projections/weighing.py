"""Rules weighing: how much a memory matters to a character, and how sure they are of it.

Importance, feeling and arousal come from the policy's table (`memory.weights`), by the kind
of event and the character's part in it. Confidence comes from how the character learned it
(`memory.confidence`): with their own eyes, from a player, or from a character; news retold
from a known belief keeps the teller's confidence times `memory.retelling_factor` instead.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from projections.event_keys import CONVERSATION_KEYS, MOVEMENT_KEYS
from projections.numbers import decimal, hundredths
from schemas.policy import EventKind, Learned, Part, Policy

KIND_WORDS: tuple[tuple[EventKind, frozenset[str]], ...] = (
    ("movement", frozenset({"movement", "moved", "entered", "left", "arrived", "departed"})),
    ("conversation", frozenset({"conversation", "said", "told", "talked", "asked", "spoke"})),
    (
        "theft",
        frozenset(
            {
                "theft",
                "thief",
                "steal",
                "stole",
                "stolen",
                "rob",
                "robbed",
                "robbery",
                "pickpocket",
                "pickpocketed",
                "burgled",
                "looted",
            }
        ),
    ),
    (
        "fight",
        frozenset(
            {
                "combat",
                "fight",
                "fought",
                "attack",
                "attacked",
                "duel",
                "brawl",
                "defeated",
                "killed",
                "wounded",
                "hit",
                "struck",
            }
        ),
    ),
    (
        "threat",
        frozenset(
            {"threat", "threatened", "insult", "insulted", "intimidated", "mocked", "cursed"}
        ),
    ),
    (
        "help",
        frozenset(
            {"help", "helped", "heal", "healed", "rescue", "rescued", "aid", "aided", "protected"}
        ),
    ),
    ("gift", frozenset({"gift", "gifted", "give", "gave", "given", "donated", "rewarded"})),
)
"""Words of an event key that tell its kind; the first kind with a matching word wins."""


@dataclass(frozen=True, slots=True)
class Weights:
    """How a memory weighs for the character who holds it."""

    importance: float
    feeling: float
    arousal: float
    confidence: float


def event_kind(key: str) -> EventKind:
    """The kind of event a key names, read off its words (`combat.enemy-defeated`: fight)."""
    if key in MOVEMENT_KEYS:
        return "movement"
    if key in CONVERSATION_KEYS:
        return "conversation"
    words = set(re.split(r"[.\-_/\s]+", key.lower()))
    for kind, kind_words in KIND_WORDS:
        if words & kind_words:
            return kind
    return "generic"


def weigh(
    kind: EventKind,
    part: Part,
    learned: Learned,
    policy: Policy,
    teller_confidence: float | None = None,
) -> Weights:
    """The weights of a memory of a `kind` event, held by a character in `part`.

    `teller_confidence` is the teller's own confidence when news is retold from a known belief.
    """
    impact = policy.memory.weights.for_kind(kind).for_part(part)
    if teller_confidence is None:
        confidence = policy.memory.confidence.of(learned)
    else:
        confidence = retold_confidence(teller_confidence, policy)
    return Weights(impact.importance, impact.feeling, impact.arousal, confidence)


def retold_confidence(teller_confidence: float, policy: Policy) -> float:
    """How sure a listener is of news: the teller's confidence, less for the retelling."""
    return hundredths(decimal(teller_confidence) * decimal(policy.memory.retelling_factor))
