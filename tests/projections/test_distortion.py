"""Distortion without a model, as a game designer would notice it: the same stream tells the
same rumour, and a rumour grows numbers, loses names and blurs places, or passes unchanged."""

from __future__ import annotations

from typing import Any

from projections.catalogue import Catalogue
from projections.distortion import distort, distortion_seed, grown
from schemas import EntityDeclaration, Event, Fact
from schemas.policy import Policy

DECLARED = {
    "npc-oskar": {"name": "Oskar"},
    "npc-mara": {"name": "Mara"},
    "npc-vell": {"name": "Mara Vell"},
    "npc-ada": {"name": "Ada"},
    "loc-tavern": {"name": "The Crooked Lantern"},
    "item-locket": {"name": "the Golden Locket"},
    "player-1": {"name": "Ilse", "kind": "player"},
    "bells": {"name": "The Bells", "kind": "place"},
    "npc-agent": {"name": "Agent 47"},
    "loc-three-bells": {"name": "The 3 Bells"},
}
THEFT = "Oskar stole 10 gold from Mara at The Crooked Lantern"
ABOUT = ["npc-oskar", "npc-mara", "loc-tavern"]
GOLD = [Fact(subject="npc-oskar", attribute="gold", value=10)]


def catalogue_of(declared: dict[str, dict[str, Any]]) -> Catalogue:
    """The world's catalogue as a meeting sees it, with these declarations (kinds of ids never
    declared come from the default id patterns: `npc-*` characters, `loc-*` places)."""
    meeting = Event.model_validate(
        {"world_instance_id": "w", "timeline_id": "main", "seq": 9, "key": "x.met"}
    )
    declarations = {entity: EntityDeclaration.model_validate(d) for entity, d in declared.items()}
    return Catalogue(declarations, meeting, Policy())


CATALOGUE = catalogue_of(DECLARED)


def seed(listener: str, seq: int = 7) -> bytes:
    return distortion_seed("origin-of-the-theft", listener, "main", seq)


def retellings(
    content: str,
    facts: list[Fact],
    about: list[str],
    count: int = 200,
    catalogue: Catalogue = CATALOGUE,
) -> list[tuple[str, list[Fact]]]:
    """How `count` different listeners take the same news in."""
    return [distort(content, facts, about, seed(f"npc-{i}"), catalogue) for i in range(count)]


def heard(content: str, about: list[str], catalogue: Catalogue = CATALOGUE) -> set[str]:
    """Every way 200 listeners take in news of no facts."""
    return {words for words, _ in retellings(content, [], about, catalogue=catalogue)}


def test_the_same_stream_tells_the_same_rumour() -> None:
    first = distort(THEFT, GOLD, ABOUT, seed("npc-zed"), CATALOGUE)
    assert distort(THEFT, GOLD, ABOUT, seed("npc-zed"), CATALOGUE) == first
    assert len({content for content, _ in retellings(THEFT, GOLD, ABOUT)}) > 1


def test_pinned_retellings_never_change_between_releases() -> None:
    told = {
        listener: distort(THEFT, GOLD, ABOUT, seed(listener, seq=1), CATALOGUE)[0]
        for listener in ("npc-ada", "npc-bram", "npc-zed", "npc-ulla")
    }
    assert told == {
        "npc-ada": "Oskar stole 12 gold from Mara at The Crooked Lantern",
        "npc-bram": THEFT,
        "npc-zed": "Oskar stole 15 gold from Mara at The Crooked Lantern",
        "npc-ulla": "Oskar stole 10 gold from Mara somewhere",
    }


def test_about_one_retelling_in_four_passes_unchanged() -> None:
    unchanged = [told for told in retellings(THEFT, GOLD, ABOUT, 400) if told == (THEFT, GOLD)]
    assert 60 <= len(unchanged) <= 140


