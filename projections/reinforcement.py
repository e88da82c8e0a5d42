"""Reinforcement: a recall restarts a memory's clock (section 8).

A `loreweaver.memory.recalled` event (actor: the character, `payload.belief_ids`) is kept per
timeline by position, with the story minute it happened at, for each memory it names that the
character held before it: an id of a memory not formed yet (a belief id is a function of its
position, so a game can name one before it forms, or keep one from a world deleted and begun
anew), held by someone else or forgotten by the recall's story time (forgotten is gone from
recall and decisions: a game naming an id the runtime read still lists brought it back whole)
reinforces nothing. Each recall's record also counts those of the memory before it on its
timeline, so a read through the ancestry finds what it sees with one seek a segment and hands
it to `projections.retention`, which restarts the clock at the latest and lengthens the
half-life per recall. Reads never write: a read that recalls does not
reinforce; only the stream does.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass
from functools import partial

from projections.catalogue import StoredDeclarations, naming
from projections.delivery import MOST_QUOTED_CHARS
from projections.event_keys import MEMORY_RECALLED
from projections.key_prefixes import RECALLS
from projections.keys import pack
from projections.memory_store import MemoryKeys, load_memory, memory_keys, visible
from projections.retention import NEVER_RECALLED, Recalled, Retention, as_held, retention
from projections.state import StateTransaction
from projections.story_clock import minute_of
from projections.timelines import Ancestry, as_of
from projections.versions import at_or_before
from projections.wording import cut, names_in
from schemas import Event
from schemas.memory import Memory
from schemas.policy import Policy

_COUNTED = struct.Struct(">QQ")
"""The head of a recall's record: how many recalls of the memory with a story time its timeline
holds up to this one, and the latest story minute among them (0 with none)."""
_MINUTE_BYTES = 8
_SEQ_KEY_BYTES = len(pack(0))
"""The packed seq that ends a recall's key, after its scope."""
UNHELD_NAMED = 3
"""The ids an ack's note names of those a recall event names in vain (then how many more)."""


def record_recalls(
    tx: StateTransaction, event: Event, ancestry: Ancestry, policy: Policy
) -> str | None:
    """Keep each memory a recall event names that its actor held before it, and had not
    forgotten by then, at its position and story minute (the event's, else the timeline's story
    "now" just before it). Returns the ack's note for what it names that reinforces nothing (a
    recall sent wrong otherwise looked like one that worked while the memories faded); None
    when every id counted."""
    if event.key != MEMORY_RECALLED:
        return None
    if event.actor is None:
        return "a memory.recalled names no actor (the character who recalls): nothing reinforced"
    named = event.payload.get("belief_ids")
    if not isinstance(named, list):
        return "payload.belief_ids is not a list of belief ids: nothing reinforced"
    ids = sorted({item for item in named if isinstance(item, str) and item})  # each once
    tenant, world = event.tenant_id, event.world_instance_id
    keys = memory_keys(tx, tenant, world)
    minutes = minute_of(tx, event, ancestry)
    before = as_of(ancestry, event.seq - 1)  # applied again, its own recalls are no part of it
    belief_ids: list[str] = []
    forgotten: list[str] = []
    for one in ids:
        memory = _held_before(tx, keys, ancestry, event, one)
        if memory is not None:
            held = held_now(tx, keys, before, memory, minutes, policy).memory is not None
            (belief_ids if held else forgotten).append(one)
    for belief_id in belief_ids:
        scope = pack(RECALLS, tenant, world, event.timeline_id, str(event.actor), belief_id)
        last = at_or_before(tx, scope, event.seq - 1)  # applied again: not itself
        counted = NEVER_RECALLED if last is None else counted_in(last[1])
        tx.put(scope + pack(event.seq), recall_record(counted, minutes))
    return _in_vain(event, named, ids, belief_ids, forgotten)


def recall_record(before: Recalled, minutes: int | None) -> bytes:
    """What a recall at story minute `minutes` (None: no story time, which restarts no clock)
    stores, the memory's recalls on its timeline before it counted in `before`: those up to it
    counted (`_COUNTED`), then its own minute. A read seeks the last recall a timeline sees and
    has them all: scanning every recall, each read and each recall event cost what every
    recall before had (a memory recalled each turn took the partition quadratic time)."""
    times, latest = before.times, before.latest
    if minutes is not None:
        times, latest = times + 1, minutes if latest is None else max(latest, minutes)
    own = b"" if minutes is None else minutes.to_bytes(_MINUTE_BYTES, "big")
    return _COUNTED.pack(times, 0 if latest is None else latest) + own


def counted_in(record: bytes) -> Recalled:
    """The recalls a recall's record counts (`recall_record`): it and those before it."""
    times, latest = _COUNTED.unpack_from(record)
    return Recalled(times, latest if times else None)


