"""Memory formation, as a game designer would notice it: seed 001's example read, retellings,
news already known, impressions, persistence."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from pydantic import TypeAdapter

from projections.catalogue import Catalogue, merge_declaration
from projections.event_keys import MOVEMENT_KEYS
from projections.memories import belief_id, form_memories
from projections.perception import perceivers
from projections.relations import relation_contributions
from projections.weighing import event_kind
from projections.wording import event_content, retell
from schemas import EntityDeclaration, Event
from schemas.memory import BeliefRead, Memory
from schemas.policy import Policy, merge_policy
from tests.projections.context import Context
from tests.seed import SEED_BELIEF, SEED_RECOLLECTION

POLICY = Policy()


@dataclass
class World:
    """A one-timeline world wired as the stream processor wires it, minus storage."""

    policy: Policy = POLICY
    declarations: dict[str, EntityDeclaration] = field(default_factory=dict)
    whereabouts: dict[str, str] = field(default_factory=dict)
    memories: list[Memory] = field(default_factory=list)
    seq: int = 0

    def happen(self, key: str, **fields: Any) -> list[Memory]:
        """Apply the next event; returns the memories it formed."""
        self.seq += 1
        event = Event.model_validate(
            {"world_instance_id": "save-1", "timeline_id": "main", "seq": self.seq, "key": key}
            | fields
        )
        catalogue = Catalogue(self.declarations, event, self.policy)
        present = {who for who, where in self.whereabouts.items() if where == event.location}
        perceptions = perceivers(event, catalogue.kind_of, present, self.policy)
        formed = form_memories(event, perceptions, Context(catalogue, self.memories), self.policy)
        for entity_id, declared in event.entities.items():
            self.declarations[entity_id] = merge_declaration(
                self.declarations.get(entity_id), declared
            )
        if event.key in MOVEMENT_KEYS and event.actor and event.location:
            self.whereabouts[event.actor] = event.location
        self.memories += formed
        return formed

    def of(self, character: str) -> list[Memory]:
        return [memory for memory in self.memories if memory.character_id == character]

    def relations(self, character: str) -> dict[str, tuple[float, int, int]]:
        """entity -> (mean feeling, memories, last seq), as the read aggregates them."""
        feelings: dict[str, list[float]] = defaultdict(list)
        last: dict[str, int] = {}
        for memory in self.of(character):
            for entity, feeling in relation_contributions(memory):
                feelings[entity].append(feeling)
                last[entity] = max(last.get(entity, 0), memory.seq)
        return {
            entity: (round(sum(values) / len(values), 2), len(values), last[entity])
            for entity, values in feelings.items()
        }


def seed_world() -> World:
    """Seed 001's example: Mara enters the tavern, Ilse speaks to her, then beats a sailor."""
    world = World()
    world.happen("loreweaver.movement.location-entered", actor="npc-mara", location="loc-tavern")
    world.happen(
        "loreweaver.conversation.player-said",
        actor="player-1",
        target="npc-mara",
        players=["player-1"],
        location="loc-tavern",
        game_time="day 1, 19:41",
        payload={"text": "I will find your son. Where was he last seen?"},
    )
    world.happen(
        "combat.enemy-defeated",
        actor="player-1",
        location="loc-tavern",
        players=["player-1"],
        payload={"enemy": "npc-drunk-sailor"},
        facts=[{"subject": "npc-drunk-sailor", "attribute": "status", "value": "defeated"}],
        game_time="day 1, 21:05",
        entities={
            "player-1": {"name": "Ilse"},
            "loc-tavern": {"name": "The Crooked Lantern", "kind": "place"},
        },
    )
    return world


SHOWN = TypeAdapter(BeliefRead)
"""How a read shows a memory: as the `BeliefRead` it extends."""


def public(memory: Memory) -> dict[str, Any]:
    """The read's view of a memory, without its id."""
    read = SHOWN.dump_python(memory, mode="json")
    assert len(read.pop("belief_id")) == 32
    return read


