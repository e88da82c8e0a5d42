"""The runtime read: one character's mind on one timeline, as the Memory contract shows it.

What the character holds to be so (at most 50 beliefs, most important first), how they stand
to others (`projections.relations`), what they last saw (at most 20 recollections, newest
first) and where they are. Each memory's `diverging` is judged as the read is made
(`projections.divergence`). A read never writes.

Every read may be made `as_of_seq`: the state once that position of the timeline was
processed, the ancestry cut there (and persistent memories formed up to it), never later.
"""

from __future__ import annotations

import hashlib
from dataclasses import replace

import orjson

from projections import timelines, whereabouts
from projections.deletion import deletion_marks
from projections.divergence import as_judged
from projections.memory_store import (
    MemoryKeys,
    memory_keys,
    most_important_beliefs,
    newest_recollections,
    persistent_memories_stored,
)
from projections.relations import relations_of
from projections.state import StateTransaction
from projections.timelines import Ancestry
from schemas.memory import RuntimeRead
from schemas.records import TimelineRecord

MAX_BELIEFS = 50
MAX_RECOLLECTIONS = 20


class NotFound(Exception):
    """The read has nothing to show: a timeline never seen, or a character with no past."""


class BadRead(ValueError):
    """A read asked for something its parameters cannot mean (a 400 with this detail)."""


def timeline_view(
    tx: StateTransaction,
    tenant_id: str,
    world_id: str,
    timeline_id: str,
    as_of_seq: int | None = None,
    position_name: str = "as_of_seq",
) -> tuple[TimelineRecord, MemoryKeys, Ancestry]:
    """What a read on a timeline needs, or NotFound for a timeline never seen.

    The record's `processed_seq` is the position the timeline has reached
    (`timelines.reached_seq`: a branch waiting for its branch point has reached only what its
    parent has). As of a position, the record says that position was the last processed and
    acknowledged, and the ancestry and persistent memories are cut there; BadRead for a
    position not reached yet, naming it as the read's parameter (`position_name`) does.
    """
    record = timelines.load(tx, tenant_id, world_id, timeline_id)
    if record is None:
        raise timeline_never_seen(tenant_id, world_id, timeline_id)
    keys = memory_keys(tx, tenant_id, world_id)
    reached = timelines.reached_seq(tx, record)
    if as_of_seq is None:
        if reached != record.processed_seq:
            record = record.model_copy(update={"processed_seq": reached})
        return record, keys, timelines.ancestry(tx, record)
    if as_of_seq > reached:
        raise BadRead(
            f"{position_name} {as_of_seq} is beyond the processed_seq {reached} "
            f"of timeline {timeline_id!r}"
        )
    return (
        record.model_copy(update={"processed_seq": as_of_seq, "acknowledged_seq": as_of_seq}),
        replace(keys, persistent_upto=as_of_seq),
        timelines.ancestry(tx, record, as_of_seq),
    )


def known_of(tx: StateTransaction, keys: MemoryKeys, ancestry: Ancestry, npc_id: str) -> bool:
    """Whether the runtime read knows anything of the character on the timeline (a memory, or
    where they are): what every read of a character answers 404 without."""
    return holds_memories(tx, keys, ancestry, npc_id) or bool(
        whereabouts.location_of(tx, keys.tenant_id, keys.world_id, ancestry, npc_id)
    )


def holds_memories(tx: StateTransaction, keys: MemoryKeys, ancestry: Ancestry, npc_id: str) -> bool:
    """Whether `npc_id` holds any memory the timeline sees (a mover has a place, not a mind)."""
    return bool(
        newest_recollections(tx, keys, ancestry, npc_id, 1)
        or most_important_beliefs(tx, keys, ancestry, npc_id, 1)
    )


def timeline_never_seen(tenant_id: str, world_id: str, timeline_id: str) -> NotFound:
    """The 404 of a timeline never seen, naming the world and tenant read: a misspelt world, or
    a key of another tenant, reads as no timeline at all."""
    return NotFound(
        f"timeline {timeline_id!r} of world {world_id!r} (tenant {tenant_id!r}) "
        "has never received events"
    )


def nothing_known(npc_id: str, timeline_id: str) -> NotFound:
    return NotFound(f"nothing is known of {npc_id!r} on timeline {timeline_id!r}")


def read_position(tx: StateTransaction, tenant_id: str, world_id: str, timeline_id: str) -> bytes:
    """What a runtime read on the timeline is computed from, as bytes that change whenever the
    answer can: the stored record of the timeline and of each ancestor (their positions), and
    how many persistent memories the world holds, and how often it was deleted. Every memory,
    relation, whereabouts and world fact a read folds is written by an event that moves one of
    them. Their digest (32 bytes), not the records: a cached answer keeps it, and a timeline
    loaded from a save a thousand times over kept 220 KB of records beside each answer."""
    parts = [
        deletion_marks(tx, tenant_id, world_id),
        b"%d" % persistent_memories_stored(tx, tenant_id, world_id),
    ]
    current: str | None = timeline_id
    while current is not None:
        raw = tx.get(timelines.timeline_key(tenant_id, world_id, current))
        if raw is None:
            break
        parts.append(raw)
        current = orjson.loads(raw).get("parent_timeline_id")  # no record built: a read's cost
    joined = b"\n".join(parts)  # stored records are compact JSON: never a raw line break
    return hashlib.blake2b(joined, digest_size=32).digest()


def runtime_read(
    tx: StateTransaction,
    tenant_id: str,
    world_id: str,
    timeline_id: str,
    npc_id: str,
    as_of_seq: int | None = None,
) -> RuntimeRead:
    """One character's mind on one timeline (as of a position); NotFound if nothing is known
    of them there."""
    record, keys, ancestry = timeline_view(tx, tenant_id, world_id, timeline_id, as_of_seq)
    recollections = newest_recollections(tx, keys, ancestry, npc_id, MAX_RECOLLECTIONS)
    beliefs = most_important_beliefs(tx, keys, ancestry, npc_id, MAX_BELIEFS)
    location = whereabouts.location_of(tx, tenant_id, world_id, ancestry, npc_id)
    if not recollections and not beliefs and location is None:
        raise nothing_known(npc_id, timeline_id)
    return RuntimeRead(
        world_instance_id=world_id,
        timeline_id=timeline_id,
        npc_id=npc_id,
        acknowledged_seq=record.acknowledged_seq,
        processed_seq=record.processed_seq,
        location=location,
        beliefs=[as_judged(tx, tenant_id, world_id, ancestry, memory) for memory in beliefs],
        relations=relations_of(tx, keys, ancestry, npc_id),
        recollections=[
            as_judged(tx, tenant_id, world_id, ancestry, memory) for memory in recollections
        ],
    )
