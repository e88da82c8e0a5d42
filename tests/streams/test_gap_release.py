"""A message that fills a gap releases every event waiting behind it: its writes fill several
record batches of the state changelog, and its outbox row keeps an ack for each released event.

Kept whole, the row of 500 acks took 80 KB, which the changelog topic of the least
`RUMOURMILL_CHANGELOG_BATCH_BYTES` refused, and the worker stopped on the message at every
restart: it is kept in parts, each within a record batch of that setting, and a redelivery reads
them all back and re-sends the very acks; the outbox's pruning deletes every part. A crash
between two of the message's batches leaves no part of the row read, and a state the message,
taken in again, completes as a clean run would, acking again every event it released.
"""

from __future__ import annotations

import base64
from typing import NamedTuple

import orjson
import pytest

from projections import timelines
from projections.delivery import OUTBOX_DEPTH, Intake, SourceMessage
from projections.digest import world_digest
from projections.key_prefixes import OUTBOX, PENDING
from projections.keys import pack, unpack
from projections.projector import Projector
from projections.state import MemoryState
from streams.changelog import PartitionWrites, Records
from tests.streams.test_judgement_parts import SMALLEST_BATCH_BYTES, record_bytes

TOPIC = "rumourmill.events"
RELEASED = 500
"""Events waiting behind a gap: the acks of the message filling it made a row of 79 KB."""


def event(seq: int, timeline: str = "main", **fields: object) -> bytes:
    return orjson.dumps(
        {"world_instance_id": "save-1", "timeline_id": timeline, "seq": seq, "key": "trade.done"}
        | fields
    )


def message(offset: int, seq: int, timeline: str = "main", **fields: object) -> SourceMessage:
    return SourceMessage(TOPIC, 0, offset, b"save-1", event(seq, timeline, **fields))


class WritesNoted(MemoryState):
    """A state that notes each of its writes, with the largest record one made, as the worker
    hands them to the changelog (`streams.changelog.PartitionWrites`)."""

    def __init__(self, limit: int = SMALLEST_BATCH_BYTES) -> None:
        super().__init__()
        self.writes = PartitionWrites(limit)
        self.largest = 0

    def put(self, key: bytes, value: bytes) -> None:
        self.largest = max(self.largest, record_bytes(key, value))
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


def filled(state: WritesNoted) -> tuple[SourceMessage, Intake]:
    """The gap of `RELEASED` events filled in `state`: the message, and what it produced."""
    gap = gap_waited_on(RELEASED, state)
    state.largest = 0
    return gap, PROJECTOR.receive(state, gap)


def row_records(state: MemoryState, offset: int) -> list[tuple[bytes, bytes]]:
    """The records of the outbox row of the message at `offset`."""
    return list(state.scan(pack(OUTBOX, TOPIC, 0, offset)))


def test_a_message_releasing_hundreds_of_events_writes_no_value_over_a_record_batch() -> None:
    state = WritesNoted()
    gap, intake = filled(state)
    assert [ack.seq for ack in intake.acks] == list(range(1, RELEASED + 2))
    assert 1_000 < state.largest <= SMALLEST_BATCH_BYTES  # the whole row took 80 KB
    assert len(row_records(state, RELEASED)) == 6
    again = PROJECTOR.receive(state, gap)
    assert again.redelivered
    assert again.acks == intake.acks


class SplitOverBatches(NamedTuple):
    """The message filling a gap of `RELEASED` events, its writes in the record batches of the
    least setting, and what the state was before it and after it."""

    gap: SourceMessage
    first: Intake
    before: list[tuple[bytes, bytes]]
    batches: list[Records]
    after: MemoryState


def split_over_batches(refused_at: int | None = None) -> SplitOverBatches:
    """`refused_at`: the seq whose waiting event is rewritten as a release before could have
    stored it, no longer reading as an event (refused as the gap fills)."""
    state = WritesNoted()
    gap = gap_waited_on(RELEASED, state)
    if refused_at is not None:
        state.put(waiting_key(refused_at), as_once_taken(refused_at))
    before = list(state.items())
    state.writes = PartitionWrites(SMALLEST_BATCH_BYTES)
    first = PROJECTOR.receive(state, gap)
    state.writes.end_event()
    assert len(state.writes.batches) > 2
    return SplitOverBatches(gap, first, before, state.writes.batches, state)


