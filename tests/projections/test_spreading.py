"""Rumours through the whole projector, in-process: a hand-worked town, by value."""

from __future__ import annotations

from collections import defaultdict
from decimal import ROUND_HALF_UP, Decimal
from typing import Any

import orjson
import pytest

from benchmarks.story import encoded, tavern_story
from projections import timelines
from projections.memories import belief_id
from projections.memory_store import held_in_order, memory_keys
from projections.policy import resolve
from projections.projector import Projector
from projections.provenance import provenance
from projections.retention import NEVER_RECALLED, retention
from projections.rumour_map import rumour_map
from projections.runtime_read import NotFound, runtime_read
from projections.state import MemoryState
from projections.weighing import retold_confidence
from schemas.events import story_minutes
from schemas.memory import Memory
from schemas.policy import merge_policy
from streams.replay import messages, replay_lines

ENTERED = "loreweaver.movement.location-entered"
MET = "loreweaver.social.characters-met"
TOLD = "loreweaver.conversation.told"
RECALLED = "loreweaver.memory.recalled"


class Town:
    """Events numbered in order on one world; reads by character."""

    def __init__(self, memory: dict[str, Any] | None = None, **spreading: Any) -> None:
        self.lines: list[bytes] = []
        rules = {**(memory or {}), "spreading": {"enabled": True, **spreading}}
        self.policy = resolve(None, {"memory": rules})

    def happen(self, key: str, timeline: str = "main", **fields: Any) -> None:
        seq = fields.pop("seq", None) or sum(1 for _ in self.lines) + 1
        self.lines.append(
            orjson.dumps(
                {
                    "world_instance_id": "town",
                    "timeline_id": timeline,
                    "seq": seq,
                    "key": key,
                    "game_time": fields.pop("game_time", "day 1, 10:00"),
                    **fields,
                }
            )
        )

    def state(self) -> MemoryState:
        return replay_lines(self.lines, Projector(policies=lambda t, w: self.policy)).state

    def knowledge(self, npc: str, timeline: str = "main") -> list[tuple[Any, ...]]:
        """What `npc` was told, as (content, source, teller, hops, confidence), sorted."""
        try:
            read = runtime_read(self.state(), "default", "town", timeline, npc).model_dump(
                mode="json"
            )
        except NotFound:
            return []
        return sorted(
            (m["content"], m["source"], m["source_entity"], m["hops"], m["confidence"])
            for m in read["beliefs"]
            if m["kind"] == "knowledge"
        )


def theft_at_the_inn(town: Town) -> None:
    town.happen(ENTERED, actor="npc-ada", location="loc-inn")
    town.happen(
        "crime.purse-stolen",
        actor="npc-thief",
        target="npc-ada",
        location="loc-inn",
        payload={"gold": 10},
    )


STOLEN = "npc-thief purse stolen npc-ada at loc-inn"


def test_news_travels_hop_by_hop_losing_confidence_and_ends_as_a_rumour() -> None:
    town = Town()
    theft_at_the_inn(town)
    town.happen(ENTERED, actor="npc-bo", location="loc-inn")  # Ada tells Bo
    town.happen(ENTERED, actor="npc-bo", location="loc-market")
    town.happen(ENTERED, actor="npc-cy", location="loc-market")  # Bo tells Cy
    town.happen(MET, actor="npc-cy", target="npc-di")  # Cy tells Di

    assert town.knowledge("npc-bo") == [(STOLEN, "told", "npc-ada", 1, 0.72)]
    assert town.knowledge("npc-cy") == [(STOLEN, "rumour", "npc-bo", 2, 0.58)]
    assert town.knowledge("npc-di") == [(STOLEN, "rumour", "npc-cy", 3, 0.46)]
    assert town.knowledge("npc-ada") == []  # she saw it: nobody tells her, nothing echoes back


def test_a_third_hand_rumour_names_both_tellers_in_order() -> None:
    town = Town()
    theft_at_the_inn(town)
    town.happen(ENTERED, actor="npc-bo", location="loc-inn")
    town.happen(MET, actor="npc-bo", target="npc-cy")
    state = town.state()
    [belief] = runtime_read(state, "default", "town", "main", "npc-cy").model_dump(mode="json")[
        "beliefs"
    ]
    found = provenance(state, "default", "town", "main", "npc-cy", belief["belief_id"]).model_dump(
        mode="json"
    )
    assert found["origin"]["seq"] == 2 and found["origin"]["key"] == "crime.purse-stolen"
    assert [(link["entity_id"], link["hops"], link.get("told_by")) for link in found["chain"]] == [
        ("npc-ada", 0, None),
        ("npc-bo", 1, "npc-ada"),
        ("npc-cy", 2, "npc-bo"),
    ]


