"""Relations in the runtime read: at most 50, the most memories first (README, "Reading a
character's mind"; seed 001), ties going to the newest `last_seq`, then to the entity id."""

from __future__ import annotations

import random
from collections import defaultdict
from itertools import pairwise
from typing import Any

import orjson

from projections.policy import resolve
from projections.projector import Projector
from projections.relations import relations_of
from projections.runtime_read import runtime_read, timeline_view
from streams.replay import replay_lines
from tests.projections.counted_reads import counted_replay
from tests.reads import answer

MAX_RELATIONS = 50


def seen_by_mara(seq: int, actor: str, target: str | None = None) -> bytes:
    """Mara alone sees `actor` do something (to `target`): a memory about them both."""
    event: dict[str, Any] = {
        "world_instance_id": "w",
        "timeline_id": "main",
        "seq": seq,
        "key": "story.happened",
        "actor": actor,
        "witnesses": ["npc-mara"],
    }
    if target is not None:
        event["target"] = target
    return orjson.dumps(event)


def expected_relations(memories: list[tuple[int, list[str]]]) -> list[tuple[str, int, int]]:
    """(entity, memories, last seq) by the rule, from what each memory is about."""
    count: dict[str, int] = defaultdict(int)
    last: dict[str, int] = defaultdict(int)
    for seq, about in memories:
        for entity in about:
            count[entity] += 1
            last[entity] = max(last[entity], seq)
    ranked = sorted(count, key=lambda entity: (-count[entity], -last[entity], entity))
    return [(entity, count[entity], last[entity]) for entity in ranked[:MAX_RELATIONS]]


def test_a_character_related_to_more_than_fifty_entities_reads_the_fifty_with_most_memories() -> (
    None
):
    """70 strangers: 10 met three times and 20 twice, early on; then 40 met once, later, some
    in pairs (same last seq). Counts outrank recency; within a count the newest wins, then ids."""
    rng = random.Random(50)
    strangers = [f"stranger-{number:02d}" for number in range(70)]
    rng.shuffle(strangers)
    thrice, twice, once = strangers[:10], strangers[10:30], strangers[30:]
    happenings: list[list[str]] = [[who] for who in thrice * 3 + twice * 2]
    rng.shuffle(happenings)
    pairs = [once[i : i + 2] for i in range(0, 16, 2)]  # eight events about two strangers each
    singles = [[who] for who in once[16:]]
    later = pairs + singles
    rng.shuffle(later)
    happenings += later
    memories = [(seq, about) for seq, about in enumerate(happenings, start=1)]
    state = replay_lines([seen_by_mara(seq, *about) for seq, about in memories]).state

    relations: Any = answer(runtime_read(state, "default", "w", "main", "npc-mara"))["relations"]
    shown = [(r["entity_id"], r["memories"], r["last_seq"]) for r in relations]
    assert len(shown) == MAX_RELATIONS
    assert shown == expected_relations(memories)
    assert {entity for entity, _, _ in shown} >= {*thrice, *twice}
    assert [count for _, count, _ in shown] == [3] * 10 + [2] * 20 + [1] * 20
    pair_ties = [(left[0], right[0]) for left, right in pairwise(shown) if left[1:] == right[1:]]
    assert pair_ties and all(left < right for left, right in pair_ties)


def test_the_fifty_on_a_branch_count_the_parents_memories_up_to_the_branch_point_only() -> None:
    """Main: 60 memories of 40 strangers. A load after main's 30th event meets 30 more and some
    of the first again: its fifty count what it inherited, and nothing of main's abandoned 31-60."""
    rng = random.Random(51)
    strangers = [f"stranger-{number:02d}" for number in range(70)]
    on_main = [[rng.choice(strangers[:40])] for _ in range(60)]
    on_branch = [[who] for who in strangers[40:]] + [
        [rng.choice(strangers[:40])] for _ in range(20)
    ]
    rng.shuffle(on_branch)
    lines = [seen_by_mara(seq, *about) for seq, about in enumerate(on_main, start=1)]
    for seq, about in enumerate(on_branch, start=31):
        event = orjson.loads(seen_by_mara(seq, *about)) | {"timeline_id": "load"}
        if seq == 31:
            event["branch"] = {"parent_timeline_id": "main", "after_seq": 30}
        lines.append(orjson.dumps(event))
    state = replay_lines(lines).state

    def shown(timeline: str) -> list[tuple[str, int, int]]:
        relations: Any = answer(runtime_read(state, "default", "w", timeline, "npc-mara"))[
            "relations"
        ]
        return [(r["entity_id"], r["memories"], r["last_seq"]) for r in relations]

    inherited = list(enumerate(on_main[:30], start=1))
    assert shown("load") == expected_relations([*inherited, *enumerate(on_branch, start=31)])
    assert shown("main") == expected_relations(list(enumerate(on_main, start=1)))
    assert len(shown("load")) == MAX_RELATIONS


