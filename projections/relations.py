"""Relations: how a character stands to every other entity, read off their memories.

The rule, whole:
- every memory contributes its feeling to each other entity it is about or came from (its
  `about` and its `source_entity`), once each, never to the character themself;
- a relation is the mean of its contributions (2 decimals, halves up, worked out in decimal
  as `projections.numbers` does: a mean of 0.075 is 0.08 however binary floats add up), their
  count and the last seq among them; the stored sum is a float, read to 9 decimals, which sheds
  what binary addition added (0.1 + 0.2 is 0.30000000000000004);
- a read lists at most 50, most memories first, then the most recent, then by entity id.

Storage: the memories of one event add to the character's relations as a cumulative version
keyed by that event's position on its timeline, the newest also as the timeline's head (one
point read in the common case). A branch reads its ancestors' versions as of its branch point.
Persistent memories belong to no timeline: a read counts them as it reads them. What they add to
each (character, entity) pair is also kept summed in a head per pair (`PERSISTENT_RELATIONS`),
for the change feed, which tells every relation an event moves as a read shows it, persistent
memories included: one point lookup a pair, where a read goes through every persistent memory
of the character. A head keeps the position of the event that moved it last and what it held
before, so the event applied again (the worker is at-least-once) adds its memories once. Every
pair with persistent memories has a head: written with them, and by the migration to format 8
for a store written before (`head_persistent_relations`).
"""

from __future__ import annotations

import struct
from collections.abc import Iterable
from dataclasses import replace
from decimal import Decimal
from typing import Protocol

import orjson
from pydantic import TypeAdapter

from projections.key_prefixes import MEMORIES, PERSISTENT_RELATIONS, RELATION_HEADS, RELATIONS
from projections.keys import pack, pack_scope, unpack
from projections.memory_store import DECODED, MemoryKeys, persistent_memories
from projections.numbers import decimal, hundredths
from projections.state import StateTransaction
from projections.timelines import Ancestry, Segment
from projections.versions import read_through
from schemas.memory import Memory, RelationRead

MAX_RELATIONS = 50

Aggregate = tuple[float, int, int]
"""(sum of feelings, memories, last seq) of one relation."""
Added = dict[tuple[str, str], Aggregate]
"""What an event's memories add to each (character, entity) pair, in the order the pairs first
appear."""
_PERSISTENT_SUM = struct.Struct(">dqq")
"""How a persistent relation head stores a sum of feelings, how many memories, the last seq."""
SUM_PLACES = 9
"""The decimals a sum of feelings is read to: far below any feeling's, far above float noise."""

_RELATION_READS = TypeAdapter(list[RelationRead])


def relation_contributions(memory: Memory) -> list[tuple[str, float]]:
    """(entity, feeling) for every other entity the memory is about or came from, once each."""
    feeling = memory.feeling
    return [
        (entity, feeling)
        for entity in _others(memory.about, memory.source_entity, memory.character_id)
    ]


def mean_feeling(total: float, count: int) -> float:
    """What a relation shows: the mean feeling to 2 decimals, halves up (0 with no memory)."""
    if not count:
        return 0.0
    return hundredths(decimal(round(total, SUM_PLACES)) / Decimal(count))


class RelationWrites(Protocol):
    """Told of each relation an event moves (the change feed, `projections.changes`)."""

    def relation_changed(self, character: str, entity: str, total: float, count: int) -> None:
        """The relation now stands at `count` memories whose feelings sum to `total`."""


