"""Sequencing: every event is applied once, in order, per timeline.

The rules, per `(tenant, world, timeline)`:
- a seq at or below `processed_seq`, or one already waiting, is a duplicate: acked, no effect;
- the next seq is applied, then every waiting seq that now follows on;
- a seq beyond a gap waits in a bounded buffer (`sequencing.max_deferred`) until the gap fills;
- the first event of a branch names its parent and `after_seq`; its seq must be
  `after_seq + 1`, and it waits until the parent has applied `after_seq`;
- a branch inherits its positions up to `after_seq`: a seq there is a duplicate, also one that
  came before the branch's first event and waited (it is acked when the branch is placed, and
  leaves the buffer, where it would otherwise wait for ever);
- a waiting event that no longer reads as an event when its gap fills (a release before stored
  it, under a contract that took more) is refused then: acked `rejected` and handed back with
  its bytes and why (`Sequenced.refused`), and its seq is open again.

Each apply writes the timeline's positions after the state it produced, and every projection
reads only what lies before the event's position, so re-applying an event whose positions
were not yet saved (a crash in between) writes the very same state again. What a message takes
out of the deferral buffer leaves it after the outbox row that keeps its acks (`Sequenced`), so
a crash after the positions and before the row leaves those events to ack again.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple, Protocol

from pydantic import ValidationError

from projections import timelines
from projections.delivery import bounded_reason, explain
from projections.key_prefixes import PENDING, TIMELINES
from projections.keys import pack, unpack
from projections.record_bounds import TooLarge
from projections.state import StateTransaction
from projections.timelines import Ancestry
from schemas import Ack, Event, Outcome
from schemas.judgements import RefusedJudgement
from schemas.policy import SequencingPolicy
from schemas.records import TimelineRecord
from schemas.trusted import trusted


class Applied(NamedTuple):
    """What applying an event has to say on its `processed` ack."""

    note: str | None = None
    """Why something the event asked for was not recorded."""
    refused: tuple[RefusedJudgement, ...] = ()
    """The judgements the model did not make (the rules made them)."""


ApplyEvent = Callable[[StateTransaction, Event, Ancestry], Applied]
"""Applies one event's effects, given the ancestry as it stood just before the event."""


class Refused(NamedTuple):
    """A waiting event refused as it left the deferral buffer: its stored bytes and why."""

    raw: bytes
    reason: str


class Sequenced(NamedTuple):
    """What taking one event in gives: its acks (its own first), the waiting events it
    refused, to be dead-lettered, and the keys to delete after the outbox row that keeps those
    acks and dead letters (`projections.delivery.produce_once`): the deferral buffer's entries
    of the events it took out (applied, refused, or at positions the branch it placed inherits)
    and the registrations of the branches it released.

    The changelog keeps a message's writes in the order of their last, in several record batches
    when they fill more than one. A worker killed between two must find, in a state that lacks
    the outbox row, every event the message took out still in the buffer: those its recovered
    positions do not count to apply again, those they count to ack again as the message, a
    duplicate now, is taken in again (`_taken_out_before`). Deleted before the row, the acks of
    the events applied were lost: the redelivery, a duplicate, had nothing left to ack."""

    acks: list[Ack]
    refused: tuple[Refused, ...] = ()
    deleted_after_outbox: tuple[bytes, ...] = ()


class EventIdentity(Protocol):
    """What an ack names an event by: an event, or a position of the deferral buffer."""

    @property
    def tenant_id(self) -> str: ...
    @property
    def world_instance_id(self) -> str: ...
    @property
    def timeline_id(self) -> str: ...
    @property
    def seq(self) -> int: ...


class WaitingAt(NamedTuple):
    """A position of the deferral buffer, as its key names it."""

    tenant_id: str
    world_instance_id: str
    timeline_id: str
    seq: int

    @classmethod
    def of(cls, key: bytes) -> WaitingAt:
        _, tenant, world, timeline, seq = unpack(key)
        return cls(str(tenant), str(world), str(timeline), int(seq))


def pending_key(record: TimelineRecord, seq: int) -> bytes:
    return _pending_of(record) + pack(seq)


def _pending_of(record: TimelineRecord) -> bytes:
    """The prefix of the timeline's entries in the deferral buffer, in seq order."""
    return pack(PENDING, record.tenant_id, record.world_instance_id, record.timeline_id)