def test_a_crash_between_its_changelog_batches_leaves_no_part_of_its_outbox_row_read() -> None:
    """Recovered from any of the message's record batches before the one of the row's first
    record (written after every other of the row, and followed only by the deletes of what the
    message took out of the deferral buffer), the state lacks it, so the message is taken in
    again: no redelivery re-sends a part of its acks."""
    split = split_over_batches()
    row = pack(OUTBOX, TOPIC, 0, RELEASED)
    row_at = [row in batch for batch in split.batches].index(True)
    assert {
        (unpack(key)[0], value)
        for batch in split.batches[row_at + 1 :]
        for key, value in batch.items()
    } == {(PENDING, None)}
    for stored in range(row_at + 1):
        recovered = recovered_from(split.before, split.batches[:stored])
        again = PROJECTOR.receive(recovered, split.gap)
        assert not again.redelivered
        once_more = PROJECTOR.receive(recovered, split.gap)  # its row is whole now
        assert once_more.redelivered and once_more.acks == again.acks
    whole = PROJECTOR.receive(recovered_from(split.before, split.batches), split.gap)
    assert whole.redelivered and whole.acks == split.first.acks


def test_a_crash_between_the_changelog_batches_of_a_release_leaves_no_event_waiting() -> None:
    """The events a gap released left the deferral buffer as each was applied, the positions
    counting them saved last: recovered from the first batches, the state had lost the first
    released events from the buffer, and not counted them. The gap filled again released
    nothing, and the timeline's next event waited for ever. Now the message taken in again
    completes the state a clean run makes: as it was, or, once the positions are stored, as a
    duplicate."""
    split = split_over_batches()
    digest = world_digest(split.after, "default", "save-1")
    outcomes = set()
    for stored in range(len(split.batches)):
        recovered = recovered_from(split.before, split.batches[:stored])
        again = PROJECTOR.receive(recovered, split.gap)
        assert world_digest(recovered, "default", "save-1") == digest
        outcomes.add(again.acks[0].outcome.value)
        [after] = PROJECTOR.receive(recovered, message(RELEASED + 1, RELEASED + 2)).acks
        assert (after.outcome.value, after.processed_seq) == ("processed", RELEASED + 2)
    assert outcomes == {"processed", "duplicate"}


def test_a_crash_between_the_changelog_batches_of_a_release_loses_no_ack() -> None:
    """Recovered from batches that kept the positions counting the released events and not the
    outbox row, the message taken in again was a duplicate: acked `duplicate`, and the
    `processed` acks of the 500 events it released (which the worker sends only with the state
    holding the row stored) never sent. Now those events leave the buffer after the row: every
    recovered state keeps either the row, re-sent, or them, each acked again."""
    split = split_over_batches()
    released = [(seq, "processed") for seq in range(2, RELEASED + 2)]
    outcomes = set()
    for stored in range(len(split.batches) + 1):
        recovered = recovered_from(split.before, split.batches[:stored])
        again = [
            (ack.seq, ack.outcome.value) for ack in PROJECTOR.receive(recovered, split.gap).acks
        ]
        assert again[1:] == released, stored
        outcomes.add(again[0])
        assert waiting_seqs(recovered) == [], stored
    assert outcomes == {(1, "processed"), (1, "duplicate")}


def test_a_restart_taking_earlier_messages_in_again_first_loses_no_ack_of_a_release() -> None:
    """A restart takes in again every message past the committed offset, those before the one
    that filled the gap first: seq 1, re-sent from its outbox row, deleted the waiting events
    at or below the recovered positions, and the message filling the gap, a duplicate, had
    none left to ack. Now a redelivery deletes only what its own row acks."""
    state = WritesNoted()
    taken = [message(0, 1), *(message(offset, offset + 2) for offset in range(1, RELEASED + 1))]
    for sent in taken:
        PROJECTOR.receive(state, sent)
    gap = message(RELEASED + 1, 2)
    before = list(state.items())
    state.writes = PartitionWrites(SMALLEST_BATCH_BYTES)
    PROJECTOR.receive(state, gap)
    state.writes.end_event()
    released = {(seq, "processed") for seq in range(3, RELEASED + 3)}
    for stored in range(len(state.writes.batches) + 1):
        recovered = recovered_from(before, state.writes.batches[:stored])
        acked = {
            (ack.seq, ack.outcome.value)
            for sent in [*taken, gap]
            for ack in PROJECTOR.receive(recovered, sent).acks
        }
        assert released <= acked, stored
        assert acked & {(2, "processed"), (2, "duplicate")}, stored  # the gap's own
        assert waiting_seqs(recovered) == [], stored


