"""Minds: where memories are kept, and how one character's mind is read back.

Every memory is stored once under its belief id, with small index entries that make the read
cost what it returns: recollections by position, beliefs by importance, origins for "already
knows", and relation aggregates kept as cumulative versions per timeline, the newest also as
the timeline's head (which lists the entities it relates to). A timeline's reads
fold its own entries with each ancestor's up to the branch point; persistent memories live in
a world-wide scope that every timeline reads.
"""

from __future__ import annotations

import heapq
from collections import OrderedDict, defaultdict
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from functools import lru_cache

import orjson

from projections import timelines, whereabouts
from projections.keys import pack, unpack
from projections.memories import relation_contributions
from projections.rumours import is_news
from projections.state import StateTransaction
from projections.timelines import Ancestry, Segment
from projections.versions import read_through
from projections.world import ABSENT, fact_value
from schemas import MAX_SEQ, Event
from schemas.memory import Memory
from schemas.records import TimelineRecord

MEMORIES = "memory"
RECOLLECTIONS = "recollection"
BELIEF_RANKS = "belief-rank"
ORIGINS = "origin"
RELATIONS = "relation"
RELATION_HEADS = "relation-head"
NEWS = "news-by-seq"
ORIGIN_EVENTS = "origin-event"

PERSISTENT_SCOPE = ""
"""The scope of persistent memories: no real timeline id is empty, and every read sees it."""

MAX_BELIEFS = 50
MAX_RECOLLECTIONS = 20
MAX_RELATIONS = 50
_RANK_STEPS = 1000


PERSISTENT_WORLDS = "persistent-world"
"""Marks a world that holds persistent memories: the others never look for any."""


@dataclass(frozen=True, slots=True)
class MindKeys:
    """The key prefixes of one world, and whether it holds persistent memories."""

    tenant_id: str
    world_id: str
    any_persistent: bool = True

    def memory(self, character: str, belief_id: str) -> bytes:
        return pack(MEMORIES, self.tenant_id, self.world_id, character, belief_id)

    def scoped(self, kind: str, scope: str, character: str) -> bytes:
        return _scoped(kind, self.tenant_id, self.world_id, scope, character)


@lru_cache(maxsize=1 << 16)
def _scoped(kind: str, tenant_id: str, world_id: str, scope: str, character: str) -> bytes:
    """Index prefixes recur for every memory of a character: pack each once."""
    return pack(kind, tenant_id, world_id, scope, character)


def mind_keys(tx: StateTransaction, tenant_id: str, world_id: str) -> MindKeys:
    """The keys of one world, as it stands (most worlds hold no persistent memory)."""
    marked = tx.get(pack(PERSISTENT_WORLDS, tenant_id, world_id)) is not None
    return MindKeys(tenant_id, world_id, any_persistent=marked)


def scopes(keys: MindKeys, ancestry: Ancestry) -> Ancestry:
    """Where a character's memories are: the ancestry, and the world-wide persistent scope."""
    if not keys.any_persistent:
        return ancestry
    return (*ancestry, Segment(PERSISTENT_SCOPE, MAX_SEQ))


def load_memory(
    tx: StateTransaction, keys: MindKeys, character: str, belief_id: str
) -> Memory | None:
    raw = tx.get(keys.memory(character, belief_id))
    return None if raw is None else DECODED.decode(raw)


class DecodedMemories:
    """Stored memories decoded once, by their stored bytes (a memory is written once and read
    again and again: by tellers, by reads). Storing one remembers it decoded already.
    """

    def __init__(self, size: int) -> None:
        self._size = size
        self._decoded: OrderedDict[bytes, Memory] = OrderedDict()

    def decode(self, raw: bytes) -> Memory:
        memory = self._decoded.get(raw)
        if memory is None:
            memory = Memory.model_validate_json(raw)
            self.remember(raw, memory)
        return memory

    def remember(self, raw: bytes, memory: Memory) -> None:
        if len(self._decoded) >= self._size:  # the oldest entry makes room
            self._decoded.popitem(last=False)
        self._decoded[raw] = memory


DECODED = DecodedMemories(size=1 << 16)


def visible(memory: Memory, ancestry: Ancestry) -> bool:
    """Whether a timeline with this ancestry sees the memory."""
    if memory.persistent:
        return True
    return any(s.timeline_id == memory.timeline_id and memory.seq <= s.upto_seq for s in ancestry)