def ack(
    tx: StateTransaction,
    event: EventIdentity,
    outcome: Outcome,
    record: TimelineRecord | None,
    reason: str | None = None,
    refused: tuple[RefusedJudgement, ...] = (),
) -> Ack:
    """The ack of `event` with the timeline's positions as they now stand: a branch waiting
    for its branch point has processed only what its parent has (`timelines.reached_seq`), as
    its reads say. It lists every judgement `refused`: the outbox keeps, and the worker sends,
    as many as fit (`projections.delivery.with_refusals_bounded`). Its `reason` is bounded as
    every reason is (`bounded_reason`: an event's notes quote what it named)."""
    processed = None if record is None else record.processed_seq
    if record is not None and record.waiting_for_parent:
        processed = timelines.reached_seq(tx, record)
    return trusted(  # of a validated event and record: one ack an event, not checked again
        Ack,
        {
            "tenant_id": event.tenant_id,
            "world_instance_id": event.world_instance_id,
            "timeline_id": event.timeline_id,
            "seq": event.seq,
            "outcome": outcome,
            "reason": None if reason is None else bounded_reason(reason),
            "acknowledged_seq": None if record is None else record.acknowledged_seq,
            "processed_seq": processed,
            "refused_judgements": list(refused),
            "more_refused_judgements": 0,
        },
    )


def sequence(
    tx: StateTransaction,
    event: Event,
    raw: bytes,
    apply: ApplyEvent,
    policy: SequencingPolicy,
) -> Sequenced:
    """Take one event in: apply, defer, drop as duplicate or reject it.

    The first ack is this event's; any that follow are those of deferred events it released
    (`processed`, or `rejected` for one refused) and of events that waited at a position the
    branch it places inherits (`duplicate`); a duplicate's, those of events a crash left in the
    buffer at positions already counted (`_taken_out_before`).
    """
    known = timelines.load(tx, event.tenant_id, event.world_instance_id, event.timeline_id)
    record, problem = _place_on_timeline(tx, event, known)
    if problem is not None:
        return Sequenced([ack(tx, event, Outcome.REJECTED, known, problem)])
    assert record is not None
    placing = record.parent_timeline_id is not None and (known is None or not known.started)
    inherited = _inherited(tx, record) if placing else []
    if inherited:
        record = _without(record, inherited)
    if event.seq <= record.processed_seq or _waiting(tx, record, event.seq):
        if event.seq > record.processed_seq:  # waiting: a crash may have kept it, not its count
            record = _counting_waiting(tx, record, event.seq)
        if placing:  # the branch's first event, which came before too: the branch is placed
            _save_waiting(tx, record)
        elif record.waiting_for_parent:
            record = _waiting_again(tx, record)
        # A redelivery after a crash can find events that already follow on still waiting,
        # and events its positions count (the inherited ones too) still in the buffer.
        duplicate = ack(tx, event, Outcome.DUPLICATE, record, _why_duplicate(record, event.seq))
        counted = _taken_out_before(tx, record)
        released = _release(tx, record, apply)
        return Sequenced(
            [duplicate, *counted.acks, *released.acks],
            released.refused,
            (*counted.deleted_after_outbox, *released.deleted_after_outbox),
        )

    if event.seq == record.processed_seq + 1 and not record.waiting_for_parent:
        try:
            record, applied = _apply(tx, record, event, apply, {})
        except TooLarge as refusal:  # raised before the event wrote anything
            return Sequenced([ack(tx, event, Outcome.REJECTED, known, refusal.reason)])
        processed = ack(tx, event, Outcome.PROCESSED, record, *applied)
        settled = _settle_inherited(tx, record, inherited)
        released = _release(tx, record, apply)
        return Sequenced(
            [processed, *settled, *released.acks],
            released.refused,
            (*inherited, *released.deleted_after_outbox),
        )

    if record.deferred_events >= policy.max_deferred:
        return Sequenced([ack(tx, event, Outcome.REJECTED, known, _buffer_full(record, policy))])
    acknowledged = max(record.acknowledged_seq, event.seq)
    record = record.model_copy(
        update={"acknowledged_seq": acknowledged, "deferred_events": record.deferred_events + 1}
    )
    tx.put(pending_key(record, event.seq), raw)
    _save_waiting(tx, record)
    # a branch placed here waiting may hold children whose point an ancestor made already
    released = _release(tx, record, apply) if placing else Sequenced([])
    return Sequenced(
        [
            ack(tx, event, Outcome.DEFERRED, record, _why_waiting(record)),
            *_settle_inherited(tx, record, inherited),
            *released.acks,
        ],
        released.refused,
        (*inherited, *released.deleted_after_outbox),
    )