def test_a_mean_feeling_on_a_half_rounds_up_however_binary_floats_add_up() -> None:
    """Mara saw Ilse help once (feeling 0.3) and do three things of no feeling: the mean is
    0.075, shown as 0.08 like every other 2-decimal number (`projections.numbers`), though
    0.3 / 4 in binary floats is just under 0.075. The referee weighs the same 0.08."""
    helped = orjson.loads(seen_by_mara(1, "player-ilse")) | {"key": "quest.helped"}
    lines = [orjson.dumps(helped), *(seen_by_mara(seq, "player-ilse") for seq in (2, 3, 4))]
    state = replay_lines(lines).state

    relations: Any = answer(runtime_read(state, "default", "w", "main", "npc-mara"))["relations"]
    assert relations == [
        {"entity_id": "player-ilse", "feeling": 0.08, "memories": 4, "last_seq": 4}
    ]


def _reads_on_a_save_loaded(deep: int, strangers: int = 30) -> tuple[int, int]:
    """The scans begun, and what else was looked at, reading Mara's relations on a save `deep`
    loads from main, where she met `strangers` strangers; each load lives one event, which she
    does not see."""
    lines = [seen_by_mara(seq, f"stranger-{seq:02d}") for seq in range(1, strangers + 1)]
    parent = "main"
    for load in range(deep):
        seq = strangers + load + 1
        event = {"world_instance_id": "w", "timeline_id": f"load-{load}", "seq": seq, "key": "k"}
        event["branch"] = {"parent_timeline_id": parent, "after_seq": seq - 1}
        lines.append(orjson.dumps(event))
        parent = f"load-{load}"
    counted = counted_replay(lines)
    _, keys, ancestry = timeline_view(counted, "default", "w", parent, None)
    counted.uncounted()
    assert len(relations_of(counted, keys, ancestry, "npc-mara")) == strangers
    return counted.scans, counted.looked_at


def test_a_saves_relations_are_read_through_its_loads_once_not_once_a_relation() -> None:
    """A reviewer's find: each relation met on main was read through every load between, so a
    save 100 loads deep read a character's 1,000 relations in 236 ms (2 ms on main). Ten loads
    deeper cost a scan of each: not one each per stranger."""
    deep_scans, deep_looked_at = _reads_on_a_save_loaded(12)
    scans, looked_at = _reads_on_a_save_loaded(2)
    assert (deep_scans - scans, deep_looked_at - looked_at) == (10, 0)


def test_a_relation_of_persistent_memories_shows_the_last_seq_among_them() -> None:
    """SPEC: a relation is the mean feeling, the count and the last seq of its memories, the
    persistent ones (read memory by memory) too."""
    persistent = resolve(None, {"memory": {"persistent": {"characters": ["npc-mara"]}}})
    told = [
        orjson.dumps(
            {
                "world_instance_id": "save-1",
                "timeline_id": "main",
                "seq": seq,
                "key": "loreweaver.conversation.told",
                "actor": "npc-rook",
                "target": "npc-mara",
                "payload": {"content": f"The well {seq} ran dry"},
                "game_time": f"day 1, 10:0{seq}",
            }
        )
        for seq in range(1, 6)
    ]
    state = replay_lines(told, Projector(policies=lambda tenant, world: persistent)).state
    read = answer(runtime_read(state, "default", "save-1", "main", "npc-mara"))
    assert [(r["entity_id"], r["memories"], r["last_seq"]) for r in read["relations"]] == [
        ("npc-rook", 5, 5)
    ]