def test_a_meeting_passes_at_most_three_memories_the_newest() -> None:
    town = Town()
    town.happen(ENTERED, actor="npc-ada", location="loc-inn")
    for number in range(5):
        town.happen(f"sight.omen-{number}", actor="npc-ada", location="loc-inn")
    town.happen(MET, actor="npc-ada", target="npc-bo")
    told = [content for content, *_ in town.knowledge("npc-bo")]
    assert told == [
        "npc-ada omen 2 at loc-inn",
        "npc-ada omen 3 at loc-inn",
        "npc-ada omen 4 at loc-inn",
    ]


@pytest.mark.parametrize("named", [32, 33])
def test_a_characters_met_of_more_than_32_names_is_no_meeting_and_its_ack_says_so(
    named: int,
) -> None:
    """Everyone it names meets everyone else: 500 names in a 5 KB event formed 750,000
    rumours in one transaction (26 s, 3 GB), stalling the partition's worlds at every
    redelivery. At most 32 meet; a larger one passes nothing on, and says why."""
    town = Town()
    crowd = [f"npc-{number:03}" for number in range(named)]
    theft_at_the_inn(town)
    town.happen(MET, actor="npc-ada", target=crowd[1], payload={"characters": crowd[2:]})
    projector, state = Projector(policies=lambda t, w: town.policy), MemoryState()
    acks = [ack for line in messages(town.lines) for ack in projector.receive(state, line).acks]
    [ack] = [ack for ack in acks if ack.seq == 3]
    told = [npc for npc in crowd[1:] if town.knowledge(npc)]
    if named <= 32:
        assert ack.reason is None and told == crowd[1:]
    else:
        assert ack.reason == (
            "no meeting recorded: a characters-met names at most 32 ids (everyone meets "
            "everyone), this one 33"
        )
        assert told == []


def test_a_group_exchange_passes_at_most_the_group_limit_per_interval() -> None:
    town = Town(group_exchange_limit=2, group_interval_minutes=60)
    guild = {"npc-ada": {"group": "guild"}, "npc-bo": {"group": "guild"}}
    town.happen(
        ENTERED, actor="npc-ada", location="loc-inn", entities=guild, game_time="day 1, 10:00"
    )
    for number in range(4):
        town.happen(
            f"sight.omen-{number}", actor="npc-ada", location="loc-inn", game_time="day 1, 10:10"
        )
    assert town.knowledge("npc-bo") == []  # same interval: no exchange yet
    town.happen("weather.rain", location="loc-market", game_time="day 1, 11:05")
    told = [content for content, *_ in town.knowledge("npc-bo")]
    assert told == ["npc-ada omen 2 at loc-inn", "npc-ada omen 3 at loc-inn"]


@pytest.mark.parametrize("mara_first", [True, False])
def test_a_group_never_tells_a_member_the_news_they_started(mara_first: bool) -> None:
    """Mara tells Tomas a lie, and Bram tells Ula the same; Mara, Tomas and Ula share a group.
    Its exchange told Mara her own lie back when Ula's copy, through Bram, was the fresher,
    and not when Tomas's, through her, was: by which of two unrelated tellings came last."""
    town = Town(group_interval_minutes=60)
    crew = {npc: {"group": "crew"} for npc in ("npc-mara", "npc-tomas", "npc-ula")}
    lie = {
        "content": "The sailor is dead",
        "about": ["npc-sailor"],
        "facts": [{"subject": "npc-sailor", "attribute": "status", "value": "dead"}],
    }
    tellings = [("npc-mara", "npc-tomas"), ("npc-bram", "npc-ula")]
    for minute, (teller, listener) in enumerate(tellings if mara_first else tellings[::-1]):
        town.happen(
            TOLD,
            actor=teller,
            target=listener,
            payload=lie,
            entities=crew,
            game_time=f"day 1, 10:{minute:02d}",
        )
    town.happen("weather.rain", location="loc-market", game_time="day 1, 11:05")
    assert town.knowledge("npc-mara") == []


def test_group_exchanges_go_on_once_their_interval_is_made_longer() -> None:
    """The last exchange's interval was counted in minutes of the old length: made hourly at
    10:01 on day 1 (minute 2,041 of the story), exchanges stopped until the 2,041st hour, day
    86. A story time ahead of the others (a mistyped day) stopped them so until it came."""
    every = {length: Town(group_interval_minutes=length).policy for length in (1, 60)}
    policy = {"now": every[1]}
    projector, state = Projector(policies=lambda tenant, world: policy["now"]), MemoryState()
    guild = {"npc-ada": {"group": "guild"}, "npc-bo": {"group": "guild"}}
    town = Town()
    town.happen("world.entity-declared", entities=guild, game_time="day 1, 10:00")
    town.happen("sight.omen", actor="npc-ada", witnesses=[], game_time="day 1, 10:00")
    town.happen("weather.rain", location="loc-x", game_time="day 1, 10:01")  # exchanged
    for message in messages(town.lines):
        projector.receive(state, message)
    policy["now"] = every[60]
    town.happen("sight.comet", actor="npc-ada", witnesses=[], game_time="day 1, 10:02")
    town.happen("weather.rain", location="loc-x", game_time="day 1, 11:00")
    for message in list(messages(town.lines))[3:]:
        projector.receive(state, message)
    read = runtime_read(state, "default", "town", "main", "npc-bo")
    assert sorted(belief.content for belief in read.beliefs if belief.kind == "knowledge") == [
        "npc-ada comet",
        "npc-ada omen",
    ]


