"""The read cache on its own: answers by position, bounded in bytes."""

from __future__ import annotations

import orjson

from projections.runtime_read import read_position
from streams.read_cache import ENTRY_OVERHEAD, ReadCache
from streams.replay import replay_lines
from tests.support import event


def test_an_answer_is_served_only_at_the_position_it_was_computed_at() -> None:
    cache = ReadCache(max_bytes=1 << 20)
    cache.put(("t", "w", "main", "npc"), b"seq 5", b"mind at 5")
    assert cache.get(("t", "w", "main", "npc"), b"seq 5") == b"mind at 5"
    assert cache.get(("t", "w", "main", "npc"), b"seq 6") is None
    assert cache.get(("t", "w", "main", "other"), b"seq 5") is None
    cache.put(("t", "w", "main", "npc"), b"seq 6", b"mind at 6")
    assert cache.get(("t", "w", "main", "npc"), b"seq 5") is None
    assert len(cache) == 1


def test_the_least_recently_read_make_room_and_the_bound_holds() -> None:
    body = b"x" * 1000
    entry = len(body) + len(b"p") + ENTRY_OVERHEAD  # keys of numbers: no characters
    cache = ReadCache(max_bytes=entry * 3)
    for number in range(3):
        cache.put((number,), b"p", body)
    assert cache.get((0,), b"p") == body  # read again: 1 is now the least recently read
    cache.put((3,), b"p", body)
    held = [cache.get((number,), b"p") is not None for number in range(4)]
    assert held == [True, False, True, True]
    for number in range(100):
        cache.put((100 + number,), b"p", body)
    assert cache.held_bytes <= cache.max_bytes and len(cache) == 3
    cache.put(("huge",), b"p", b"x" * cache.max_bytes)
    assert cache.get(("huge",), b"p") is None and cache.held_bytes <= cache.max_bytes


def test_a_position_is_as_small_on_a_save_loaded_two_hundred_times_over() -> None:
    """Each load branches from the timeline before: the position a cached answer keeps held
    every ancestor's record (44 KB at 200 loads, 220 KB at 1,000), so the cache held a
    fraction of the characters its bound promises. It moves with each of them all the same."""
    lines = [orjson.dumps(event("w", 1, timeline="t0"))]
    for depth in range(1, 201):
        branch = {"parent_timeline_id": f"t{depth - 1}", "after_seq": depth}
        lines.append(orjson.dumps(event("w", depth + 1, timeline=f"t{depth}", branch=branch)))
    state = replay_lines(lines).state
    deep = read_position(state, "default", "w", "t200")
    assert len(deep) == len(read_position(state, "default", "w", "t0")) == 32
    moved = replay_lines([*lines, orjson.dumps(event("w", 2, timeline="t0"))]).state
    assert read_position(moved, "default", "w", "t200") != deep  # an ancestor moved


def test_a_deleted_worlds_answers_go_and_every_other_worlds_stay() -> None:
    """A tenant's deletion forgets each of its worlds in turn: every answer kept was looked at
    for each world (4.8 ms a world with the cache full: 10,000 saves held the worker over a
    minute). A world's answers are found by the world now; those pushed out, replaced or of
    another tenant's world of the same name are forgotten alike."""
    body = b"x" * 100
    cache = ReadCache(max_bytes=1 << 20)
    for world in range(50):
        for character in range(4):
            cache.put(("studio", f"save-{world}", "main", f"npc-{character}"), b"p", body)
            cache.put(("other", f"save-{world}", "main", f"npc-{character}"), b"p", body)
    cache.put(("studio", "save-0", "main", "npc-0"), b"q", body)  # replaced
    for world in range(50):
        cache.forget_world("studio", f"save-{world}")
    assert len(cache) == 200
    assert cache.get(("other", "save-0", "main", "npc-0"), b"p") == body
    assert cache.get(("studio", "save-0", "main", "npc-0"), b"q") is None
    for world in range(50):
        cache.forget_world("other", f"save-{world}")
    assert len(cache) == 0 and cache.held_bytes == 0


def test_the_bound_counts_the_ids_an_answer_is_kept_under() -> None:
    """An answer is kept under the ids it was asked by (each up to 128 characters): counted as
    200 bytes whatever their length, small answers took twice the bound."""
    ids = ("t" * 128, "w" * 128, "m" * 128, "n" * 128)
    cache = ReadCache(max_bytes=1 << 20)
    cache.put(ids, b"p", b"x")
    assert cache.held_bytes == 1 + 1 + 4 * 128 + ENTRY_OVERHEAD