def test_a_crash_between_the_changelog_batches_of_a_release_loses_no_ack_of_a_branch() -> None:
    """A gap filled on `main` lets it reach the branch point of `alt`, whose events waited for
    it: recovered from batches that kept the positions of both and not the outbox row, the
    message taken in again, a duplicate on `main`, acked none of the events applied, and left
    those of `alt` in the deferral buffer for ever (the registration that released `alt` was
    gone). Now every recovered state leaves the row, re-sent, or every one of those events
    acked again; none stays waiting, and the world is the one a clean run makes."""
    state = WritesNoted()
    on_main, point, on_alt = 200, 100, 100
    branch = {"parent_timeline_id": "main", "after_seq": point}
    waiting = [message(offset, offset + 2) for offset in range(on_main)]
    waiting.append(message(on_main, point + 1, "alt", branch=branch))
    waiting += [message(on_main + n, point + n + 1, "alt") for n in range(1, on_alt)]
    for sent in waiting:
        [ack] = PROJECTOR.receive(state, sent).acks
        assert ack.outcome.value == "deferred"
    gap = message(len(waiting), 1)
    before = list(state.items())
    state.writes = PartitionWrites(SMALLEST_BATCH_BYTES)
    first = PROJECTOR.receive(state, gap)
    state.writes.end_event()
    batches = state.writes.batches
    assert len(batches) > 2
    applied = {
        *(("main", seq, "processed") for seq in range(2, on_main + 2)),
        *(("alt", seq, "processed") for seq in range(point + 1, point + on_alt + 1)),
    }
    assert {(ack.timeline_id, ack.seq, ack.outcome.value) for ack in first.acks[1:]} == applied
    digest = world_digest(state, "default", "save-1")
    for stored in range(len(batches) + 1):
        recovered = recovered_from(before, batches[:stored])
        again = PROJECTOR.receive(recovered, gap).acks
        assert {(ack.timeline_id, ack.seq, ack.outcome.value) for ack in again[1:]} == applied
        assert list(recovered.scan(pack(PENDING))) == [], stored
        assert world_digest(recovered, "default", "save-1") == digest, stored


def waiting_key(seq: int) -> bytes:
    return pack(PENDING, "default", "save-1", "main", seq)


def as_once_taken(seq: int) -> bytes:
    """An event at `seq` naming `..`, which a release before took as an id."""
    return orjson.dumps(orjson.loads(event(seq)) | {"target": ".."})


def waiting_seqs(state: MemoryState) -> list[int]:
    return [int(unpack(key)[-1]) for key, _ in state.scan(pack(PENDING))]


def test_a_crash_between_the_changelog_batches_of_a_release_leaves_no_applied_event_waiting() -> (
    None
):
    """Recovered from batches that kept the positions counting the released events and not
    their deletes, the state kept hundreds of them waiting at seqs already applied, for ever
    (nothing but deleting the world removed them). The message taken in again, a duplicate,
    deletes them."""
    split = split_over_batches()
    for stored in range(len(split.batches) + 1):
        recovered = recovered_from(split.before, split.batches[:stored])
        PROJECTOR.receive(recovered, split.gap)
        assert list(recovered.scan(pack(PENDING))) == [], stored


def test_a_crash_before_the_outbox_row_of_a_refusal_keeps_the_refused_event_to_refuse_again() -> (
    None
):
    """A waiting event refused as the gap filled left the buffer before the outbox row that
    keeps its dead letter: recovered from batches that kept its delete and not the row, the
    message taken in again was a plain duplicate, with no `rejected` ack and no dead letter, and
    the event's bytes were lost. Now every crash leaves either the row, or the event waiting to
    be refused again; and no event waits at or below the positions."""
    refused = 450
    split = split_over_batches(refused_at=refused)
    [letter] = split.first.dead_letters
    assert base64.b64decode(letter.value_base64) == as_once_taken(refused)
    assert waiting_seqs(split.after) == list(range(refused + 1, RELEASED + 2))
    for stored in range(len(split.batches) + 1):
        recovered = recovered_from(split.before, split.batches[:stored])
        again = PROJECTOR.receive(recovered, split.gap)
        assert (refused, "rejected") in [(ack.seq, ack.outcome.value) for ack in again.acks], stored
        assert again.dead_letters == [letter], stored
        # whatever the crash kept: the message re-sent from the row deletes the refused event
        # that row refused, and one taken in again as a duplicate refuses it again, its count of
        # waiting events lowered once (twice, before: one event more than the buffer holds)
        assert waiting_seqs(recovered) == waiting_seqs(split.after), stored
        record = timelines.load(recovered, "default", "save-1", "main")
        assert record is not None
        assert record.deferred_events == len(waiting_seqs(recovered)), stored
        line = message(RELEASED + 1, refused)
        taken = PROJECTOR.receive(recovered, line).acks
        assert (taken[0].outcome.value, taken[-1].processed_seq) == ("processed", RELEASED + 1)
        assert waiting_seqs(recovered) == [], stored