def test_scenes_whose_clocks_cross_an_interval_out_of_order_exchange_once_per_interval() -> None:
    """Two scenes a minute apart either side of 11:00 (10:59, 11:00, 10:59, ...): counting an
    exchange at any interval other than the last's made one at every event."""
    town = Town(group_interval_minutes=60, group_exchange_limit=1)
    guild = {"npc-ada": {"group": "guild"}, "npc-bo": {"group": "guild"}}
    town.happen("world.entity-declared", entities=guild, game_time="day 1, 10:00")
    for number, minute in enumerate(("11:00", "10:59", "11:00", "10:59")):
        town.happen(
            f"sight.omen-{number}", actor="npc-ada", witnesses=[], game_time=f"day 1, {minute}"
        )
    town.happen("weather.rain", location="loc-x", game_time="day 1, 11:30")
    assert [content for content, *_ in town.knowledge("npc-bo")] == []  # 11:00 exchanged first


def test_a_character_declared_with_a_null_group_leaves_it_and_hears_no_more_of_its_news() -> None:
    town = Town()
    guild = {
        "npc-ada": {"group": "guild"},
        "npc-bo": {"group": "guild"},
        "npc-cy": {"group": "guild"},
    }
    town.happen("world.entity-declared", entities=guild, game_time="day 1, 00:10")
    town.happen(
        "world.entity-declared", entities={"npc-bo": {"group": None}}, game_time="day 1, 00:20"
    )
    town.happen(
        "crime.purse-stolen",
        actor="npc-thief",
        target="npc-ada",
        location="loc-inn",
        game_time="day 1, 01:00",
    )
    town.happen("weather.rain", location="loc-market", game_time="day 1, 05:00")  # next interval
    assert town.knowledge("npc-cy") == [(STOLEN, "told", "npc-ada", 1, 0.72)]
    assert town.knowledge("npc-bo") == []


def test_a_told_naming_the_tellers_impression_passes_on_the_news_itself() -> None:
    town = Town()
    theft_at_the_inn(town)
    impression = belief_id("default", "town", "main", 2, "npc-ada", "impression")
    town.happen(TOLD, actor="npc-ada", target="npc-bo", payload={"belief_id": impression})
    assert town.knowledge("npc-bo") == [(STOLEN, "told", "npc-ada", 1, 0.72)]
    town.happen(MET, actor="npc-bo", target="npc-cy")
    assert town.knowledge("npc-cy") == [(STOLEN, "rumour", "npc-bo", 2, 0.58)]


def test_old_news_one_member_lacks_travels_in_the_group_once_newer_news_is_shared() -> None:
    """Ada alone saw her purse stolen; then she and Bo saw three omens together. The hour turns:
    the group's three newest pieces of news are shared already, so the exchange looks deeper
    and Bo hears of the theft."""
    town = Town(group_interval_minutes=60)
    guild = {"npc-ada": {"group": "guild"}, "npc-bo": {"group": "guild"}}
    town.happen("world.entity-declared", entities=guild, game_time="day 1, 00:10")
    town.happen("crime.purse-stolen", actor="npc-thief", target="npc-ada", game_time="day 1, 00:20")
    for number in range(3):
        town.happen(
            f"sight.omen-{number}",
            actor="npc-ada",
            witnesses=["npc-bo"],
            game_time="day 1, 00:30",
        )
    assert town.knowledge("npc-bo") == []
    town.happen("weather.rain", actor="npc-zed", game_time="day 1, 01:05")
    stolen = "npc-thief purse stolen npc-ada"
    assert town.knowledge("npc-bo") == [(stolen, "told", "npc-ada", 1, 0.72)]


def test_a_group_looks_at_most_sixteen_times_its_limit_deep() -> None:
    """With a limit of 1, the group looks at each member's 16 newest pieces of news at most:
    the theft under 15 shared omens travels, under 16 it stays with Ada."""
    stolen = "npc-thief purse stolen npc-ada"
    for omens, heard in ((15, [(stolen, "told", "npc-ada", 1, 0.72)]), (16, [])):
        town = Town(group_interval_minutes=60, group_exchange_limit=1)
        guild = {"npc-ada": {"group": "guild"}, "npc-bo": {"group": "guild"}}
        town.happen("world.entity-declared", entities=guild, game_time="day 1, 00:10")
        town.happen(
            "crime.purse-stolen", actor="npc-thief", target="npc-ada", game_time="day 1, 00:20"
        )
        for number in range(omens):
            town.happen(
                f"sight.omen-{number}",
                actor="npc-ada",
                witnesses=["npc-bo"],
                game_time="day 1, 00:30",
            )
        town.happen("weather.rain", actor="npc-zed", game_time="day 1, 01:05")
        assert town.knowledge("npc-bo") == heard, omens


