"""Memory formation, as a game designer would notice it: seed 001's example read, retellings,
news already known, impressions, persistence."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

import orjson
import pytest
from pydantic import TypeAdapter

from projections.catalogue import Catalogue, merge_declaration
from projections.delivery import SourceMessage
from projections.event_keys import MOVEMENT_KEYS, TOLD
from projections.memories import belief_id, claim_origin, form_memories, origin_of
from projections.memory_store import load_memory, memory_keys
from projections.perception import perceivers
from projections.projector import Projector
from projections.relations import relation_contributions
from projections.runtime_read import NotFound, runtime_read, timeline_view
from projections.state import MemoryState
from projections.weighing import event_kind, news_kind, told_of
from projections.wording import event_content, retell
from projections.world import fact_value
from schemas import Ack, EntityDeclaration, Event, Fact
from schemas.memory import BeliefRead, Memory
from schemas.policy import Policy, merge_policy
from streams.replay import replay_lines
from tests import tavern_lies
from tests.projections.context import Context, WorldRecord
from tests.seed import SEED_BELIEF, SEED_RECOLLECTION
from tests.tavern import TAVERN_LINES

POLICY = Policy()


@dataclass
class World:
    """A one-timeline world wired as the stream processor wires it, minus storage."""

    policy: Policy = POLICY
    declarations: dict[str, EntityDeclaration] = field(default_factory=dict)
    whereabouts: dict[str, str] = field(default_factory=dict)
    memories: list[Memory] = field(default_factory=list)
    record: WorldRecord = field(default_factory=dict)
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
        context = Context(catalogue, self.memories, self.record)
        formed = form_memories(event, perceptions, context, self.policy)
        for fact in event.facts:
            place = (fact.subject, fact.attribute)
            made = context.fact_origin(fact)  # a value said again unchanged makes nothing
            self.record[place] = (fact.value, origin_of(event) if made is None else made)
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


def test_news_told_without_naming_a_memory_is_retold_from_the_tellers_memory_of_it() -> None:
    """Ada had "Oskar is a thief" from Bram, who stood behind nothing; telling Zed the same
    words of Oskar, naming no memory, she passes on hers: Zed holds it two hops away, through
    Bram and Ada, as sure as a retelling of her 0.8 (he held it one hop away, from Ada alone,
    at 0.8, as if she had made it up)."""
    world = World()
    claim = {"content": "Oskar is a thief.", "about": ["npc-oskar"]}
    [heard] = world.happen(TOLD, actor="npc-bram", target="npc-ada", payload=claim)
    assert (heard.source, heard.hops, heard.confidence) == ("told", 1, 0.8)
    [rumour] = world.happen(TOLD, actor="npc-ada", target="npc-zed", payload=claim)
    assert (rumour.source, rumour.source_entity, rumour.hops, rumour.confidence) == (
        "rumour",
        "npc-ada",
        2,
        0.64,
    )
    assert rumour.origin == heard.origin
    assert [(step.entity_id, step.hops, step.confidence) for step in rumour.lineage] == [
        ("npc-bram", 1, 0.8),
        ("npc-ada", 2, 0.64),
    ]


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


@pytest.mark.parametrize("naming", [False, True])
def test_nobody_takes_their_own_story_back_from_whom_they_told_it(naming: bool) -> None:
    """Mara told Tomas of the fight (seq 5); Tomas telling her the same words back, naming his
    memory of it or not, gave her a rumour of her own story (hops 2) and moved her relation to
    the sailor (at a meeting, news never goes back through whom it came)."""
    told = {
        "content": "Ilse beat the drunk sailor senseless",
        "about": ["player-1", "npc-drunk-sailor"],
    }
    if naming:
        told["belief_id"] = belief_id("default", "save-1", "main", 5, "npc-tomas", "knowledge")
    back = tavern_lies.line(
        6, TOLD, actor="npc-tomas", target="npc-mara", payload=told, game_time="day 1, 21:50"
    )
    state = replay_lines([*TAVERN_LINES[:5], back]).state
    mara = runtime_read(state, "default", "save-1", "main", "npc-mara")
    assert [belief.seq for belief in [*mara.beliefs, *mara.recollections]] == [2, 3]


def test_news_told_before_and_after_the_record_holds_it_is_one_piece_of_news() -> None:
    """Bo tells Ada the sailor is dead before the record says so, Cai then kills him, and Bo
    tells Ada again: news of a claim became news of Cai's deed once the record held it, and
    Ada took it in twice; Ada passing it to Cai, who did it, gave him a rumour of his deed."""
    dead = [{"subject": "npc-sailor", "attribute": "status", "value": "dead"}]

    def in_w(seq: int, key: str, **fields: Any) -> bytes:
        event = {"world_instance_id": "w", "timeline_id": "main", "seq": seq, "key": key}
        return orjson.dumps(event | {"game_time": "day 1, 10:00"} | fields)

    def told(seq: int, teller: str, listener: str) -> bytes:
        said = {"content": "the sailor is dead", "facts": dead}
        return in_w(seq, TOLD, actor=teller, target=listener, payload=said)

    lines = [
        told(1, "npc-bo", "npc-ada"),
        in_w(2, "combat.enemy-defeated", actor="npc-cai", witnesses=[], facts=dead),
        told(3, "npc-bo", "npc-ada"),
        told(4, "npc-ada", "npc-cai"),
    ]
    state = replay_lines(lines).state
    ada, cai = (runtime_read(state, "default", "w", "main", npc) for npc in ("npc-ada", "npc-cai"))
    assert [(belief.seq, belief.source) for belief in ada.beliefs] == [(1, "told")]
    assert [one.seq for one in [*cai.beliefs, *cai.recollections]] == [2]


def test_the_target_of_a_theft_feels_badly_about_the_thief() -> None:
    world = World()
    saw_a_theft(world)
    impressions = [memory for memory in world.of("npc-mara") if memory.kind == "impression"]
    assert [(memory.content, memory.about, memory.feeling) for memory in impressions] == [
        ("I feel badly about npc-oskar", ["npc-oskar"], -0.8)
    ]
    assert world.relations("npc-mara")["npc-oskar"] == (-0.8, 2, 1)


def test_naming_an_impression_in_a_told_passes_on_what_happened_not_the_tellers_feeling() -> None:
    world = World()
    saw_a_theft(world)
    [seen, impression] = world.of("npc-mara")
    [heard] = world.happen(
        TOLD, actor="npc-mara", target="npc-ada", payload={"belief_id": impression.belief_id}
    )
    assert (heard.content, heard.origin) == (retell(seen.content), seen.origin)
    assert (heard.source, heard.hops, heard.confidence) == ("told", 1, 0.72)
    assert heard.event_kind == "theft"


def test_naming_an_impression_whose_news_the_teller_no_longer_holds_names_no_known_belief() -> None:
    world = World()
    saw_a_theft(world)
    [seen, impression] = world.of("npc-mara")
    world.memories.remove(seen)  # forgotten; the feeling stays
    [heard] = world.happen(
        TOLD,
        actor="npc-mara",
        target="npc-ada",
        payload={"content": "Oskar robbed me.", "belief_id": impression.belief_id},
    )
    assert (heard.content, heard.source, heard.hops, heard.confidence) == (
        "Oskar robbed me.",
        "told",
        1,
        0.8,
    )
    assert heard.origin not in (seen.origin, impression.origin)


def test_a_theft_whose_key_also_says_the_thief_left_weighs_as_a_theft() -> None:
    world = World()
    world.happen("crime.robbed-and-left", actor="npc-oskar", target="npc-mara")
    victim = world.of("npc-mara")
    assert [(m.kind, m.event_kind, m.importance, m.feeling) for m in victim] == [
        ("event", "theft", 0.9, -0.8),
        ("impression", "theft", 0.9, -0.8),
    ]
    assert victim[1].content == "I feel badly about npc-oskar"


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


# Retold news is weighed by what it tells of, as heard


def tomas_is_told_of_the_fight(world: World) -> Memory:
    """The tavern example: Tomas comes in after the fight, and Mara tells him of it."""
    world.happen(
        "loreweaver.movement.character-entered-location", actor="npc-tomas", location="loc-tavern"
    )
    [told] = world.happen(
        "loreweaver.conversation.told",
        actor="npc-mara",
        target="npc-tomas",
        payload={
            "content": "Ilse beat the drunk sailor senseless",
            "about": ["player-1", "npc-drunk-sailor"],
        },
    )
    return told


def test_news_of_a_fight_weighs_as_a_fight_heard_of_not_as_a_chat() -> None:
    """Told that Ilse beat the sailor senseless, Tomas does not feel +0.2 (a friendly
    conversation) about Ilse, the sailor and Mara: he heard of a fight."""
    world = seed_world()
    told = tomas_is_told_of_the_fight(world)
    assert (told.event_kind, told.importance, told.feeling, told.arousal, told.confidence) == (
        "fight",
        0.5,
        -0.2,
        0.4,
        0.8,
    )
    assert world.relations("npc-tomas") == {
        "npc-mara": (-0.2, 1, 5),
        "player-1": (-0.2, 1, 5),
        "npc-drunk-sailor": (-0.2, 1, 5),
    }


def test_news_from_a_known_memory_weighs_as_the_original_event_heard_of() -> None:
    world = World()
    seen = saw_a_theft(world)  # Bram, a witness: (0.5, -0.4, 0.5)
    [heard] = world.happen(
        "loreweaver.conversation.told",
        actor="npc-bram",
        target="npc-ada",
        payload={"content": "Something happened to Mara.", "belief_id": seen.belief_id},
    )
    assert (heard.event_kind, heard.importance, heard.feeling, heard.arousal) == (
        "theft",
        0.4,
        -0.3,
        0.3,
    )
    assert heard.confidence == 0.72


def test_the_hearers_weights_come_from_the_policy_table() -> None:
    policy = merge_policy(
        POLICY,
        {
            "memory": {
                "weights": {"fight": {"heard": {"importance": 0.9, "feeling": -0.9, "arousal": 1}}}
            }
        },
    )
    told = tomas_is_told_of_the_fight(seed_world_under(policy))
    assert (told.importance, told.feeling, told.arousal) == (0.9, -0.9, 1.0)


def seed_world_under(policy: Policy) -> World:
    world = seed_world()
    return World(policy=policy, declarations=world.declarations, whereabouts=world.whereabouts)


def test_news_of_someone_elses_act_forms_no_impression_of_the_teller() -> None:
    touchy = merge_policy(POLICY, {"memory": {"impression_threshold": 0.1}})
    world = seed_world_under(touchy)
    tomas_is_told_of_the_fight(world)
    assert [memory.kind for memory in world.of("npc-tomas")] == ["knowledge"]
    said = world.happen(
        "loreweaver.conversation.player-said",
        actor="player-1",
        target="npc-tomas",
        players=["player-1"],
        payload={"text": "Good evening."},
    )
    assert [memory.kind for memory in said] == ["knowledge", "impression"]  # spoken to him


@pytest.mark.parametrize(
    ("words", "facts", "kind"),
    [
        ("Ilse beat the drunk sailor senseless", [], "fight"),
        ("Oskar robbed Mara and left town", [], "theft"),  # a theft, though he also left
        ("Mara said Oskar left for the harbour", [], "movement"),
        ("Mara told me a secret", [], "conversation"),
        ("The well is dry", [], "generic"),
        (
            "The sailor",
            [{"subject": "npc-sailor", "attribute": "status", "value": "defeated"}],
            "fight",
        ),
        ("The mill", [{"subject": "loc-mill", "attribute": "burgled", "value": True}], "theft"),
        ("stolen_goods:everywhere!", [], "theft"),  # words run between any non-letters
    ],
)
def test_the_kind_news_tells_of_is_read_off_its_words_and_claimed_facts(
    words: str, facts: list[dict[str, Any]], kind: str
) -> None:
    claimed = [Fact.model_validate(fact) for fact in facts]
    assert news_kind(words, claimed) == kind


def test_a_memory_stored_before_kinds_were_kept_tells_of_what_its_words_say() -> None:
    seen = saw_a_theft(World())
    stored = seen.model_dump(mode="json")
    del stored["event_kind"]
    older = Memory.model_validate(stored)
    assert (told_of(older), told_of(seen)) == ("theft", "theft")
    renamed = older.model_copy(update={"content": "Oskar did something to Mara"})
    assert told_of(renamed) == "generic"


# The same news, told with no memory named


THE_SAILOR_IS_DOWN = [{"subject": "npc-drunk-sailor", "attribute": "status", "value": "defeated"}]


def test_news_told_twice_in_other_words_is_taken_in_once() -> None:
    world = World()
    claim = {"about": ["npc-drunk-sailor"], "facts": THE_SAILOR_IS_DOWN}
    first = world.happen(
        "loreweaver.conversation.told",
        actor="npc-bram",
        target="npc-ada",
        payload={"content": "The sailor went down.", **claim},
    )
    again = world.happen(
        "loreweaver.conversation.told",
        actor="npc-oskar",
        target="npc-ada",
        payload={"content": "They say the sailor lost.", **claim},
    )
    assert (len(first), again) == (1, [])


def test_a_claimed_number_is_the_same_news_written_whole_or_as_a_float() -> None:
    """The world record takes 100 and 100.0 for the same value; the news took them for two."""
    world = World()
    told = [
        world.happen(
            "loreweaver.conversation.told",
            actor=teller,
            target="npc-ada",
            payload={
                "content": f"{teller} says the mayor owes gold.",
                "facts": [{"subject": "npc-mayor", "attribute": "debt", "value": debt}],
            },
        )
        for teller, debt in (("npc-bram", 100), ("npc-oskar", 100.0), ("npc-ilse", [1e2]))
    ]
    assert [len(memories) for memories in told] == [1, 0, 1]  # a list of it is other news


def test_news_without_facts_is_the_same_news_in_the_same_words() -> None:
    world = World()

    def tell(content: str) -> list[Memory]:
        return world.happen(
            "loreweaver.conversation.told",
            actor="npc-bram",
            target="npc-ada",
            payload={"content": content, "about": ["npc-oskar"]},
        )

    assert len(tell("Oskar is a thief.")) == 1
    assert tell("  oskar IS a thief. ") == []
    assert len(tell("Oskar sings well.")) == 1  # the same person, other news


def test_nobody_is_told_as_news_what_they_saw() -> None:
    """Mara saw Ilse defeat the sailor; told it (no memory named) with the fact it made, she
    takes nothing in. Tomas, who did not see it, takes it in as news of that very event."""
    world = seed_world()
    world.happen("loreweaver.movement.location-entered", actor="npc-tomas", location="loc-yard")
    claim = {"content": "Ilse won the brawl.", "facts": THE_SAILOR_IS_DOWN}
    told_mara = world.happen(
        "loreweaver.conversation.told", actor="npc-tomas", target="npc-mara", payload=claim
    )
    [tomas] = world.happen(
        "loreweaver.conversation.told", actor="npc-mara", target="npc-tomas", payload=claim
    )
    fight = next(memory for memory in world.of("npc-mara") if memory.kind == "event")
    assert told_mara == []
    assert tomas.origin == fight.origin
    assert tomas.event_kind == "fight"


def test_a_claim_the_world_record_does_not_hold_is_news_of_its_own() -> None:
    world = seed_world()
    lie = [{"subject": "npc-drunk-sailor", "attribute": "status", "value": "victorious"}]
    [heard] = world.happen(
        "loreweaver.conversation.told",
        actor="npc-tomas",
        target="npc-mara",
        payload={"content": "The sailor won.", "facts": lie},
    )
    fight = next(memory for memory in world.of("npc-mara") if memory.kind == "event")
    assert heard.origin != fight.origin


def test_a_claims_origin_is_its_facts_and_whom_it_is_about() -> None:
    def told(seq: int, **payload: Any) -> Event:
        return Event.model_validate(
            {"world_instance_id": "w", "timeline_id": "main", "seq": seq, "key": TOLD}
            | {"payload": payload}
        )

    down = Fact.model_validate(THE_SAILOR_IS_DOWN[0])
    drunk = Fact(subject="npc-drunk-sailor", attribute="drunk", value=True)
    one = claim_origin(told(1, content="a"), [down, drunk], ["npc-drunk-sailor", "player-1"])
    assert one == claim_origin(
        told(7, content="b"), [drunk, down], ["player-1", "npc-drunk-sailor"]
    )
    assert one != claim_origin(told(1, content="a"), [down], ["npc-drunk-sailor", "player-1"])
    assert one != claim_origin(told(1, content="a"), [down, drunk], ["npc-drunk-sailor"])
    assert claim_origin(told(1, content="a"), [], []) != claim_origin(told(1, content="b"), [], [])


def test_formed_memories_are_what_validating_their_fields_makes() -> None:
    """Formation builds memories without validating them again (`schemas.trusted`): every
    memory of the tavern example, impressions and retellings among them, must be the very one
    validation makes of its fields, and dump to the same bytes."""
    formed: list[Memory] = []
    projector = Projector(on_formed=lambda memories, rumours: formed.extend(memories))
    state = MemoryState()
    for offset, line in enumerate(TAVERN_LINES):
        world = str(orjson.loads(line)["world_instance_id"]).encode()
        projector.receive(state, SourceMessage("events", 0, offset, world, line))
    assert {memory.kind for memory in formed} == {"event", "knowledge", "impression"}
    for memory in formed:
        validated = Memory.model_validate(dict(memory))
        assert validated == memory
        assert validated.model_dump_json() == memory.model_dump_json()


def delivered(events: list[dict[str, Any]]) -> tuple[MemoryState, list[Ack]]:
    """The events through the projector, in order: its state, and every ack."""
    projector, state, acks = Projector(), MemoryState(), []
    for offset, fields in enumerate(events):
        raw = orjson.dumps({"world_instance_id": "save-1", "timeline_id": "main"} | fields)
        acks += projector.receive(state, SourceMessage("events", 0, offset, b"save-1", raw)).acks
    return state, acks


def test_a_told_naming_a_memory_its_teller_does_not_hold_and_saying_nothing_passes_nothing() -> (
    None
):
    """The game kept the id of Mara's memory of the fight on `main`, and the player loaded the
    save from before it: on `reload` she holds no such memory, and Tomas held "Mara told
    Tomas (belief_id: ...)", the id taken for the news."""
    fight = belief_id("default", "save-1", "main", 2, "npc-mara", "event")
    told = {"key": TOLD, "actor": "npc-mara", "target": "npc-tomas", "witnesses": []}
    state, acks = delivered(
        [
            {"seq": 1, "key": "misc.start", "actor": "npc-mara", "witnesses": []},
            {
                "seq": 2,
                "key": "combat.enemy-defeated",
                "actor": "player-1",
                "players": ["player-1"],
                "witnesses": ["npc-mara"],
            },
            told | {"seq": 3, "payload": {"belief_id": fight}},
            told
            | {
                "timeline_id": "reload",
                "seq": 2,
                "payload": {"belief_id": fight},
                "branch": {"parent_timeline_id": "main", "after_seq": 1},
            },
        ]
    )
    on_main = runtime_read(state, "default", "save-1", "main", "npc-tomas").beliefs
    assert [(belief.content, belief.source) for belief in on_main] == [
        ("player-1 enemy defeated", "told")
    ]
    with pytest.raises(NotFound):
        runtime_read(state, "default", "save-1", "reload", "npc-tomas")
    assert (acks[-1].outcome, acks[-1].reason) == (
        "processed",
        f"told names memory {fight!r}, which 'npc-mara' does not hold, and says no words: "
        "nothing passed on",
    )


