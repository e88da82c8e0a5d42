"""Rumours, as a game designer would notice them: who meets whom, what passes at a meeting
and in a group, and how a rumour reads three mouths down the line."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import partial
from typing import Any

import pytest
from pydantic import ValidationError

from projections.catalogue import Catalogue
from projections.event_keys import MOVEMENT_KEYS
from projections.memories import form_memories
from projections.perception import perceivers
from projections.rumour_rules import (
    CHARACTERS_MET,
    group_exchange,
    group_interval,
    groups,
    meetings,
    passed_at_meeting,
    passed_in_group,
    retelling,
    retold,
    retold_alike,
    retold_from,
    rumour_id,
)
from projections.wording import retell
from schemas import EntityDeclaration, Event, story_minutes
from schemas.memory import Memory, Teller
from schemas.policy import Policy, merge_policy
from tests.projections.context import Context

SPREADING = merge_policy(Policy(), {"memory": {"spreading": {"enabled": True}}})
ENTERED = "loreweaver.movement.location-entered"
NAMES = {
    "npc-oskar": {"name": "Oskar"},
    "npc-mara": {"name": "Mara"},
    "npc-bram": {"name": "Bram"},
    "npc-ada": {"name": "Ada"},
    "npc-zed": {"name": "Zed"},
    "loc-tavern": {"name": "The Crooked Lantern"},
    "loc-market": {"name": "the market"},
}


@dataclass
class Town:
    """One timeline wired as the projector would wire spreading, minus storage: form the
    event's memories, then let everyone who meets at it tell each other (one way, then back)."""

    policy: Policy = SPREADING
    declarations: dict[str, EntityDeclaration] = field(
        default_factory=lambda: {
            entity: EntityDeclaration.model_validate(declared) for entity, declared in NAMES.items()
        }
    )
    whereabouts: dict[str, str] = field(default_factory=dict)
    memories: list[Memory] = field(default_factory=list)
    seq: int = 0

    def happen(self, key: str, **fields: Any) -> list[Memory]:
        """Apply the next event; returns every memory it formed, rumours included."""
        self.seq += 1
        event = Event.model_validate(
            {"world_instance_id": "save-1", "timeline_id": "main", "seq": self.seq, "key": key}
            | {"game_time": f"day 1, 10:{self.seq:02d}"}
            | fields
        )
        catalogue = Catalogue(self.declarations, event, self.policy)
        present = sorted(who for who, where in self.whereabouts.items() if where == event.location)
        perceptions = perceivers(event, catalogue.kind_of, present, self.policy)
        start = len(self.memories)
        self.memories += form_memories(
            event, perceptions, Context(catalogue, self.memories), self.policy
        )
        for one, other in meetings(event, present, catalogue.kind_of, self.policy):
            for teller, listener in ((one, other), (other, one)):
                passed = passed_at_meeting(
                    self.mind(teller), listener, partial(self.knows, listener), self.policy
                )
                self.memories += [
                    retold(memory, teller, listener, event, self.policy, catalogue)
                    for memory in passed
                ]
        if event.key in MOVEMENT_KEYS and event.actor and event.location:
            self.whereabouts[event.actor] = event.location
        return self.memories[start:]

    def mind(self, character: str) -> list[Memory]:
        """A character's memories, newest first."""
        return [m for m in reversed(self.memories) if m.character_id == character]

    def knows(self, character: str, origin: str) -> bool:
        return any(m.character_id == character and m.origin == origin for m in self.memories)

    def meet(self, one: str, other: str) -> list[Memory]:
        """`one` and `other` meet; returns the rumours passed (not the meeting's own memory)."""
        formed = self.happen(CHARACTERS_MET, actor=one, target=other)
        return [memory for memory in formed if memory.kind == "knowledge"]


def theft(town: Town) -> Memory:
    """Bram sees Oskar rob Mara of 10 gold at the tavern; returns Bram's memory of it."""
    formed = town.happen(
        "crime.purse-stolen",
        actor="npc-oskar",
        target="npc-mara",
        witnesses=["npc-bram"],
        location="loc-tavern",
        payload={"gold": 10},
        facts=[{"subject": "npc-mara", "attribute": "gold", "value": 0}],
    )
    return next(memory for memory in formed if memory.character_id == "npc-bram")