def test_a_number_grows_in_the_words_and_in_the_fact_alike() -> None:
    grew = [
        (content, facts)
        for content, facts in retellings(THEFT, GOLD, ABOUT)
        if "10 gold" not in content
    ]
    assert grew
    for content, facts in grew:
        [fact] = facts
        assert isinstance(fact.value, int) and 11 <= fact.value <= 15
        assert content == THEFT.replace("10 gold", f"{fact.value} gold")
    assert {facts[0].value for _, facts in grew} == {11, 12, 13, 15}


def test_a_number_only_in_the_facts_grows_there() -> None:
    facts = [
        Fact(subject="npc-oskar", attribute="bounty", value=2.5),
        Fact(subject="npc-oskar", attribute="wanted", value=True),
    ]
    values = {told[1][0].value for told in retellings("Oskar is wanted", facts, ["npc-oskar"])}
    assert values == {2.5, 3.75, 3.5, 4.5, 5.5}
    assert all(told[1][1].value is True for told in retellings("Oskar is wanted", facts, []))


def test_growth_by_value() -> None:
    assert grown(10, by_half=True, more=1) == 15
    assert grown(5, by_half=True, more=1) == 8
    assert grown(10, by_half=False, more=3) == 13
    assert grown(2.5, by_half=True, more=1) == 3.75
    assert grown(0, by_half=True, more=1) == 1


def test_a_name_becomes_a_stranger() -> None:
    content = "Oskar robbed Mara"
    assert heard(content, ["npc-oskar", "npc-mara"]) == {
        content,
        "A stranger robbed Mara",
        "Oskar robbed a stranger",
    }


def test_a_name_inside_a_longer_name_is_no_mention_of_it() -> None:
    """Mara and Mara Vell are two people: "Mara Vell robbed Mara" was told as "A stranger Vell
    robbed a stranger"."""
    content = "Mara Vell robbed Mara"
    assert heard(content, ["npc-mara", "npc-vell"]) == {
        content,
        "A stranger robbed Mara",
        "Mara Vell robbed a stranger",
    }


def test_a_place_becomes_vaguer() -> None:
    content = "Oskar was seen at The Crooked Lantern"
    assert heard(content, ["loc-tavern"]) == {
        content,
        "Oskar was seen somewhere near The Crooked Lantern",
        "Oskar was seen somewhere",
    }


def test_an_item_never_becomes_a_stranger() -> None:
    """What an id is comes from the catalogue (`item-*` is an item), not from the wording: the
    locket was told as "Oskar stole a stranger"."""
    content = "Oskar stole the Golden Locket"
    assert heard(content, ["npc-oskar", "item-locket"]) == {
        content,
        "A stranger stole the Golden Locket",
    }


def test_a_character_named_after_in_is_someone_not_a_place() -> None:
    """Ada was blurred as a place ("Oskar confided somewhere near Ada") and never a stranger."""
    content = "Oskar confided in Ada"
    assert heard(content, ["npc-oskar", "npc-ada"]) == {
        content,
        "A stranger confided in Ada",
        "Oskar confided in a stranger",
    }


def test_only_a_place_blurs() -> None:
    """The locket, named after "in", was blurred as a place ("Oskar hid the key somewhere")."""
    content = "Oskar hid the key in the Golden Locket"
    assert heard(content, ["npc-oskar", "item-locket"]) == {
        content,
        "A stranger hid the key in the Golden Locket",
    }


def test_an_id_of_no_known_kind_is_what_the_words_make_it() -> None:
    """A player is one to the catalogue only at the events listing it: news of a player's deed
    names an id of no kind, unless declared. Such an id is a place after "at" or "in", else
    someone, so it shifts as a declared one would."""
    content = "Ilse drank at The Bells"
    told = {
        content,
        "A stranger drank at The Bells",
        "Ilse drank somewhere near The Bells",
        "Ilse drank somewhere",
    }
    assert heard(content, ["player-1", "bells"]) == told
    kinds_unknown = catalogue_of({"player-1": {"name": "Ilse"}, "bells": {"name": "The Bells"}})
    assert heard(content, ["player-1", "bells"], kinds_unknown) == told


