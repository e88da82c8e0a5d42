"""Rules weighing: the policy table by kind of event and part; confidence by how it was learned."""

from __future__ import annotations

from typing import get_args

import pytest

from projections.weighing import Weights, event_kind, retold_confidence, weigh
from schemas.memory import EventKind
from schemas.policy import Learned, Policy, WeighedPart, merge_policy

KINDS: tuple[EventKind, ...] = get_args(EventKind)
PARTS: tuple[WeighedPart, ...] = get_args(WeighedPart)
LEARNED: tuple[Learned, ...] = get_args(Learned)


def cell(kind: EventKind, part: WeighedPart) -> tuple[float, float, float]:
    """A value of its own for every cell of the table: (importance, feeling, arousal)."""
    number = KINDS.index(kind) * len(PARTS) + PARTS.index(part) + 1
    return number / 100, -number / 50, 1 - number / 100


TABLE = merge_policy(
    Policy(),
    {
        "memory": {
            "weights": {
                kind: {
                    part: dict(
                        zip(("importance", "feeling", "arousal"), cell(kind, part), strict=True)
                    )
                    for part in PARTS
                }
                for kind in KINDS
            },
            "confidence": {"seen": 0.95, "told": 0.55, "player": 0.35},
            "retelling_factor": 0.5,
        }
    },
)


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("part", PARTS)
def test_each_kind_and_part_reads_its_own_cell_of_the_policy_table(
    kind: EventKind, part: WeighedPart
) -> None:
    weights = weigh(kind, part, "seen", TABLE)
    assert (weights.importance, weights.feeling, weights.arousal) == cell(kind, part)


def test_confidence_follows_how_it_was_learned() -> None:
    assert [weigh("theft", "witness", learned, TABLE).confidence for learned in LEARNED] == [
        0.95,
        0.55,
        0.35,
    ]


def test_news_retold_from_a_known_belief_keeps_the_tellers_confidence_less_the_retelling() -> None:
    assert weigh("fight", "target", "told", TABLE, teller_confidence=0.9).confidence == 0.45
    assert weigh("fight", "target", "player", TABLE, teller_confidence=0.9).confidence == 0.45
    assert retold_confidence(0.9, Policy()) == 0.72
    assert retold_confidence(0.72, Policy()) == 0.58  # rounded to two places, hop after hop
    assert retold_confidence(0.0, Policy()) == 0.0


def test_the_seeds_example_values() -> None:
    """Seed 001: Mara is told by the player (a conversation, as its target), then sees the
    player defeat the sailor at the tavern (a fight, as a witness)."""
    defaults = Policy()
    player_said = weigh(
        event_kind("loreweaver.conversation.player-said"), "target", "player", defaults
    )
    fight_seen = weigh(event_kind("combat.enemy-defeated"), "witness", "seen", defaults)
    assert player_said == Weights(importance=0.5, feeling=0.2, arousal=0.3, confidence=0.7)
    assert fight_seen == Weights(importance=0.6, feeling=-0.3, arousal=0.7, confidence=0.9)


def test_news_heard_of_weighs_less_and_stirs_less_than_the_sight_of_it() -> None:
    defaults = Policy().memory.weights
    for kind in KINDS:
        row = defaults.for_kind(kind)
        assert row.heard.importance <= row.witness.importance, kind
        assert abs(row.heard.feeling) <= abs(row.witness.feeling), kind
        assert row.heard.arousal <= row.witness.arousal, kind


@pytest.mark.parametrize(
    ("key", "kind"),
    [
        ("loreweaver.movement.character-entered-location", "movement"),
        ("loreweaver.conversation.player-said", "conversation"),
        ("npc.said", "conversation"),
        ("Combat.ATTACK", "fight"),
        ("quest/rescued_child", "help"),
        ("world event threatened", "threat"),
        ("crime.stole-gift", "theft"),  # theft comes before gift in the table of words
        ("help.gift", "help"),
        ("duel.insulted", "fight"),
        ("giftshop.opened", "generic"),  # whole words only
        ("crime.robbed-and-left", "theft"),  # the most striking kind named, as in news
        ("combat.attacked-then-departed", "fight"),
        ("npc.said-insult", "threat"),
        ("", "generic"),
    ],
)
def test_the_kind_of_an_event_is_read_off_the_words_of_its_key(key: str, kind: str) -> None:
    assert event_kind(key) == kind


@pytest.mark.parametrize(
    ("teller", "factor", "listener"),
    [(0.35, 0.5, 0.18), (0.7, 0.5, 0.35), (0.33, 0.5, 0.17), (0.9, 0.75, 0.68), (0.7, 0.85, 0.6)],
)
def test_retold_confidence_rounds_the_decimal_product_halves_up(
    teller: float, factor: float, listener: float
) -> None:
    """0.35 x 0.5 is 0.175 and reads 0.18: the binary float (0.17499...) is not what is meant."""
    policy = merge_policy(Policy(), {"memory": {"retelling_factor": factor}})
    assert retold_confidence(teller, policy) == listener


@pytest.mark.parametrize("factor", [0.5, 0.8, 0.95, 0.99])
def test_every_retelling_loses_confidence_until_none_is_left(factor: float) -> None:
    """Rounded alone, 0.02 x 0.8 read 0.02 again (0.1 at 0.95, 0.5 at 0.99): a rumour passed on
    for ever at that confidence."""
    policy = merge_policy(Policy(), {"memory": {"retelling_factor": factor}})
    confidence, hops = 0.9, 0
    while confidence > 0:
        retold = retold_confidence(confidence, policy)
        assert retold < confidence
        confidence, hops = retold, hops + 1
    assert hops <= 90
    assert retold_confidence(0.0, policy) == 0.0


def test_a_retelling_factor_of_one_keeps_the_tellers_confidence() -> None:
    policy = merge_policy(Policy(), {"memory": {"retelling_factor": 1.0}})
    assert retold_confidence(0.02, policy) == 0.02