def test_the_seed_example_forms_maras_two_memories_field_for_field() -> None:
    world = seed_world()
    assert [public(memory) for memory in world.of("npc-mara")] == [SEED_BELIEF, SEED_RECOLLECTION]


def test_the_seed_example_reads_in_the_seeds_key_order() -> None:
    belief = SHOWN.dump_python(seed_world().of("npc-mara")[0], mode="json")
    assert list(belief) == ["belief_id", *SEED_BELIEF]


def test_the_seed_example_gives_maras_relations() -> None:
    assert seed_world().relations("npc-mara") == {
        "player-1": (-0.05, 2, 3),
        "loc-tavern": (-0.3, 1, 3),
        "npc-drunk-sailor": (-0.3, 1, 3),
    }


def test_players_never_remember() -> None:
    world = seed_world()
    assert world.of("player-1") == []
    assert {memory.character_id for memory in world.memories} == {"npc-mara"}


def test_an_event_for_several_players_is_remembered_once() -> None:
    world = World()
    formed = world.happen(
        "trade.gift-given",
        actor="player-1",
        target="npc-mara",
        players=["player-1", "player-2"],
        witnesses=["npc-bram", "player-2"],
    )
    assert [(memory.character_id, memory.kind) for memory in formed] == [
        ("npc-mara", "event"),
        ("npc-mara", "impression"),
        ("npc-bram", "event"),
    ]


def test_movement_forms_no_memory() -> None:
    world = World()
    assert (
        world.happen(
            "loreweaver.movement.location-entered", actor="npc-mara", location="loc-tavern"
        )
        == []
    )


def saw_a_theft(world: World) -> Memory:
    """Bram sees Oskar rob Mara; returns Bram's memory of it."""
    formed = world.happen(
        "crime.purse-stolen", actor="npc-oskar", target="npc-mara", witnesses=["npc-bram"]
    )
    return next(memory for memory in formed if memory.character_id == "npc-bram")


def test_a_retelling_adds_a_hop_and_loses_confidence() -> None:
    world = World()
    seen = saw_a_theft(world)
    [heard] = world.happen(
        "loreweaver.conversation.told",
        actor="npc-bram",
        target="npc-ada",
        payload={"content": "Oskar robbed Mara.", "belief_id": seen.belief_id},
    )
    assert (heard.kind, heard.source, heard.source_entity) == ("knowledge", "told", "npc-bram")
    assert (heard.hops, heard.confidence, heard.uncertain) == (1, 0.72, True)
    assert heard.origin == seen.origin
    assert heard.about == ["npc-bram", "npc-ada", "npc-oskar", "npc-mara"]

    [rumour] = world.happen(
        "loreweaver.conversation.told",
        actor="npc-ada",
        target="npc-zed",
        payload={"belief_id": heard.belief_id},
    )
    assert (rumour.source, rumour.source_entity, rumour.hops, rumour.confidence) == (
        "rumour",
        "npc-ada",
        2,
        0.58,
    )
    assert rumour.content == "Oskar robbed Mara."
    assert [(step.entity_id, step.hops, step.confidence) for step in rumour.lineage] == [
        ("npc-bram", 1, 0.72),
        ("npc-ada", 2, 0.58),
    ]


def test_news_from_an_unknown_belief_is_told_first_hand() -> None:
    world = World()
    [heard] = world.happen(
        "loreweaver.conversation.told",
        actor="npc-bram",
        target="npc-ada",
        payload={
            "content": "The well is dry.",
            "about": ["loc-well"],
            "facts": [{"subject": "loc-well", "attribute": "water", "value": False}],
        },
    )
    assert (heard.source, heard.hops, heard.confidence) == ("told", 1, 0.8)
    assert heard.about == ["npc-bram", "npc-ada", "loc-well"]
    assert [(fact.subject, fact.value) for fact in heard.facts] == [("loc-well", False)]