def knows(
    tx: StateTransaction, keys: MindKeys, ancestry: Ancestry, character: str, origin: str
) -> bool:
    """Whether `character` holds any memory of this origin on the timeline.

    One point read per scope: each scope keeps the first position the character learned the
    origin at, and an ancestor's counts if it is at or before the branch point.
    """
    suffix = pack(origin)
    for segment in scopes(keys, ancestry):
        first = tx.get(keys.scoped(ORIGINS, segment.timeline_id, character) + suffix)
        if first is not None and int.from_bytes(first, "big") <= segment.upto_seq:
            return True
    return False


def store_memories(
    tx: StateTransaction, keys: MindKeys, ancestry: Ancestry, memories: Iterable[Memory]
) -> None:
    """Keep the memories one event formed, with their indexes and relation versions."""
    contributions: dict[tuple[str, str], list[tuple[float, int]]] = defaultdict(list)
    for memory in memories:
        scope = PERSISTENT_SCOPE if memory.persistent else memory.timeline_id
        if memory.persistent:
            tx.put(pack(PERSISTENT_WORLDS, keys.tenant_id, keys.world_id), b"")
        character, belief_id, seq = memory.character_id, memory.belief_id, memory.seq
        raw = memory.model_dump_json().encode()
        tx.put(keys.memory(character, belief_id), raw)
        DECODED.remember(raw, memory)
        if memory.kind == "event":
            tx.put(keys.scoped(RECOLLECTIONS, scope, character) + pack(seq, belief_id), b"")
        else:
            rank = _RANK_STEPS - round(memory.importance * _RANK_STEPS)
            tx.put(
                keys.scoped(BELIEF_RANKS, scope, character) + pack(rank, MAX_SEQ - seq, belief_id),
                b"",
            )
        origin = keys.scoped(ORIGINS, scope, character) + pack(memory.origin)
        first = tx.get(origin)
        if first is None or int.from_bytes(first, "big") > seq:
            tx.put(origin, seq.to_bytes(8, "big"))
        if is_news(memory):
            tx.put(keys.scoped(NEWS, scope, character) + pack(seq, belief_id), b"")
        if not memory.persistent:  # persistent memories are counted when read
            for entity, feeling in relation_contributions(memory):
                contributions[(character, entity)].append((feeling, seq))
    timeline = memories_timeline(ancestry)
    for (character, entity), items in contributions.items():
        total, count, last = _relation(tx, keys, ancestry, character, entity) or (0.0, 0, 0)
        version = max(seq for _, seq in items)
        after = [total + sum(f for f, _ in items), count + len(items), max(last, version)]
        tx.put(
            keys.scoped(RELATIONS, timeline, character) + pack(entity, version), orjson.dumps(after)
        )
        tx.put(
            keys.scoped(RELATION_HEADS, timeline, character) + pack(entity),
            orjson.dumps([*after, version]),
        )


def newest_news(
    tx: StateTransaction, keys: MindKeys, ancestry: Ancestry, character: str, limit: int
) -> list[Memory]:
    """The character's newest news on the timeline (`rumours.is_news`), newest first."""
    return list(_newest(tx, keys, ancestry, character, NEWS, limit))


def record_origin(tx: StateTransaction, keys: MindKeys, origin: str, event: Event) -> None:
    """Remember which event an origin is, so provenance can name where news started."""
    tx.put(
        pack(ORIGIN_EVENTS, keys.tenant_id, keys.world_id, origin),
        orjson.dumps(
            {
                "timeline_id": event.timeline_id,
                "seq": event.seq,
                "key": event.key,
                "actor": event.actor,
                "location": event.location,
                "game_time": event.game_time,
            }
        ),
    )


def memories_timeline(ancestry: Ancestry) -> str:
    """The timeline new memories land on: the first segment of the ancestry."""
    return ancestry[0].timeline_id


def _relation(
    tx: StateTransaction, keys: MindKeys, ancestry: Ancestry, character: str, entity: str
) -> tuple[float, int, int] | None:
    """(sum of feelings, memories, last seq) of non-persistent memories, through the ancestry.

    A timeline's newest version is also its head, so the common read is one point lookup; the
    versions serve reads at an earlier position (an ancestor's branch point, an event applied
    again) and timelines without an entry of their own.
    """
    own = ancestry[0]
    head = tx.get(keys.scoped(RELATION_HEADS, own.timeline_id, character) + pack(entity))
    if head is not None and (found := _head_at(head, own)) is not None:
        return found
    raw = read_through(
        tx,
        ancestry if head is not None else ancestry[1:],
        lambda scope: keys.scoped(RELATIONS, scope, character) + pack(entity),
    )
    return None if raw is None else _aggregate(orjson.loads(raw))