def test_ids_and_times_are_not_numbers_to_grow() -> None:
    content = "npc-2 left at 21:05"
    assert heard(content, []) == {content}


def test_a_number_inside_a_name_is_no_number_of_the_story() -> None:
    """ "Agent 47" was told as "Agent 71", and "at The 3 Bells" as "at The 6 Bells"."""
    content = "Oskar robbed Agent 47 of 10 gold at The 3 Bells"
    about = ["npc-oskar", "npc-agent", "loc-three-bells"]
    told = {words for words, _ in retellings(content, GOLD, about)}
    assert told == {
        content,
        *(content.replace("10 gold", f"{more} gold") for more in (11, 12, 13, 15)),
        "A stranger robbed Agent 47 of 10 gold at The 3 Bells",
        "Oskar robbed a stranger of 10 gold at The 3 Bells",
        "Oskar robbed Agent 47 of 10 gold somewhere near The 3 Bells",
        "Oskar robbed Agent 47 of 10 gold somewhere",
    }
    assert heard("Agent 47 left", ["npc-agent"]) == {"Agent 47 left", "A stranger left"}


def test_a_number_written_with_thousands_grows_as_one_and_keeps_its_commas() -> None:
    """ "stole 1,000 gold" was told as "stole 1,1 gold": the 000 grew from nought to 1."""
    content = "Oskar stole 1,000 gold, 1000 by his count, on 3,4 nights"
    thousand = [Fact(subject="npc-oskar", attribute="gold", value=1000)]
    told = retellings(content, thousand, ["npc-oskar"])
    grew = [(words, facts) for words, facts in told if facts != thousand]
    assert {facts[0].value for _, facts in grew} == {1001, 1002, 1003, 1500}
    for words, [fact] in grew:
        assert words == f"Oskar stole {fact.value:,} gold, {fact.value} by his count, on 3,4 nights"
    assert {words for words, facts in told if facts == thousand} == {
        content,
        "A stranger stole 1,000 gold, 1000 by his count, on 3,4 nights",
    }
    assert heard("A debt of 1,250,000.5 gold and 1,0000 more", []) == {
        "A debt of 1,250,000.5 gold and 1,0000 more",
        "A debt of 1,250,001.5 gold and 1,0000 more",
        "A debt of 1,250,002.5 gold and 1,0000 more",
        "A debt of 1,250,003.5 gold and 1,0000 more",
        "A debt of 1,875,000.75 gold and 1,0000 more",
    }


def test_a_number_too_long_to_grow_exactly_stays_as_told() -> None:
    """A run of digits past MOST_DIGITS (an account number, a joke of 400 nines) is words, not
    a number: growing it overflowed a float and stopped the worker at the meeting."""
    for digits in (16, 400, 5000):
        debt = "9" * digits
        content = f"Oskar owes {debt} gold"
        facts = [Fact(subject="npc-oskar", attribute="debt", value=10**18)]
        told = retellings(content, facts, ["npc-oskar"], count=50)
        assert all(debt in words for words, _ in told)
        assert all(kept == facts for _, kept in told)
    fifteen = "9" * 15
    assert any(
        fifteen not in words for words, _ in retellings(f"Oskar owes {fifteen} gold", [], [])
    )


def test_a_negative_number_a_rumour_claims_never_grows() -> None:
    """Only numbers of zero or more grow: a reputation of -5 came to listeners as -4, a value
    no record holds."""
    facts = [Fact(subject="npc-oskar", attribute="reputation", value=-5)]
    for listener in ("npc-0", "npc-1", "npc-2"):
        _, claimed = distort("the smith owes a debt", facts, [], seed(listener), CATALOGUE)
        assert [fact.value for fact in claimed] == [-5]