OMEN = "npc-zed omen npc-ada"


def omen_then_meeting(town: Town, met_at: str | None) -> None:
    """Zed shows Ada an omen on day 1 (an event of importance 0.4: a half-life of 12 story days,
    give or take a fifth); on day 60 the story goes on, and Ada meets Bo at `met_at`."""
    town.happen("sight.omen", actor="npc-zed", target="npc-ada", game_time="day 1, 10:00")
    town.happen("weather.rain", actor="npc-zed", game_time="day 60, 10:00")
    town.happen(MET, actor="npc-ada", target="npc-bo", game_time=met_at)


def test_a_character_cannot_tell_what_it_has_forgotten() -> None:
    for met_at in ("day 60, 10:30", None):  # a meeting without story time: the story's now
        town = Town()
        omen_then_meeting(town, met_at)
        assert town.knowledge("npc-bo") == [], met_at


def test_without_flaky_memory_nothing_is_forgotten_and_news_passes_whole() -> None:
    town = Town(memory={"flaky": False})
    omen_then_meeting(town, "day 60, 10:30")
    assert town.knowledge("npc-bo") == [(OMEN, "told", "npc-ada", 1, 0.72)]


def test_news_without_story_time_never_fades_for_its_teller() -> None:
    town = Town()
    town.happen("sight.omen", actor="npc-zed", target="npc-ada", game_time=None)
    town.happen("weather.rain", actor="npc-zed", game_time="day 60, 10:00")
    town.happen(MET, actor="npc-ada", target="npc-bo", game_time="day 60, 10:30")
    assert town.knowledge("npc-bo") == [(OMEN, "told", "npc-ada", 1, 0.72)]


def test_faded_news_is_told_as_sure_as_its_teller_still_is() -> None:
    """Twenty days on, Ada's memory of the omen has faded: she holds it at her confidence times
    its retention, and Bo hears it at that, less the retelling's loss."""
    town = Town()
    town.happen("sight.omen", actor="npc-zed", target="npc-ada", game_time="day 1, 10:00")
    town.happen(MET, actor="npc-ada", target="npc-bo", game_time="day 21, 10:00")
    state = town.state()
    record = timelines.load(state, "default", "town", "main")
    assert record is not None
    ancestry = timelines.ancestry(state, record, 1)
    [seen] = held_in_order(state, memory_keys(state, "default", "town"), ancestry, "npc-ada")
    held = retention(seen, 20 * 24 * 60 + seen_minutes(seen), NEVER_RECALLED, town.policy)
    assert held.state == "faded"
    faded = round(seen.confidence * held.value, 2)
    told = retold_confidence(faded, town.policy)
    assert told < 0.72
    assert town.knowledge("npc-bo") == [(OMEN, "told", "npc-ada", 1, told)]


def seen_minutes(memory: Memory) -> int:
    assert memory.story_minutes is not None
    return memory.story_minutes


def test_a_recalled_memory_is_still_held_and_told() -> None:
    """Ada recalls the omen now and then until day 299: its clock restarted each time, so on
    day 300 she still holds it and tells Bo (unrecalled, she forgot it within weeks)."""
    town = Town()
    town.happen("sight.omen", actor="npc-zed", target="npc-ada", game_time="day 1, 10:00")
    [seen] = runtime_read(town.state(), "default", "town", "main", "npc-ada").recollections
    forgetful = Town()
    forgetful.lines = list(town.lines)
    kept_in_mind(town, "npc-ada", [seen.belief_id])
    for ada in (town, forgetful):
        ada.happen(MET, actor="npc-ada", target="npc-bo", game_time="day 300, 10:00")
    assert forgetful.knowledge("npc-bo") == []
    [(content, source, teller, hops, confidence)] = town.knowledge("npc-bo")
    assert (content, source, teller, hops) == (OMEN, "told", "npc-ada", 1)
    assert 0 < confidence <= 0.72


def test_forgotten_news_takes_no_place_among_a_tellers_newest() -> None:
    """Zed told Ada the mill burned (a belief: it lasts four times as long), then she saw three
    trivial omens. Forty days on the omens are forgotten and the mill is not: she tells Bo of
    the mill."""
    town = Town()
    town.happen(
        TOLD,
        actor="npc-zed",
        target="npc-ada",
        payload={"content": "The mill burned down", "about": ["loc-mill"]},
        game_time="day 1, 10:00",
    )
    for number in range(3):
        town.happen(f"sight.omen-{number}", actor="npc-ada", game_time="day 2, 10:00")
    town.happen(MET, actor="npc-ada", target="npc-bo", game_time="day 40, 10:00")
    assert [content for content, *_ in town.knowledge("npc-bo")] == ["The mill burned down"]