def _head_at(head: bytes, segment: Segment) -> tuple[float, int, int] | None:
    """A relation head's aggregate, if it was written at or before the segment's end."""
    *aggregate, version = orjson.loads(head)
    return _aggregate(aggregate) if version <= segment.upto_seq else None


def _aggregate(stored: list[float]) -> tuple[float, int, int]:
    """(sum of feelings, memories, last seq) as a relation version or head stores it."""
    total, count, last = stored
    return float(total), int(count), int(last)


class NotFound(Exception):
    """The read has nothing to show: a timeline never seen, or a character with no past."""


def _timeline_view(
    tx: StateTransaction, tenant_id: str, world_id: str, timeline_id: str
) -> tuple[TimelineRecord, MindKeys, Ancestry]:
    """What a read on a timeline needs, or NotFound for a timeline never seen."""
    record = timelines.load(tx, tenant_id, world_id, timeline_id)
    if record is None:
        raise NotFound(f"timeline {timeline_id!r} has never received events")
    return record, mind_keys(tx, tenant_id, world_id), timelines.ancestry(tx, record)


def runtime_read(
    tx: StateTransaction, tenant_id: str, world_id: str, timeline_id: str, npc_id: str
) -> dict[str, object]:
    """One character's mind on one timeline, in the shape of the Memory contract's read."""
    record, keys, ancestry = _timeline_view(tx, tenant_id, world_id, timeline_id)
    recollections = list(_newest(tx, keys, ancestry, npc_id, RECOLLECTIONS, MAX_RECOLLECTIONS))
    beliefs = list(_most_important_beliefs(tx, keys, ancestry, npc_id))
    location = whereabouts.location_of(tx, tenant_id, world_id, ancestry, npc_id)
    if not recollections and not beliefs and location is None:
        raise NotFound(f"nothing is known of {npc_id!r} on timeline {timeline_id!r}")

    def shown(memory: Memory) -> dict[str, object]:
        return memory.to_read(diverging=_diverging(tx, tenant_id, world_id, ancestry, memory))

    return {
        "world_instance_id": world_id,
        "timeline_id": timeline_id,
        "npc_id": npc_id,
        "acknowledged_seq": record.acknowledged_seq,
        "processed_seq": record.processed_seq,
        "location": location,
        "beliefs": [shown(memory) for memory in beliefs],
        "relations": _relations(tx, keys, ancestry, npc_id),
        "recollections": [shown(memory) for memory in recollections],
    }


def _newest(
    tx: StateTransaction,
    keys: MindKeys,
    ancestry: Ancestry,
    character: str,
    index: str,
    limit: int,
) -> Iterator[Memory]:
    """The newest entries of a by-position index through the ancestry, newest first."""
    found: list[tuple[int, str]] = []
    for segment in scopes(keys, ancestry):
        prefix = keys.scoped(index, segment.timeline_id, character)
        start = prefix + pack(segment.upto_seq, "\U0010ffff")
        for count, (key, _) in enumerate(tx.scan(prefix, reverse=True, start=start)):
            if count == limit:
                break
            seq, belief_id = unpack(key[len(prefix) :])
            found.append((int(seq), str(belief_id)))
    for _, belief_id in heapq.nlargest(limit, found):
        memory = load_memory(tx, keys, character, belief_id)
        if memory is not None:
            yield memory


def _most_important_beliefs(
    tx: StateTransaction, keys: MindKeys, ancestry: Ancestry, character: str
) -> Iterator[Memory]:
    """What the character holds to be so, most important (then newest) first, at most 50."""
    found: list[tuple[int, int, str]] = []
    for segment in scopes(keys, ancestry):
        prefix = keys.scoped(BELIEF_RANKS, segment.timeline_id, character)
        taken = 0
        for key, _ in tx.scan(prefix):
            rank, inverted_seq, belief_id = unpack(key[len(prefix) :])
            if MAX_SEQ - int(inverted_seq) > segment.upto_seq:
                continue  # the abandoned future of an ancestor
            found.append((int(rank), int(inverted_seq), str(belief_id)))
            taken += 1
            if taken == MAX_BELIEFS:
                break
    for _, _, belief_id in heapq.nsmallest(MAX_BELIEFS, found):
        memory = load_memory(tx, keys, character, belief_id)
        if memory is not None:
            yield memory


