"""Timelines: ancestries of branches of branches, branch points, and where a position comes from.

The world used throughout (positions are inherited up to each branch point):

    main   1 .. 20
    b1     branches main after 10, own positions 11 ..
    b2     branches b1 after 15 (sees main up to 10, b1 up to 15)
    b3     branches b1 after 5, before b1's own branch point (sees main up to 5 only)
    b4     branches b2 after 12 (b2's position 12 is b1's own)
"""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from projections import timelines
from projections.runtime_read import runtime_read
from projections.state import MemoryState
from projections.timelines import Segment
from schemas import MAX_SEQ
from schemas.records import TimelineRecord
from streams.replay import replay_lines
from tests.reads import answer

BRANCHES = {"b1": ("main", 10), "b2": ("b1", 15), "b3": ("b1", 5), "b4": ("b2", 12)}


def record(timeline_id: str, **fields: Any) -> TimelineRecord:
    parent, after = BRANCHES.get(timeline_id, (None, 0))
    values: dict[str, Any] = {
        "tenant_id": "default",
        "world_instance_id": "w",
        "timeline_id": timeline_id,
        "parent_timeline_id": parent,
        "after_seq": after,
        "acknowledged_seq": after,
        "processed_seq": after,
    }
    return TimelineRecord(**(values | fields))


@pytest.fixture
def state() -> MemoryState:
    state = MemoryState()
    timelines.save(state, record("main", processed_seq=20, acknowledged_seq=20))
    for timeline_id in BRANCHES:
        timelines.save(state, record(timeline_id))
    return state


def loaded(state: MemoryState, timeline_id: str) -> TimelineRecord:
    found = timelines.load(state, "default", "w", timeline_id)
    assert found is not None
    return found


def segments(*pairs: tuple[str, int]) -> tuple[Segment, ...]:
    return tuple(Segment(timeline_id, upto) for timeline_id, upto in pairs)


def test_a_saved_timeline_loads_as_it_was_saved_and_others_are_unknown(state: MemoryState) -> None:
    assert loaded(state, "b2") == record("b2")
    assert timelines.load(state, "default", "w", "b9") is None
    assert timelines.load(state, "default", "other-world", "main") is None
    assert timelines.load(state, "acme", "w", "main") is None


def test_a_timeline_without_parent_is_its_own_ancestry(state: MemoryState) -> None:
    assert timelines.ancestry(state, loaded(state, "main")) == segments(("main", MAX_SEQ))


@pytest.mark.parametrize(
    ("timeline_id", "expected"),
    [
        ("b1", [("b1", MAX_SEQ), ("main", 10)]),
        ("b2", [("b2", MAX_SEQ), ("b1", 15), ("main", 10)]),
        ("b3", [("b3", MAX_SEQ), ("b1", 5), ("main", 5)]),
        ("b4", [("b4", MAX_SEQ), ("b2", 12), ("b1", 12), ("main", 10)]),
    ],
)
def test_a_branch_sees_each_ancestor_up_to_the_nearest_branch_point(
    state: MemoryState, timeline_id: str, expected: list[tuple[str, int]]
) -> None:
    assert timelines.ancestry(state, loaded(state, timeline_id)) == segments(*expected)


def test_a_read_at_an_earlier_position_cuts_every_segment_there(state: MemoryState) -> None:
    b2 = loaded(state, "b2")
    assert timelines.ancestry(state, b2, 12) == segments(("b2", 12), ("b1", 12), ("main", 10))
    assert timelines.ancestry(state, b2, 7) == segments(("b2", 7), ("b1", 7), ("main", 7))


def test_an_unknown_parent_ends_the_ancestry(state: MemoryState) -> None:
    orphan = record("orphan", parent_timeline_id="lost", after_seq=3)
    assert timelines.ancestry(state, orphan) == segments(("orphan", MAX_SEQ))


def test_descent_follows_the_ancestry_only(state: MemoryState) -> None:
    b4 = loaded(state, "b4")
    assert [timelines.descends_from(state, b4, t) for t in ("b4", "b2", "b1", "main")] == [True] * 4
    assert not timelines.descends_from(state, b4, "b3")
    assert not timelines.descends_from(state, loaded(state, "b1"), "b2")