def event_at(seq: int, **fields: Any) -> Event:
    return Event.model_validate(
        {"world_instance_id": "save-1", "timeline_id": "main", "seq": seq, "key": "x.y"} | fields
    )


IDS = Catalogue({}, event_at(1), SPREADING)
"""The catalogue of a world that declared nothing: every id is called by the id itself."""


def kind_of(entity_id: str) -> str:
    return "player" if entity_id.startswith("player-") else IDS.kind_of(entity_id)


def memory(character: str, origin: str, seq: int, **fields: Any) -> Memory:
    """A plain seen memory of `character`, formed at `seq`."""
    return Memory.model_validate(
        {
            "belief_id": f"{character}-{origin}",
            "kind": "event",
            "content": f"news {origin}",
            "about": ["npc-oskar"],
            "source": "seen",
            "source_entity": None,
            "hops": 0,
            "confidence": 0.9,
            "importance": 0.5,
            "feeling": -0.3,
            "arousal": 0.4,
            "diverging": False,
            "uncertain": False,
            "seq": seq,
            "game_time": None,
            "persistent": False,
            "character_id": character,
            "timeline_id": "main",
            "facts": [],
            "origin": origin,
            "lineage": [],
            "story_minutes": None,
        }
        | fields
    )


# Meetings


def test_entering_a_place_meets_every_character_already_there() -> None:
    event = event_at(1, key=ENTERED, actor="npc-mara", location="loc-tavern")
    present = ["npc-zed", "npc-bram", "player-1", "item-mug"]
    assert meetings(event, present, kind_of, SPREADING) == [
        ("npc-bram", "npc-mara"),
        ("npc-mara", "npc-zed"),
    ]
    entered = event.model_copy(update={"key": "loreweaver.movement.character-entered-location"})
    assert meetings(entered, present, kind_of, SPREADING) == meetings(
        event, present, kind_of, SPREADING
    )


def test_staying_where_one_is_or_entering_an_empty_place_meets_nobody() -> None:
    event = event_at(1, key=ENTERED, actor="npc-mara", location="loc-tavern")
    assert meetings(event, ["npc-mara", "npc-bram"], kind_of, SPREADING) == []
    assert meetings(event, [], kind_of, SPREADING) == []
    player = event_at(1, key=ENTERED, actor="player-1", location="loc-tavern")
    assert meetings(player, ["npc-bram"], kind_of, SPREADING) == []


def test_characters_met_pairs_everyone_it_names() -> None:
    event = event_at(
        1,
        key=CHARACTERS_MET,
        actor="npc-zed",
        target="npc-ada",
        payload={"characters": ["npc-bram", "player-1", "npc-ada"]},
    )
    assert meetings(event, [], kind_of, SPREADING) == [
        ("npc-ada", "npc-bram"),
        ("npc-ada", "npc-zed"),
        ("npc-bram", "npc-zed"),
    ]
    two = event_at(1, key=CHARACTERS_MET, actor="npc-zed", target="npc-ada")
    assert meetings(two, [], kind_of, SPREADING) == [("npc-ada", "npc-zed")]


def test_nobody_meets_with_spreading_off_or_at_other_events() -> None:
    met = event_at(1, key=CHARACTERS_MET, actor="npc-zed", target="npc-ada")
    entered = event_at(1, key=ENTERED, actor="npc-mara", location="loc-tavern")
    assert meetings(met, [], kind_of, Policy()) == []
    assert meetings(entered, ["npc-bram"], kind_of, Policy()) == []
    talk = event_at(1, key="crime.purse-stolen", actor="npc-zed", target="npc-ada")
    assert meetings(talk, [], kind_of, SPREADING) == []


def test_group_intervals_follow_game_time() -> None:
    assert group_interval(story_minutes("day 1, 03:59"), SPREADING) == 6
    assert group_interval(story_minutes("day 1, 04:00"), SPREADING) == 7
    hourly = merge_policy(SPREADING, {"memory": {"spreading": {"group_interval_minutes": 60}}})
    assert group_interval(story_minutes("day 1, 04:00"), hourly) == 28