def settle_inherited_everywhere(tx: StateTransaction) -> list[Ack]:
    """Take every event waiting at a position its branch inherits out of the deferral buffer,
    with its `duplicate` ack: a release before placed branches without them (they waited for
    ever, and each held a place in the buffer). For a store of such a release
    (`projections.migrations`); this release never leaves one there.

    Run again after a crash that kept part of its writes, it ends as run once: the events go
    first, whatever the count says, and the count is saved last, set to the events left
    waiting, so one already lowered is not lowered again, and one not yet lowered is."""
    acks: list[Ack] = []
    for _, raw in list(tx.scan(pack(TIMELINES))):
        if b'"parent_timeline_id":"' not in raw:  # a root timeline's: nothing to decode
            continue
        record = TimelineRecord.from_bytes(raw)
        prefix = _pending_of(record)
        waiting = [key for key, _ in tx.scan(prefix)]
        inherited = [key for key in waiting if int(unpack(key)[-1]) <= record.after_seq]
        left = record.model_copy(update={"deferred_events": len(waiting) - len(inherited)})
        acks += _settle_inherited(tx, left, inherited)
        for key in inherited:
            tx.delete(key)
        if left != record:
            timelines.save(tx, left)
    return acks


def _place_on_timeline(
    tx: StateTransaction, event: Event, known: TimelineRecord | None
) -> tuple[TimelineRecord | None, str | None]:
    """The timeline record the event lands on, or the reason it cannot land."""
    branch = event.branch
    if known is not None and known.started:
        if branch is not None and (
            branch.parent_timeline_id != known.parent_timeline_id
            or branch.after_seq != known.after_seq
        ):
            return None, (
                f"timeline {event.timeline_id!r} already exists"
                f"{_branch_phrase(known)}; it cannot branch again"
            )
        return known, None
    if branch is None:
        if known is not None:
            return known, None
        return TimelineRecord(
            tenant_id=event.tenant_id,
            world_instance_id=event.world_instance_id,
            timeline_id=event.timeline_id,
        ), None

    parent = timelines.load(tx, event.tenant_id, event.world_instance_id, branch.parent_timeline_id)
    if parent is None:
        return None, (
            f"unknown branch parent {branch.parent_timeline_id!r}: it has no event yet (publish"
            " this event again once it has one)"
        )
    if timelines.descends_from(tx, parent, event.timeline_id):
        return None, f"branching from {branch.parent_timeline_id!r} would make a cycle"
    if event.seq != branch.after_seq + 1:
        return None, (
            f"the first event of a branch after seq {branch.after_seq} "
            f"must have seq {branch.after_seq + 1}, not {event.seq}"
        )
    base = known or TimelineRecord(
        tenant_id=event.tenant_id,
        world_instance_id=event.world_instance_id,
        timeline_id=event.timeline_id,
    )
    return base.model_copy(
        update={
            "parent_timeline_id": branch.parent_timeline_id,
            "after_seq": branch.after_seq,
            "processed_seq": branch.after_seq,
            "acknowledged_seq": max(base.acknowledged_seq, branch.after_seq),
            "waiting_for_parent": not timelines.has_reached(tx, parent, branch.after_seq),
        }
    ), None


def _inherited(tx: StateTransaction, branch: TimelineRecord) -> list[bytes]:
    """The events that waited on a timeline before its first event placed it as `branch`, at
    positions it inherits from its parent (seq up to `after_seq`): none can ever be applied
    there, as none arriving now would be. Their pending keys, oldest first."""
    if branch.deferred_events == 0:
        return []
    prefix = _pending_of(branch)
    found = []
    for key, _ in tx.scan(prefix):
        if int(unpack(key)[-1]) > branch.after_seq:
            break
        found.append(key)
    return found


def _without(branch: TimelineRecord, inherited: list[bytes]) -> TimelineRecord:
    """`branch` no longer counting the `inherited` events in its deferral buffer."""
    waiting = max(0, branch.deferred_events - len(inherited))
    return branch.model_copy(update={"deferred_events": waiting})