@pytest.mark.parametrize(
    ("timeline_id", "seq", "provider"),
    [
        ("b2", 16, "b2"),
        ("b2", 15, "b1"),  # the branch point itself is the parent's
        ("b2", 11, "b1"),
        ("b2", 10, "main"),
        ("b2", 1, "main"),
        ("b3", 6, "b3"),
        ("b3", 5, "main"),  # b1 had inherited it from main
        ("b4", 13, "b4"),
        ("b4", 12, "b1"),  # b2's position 12 is b1's own
        ("b4", 3, "main"),
        ("main", 7, "main"),
    ],
)
def test_a_position_comes_from_the_timeline_whose_own_events_make_it(
    state: MemoryState, timeline_id: str, seq: int, provider: str
) -> None:
    assert timelines.provider(state, loaded(state, timeline_id), seq).timeline_id == provider


def test_a_position_is_reached_when_the_timeline_that_makes_it_has_applied_it(
    state: MemoryState,
) -> None:
    b2 = loaded(state, "b2")
    assert timelines.has_reached(state, b2, 0)
    assert timelines.has_reached(state, b2, 10)  # main applied up to 20
    assert not timelines.has_reached(state, b2, 11)  # b1 has applied nothing of its own
    timelines.save(state, record("b1", processed_seq=15))
    assert timelines.has_reached(state, b2, 15)
    assert not timelines.has_reached(state, b2, 16)
    timelines.save(state, record("b1", processed_seq=15, waiting_for_parent=True))
    assert not timelines.has_reached(state, b2, 12)  # a waiting timeline has made nothing yet


def test_a_waiting_branch_is_released_by_the_timeline_that_makes_its_branch_point(
    state: MemoryState,
) -> None:
    timelines.wait_for_parent(state, loaded(state, "b2"))  # its point 15 is b1's own
    timelines.wait_for_parent(state, loaded(state, "b3"))  # its point 5 is main's
    timelines.save(state, record("b1", processed_seq=14))
    assert released(state, "b1") == []
    assert released(state, "main") == ["b3"]
    assert released(state, "main") == []  # released once
    timelines.save(state, record("b1", processed_seq=15, waiting_for_parent=True))
    assert released(state, "b1") == []
    timelines.save(state, record("b1", processed_seq=15))
    assert released(state, "b1") == ["b2"]


def released(state: MemoryState, parent: str) -> list[str]:
    """The children `parent` releases, their registrations deleted as the sequencer does."""
    children, registrations = timelines.children_ready(state, loaded(state, parent))
    for key in registrations:
        state.delete(key)
    return [child.timeline_id for child in children]


def happened(timeline_id: str, seq: int) -> bytes:
    """Mara does something on a timeline; a branch's first event names its branch point."""
    fields: dict[str, Any] = {}
    if timeline_id in BRANCHES and seq == BRANCHES[timeline_id][1] + 1:
        parent, after = BRANCHES[timeline_id]
        fields["branch"] = {"parent_timeline_id": parent, "after_seq": after}
    return orjson.dumps(
        {
            "world_instance_id": "w",
            "timeline_id": timeline_id,
            "seq": seq,
            "key": "story.happened",
            "actor": "npc-mara",
            "payload": {"mark": f"{timeline_id}-{seq}"},
            **fields,
        }
    )


def test_a_read_on_a_branch_of_a_branch_remembers_each_ancestor_up_to_its_branch_point() -> None:
    lines = [happened("main", seq) for seq in range(1, 21)]
    lines += [happened("b1", seq) for seq in range(11, 19)]
    lines += [happened("b2", seq) for seq in range(16, 18)]
    lines += [happened("b3", seq) for seq in range(6, 8)]
    lines += [happened("b4", seq) for seq in range(13, 15)]
    state = replay_lines(lines).state

    def marks(timeline_id: str) -> list[str]:
        recollections: Any = answer(runtime_read(state, "default", "w", timeline_id, "npc-mara"))[
            "recollections"
        ]
        return [str(item["content"]).split("mark: ")[1].rstrip(")") for item in recollections]

    main = [f"main-{seq}" for seq in range(20, 0, -1)]  # newest first
    assert marks("main") == main
    assert marks("b1") == [*[f"b1-{seq}" for seq in range(18, 10, -1)], *main[10:]]
    assert marks("b2") == [
        "b2-17",
        "b2-16",
        *[f"b1-{seq}" for seq in range(15, 10, -1)],
        *main[10:],
    ]
    assert marks("b3") == ["b3-7", "b3-6", *main[15:]]
    assert marks("b4") == ["b4-14", "b4-13", "b1-12", "b1-11", *main[10:]]
