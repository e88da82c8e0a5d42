"""Timelines: saves, loads and branches as a registry of branch points.

A timeline is a line of positions 1, 2, 3... in one world. A branch names a parent and the
last parent position it inherits (`after_seq`); its own numbering continues from there. Reading
a timeline means reading its own records, then each ancestor's up to the branch point: the
`ancestry`, newest segment first.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import NamedTuple

from projections.key_prefixes import TIMELINES, WAITED_ON, WAITING_CHILDREN
from projections.keys import pack, pack_scope, unpack
from projections.state import StateTransaction
from schemas import MAX_SEQ
from schemas.records import TimelineRecord


@dataclass(frozen=True, slots=True)
class Segment:
    """One timeline of an ancestry and the last of its positions that is visible."""

    timeline_id: str
    upto_seq: int


Ancestry = tuple[Segment, ...]


def sees(ancestry: Ancestry, timeline_id: str, seq: int) -> bool:
    """Whether a timeline of this ancestry holds position `seq` of `timeline_id`: one of its
    own, or an ancestor's up to the branch point."""
    return any(s.timeline_id == timeline_id and seq <= s.upto_seq for s in ancestry)


def as_of(ancestry: Ancestry, seq: int) -> Ancestry:
    """The ancestry as it stood at position `seq` (positions go on from parent to branch)."""
    return tuple(replace(segment, upto_seq=min(segment.upto_seq, seq)) for segment in ancestry)


def timeline_key(tenant_id: str, world_id: str, timeline_id: str) -> bytes:
    return pack_scope(TIMELINES, tenant_id, world_id, timeline_id)


def load(
    tx: StateTransaction, tenant_id: str, world_id: str, timeline_id: str
) -> TimelineRecord | None:
    """The registry entry of a timeline, or None if never seen."""
    key = timeline_key(tenant_id, world_id, timeline_id)
    raw = tx.get(key)
    if raw is None:
        return None
    saved = _SAVED.get(key)
    if saved is not None and saved[0] == raw:
        return saved[1]
    return TimelineRecord.from_bytes(raw)


def save(tx: StateTransaction, record: TimelineRecord) -> None:
    key = timeline_key(record.tenant_id, record.world_instance_id, record.timeline_id)
    raw = record.to_bytes()
    tx.put(key, raw)
    if len(_SAVED) >= _SAVED_SIZE and key not in _SAVED:
        _SAVED.clear()  # a worker with this many timelines in play starts the cache afresh
    _SAVED[key] = raw, record


_SAVED: dict[bytes, tuple[bytes, TimelineRecord]] = {}
"""The record last saved under each timeline key, with its bytes: the next event of that
timeline loads it again, and finding the same bytes stored proves it is the same record
(records are immutable), however the state got there."""
_SAVED_SIZE = 1 << 12


def ancestry(tx: StateTransaction, record: TimelineRecord, upto_seq: int = MAX_SEQ) -> Ancestry:
    """The segments a read at `upto_seq` on `record`'s timeline sees, own timeline first."""
    segments = [Segment(record.timeline_id, upto_seq)]
    current = record
    while current.parent_timeline_id is not None:
        parent = load(tx, current.tenant_id, current.world_instance_id, current.parent_timeline_id)
        if parent is None:  # registered parents are never removed but by world deletion
            break
        segments.append(Segment(parent.timeline_id, min(current.after_seq, segments[-1].upto_seq)))
        current = parent
    return tuple(segments)


def descends_from(tx: StateTransaction, record: TimelineRecord, timeline_id: str) -> bool:
    """Whether `timeline_id` is `record`'s timeline or one of its ancestors."""
    return any(segment.timeline_id == timeline_id for segment in ancestry(tx, record))


def provider(tx: StateTransaction, timeline: TimelineRecord, seq: int) -> TimelineRecord:
    """The timeline whose own events make position `seq` as `timeline` sees it: `timeline`
    itself, or the ancestor it inherited that position from (a branch shares its parent's past
    up to the branch point)."""
    current = timeline
    while current.parent_timeline_id is not None and seq <= current.after_seq:
        parent = load(tx, current.tenant_id, current.world_instance_id, current.parent_timeline_id)
        if parent is None:
            break
        current = parent
    return current


def has_reached(tx: StateTransaction, timeline: TimelineRecord, seq: int) -> bool:
    """Whether every position up to `seq` as `timeline` sees it has been applied."""
    source = provider(tx, timeline, seq)
    return seq == 0 or (not source.waiting_for_parent and source.processed_seq >= seq)


