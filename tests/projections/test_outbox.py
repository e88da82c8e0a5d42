"""The outbox: what taking a message in answered, kept for `OUTBOX_DEPTH` positions of its
partition so a redelivery answers alike, and forgotten after, so it stays bounded."""

from __future__ import annotations

import orjson

from projections.delivery import OUTBOX_DEPTH, SourceMessage, world_key
from projections.key_prefixes import OUTBOX
from projections.keys import pack, unpack
from projections.projector import Projector
from projections.state import MemoryState


def hit(seq: int, world: str = "w") -> bytes:
    return orjson.dumps(
        {
            "world_instance_id": world,
            "timeline_id": "main",
            "seq": seq,
            "key": "combat.hit",
            "actor": "player-1",
        }
    )


def rows(state: MemoryState) -> list[int]:
    """The offsets of partition 0 whose outbox rows are kept."""
    prefix = pack(OUTBOX, "events", 0)
    return sorted({int(unpack(key[len(prefix) :])[0]) for key, _ in state.scan(prefix)})


def take(projector: Projector, state: MemoryState, offset: int, line: bytes) -> None:
    projector.receive(state, SourceMessage("events", 0, offset, world_key(line), line))


def test_a_row_is_kept_until_the_message_outbox_depth_positions_on() -> None:
    projector, state = Projector(), MemoryState()
    take(projector, state, 0, hit(1))
    take(projector, state, OUTBOX_DEPTH - 1, hit(1, "x"))
    assert rows(state) == [0, OUTBOX_DEPTH - 1]
    take(projector, state, OUTBOX_DEPTH, hit(2, "x"))
    assert rows(state) == [OUTBOX_DEPTH - 1, OUTBOX_DEPTH]


def test_a_partition_read_again_from_further_back_leaves_no_row_behind() -> None:
    """Positions without a message (commit markers) prune every older row; offsets read again
    from before where that pruning ended (a consumer sought back) write rows there again, and
    the next pruning takes them out too."""
    projector, state = Projector(), MemoryState()
    take(projector, state, 0, hit(1))
    take(projector, state, 1, hit(2))
    take(projector, state, OUTBOX_DEPTH + 5, hit(1, "x"))  # 2 to 5 held no message
    assert rows(state) == [OUTBOX_DEPTH + 5]
    take(projector, state, 1, hit(2))  # read again
    take(projector, state, OUTBOX_DEPTH + 2, hit(2, "x"))
    assert rows(state) == [OUTBOX_DEPTH + 2, OUTBOX_DEPTH + 5]
