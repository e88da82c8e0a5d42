"""A worker keeps worlds' memories in memory beside its state, derived from it: the recall
index (their words, cues and vectors) and the read cache (encoded runtime reads). A deletion it
takes in drops the world from both at once (`Rumourmill.forget_deleted`, as `take` lays the
deletion in): they held its memories until the world was next looked at, which for a deleted
world may be never (SPEC: a deletion removes everything of the world)."""

from __future__ import annotations

from typing import Any

import pytest

from projections.delivery import SourceMessage, world_key
from projections.projector import Projector
from projections.recall import RecallQuery, recall
from projections.runtime_read import read_position, runtime_read
from projections.state import MemoryState
from schemas.policy import Policy
from streams.app import Rumourmill
from streams.replay import replay_lines
from streams.settings import Settings
from tests.projections.test_deletion import POLICY, deletion, story

WORLDS = [("acme", "save-1"), ("acme", "save-2"), ("default", "save-1")]


def served(state: MemoryState) -> Rumourmill:
    """A worker whose recall index and read cache hold each world, as a recall and a runtime
    read of Mara leave them."""
    unused: Any = None
    mill = Rumourmill(unused, Settings(), *[unused] * 5)
    for tenant, world in WORLDS:
        found = recall(
            state,
            mill.recall_index,
            tenant,
            world,
            "main",
            "npc-mara",
            RecallQuery("son"),
            Policy(),
        ).read()
        assert any("your son" in memory.content for memory in found.memories)
        mill.read_cache.put(
            (tenant, world, "main", "npc-mara", None),
            read_position(state, tenant, world, "main"),
            runtime_read(state, tenant, world, "main", "npc-mara").to_json(),
        )
    return mill


@pytest.mark.parametrize(
    ("line", "deleted"),
    [
        (deletion("world.deleted", "save-1", "acme"), [("acme", "save-1")]),
        (deletion("tenant.deleted", "*", "acme"), [("acme", "save-1"), ("acme", "save-2")]),
    ],
    ids=["world", "tenant"],
)
def test_a_deletion_taken_in_leaves_nothing_of_the_world_in_the_workers_memory(
    line: bytes, deleted: list[tuple[str, str]]
) -> None:
    projector = Projector(policies=lambda tenant, world: POLICY)
    state = replay_lines(
        [line for world in WORLDS for line in story(world[1], world[0])], projector
    ).state
    mill = served(state)
    positions = {world: read_position(state, *world, "main") for world in WORLDS}

    intake = projector.receive(state, SourceMessage("events", 0, 10_000, world_key(line), line))
    mill.forget_deleted([intake])

    kept = [world for world in WORLDS if world not in deleted]
    assert sorted(mill.recall_index.worlds()) == sorted(kept)
    cached = [
        mill.read_cache.get((*world, "main", "npc-mara", None), positions[world]) is not None
        for world in WORLDS
    ]
    assert cached == [world in kept for world in WORLDS]
    assert len(mill.read_cache) == len(kept)