def test_groups_come_from_the_declared_group_or_the_named_field() -> None:
    declared = {
        "npc-zed": EntityDeclaration.model_validate({"group": "guards", "guild": "smiths"}),
        "npc-ada": EntityDeclaration.model_validate({"group": "guards"}),
        "npc-bram": EntityDeclaration.model_validate({"guild": ["smiths", "bakers"]}),
        "npc-mara": None,
    }
    assert groups(declared, SPREADING) == {"guards": ["npc-ada", "npc-zed"]}
    by_guild = merge_policy(SPREADING, {"memory": {"spreading": {"group_field": "guild"}}})
    assert groups(declared, by_guild) == {"bakers": ["npc-bram"], "smiths": ["npc-bram", "npc-zed"]}
    with pytest.raises(ValidationError):  # `group` is one name; a list needs a field of one's own
        EntityDeclaration.model_validate({"group": ["smiths", "bakers"]})


@pytest.mark.parametrize("field", ["copy", "schema", "json", "kind"])
def test_a_groups_field_is_read_whatever_it_is_called(field: str) -> None:
    """A reviewer's find: a game's field named as a method of the model (`copy`, `schema`) read
    as that method, and grouped nobody; a declared field (`kind`) may name groups too."""
    declared = {
        "npc-zed": EntityDeclaration.model_validate({field: "smiths"}),
        "npc-ada": EntityDeclaration.model_validate({field: "smiths"}),
    }
    named = merge_policy(SPREADING, {"memory": {"spreading": {"group_field": field}}})
    assert groups(declared, named) == {"smiths": ["npc-ada", "npc-zed"]}


# What passes


def test_a_meeting_offers_the_three_newest_news_and_the_listener_takes_what_it_lacks() -> None:
    mind = [memory("npc-bram", f"news-{seq}", seq) for seq in (9, 8, 7, 6, 5)]
    impression = memory("npc-bram", "news-10", 10, kind="impression")
    passed = passed_at_meeting([impression, *mind], "npc-ada", lambda origin: False, SPREADING)
    assert [m.origin for m in passed] == ["news-9", "news-8", "news-7"]

    # older news stays behind even when the listener knows one of the newest three
    knows_newest = passed_at_meeting(mind, "npc-ada", lambda origin: origin == "news-9", SPREADING)
    assert [m.origin for m in knows_newest] == ["news-8", "news-7"]

    one = merge_policy(SPREADING, {"memory": {"spreading": {"per_meeting": 1}}})
    assert [m.origin for m in passed_at_meeting(mind, "npc-ada", lambda o: False, one)] == [
        "news-9"
    ]


def test_nobody_hears_news_that_came_from_them_or_is_about_them_alone() -> None:
    from_ada = memory(
        "npc-bram",
        "news-1",
        3,
        kind="knowledge",
        source="told",
        source_entity="npc-zed",
        hops=2,
        lineage=[Teller(entity_id="npc-ada", hops=1, confidence=0.72)],
    )
    about_ada = memory("npc-bram", "news-2", 2, about=["npc-ada"])
    about_ada_and_oskar = memory("npc-bram", "news-3", 1, about=["npc-ada", "npc-oskar"])
    passed = passed_at_meeting(
        [from_ada, about_ada, about_ada_and_oskar], "npc-ada", lambda o: False, SPREADING
    )
    assert [m.origin for m in passed] == ["news-3"]


def test_a_group_exchange_passes_the_newest_news_from_its_freshest_holder() -> None:
    zed_heard = memory("npc-zed", "fire", 8, kind="knowledge", source="told", hops=1)
    minds = {
        "npc-ada": [memory("npc-ada", "fire", 4), memory("npc-ada", "flood", 3)],
        "npc-zed": [memory("npc-zed", "wolves", 9), zed_heard, memory("npc-zed", "feast", 1)],
        "npc-bram": [memory("npc-bram", "feast", 2)],
    }

    def knows(member: str, origin: str) -> bool:
        return any(m.origin == origin for m in minds[member])

    two = merge_policy(SPREADING, {"memory": {"spreading": {"group_exchange_limit": 2}}})
    deliveries = [(t, listener, m.origin) for t, listener, m in passed_in_group(minds, knows, two)]
    assert deliveries == [
        ("npc-zed", "npc-ada", "wolves"),
        ("npc-zed", "npc-bram", "wolves"),
        ("npc-ada", "npc-bram", "fire"),
    ]
    everything = [
        (t, listener, m.origin) for t, listener, m in passed_in_group(minds, knows, SPREADING)
    ]
    assert everything[3:] == [("npc-ada", "npc-bram", "flood"), ("npc-ada", "npc-zed", "flood")]
    none = merge_policy(SPREADING, {"memory": {"spreading": {"group_exchange_limit": 0}}})
    assert passed_in_group(minds, knows, none) == []


