"""Random small worlds for the property tests, and the runs that compare them with the oracle.

A history is drawn step by step with `st.data()`: characters, places, players, movements,
generic events (with and without witnesses), `told` (with and without the `belief_id` of a
belief the teller really holds, picked from a generation-time oracle), `player-said`,
declarations, branches from random points (branches of branches too), a policy with
persistent characters or kinds, then a delivery with duplicated and locally reordered
messages.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import orjson
from hypothesis import strategies as st

from projections.delivery import SourceMessage
from projections.memories import belief_id
from projections.policy import resolve
from projections.projector import Projector
from projections.runtime_read import NotFound, runtime_read
from projections.state import MemoryState
from schemas.policy import Policy
from tests.oracle import Oracle, OracleNotFound, compare_reads

CHARACTERS = ["npc-a", "npc-b", "npc-c", "npc-d"]
PLACES = ["loc-inn", "loc-road", "loc-well"]
PLAYERS = ["player-1", "player-2"]
GENERIC_KEYS = [
    "combat.enemy-defeated",
    "item.stolen",
    "trade.gift-given",
    "quest.helped",
    "story.happened",
    "threat.insulted",
    "loreweaver.social.characters-met",
]
MOVES = ["loreweaver.movement.location-entered", "loreweaver.movement.character-entered-location"]
FACT_VALUES: list[Any] = ["alive", "dead", 2, 3, True, False, None]
"""No 0 or 1: production conflates them with false and true (see test_oracle_findings)."""
NAMES = {
    "npc-a": "Ada",
    "npc-b": "Bram",
    "npc-c": "Cora",
    "npc-d": "Dov",
    "loc-inn": "The Crooked Lantern",
    "loc-road": "the north road",
    "player-1": "Ilse",
    "guard": "the guard",
}


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


def draw_history(
    data: st.DataObject,
    *,
    max_events: int = 14,
    max_branches: int = 3,
    spreading: float = 0.0,
) -> History:
    """Draw one world and its delivery; rumours spread in about a `spreading` share of them."""
    draw = data.draw
    tenant = draw(st.sampled_from(["default", "acme"]), label="tenant")
    world = "w"
    characters = draw(
        st.lists(st.sampled_from([*CHARACTERS, "guard"]), min_size=2, max_size=5, unique=True),
        label="characters",
    )
    document: dict[str, Any] = {"memory": {}}
    persistent_characters = draw(
        st.lists(st.sampled_from(characters), max_size=2, unique=True), label="persistent chars"
    )
    persistent_kinds = draw(
        st.lists(st.sampled_from(["event", "knowledge", "impression"]), max_size=2, unique=True),
        label="persistent kinds",
    )
    if persistent_characters or persistent_kinds:
        document["memory"]["persistent"] = {
            "characters": persistent_characters,
            "kinds": persistent_kinds,
        }
    if draw(st.integers(0, 9), label="fallback") == 0:
        document["memory"]["perception_location_fallback"] = False
    if draw(st.integers(0, 19), label="small buffer") == 0:
        document["sequencing"] = {"max_deferred": 2}
    group_field = None
    share = draw(st.sampled_from(range(12)), label="spreading")  # integers() lean to 0
    if share < spreading * 12:
        group_field = draw(st.sampled_from(["group", "group", "guild"]), label="group field")
        document["memory"]["spreading"] = draw_spreading(data, group_field)
    policy = resolve(None, document)
    scout = Oracle(policy)

    lines: dict[str, int] = {"main": 0}
    events: list[dict[str, Any]] = []
    minute = 18 * 60
    for _ in range(draw(st.integers(1, max_events), label="events")):
        branch = None
        if len(lines) <= max_branches and events and draw(st.integers(0, 5), label="branch") == 0:
            parent = draw(st.sampled_from(sorted(lines)), label="parent")
            after = draw(st.integers(0, lines[parent]), label="after")
            timeline = f"t{len(lines)}"
            branch = {"parent_timeline_id": parent, "after_seq": after}
            lines[timeline] = after
        else:
            timeline = draw(st.sampled_from(sorted(lines)), label="timeline")
        seq = lines[timeline] + 1
        lines[timeline] = seq
        minute += draw(st.integers(0, 90), label="minutes")
        event = _draw_event(data, tenant, world, timeline, seq, characters, scout, group_field)
        if draw(st.integers(0, 4), label="untimed") > 0:
            event["game_time"] = game_time(minute)
        if branch is not None:
            event["branch"] = branch
        if group_field is not None and not events and draw(st.booleans(), label="muster"):
            # the cast declares its groups up front: exchanges from the first interval on
            entities = event.setdefault("entities", {})
            for character in characters:
                entities[character] = entities.get(character, {}) | {
                    group_field: _draw_group(data, group_field)
                }
        if tenant != "default":
            event["tenant_id"] = tenant
        events.append(event)
        scout.deliver(orjson.dumps(event))

    delivery = [orjson.dumps(event) for event in events]
    count = len(delivery)
    if count > 1:
        swaps = draw(
            st.lists(st.integers(0, count - 2), max_size=max(1, count // 4)), label="swaps"
        )
        for index in swaps:
            delivery[index], delivery[index + 1] = delivery[index + 1], delivery[index]
    duplicates = draw(
        st.lists(st.tuples(st.integers(0, count - 1), st.integers(0, 4)), max_size=count // 4 + 1),
        label="duplicates",
    )
    for index, later in duplicates:
        delivery.insert(min(len(delivery), index + later + 1), delivery[index])
    if draw(st.integers(0, 9), label="garbage") == 0:
        delivery.insert(draw(st.integers(0, len(delivery))), b'{"world_instance_id": "w", "seq":')
    ids = sorted({*characters, *PLAYERS, "npc-nobody", "loc-inn"})
    return History(tenant, world, document, policy, events, delivery, ids)


def _draw_event(
    data: st.DataObject,
    tenant: str,
    world: str,
    timeline: str,
    seq: int,
    characters: list[str],
    scout: Oracle,
    group_field: str | None = None,
) -> dict[str, Any]:
    draw = data.draw
    anyone = [*characters, *PLAYERS]
    event: dict[str, Any] = {"world_instance_id": world, "timeline_id": timeline, "seq": seq}
    kinds = ["generic", "move", "told", "generic", "said", "move", "told", "generic", "declare"]
    if group_field is not None:  # rumours spread: more meetings
        kinds += ["move", "meet"]
    kind = draw(st.sampled_from(kinds), label="kind")
    players: list[str] = []
    if kind == "move":
        event |= {
            "key": draw(st.sampled_from(MOVES)),
            "actor": draw(st.sampled_from(anyone)),
            "location": draw(st.sampled_from(PLACES)),
        }
    elif kind == "generic":
        actor = draw(st.sampled_from([*anyone, None]), label="actor")
        target = draw(st.sampled_from([*characters, None, *PLAYERS]), label="target")
        event |= {"key": draw(st.sampled_from(GENERIC_KEYS)), "actor": actor, "target": target}
        if draw(st.integers(0, 3), label="unlocated") > 0:
            event["location"] = draw(st.sampled_from(PLACES))
        witnesses = draw(st.integers(0, 3), label="witnesses")
        if witnesses == 1:
            event["witnesses"] = []
        elif witnesses == 2:
            event["witnesses"] = draw(st.lists(st.sampled_from(anyone), max_size=3))
        players = [who for who in (actor, target) if who in PLAYERS]
        shape = draw(st.integers(0, 3), label="payload")
        if shape == 1:
            event["payload"] = {"enemy": draw(st.sampled_from(anyone))}
        elif shape == 2:
            event["payload"] = {"gold": draw(st.integers(0, 9)), "with": ["item-knife", "npc-a"]}
        if draw(st.booleans(), label="facts"):
            event["facts"] = [
                {
                    "subject": draw(st.sampled_from(characters)),
                    "attribute": "status",
                    "value": draw(st.sampled_from(FACT_VALUES)),
                }
            ]
    elif kind == "meet":
        event |= {
            "key": "loreweaver.social.characters-met",
            "actor": draw(st.sampled_from([*characters, None]), label="actor"),
            "target": draw(st.sampled_from([*anyone, None]), label="target"),
        }
        if draw(st.booleans(), label="met list"):
            named = st.sampled_from([*anyone, "npc-nobody"]) | st.integers(0, 3)
            event["payload"] = {"characters": draw(st.lists(named, max_size=3), label="met")}
        if draw(st.booleans(), label="met where"):
            event["location"] = draw(st.sampled_from(PLACES))
    elif kind == "told":
        teller = draw(st.sampled_from(characters), label="teller")
        listener = draw(st.sampled_from(characters), label="listener")
        event |= {"key": "loreweaver.conversation.told", "actor": teller, "target": listener}
        payload: dict[str, Any] = {}
        if draw(st.booleans(), label="words"):
            payload["content"] = draw(
                st.sampled_from(['Ilse said "run" at the inn (gold: 5)', "The sailor is dead"])
            )
        held = scout.visible_memories(tenant, world, timeline, teller)
        pick = draw(st.integers(0, 4), label="belief")
        if pick <= 2 and held:
            payload["belief_id"] = draw(st.sampled_from([m.belief_id for m in held]))
        elif pick == 3:
            # a belief the teller does not hold here: someone else's, or another timeline's
            payload["belief_id"] = belief_id(
                tenant,
                world,
                draw(st.sampled_from(["main", "t1", "t2"])),
                draw(st.integers(1, seq)),
                draw(st.sampled_from(characters)),
                draw(st.sampled_from(["event", "knowledge", "impression"])),
            )
        if draw(st.integers(0, 3), label="about") == 0:
            payload["about"] = draw(st.lists(st.sampled_from(anyone), max_size=2))
        if draw(st.integers(0, 3), label="claims") == 0:
            payload["facts"] = [
                {
                    "subject": draw(st.sampled_from(characters)),
                    "attribute": "status",
                    "value": draw(st.sampled_from(FACT_VALUES)),
                },
                {"not": "a fact"},
            ]
        if draw(st.integers(0, 3), label="overheard") == 0:
            event["witnesses"] = draw(st.lists(st.sampled_from(characters), max_size=2))
        event["payload"] = payload
    elif kind == "said":
        player = draw(st.sampled_from(PLAYERS))
        players = [player]
        event |= {
            "key": "loreweaver.conversation.player-said",
            "actor": player,
            "target": draw(st.sampled_from(characters)),
            "payload": {
                "text": draw(st.sampled_from(["I will find your son.", "Give me the key"]))
            },
        }
        if draw(st.booleans(), label="claim"):
            event["payload"]["facts"] = [
                {
                    "subject": draw(st.sampled_from(characters)),
                    "attribute": "status",
                    "value": "dead",
                }
            ]
    else:
        event["key"] = "world.entity-declared"
    if players:
        event["players"] = players
    declares = draw(st.integers(0, 2 if group_field is None else 1), label="declares") == 0
    if declares or kind == "declare":
        declared = draw(
            st.lists(st.sampled_from(sorted(NAMES)), min_size=1, max_size=3, unique=True)
        )
        entities = {entity: {"name": NAMES[entity]} for entity in declared}
        if "guard" in entities:
            entities["guard"]["kind"] = "character"
        if group_field is not None:
            for entity in entities:
                if entity in characters and draw(st.integers(0, 3), label="grouped") > 0:
                    entities[entity][group_field] = _draw_group(data, group_field)
        if draw(st.integers(0, 9), label="odd kind") == 0:
            entities["npc-d"] = {"kind": "item"}
        event["entities"] = entities
    return {key: value for key, value in event.items() if value is not None}


def draw_spreading(data: st.DataObject, group_field: str) -> dict[str, Any]:
    """A spreading policy: on, with short or long group intervals and small or large limits."""
    draw = data.draw
    spreading: dict[str, Any] = {
        "enabled": True,
        "group_interval_minutes": draw(st.sampled_from([30, 60, 240]), label="interval"),
    }
    if group_field != "group":
        spreading["group_field"] = group_field
    if draw(st.integers(0, 2), label="small limits") == 0:
        spreading["per_meeting"] = draw(st.integers(0, 2), label="per meeting")
        spreading["group_exchange_limit"] = draw(st.integers(0, 2), label="group limit")
    if draw(st.booleans(), label="distortion"):
        spreading["distortion"] = True
    return spreading


def _draw_group(data: st.DataObject, group_field: str) -> Any:
    """A group for a declaration: a name, or (in a custom field) a list of names."""
    groups = ["crew", "watch"]
    if group_field != "group" and data.draw(st.booleans(), label="groups list"):
        return data.draw(st.lists(st.sampled_from(groups), max_size=2), label="groups")
    return data.draw(st.sampled_from(groups), label="group")


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
                self.state, SourceMessage("events", 0, offset, b"w", raw)
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