def test_nobody_hears_what_they_saw_or_already_know() -> None:
    town = Town()
    town.happen(ENTERED, actor="npc-bo", location="loc-inn")
    theft_at_the_inn(town)  # Bo is at the inn and sees it too
    town.happen(MET, actor="npc-ada", target="npc-bo")
    assert town.knowledge("npc-bo") == []
    town.happen(MET, actor="npc-ada", target="npc-cy")
    town.happen(MET, actor="npc-bo", target="npc-cy")  # Cy already knows it from Ada
    assert town.knowledge("npc-cy") == [(STOLEN, "told", "npc-ada", 1, 0.72)]


KEPT_IN_MIND = (20, 50, 100, 180, 299)
"""The story days a character recalls a memory on to keep it in mind until day 300: each before
it is forgotten (a recall of a forgotten memory counts for nothing), each lengthening its
half-life."""


def kept_in_mind(town: Town, character: str, belief_ids: list[str]) -> None:
    """`character` recalls the memories on each day of `KEPT_IN_MIND`."""
    for day in KEPT_IN_MIND:
        town.happen(
            RECALLED,
            actor=character,
            payload={"belief_ids": belief_ids},
            game_time=f"day {day}, 10:00",
        )


def omen_told_then_forgotten(town: Town) -> str:
    """Zed shows Ada an omen on day 1 and she tells Bo within the hour. Zed keeps it in mind,
    recalling it until day 299; Bo, who was told it 298 days before (a belief of importance
    0.4: a half-life of some 48 story days), has long forgotten it. Zed's memory's id."""
    town.happen("sight.omen", actor="npc-zed", target="npc-ada", game_time="day 1, 10:00")
    town.happen(MET, actor="npc-ada", target="npc-bo", game_time="day 1, 11:00")
    [seen] = runtime_read(town.state(), "default", "town", "main", "npc-zed").recollections
    kept_in_mind(town, "npc-zed", [seen.belief_id])
    return seen.belief_id


def test_a_feeling_kept_beside_forgotten_news_is_no_holding_it_on_the_rumour_map() -> None:
    """Zed's threat left Ada the memory of it and a feeling about Zed, kept longer: by day 200
    she has forgotten the threat, and the map drew her as having seen it, 40% sure, by the
    feeling (which tells nothing: she no longer knows the news, and would be told it again)."""
    town = Town()
    town.happen(
        "social.threatened",
        actor="npc-zed",
        target="npc-ada",
        location="loc-inn",
        game_time="day 1, 10:00",
    )
    town.happen(ENTERED, actor="npc-x", location="loc-far", game_time="day 200, 10:00")
    ada = runtime_read(town.state(), "default", "town", "main", "npc-ada")
    assert [belief.kind for belief in ada.beliefs] == ["impression"]
    [threat] = ada.recollections
    drawn = rumour_map(town.state(), "default", "town", threat.belief_id, town.policy)
    [holder] = [holder for holder in drawn.holders if holder.entity_id == "npc-ada"]
    assert (holder.hops, holder.confidence, holder.forgot) == (None, None, True)


def test_the_rumour_map_shows_each_holder_with_their_fewest_hops_and_best_confidence() -> None:
    """README: each holder with their fewest hops and best confidence of what they still hold
    at the map's position: Bo forgot the omen told at one hop and was told it again at two (the
    map drew him at one hop, 72% sure, by the memory he forgot); Ada, who saw it on day 1, has
    forgotten it by day 300 and is drawn as such."""
    town = Town()
    zeds = omen_told_then_forgotten(town)
    town.happen(MET, actor="npc-zed", target="npc-cy", game_time="day 300, 10:00")
    town.happen(MET, actor="npc-cy", target="npc-bo", game_time="day 300, 11:00")
    holders = rumour_map(town.state(), "default", "town", zeds, town.policy).holders
    assert [(h.entity_id, h.hops, h.confidence, h.forgot) for h in holders] == [
        ("npc-ada", None, None, True),
        ("npc-bo", 2, 0.58, False),
        ("npc-cy", 1, 0.72, False),
        ("npc-zed", 0, 0.9, False),
    ]
    then = rumour_map(town.state(), "default", "town", zeds, town.policy, as_of_seq=2).holders
    assert [(h.entity_id, h.hops, h.forgot) for h in then] == [
        ("npc-ada", 0, False),  # on day 1, all held it
        ("npc-bo", 1, False),
        ("npc-zed", 0, False),
    ]


@pytest.mark.parametrize("how", ["met", "told"])
def test_news_a_listener_forgot_reaches_them_again(how: str) -> None:
    town = Town()
    zeds = omen_told_then_forgotten(town)
    day_300 = "day 300, 10:00"
    if how == "met":
        town.happen(MET, actor="npc-zed", target="npc-bo", game_time=day_300)
    else:
        town.happen(
            TOLD, actor="npc-zed", target="npc-bo", payload={"belief_id": zeds}, game_time=day_300
        )
    read = runtime_read(town.state(), "default", "town", "main", "npc-bo")
    first = next(m for m in read.beliefs if m.source_entity == "npc-ada")
    assert (
        retention(first, 299 * 24 * 60 + seen_minutes(first), NEVER_RECALLED, town.policy).state
        == "forgotten"
    )
    assert town.knowledge("npc-bo") == [
        (OMEN, "told", "npc-ada", 1, 0.72),
        (OMEN, "told", "npc-zed", 1, 0.72),
    ]