def record_relations(
    tx: StateTransaction,
    keys: MemoryKeys,
    ancestry: Ancestry,
    memories: Iterable[Memory],
    changes: RelationWrites | None = None,
) -> None:
    """Add the memories one event formed to their characters' relations, on the timeline the
    memories land on (the first segment of the ancestry), and the persistent ones to their
    pairs' heads. `changes` is told of each relation moved, as a read at the event's position
    shows it: the timeline's memories and the persistent ones together.

    Each (character, entity) pair is read once and written once however many of the event's
    memories add to it (a town's event adds to some forty pairs: these reads and writes are
    most of what relations cost), and each character's key prefixes are packed once.
    """
    added, persistent = _added(memories)
    timeline = ancestry[0].timeline_id
    for (character, entity), (feelings, count, seq) in persistent.items():
        head_key = _persistent_key(keys.tenant_id, keys.world_id, character, entity)
        tx.put(head_key, _moved_head(tx.get(head_key), timeline, seq, feelings, count))
    prefixes: dict[str, tuple[bytes, bytes]] = {}
    versions: dict[int, tuple[bytes, bytes]] = {}
    for (character, entity), (feelings, memories_added, version) in added.items():
        scoped = prefixes.get(character)
        if scoped is None:
            scoped = prefixes[character] = (
                keys.scoped(RELATION_HEADS, timeline, character),
                keys.scoped(RELATIONS, timeline, character),
            )
        entity_key = pack_scope(entity)
        head_key = scoped[0] + entity_key
        found = _relation_at(tx, keys, ancestry, character, entity_key, head_key)
        total, count, last = found or (0.0, 0, 0)
        count += memories_added
        total += feelings
        stored = orjson.dumps([total, count, last if last > version else version])
        written = versions.get(version)
        if written is None:
            written = versions[version] = (pack(version), b",%d]" % version)
        tx.put(scoped[1] + entity_key + written[0], stored)
        if changes is not None:
            if keys.any_persistent or persistent:
                kept_total, kept = _persistent_relation(tx, keys, character, entity, version)
                total, count = total + kept_total, count + kept
            changes.relation_changed(character, entity, total, count)
        tx.put(head_key, stored[:-1] + written[1])  # the version's bytes, and where it was written
    if changes is not None:
        for (character, entity), (_, _, seq) in persistent.items():
            if (character, entity) not in added:  # moved by persistent memories alone
                total, count, _ = _relation(tx, keys, ancestry, character, entity) or (0.0, 0, 0)
                kept_total, kept = _persistent_relation(tx, keys, character, entity, seq)
                changes.relation_changed(character, entity, total + kept_total, count + kept)


def _added(memories: Iterable[Memory]) -> tuple[Added, Added]:
    """What the memories add to each (character, entity) pair: (their feelings summed in
    order, as `sum` adds them, how many, the last seq), the timeline's memories' apart from
    the persistent ones'."""
    added: Added = {}
    persistent: Added = {}
    for memory in memories:
        into = persistent if memory.persistent else added
        character, feeling, seq = memory.character_id, memory.feeling, memory.seq
        for entity in _others(memory.about, memory.source_entity, character):
            pair = (character, entity)
            before = into.get(pair)
            if before is None:
                into[pair] = (0 + feeling, 1, seq)
            else:
                into[pair] = (before[0] + feeling, before[1] + 1, max(before[2], seq))
    return added, persistent


def _moved_head(raw: bytes | None, timeline: str, seq: int, feelings: float, count: int) -> bytes:
    """A pair's persistent relation head once the event at (`timeline`, `seq`) added `count`
    memories whose feelings sum to `feelings`: added to what the head held before that event
    (what it kept from before, if that event moved it already: the event applied again).
    Stored as its sum (`_PERSISTENT_SUM`), then the sum before the event that moved it last
    and that event's packed position; a head the migration made holds its sum alone. Binary:
    the change feed reads a head for every relation an event moves."""
    position = pack(timeline, seq)
    before: Aggregate = (0.0, 0, 0)
    if raw is not None:
        applied_again = raw[2 * _PERSISTENT_SUM.size :] == position
        before = _PERSISTENT_SUM.unpack_from(raw, _PERSISTENT_SUM.size if applied_again else 0)
    total, memories, last = before
    now = _PERSISTENT_SUM.pack(total + feelings, memories + count, max(last, seq))
    return now + _PERSISTENT_SUM.pack(*before) + position


def head_persistent_relations(tx: StateTransaction) -> int:
    """Write the persistent relation head of every pair, summed from every persistent memory
    stored: for a store written before heads (`projections.migrations`). Returns how many."""
    heads = _persistent_sums(tx.scan(pack(MEMORIES)))
    for head_key, head in heads.items():
        tx.put(head_key, head)
    return len(heads)


def sum_persistent_relations_without(
    tx: StateTransaction, keys: MemoryKeys, taken_out: Iterable[Memory]
) -> int:
    """Sum again, from the persistent memories stored but the `taken_out` ones, every
    persistent relation head of the pairs those add to, each holding its sum alone (as
    `head_persistent_relations` makes them): the memories of events not applied whole go, and
    the heads those events moved hold their sums (one event's undo each, not several).
    Summed before they go, so a caller killed in the middle sums the same again from what is
    left. Returns how many heads it rewrote."""
    return _sum_heads_without(tx, keys, taken_out, moved_too=True)


