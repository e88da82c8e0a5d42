"""Record bounds: no event may write a state record larger than the state changelog takes.

Two state values grow with what a world's events add up to: who is at a place (a list of ids,
written whole at each movement, `projections.whereabouts`) and an entity's declaration, whose
fields beyond `name`, `kind` and `group` add up over the events that declare it
(`projections.catalogue`). A record larger than the changelog topic takes was refused by the
broker, and the worker stopped on the event that made it, at every restart, for every world of
its partition. The event that would make one is refused instead, before any of its writes
(`TooLarge`: sequencing acks it `rejected`, and intake dead-letters it with its bytes).
"""

from __future__ import annotations

from projections.delivery import MOST_RECORD_BYTES

CHANGELOG_HEADROOM = 64 * 1024
"""What the state changelog topic takes beyond one record batch of
`RUMOURMILL_CHANGELOG_BATCH_BYTES` (its `max.message.bytes`, `streams.changelog.topic_config`):
room for a record larger than the batches it is cut into."""
RECORD_OVERHEAD = 40
"""At most what the record format adds to a key and a value (aiokafka's `MAX_RECORD_OVERHEAD`,
two length varints, the header count and `streams.changelog.RECORD_HEADER`)."""
BATCH_OVERHEAD = 61
"""The record batch header."""


def most_record_bytes(batch_bytes: int) -> int:
    """The most one state record's key and value may take together, with the changelog's
    record batches of `batch_bytes` (`RUMOURMILL_CHANGELOG_BATCH_BYTES`): alone in a batch, it
    must fit what the topic takes, and what the worker's producer sends (`MOST_RECORD_BYTES`).
    81,819 at the least setting (16,384), 999,899 at the default."""
    return changelog_message_bytes(batch_bytes) - BATCH_OVERHEAD - RECORD_OVERHEAD


def changelog_message_bytes(batch_bytes: int) -> int:
    """The largest message the state changelog must take with record batches of `batch_bytes`:
    one of them, or one record alone up to `most_record_bytes`, with its batch's overheads."""
    return max(batch_bytes, min(batch_bytes + CHANGELOG_HEADROOM, MOST_RECORD_BYTES))


class TooLarge(Exception):
    """An event would write a state record over `most_record_bytes`: raised before any of its
    writes, so the event is refused whole and none of them is kept."""

    def __init__(self, what: str, record_bytes: int, batch_bytes: int) -> None:
        """`what` (a state value, in words) would take a record of `record_bytes` (key and
        value), more than the changelog of `batch_bytes` takes."""
        most = most_record_bytes(batch_bytes)
        self.reason = (
            f"{what} would take {record_bytes:,} bytes, {record_bytes - most:,} more than a state "
            f"record takes ({most:,} at RUMOURMILL_CHANGELOG_BATCH_BYTES={batch_bytes})"
        )
        super().__init__(self.reason)
