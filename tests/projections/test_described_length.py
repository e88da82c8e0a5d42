"""An event described in words reads at most `MOST_DESCRIBED_CHARS` characters.

Each id a description names reads as the name declared for it (up to 256 characters): a loot
list naming a coin of a short id 1,500 times, in an event of 7.6 KB, made a memory of 388 KB,
larger than one record of the state changelog takes (81,819 bytes at the least
`RUMOURMILL_CHANGELOG_BATCH_BYTES`, 999,899 at the default, which an event of 700 KB passed
thirty times over); the broker refused it and the worker stopped on it at every restart.
"""

from __future__ import annotations

from typing import Any

import orjson

from projections.projector import Projector
from projections.record_bounds import most_record_bytes
from projections.runtime_read import runtime_read
from projections.wording import MOST_DESCRIBED_CHARS, retell
from streams.replay import replay_lines
from tests.streams.test_judgement_parts import SMALLEST_BATCH_BYTES

COIN = "A gleaming gold coin of the old kingdom".ljust(256, ".")


def event(seq: int, key: str, **fields: Any) -> bytes:
    return orjson.dumps(
        {"world_instance_id": "save-1", "timeline_id": "main", "seq": seq, "key": key} | fields
    )


def test_a_loot_list_of_declared_items_makes_a_memory_a_record_holds() -> None:
    lines = [
        event(1, "world.entity-declared", entities={"gc": {"name": COIN, "kind": "item"}}),
        event(2, "trade.loot-taken", actor="npc-mara", payload={"items": ["gc"] * 1500}),
    ]
    projector = Projector(record_bytes=SMALLEST_BATCH_BYTES, max_event_bytes=8192)
    replayed = replay_lines(lines, projector)
    assert replayed.outcomes == {"processed": 2}

    largest = max(len(key) + len(value) for key, value in replayed.state.items())
    assert largest < most_record_bytes(SMALLEST_BATCH_BYTES) // 8
    read = runtime_read(replayed.state, "default", "save-1", "main", "npc-mara")
    [recollection] = read.model_dump(mode="json")["recollections"]
    described = recollection["content"]
    assert described.startswith(f"npc-mara loot taken (items: {COIN}, {COIN}, ")
    assert len(described) == MOST_DESCRIBED_CHARS and described.endswith(".…)")
    # the parenthesis the cut left open is closed: a retelling drops the details whole, as it
    # does a shorter event's (left open, all 2,000 characters were retold)
    assert retell(described) == "npc-mara loot taken"