def head_persistent_relations_without(
    tx: StateTransaction, keys: MemoryKeys, taken_out: Iterable[Memory]
) -> int:
    """Sum again, from the persistent memories stored but the `taken_out` ones, the heads
    `head_persistent_relations` made (their sum alone) of the pairs those add to: made from a
    store that held them, they count them. Summed before they go, so a caller killed in the
    middle of taking them out sums the same again from what is left. A head an event moved
    since is left as it is: it holds what it held before that event, with the event's position
    (`_moved_head`), and events move heads only once their memories are all stored; the event
    that moved it, applied again, adds to what it held before. Returns how many heads it
    rewrote."""
    return _sum_heads_without(tx, keys, taken_out, moved_too=False)


def _sum_heads_without(
    tx: StateTransaction, keys: MemoryKeys, taken_out: Iterable[Memory], *, moved_too: bool
) -> int:
    """The heads of the pairs the `taken_out` memories add to summed again from the others:
    those holding their sum alone, and with `moved_too` those an event moved as well."""
    taken_out = list(taken_out)
    pairs: dict[str, set[bytes]] = {}
    leaving = {keys.memory(memory.character_id, memory.belief_id) for memory in taken_out}
    for memory in taken_out:
        character = memory.character_id
        for entity, _ in relation_contributions(memory):
            head_key = _persistent_key(keys.tenant_id, keys.world_id, character, entity)
            pairs.setdefault(character, set()).add(head_key)
    rewritten = 0
    for character, head_keys in pairs.items():
        summed_whole = [
            head_key
            for head_key in sorted(head_keys)
            if (head := tx.get(head_key)) is not None
            and (moved_too or len(head) == _PERSISTENT_SUM.size)
        ]
        if not summed_whole:
            continue
        stored = tx.scan(keys.held_by(character))
        heads = _persistent_sums((key, raw) for key, raw in stored if key not in leaving)
        for head_key in summed_whole:
            if head_key in heads:
                tx.put(head_key, heads[head_key])
            else:
                tx.delete(head_key)
            rewritten += 1
    return rewritten


def _persistent_sums(stored: Iterable[tuple[bytes, bytes]]) -> dict[bytes, bytes]:
    """The persistent relation heads the `stored` memories (keys and values, in key order) make,
    each holding its sum alone: by head key."""
    sums: dict[bytes, list[float]] = {}
    for key, raw in stored:
        if (memory := DECODED.persistent(raw)) is None:
            continue
        _, tenant, world, *_ = unpack(key)
        for entity, feeling in relation_contributions(memory):
            head_key = _persistent_key(str(tenant), str(world), memory.character_id, entity)
            head = sums.setdefault(head_key, [0.0, 0, 0])
            head[0] += feeling
            head[1] += 1
            head[2] = max(head[2], memory.seq)
    return {
        head_key: _PERSISTENT_SUM.pack(total, int(count), int(last))
        for head_key, (total, count, last) in sums.items()
    }


def persistent_sum(head: bytes) -> Aggregate:
    """What a persistent relation head sums: the feelings, how many memories, the last seq."""
    total, count, last = _PERSISTENT_SUM.unpack_from(head)
    return total, count, last


def _others(about: list[str], source: str | None, character: str) -> list[str]:
    """The other entities a memory of `character` is about or came from (its `about` and
    `source_entity`), once each: its relations."""
    others = [entity for entity in about if entity != character]
    if source is not None and source != character and source not in others:
        others.append(source)
    return others if len(others) == len(set(others)) else list(dict.fromkeys(others))


def relations_of(
    tx: StateTransaction, keys: MemoryKeys, ancestry: Ancestry, character: str
) -> list[RelationRead]:
    """Every other entity the character's memories are about or came from, as a read lists
    them: most memories first, at most `MAX_RELATIONS`."""
    totals: dict[str, list[float]] = {}
    for depth, segment in enumerate(ancestry):  # each timeline lists the entities it has heads of
        prefix = keys.scoped(RELATION_HEADS, segment.timeline_id, character)
        for key, _ in tx.scan(prefix):
            packed = key[len(prefix) :]
            if (named := str(unpack(packed)[0])) in totals:
                continue
            # no timeline nearer holds a version of it that the read sees (it would have
            # listed it): read from here on, not through every nearer timeline again (a save
            # loaded 100 deep read each of a character's 1,000 relations through all 100)
            found = _relation_at(tx, keys, ancestry[depth:], character, packed, key)
            if found is not None:
                totals[named] = list(found)
    for memory in persistent_memories(tx, keys, character):
        for entity, feeling in relation_contributions(memory):
            total = totals.setdefault(entity, [0.0, 0, 0])
            total[0] += feeling
            total[1] += 1
            total[2] = max(total[2], memory.seq)
    ordered = sorted(totals.items(), key=lambda item: (-item[1][1], -item[1][2], item[0]))
    return _RELATION_READS.validate_python(
        [
            {
                "entity_id": entity,
                "feeling": mean_feeling(total, int(count)),
                "memories": int(count),
                "last_seq": int(last),
            }
            for entity, (total, count, last) in ordered[:MAX_RELATIONS]
        ]
    )