def test_a_note_quotes_the_start_of_a_long_id_an_event_named() -> None:
    """A reviewer's find: notes quoted what an event named (a `told`'s belief id) whole, and
    went on the ack up to the event's size, past the 1,000 characters every other reason
    keeps to (and every ack's reason now keeps to: `sequencing.ack`)."""
    told = {"key": TOLD, "actor": "npc-mara", "target": "npc-tomas", "witnesses": []}
    _, acks = delivered(
        [
            {"seq": 1, "key": "misc.start", "actor": "npc-mara", "witnesses": []},
            told | {"seq": 2, "payload": {"belief_id": "b" * 20_000}},
        ]
    )
    shown = "b" * 99 + "\u2026"
    assert acks[-1].reason == (
        f"told names memory {shown!r}, which 'npc-mara' does not hold, and says no words:"
        " nothing passed on"
    )


def test_who_saw_an_event_setting_one_fact_twice_holds_what_the_record_holds() -> None:
    """A hand-over listing the old owner, then the new: the record holds the new one, and
    each eyewitness's memory held both, so it read `diverging` at once."""
    owner = {"subject": "item-ring", "attribute": "owner"}
    state, _ = delivered(
        [
            {
                "seq": 1,
                "key": "item.handed-over",
                "actor": "npc-ada",
                "target": "npc-cal",
                "witnesses": ["npc-ada", "npc-cal"],
                "facts": [owner | {"value": "npc-ada"}, owner | {"value": "npc-cal"}],
            }
        ]
    )
    [seen] = runtime_read(state, "default", "save-1", "main", "npc-cal").recollections
    assert seen.diverging is False