def _settle_inherited(
    tx: StateTransaction, branch: TimelineRecord, inherited: list[bytes]
) -> list[Ack]:
    """The `duplicate` ack each of the `inherited` events would have had arriving now (whatever
    it holds: it has no effect), which leave the buffer (`branch` no longer counts them): the
    caller deletes them."""
    return [_ack_counted(tx, branch, WaitingAt.of(key)) for key in inherited]


def _ack_counted(tx: StateTransaction, record: TimelineRecord, counted: WaitingAt) -> Ack:
    """The ack of an event that waited at a position `record` counts: `duplicate` at one it
    inherits, `processed` past its branch point (applied)."""
    if counted.seq <= record.after_seq:
        return ack(tx, counted, Outcome.DUPLICATE, record, _why_duplicate(record, counted.seq))
    return ack(tx, counted, Outcome.PROCESSED, record)


def _taken_out_before(tx: StateTransaction, record: TimelineRecord) -> Sequenced:
    """The events still in the buffer at or below the timeline's `processed_seq`, with the ack
    each had (`_ack_counted`; a `processed` one without the note or the refused judgements the
    first lists) and its key to delete: a message whose record batches a worker killed after
    those of the positions and before the outbox row leaves them (`Sequenced`), and, taken in
    again, is a duplicate on its own timeline and releases the branches it released again
    (their registrations left with them): nothing else sends their acks. Taken on a duplicate
    and as a branch is released only: one seek where none is left."""
    prefix = _pending_of(record)
    acks, keys = [], []
    for key, _ in tx.scan(prefix):
        counted = WaitingAt.of(key)
        if counted.seq > record.processed_seq:
            break
        acks.append(_ack_counted(tx, record, counted))
        keys.append(key)
    return Sequenced(acks, deleted_after_outbox=tuple(keys))


def forget_taken_out(tx: StateTransaction, acks: list[Ack]) -> None:
    """Delete what a redelivered message's record batches left in the buffer behind its outbox
    row (`Sequenced`): a worker killed after the row and before the deletes written after it
    keeps the entries of the events the message took out (applied, inherited, refused), whose
    acks, those after its own, are in the row, re-sent. Only those: a message before it, taken
    in again first after a restart, leaves what a later message's lost row did not ack for that
    one, a duplicate now, to ack (`_taken_out_before`). No event waits at those positions
    again: the timeline counts them, or waits at a refused one for an event sent anew, which is
    taken in at once (it is the next), and no longer taken for one already waiting."""
    for item in acks[1:]:
        tenant, world, timeline, seq = (
            item.tenant_id,
            item.world_instance_id,
            item.timeline_id,
            item.seq,
        )
        if tenant is None or world is None or timeline is None or seq is None:
            continue
        key = pack(PENDING, tenant, world, timeline, seq)
        if tx.get(key) is not None:
            tx.delete(key)


def _counting_waiting(tx: StateTransaction, record: TimelineRecord, seq: int) -> TimelineRecord:
    """The record counting the event waiting at `seq` as received and waiting, saved if it did
    not: a worker killed while deferring an event (its writes split over record batches) kept
    the event and not the record counting it, and its redelivery, a duplicate, left the count
    of the buffer (its bound) and `acknowledged_seq` short for good."""
    counted = {
        "acknowledged_seq": max(record.acknowledged_seq, seq),
        "deferred_events": _waiting_past(tx, record),
    }
    if all(getattr(record, name) == value for name, value in counted.items()):
        return record
    record = record.model_copy(update=counted)
    timelines.save(tx, record)
    return record


def _waiting_again(tx: StateTransaction, branch: TimelineRecord) -> TimelineRecord:
    """A waiting branch an event of which came again: registered with its parent again, or
    waiting no more if the parent has reached its branch point. A worker killed between the
    record of the branch's first event and its registration (another record batch) kept a
    branch the parent, reaching the point, never released: it waited for ever."""
    parent = None
    if branch.parent_timeline_id is not None:
        parent = timelines.load(
            tx, branch.tenant_id, branch.world_instance_id, branch.parent_timeline_id
        )
    reached = parent is not None and timelines.has_reached(tx, parent, branch.after_seq)
    record = branch.model_copy(update={"waiting_for_parent": not reached})
    _save_waiting(tx, record)
    return record


