"""Perception: who takes an event in, as seed 001 ("Perception and witnesses") rules."""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

import orjson

from projections.catalogue import Catalogue, classify, display_name
from projections.delivery import SourceMessage
from projections.event_keys import LOCATION_ENTERED as ENTERED
from projections.perception import Perception, perceivers
from projections.projector import Projector
from projections.runtime_read import runtime_read
from projections.state import MemoryState
from schemas import EntityDeclaration, Event
from schemas.policy import Policy, merge_policy

POLICY = Policy()
NO_FALLBACK = merge_policy(POLICY, {"memory": {"perception_location_fallback": False}})


def event(**fields: Any) -> Event:
    base: dict[str, Any] = {
        "world_instance_id": "save-1",
        "timeline_id": "main",
        "seq": 5,
        "key": "combat.enemy-defeated",
        "location": "loc-tavern",
    }
    return Event.model_validate(base | fields)


def who(
    happening: Event,
    occupants: Collection[str] = (),
    policy: Policy = POLICY,
    known: dict[str, EntityDeclaration] | None = None,
) -> list[tuple[str, str]]:
    """(character, part) of everyone who perceives `happening`."""
    catalogue = Catalogue(known or {}, happening, policy)
    return [
        (seen.character_id, seen.part)
        for seen in perceivers(happening, catalogue.kind_of, occupants, policy)
    ]


TAVERN = {"npc-mara", "npc-bram", "npc-oskar"}


def test_actor_and_target_perceive() -> None:
    assert who(event(actor="npc-bram", target="npc-mara", location=None)) == [
        ("npc-bram", "actor"),
        ("npc-mara", "target"),
    ]


def test_with_no_witnesses_everyone_present_perceives_in_id_order() -> None:
    assert who(event(actor="player-1", players=["player-1"]), TAVERN) == [
        ("npc-bram", "witness"),
        ("npc-mara", "witness"),
        ("npc-oskar", "witness"),
    ]


def test_named_witnesses_perceive_and_nobody_else() -> None:
    happening = event(actor="npc-bram", target="npc-oskar", witnesses=["npc-zed", "npc-ada"])
    assert who(happening, TAVERN) == [
        ("npc-bram", "actor"),
        ("npc-oskar", "target"),
        ("npc-ada", "witness"),
        ("npc-zed", "witness"),
    ]


def test_an_empty_witness_list_says_nobody_else_saw() -> None:
    assert who(event(actor="npc-bram", witnesses=[]), TAVERN) == [("npc-bram", "actor")]


def test_without_location_fallback_bystanders_see_nothing() -> None:
    happening = event(actor="npc-bram", target="npc-oskar")
    assert who(happening, TAVERN, NO_FALLBACK) == [("npc-bram", "actor"), ("npc-oskar", "target")]
    assert who(event(actor="player-1", players=["player-1"]), TAVERN, NO_FALLBACK) == []


def test_players_never_perceive() -> None:
    happening = event(
        actor="player-1",
        target="npc-played-by-a-player",
        players=["player-1", "npc-played-by-a-player"],
        witnesses=["player-2", "npc-mara"],
    )
    assert who(happening) == [("npc-mara", "witness")]


def test_an_event_for_several_players_is_perceived_once_per_character() -> None:
    happening = event(actor="player-1", target="npc-mara", players=["player-1", "player-2"])
    assert who(happening, {"npc-mara", "npc-bram", "player-2"}) == [
        ("npc-mara", "target"),
        ("npc-bram", "witness"),
    ]


def test_only_characters_perceive() -> None:
    happening = event(actor="npc-bram", target="item-key", witnesses=["loc-well", "stranger"])
    assert who(happening) == [("npc-bram", "actor")]


def test_a_declaration_outranks_the_id_pattern() -> None:
    declared = {
        "guard-1": EntityDeclaration(kind="character"),
        "npc-statue": EntityDeclaration(kind="item"),
    }
    assert who(event(actor="guard-1", target="npc-statue"), known=declared) == [
        ("guard-1", "actor")
    ]
    in_event = event(actor="guard-2", entities={"guard-2": {"name": "Hal", "kind": "character"}})
    assert who(in_event) == [("guard-2", "actor")]