CAST = {
    character: {"name": character.removeprefix("npc-").title(), "kind": "character"}
    for character in ("npc-ann", "npc-bo", "npc-cy")
}


def test_an_impression_forms_when_the_feeling_reaches_the_threshold_exactly() -> None:
    """README: an impression of the actor forms when the feeling's size reaches
    `memory.impression_threshold` (a help is felt at 0.7)."""
    policy = merge_policy(Policy(), {"memory": {"impression_threshold": 0.7}})
    line = orjson.dumps(
        {"world_instance_id": "w", "timeline_id": "main", "seq": 1, "key": "quest.npc-helped"}
        | {"actor": "npc-ann", "target": "npc-bo", "entities": CAST}
    )
    state = replay_lines([line], Projector(policies=lambda tenant, world: policy)).state
    read = runtime_read(state, "default", "w", "main", "npc-bo")
    assert [belief.content for belief in read.beliefs if belief.kind == "impression"] == [
        "I feel warmly about Ann"
    ]


SAILOR_BEATEN = [{"subject": "npc-sailor", "attribute": "status", "value": "defeated"}]


def test_news_claiming_facts_two_events_made_is_news_of_the_claim_itself() -> None:
    """News of the event that made every fact it claims, else of the claim itself: with two
    such events, which one was picked hung on the hash seed, so two workers formed different
    memories (Cy, who saw the first, took in nothing where it was picked)."""
    purse_taken = [{"subject": "item-purse", "attribute": "owner", "value": "player-1"}]
    claim = "Ilse beat the sailor and took his purse"
    state, _ = delivered(
        [
            {"seq": 1, "key": "combat.enemy-defeated", "actor": "player-1", "witnesses": ["npc-cy"]}
            | {"payload": {"enemy": "npc-sailor"}, "facts": SAILOR_BEATEN, "entities": CAST},
            {"seq": 2, "key": "theft.purse-stolen", "actor": "player-1", "witnesses": []}
            | {"facts": purse_taken},
            {"seq": 3, "key": TOLD, "actor": "npc-ann", "target": "npc-cy"}
            | {"payload": {"content": claim, "facts": SAILOR_BEATEN + purse_taken}},
        ]
    )
    told = [
        (belief.content, belief.source, belief.hops)
        for belief in runtime_read(state, "default", "save-1", "main", "npc-cy").beliefs
        if belief.kind == "knowledge"
    ]
    assert told == [(claim, "told", 1)]