CURSED = {
    "content": "Ada is cursed",
    "facts": [{"subject": "npc-ada", "attribute": "cursed", "value": True}],
}
"""News of the omen, told naming no memory: the omen made its fact what the record says."""


def cursed_omen_told_to_bo_then_forgotten(town: Town) -> None:
    """Zed shows Ada a cursed omen on day 1, and she tells Bo of it (naming her memory) within
    the hour; by day 300 Bo has forgotten it."""
    town.happen(
        "sight.omen",
        actor="npc-zed",
        target="npc-ada",
        facts=CURSED["facts"],
        game_time="day 1, 10:00",
    )
    adas = belief_id("default", "town", "main", 1, "npc-ada", "event")
    town.happen(
        TOLD,
        actor="npc-ada",
        target="npc-bo",
        payload={"belief_id": adas},
        game_time="day 1, 11:00",
    )


def test_news_told_naming_no_memory_passes_on_the_tellers_closest_memory_of_it() -> None:
    """Bo forgot what Ada told him of the omen; on day 300 Cy, who had it from Zed (who kept it
    in mind), tells him again (two hops from the omen). Then the game's clock goes back to day
    2 (README: story time going back makes memories as fresh as they were then): Bo holds both
    tellings. Telling Dee, naming neither, he passes on the one fewer hops from the omen: she
    holds it two hops away, through Ada and Bo, as a retelling of his 0.72. Before, she held it
    one hop away, from Bo alone, at the 0.8 of news nobody stood behind."""
    town = Town()
    cursed_omen_told_to_bo_then_forgotten(town)
    zeds = belief_id("default", "town", "main", 1, "npc-zed", "event")
    kept_in_mind(town, "npc-zed", [zeds])
    day_300 = "day 300, 10:00"
    town.happen(
        TOLD, actor="npc-zed", target="npc-cy", payload={"belief_id": zeds}, game_time=day_300
    )
    cys = belief_id("default", "town", "main", len(town.lines), "npc-cy", "knowledge")
    town.happen(
        TOLD, actor="npc-cy", target="npc-bo", payload={"belief_id": cys}, game_time=day_300
    )
    assert town.knowledge("npc-bo") == [
        ("npc-zed omen npc-ada", "rumour", "npc-cy", 2, 0.58),
        ("npc-zed omen npc-ada", "told", "npc-ada", 1, 0.72),
    ]
    set_back = "day 2, 10:00"  # Ada's telling is held again, as fresh as it was then
    town.happen(TOLD, actor="npc-bo", target="npc-dee", payload=CURSED, game_time=set_back)
    assert town.knowledge("npc-dee") == [("Ada is cursed", "rumour", "npc-bo", 2, 0.58)]
    [heard] = runtime_read(town.state(), "default", "town", "main", "npc-dee").beliefs
    chain = provenance(town.state(), "default", "town", "main", "npc-dee", heard.belief_id).chain
    assert [(link.entity_id, link.told_by) for link in chain] == [
        ("npc-ada", None),
        ("npc-bo", "npc-ada"),
        ("npc-dee", "npc-bo"),
    ]


def test_news_told_naming_no_memory_is_the_tellers_own_once_it_has_forgotten_it() -> None:
    """Bo has forgotten the omen by day 300: what he tells Dee of it, naming no memory, is his
    own news, one hop away, at the 0.8 of news nobody stood behind."""
    town = Town()
    cursed_omen_told_to_bo_then_forgotten(town)
    town.happen(TOLD, actor="npc-bo", target="npc-dee", payload=CURSED, game_time="day 300, 10:00")
    assert town.knowledge("npc-dee") == [("Ada is cursed", "told", "npc-bo", 1, 0.8)]


def test_news_told_naming_a_memory_the_teller_has_forgotten_is_its_own() -> None:
    """Bo has forgotten by day 300 what Ada told him of the omen: telling Dee of it, naming that
    very memory, he stands behind nothing he holds, as when he names none (above). She holds it
    one hop away, at the 0.8 of news nobody stood behind. Before, she held it as he had stored
    it, two hops away and sure, however long ago he forgot it."""
    town = Town()
    cursed_omen_told_to_bo_then_forgotten(town)
    from_ada = belief_id("default", "town", "main", 2, "npc-bo", "knowledge")
    told = {**CURSED, "belief_id": from_ada}
    town.happen(TOLD, actor="npc-bo", target="npc-dee", payload=told, game_time="day 300, 10:00")
    assert town.knowledge("npc-dee") == [("Ada is cursed", "told", "npc-bo", 1, 0.8)]