def test_nobody_takes_in_news_of_what_they_saw_or_already_know() -> None:
    world = World()
    seen = saw_a_theft(world)
    assert (
        world.happen(
            "loreweaver.conversation.told",
            actor="npc-bram",
            target="npc-mara",
            payload={"content": "Oskar robbed you.", "belief_id": seen.belief_id},
        )
        == []
    )
    told_once = {"content": "Oskar robbed Mara.", "belief_id": seen.belief_id}
    assert (
        len(
            world.happen(
                "loreweaver.conversation.told",
                actor="npc-bram",
                target="npc-ada",
                payload=told_once,
            )
        )
        == 1
    )
    assert (
        world.happen(
            "loreweaver.conversation.told", actor="npc-bram", target="npc-ada", payload=told_once
        )
        == []
    )


def test_the_target_of_a_theft_feels_badly_about_the_thief() -> None:
    world = World()
    saw_a_theft(world)
    impressions = [memory for memory in world.of("npc-mara") if memory.kind == "impression"]
    assert [(memory.content, memory.about, memory.feeling) for memory in impressions] == [
        ("I feel badly about npc-oskar", ["npc-oskar"], -0.8)
    ]
    assert world.relations("npc-mara")["npc-oskar"] == (-0.8, 2, 1)


def test_a_gift_warms_its_target_and_nobody_else() -> None:
    world = World()
    world.happen(
        "trade.item-given",
        actor="npc-bram",
        target="npc-mara",
        witnesses=["npc-ada"],
        entities={"npc-bram": {"name": "Bram"}},
    )
    impressions = [memory for memory in world.memories if memory.kind == "impression"]
    assert [(memory.character_id, memory.content) for memory in impressions] == [
        ("npc-mara", "I feel warmly about Bram")
    ]


def test_persistent_characters_and_kinds_are_marked() -> None:
    policy = merge_policy(
        POLICY, {"memory": {"persistent": {"characters": ["npc-bram"], "kinds": ["impression"]}}}
    )
    world = World(policy=policy)
    saw_a_theft(world)
    assert {(memory.character_id, memory.kind, memory.persistent) for memory in world.memories} == {
        ("npc-bram", "event", True),
        ("npc-mara", "event", False),
        ("npc-mara", "impression", True),
        ("npc-oskar", "event", False),
    }


def test_belief_ids_are_stable_and_distinct() -> None:
    first = belief_id("acme", "save-1", "main", 3, "npc-mara", "event")
    assert first == belief_id("acme", "save-1", "main", 3, "npc-mara", "event")
    assert len(first) == 32 and int(first, 16) >= 0
    assert first != belief_id("acme", "save-1", "main", 3, "npc-mara", "impression")
    assert first != belief_id("acme", "save-1", "branch", 3, "npc-mara", "event")


def test_declared_names_replace_ids_in_the_wording() -> None:
    happening = Event.model_validate(
        {
            "world_instance_id": "w",
            "timeline_id": "main",
            "seq": 1,
            "key": "crime.purse-stolen",
            "actor": "npc-oskar",
            "target": "npc-mara",
            "payload": {"loot": ["item-purse", "gold"], "amount": 5},
        }
    )
    names = {"npc-oskar": "Oskar", "npc-mara": "Mara", "item-purse": "a purse"}
    assert event_content(happening, lambda entity: names.get(entity, entity)) == (
        "Oskar purse stolen Mara (loot: a purse and gold, amount: 5)"
    )


def test_a_rules_retelling_keeps_the_statement_and_drops_the_detail() -> None:
    assert retell('Ilse said "give me the key" at the inn') == "Ilse said something at the inn"
    assert retell("Ilse enemy defeated at The Crooked Lantern (enemy: npc-drunk-sailor)") == (
        "Ilse enemy defeated at The Crooked Lantern"
    )


def test_event_kinds_are_read_off_the_key() -> None:
    assert [
        event_kind(key)
        for key in (
            "combat.enemy-defeated",
            "crime.purse-stolen",
            "npc.robbed",
            "trade.gift-given",
            "loreweaver.conversation.told",
            "loreweaver.movement.location-entered",
            "weather.rain",
        )
    ] == ["fight", "theft", "theft", "gift", "conversation", "movement", "generic"]