def test_a_teller_passes_on_the_claim_it_was_told_before_an_event_made_it_true() -> None:
    """Bo was told the claim, then an event nobody saw made it true: Bo passes it on as Bo
    learned it, a rumour two hops from Ann (it reached Cy as if Bo had seen it: told, one
    hop, as sure as a witness's word, and Cy's feelings left Ann out)."""
    state, _ = delivered(
        [
            {"seq": 1, "key": TOLD, "actor": "npc-ann", "target": "npc-bo", "entities": CAST}
            | {"payload": {"content": "The sailor was beaten", "facts": SAILOR_BEATEN}},
            {"seq": 2, "key": "combat.enemy-defeated", "actor": "player-1", "witnesses": []}
            | {"payload": {"enemy": "npc-sailor"}, "facts": SAILOR_BEATEN},
            {"seq": 3, "key": TOLD, "actor": "npc-bo", "target": "npc-cy"}
            | {"payload": {"content": "The sailor was beaten", "facts": SAILOR_BEATEN}},
        ]
    )
    read = runtime_read(state, "default", "save-1", "main", "npc-cy")
    [news] = [belief for belief in read.beliefs if belief.kind == "knowledge"]
    assert (news.source, news.hops, news.confidence) == ("rumour", 2, 0.64)
    assert "npc-ann" in {relation.entity_id for relation in read.relations}