def test_a_conversation_is_heard_by_the_listener_and_named_witnesses_only() -> None:
    told = event(
        key="loreweaver.conversation.told",
        actor="npc-bram",
        target="npc-mara",
        payload={"content": "The sailor is back."},
    )
    assert who(told, TAVERN) == [("npc-mara", "target")]
    overheard = told.model_copy(update={"witnesses": ["npc-oskar", "npc-bram"]})
    assert who(overheard, TAVERN) == [("npc-mara", "target"), ("npc-oskar", "witness")]


def test_a_players_line_is_heard_by_its_listener() -> None:
    said = event(
        key="loreweaver.conversation.player-said",
        actor="player-1",
        target="npc-mara",
        players=["player-1"],
        payload={"text": "Hello."},
    )
    assert who(said, TAVERN) == [("npc-mara", "target")]


def test_a_characters_reply_to_a_player_is_heard_by_named_characters_only() -> None:
    """Bystanders took in every reply, a private one too, and the speaker filled her own
    recollections with her lines, pushing out what she saw."""
    replied = event(
        key="loreweaver.conversation.npc-replied",
        actor="npc-mara",
        target="player-1",
        players=["player-1"],
        payload={"text": "The key is under the mat.", "private": True},
    )
    assert who(replied, TAVERN) == []
    overheard = replied.model_copy(update={"witnesses": ["npc-oskar", "npc-mara"]})
    assert who(overheard, TAVERN) == [("npc-oskar", "witness")]


def test_movement_and_declarations_form_no_memory_by_default() -> None:
    entered = event(key="loreweaver.movement.location-entered", actor="npc-mara")
    assert who(entered, TAVERN) == []
    assert who(event(key="world.entity-declared", actor="npc-mara"), TAVERN) == []
    remembering = merge_policy(POLICY, {"memory": {"remember_movement": True}})
    assert who(entered, {"npc-bram"}, remembering) == [
        ("npc-mara", "actor"),
        ("npc-bram", "witness"),
    ]


def test_with_the_npc_part_off_nobody_remembers() -> None:
    npc_off = merge_policy(POLICY, {"memory": {"npc": False}})
    assert who(event(actor="npc-bram", target="npc-mara"), TAVERN, npc_off) == []


def test_perceptions_name_character_and_part() -> None:
    catalogue = Catalogue({}, event(actor="npc-bram"), POLICY)
    assert perceivers(event(actor="npc-bram"), catalogue.kind_of, (), POLICY) == [
        Perception("npc-bram", "actor")
    ]


def test_classification_and_names() -> None:
    declared = {
        "npc-mara": EntityDeclaration(name="Mara"),
        "tower": EntityDeclaration(kind="place"),
    }
    players = ["npc-mara-player"]
    assert classify("npc-mara", players, declared, POLICY) == "character"
    assert classify("npc-mara-player", players, declared, POLICY) == "player"
    assert classify("tower", players, declared, POLICY) == "place"
    assert classify("item-key", players, declared, POLICY) == "item"
    assert classify("stranger", players, declared, POLICY) == "unknown"
    assert display_name("npc-mara", declared) == "Mara"
    assert display_name("npc-drunk-sailor", declared) == "npc-drunk-sailor"


def test_a_movement_that_moves_nobody_says_so_in_its_ack() -> None:
    """Where characters are teaches whom they meet and who sees what: a movement without an
    actor or a location (sent in the payload) was acked `processed`, saying nothing."""
    projector, state = Projector(), MemoryState()
    sent = [
        {"actor": "npc-a", "location": "loc-inn"},
        {"actor": "npc-a", "payload": {"location": "loc-dock"}},
        {"target": "npc-a", "location": "loc-dock"},
    ]
    reasons = []
    for seq, fields in enumerate(sent, start=1):
        moved = {"world_instance_id": "w", "timeline_id": "main", "seq": seq, "key": ENTERED}
        message = SourceMessage("events", 0, seq, b"w", orjson.dumps(moved | fields))
        [ack] = projector.receive(state, message).acks
        reasons.append((ack.outcome.value, ack.reason))
    unmoved = "movement not recorded: it needs actor (who moves) and location (where to)"
    assert reasons == [("processed", None), ("processed", unmoved), ("processed", unmoved)]
    assert runtime_read(state, "default", "w", "main", "npc-a").location == "loc-inn"