def test_a_group_exchange_looks_deeper_only_while_it_finds_too_little() -> None:
    """Ada and Zed share their newest news; Ada alone holds older news. The exchange looks at
    each member's newest 3, then 6 and 12, and stops at the depth where it has found 3 pieces
    Zed lacks (what it looks at of the members' news is asked of storage, depth by depth)."""
    shared = [memory("npc-ada", f"omen-{number}", 100 - number) for number in range(5)]
    ada = [*shared, *(memory("npc-ada", f"old-{n}", 50 - n) for n in range(4))]
    zed = [m.model_copy(update={"character_id": "npc-zed"}) for m in shared]
    asked: list[int] = []

    def offered(depth: int) -> dict[str, list[Memory]]:
        asked.append(depth)
        return {"npc-ada": ada[:depth], "npc-zed": zed[:depth]}

    def knows(member: str, origin: str) -> bool:
        return any(m.origin == origin for m in (ada if member == "npc-ada" else zed))

    deliveries = group_exchange(offered, knows, SPREADING)
    assert [(t, who, m.origin) for t, who, m in deliveries] == [
        ("npc-ada", "npc-zed", "old-0"),
        ("npc-ada", "npc-zed", "old-1"),
        ("npc-ada", "npc-zed", "old-2"),
    ]
    assert asked == [3, 6, 12]
    asked.clear()
    assert group_exchange(offered, lambda member, origin: True, SPREADING) == []
    assert asked == [3, 6, 12, 24, 48]  # at most 16 times the limit


# How a rumour reads


def test_a_rumour_three_mouths_down_the_line() -> None:
    town = Town()
    seen = theft(town)
    assert (seen.hops, seen.confidence) == (0, 0.9)

    [told] = town.meet("npc-bram", "npc-ada")
    assert (told.character_id, told.kind, told.source, told.source_entity) == (
        "npc-ada",
        "knowledge",
        "told",
        "npc-bram",
    )
    assert (told.hops, told.confidence, told.uncertain, told.origin) == (1, 0.72, True, seen.origin)
    assert told.content == "Oskar purse stolen Mara at The Crooked Lantern"
    # Bram saw a theft as a witness (0.5, -0.4, 0.5); Ada weighs it as a theft heard of
    assert (seen.importance, seen.feeling, seen.arousal) == (0.5, -0.4, 0.5)
    assert (told.importance, told.feeling, told.arousal, told.event_kind) == (
        0.4,
        -0.3,
        0.3,
        "theft",
    )
    assert (told.seq, told.game_time, told.story_minutes) == (
        2,
        "day 1, 10:02",
        story_minutes("day 1, 10:02"),
    )

    rumours = town.meet("npc-ada", "npc-zed")
    [rumour] = [m for m in rumours if m.origin == seen.origin]
    assert (rumour.character_id, rumour.source, rumour.source_entity) == (
        "npc-zed",
        "rumour",
        "npc-ada",
    )
    assert (rumour.hops, rumour.confidence) == (2, 0.58)
    assert (rumour.importance, rumour.feeling, rumour.arousal) == (0.4, -0.3, 0.3)
    assert [(step.entity_id, step.hops, step.confidence) for step in rumour.lineage] == [
        ("npc-bram", 1, 0.72),
        ("npc-ada", 2, 0.58),
    ]
    assert rumour.facts == seen.facts


def test_a_rumour_weighs_for_its_listener_as_a_told_does_whatever_the_teller_felt() -> None:
    """Mara was robbed (a target: 0.9, -0.8, 0.8); Zed, who hears it from her at a meeting,
    weighs it as Ada does, told it by Bram with a `told` naming his memory: a theft heard of."""
    town = Town()
    seen = theft(town)
    robbed = next(m for m in town.mind("npc-mara") if m.kind == "event")
    assert (robbed.importance, robbed.feeling, robbed.arousal) == (0.9, -0.8, 0.8)
    [at_meeting] = [m for m in town.meet("npc-mara", "npc-zed") if m.origin == seen.origin]
    [by_told] = town.happen(
        "loreweaver.conversation.told",
        actor="npc-bram",
        target="npc-ada",
        payload={"belief_id": seen.belief_id},
    )

    def weighed(memory: Memory) -> tuple[object, ...]:
        return (memory.event_kind, memory.importance, memory.feeling, memory.arousal)

    assert weighed(at_meeting) == weighed(by_told) == ("theft", 0.4, -0.3, 0.3)
    assert (at_meeting.confidence, by_told.confidence) == (0.72, 0.72)