def test_an_event_sent_again_at_a_refused_seq_is_taken_in_after_a_crash_that_kept_the_refused() -> (
    None
):
    """A worker killed after the outbox row of a refusal and before the delete of the refused
    event (written after it) keeps that event waiting at the next seq: the event sent again
    there, as the dead letter asks, was acked `duplicate` and lost, and the old bytes refused
    once more. Now it is applied."""
    refused = 450
    split = split_over_batches(refused_at=refused)
    recovered = recovered_from(split.before, split.batches)
    recovered.put(waiting_key(refused), as_once_taken(refused))  # its delete not kept
    assert PROJECTOR.receive(recovered, split.gap).redelivered
    taken = PROJECTOR.receive(recovered, message(RELEASED + 1, refused))
    assert [(ack.seq, ack.outcome.value) for ack in taken.acks[:2]] == [
        (refused, "processed"),
        (refused + 1, "processed"),
    ]
    assert (taken.acks[-1].processed_seq, taken.dead_letters) == (RELEASED + 1, [])
    assert waiting_seqs(recovered) == []


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


def test_pruning_deletes_every_part_of_a_row_and_those_a_crash_left_past_it() -> None:
    state = WritesNoted()
    gap, _ = filled(state)
    parts = row_records(state, RELEASED)
    past = pack(OUTBOX, TOPIC, 0, RELEASED, len(parts))
    state.put(past, parts[-1][1])  # of an attempt a crash cut short, in more parts
    later = OUTBOX_DEPTH + RELEASED
    PROJECTOR.receive(state, message(later, RELEASED + 2))
    assert row_records(state, RELEASED) == []
    assert len(row_records(state, later)) == 1
    assert not PROJECTOR.receive(state, gap).redelivered  # as any message that far back


def test_a_row_missing_a_part_stops_its_redelivery_with_why() -> None:
    state = WritesNoted()
    gap, _ = filled(state)
    state.delete(pack(OUTBOX, TOPIC, 0, RELEASED, 2))
    with pytest.raises(ValueError, match=r"kept in 6 parts, and part 2 is missing"):
        PROJECTOR.receive(state, gap)


def test_a_crash_between_a_waiting_branchs_record_and_its_registration_leaves_it_no_orphan() -> (
    None
):
    """The first event of `alt` waits for `main` to reach seq 3. A worker killed after the
    changelog batch of alt's record and before the one of its registration with `main` (every
    write its own batch here) kept a branch `main` never released: alt's event, taken in again
    after the restart, was a duplicate, and alt waited for ever, `main` long past seq 3. Now
    the duplicate registers it again, and `main` releases it as it reaches seq 3."""
    branch = {"parent_timeline_id": "main", "after_seq": 3}
    log = [
        message(0, 2),
        message(1, 4, "alt", branch=branch),
        message(2, 1),
        message(3, 3),
    ]
    state = WritesNoted(limit=1)
    ends = []
    for sent in log:
        PROJECTOR.receive(state, sent)
        state.writes.end_event()
        ends.append(len(state.writes.batches))
    for stored in range(ends[0], ends[1] + 1):  # every crash within alt's first message
        recovered = recovered_from([], state.writes.batches[:stored])
        acked = {
            (ack.timeline_id, ack.seq, ack.outcome.value)
            for sent in log[1:]  # the restart, from the committed offset
            for ack in PROJECTOR.receive(recovered, sent).acks
        }
        assert ("alt", 4, "processed") in acked, stored
        assert waiting_seqs(recovered) == [], stored


def test_rows_whose_later_position_never_comes_are_pruned_all_the_same() -> None:
    """A transactional topic's commit markers (and aborted events) take offsets no message is
    delivered at: a row was forgotten only by the message `OUTBOX_DEPTH` positions after it,
    so a row whose position there was a marker stayed for ever (a third of them, with
    transactions of two events)."""
    state = MemoryState()
    for offset, seq in [(0, 1), (1, 2), (3, 3), (OUTBOX_DEPTH + 3, 4), (OUTBOX_DEPTH + 4, 5)]:
        PROJECTOR.receive(state, message(offset, seq))  # offsets 2 and DEPTH + 2: markers
    kept = sorted({int(unpack(key)[3]) for key, _ in state.scan(pack(OUTBOX, TOPIC, 0))})
    assert kept == [OUTBOX_DEPTH + 3, OUTBOX_DEPTH + 4]


def test_the_parts_a_crash_left_of_a_row_being_pruned_go_with_the_next_pruning() -> None:
    """A worker killed after the delete of a row's first record keeps its other parts: the
    message taken in again finds no row there, and the pruning that scans from the last one
    stopped before them, and moved past them for good."""
    state = WritesNoted()
    filled(state)
    [(head, _), *parts] = row_records(state, RELEASED)
    assert parts
    state.delete(head)  # all the crash kept of the row's pruning
    PROJECTOR.receive(state, message(OUTBOX_DEPTH + RELEASED, RELEASED + 2))
    assert row_records(state, RELEASED) == []