def _relations(
    tx: StateTransaction, keys: MindKeys, ancestry: Ancestry, character: str
) -> list[dict[str, object]]:
    """Every other entity the character's memories are about or came from, most memories first."""
    totals: dict[str, list[float]] = {}
    for depth, segment in enumerate(ancestry):  # each timeline lists the entities it has heads of
        prefix = keys.scoped(RELATION_HEADS, segment.timeline_id, character)
        for key, head in tx.scan(prefix):
            entity = str(unpack(key[len(prefix) :])[0])
            if entity in totals:
                continue
            found = _head_at(head, segment) if depth == 0 else None
            if found is None:
                found = _relation(tx, keys, ancestry, character, entity)
            if found is not None:
                totals[entity] = list(found)
    for memory in _persistent_memories(tx, keys, character):
        for entity, feeling in relation_contributions(memory):
            total = totals.setdefault(entity, [0.0, 0, 0])
            total[0] += feeling
            total[1] += 1
            total[2] = max(total[2], memory.seq)
    ordered = sorted(totals.items(), key=lambda item: (-item[1][1], -item[1][2], item[0]))
    return [
        {
            "entity_id": entity,
            "feeling": round(total / count, 2),
            "memories": int(count),
            "last_seq": int(last),
        }
        for entity, (total, count, last) in ordered[:MAX_RELATIONS]
    ]


def _persistent_memories(tx: StateTransaction, keys: MindKeys, character: str) -> Iterator[Memory]:
    if not keys.any_persistent:
        return
    for kind in (RECOLLECTIONS, BELIEF_RANKS):
        prefix = keys.scoped(kind, PERSISTENT_SCOPE, character)
        for key, _ in tx.scan(prefix):
            belief_id = str(unpack(key[len(prefix) :])[-1])
            memory = load_memory(tx, keys, character, belief_id)
            if memory is not None:
                yield memory


def same_json(one: object, other: object) -> bool:
    """Equal as JSON values: `true` is not `1`, and key order does not matter."""
    return orjson.dumps(one, option=orjson.OPT_SORT_KEYS) == orjson.dumps(
        other, option=orjson.OPT_SORT_KEYS
    )


def _diverging(
    tx: StateTransaction, tenant_id: str, world_id: str, ancestry: Ancestry, memory: Memory
) -> bool:
    """A belief diverges while any fact it asserts differs from the world record."""
    for fact in memory.facts:
        recorded = fact_value(tx, tenant_id, world_id, ancestry, fact.subject, fact.attribute)
        if recorded is not ABSENT and not same_json(recorded, fact.value):
            return True
    return False


def news_chain(memory: Memory) -> list[dict[str, object]]:
    """Who held the news in turn, first holder first, with how far and how surely it came.

    A lineage entry names a teller and how the news arrived at the next holder, so holder i
    (after the first) arrived with lineage entry i - 1.
    """
    tellers = [(t.entity_id, t.hops, t.confidence) for t in memory.lineage]
    if not tellers and memory.source_entity is not None:
        tellers = [(memory.source_entity, memory.hops, memory.confidence)]
    if not tellers:
        return [{"entity_id": memory.character_id, "hops": 0, "confidence": memory.confidence}]
    holders = [entity for entity, _, _ in tellers] + [memory.character_id]
    chain: list[dict[str, object]] = [{"entity_id": holders[0], "hops": tellers[0][1] - 1}]
    for step, (teller, hops, confidence) in enumerate(tellers, start=1):
        chain.append(
            {"entity_id": holders[step], "hops": hops, "confidence": confidence, "told_by": teller}
        )
    return chain


def provenance(
    tx: StateTransaction,
    tenant_id: str,
    world_id: str,
    timeline_id: str,
    npc_id: str,
    belief_id: str,
) -> dict[str, object]:
    """Where one of a character's memories came from: the original event and every teller."""
    _, keys, ancestry = _timeline_view(tx, tenant_id, world_id, timeline_id)
    memory = load_memory(tx, keys, npc_id, belief_id)
    if memory is None or not visible(memory, ancestry):
        raise NotFound(f"{npc_id!r} holds no memory {belief_id!r} on timeline {timeline_id!r}")
    raw_origin = tx.get(pack(ORIGIN_EVENTS, tenant_id, world_id, memory.origin))
    chain = news_chain(memory)
    return {
        "world_instance_id": world_id,
        "timeline_id": timeline_id,
        "npc_id": npc_id,
        "belief_id": belief_id,
        "origin": None if raw_origin is None else orjson.loads(raw_origin),
        "chain": chain,
        "memory": memory.to_read(diverging=_diverging(tx, tenant_id, world_id, ancestry, memory)),
    }
