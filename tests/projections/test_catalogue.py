"""The catalogue: what kind of thing an id names and what to call it, and that it persists."""

from __future__ import annotations

from typing import Any

import orjson

from projections.catalogue import Catalogue, StoredDeclarations, merge_declaration
from projections.runtime_read import runtime_read
from projections.state import MemoryState
from projections.timelines import Ancestry, Segment
from schemas import MAX_SEQ, EntityDeclaration, Event
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


def test_a_field_declared_null_is_cleared_and_a_field_left_out_stays() -> None:
    earlier = EntityDeclaration.model_validate(
        {"name": "Mara", "kind": "item", "group": "staff", "privacy": "full", "mood": "x"}
    )
    later = EntityDeclaration.model_validate_json(
        '{"name": null, "kind": null, "group": null, "privacy": null}'
    )
    merged = merge_declaration(earlier, later)
    assert merged.model_dump(exclude_none=True) == {"mood": "x"}
    catalogue = Catalogue({"npc-mara": merged}, event(), POLICY)
    assert catalogue.name_of("npc-mara") == "npc-mara"
    assert catalogue.kind_of("npc-mara") == "character"  # back to the id pattern


def test_a_name_declared_null_names_the_entity_by_its_id_again() -> None:
    state = replay_lines(
        [
            line(1, entities={"npc-ilse": {"name": "Ilse"}}),
            line(2, key="world.entity-declared", entities={"npc-ilse": {"name": None}}),
            line(3, key="combat.enemy-defeated", actor="npc-ilse"),
        ]
    ).state
    recollections: Any = answer(runtime_read(state, "default", "w", "main", "npc-ilse"))[
        "recollections"
    ]
    assert recollections[0]["content"] == "npc-ilse enemy defeated"
    assert StoredDeclarations(state, "default", "w", MAIN).declared() == {
        "npc-ilse": EntityDeclaration()
    }


MAIN = (Segment("main", MAX_SEQ),)


def branch_after(after_seq: int) -> Ancestry:
    """The ancestry of a branch `alt` of main after `after_seq`, read at its tip."""
    return (Segment("alt", MAX_SEQ), Segment("main", after_seq))


def declare(state: MemoryState, seq: int, entity_id: str, **fields: Any) -> None:
    """Declare on main at `seq`, as an event there would."""
    declarations = StoredDeclarations(state, "default", "w", (Segment("main", seq - 1),))
    declarations.declaration(entity_id, EntityDeclaration(**fields)).write(state, seq)


def test_declarations_persist_for_the_world_and_only_for_it() -> None:
    state = MemoryState()
    declare(state, 1, "npc-mara", name="Mara")
    declare(state, 2, "npc-mara", kind="character", group="staff")
    declare(state, 2, "loc-inn", name="Inn")
    later = StoredDeclarations(state, "default", "w", MAIN)
    assert later.get("npc-mara") == EntityDeclaration(name="Mara", kind="character", group="staff")
    assert later.declared() == {
        "loc-inn": EntityDeclaration(name="Inn"),
        "npc-mara": EntityDeclaration(name="Mara", kind="character", group="staff"),
    }
    assert StoredDeclarations(state, "default", "w2", MAIN).declared() == {}
    assert StoredDeclarations(state, "acme", "w", MAIN).get("npc-mara") is None


def test_a_timeline_sees_the_declarations_as_they_stood_at_each_position() -> None:
    state = MemoryState()
    declare(state, 1, "npc-mara", name="Mara")
    declare(state, 4, "npc-mara", name="Mara Vell", group="staff")
    at = {
        seq: StoredDeclarations(state, "default", "w", (Segment("main", seq),)).get("npc-mara")
        for seq in (0, 1, 3, 4, 9)
    }
    assert at == {
        0: None,
        1: EntityDeclaration(name="Mara"),
        3: EntityDeclaration(name="Mara"),
        4: EntityDeclaration(name="Mara Vell", group="staff"),
        9: EntityDeclaration(name="Mara Vell", group="staff"),
    }


