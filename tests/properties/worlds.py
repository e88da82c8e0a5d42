"""Random worlds for the property tests, and the runs that compare them with the oracle.

A history is drawn choice by choice: characters, places, players, movements, generic events of
every kind of weighing (with and without witnesses, payloads of ids, numbers and JSON), `told`
(with and without the `belief_id` of a belief the teller really holds, picked from a
generation-time oracle; without one, now and then claiming the facts of news the teller
holds), `player-said`, meetings, declarations and groups, branches from random points
(branches of branches, down to long ancestries), facts of every JSON kind (`0`, `1`, `true` and
`false` among them; now and then one the record holds already, said again or claimed by news),
a policy that varies the settings that change what is
remembered, then a delivery with duplicated and locally reordered messages.

Small worlds draw each choice from Hypothesis (so a failure shrinks to a short history);
crowded worlds (`CROWD`: many events around one character, long id lists) draw from a seeded
`random.Random`, so they can be large enough to reach every cap of the read.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

import orjson
from hypothesis import strategies as st

from projections.delivery import SourceMessage, world_key
from projections.policy import resolve
from projections.projector import Projector
from projections.runtime_read import NotFound, runtime_read
from projections.state import MemoryState
from schemas.policy import Policy
from tests.oracle import RECALLED, Oracle, OracleNotFound, belief_id, compare_reads

T = TypeVar("T")

CHARACTERS = ["npc-a", "npc-b", "npc-c", "npc-d", "npc-e", "npc-f", "npc-g"]
PLACES = ["loc-inn", "loc-road", "loc-well", "harbour"]
PLAYERS = ["player-1", "player-2"]
GENERIC_KEYS = [
    "combat.enemy-defeated",
    "combat.brawl",
    "item.stolen",
    "crime.purse-stolen",
    "trade.gift-given",
    "quest.helped",
    "healing.healed",
    "threat.insulted",
    "social.threatened",
    "story.happened",
    "travel.arrived",
    "tavern.said-hello",
    "happened",
    "loreweaver.memory.dialogue-summarised",  # bookkeeping: forms no memory
    "loreweaver.social.characters-met",
]
MOVES = ["loreweaver.movement.location-entered", "loreweaver.movement.character-entered-location"]
FACT_VALUES: list[Any] = [
    "alive",
    "dead",
    0,
    1,
    1.0,
    2,
    3,
    2.5,
    True,
    False,
    None,
    [1, True],
    [1.0, True],
    {"a": 0},
]
"""0 and 1 next to false and true, which they must never equal, and 1.0, which equals 1."""
SAYINGS = [
    'Ilse said "run" at the inn (gold: 5)',
    "The sailor is dead",
    "Ada owes 3 gold at The Crooked Lantern (or 4)",
    "“Hush”, said Bram in the north road, 12 times",
    "(an aside) it happened",
    "Ilse beat the drunk sailor senseless",
    "Oskar robbed Mara and left",
    "Oskar stole 1,000 gold, 1000 by his count, on 3,4 nights",
    "   ",
]
NAMES = {
    "npc-a": "Ada",
    "npc-b": "Bram",
    "npc-c": "Cora",
    "npc-d": "Dov",
    "npc-e": "Eli 2",
    "loc-inn": "The Crooked Lantern",
    "loc-road": "the north road",
    "loc-well": "Ada's Well 7",
    "harbour": "the harbour",
    "player-1": "Ilse",
    "guard": "the guard",
}
"""Some with a number inside ("Eli 2"), and one inside another ("Ada" in "Ada's Well 7"): a
rumour never grows a name's number, and "Ada's Well 7" is no mention of Ada."""


class Choices(Protocol):
    """Where a world's choices come from: Hypothesis, or a seeded `random.Random`."""

    def integer(self, low: int, high: int, label: str) -> int: ...

    def pick(self, items: Sequence[T], label: str) -> T: ...

    def some(
        self, items: Sequence[T], max_size: int, label: str, *, unique: bool = False, least: int = 0
    ) -> list[T]: ...


