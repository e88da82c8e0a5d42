"""The oracle's own rules against what the spec, seed 001 and the README say, with no
production code involved: the oracle is only worth comparing with if it is right by itself."""

from __future__ import annotations

import pytest

from schemas import Fact
from tests.oracle import Oracle, distorted, event_kind, grown, hashed, json_equal, retelling
from tests.seed import SEED_READ
from tests.tavern import TAVERN_LINES


def test_the_oracle_reads_seed_001_as_the_contract_shows() -> None:
    oracle = Oracle()
    for raw in TAVERN_LINES[:3]:
        oracle.deliver(raw)
    read = oracle.read("default", "save-1", "main", "npc-mara")
    for part in ("beliefs", "recollections"):
        for memory in read[part]:
            assert len(memory.pop("belief_id")) == 32
    relations = [
        {**relation, "feeling": round(float(relation["feeling"]), 2)}
        for relation in read.pop("relations")
    ]
    assert relations == SEED_READ["relations"]
    assert read == {name: value for name, value in SEED_READ.items() if name != "relations"}


@pytest.mark.parametrize(
    ("said", "retold"),
    [
        ('Ilse said "give me the key" at the inn (gold: 5)', "Ilse said something at the inn"),
        ("Ada happened (note: x (y)) at noon", "Ada happened at noon"),
        ("“Hush”, said Bram (twice", "something, said Bram (twice"),
        ("(all of it)", "(all of it)"),
    ],
)
def test_a_retelling_keeps_the_statement_and_drops_the_detail(said: str, retold: str) -> None:
    assert retelling(said) == retold


def test_json_values_compare_as_json() -> None:
    assert not json_equal(True, 1) and not json_equal(0, False)
    assert json_equal(1, 1.0) and json_equal({"a": [1, True], "b": 0}, {"b": 0, "a": [1, True]})
    assert not json_equal([1], {"1": 1}) and not json_equal(None, 0)


@pytest.mark.parametrize(
    ("key", "kind"),
    [
        ("combat.enemy-defeated", "fight"),
        ("crime.purse-stolen", "theft"),
        ("trade.gift-given", "gift"),
        ("story.happened", "generic"),
        ("loreweaver.conversation.told", "conversation"),
    ],
)
def test_the_kind_of_an_event_is_read_off_its_key(key: str, kind: str) -> None:
    assert event_kind(key) == kind


def test_a_rumour_grows_a_number_by_half_again_or_by_a_little() -> None:
    assert grown(10, by_half=True, more=1) == 15
    assert grown(10, by_half=False, more=2) == 12
    assert grown(0, by_half=True, more=1) == 1
    assert grown(2.5, by_half=True, more=1) == 3.75


def test_the_pinned_retellings_of_the_distortion_rules() -> None:
    """The same seeds as `tests/projections/test_distortion.py`, the same retellings."""
    names = {"npc-oskar": "Oskar", "npc-mara": "Mara", "loc-tavern": "The Crooked Lantern"}
    theft = "Oskar stole 10 gold from Mara at The Crooked Lantern"
    gold = [Fact(subject="npc-oskar", attribute="gold", value=10)]
    told = {
        listener: distorted(
            theft,
            gold,
            ["npc-oskar", "npc-mara", "loc-tavern"],
            hashed("distortion", "origin-of-the-theft", listener, "main", 1),
            lambda entity: names.get(entity, entity),
            lambda entity: "place" if entity.startswith("loc-") else "character",
        )
        for listener in ("npc-ada", "npc-bram", "npc-zed", "npc-ulla")
    }
    assert {listener: content for listener, (content, _) in told.items()} == {
        "npc-ada": "Oskar stole 12 gold from Mara at The Crooked Lantern",
        "npc-bram": theft,
        "npc-zed": "Oskar stole 15 gold from Mara at The Crooked Lantern",
        "npc-ulla": "Oskar stole 10 gold from Mara somewhere",
    }
    assert told["npc-zed"][1] == [Fact(subject="npc-oskar", attribute="gold", value=15)]
