"""Versioned values: a value per position, read "as it stood at seq N" through an ancestry.

Anything that changes over a timeline (where a character is, what the world record says, what
the catalogue declares) is written as a new version keyed by the position that produced it,
never overwritten in place. Reading at a position is one seek per ancestry segment, and
applying an event again rewrites the same version: redelivery cannot double-count.

A value read on every event (a declaration, where a character is, who is at a place) also keeps
its timeline's newest version as a head (`write_headed`), so the common read, at the tip of the
timeline, is one point lookup: on RocksDB a seek looks into every level-0 file, a point lookup
only into those whose bloom filter holds the key.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

from projections.keys import pack
from projections.state import StateTransaction
from projections.timelines import Ancestry, Segment

_SEQ_BYTES = 8


def at_or_before(tx: StateTransaction, scope: bytes, seq: int) -> tuple[int, bytes] | None:
    """The newest version in `scope` written at or before `seq`, with its seq."""
    for key, value in tx.scan(scope, reverse=True, start=scope + pack(seq)):
        return int.from_bytes(key[-_SEQ_BYTES:], "big"), value
    return None


def version_through(
    tx: StateTransaction, ancestry: Ancestry, scope_of: Callable[[str], bytes]
) -> tuple[Segment, int, bytes] | None:
    """The version a timeline sees, with the segment and seq that wrote it: its own newest
    version, else its ancestors' at the branch point."""
    for segment in ancestry:
        found = at_or_before(tx, scope_of(segment.timeline_id), segment.upto_seq)
        if found is not None:
            return segment, found[0], found[1]
    return None


def read_through(
    tx: StateTransaction, ancestry: Ancestry, scope_of: Callable[[str], bytes]
) -> bytes | None:
    """The value a timeline sees: its own newest version, else its ancestors' at the branch."""
    found = version_through(tx, ancestry, scope_of)
    return None if found is None else found[2]


def write_headed(tx: StateTransaction, scope: bytes, head: bytes, seq: int, value: bytes) -> None:
    """Write `value` as the version at `seq` in `scope`, and as its timeline's head."""
    tx.put(scope + pack(seq), value)
    tx.put(head, head_value(seq, value))


class Headed(NamedTuple):
    """A value to write with `write_headed`, worked out before the event writes anything: an
    event that would make a record too large is refused whole (`projections.record_bounds`)."""

    scope: bytes
    head: bytes
    value: bytes
    what: str
    """The value in words, for the reason of a refusal."""

    def largest_record(self, seq: int) -> int:
        """The bytes (key and value) of the larger of its two records: the version at `seq`,
        or the head, which repeats it after the seq."""
        return len(self.value) + max(len(self.scope) + len(pack(seq)), len(self.head) + _SEQ_BYTES)

    def write(self, tx: StateTransaction, seq: int) -> None:
        write_headed(tx, self.scope, self.head, seq, self.value)


def head_value(seq: int, value: bytes) -> bytes:
    """What a head stores: the seq of the version it repeats (8 bytes), then that version."""
    return seq.to_bytes(_SEQ_BYTES, "big") + value


def head_at(head: bytes, segment: Segment) -> bytes | None:
    """A head's value, if it was written at or before the segment's end."""
    return head[_SEQ_BYTES:] if head_seq(head) <= segment.upto_seq else None


def head_seq(head: bytes) -> int:
    """The seq of the version a head repeats (`head_value`)."""
    return int.from_bytes(head[:_SEQ_BYTES], "big")


def read_headed_through(
    tx: StateTransaction,
    ancestry: Ancestry,
    scope_of: Callable[[str], bytes],
    head_of: Callable[[str], bytes],
) -> bytes | None:
    """`read_through` for values written with `write_headed`: a timeline without a head has no
    version, and a head at or before the segment's end is its newest version."""
    found = headed_version_through(tx, ancestry, scope_of, head_of)
    return None if found is None else found[2]


def headed_version_through(
    tx: StateTransaction,
    ancestry: Ancestry,
    scope_of: Callable[[str], bytes],
    head_of: Callable[[str], bytes],
) -> tuple[str, int, bytes] | None:
    """`read_headed_through`, with the timeline and the seq that wrote the value."""
    for segment in ancestry:
        head = tx.get(head_of(segment.timeline_id))
        if head is None:
            continue
        written = head_seq(head)
        if written <= segment.upto_seq:
            return segment.timeline_id, written, head[_SEQ_BYTES:]
        found = at_or_before(tx, scope_of(segment.timeline_id), segment.upto_seq)
        if found is not None:
            return segment.timeline_id, found[0], found[1]
    return None