@dataclass
class DrawnChoices:
    """Choices drawn by Hypothesis (a failure shrinks them)."""

    data: st.DataObject

    def integer(self, low: int, high: int, label: str) -> int:
        return self.data.draw(st.integers(low, high), label=label)

    def pick(self, items: Sequence[T], label: str) -> T:
        return self.data.draw(st.sampled_from(items), label=label)

    def some(
        self, items: Sequence[T], max_size: int, label: str, *, unique: bool = False, least: int = 0
    ) -> list[T]:
        drawn = st.lists(st.sampled_from(items), min_size=least, max_size=max_size, unique=unique)
        return self.data.draw(drawn, label=label)


@dataclass
class SeededChoices:
    """Choices made by a seeded `random.Random`: cheap, so worlds can be large."""

    rng: random.Random

    def integer(self, low: int, high: int, label: str) -> int:
        return self.rng.randint(low, high)

    def pick(self, items: Sequence[T], label: str) -> T:
        return self.rng.choice(items)

    def some(
        self, items: Sequence[T], max_size: int, label: str, *, unique: bool = False, least: int = 0
    ) -> list[T]:
        size = self.rng.randint(least, max_size)
        if unique:
            return self.rng.sample(list(items), min(size, len(items)))
        return [self.rng.choice(items) for _ in range(size)]


@dataclass(frozen=True)
class Shape:
    """How large and how busy a world is."""

    max_events: int = 20
    least_events: int = 1
    max_characters: int = 6
    max_branches: int = 4
    branching: int = 6
    """About one event in this many starts a branch (while branches are left)."""
    spreading: float = 0.0
    """The share of worlds with rumours spreading (`memory.spreading.enabled`)."""
    things: int = 0
    """Extra ids (items and places) for payloads and `about`: relations by the dozen."""
    focus: int = 0
    """How many extra times the first character is picked as a target or listener."""
    chatter: int = 0
    """How many extra times talk (`told`, `player-said`, meetings) is picked as an event."""
    minutes: int = 90
    """At most this many story minutes pass between two events."""
    recalls: int = 0
    """How many times a character recalling some of its memories is among the events picked."""


SMALL = Shape()
CROWD = Shape(
    max_events=300,
    least_events=150,
    max_characters=8,
    max_branches=6,
    branching=30,
    spreading=0.7,
    things=70,
    focus=20,
    chatter=2,
)


@dataclass
class History:
    """One generated world: the policy, the events as published, and their delivery."""

    tenant: str
    world: str
    policy_document: dict[str, Any]
    policy: Policy
    events: list[dict[str, Any]]
    delivery: list[bytes]
    ids: list[str] = field(default_factory=list)

    def describe(self) -> str:
        lines = [f"policy: {orjson.dumps(self.policy_document).decode()}", "delivery:"]
        lines += [f"  {raw.decode(errors='replace')}" for raw in self.delivery]
        return "\n".join(lines)


def game_time(minute: int) -> str:
    day, rest = divmod(minute, 24 * 60)
    return f"day {day + 1}, {rest // 60:02d}:{rest % 60:02d}"


@dataclass
class Cast:
    """Who and what a world's events can name."""

    characters: list[str]
    things: list[str]
    focus: int
    chatter: int
    recalls: int = 0

    @property
    def anyone(self) -> list[str]:
        return [*self.characters, *PLAYERS]

    @property
    def targets(self) -> list[str]:
        """Characters, the first one `focus` times more often."""
        return [*self.characters, *[self.characters[0]] * self.focus]