def reached_seq(tx: StateTransaction, timeline: TimelineRecord) -> int:
    """The position up to which everything `timeline` sees has been applied: its
    `processed_seq`, or, while it waits for its branch point, as far as the ancestors making
    that point have come (a branch after seq 3 of a parent stuck at 1 has reached 1)."""
    reached = timeline.processed_seq
    current = timeline
    while current.waiting_for_parent:
        source = provider(tx, current, current.after_seq)
        if source.timeline_id == current.timeline_id:  # no parent recorded: nothing to wait on
            break
        reached = min(reached, source.processed_seq)
        current = source
    return reached


def wait_for_parent(tx: StateTransaction, child: TimelineRecord) -> None:
    """Note that `child` holds its events until its branch point is reached: by its parent,
    or by the ancestor the parent inherited that position from."""
    assert child.parent_timeline_id is not None
    parent = load(tx, child.tenant_id, child.world_instance_id, child.parent_timeline_id)
    source = (
        child.parent_timeline_id
        if parent is None
        else provider(tx, parent, child.after_seq).timeline_id
    )
    tx.put(
        pack(WAITING_CHILDREN, child.tenant_id, child.world_instance_id, source, child.timeline_id),
        b"1",
    )
    tx.put(pack_scope(WAITED_ON, child.tenant_id, child.world_instance_id, source), b"1")


class Ready(NamedTuple):
    """The waiting children a parent has released, and the keys that registered them, which the
    caller deletes (`children_ready`)."""

    children: list[TimelineRecord]
    registrations: list[bytes]


def children_ready(tx: StateTransaction, parent: TimelineRecord) -> Ready:
    """Waiting children whose branch point `parent` has now made; they stop waiting.

    The children waiting here are those whose branch point `parent`'s own events made, as far
    as was known when each began to wait (see `provider`): a parent that became a branch since
    inherits some of those points from an ancestor, and a child waits no more once that
    ancestor makes its point, the parent still waiting or not. So each waiting child that is
    itself a parent is looked into too, with how far it sees what `parent` sees (up to its
    branch point, and its parent's): a branch waiting on a timeline that was only deferred
    events then was released only with that timeline, or never. Their registrations (and a
    parent's mark, once no child waits there) are left for the caller to delete: the sequencer
    deletes them only after the outbox row that keeps the acks of the children's events, so
    that a worker killed before it finds the children again, and the message taken in again
    acks those events again (`projections.sequencing`).
    """
    tenant, world = parent.tenant_id, parent.world_instance_id
    reached: dict[int, bool] = {}  # by seq: `has_reached` walks the ancestry once per point

    def parent_reached(seq: int) -> bool:
        if seq not in reached:
            reached[seq] = has_reached(tx, parent, seq)
        return reached[seq]

    ready, registrations = [], []
    looked_into = [(parent, MAX_SEQ)]  # a timeline, and up to where it sees what `parent` sees
    while looked_into:
        current, seen_alike = looked_into.pop()
        waited_on = pack_scope(WAITED_ON, tenant, world, current.timeline_id)
        if tx.get(waited_on) is None:  # the common case, read on every event: one point lookup
            continue
        waiting = 0
        registered = pack_scope(WAITING_CHILDREN, tenant, world, current.timeline_id)
        for key, _ in list(tx.scan(registered)):
            child = load(tx, tenant, world, str(unpack(key)[-1]))
            if (
                child is not None
                and child.after_seq <= seen_alike
                and parent_reached(child.after_seq)
            ):
                registrations.append(key)
                ready.append(child)
                continue
            waiting += 1
            if child is not None and child.waiting_for_parent:
                looked_into.append((child, min(seen_alike, child.after_seq)))
        if not waiting:
            registrations.append(waited_on)
    return Ready(ready, registrations)


def of_world(tx: StateTransaction, tenant_id: str, world_id: str) -> list[TimelineRecord]:
    """Every timeline of a world, by id."""
    return [TimelineRecord.from_bytes(raw) for _, raw in stored_of_world(tx, tenant_id, world_id)]


def stored_of_world(
    tx: StateTransaction, tenant_id: str, world_id: str
) -> list[tuple[bytes, bytes]]:
    """Every timeline record of a world as stored, with its key, by id: a reader that kept the
    bytes it saw last decodes only those that moved since."""
    return list(tx.scan(pack(TIMELINES, tenant_id, world_id)))
