"""A message that fills a gap releases every event waiting behind it: its writes fill several
record batches of the state changelog. A crash between two of them leaves a state the message,
taken in again, completes as a clean run would.
"""

from __future__ import annotations

from typing import NamedTuple

import orjson

from projections.delivery import Intake, SourceMessage
from projections.digest import world_digest
from projections.projector import Projector
from projections.state import MemoryState
from streams.changelog import PartitionWrites, Records
from tests.streams.test_judgement_parts import SMALLEST_BATCH_BYTES

TOPIC = "rumourmill.events"
RELEASED = 500
"""Events waiting behind a gap: the writes of the message filling it fill many record batches."""


def event(seq: int) -> bytes:
    return orjson.dumps(
        {"world_instance_id": "save-1", "timeline_id": "main", "seq": seq, "key": "trade.done"}
    )


def message(offset: int, seq: int) -> SourceMessage:
    return SourceMessage(TOPIC, 0, offset, b"save-1", event(seq))


class WritesNoted(MemoryState):
    """A state that notes each of its writes as the worker hands them to the changelog
    (`streams.changelog.PartitionWrites`)."""

    def __init__(self, limit: int = SMALLEST_BATCH_BYTES) -> None:
        super().__init__()
        self.writes = PartitionWrites(limit)

    def put(self, key: bytes, value: bytes) -> None:
        self.writes.write(key, value)
        super().put(key, value)

    def delete(self, key: bytes) -> None:
        self.writes.write(key, None)
        super().delete(key)


PROJECTOR = Projector(record_bytes=SMALLEST_BATCH_BYTES)


def gap_waited_on(released: int, state: MemoryState) -> SourceMessage:
    """`released` events taken into `state`, waiting for seq 1 (at offsets 0 on); the message
    of seq 1 that fills the gap, at the next offset."""
    for offset in range(released):
        [ack] = PROJECTOR.receive(state, message(offset, offset + 2)).acks
        assert ack.outcome.value == "deferred"
    return message(released, 1)


class SplitOverBatches(NamedTuple):
    """The message filling a gap of `RELEASED` events, its writes in the record batches of the
    least setting, and what the state was before it and after it."""

    gap: SourceMessage
    first: Intake
    before: list[tuple[bytes, bytes]]
    batches: list[Records]
    after: MemoryState


def split_over_batches() -> SplitOverBatches:
    state = WritesNoted()
    gap = gap_waited_on(RELEASED, state)
    before = list(state.items())
    state.writes = PartitionWrites(SMALLEST_BATCH_BYTES)
    first = PROJECTOR.receive(state, gap)
    state.writes.end_event()
    assert len(state.writes.batches) > 2
    return SplitOverBatches(gap, first, before, state.writes.batches, state)


def test_a_crash_between_the_changelog_batches_of_a_release_leaves_no_event_waiting() -> None:
    """The events a gap released left the deferral buffer as each was applied, the positions
    counting them saved last: recovered from the first batches, the state had lost the first
    released events from the buffer, and not counted them. The gap filled again released
    nothing, and the timeline's next event waited for ever. Now the message taken in again
    completes the state a clean run makes: with every ack, or, once the positions are stored,
    as a duplicate."""
    split = split_over_batches()
    digest = world_digest(split.after, "default", "save-1")
    outcomes = set()
    for stored in range(len(split.batches)):
        recovered = recovered_from(split.before, split.batches[:stored])
        again = PROJECTOR.receive(recovered, split.gap)
        assert world_digest(recovered, "default", "save-1") == digest
        if again.acks != split.first.acks:
            assert [(ack.seq, ack.outcome.value) for ack in again.acks] == [(1, "duplicate")]
        outcomes.add(again.acks[0].outcome.value)
        [after] = PROJECTOR.receive(recovered, message(RELEASED + 1, RELEASED + 2)).acks
        assert (after.outcome.value, after.processed_seq) == ("processed", RELEASED + 2)
    assert outcomes == {"processed", "duplicate"}


def recovered_from(before: list[tuple[bytes, bytes]], batches: list[Records]) -> MemoryState:
    """The state `before`, with `batches` laid over it as recovery lays them."""
    state = MemoryState()
    for key, value in before:
        state.put(key, value)
    for batch in batches:
        for key, written in batch.items():
            if written is None:
                state.delete(key)
            else:
                state.put(key, written)
    return state
