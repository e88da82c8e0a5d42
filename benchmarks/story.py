"""Tavern-like event streams for the benchmarks: deterministic for a given seed.

A world has a few places and ~50 characters who wander between them. Most events happen at a
place (so whoever is there perceives them: ~3 characters with the defaults), some are
characters telling each other news (naming the teller's own belief), some are a player's
lines, and now and then an entity is (re)declared. `DIALOGUE_MIX` makes half the events lines
of conversation between players and characters, where the character is, with their real time.
"""

from __future__ import annotations

import random
from collections.abc import Iterator, Sequence
from datetime import UTC, datetime
from typing import Any

import orjson

from projections.event_keys import (
    ENTITY_DECLARED,
    LOCATION_ENTERED,
    NPC_REPLIED,
    PLAYER_SAID,
    TOLD,
)
from projections.memories import belief_id

PLAYER = "player-1"
TENANT = "default"
TIMELINE = "main"

#: (key, has a target, payload item) of the generic events; key words drive rules weighing.
HAPPENINGS: tuple[tuple[str, bool, bool], ...] = (
    ("social.drink-shared", True, False),
    ("social.song-sung", False, False),
    ("combat.brawl", True, False),
    ("trade.gift-given", True, True),
    ("trade.item-stolen", True, True),
    ("quest.notice-posted", False, False),
    ("social.insulted", True, False),
    ("trade.bargain-struck", True, True),
)

INNS = ("Crooked Lantern", "Salty Gull", "Drowned Rat", "Golden Ox", "Hanged Man", "Quiet Mill")

#: Relative weights of the mix: movement, happening, told, player-said, declaration.
MIX = (("move", 20), ("happening", 62), ("told", 10), ("said", 6), ("declare", 2))
#: The same, with as many lines of conversation (player-said, npc-replied) as everything else.
DIALOGUE_MIX = (*MIX, ("line", 88))
TALKERS = ("player-1", "player-2", "player-3")
SAYINGS = (
    "Have you seen my brother?",
    "<:coin:77> Two ales, and keep them coming [grins]",
    "The harbour master owes me money.",
    "Leave me be, stranger.",
    "They say the mill is haunted since the storm.",
)
REAL_START = 1_714_557_600
"""The real time (epoch seconds) of the first line: one second per event after it."""


def game_time(index: int) -> str:
    """Story time one minute per event from day 1, 08:00."""
    minutes = 8 * 60 + index
    return f"day {1 + minutes // 1440}, {minutes // 60 % 24:02d}:{minutes % 60:02d}"


def character_ids(count: int) -> list[str]:
    return [f"npc-{number:03d}" for number in range(count)]


def place_ids(count: int) -> list[str]:
    return [f"loc-{number:02d}" for number in range(count)]