def _save_waiting(tx: StateTransaction, record: TimelineRecord) -> None:
    """Save the record, and register it with what it waits for (its branch point) if it does."""
    timelines.save(tx, record)
    if record.waiting_for_parent:
        timelines.wait_for_parent(tx, record)


def _waiting(tx: StateTransaction, record: TimelineRecord, seq: int) -> bool:
    """Whether the event at `seq` waits in the deferral buffer (none can, with none counted).

    An entry at the next seq that does not read as an event is one a release of an earlier
    release refused, whose delete a worker killed just after the outbox row of the refusal lost:
    its dead letter is sent, and the event sent again at its seq is taken in, the entry deleted.
    This release's message, redelivered after such a crash, deletes it first
    (`forget_taken_out`), whatever it holds."""
    if record.deferred_events == 0:
        return False
    key = pending_key(record, seq)
    raw = tx.get(key)
    if raw is None:
        return False
    if seq == record.processed_seq + 1 and not _reads_as_event(raw):
        tx.delete(key)
        return False
    return True


def _reads_as_event(raw: bytes) -> bool:
    try:
        Event.model_validate_json(raw)
    except ValidationError:
        return False
    return True


def _apply(
    tx: StateTransaction,
    record: TimelineRecord,
    event: Event,
    apply: ApplyEvent,
    update: dict[str, int],
) -> tuple[TimelineRecord, Applied]:
    """Apply `event`, then save the positions it produced, with `update`'s (in that order);
    with what it says. The event counts as received too: one a worker killed while deferring
    it kept waiting without its record's count is applied as the gap fills, and left the
    timeline's `acknowledged_seq` behind its `processed_seq` for good."""
    applied = apply(tx, event, timelines.ancestry(tx, record, event.seq - 1))
    record = trusted(  # `model_copy`, without its copying of what is replaced anyway
        TimelineRecord,
        {
            **record.__dict__,
            **update,
            "acknowledged_seq": max(record.acknowledged_seq, event.seq),
            "processed_seq": event.seq,
            "applied_events": record.applied_events + 1,
        },
    )
    timelines.save(tx, record)
    return record, applied


def _release(tx: StateTransaction, record: TimelineRecord, apply: ApplyEvent) -> Sequenced:
    """Apply every waiting event that now follows on, here and on waiting child timelines.

    The next position is looked up even where the record counts no waiting event: a worker
    killed while deferring an event (its writes split over changelog batches) may have kept
    the event's pending entry and not the record that counts it, and the event, redelivered,
    is found waiting. Counted or not, it is applied as the gap fills (one point read an
    event, answered by the bloom filter nearly always). One that no longer reads as an event
    is refused instead (`_refuse_waiting`), and its timeline waits again for its seq.

    The events it takes out leave the buffer only after the outbox row (`Sequenced`): deleted
    as each was applied, those of the first record batches were gone while the positions (saved
    again at every event, so last at the end) counted none, the gap, filled again, released
    nothing, and the timeline waited for ever. A branch it releases may hold events a worker
    killed before the row applied: they are acked and deleted as a duplicate's are
    (`_taken_out_before`).

    Releasing a branch, it saves every timeline's position again once all are applied: the
    changelog gets a message's writes in the order of their last write, so a timeline's saved
    before a branch's events wrote the world's count of persistent memories was kept by a
    worker killed between the two, the count not: its events were not applied again, and the
    count stayed short of the memories they stored. Saved last, a position kept says every
    other write of the message is kept too."""
    acks: list[Ack] = []
    refused: list[Refused] = []
    taken_out: list[bytes] = []
    ready, released = [record], {record.timeline_id}
    reached: list[TimelineRecord] = []
    while ready:
        current = ready.pop(0)
        while not current.waiting_for_parent:
            key = pending_key(current, current.processed_seq + 1)
            raw = tx.get(key)
            if raw is None:
                break
            waiting = max(0, current.deferred_events - 1)
            try:
                event = Event.model_validate_json(raw)
            except ValidationError as error:
                why = _no_longer_an_event(error)
            else:
                try:
                    current, applied = _apply(
                        tx, current, event, apply, {"deferred_events": waiting}
                    )
                except TooLarge as too_large:  # raised before the event wrote anything
                    why = f"{too_large.reason}: refused as this message filled the gap"
                else:
                    taken_out.append(key)
                    acks.append(ack(tx, event, Outcome.PROCESSED, current, *applied))
                    continue
            # counted from the buffer, not from the count: a crash before the outbox row keeps
            # the count this refusal lowered and the entry it refuses again (`Sequenced`)
            still_waiting = _waiting_past(tx, current) - 1
            current = current.model_copy(update={"deferred_events": still_waiting})
            rejected, refusal = _refuse_waiting(tx, current, key, raw, why)
            acks.append(rejected)
            refused.append(refusal)
            taken_out.append(key)
            break
        children, registrations = timelines.children_ready(tx, current)
        taken_out += registrations
        for child in children:
            if child.timeline_id in released:  # registered twice: found again (`_waiting_again`)
                continue
            released.add(child.timeline_id)
            child = child.model_copy(update={"waiting_for_parent": False})
            timelines.save(tx, child)
            counted = _taken_out_before(tx, child)
            acks += counted.acks
            taken_out += counted.deleted_after_outbox
            ready.append(child)
        reached.append(current)
    if len(reached) > 1:
        for position in reached:
            timelines.save(tx, position)
    return Sequenced(acks, tuple(refused), tuple(taken_out))