def test_an_acks_notes_come_in_one_order_the_claims_before_the_told() -> None:
    """An ack's reason gathers what the event's parts left out, always in the same order."""
    told = orjson.dumps(
        {
            "world_instance_id": "save-1",
            "timeline_id": "main",
            "seq": 1,
            "key": "loreweaver.conversation.told",
            "actor": "npc-rook",
            "target": "npc-mara",
            "game_time": "day 1, 10:00",
            "payload": {
                "belief_id": "b-unknown",
                "facts": [{"subject": "npc-x", "attr": "status", "value": "dead"}],
            },
        }
    )
    [ack] = Projector().receive(MemoryState(), SourceMessage("events", 0, 0, b"save-1", told)).acks
    assert ack.reason == (
        "claimed facts 1 of 1 do not read as a fact (subject, attribute and value): left out;"
        " told names memory 'b-unknown', which 'npc-rook' does not hold, and says no words:"
        " nothing passed on"
    )


def test_what_one_event_gives_each_of_its_perceivers_is_bounded() -> None:
    """A loot list of 2,000 items before 1,000 characters moved 4 million relations (300 MB,
    10 s, its partition waiting); 4,000 facts seen by a crowd made 554 MB of memories; a town
    crier's 100,000 characters were each listener's memory whole. A memory is about its first
    64 entities and keeps its first 64 facts (the world record keeps them all), and the words
    it holds are cut as a description is."""
    items = [f"item-{number}" for number in range(100)]
    facts = [
        {"subject": f"item-{number}", "attribute": "owner", "value": "npc-rook"}
        for number in range(100)
    ]
    base = {"world_instance_id": "w", "timeline_id": "main", "location": "loc-inn"}
    looted = base | {
        "seq": 1,
        "key": "loot.chest-opened",
        "actor": "npc-rook",
        "witnesses": ["npc-mara"],
        "payload": {"items": items},
        "facts": facts,
    }
    cried = base | {
        "seq": 2,
        "key": TOLD,
        "actor": "npc-crier",
        "target": "npc-mara",
        "payload": {"content": "Hear ye! " * 1000},
    }
    state = replay_lines([orjson.dumps(looted), orjson.dumps(cried)]).state
    keys = memory_keys(state, "default", "w")
    seen = load_memory(
        state, keys, "npc-mara", belief_id("default", "w", "main", 1, "npc-mara", "event")
    )
    heard = load_memory(
        state, keys, "npc-mara", belief_id("default", "w", "main", 2, "npc-mara", "knowledge")
    )
    assert seen is not None and heard is not None
    assert seen.about == ["npc-rook", "loc-inn", *items[:62]]
    assert [fact.subject for fact in seen.facts] == items[:64]
    _, _, ancestry = timeline_view(state, "default", "w", "main")
    assert fact_value(state, "default", "w", ancestry, "item-99", "owner") == "npc-rook"
    assert len(heard.content) == 2000 and heard.content.endswith("…")
    mara = runtime_read(state, "default", "w", "main", "npc-mara")
    assert len(mara.relations) == 50  # shown; 65 moved (the 64 the sight is about, the crier)