class _World:
    """One world's generator state: where everyone is, and what they did last."""

    def __init__(self, world_id: str, characters: int, places: int, rng: random.Random) -> None:
        self.world_id = world_id
        self.rng = rng
        self.characters = character_ids(characters)
        self.places = place_ids(places)
        self.where: dict[str, str] = {}
        self.last_act: dict[str, int] = {}  # character -> seq of a happening they were actor of
        self.seq = 0

    def event(self, key: str, **fields: Any) -> dict[str, Any]:
        self.seq += 1
        return {
            "world_instance_id": self.world_id,
            "timeline_id": TIMELINE,
            "seq": self.seq,
            "key": key,
            "game_time": game_time(self.seq),
            **{name: value for name, value in fields.items() if value is not None},
        }

    def opening(self) -> Iterator[dict[str, Any]]:
        """Declare the places, the player and everyone; put everyone somewhere."""
        entities: dict[str, Any] = {
            place: {"name": f"The {INNS[n % len(INNS)]} {n}", "kind": "place"}
            for n, place in enumerate(self.places)
        }
        entities[PLAYER] = {"name": "Ilse"}
        yield self.event(ENTITY_DECLARED, entities=entities)
        for number, character in enumerate(self.characters):
            yield self.move(
                character,
                self.places[number % len(self.places)],
                {character: {"name": f"Villager {number}", "kind": "character"}},
            )

    def move(
        self, character: str, place: str, entities: dict[str, Any] | None = None
    ) -> dict[str, Any]:
        self.where[character] = place
        return self.event(LOCATION_ENTERED, actor=character, location=place, entities=entities)

    def someone_with_company(self) -> tuple[str, str | None]:
        """A random character and, if anyone shares their place, one of those."""
        actor = self.rng.choice(self.characters)
        company = [c for c, p in self.where.items() if p == self.where[actor] and c != actor]
        return actor, (self.rng.choice(company) if company else None)

    def next(self, kind: str) -> dict[str, Any]:
        rng = self.rng
        if kind == "move":
            return self.move(rng.choice(self.characters), rng.choice(self.places))
        actor, other = self.someone_with_company()
        if kind == "happening":
            key, targeted, with_item = rng.choice(HAPPENINGS)
            item = f"item-{rng.randrange(40):02d}" if with_item else None
            event = self.event(
                key,
                actor=actor,
                target=other if targeted else None,
                location=self.where[actor],
                payload={"item": item} if item else None,
                facts=[{"subject": item, "attribute": "holder", "value": other or actor}]
                if item
                else None,
            )
            self.last_act[actor] = self.seq
            return event
        if kind == "told" and other is not None:
            payload: dict[str, Any] = {"content": f"{actor} saw something at {self.where[actor]}"}
            if actor in self.last_act and rng.random() < 0.6:
                payload = {
                    "belief_id": belief_id(
                        TENANT, self.world_id, TIMELINE, self.last_act[actor], actor, "event"
                    )
                }
            return self.event(TOLD, actor=actor, target=other, payload=payload)
        if kind == "line":
            return self.line(actor)
        if kind in ("said", "told"):  # told with nobody to tell: the player speaks instead
            return self.event(
                PLAYER_SAID,
                actor=PLAYER,
                target=actor,
                players=[PLAYER],
                payload={"text": f"Have you seen the {rng.choice(['ring', 'map', 'boy'])}?"},
            )
        group = f"guild-{rng.randrange(4)}"
        return self.event(
            ENTITY_DECLARED, entities={actor: {"name": f"Villager {actor[4:]}", "group": group}}
        )

    def line(self, character: str) -> dict[str, Any]:
        """A line between a player and `character`, where the character is, either way."""
        player = self.rng.choice(TALKERS)
        replied = self.rng.random() < 0.5
        return self.event(
            NPC_REPLIED if replied else PLAYER_SAID,
            actor=character if replied else player,
            target=player if replied else character,
            players=[player],
            location=self.where[character],
            payload={"text": self.rng.choice(SAYINGS)},
            occurred_at=datetime.fromtimestamp(REAL_START + self.seq + 1, UTC).isoformat(),
        )


def tavern_story(
    count: int,
    *,
    seed: int = 7,
    worlds: Sequence[str] = ("tavern-0",),
    characters: int = 50,
    places: int = 24,
    mix: Sequence[tuple[str, int]] = MIX,
) -> list[dict[str, Any]]:
    """`count` events (the opening included), interleaved round-robin across `worlds`."""
    rng = random.Random(seed)
    states = [_World(world, characters, places, rng) for world in worlds]
    openings = [world.opening() for world in states]
    kinds = [kind for kind, _ in mix]
    weights = [weight for _, weight in mix]
    events: list[dict[str, Any]] = []
    turn = 0
    while len(events) < count:
        world = states[turn % len(states)]
        opening = next(openings[turn % len(states)], None)
        events.append(opening or world.next(rng.choices(kinds, weights)[0]))
        turn += 1
    return events


def encoded(events: Sequence[dict[str, Any]]) -> list[bytes]:
    """Each event as the JSON bytes a game server would publish."""
    return [orjson.dumps(event) for event in events]


WITNESS = "npc-watcher"
HALL = "loc-hall"


def witness_story(memories: int, *, seed: int = 5, world: str = "history-0") -> Iterator[bytes]:
    """One character entering a place, then witnessing `memories` events there: one memory each.

    The player acts (players form no memories), so only the witness remembers; every tenth
    event is the player's line to the witness instead (a `knowledge` memory).
    """
    rng = random.Random(seed)
    declare = {
        WITNESS: {"name": "Mara", "kind": "character"},
        HALL: {"name": "The Hall"},
        PLAYER: {"name": "Ilse"},
    }
    opening = {"actor": WITNESS, "location": HALL, "entities": declare}
    yield _encoded(world, 1, LOCATION_ENTERED, opening)
    for seq in range(2, memories + 2):
        if seq % 10 == 0:
            fields: dict[str, Any] = {"target": WITNESS, "payload": {"text": f"line {seq}"}}
            key = PLAYER_SAID
        else:
            key, _, _ = rng.choice(HAPPENINGS)
            fields = {"location": HALL, "payload": {"round": seq}}
        yield _encoded(world, seq, key, {"actor": PLAYER, "players": [PLAYER], **fields})


def _encoded(world: str, seq: int, key: str, fields: dict[str, Any]) -> bytes:
    return orjson.dumps(
        {
            "world_instance_id": world,
            "timeline_id": TIMELINE,
            "seq": seq,
            "key": key,
            "game_time": game_time(seq),
            **fields,
        }
    )
