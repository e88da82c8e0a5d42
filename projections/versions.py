"""Versioned values: a value per position, read "as it stood at seq N" through an ancestry.

Anything that changes over a timeline (where a character is, what the world record says)
is written as a new version keyed by the position that produced it, never overwritten in
place. Reading at a position is one seek per ancestry segment, and applying an event again
rewrites the same version: redelivery cannot double-count.
"""

from __future__ import annotations

from collections.abc import Callable

from projections.keys import pack
from projections.state import StateTransaction
from projections.timelines import Ancestry


def at_or_before(tx: StateTransaction, scope: bytes, seq: int) -> tuple[int, bytes] | None:
    """The newest version in `scope` written at or before `seq`, with its seq."""
    for key, value in tx.scan(scope, reverse=True, start=scope + pack(seq)):
        return int.from_bytes(key[-8:], "big"), value
    return None


def read_through(
    tx: StateTransaction, ancestry: Ancestry, scope_of: Callable[[str], bytes]
) -> bytes | None:
    """The value a timeline sees: its own newest version, else its ancestors' at the branch."""
    for segment in ancestry:
        found = at_or_before(tx, scope_of(segment.timeline_id), segment.upto_seq)
        if found is not None:
            return found[1]
    return None
