"""Tavern-like stories for the fault and fuzz tests, published with duplicates and reordering.

Characters enter places, watch fights and thefts, tell each other what they saw (naming the
belief they hold), hear players; each world branches once from a point in the middle.
"""

from __future__ import annotations

import random
from typing import Any

import orjson

from projections.memories import belief_id

CHARACTERS = [f"npc-{name}" for name in ("mara", "tomas", "ilka", "bram", "odo", "sefa")]
PLACES = ["loc-tavern", "loc-market", "loc-docks"]
PLAYER = "player-1"
KEYS = [
    "combat.enemy-defeated",
    "item.stolen",
    "trade.gift-given",
    "quest.helped",
    "story.happened",
]


def _game_time(index: int) -> str:
    minutes = 18 * 60 + index * 3
    day, rest = divmod(minutes, 24 * 60)
    return f"day {day + 1}, {rest // 60:02d}:{rest % 60:02d}"


def _events(world: str, timeline: str, seqs: range, rng: random.Random) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for seq in seqs:
        event: dict[str, Any] = {
            "world_instance_id": world,
            "timeline_id": timeline,
            "seq": seq,
            "game_time": _game_time(seq),
        }
        roll = rng.random()
        actor = rng.choice(CHARACTERS)
        if seq <= len(CHARACTERS) or roll < 0.25:
            mover = CHARACTERS[seq - 1] if seq <= len(CHARACTERS) else actor
            event |= {
                "key": "loreweaver.movement.location-entered",
                "actor": mover,
                "location": rng.choice(PLACES),
                "entities": {mover: {"name": mover[4:].title(), "kind": "character"}},
            }
        elif roll < 0.55:
            target = rng.choice([*CHARACTERS, None])
            event |= {
                "key": rng.choice(KEYS),
                "actor": rng.choice([actor, PLAYER]),
                "target": target,
                "location": rng.choice(PLACES),
                "players": [PLAYER],
                "facts": [{"subject": actor, "attribute": "mood", "value": rng.randrange(3)}],
            }
        elif roll < 0.85:
            listener = rng.choice([c for c in CHARACTERS if c != actor])
            earlier = rng.randrange(1, seq)
            event |= {
                "key": "loreweaver.conversation.told",
                "actor": actor,
                "target": listener,
                "payload": {
                    "belief_id": belief_id("default", world, timeline, earlier, actor, "event")
                },
            }
            if rng.random() < 0.3:
                event["payload"]["content"] = "They say the sailor is dead"
        else:
            event |= {
                "key": "loreweaver.conversation.player-said",
                "actor": PLAYER,
                "target": actor,
                "players": [PLAYER],
                "payload": {"text": "I will find your son.", "facts": []},
                # its own real time, so that the live run and the file replay agree
                "occurred_at": f"2024-05-01T12:{seq % 60:02d}:00Z",
            }
        out.append(event)
    return out


def story(worlds: int, events_per_world: int, seed: int) -> list[bytes]:
    """A reproducible interleaving of worlds, each with a branch from its middle."""
    rng = random.Random(seed)
    streams: list[list[dict[str, Any]]] = []
    for number in range(worlds):
        world = f"tavern-{seed}-{number}"
        main = _events(world, "main", range(1, events_per_world + 1), rng)
        after = events_per_world // 2
        reload = _events(world, "reload", range(after + 1, after + 1 + events_per_world // 3), rng)
        reload[0]["branch"] = {"parent_timeline_id": "main", "after_seq": after}
        # the reload is published once main has got past the branch point, then alongside it
        rest, stream = main[after + 5 :], main[: after + 5]
        while rest or reload:
            for part in (rest, reload):
                if part:
                    stream.append(part.pop(0))
        streams.append(stream)
    lines: list[bytes] = []
    while any(streams):
        pick = rng.choice([s for s in streams if s])
        lines.append(orjson.dumps(pick.pop(0)))
    return lines


def noisy(
    lines: list[bytes], seed: int, duplicated: float = 0.1, reordered: float = 0.1
) -> list[bytes]:
    """`lines` with ~10% sent twice (a little later) and ~10% swapped with their successor."""
    rng = random.Random(seed)
    out = list(lines)
    for index in range(len(out) - 1):
        if rng.random() < reordered:
            out[index], out[index + 1] = out[index + 1], out[index]
    for raw in [raw for raw in lines if rng.random() < duplicated]:
        at = out.index(raw)
        out.insert(min(len(out), at + 1 + rng.randrange(20)), raw)
    return out
