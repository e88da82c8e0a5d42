"""Heads (`versions.write_headed`) and waited-on marks over random branching streams: reads
through heads answer as the versions do at every position of every timeline, delivery order
and duplicates change no projection, and a store of format 1 at any point of the stream
migrates to exactly what this release holds there."""

from __future__ import annotations

import random
from collections.abc import Callable

import orjson
import pytest

from projections import timelines
from projections.delivery import SourceMessage
from projections.digest import world_digest
from projections.key_prefixes import (
    GROUP_EXCHANGE_HEADS,
    GROUP_EXCHANGES,
    LOCATIONS,
    OCCUPANTS,
    WAITED_ON,
    WAITING_CHILDREN,
)
from projections.keys import pack, pack_scope
from projections.migrations import FORMAT_KEY, upgrade
from projections.policy import resolve
from projections.projector import Projector
from projections.state import MemoryState
from projections.versions import read_headed_through, read_through
from projections.whereabouts import location_of, occupants_of
from tests.projections.test_migrations import format_1_of

POLICY = resolve(None, {"memory": {"spreading": {"enabled": True, "group_interval_minutes": 60}}})
ACTORS = ["npc-a", "npc-b", "npc-c"]
PLACES = ["inn", "well", "mill"]
Shape = dict[str, tuple[str | None, int]]
"""Each timeline's parent and branch point."""


def story(rng: random.Random) -> tuple[Shape, list[bytes]]:
    """A main timeline and four branches (of branches too), each a run of movements."""
    shape: Shape = {"main": (None, 0)}
    lengths = {"main": rng.randint(2, 8)}
    for name in ["b1", "b2", "b3", "b4"]:
        source = rng.choice(list(shape))
        start = shape[source][1]
        shape[name] = (source, max(1, rng.randint(start, start + lengths[source])))
        lengths[name] = rng.randint(1, 6)
    events = []
    for name, (parent, after) in shape.items():
        for seq in range(after + 1, after + lengths[name] + 1):
            document: dict[str, object] = {
                "key": "loreweaver.movement.location-entered",
                "world_instance_id": "w",
                "timeline_id": name,
                "seq": seq,
                "actor": rng.choice(ACTORS),
                "location": rng.choice(PLACES),
                "game_time": f"day 1, {seq // 4 + rng.randint(0, 1):02d}:00",
            }
            if seq == after + 1 and parent is not None:
                document["branch"] = {"parent_timeline_id": parent, "after_seq": after}
            events.append(orjson.dumps(document))
    return shape, events


def delivery(rng: random.Random, shape: Shape, events: list[bytes]) -> list[bytes]:
    """The events shuffled, a third twice, each branch's first after its parent's first."""
    pool = events + rng.sample(events, k=len(events) // 3)
    rng.shuffle(pool)
    firsts: dict[str, bytes] = {}
    for raw in events:
        firsts.setdefault(orjson.loads(raw)["timeline_id"], raw)
    seen: set[str] = set()
    order: list[bytes] = []
    while pool:
        for index, raw in enumerate(pool):
            timeline = orjson.loads(raw)["timeline_id"]
            parent = shape[timeline][0]
            if raw == firsts[timeline] and parent is not None and parent not in seen:
                continue
            order.append(pool.pop(index))
            if raw == firsts[timeline]:
                seen.add(timeline)
            break
    return order


def fed(events: list[bytes], after: Callable[[MemoryState], None] = lambda _: None) -> MemoryState:
    state = MemoryState()
    upgrade(state)
    projector = Projector(policies=lambda tenant, world: POLICY)
    for offset, raw in enumerate(events):
        projector.receive(state, SourceMessage("t", 0, offset, b"w", raw))
        after(state)
    return state


def projection_records(state: MemoryState) -> list[tuple[bytes, bytes]]:
    return [(key, value) for key, value in state.items() if key != FORMAT_KEY]


def migrates_to_itself(state: MemoryState) -> None:
    old = format_1_of(state)
    upgrade(old)
    assert projection_records(old) == projection_records(state)


def scope(space: str, *parts: str) -> Callable[[str], bytes]:
    return lambda timeline: pack_scope(space, "default", "w", timeline, *parts)


@pytest.mark.parametrize("seed", range(40))
def test_heads_read_as_versions_and_a_format_1_store_migrates_to_them(seed: int) -> None:
    rng = random.Random(seed)
    shape, events = story(rng)
    in_order = fed(events)
    shuffled = fed(delivery(rng, shape, events), migrates_to_itself)
    assert world_digest(shuffled, "default", "w") == world_digest(in_order, "default", "w")
    assert len(list(in_order.scan(pack(LOCATIONS)))) > len(ACTORS)
    assert list(in_order.scan(pack(GROUP_EXCHANGES)))
    for state in (shuffled, in_order):
        assert list(state.scan(pack(WAITING_CHILDREN))) == []
        assert list(state.scan(pack(WAITED_ON))) == []
        for name in shape:
            record = timelines.load(state, "default", "w", name)
            assert record is not None and not record.waiting_for_parent
            for upto in range(record.processed_seq + 2):
                ancestry = timelines.ancestry(state, record, upto)
                for actor in ACTORS:
                    raw = read_through(state, ancestry, scope(LOCATIONS, actor))
                    where = location_of(state, "default", "w", ancestry, actor)
                    assert where == (None if raw is None else orjson.loads(raw))
                for place in PLACES:
                    raw = read_through(state, ancestry, scope(OCCUPANTS, place))
                    there = occupants_of(state, "default", "w", ancestry, place)
                    assert there == (set() if raw is None else set(orjson.loads(raw)))
                exchanged = scope(GROUP_EXCHANGES), scope(GROUP_EXCHANGE_HEADS)
                assert read_headed_through(state, ancestry, *exchanged) == read_through(
                    state, ancestry, exchanged[0]
                )