def test_nobody_hears_what_they_saw_or_already_know() -> None:
    town = Town()
    seen = theft(town)

    def heard_of_the_theft(one: str, other: str) -> list[tuple[str, str | None]]:
        passed = town.meet(one, other)
        return [(m.character_id, m.source_entity) for m in passed if m.origin == seen.origin]

    assert heard_of_the_theft("npc-bram", "npc-mara") == []  # Mara was robbed: she saw it
    assert heard_of_the_theft("npc-bram", "npc-zed") == [("npc-zed", "npc-bram")]
    assert heard_of_the_theft("npc-bram", "npc-zed") == []  # Zed knows it now
    assert heard_of_the_theft("npc-zed", "npc-ada") == [("npc-ada", "npc-zed")]
    assert heard_of_the_theft("npc-bram", "npc-ada") == []


def test_walking_into_the_tavern_is_a_meeting() -> None:
    town = Town()
    seen = theft(town)
    town.happen(ENTERED, actor="npc-bram", location="loc-tavern")
    formed = town.happen(ENTERED, actor="npc-zed", location="loc-tavern")
    assert [(m.character_id, m.source_entity, m.origin) for m in formed] == [
        ("npc-zed", "npc-bram", seen.origin)
    ]


def test_retelling_drops_quoted_words_and_details() -> None:
    said = memory(
        "npc-bram",
        "promise",
        1,
        content='Ilse said "I will find your son" at The Crooked Lantern (reward: 5)',
    )
    heard = retold(said, "npc-bram", "npc-ada", event_at(4), SPREADING, IDS)
    assert heard.content == "Ilse said something at The Crooked Lantern"
    assert heard.content == retell(said.content)


def test_rumours_at_one_meeting_have_ids_of_their_own() -> None:
    at = event_at(4)
    first = retold(memory("npc-bram", "fire", 1), "npc-bram", "npc-ada", at, SPREADING, IDS)
    second = retold(memory("npc-bram", "flood", 2), "npc-bram", "npc-ada", at, SPREADING, IDS)
    assert first.belief_id != second.belief_id
    assert first.belief_id == rumour_id(at, "npc-ada", "fire")
    assert len(first.belief_id) == 32


def test_persistence_follows_the_listener_and_the_kind() -> None:
    seer = merge_policy(SPREADING, {"memory": {"persistent": {"characters": ["npc-seer"]}}})
    news = memory("npc-bram", "fire", 1, persistent=True)
    assert retold(news, "npc-bram", "npc-seer", event_at(4), seer, IDS).persistent is True
    assert retold(news, "npc-bram", "npc-ada", event_at(4), seer, IDS).persistent is False
    knowledge = merge_policy(SPREADING, {"memory": {"persistent": {"kinds": ["knowledge"]}}})
    assert retold(news, "npc-bram", "npc-ada", event_at(4), knowledge, IDS).persistent is True


# Distortion


DISTORTING = merge_policy(SPREADING, {"memory": {"spreading": {"distortion": True}}})


def test_without_distortion_the_rumour_keeps_its_statement_and_facts() -> None:
    town = Town()
    seen = theft(town)
    listeners = [f"npc-{i}" for i in range(30)]
    heard = [retold(seen, "npc-bram", who, event_at(5), SPREADING, IDS) for who in listeners]
    assert {(m.content, tuple(m.facts)) for m in heard} == {
        (retell(seen.content), tuple(seen.facts))
    }


