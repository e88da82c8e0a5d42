"""Memories kept decoded between reads: bounded by their bytes as well as by how many."""

from __future__ import annotations

from projections.memory_store import DECODED, DecodedMemories
from tests.projections.test_rumours import memory


def test_memories_of_large_events_are_kept_decoded_within_the_bound_in_bytes() -> None:
    """A memory copies its event's facts: kept by count alone, 16,384 memories of events of
    16 KB held 600 MB of stored bytes and more again decoded. The newest are kept, up to the
    bound; one larger than it all is decoded and not kept."""
    big = [memory("npc-mara", f"{n:032x}", n + 1, content="x" * 3_000) for n in range(10)]
    raws = [one.model_dump_json().encode() for one in big]
    bound = sum(len(raw) for raw in raws[-4:])
    kept = DecodedMemories(size=100, max_bytes=bound)
    first = [kept.decode(raw) for raw in raws]
    assert first == big and kept.held_bytes == bound
    assert all(
        kept.decode(raw) is decoded for raw, decoded in zip(raws[-4:], first[-4:], strict=True)
    )
    assert kept.decode(raws[0]) is not first[0]  # pushed out: decoded again
    huge = memory("npc-mara", "f" * 32, 99, content="x" * 20_000)
    assert kept.decode(huge.model_dump_json().encode()) == huge
    assert kept.held_bytes <= bound


def test_the_memories_a_worker_keeps_decoded_stay_under_32_mb_of_stored_bytes() -> None:
    assert DECODED.held_bytes <= 32 << 20
    one = memory("npc-mara", "e" * 32, 1, content="y" * (1 << 20))
    raw = one.model_dump_json().encode()
    for _ in range(40):
        DECODED.remember(raw + b" " * _, one)
    assert DECODED.held_bytes <= 32 << 20