def test_a_conversation_without_words_as_text_or_a_listener_is_noted_and_told_apart() -> None:
    """Found by a reviewer: a `told` naming no listener, or sending a localisation object or a
    list for its words, was acked with no word; and every wordless claim was one news, so
    Tomas, told of the mill, took in nothing of the granary."""
    told = {"key": TOLD, "target": "npc-tomas"}
    state, acks = delivered(
        [
            {"seq": 1, "key": TOLD, "actor": "npc-mara", "payload": {"content": "Hi"}},
            told | {"seq": 2, "actor": "npc-mara", "payload": {"content": {"en": "The mill"}}},
            told | {"seq": 3, "actor": "npc-ida", "payload": {"content": ["The granary"]}},
        ]
    )
    assert [ack.reason for ack in acks] == [
        "loreweaver.conversation.told names no listener (no target, no witnesses): nobody heard it",
        "payload.content is not text: its listener keeps the event described, not words said",
        "payload.content is not text: its listener keeps the event described, not words said",
    ]
    heard = runtime_read(state, "default", "save-1", "main", "npc-tomas").beliefs
    assert sorted(belief.seq for belief in heard) == [2, 3]


def test_a_claim_of_no_words_is_the_same_news_whatever_order_it_names_its_entities_in() -> None:
    """Its words are what it sent in their place: its `about` is the claim's own, a set (the
    same claim naming the mill first was other news)."""
    told = {"key": TOLD, "target": "npc-tomas"}
    state, _ = delivered(
        [
            told | {"seq": 1, "actor": "npc-mara", "payload": {"about": ["npc-x", "loc-mill"]}},
            told | {"seq": 2, "actor": "npc-ida", "payload": {"about": ["loc-mill", "npc-x"]}},
        ]
    )
    heard = runtime_read(state, "default", "save-1", "main", "npc-tomas").beliefs
    assert [belief.seq for belief in heard] == [1]