def test_with_distortion_the_same_stream_spreads_the_same_shifted_rumours() -> None:
    town = Town()
    seen = theft(town)
    catalogue = Catalogue(town.declarations, event_at(5), DISTORTING)
    listeners = [f"npc-{i}" for i in range(30)]
    heard = [retold(seen, "npc-bram", who, event_at(5), DISTORTING, catalogue) for who in listeners]
    again = [retold(seen, "npc-bram", who, event_at(5), DISTORTING, catalogue) for who in listeners]
    assert heard == again
    contents = {m.content for m in heard}
    assert retell(seen.content) in contents
    assert len(contents) > 1
    assert all(m.origin == seen.origin and m.hops == 1 for m in heard)


# Making rumours


def test_retold_rumours_are_what_validating_their_fields_makes() -> None:
    """`retold` builds rumours without validating them again (`schemas.trusted`): every rumour,
    first-hand or further down the line, distorted or not, persistent or not, of news weighed
    by its kind or of older news without one, must be the very one validation makes of its
    fields, and dump to the same bytes."""
    town = Town()
    seen = theft(town)
    further = [*town.meet("npc-bram", "npc-ada"), *town.meet("npc-ada", "npc-zed")]
    seer = merge_policy(DISTORTING, {"memory": {"persistent": {"characters": ["npc-1"]}}})
    catalogue = Catalogue(town.declarations, event_at(5), seer)
    older = memory("npc-bram", "fire", 1, event_kind=None, verdict="doubting")
    rumours = [
        retold(news, "npc-zed", f"npc-{i}", event_at(5), policy, catalogue)
        for news in (seen, *further, older)
        for policy in (SPREADING, seer)
        for i in range(12)
    ]
    assert {rumour.hops for rumour in rumours} == {1, 2, 3}
    assert {rumour.persistent for rumour in rumours} == {True, False}
    assert len({(rumour.content, tuple(rumour.facts)) for rumour in rumours}) > 4  # distorted
    for rumour in [*further, *rumours]:
        stored = rumour.model_dump_json()
        assert Memory.model_validate_json(stored) == rumour
        validated = Memory.model_validate(dict(rumour))
        assert validated == rumour
        assert validated.model_dump_json() == stored


def test_rumours_of_one_retelling_stay_each_their_own() -> None:
    """A group exchange tells one memory to dozens at once: each listener's rumour is the one
    `retold` makes for them alone, and serving one listener changes nothing another gets (the
    rumours share the teller's lineage, which none of them adds to)."""
    town = Town()
    seen = theft(town)
    catalogue = Catalogue(town.declarations, event_at(5), SPREADING)
    told = retelling(seen, "npc-bram", SPREADING, catalogue.name_of)
    listeners = ["npc-ada", "npc-zed", "npc-mara"]
    rumours = [retold_from(told, who, event_at(5), SPREADING, catalogue) for who in listeners]
    alone = [retold(seen, "npc-bram", who, event_at(5), SPREADING, catalogue) for who in listeners]
    assert [r.model_dump_json() for r in rumours] == [r.model_dump_json() for r in alone]
    assert all(rumour.lineage is told.lineage for rumour in rumours)
    assert [step.entity_id for step in told.lineage] == ["npc-bram"]


@pytest.mark.parametrize("distorting", [False, True])
def test_a_rumour_made_alike_another_listeners_is_the_one_retold_for_its_own_listener(
    distorting: bool,
) -> None:
    """Spreading makes the first listener's rumour of a retelling at an event and the others'
    from its fields (`retold_alike`): each is stored as the very rumour `retold` makes for that
    listener alone, its id, its persistence and (distorted) its words its own."""
    town = Town()
    seen = theft(town)
    policy = merge_policy(
        DISTORTING if distorting else SPREADING,
        {"memory": {"persistent": {"characters": ["npc-zed"]}}},
    )
    catalogue = Catalogue(town.declarations, event_at(5), policy)
    told = retelling(seen, "npc-bram", policy, catalogue.name_of)
    first = retold_from(told, "npc-ada", event_at(5), policy, catalogue)
    listeners = ["npc-zed", "npc-mara", "npc-oskar"]
    alike = [retold_alike(told, first, who, event_at(5), policy, catalogue) for who in listeners]
    alone = [retold(seen, "npc-bram", who, event_at(5), policy, catalogue) for who in listeners]
    assert [r.model_dump_json() for r in alike] == [r.model_dump_json() for r in alone]
    assert [r.persistent for r in alike] == [True, False, False]
    assert len({r.belief_id for r in [first, *alike]}) == 4