def test_a_branch_sees_its_parents_declarations_up_to_the_branch_point_and_keeps_its_own() -> None:
    state = MemoryState()
    declare(state, 1, "npc-mara", name="Mara")
    declare(state, 5, "npc-mara", name="Mara Vell")  # the abandoned future
    declare(state, 6, "npc-bram", name="Bram")
    on_alt = StoredDeclarations(state, "default", "w", branch_after(2))
    assert on_alt.get("npc-mara") == EntityDeclaration(name="Mara")
    assert on_alt.get("npc-bram") is None
    on_alt.declaration("npc-mara", EntityDeclaration(group="staff")).write(state, 3)
    on_alt.declaration("npc-ilse", EntityDeclaration(name="Ilse")).write(state, 3)

    alt = StoredDeclarations(state, "default", "w", branch_after(2))
    assert alt.declared() == {
        "npc-ilse": EntityDeclaration(name="Ilse"),
        "npc-mara": EntityDeclaration(name="Mara", group="staff"),
    }
    assert StoredDeclarations(state, "default", "w", MAIN).declared() == {
        "npc-bram": EntityDeclaration(name="Bram"),
        "npc-mara": EntityDeclaration(name="Mara Vell"),
    }
    alt_before_its_own = StoredDeclarations(
        state, "default", "w", (Segment("alt", 2), Segment("main", 2))
    )
    assert alt_before_its_own.declared() == {"npc-mara": EntityDeclaration(name="Mara")}


def test_declaring_the_same_thing_again_writes_the_same_state() -> None:
    state = MemoryState()
    declare(state, 1, "npc-mara", name="Mara")
    before = list(state.items())
    declare(state, 1, "npc-mara", name="Mara")  # the same event applied again
    assert list(state.items()) == before


def test_a_branch_names_things_as_declared_before_its_branch_point() -> None:
    state = replay_lines(
        [
            line(1, entities={"npc-ilse": {"name": "Ilse", "kind": "character"}}),
            line(2, key="world.entity-declared", entities={"npc-ilse": {"name": "Ilse the Red"}}),
            line(2, timeline_id="alt", branch={"parent_timeline_id": "main", "after_seq": 1}),
            line(3, timeline_id="alt", key="combat.enemy-defeated", actor="npc-ilse"),
            line(3, key="combat.enemy-defeated", actor="npc-ilse"),
        ]
    ).state
    on = {
        timeline: answer(runtime_read(state, "default", "w", timeline, "npc-ilse"))[
            "recollections"
        ][0]["content"]
        for timeline in ("main", "alt")
    }
    assert on == {"main": "Ilse the Red enemy defeated", "alt": "Ilse enemy defeated"}


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
    assert StoredDeclarations(state, "default", "w", MAIN).declared() == {
        "loc-inn": EntityDeclaration(name="The Inn"),
        "npc-ilse": EntityDeclaration(name="Ilse", kind="character"),
    }


def test_a_player_declared_a_character_stays_a_player_at_events_not_listing_it() -> None:
    """Ilse's game declared her avatar a character in an event listing her as its player: at
    a fight at the tavern that listed no player, she was one of its characters, and remembered
    it (seed 001: a player never forms memories)."""
    ilse = {"player-1": {"name": "Ilse", "kind": "character"}}
    entered = {"key": "loreweaver.movement.location-entered", "location": "loc-t"}
    state = replay_lines(
        [
            line(1, **entered, actor="player-1", players=["player-1"], entities=ilse),
            line(2, **entered, actor="npc-a"),
            line(3, key="combat.fight", actor="npc-a", target="npc-b", location="loc-t"),
        ]
    ).state
    read = answer(runtime_read(state, "default", "w", "main", "npc-a"))
    assert [memory["seq"] for memory in read["recollections"]] == [3]  # the fight was seen
    ilse_read = answer(runtime_read(state, "default", "w", "main", "player-1"))
    assert ilse_read["recollections"] == [] and ilse_read["relations"] == []


def test_a_character_a_player_took_over_declared_again_is_a_character_after() -> None:
    """The seed's events declare their ids at every event: Xan, taken over by a player for a
    duel and declared a character in it, was stored a player, and never formed a memory
    again at events that did not list Xan (README: its own mind again at those)."""
    xan = {"npc-x": {"kind": "character", "name": "Xan"}}
    state = replay_lines(
        [
            line(1, key="world.entity-declared", entities=xan),
            line(
                2, key="combat.duel", actor="npc-x", target="npc-b", players=["npc-x"], entities=xan
            ),
            line(3, key="item.stolen", actor="npc-b", target="npc-x"),
        ]
    ).state
    read = answer(runtime_read(state, "default", "w", "main", "npc-x"))
    assert [memory["seq"] for memory in read["recollections"]] == [3]  # the duel: none