def draw_history(choose: Choices, shape: Shape = SMALL) -> History:
    """Draw one world of `shape` and its delivery."""
    tenant = choose.pick(["default", "acme"], "tenant")
    world = "w"
    characters = choose.some(
        [*CHARACTERS, "guard"], shape.max_characters, "characters", unique=True, least=2
    )
    things = [f"item-{n}" for n in range(shape.things // 2)]
    things += [f"loc-{n}" for n in range(shape.things - len(things))]
    cast = Cast(characters, things, shape.focus, shape.chatter, shape.recalls)
    document = draw_policy(choose, characters)
    group_field = None
    if choose.pick(range(12), "spreading") < shape.spreading * 12:  # integers() lean to 0
        group_field = choose.pick(["group", "group", "guild"], "group field")
        document["memory"]["spreading"] = draw_spreading(choose, group_field)
    policy = resolve(None, document)
    scout = Oracle(policy)

    lines: dict[str, int] = {"main": 0}
    newest = "main"
    events: list[dict[str, Any]] = []
    minute = 18 * 60
    for _ in range(choose.integer(shape.least_events, shape.max_events, "events")):
        branch = None
        if (
            len(lines) <= shape.max_branches
            and events
            and choose.integer(1, shape.branching, "branch") == 1
        ):
            # half the branches leave the newest timeline: branches of branches of branches
            parent = (
                newest if choose.integer(0, 1, "deep") else choose.pick(sorted(lines), "parent")
            )
            after = choose.integer(0, lines[parent], "after")
            timeline = newest = f"t{len(lines)}"
            branch = {"parent_timeline_id": parent, "after_seq": after}
            lines[timeline] = after
        elif choose.integer(0, 2, "played on"):  # a game mostly plays on from its last load
            timeline = newest
        else:
            timeline = choose.pick(sorted(lines), "timeline")
        seq = lines[timeline] + 1
        lines[timeline] = seq
        minute += choose.integer(0, shape.minutes, "minutes")
        event = _draw_event(choose, tenant, world, timeline, seq, cast, scout, group_field)
        if choose.integer(0, 4, "untimed") > 0:
            event["game_time"] = game_time(minute)
        if branch is not None:
            event["branch"] = branch
        if group_field is not None and not events and choose.integer(0, 1, "muster"):
            # the cast declares its groups up front: exchanges from the first interval on
            entities = event.setdefault("entities", {})
            for character in characters:
                entities[character] = entities.get(character, {}) | {
                    group_field: _draw_group(choose, group_field)
                }
        if tenant != "default":
            event["tenant_id"] = tenant
        events.append(event)
        scout.deliver(orjson.dumps(event))

    delivery = [orjson.dumps(event) for event in events]
    count = len(delivery)
    if count > 1:
        swaps = choose.some(range(count - 1), max(1, count // 4), "swaps")
        for index in swaps:
            delivery[index], delivery[index + 1] = delivery[index + 1], delivery[index]
    for index in choose.some(range(count), count // 4 + 1, "duplicates"):
        later = choose.integer(0, 4, "later")
        delivery.insert(min(len(delivery), index + later + 1), delivery[index])
    if choose.integer(0, 9, "garbage") == 0:
        at = choose.integer(0, len(delivery), "garbage at")
        delivery.insert(at, b'{"world_instance_id": "w", "seq":')
    ids = sorted({*characters, *PLAYERS, "npc-nobody", "loc-inn"})
    return History(tenant, world, document, policy, events, delivery, ids)


def draw_policy(choose: Choices, characters: list[str]) -> dict[str, Any]:
    """A policy document: persistence, and now and then any setting that changes memories."""
    memory: dict[str, Any] = {}
    document: dict[str, Any] = {"memory": memory}
    persistent_characters = choose.some(characters, 2, "persistent chars", unique=True)
    persistent_kinds = choose.some(
        ["event", "knowledge", "impression"], 2, "persistent kinds", unique=True
    )
    if persistent_characters or persistent_kinds:
        memory["persistent"] = {"characters": persistent_characters, "kinds": persistent_kinds}
    if choose.integer(0, 9, "fallback") == 0:
        memory["perception_location_fallback"] = False
    if choose.integer(0, 19, "small buffer") == 0:
        document["sequencing"] = {"max_deferred": 2}
    if choose.integer(0, 3, "settings") == 0:
        setting = choose.integer(0, 8, "setting")
        if setting == 0:
            # 0.5, 0.75 and 0.85 land on half-cents (0.35 x 0.5 = 0.175)
            factors = [0.5, 0.6, 0.75, 0.85, 0.9, 1.0, 0.0]
            memory["retelling_factor"] = choose.pick(factors, "factor")
        elif setting == 1:
            memory["confidence"] = {"seen": 0.95, "told": 0.65, "player": 0.55}
        elif setting == 2:
            memory["impression_threshold"] = choose.pick([0.0, 0.2, 0.7], "threshold")
        elif setting == 3:
            memory["remember_movement"] = True
        elif setting == 4:
            memory["world"] = False
        elif setting == 5:
            memory["npc"] = choose.integer(0, 3, "npc") > 0
        elif setting == 6:
            memory["entity_patterns"] = {"place": ["loc-*", "harb*"], "character": ["npc-*", "g*"]}
        elif setting == 8:
            memory["lies_believable"] = choose.integer(0, 1, "lies believable") == 1
            # 0.75 lands on half-cents (0.7 x 0.75 = 0.525); thresholds low enough to convince
            memory["referee"] = {
                "weaken": choose.pick([0.5, 0.75, 0.0], "weaken"),
                "convinced_from": choose.pick([0.4, 0.1], "convinced from"),
                "doubting_from": 0.0,
            }
        else:
            memory["weights"] = {
                "gift": {"target": {"importance": 0.95, "feeling": -0.45, "arousal": 0.9}},
                "generic": {"witness": {"importance": 0.25, "feeling": 0.15, "arousal": 0.1}},
            }
    return document


def _draw_event(
    choose: Choices,
    tenant: str,
    world: str,
    timeline: str,
    seq: int,
    cast: Cast,
    scout: Oracle,
    group_field: str | None = None,
) -> dict[str, Any]:
    characters, anyone = cast.characters, cast.anyone
    event: dict[str, Any] = {"world_instance_id": world, "timeline_id": timeline, "seq": seq}
    kinds = ["generic", "move", "told", "generic", "said", "move", "told", "generic", "declare"]
    kinds += ["deed"]
    kinds += ["told", "said", "move"] * cast.chatter
    kinds += ["recall"] * cast.recalls
    if group_field is not None:  # rumours spread: more meetings
        kinds += ["move", "meet"] * (1 + cast.chatter)
    kind = choose.pick(kinds, "kind")
    players: list[str] = []
    if kind == "move":
        event |= {
            "key": choose.pick(MOVES, "move key"),
            "actor": choose.pick(anyone, "mover"),
            "location": choose.pick(PLACES, "to"),
        }
    elif kind == "generic":
        actor = choose.pick([*anyone, None], "actor")
        target = choose.pick([*cast.targets, None, *PLAYERS], "target")
        event |= {"key": choose.pick(GENERIC_KEYS, "key"), "actor": actor, "target": target}
        if choose.integer(0, 3, "unlocated") > 0:
            event["location"] = choose.pick(PLACES, "location")
        witnesses = choose.integer(0, 3, "witnesses")
        if witnesses == 1:
            event["witnesses"] = []
        elif witnesses == 2:
            event["witnesses"] = choose.some(anyone, 3, "witnessed by")
        players = [who for who in (actor, target) if who in PLAYERS]
        if actor in characters and choose.integer(0, 7, "played") == 0:
            players.append(actor)  # a player plays this character here: a player, not a mind
        event["payload"] = _draw_payload(choose, cast)
        if choose.integer(0, 1, "facts"):
            recorded = scout.recorded_facts(tenant, world, timeline)
            event["facts"] = [_draw_or_recorded_fact(choose, characters, recorded)]
    elif kind == "deed":  # news about one character alone, which nobody tells them
        event |= {
            "key": choose.pick(GENERIC_KEYS[:-1], "key"),
            "actor": choose.pick(characters, "actor"),
            "witnesses": choose.some(characters, 3, "witnessed by", least=1),
        }
    elif kind == "recall":  # the character brings memories to mind: their clocks restart
        who = choose.pick(characters, "recaller")
        own = [m.belief_id for m in scout.visible_memories(tenant, world, timeline, who)]
        # and one not formed yet, which the next event may form: a recall before it is none
        coming = belief_id(tenant, world, timeline, seq + 1, who, "event")
        recalled = choose.some([*own, *own, "not-a-memory", coming], 3, "recalled")
        event |= {"key": RECALLED, "actor": who, "payload": {"belief_ids": recalled}}
    elif kind == "meet":
        event |= {
            "key": "loreweaver.social.characters-met",
            "actor": choose.pick([*characters, None], "actor"),
            "target": choose.pick([*anyone, None], "target"),
        }
        if choose.integer(0, 1, "met list"):
            named = [*anyone, "npc-nobody", 0, 3]
            event["payload"] = {"characters": choose.some(named, 3, "met")}
        if choose.integer(0, 1, "met where"):
            event["location"] = choose.pick(PLACES, "location")
    elif kind == "told":
        teller = choose.pick(characters, "teller")
        listener = choose.pick(cast.targets, "listener")
        event |= {"key": "loreweaver.conversation.told", "actor": teller, "target": listener}
        payload: dict[str, Any] = {}
        if choose.integer(0, 1, "words"):
            payload["content"] = choose.pick(SAYINGS, "saying")
        held = scout.visible_memories(tenant, world, timeline, teller)
        pick = choose.integer(0, 4, "belief")
        if pick <= 2 and held:
            payload["belief_id"] = choose.pick([m.belief_id for m in held], "held")
        elif pick == 3:
            # a belief the teller does not hold here: someone else's, or another timeline's
            payload["belief_id"] = belief_id(
                tenant,
                world,
                choose.pick(["main", "t1", "t2"], "elsewhere"),
                choose.integer(1, seq, "at"),
                choose.pick(characters, "whose"),
                choose.pick(["event", "knowledge", "impression"], "what"),
            )
        if choose.integer(0, 3, "about") == 0:
            payload["about"] = choose.some([*anyone, *cast.things], 2 + len(cast.things), "about")
        claims = choose.integer(0, 3, "claims")
        if claims == 0:
            recorded = scout.recorded_facts(tenant, world, timeline)
            claimed = _draw_or_recorded_fact(choose, characters, recorded)
            payload["facts"] = [claimed, {"not": "a fact"}]
        elif claims == 1 and "belief_id" not in payload:
            # news the teller holds, told in its own words, naming no memory of it
            known = [m.facts for m in held if m.facts]
            if known:
                retold = choose.pick(known, "retold")
                payload["facts"] = [fact.model_dump(mode="json") for fact in retold]
        if choose.integer(0, 3, "overheard") == 0:
            event["witnesses"] = choose.some(characters, 2, "overheard by")
        event["payload"] = payload
    elif kind == "said":
        player = choose.pick(PLAYERS, "player")
        players = [player]
        event |= {
            "key": "loreweaver.conversation.player-said",
            "actor": player,
            "target": choose.pick(cast.targets, "listener"),
            "payload": {"text": choose.pick(["I will find your son.", "Give me the key"], "text")},
        }
        if choose.integer(0, 1, "claim"):
            event["payload"]["facts"] = [_draw_fact(choose, characters)]
        if choose.integer(0, 3, "said about") == 0:  # what the referee finds challenged
            event["payload"]["about"] = choose.some([*anyone, *cast.things], 2, "said of")
    else:
        event["key"] = "world.entity-declared"
    if players:
        event["players"] = players
    declares = choose.integer(0, 2 if group_field is None else 1, "declares") == 0
    if declares or kind == "declare":
        declared = choose.some(sorted(NAMES), 3, "declared", unique=True, least=1)
        entities: dict[str, dict[str, Any]] = {
            entity: {"name": NAMES[entity]} for entity in declared
        }
        if "guard" in entities:
            entities["guard"]["kind"] = "character"
        if "harbour" in entities:
            entities["harbour"]["kind"] = "place"
        if group_field is not None:
            for entity in entities:
                grouped = choose.integer(0, 7, "grouped") if entity in characters else 0
                if grouped == 1:  # leaves whatever group it was in
                    entities[entity][group_field] = None
                elif grouped > 1:
                    entities[entity][group_field] = _draw_group(choose, group_field)
        if choose.integer(0, 9, "odd kind") == 0:
            entities["npc-d"] = {"kind": "item"}
        event["entities"] = entities
    return {key: value for key, value in event.items() if value is not None}


def _draw_payload(choose: Choices, cast: Cast) -> dict[str, Any]:
    """A generic event's payload: nothing, ids, numbers, odd JSON, a long list of things."""
    shape = choose.integer(0, 5, "payload")
    if shape == 1:
        return {"enemy": choose.pick(cast.anyone, "enemy")}
    if shape == 2:
        return {"gold": choose.integer(0, 12, "gold"), "with": ["item-knife", "npc-a"]}
    if shape == 3:
        notes = ['he said "run" twice', "x: a, b", "2.5", "3 of 12", "x (y)", "(3)"]
        return {"note": choose.pick(notes, "note")}  # brackets nest in "(note: ...)"
    if shape == 4:
        return {"odd": choose.pick([True, None, 1.5, [], {}, [["npc-a", 3]], {"k": [1]}], "odd")}
    if shape == 5 and cast.things:
        return {"with": choose.some(cast.things, 15, "things", unique=True, least=3)}
    return {}


def _draw_or_recorded_fact(
    choose: Choices, characters: list[str], recorded: list[dict[str, Any]]
) -> dict[str, Any]:
    """A fact drawn, or now and then one the world record holds already: said again
    unchanged, or claimed by news (news of the event that made it what the record says)."""
    if recorded and choose.integer(0, 2, "from the record") < 2:
        return choose.pick(recorded, "recorded")
    return _draw_fact(choose, characters)


def _draw_fact(choose: Choices, characters: list[str]) -> dict[str, Any]:
    return {
        "subject": choose.pick(characters, "subject"),
        "attribute": choose.pick(["status", "status", "gold"], "attribute"),
        "value": choose.pick(FACT_VALUES, "value"),
    }


def draw_spreading(choose: Choices, group_field: str) -> dict[str, Any]:
    """A spreading policy: on, with short or long group intervals and small or large limits."""
    spreading: dict[str, Any] = {
        "enabled": True,
        "group_interval_minutes": choose.pick([30, 60, 240], "interval"),
    }
    if group_field != "group":
        spreading["group_field"] = group_field
    if choose.integer(0, 2, "small limits") == 0:
        spreading["per_meeting"] = choose.integer(0, 2, "per meeting")
        spreading["group_exchange_limit"] = choose.integer(0, 2, "group limit")
    if choose.integer(0, 1, "distortion"):
        spreading["distortion"] = True
    return spreading


def _draw_group(choose: Choices, group_field: str) -> Any:
    """A group for a declaration: a name, or (in a custom field) a list of names."""
    groups = ["crew", "watch"]
    if group_field != "group" and choose.integer(0, 1, "groups list"):
        return choose.some(groups, 2, "groups")
    return choose.pick(groups, "group")


@dataclass
class Run:
    """The production core and the oracle fed the same delivery."""

    history: History
    state: MemoryState = field(default_factory=MemoryState)
    oracle: Oracle | None = None
    problems: list[str] = field(default_factory=list)
    reads: int = 0
    answered: dict[int, list[Any]] = field(default_factory=dict)
    outcomes: dict[int, str] = field(default_factory=dict)
    """The first outcome production gave each offset."""

    def __post_init__(self) -> None:
        self.oracle = Oracle(self.history.policy)
        policy = self.history.policy
        self.projector = Projector(policies=lambda tenant, world: policy)

    def deliver(self, upto: int | None = None, start: int = 0) -> None:
        assert self.oracle is not None
        for offset, raw in enumerate(self.history.delivery[start:upto], start=start):
            intake = self.projector.receive(
                self.state, SourceMessage("events", 0, offset, world_key(raw), raw)
            )
            got = [(a.timeline_id, a.seq, a.outcome.value) for a in intake.acks]
            self.outcomes.setdefault(offset, got[0][2])
            if offset in self.answered:  # a redelivered offset: the same acks, no effect
                want = self.answered[offset]
            else:
                want = self.answered[offset] = self.oracle.deliver(raw)
            if got[:1] != want[:1] or sorted(got[1:], key=str) != sorted(want[1:], key=str):
                self.problems.append(f"acks of message {offset}: production {got} != oracle {want}")
            rejected = intake.acks[0].outcome.value == "rejected"
            if rejected != bool(intake.dead_letters):
                self.problems.append(
                    f"message {offset}: rejected={rejected}, dead letters {intake.dead_letters}"
                )

    def compare_reads(self, when: str) -> None:
        assert self.oracle is not None
        tenant, world = self.history.tenant, self.history.world
        for timeline in [*self.oracle.timeline_ids(tenant, world), "never-seen"]:
            for npc in self.history.ids:
                self.reads += 1
                try:
                    actual: Any = runtime_read(self.state, tenant, world, timeline, npc).model_dump(
                        mode="json"
                    )
                except NotFound:
                    actual = "404"
                try:
                    expected: Any = self.oracle.read(tenant, world, timeline, npc)
                except OracleNotFound:
                    expected = "404"
                if actual == "404" or expected == "404":
                    if actual != expected:
                        shown = (
                            "404" if expected == "404" else orjson.dumps(expected, default=float)
                        )
                        self.problems.append(
                            f"{when} read {timeline}/{npc}: production "
                            f"{'404' if actual == '404' else 'a read'}, oracle {shown!s}"
                        )
                    continue
                for line in compare_reads(actual, expected):
                    self.problems.append(f"{when} read {timeline}/{npc}: {line}")