def _no_longer_an_event(error: ValidationError) -> str:
    """Why a waiting event stored by an earlier release cannot be applied, and what to do."""
    return (
        f"stored by an earlier release, it no longer reads as an event ({explain(error)}): "
        f"refused as this message filled the gap; send it again as the contract now takes it"
    )


def _waiting_past(tx: StateTransaction, record: TimelineRecord) -> int:
    """How many events wait in the buffer past the timeline's `processed_seq` (a scan: taken
    only as a release refuses one, which is rare)."""
    prefix = _pending_of(record)
    past = prefix + pack(record.processed_seq + 1)
    return sum(1 for _ in tx.scan(prefix, start=past))


def _refuse_waiting(
    tx: StateTransaction, record: TimelineRecord, key: bytes, raw: bytes, why: str
) -> tuple[Ack, Refused]:
    """Refuse the waiting event at `key`, which cannot be applied `why`: it no longer reads as
    an event (a release before took it, under a contract that took more: an id `.`, a time in
    another form), or would write a record too large for the changelog
    (`projections.record_bounds`); either stopped the worker at every start. Out of the buffer
    (`record` no longer counts it; its entry is deleted after the outbox row, `Sequenced`: a
    worker killed before the row finds it still waiting, and the message taken in again refuses
    it again, with its bytes), its `rejected` ack, and its bytes with why."""
    timelines.save(tx, record)
    at = WaitingAt.of(key)
    reason = bounded_reason(
        f"seq {at.seq} of timeline {at.timeline_id!r} waited for an earlier seq; {why}"
    )
    return ack(tx, at, Outcome.REJECTED, record, reason), Refused(raw, reason)


def _branch_phrase(record: TimelineRecord) -> str:
    if record.parent_timeline_id is None:
        return " as a root timeline"
    return f" as a branch of {record.parent_timeline_id!r} after seq {record.after_seq}"


def _why_duplicate(record: TimelineRecord, seq: int) -> str:
    if record.parent_timeline_id is not None and seq <= record.after_seq:
        return (
            f"seq {seq} is at or before the branch point: timeline {record.timeline_id!r} "
            f"inherits it from {record.parent_timeline_id!r} (after seq {record.after_seq})"
        )
    return "already received"


def _why_waiting(record: TimelineRecord) -> str:
    return f"waiting for {_awaited(record)}"


def _awaited(record: TimelineRecord) -> str:
    """What the timeline's waiting events wait for: its next seq, or its parent's branch point."""
    if record.waiting_for_parent:
        return f"parent timeline {record.parent_timeline_id!r} to reach seq {record.after_seq}"
    if not record.processed_seq and record.parent_timeline_id is None:  # it has no event yet
        return (
            f"seq 1, or, if timeline {record.timeline_id!r} is a branch, its first event (the one"
            " naming its parent)"
        )
    return f"seq {record.processed_seq + 1}"


def _buffer_full(record: TimelineRecord, policy: SequencingPolicy) -> str:
    """Why an event is refused a place among the waiting: what they wait for (a branch's, for
    its parent to reach the branch point: it named its own next seq, one of those waiting)."""
    return (
        f"deferral buffer full: {record.deferred_events} events already wait for "
        f"{_awaited(record)} (sequencing.max_deferred = {policy.max_deferred})"
    )