def test_news_told_naming_a_faded_memory_passes_on_what_the_teller_still_holds() -> None:
    """On day 40 Bo's memory of Ada's telling has faded: named, it passes on as he holds it, as
    sure as his confidence times what he retains, less the retelling's loss. Before, it passed
    on as sure as the day he learned it."""
    town = Town()
    cursed_omen_told_to_bo_then_forgotten(town)
    read = runtime_read(town.state(), "default", "town", "main", "npc-bo")
    [from_ada] = [memory for memory in read.beliefs if memory.source_entity == "npc-ada"]
    day_40 = "day 40, 10:00"
    held = retention(from_ada, story_minutes(day_40), NEVER_RECALLED, town.policy)
    assert held.state == "faded"
    told = retold_confidence(round(from_ada.confidence * held.value, 2), town.policy)
    assert told < retold_confidence(from_ada.confidence, town.policy)
    named = {"belief_id": from_ada.belief_id}
    town.happen(TOLD, actor="npc-bo", target="npc-dee", payload=named, game_time=day_40)
    assert town.knowledge("npc-dee") == [(from_ada.content, "rumour", "npc-bo", 2, told)]


def test_news_relearned_on_a_timeline_is_still_known_on_a_branch_from_before() -> None:
    """Bo learns the omen again on day 300 on main; on a branch that left main the day Ada told
    him, he still holds it, and nobody tells him again there."""
    town = Town()
    omen_told_then_forgotten(town)
    town.happen(MET, actor="npc-zed", target="npc-bo", game_time="day 300, 10:00")
    town.happen(
        MET,
        actor="npc-ada",
        target="npc-bo",
        timeline="alt",
        seq=3,
        branch={"parent_timeline_id": "main", "after_seq": 2},
        game_time="day 1, 12:00",
    )
    assert len(town.knowledge("npc-bo", "main")) == 2
    assert town.knowledge("npc-bo", "alt") == [(OMEN, "told", "npc-ada", 1, 0.72)]


def test_news_told_at_an_event_is_not_passed_again_by_the_group_exchange_it_starts() -> None:
    """Zed tells Bo the mill burned (at midnight). At four, Yan tells Ada the same; the hour
    turns, so her guild exchanges news at that very event, and Bo has it to pass on. Ada holds
    it once, as Yan told it, and counts it once toward what she feels about the mill."""
    town = Town()
    news = {
        "content": "The mill burned down",
        "about": ["loc-mill"],
        "facts": [{"subject": "loc-mill", "attribute": "state", "value": "burned"}],
    }
    guild = {"npc-ada": {"group": "guild"}, "npc-bo": {"group": "guild"}}
    town.happen(
        TOLD,
        actor="npc-zed",
        target="npc-bo",
        payload=news,
        entities=guild,
        game_time="day 1, 00:00",
    )
    town.happen(TOLD, actor="npc-yan", target="npc-ada", payload=news, game_time="day 1, 04:00")
    assert town.knowledge("npc-ada") == [("The mill burned down", "told", "npc-yan", 1, 0.8)]
    read = runtime_read(town.state(), "default", "town", "main", "npc-ada")
    [mill] = [r for r in read.model_dump(mode="json")["relations"] if r["entity_id"] == "loc-mill"]
    assert mill["memories"] == 1


def test_rumours_stay_on_the_timeline_of_their_meeting() -> None:
    town = Town()
    theft_at_the_inn(town)
    town.happen(MET, actor="npc-ada", target="npc-bo")  # main seq 3
    town.happen(
        MET,
        actor="npc-ada",
        target="npc-cy",
        timeline="alt",
        seq=3,
        branch={"parent_timeline_id": "main", "after_seq": 2},
    )
    assert [who for _, _, who, _, _ in town.knowledge("npc-bo", "main")] == ["npc-ada"]
    assert town.knowledge("npc-bo", "alt") == []  # the save was loaded before they met
    assert town.knowledge("npc-cy", "alt") == [(STOLEN, "told", "npc-ada", 1, 0.72)]
    assert town.knowledge("npc-cy", "main") == []  # the child's meeting never reaches the parent


@pytest.mark.parametrize("distortion", [False, True])
def test_the_same_stream_always_spreads_the_same_rumours(distortion: bool) -> None:
    town = Town(distortion=distortion)
    theft_at_the_inn(town)
    for number, friend in enumerate(["npc-bo", "npc-cy", "npc-di", "npc-eve", "npc-fay"]):
        town.happen(MET, actor="npc-ada" if number == 0 else "npc-bo", target=friend)
    first, second = (
        replay_lines(town.lines, Projector(policies=lambda t, w: town.policy)),
        replay_lines(town.lines, Projector(policies=lambda t, w: town.policy)),
    )
    assert first.digests == second.digests
    heard = {npc: town.knowledge(npc) for npc in ["npc-cy", "npc-di", "npc-eve", "npc-fay"]}
    assert all(len(told) == 1 for told in heard.values())
    if not distortion:
        assert {told[0][0] for told in heard.values()} == {STOLEN}


