"""Rules weighing: how much a memory matters to a character, and how sure they are of it.

Importance, feeling and arousal come from the policy's table (`memory.weights`), by the kind
of event (read off its key's words: the most striking kind named, as in news) and the
character's part in it. Confidence comes from how the character learned it
(`memory.confidence`): with their own eyes, from a player, or from a character; news retold
from a known belief keeps the teller's confidence times `memory.retelling_factor` instead.

News a character passes on (`told`, or a rumour at a meeting) is weighed by what it tells of,
never as the conversation that carried it, and by the listener's part, `heard`: "Ilse beat the
drunk sailor senseless" weighs as a fight heard of. What it tells of is the kind of the original
event when the teller's memory is known (`Memory.event_kind`), else the kind its words and
claimed facts suggest (`news_kind`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from functools import lru_cache

from projections.event_keys import CONVERSATION_KEYS, MOVEMENT_KEYS
from projections.numbers import decimal, hundredths
from schemas import Fact
from schemas.memory import EventKind, Memory
from schemas.policy import Learned, Policy, WeighedPart

KIND_WORDS: tuple[tuple[EventKind, frozenset[str]], ...] = (
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
                "beat",
                "beaten",
                "punched",
                "stabbed",
                "slain",
                "murdered",
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
    ("movement", frozenset({"movement", "moved", "entered", "left", "arrived", "departed"})),
    ("conversation", frozenset({"conversation", "said", "told", "talked", "asked", "spoke"})),
)
"""Words of an event key, or of news, that tell its kind; the most striking kind named wins,
in this order: news is always said by someone, and often says where someone went, and so does
a key ("Oskar robbed Mara and left" and `crime.robbed-and-left` tell of a theft)."""


@dataclass(frozen=True, slots=True)
class Weights:
    """How a memory weighs for the character who holds it."""

    importance: float
    feeling: float
    arousal: float
    confidence: float


@lru_cache(maxsize=1 << 10)
def event_kind(key: str) -> EventKind:
    """The kind of event a key names, read off its words (`combat.enemy-defeated`: fight).
    Worked out once per key: a game uses a few keys over and over."""
    if key in MOVEMENT_KEYS:
        return "movement"
    if key in CONVERSATION_KEYS:
        return "conversation"
    return _most_striking(set(re.split(r"[.\-_/\s]+", key.lower())))


def news_kind(content: str, facts: Iterable[Fact]) -> EventKind:
    """The kind of event news tells of, read off its words and the facts it claims (their
    attributes and text values): "Ilse beat the drunk sailor senseless" tells of a fight."""
    said = [content]
    for fact in facts:
        said += [fact.attribute, fact.value] if isinstance(fact.value, str) else [fact.attribute]
    return _most_striking(set(re.findall(r"[^\W_]+", " ".join(said).lower())))


def _most_striking(words: set[str]) -> EventKind:
    """The first kind of `KIND_WORDS` one of `words` names, else generic."""
    for kind, kind_words in KIND_WORDS:
        if words & kind_words:
            return kind
    return "generic"


def told_of(memory: Memory) -> EventKind:
    """The kind of event a memory tells of, when it is passed on as news."""
    if memory.event_kind is not None:
        return memory.event_kind
    return news_kind(memory.content, memory.facts)  # stored before the kind was kept


def weigh(
    kind: EventKind,
    part: WeighedPart,
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
    """How sure a listener is of news: the teller's confidence, less for the retelling.

    The teller's confidence times `retelling_factor`, to hundredths; while the factor is below
    1, at least a hundredth less than the teller's, down to 0. Rounded alone, a small
    confidence came back as it was (0.02 x 0.8 reads 0.02, 0.1 x 0.95 reads 0.1), and news
    passed on for ever without losing any more of it.
    """
    return _retold(teller_confidence, policy.memory.retelling_factor)


@lru_cache(maxsize=1 << 12)
def _retold(teller_confidence: float, factor: float) -> float:
    """Worked out once per pair: confidences are hundredths, so few pairs recur endlessly."""
    teller = decimal(teller_confidence)
    retold = hundredths(teller * decimal(factor))
    if factor < 1:
        retold = min(retold, max(0.0, hundredths(teller - _LEAST_LOSS)))
    return retold


_LEAST_LOSS = decimal(0.01)
"""What a retelling costs at least, while the factor is below 1."""
