"""The catalogue: what kind of thing an id names and what to call it, and that it persists."""

from __future__ import annotations

from typing import Any

import orjson

from projections.catalogue import Catalogue, StoredDeclarations, merge_declaration
from projections.runtime_read import runtime_read
from projections.state import MemoryState
from schemas import EntityDeclaration, Event
from schemas.policy import Policy, merge_policy
from streams.replay import replay_lines
from tests.reads import answer

POLICY = Policy()


def event(**fields: Any) -> Event:
    return Event.model_validate(
        {"world_instance_id": "w", "timeline_id": "main", "seq": 1, "key": "story.happened"}
        | fields
    )


def line(seq: int, **fields: Any) -> bytes:
    return orjson.dumps(
        {"world_instance_id": "w", "timeline_id": "main", "seq": seq, "key": "story.happened"}
        | fields
    )


def test_the_event_declares_over_the_world_and_what_it_leaves_out_stays() -> None:
    known = {"npc-bram": EntityDeclaration(name="Bram", kind="character", group="guild-smiths")}
    happening = event(entities={"npc-bram": {"name": "Bram the Smith"}})
    catalogue = Catalogue(known, happening, POLICY)
    assert catalogue.get("npc-bram") == EntityDeclaration(
        name="Bram the Smith", kind="character", group="guild-smiths"
    )
    assert catalogue.name_of("npc-bram") == "Bram the Smith"
    assert catalogue.get("npc-nobody") is None
    assert catalogue.name_of("npc-nobody") == "npc-nobody"


def test_a_declared_kind_wins_over_the_id_pattern() -> None:
    known = {"npc-statue": EntityDeclaration(kind="item")}
    happening = event(entities={"well": {"kind": "place"}, "guard-1": {"kind": "character"}})
    catalogue = Catalogue(known, happening, POLICY)
    assert [catalogue.kind_of(i) for i in ("npc-statue", "well", "guard-1", "npc-mara")] == [
        "item",
        "place",
        "character",
        "character",
    ]


def test_a_declaration_without_a_kind_leaves_the_id_pattern_in_force() -> None:
    catalogue = Catalogue({"loc-mill": EntityDeclaration(name="The Mill")}, event(), POLICY)
    assert catalogue.kind_of("loc-mill") == "place"
    assert catalogue.name_of("loc-mill") == "The Mill"


def patterns(kinds: dict[str, list[str]]) -> Policy:
    return merge_policy(POLICY, {"memory": {"entity_patterns": kinds}})


def test_id_patterns_classify_the_undeclared_and_the_first_matching_kind_wins() -> None:
    soldiers_first = patterns({"soldier": ["guard-*"], "building": ["guard-*", "*-house"]})
    buildings_first = patterns({"building": ["guard-*", "*-house"], "soldier": ["guard-*"]})
    assert Catalogue({}, event(), soldiers_first).kind_of("guard-house") == "soldier"
    assert Catalogue({}, event(), buildings_first).kind_of("guard-house") == "building"
    assert Catalogue({}, event(), soldiers_first).kind_of("bath-house") == "building"
    assert Catalogue({}, event(), soldiers_first).kind_of("GUARD-1") == "unknown"  # case counts


def test_patterns_set_for_a_kind_replace_its_defaults() -> None:
    catalogue = Catalogue({}, event(), patterns({"character": ["guard-*"]}))
    assert catalogue.kind_of("guard-1") == "character"
    assert catalogue.kind_of("npc-mara") == "unknown"
    assert catalogue.kind_of("loc-well") == "place"  # the other kinds keep theirs


def test_the_default_patterns() -> None:
    catalogue = Catalogue({}, event(), POLICY)
    assert [catalogue.kind_of(i) for i in ("npc-mara", "loc-well", "item-key", "mara")] == [
        "character",
        "place",
        "item",
        "unknown",
    ]


def test_whoever_the_event_lists_as_a_player_is_a_player_whatever_was_declared() -> None:
    known = {"npc-ilse": EntityDeclaration(kind="character")}
    happening = event(players=["npc-ilse", "npc-otto"], entities={"npc-otto": {"kind": "place"}})
    catalogue = Catalogue(known, happening, POLICY)
    assert catalogue.kind_of("npc-ilse") == "player"
    assert catalogue.kind_of("npc-otto") == "player"
    assert Catalogue(known, event(), POLICY).kind_of("npc-ilse") == "character"


def test_a_later_declaration_adds_to_an_earlier_one() -> None:
    earlier = EntityDeclaration.model_validate({"name": "Mara", "kind": "character", "mood": "x"})
    later = EntityDeclaration(group="tavern-staff", name="Mara Vell")
    assert merge_declaration(earlier, later).model_dump(exclude_none=True) == {
        "name": "Mara Vell",
        "kind": "character",
        "group": "tavern-staff",
        "mood": "x",
    }
    assert merge_declaration(None, later) == later


def test_declarations_persist_for_the_world_and_only_for_it() -> None:
    state = MemoryState()
    StoredDeclarations(state, "default", "w").declare("npc-mara", EntityDeclaration(name="Mara"))
    StoredDeclarations(state, "default", "w").declare(
        "npc-mara", EntityDeclaration(kind="character", group="staff")
    )
    StoredDeclarations(state, "default", "w").declare("loc-inn", EntityDeclaration(name="Inn"))
    later = StoredDeclarations(state, "default", "w")
    assert later.get("npc-mara") == EntityDeclaration(name="Mara", kind="character", group="staff")
    assert later.declared() == {
        "loc-inn": EntityDeclaration(name="Inn"),
        "npc-mara": EntityDeclaration(name="Mara", kind="character", group="staff"),
    }
    assert StoredDeclarations(state, "default", "w2").declared() == {}
    assert StoredDeclarations(state, "acme", "w").get("npc-mara") is None


def test_declaring_the_same_thing_again_writes_the_same_state() -> None:
    state = MemoryState()
    StoredDeclarations(state, "default", "w").declare("npc-mara", EntityDeclaration(name="Mara"))
    before = list(state.items())
    StoredDeclarations(state, "default", "w").declare("npc-mara", EntityDeclaration(name="Mara"))
    assert list(state.items()) == before


def test_a_name_declared_once_names_the_entity_in_every_later_memory() -> None:
    state = replay_lines(
        [
            line(1, key="world.entity-declared", entities={"loc-inn": {"name": "The Inn"}}),
            line(2, entities={"npc-ilse": {"name": "Ilse", "kind": "character"}}),
            line(3, key="combat.enemy-defeated", actor="npc-ilse", location="loc-inn"),
        ]
    ).state
    recollections: Any = answer(runtime_read(state, "default", "w", "main", "npc-ilse"))[
        "recollections"
    ]
    assert recollections[0]["content"].startswith("Ilse enemy defeated at The Inn")
    assert StoredDeclarations(state, "default", "w").declared() == {
        "loc-inn": EntityDeclaration(name="The Inn"),
        "npc-ilse": EntityDeclaration(name="Ilse", kind="character"),
    }
