"""Heads (`versions.write_headed`, news heads) and waited-on marks over random branching
streams: reads through heads answer as the versions (the news index) do at every position of
every timeline, delivery order and duplicates change no projection, and a store of format 1 at
any point of the stream migrates to exactly what this release holds there."""

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
    NEWS,
    NEWS_HEADS,
    OCCUPANTS,
    WAITED_ON,
    WAITING_CHILDREN,
)
from projections.keys import pack, pack_scope, unpack
from projections.memory_store import (
    NEWS_HEAD_ENTRIES,
    MemoryKeys,
    head_entries,
    memory_keys,
    newest_news,
    news_head,
    scopes,
    with_news,
)
from projections.migrations import FORMAT_KEY, upgrade
from projections.policy import resolve
from projections.projector import Projector
from projections.state import MemoryState
from projections.timelines import Ancestry
from projections.versions import read_headed_through, read_through
from projections.whereabouts import location_of, occupants_of
from tests.projections.test_migrations import format_1_of, without_shortcuts

POLICY = resolve(
    None,
    {
        "memory": {  # movements remembered: news, told on, in each character's news head
            "remember_movement": True,
            "spreading": {"enabled": True, "group_interval_minutes": 60},
        }
    },
)
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


def fed(
    events: list[bytes],
    after: Callable[[MemoryState], None] = lambda _: None,
    state: MemoryState | None = None,
    first_offset: int = 0,
) -> MemoryState:
    """`events` taken into `state` (else a new store), from the source offset given."""
    if state is None:
        state = MemoryState()
        upgrade(state)
    projector = Projector(policies=lambda tenant, world: POLICY)
    for offset, raw in enumerate(events, start=first_offset):
        projector.receive(state, SourceMessage("t", 0, offset, b"w", raw))
        after(state)
    return state


def upgraded_midway(events: list[bytes]) -> MemoryState:
    """The first half of `events` in a store of format 1 (without news heads), upgraded, then
    the rest taken in: its characters' news heads are made from the index as news comes."""
    half = len(events) // 2
    old = format_1_of(fed(events[:half]))
    upgrade(old)
    return fed(events[half:], state=old, first_offset=half)


def projection_records(state: MemoryState) -> list[tuple[bytes, bytes]]:
    return [(key, value) for key, value in without_shortcuts(state) if key != FORMAT_KEY]


def migrates_to_itself(state: MemoryState) -> None:
    old = format_1_of(state)
    upgrade(old)
    assert projection_records(old) == projection_records(state)


def scope(space: str, *parts: str) -> Callable[[str], bytes]:
    return lambda timeline: pack_scope(space, "default", "w", timeline, *parts)


def news_in_index(
    state: MemoryState, keys: MemoryKeys, ancestry: Ancestry, character: str, limit: int
) -> list[str]:
    """The belief ids of the character's newest news, read off the whole news index."""
    found = []
    for segment in scopes(keys, ancestry):
        prefix = keys.scoped(NEWS, segment.timeline_id, character)
        for key, _ in state.scan(prefix):
            seq, belief = unpack(key[len(prefix) :])
            if int(seq) <= segment.upto_seq:
                found.append((int(seq), str(belief)))
    return [belief for _, belief in sorted(found, reverse=True)[:limit]]


def tellers_read_as_the_index(state: MemoryState, ancestry: Ancestry) -> None:
    """Every actor's newest news, as tellers read it (through news heads), is the index's."""
    keys = memory_keys(state, "default", "w")
    for actor in ACTORS:
        for limit in (1, 3, NEWS_HEAD_ENTRIES, NEWS_HEAD_ENTRIES + 2):
            told = newest_news(state, keys, ancestry, actor, limit)
            expected = news_in_index(state, keys, ancestry, actor, limit)
            assert [memory.belief_id for memory in told] == expected


@pytest.mark.parametrize("seed", range(40))
def test_heads_read_as_versions_and_a_format_1_store_migrates_to_them(seed: int) -> None:
    rng = random.Random(seed)
    shape, events = story(rng)
    in_order = fed(events)
    shuffled = fed(delivery(rng, shape, events), migrates_to_itself)
    upgraded = upgraded_midway(events)
    assert world_digest(shuffled, "default", "w") == world_digest(in_order, "default", "w")
    assert world_digest(upgraded, "default", "w") == world_digest(in_order, "default", "w")
    assert len(list(in_order.scan(pack(LOCATIONS)))) > len(ACTORS)
    assert list(in_order.scan(pack(GROUP_EXCHANGES)))
    heads = [head_entries(head) for _, head in in_order.scan(pack(NEWS_HEADS))]
    assert any(len(entries) == NEWS_HEAD_ENTRIES for entries in heads)  # some a branch cuts
    for state in (shuffled, in_order, upgraded):
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
                tellers_read_as_the_index(state, ancestry)
                exchanged = scope(GROUP_EXCHANGES), scope(GROUP_EXCHANGE_HEADS)
                assert read_headed_through(state, ancestry, *exchanged) == read_through(
                    state, ancestry, exchanged[0]
                )


@pytest.mark.parametrize("seed", range(20))
def test_news_heads_dropped_while_spreading_is_off_are_made_again_from_the_index(
    seed: int,
) -> None:
    rng = random.Random(seed)
    _, events = story(rng)
    quiet = resolve(None, {"memory": {"remember_movement": True}})
    state = MemoryState()
    upgrade(state)
    policy = [POLICY]
    projector = Projector(policies=lambda tenant, world: policy[0])
    dropped = 0
    for offset, raw in enumerate(events):
        policy[0] = quiet if offset % 3 == 1 else POLICY
        heads = len(list(state.scan(pack(NEWS_HEADS))))
        projector.receive(state, SourceMessage("t", 0, offset, b"w", raw))
        dropped += policy[0] is quiet and len(list(state.scan(pack(NEWS_HEADS)))) < heads
        timeline = orjson.loads(raw)["timeline_id"]
        record = timelines.load(state, "default", "w", timeline)
        if record is not None:
            tellers_read_as_the_index(state, timelines.ancestry(state, record))
    assert dropped  # a head was dropped, and made again where spreading came back


@pytest.mark.parametrize("seed", range(20))
def test_a_head_moved_by_news_is_the_head_of_that_news_and_what_it_held(seed: int) -> None:
    """Storing news moves its character's head to the newest of the news and of what the head
    held (`with_news`): newer news, older, the same again (an event applied again), and some
    of each."""
    rng = random.Random(seed)
    for _ in range(200):
        pool = [pack(rng.randrange(12), rng.choice("abc") * rng.randrange(1, 4)) for _ in range(9)]
        held = news_head(rng.sample(pool, rng.randrange(1, 7)))
        news = rng.sample(pool, rng.randrange(1, 6))
        assert with_news(held, news) == news_head([*news, *head_entries(held)])