def own_minute(record: bytes) -> int | None:
    """The story minute of the recall itself (None: it had no story time), in the form this
    release stores or in the one before, which stored that alone (`recalls_counted`)."""
    own = record if len(record) < _COUNTED.size else record[_COUNTED.size :]
    return int.from_bytes(own, "big") if own else None


def _in_vain(
    event: Event, named: Sequence[object], ids: list[str], held: list[str], forgotten: list[str]
) -> str | None:
    """The note for the items of `belief_ids` that reinforced nothing: no id at all, an id of
    no memory the actor held before the event, or of one it had forgotten by then."""
    notes = []
    if not_ids := sum(not isinstance(item, str) or not item for item in named):
        notes.append(f"{not_ids} item(s) of payload.belief_ids are no belief id")
    counted = {*held, *forgotten}
    if unheld := [one for one in ids if one not in counted]:
        notes.append(
            f"{len(unheld)} belief id(s) name no memory {event.actor!r} held before this event"
            f" ({_shown(unheld)})"
        )
    if forgotten:
        notes.append(
            f"{len(forgotten)} belief id(s) name memories {event.actor!r} had forgotten by then"
            f" ({_shown(forgotten)})"
        )
    if not named:
        notes.append("payload.belief_ids is empty")
    return "; ".join(notes) + ": not reinforced" if notes else None


def _shown(ids: list[str]) -> str:
    """The first `UNHELD_NAMED` of `ids`, quoted and cut, then how many more."""
    shown = ", ".join(repr(cut(one, MOST_QUOTED_CHARS)) for one in ids[:UNHELD_NAMED])
    return shown + (f" and {len(ids) - UNHELD_NAMED} more" if len(ids) > UNHELD_NAMED else "")


def _held_before(
    tx: StateTransaction, keys: MemoryKeys, ancestry: Ancestry, event: Event, belief_id: str
) -> Memory | None:
    """The memory `belief_id` if the recall event's actor held it before the event: stored,
    seen by its timeline, and formed by an earlier event (this one's are stored already)."""
    memory = load_memory(tx, keys, str(event.actor), belief_id)
    if memory is None or not visible(memory, keys, ancestry):
        return None
    return None if (memory.timeline_id, memory.seq) == (event.timeline_id, event.seq) else memory


def recalled(
    tx: StateTransaction, keys: MemoryKeys, ancestry: Ancestry, memory: Memory
) -> Recalled:
    """The recalls of `memory` the timeline sees that have a story time: one seek a segment."""
    times, latest = 0, None
    for segment in ancestry:
        scope = pack(
            RECALLS,
            keys.tenant_id,
            keys.world_id,
            segment.timeline_id,
            memory.character_id,
            memory.belief_id,
        )
        found = at_or_before(tx, scope, segment.upto_seq)
        if found is not None and (seen := counted_in(found[1])).latest is not None:
            times += seen.times
            latest = seen.latest if latest is None else max(latest, seen.latest)
    return Recalled(times, latest)


def recalls_counted(tx: StateTransaction) -> int:
    """Every recall's record as `recall_record` writes it, from the recalls before it on its
    timeline: a store of a release before held each recall's minute alone (format 15). Records
    already counted give the same again (a step run again after a crash). Returns how many it
    rewrote."""
    rewritten = 0
    scope, counted = b"", NEVER_RECALLED
    for key, record in tx.scan(pack(RECALLS)):
        if key[:-_SEQ_KEY_BYTES] != scope:
            scope, counted = key[:-_SEQ_KEY_BYTES], NEVER_RECALLED
        stored = recall_record(counted, own_minute(record))
        counted = counted_in(stored)
        if stored != record:
            tx.put(key, stored)
            rewritten += 1
    return rewritten


@dataclass(frozen=True, slots=True)
class Held:
    """A memory as its character holds it at a moment: retold when faded, None if forgotten."""

    memory: Memory | None
    retention: Retention


def held_now(
    tx: StateTransaction,
    keys: MemoryKeys,
    ancestry: Ancestry,
    memory: Memory,
    now: int | None,
    policy: Policy,
) -> Held:
    """How much of `memory` its character holds at story minute `now` on the timeline."""
    if not policy.memory.flaky:
        held = retention(memory, now, NEVER_RECALLED, policy)
    else:
        held = retention(memory, now, recalled(tx, keys, ancestry, memory), policy)
    return Held(as_held(memory, held, partial(_declared_names, tx, keys, ancestry)), held)


def _declared_names(
    tx: StateTransaction, keys: MemoryKeys, ancestry: Ancestry, memory: Memory
) -> tuple[str, ...]:
    """The names the timeline declares for what `memory` is about (looked up only for a
    memory held faded, which its retelling keeps whole)."""
    return names_in(memory, naming(StoredDeclarations(tx, keys.tenant_id, keys.world_id, ancestry)))