def feeling_toward(
    tx: StateTransaction, keys: MemoryKeys, ancestry: Ancestry, character: str, entity: str
) -> float:
    """The character's feeling toward one entity as its relation shows it (0 with none),
    whether or not the relation is among the 50 a read lists."""
    total, count, _ = _relation(tx, keys, ancestry, character, entity) or (0.0, 0, 0)
    return mean_feeling(*_with_persistent(tx, keys, character, entity, total, count))


def _with_persistent(
    tx: StateTransaction, keys: MemoryKeys, character: str, entity: str, total: float, count: int
) -> tuple[float, int]:
    """A relation's sum of feelings and count (`total`, `count`) with what the character's
    persistent memories (formed up to `keys.persistent_upto`) add to it, read off each."""
    for memory in persistent_memories(tx, keys, character):
        for other, feeling in relation_contributions(memory):
            if other == entity:
                total += feeling
                count += 1
    return total, count


def _persistent_relation(
    tx: StateTransaction, keys: MemoryKeys, character: str, entity: str, upto_seq: int
) -> tuple[float, int]:
    """What the character's persistent memories formed up to `upto_seq` add to their relation
    to `entity` (sum of feelings, count): the pair's head, unless it holds a memory formed at a
    later position (of another timeline), then read off each memory."""
    raw = tx.get(_persistent_key(keys.tenant_id, keys.world_id, character, entity))
    if raw is None:
        return 0.0, 0
    total, count, last = persistent_sum(raw)
    if last <= upto_seq:
        return total, count
    return _with_persistent(tx, replace(keys, persistent_upto=upto_seq), character, entity, 0.0, 0)


def _persistent_key(tenant_id: str, world_id: str, character: str, entity: str) -> bytes:
    """The key of a pair's persistent relation head."""
    return pack_scope(PERSISTENT_RELATIONS, tenant_id, world_id, character, entity)


def _relation(
    tx: StateTransaction, keys: MemoryKeys, ancestry: Ancestry, character: str, entity: str
) -> Aggregate | None:
    """The relation of non-persistent memories, through the ancestry.

    A timeline's newest version is also its head, so the common read is one point lookup; the
    versions serve reads at an earlier position (an ancestor's branch point, an event applied
    again) and timelines without an entry of their own.
    """
    entity_key = pack(entity)
    head_key = keys.scoped(RELATION_HEADS, ancestry[0].timeline_id, character) + entity_key
    return _relation_at(tx, keys, ancestry, character, entity_key, head_key)


def _relation_at(
    tx: StateTransaction,
    keys: MemoryKeys,
    ancestry: Ancestry,
    character: str,
    entity_key: bytes,
    head_key: bytes,
) -> Aggregate | None:
    """`_relation`, given the packed entity and the own timeline's head key (the writer keeps
    them for the version and the head it writes next): the head when it is not newer than the
    timeline's end, else the versions, the own timeline's (if it has a head) or its ancestors'
    at the branch point."""
    head = tx.get(head_key)
    if head is not None and (found := _head_at(head, ancestry[0])) is not None:
        return found
    segments = ancestry if head is not None else ancestry[1:]
    if not segments:  # a pair new to a timeline without ancestors: nothing to read
        return None
    raw = read_through(
        tx, segments, lambda scope: keys.scoped(RELATIONS, scope, character) + entity_key
    )
    return None if raw is None else _aggregate(orjson.loads(raw))


def _head_at(head: bytes, segment: Segment) -> Aggregate | None:
    """A relation head's aggregate, if it was written at or before the segment's end."""
    *aggregate, version = orjson.loads(head)
    return _aggregate(aggregate) if version <= segment.upto_seq else None


def _aggregate(stored: list[float]) -> Aggregate:
    """The aggregate as a relation version or head stores it."""
    total, count, last = stored
    return float(total), int(count), int(last)