@pytest.mark.parametrize("distortion", [False, True])
def test_only_distorted_rumours_contradict_the_world_record(distortion: bool) -> None:
    town = Town(distortion=distortion)
    town.happen(ENTERED, actor="npc-ada", location="loc-inn")
    town.happen(
        "crime.purse-stolen",
        actor="npc-thief",
        target="npc-ada",
        location="loc-inn",
        facts=[{"subject": "npc-ada", "attribute": "gold_lost", "value": 10}],
    )
    friends = [f"npc-friend-{number}" for number in range(12)]
    for friend in friends:
        town.happen(MET, actor="npc-ada", target=friend)
    state = town.state()
    beliefs = [
        runtime_read(state, "default", "town", "main", f).model_dump(mode="json")["beliefs"][0]
        for f in friends
    ]
    diverging = [b for b in beliefs if b["diverging"]]
    if distortion:
        assert 0 < len(diverging) < len(beliefs)  # some retellings grew the number, not all
    else:
        assert diverging == []
        assert {b["content"] for b in beliefs} == {STOLEN}


def test_every_relation_counts_each_memory_held_once_rumours_included() -> None:
    """A busy tavern, spreading on: one meeting tells a listener several pieces of news about
    the same people, beside what they saw. Each character's relations are still the rule over
    every memory they hold: each memory once per other entity it is about or came from, the
    mean feeling to 2 decimals (halves up), the count and the last seq."""
    events = tavern_story(400, seed=3, characters=12, places=3)
    policy = resolve(None, {"memory": {"spreading": {"enabled": True}}})
    state = replay_lines(encoded(events), Projector(policies=lambda t, w: policy)).state
    record = timelines.load(state, "default", "tavern-0", "main")
    assert record is not None
    keys, line = memory_keys(state, "default", "tavern-0"), timelines.ancestry(state, record)
    characters = sorted({e["actor"] for e in events if str(e.get("actor")).startswith("npc-")})
    several_at_once = 0
    for character in characters:
        held = held_in_order(state, keys, line, character)
        feelings: dict[str, list[Decimal]] = defaultdict(list)
        last: dict[str, int] = defaultdict(int)
        for memory in held:
            for entity in dict.fromkeys([*memory.about, memory.source_entity]):
                if entity is not None and entity != character:
                    feelings[entity].append(Decimal(str(memory.feeling)))
                    last[entity] = max(last[entity], memory.seq)
        several_at_once += len(held) - len({memory.seq for memory in held})
        expected = sorted(
            (
                {
                    "entity_id": entity,
                    "feeling": float(
                        (sum(added) / len(added)).quantize(Decimal("0.01"), ROUND_HALF_UP)
                    ),
                    "memories": len(added),
                    "last_seq": last[entity],
                }
                for entity, added in feelings.items()
            ),
            key=lambda relation: (
                -relation["memories"],
                -relation["last_seq"],
                relation["entity_id"],
            ),
        )
        read = runtime_read(state, "default", "tavern-0", "main", character)
        assert read.model_dump(mode="json")["relations"] == expected[:50]
    assert several_at_once > 100  # many memories shared an event with another of their holder's


GUILD = {"npc-ada": {"group": "guild"}, "npc-bo": {"group": "guild"}}


def test_with_the_npc_part_turned_off_no_rumour_spreads() -> None:
    """README: without `npc` no memory is formed, no line refereed and no rumour spread. Ada's
    omen, seen while the part was on, reaches her guild at the next interval; with the part
    turned off by then, it does not."""
    town = Town(group_interval_minutes=60)
    town.happen(
        "sight.omen", actor="npc-ada", witnesses=[], entities=GUILD, game_time="day 1, 10:00"
    )
    town.happen("weather.rain", location="loc-x", game_time="day 1, 11:05")
    assert [content for content, *_ in town.knowledge("npc-bo")] == ["npc-ada omen"]

    in_force = [town.policy]
    projector = Projector(policies=lambda tenant, world: in_force[0])
    state = MemoryState()
    seen, rained = messages(town.lines)
    projector.receive(state, seen)
    in_force[0] = merge_policy(town.policy, {"memory": {"npc": False}})
    projector.receive(state, rained)
    with pytest.raises(NotFound):
        runtime_read(state, "default", "town", "main", "npc-bo")


def test_a_group_exchanges_once_in_the_first_interval_of_the_story_too() -> None:
    """Intervals are counted from day 0, 00:00, a story minute of 0 included: news seen then
    passes at the next interval, not at the next event of the same one."""
    town = Town(group_interval_minutes=60, group_exchange_limit=1)
    town.happen(
        "sight.omen", actor="npc-ada", witnesses=[], entities=GUILD, game_time="day 0, 00:00"
    )
    town.happen("weather.rain", location="loc-x", game_time="day 0, 00:30")
    assert town.knowledge("npc-bo") == []
    town.happen("weather.rain", location="loc-x", game_time="day 0, 01:05")
    assert [content for content, *_ in town.knowledge("npc-bo")] == ["npc-ada omen"]
