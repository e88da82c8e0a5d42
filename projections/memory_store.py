"""Memory storage: where memories are kept, and the indexes that find them again.

Every memory is stored once under its belief id, with small index entries that make a read
cost what it returns: recollections by position, beliefs by importance, news by position (its
newest entries repeated in a head per character and scope: tellers are read at every meeting),
origins for "already knows" (the first position each was learned at), the memories of each
origin (who holds the news, and whether a listener still does), and the holder of each belief
id (a rumour's map is asked for by belief id alone). A timeline's reads fold its own entries
with each ancestor's up to the branch point; persistent memories live in a world-wide scope
that every timeline reads.

A belief held less firmly later (the referee's `convinced`, section 11) is not rewritten: its
new confidence is a version at the position that changed it, on that timeline
(`projections.versions`), so a parent, or a branch from before that position, never sees it.
Reads of a world that never revised a belief skip the lookup.
"""

from __future__ import annotations

import heapq
import re
from collections import OrderedDict
from collections.abc import Callable, Collection, Iterable, Iterator
from dataclasses import dataclass
from functools import lru_cache
from itertools import chain, islice
from typing import NamedTuple, Protocol

import orjson

from projections import timelines
from projections.key_prefixes import (
    BELIEF_HOLDERS,
    BELIEF_RANKS,
    BELIEF_VERSIONS,
    MEMORIES,
    MEMORY_LOG,
    NEWS,
    NEWS_HEADS,
    ORIGIN_EVENTS,
    ORIGIN_MEMORIES,
    ORIGINS,
    PERSISTENT_COUNTED,
    PERSISTENT_WORLDS,
    RECOLLECTIONS,
    REVISED_WORLDS,
)
from projections.keys import pack, pack_scope, unpack
from projections.rumour_rules import is_news
from projections.state import StateTransaction
from projections.timelines import Ancestry, Segment, sees
from projections.versions import read_through
from schemas import MAX_SEQ, Event
from schemas.memory import Memory

PERSISTENT_SCOPE = ""
"""The scope of persistent memories: no real timeline id is empty, and every read sees it."""

_RANK_STEPS = 1000
_PACKED_SEQ = len(pack(0))
"""The length of a packed position: an index entry's belief id starts after it."""
_LAST_BELIEF = pack("\U0010ffff")
"""Past every belief id packed after a position: where a reverse scan up to it starts."""
_MEMORY_JSON = Memory.__pydantic_serializer__.to_json
"""A memory's stored bytes (`model_dump_json`'s, without its wrapper's keyword handling)."""
NEWS_HEAD_ENTRIES = 4
"""How many of a character's newest news entries a scope's head repeats (`NEWS_HEADS`): a
teller offers at most `spreading.per_meeting` pieces (3 by default), a group member its
`group_exchange_limit` (3). On RocksDB a seek looks into every level-0 file, and tellers' seeks
took a tenth of a spreading town's time; the head is one point lookup. A read asking for more
than the head holds, or cut short by an ancestor's branch point, seeks the index.

A head, where there is one, holds the newest entries of its index. Only tellers read heads, so
only news kept with spreading on keeps them (keeping them in a town that never spreads cost a
tenth of its time): news kept without drops its character's head in the scope, and the next
news kept with spreading on makes it again from the index. Without a head, a teller seeks the
index (a store of a release before heads has none)."""


@dataclass(frozen=True, slots=True)
class MemoryKeys:
    """The key prefixes of one world, and whether it holds persistent memories."""

    tenant_id: str
    world_id: str
    any_persistent: bool = True
    persistent_upto: int = MAX_SEQ
    """A read as of a position sees the persistent memories formed up to it (positions
    continue from parent to branch, so they compare across timelines)."""
    any_revised: bool = True
    """Whether any belief of the world was ever held less firmly (`revise_confidence`)."""

    def memory(self, character: str, belief_id: str) -> bytes:
        return self.held_by(character) + pack(belief_id)

    def held_by(self, character: str) -> bytes:
        """The prefix of the keys of a character's stored memories."""
        return pack_scope(MEMORIES, self.tenant_id, self.world_id) + pack(character)

    def scoped(self, kind: str, scope: str, character: str) -> bytes:
        return pack_scope(kind, self.tenant_id, self.world_id, scope, character)

    def revisions(self, timeline_id: str, character: str, belief_id: str) -> bytes:
        """The scope of a belief's confidence versions on one timeline."""
        return self.scoped(BELIEF_VERSIONS, timeline_id, character) + pack(belief_id)


def memory_keys(tx: StateTransaction, tenant_id: str, world_id: str) -> MemoryKeys:
    """The keys of one world, as it stands (most worlds hold no persistent memory)."""
    marked = tx.get(pack(PERSISTENT_WORLDS, tenant_id, world_id)) is not None
    revised = tx.get(pack(REVISED_WORLDS, tenant_id, world_id)) is not None
    return MemoryKeys(tenant_id, world_id, any_persistent=marked, any_revised=revised)


def persistent_memories_stored(tx: StateTransaction, tenant_id: str, world_id: str) -> int:
    """How many persistent memories the world has stored: the position of its persistent
    scope, which every timeline reads (it moves with events of any timeline)."""
    raw = tx.get(pack(PERSISTENT_WORLDS, tenant_id, world_id))
    return 0 if raw is None else int.from_bytes(raw, "big")


def persistent_count_before(
    tx: StateTransaction, tenant_id: str, world_id: str, timeline_id: str, seq: int
) -> int:
    """The world's count of persistent memories as it stood before the event at
    (`timeline_id`, `seq`), which is about to store some: an event applied again over part of
    its own writes (the worker is at-least-once) counts them once on it.

    Which event counted last, and the count before it, are kept beside the count
    (`PERSISTENT_COUNTED`), written before the event stores any persistent memory: a worker
    killed mid-event keeps a prefix of the event's writes (what its changelog got), so the
    count and the memories it moved have the event's record beside them
    (`forget_persistent_stored_at` reads it too). The count itself stays 8 bytes, as every
    release stored it (it is in the digest); a store of a release before counts on from its
    count."""
    counted_key = pack(PERSISTENT_COUNTED, tenant_id, world_id)
    counted = tx.get(counted_key)  # the count before (8 bytes), then the packed position
    position = pack(timeline_id, seq)
    if counted is not None and counted[8:] == position:
        return int.from_bytes(counted[:8], "big")
    before = persistent_memories_stored(tx, tenant_id, world_id)
    tx.put(counted_key, before.to_bytes(8, "big") + position)
    return before


def forget_persistent_stored_at(
    tx: StateTransaction,
    keys: MemoryKeys,
    timeline_id: str,
    seq: int,
    relations_without: Callable[[StateTransaction, MemoryKeys, list[Memory]], object],
) -> None:
    """Take out the persistent memories stored at the event's position and later ones of its
    timeline, and put back what they changed in the world-wide scope, before the event reads
    anything. None are there unless the event is being applied again over part of the writes
    of the message that applied it (the worker is at-least-once, and a worker killed in the
    middle of a message keeps a prefix of its writes: what its changelog got, in the order of
    their last write): its own, and those of the events after it the message applied (one
    that filled a gap applies several), while the timeline's position, saved last, says none
    of them was applied.

    Every timeline reads the persistent scope whole, other timelines' memories of later
    positions too, so these would tell the event that its characters knew already what it, or
    an event after it, is about to teach them: it would form nothing, or pass on what happens
    later. (Memories of a timeline need nothing: its reads end before the event's position.)
    Found stored there, every persistent memory of the world past its timeline's position
    goes (one the changelog got without its log entry too): the world's count is made again
    from those applied, the persistent relation heads from those left (`relations_without`),
    each memory goes last: killed again in the middle, the event finds what is left of them by
    their log entries (`forget_persistent`). One seek of the memory log an event, in a world
    that keeps persistent memories."""
    if not keys.any_persistent:
        return
    timeline = pack_scope(MEMORY_LOG, keys.tenant_id, keys.world_id) + pack_scope(timeline_id)
    if next(tx.scan(timeline, start=timeline + pack(seq)), None) is None:
        return  # nothing stored at the event's position or past it: applied for the first time
    scanned = _persistent_by_reach(tx, pack_scope(MEMORIES, keys.tenant_id, keys.world_id))
    applied, later = next(iter(scanned.values()), (0, {}))  # the world's alone, as scanned
    set_persistent_count(tx, keys.tenant_id, keys.world_id, applied)
    relations_without(tx, keys, [memory for of in later.values() for memory in of.values()])
    forget_persistent(tx, keys, later, found_by_log=True)


PersistentByCharacter = dict[str, dict[bytes, Memory]]
"""Persistent memories of one world: by character, under their memory log keys."""


def forget_persistent(
    tx: StateTransaction, keys: MemoryKeys, own: PersistentByCharacter, *, found_by_log: bool
) -> None:
    """Take these persistent memories out of the world, and put back what they changed in the
    world-wide scope. The first position each character learned each origin at goes back to
    what the memories left show, first of all; then each memory's entries go, last the one the
    caller found it by (its log entry, `found_by_log`, or the memory itself): killed in the
    middle (a crash keeps a prefix of the writes), the caller finds what is left once more.
    The news heads the memories may have moved go too: reads seek the index instead, and
    storing news makes them again from it (`store_memories`)."""
    for character, memories in own.items():
        _learned_without(tx, keys, character, memories.values())
    for character, memories in own.items():
        prefixes = _character_prefixes(keys.tenant_id, keys.world_id, PERSISTENT_SCOPE, character)
        _, memory_prefix, recollections, ranks, _, news, head = prefixes
        if any(is_news(memory) for memory in memories.values()):
            tx.delete(head)
        for log_key, memory in memories.items():
            belief = pack(memory.belief_id)
            at = pack(memory.seq) + belief
            if memory.kind == "event":
                tx.delete(recollections + at)
            else:
                tx.delete(ranks + pack(_rank(memory)) + pack(MAX_SEQ - memory.seq) + belief)
            if is_news(memory):
                tx.delete(news + at)
            for lookup, _ in memory_lookups(keys.tenant_id, keys.world_id, memory):
                tx.delete(lookup)
            stored = memory_prefix + belief
            last_but_one, last = (stored, log_key) if found_by_log else (log_key, stored)
            tx.delete(last_but_one)
            tx.delete(last)


class PersistentByReach(NamedTuple):
    """A world's persistent memories, by whether their timelines have reached them."""

    applied: int
    """How many are at positions their timelines have reached: what the world's count says."""
    unapplied: PersistentByCharacter
    """Those past them (under the log keys that name them): what an event not applied whole
    left."""


def half_applied_persistent(tx: StateTransaction) -> dict[MemoryKeys, PersistentByReach]:
    """Per world holding any, the persistent memories stored at a position their timeline has
    not reached, and how many are at one it has: what a worker of a release before stored of
    an event before it was killed in its middle, and the count the world should have.

    That release wrote the record of the event that counted persistent memories last
    (`PERSISTENT_COUNTED`) after the event's memories, where this one writes it before them,
    so no record names them, and the event, applied again, would find its characters knowing
    already what it was about to teach them (`forget_persistent_stored_at` takes out only what
    a record names). An event's timeline position is saved after everything it stores, so a
    memory past it belongs to an event not yet applied whole. Reads every stored memory once:
    for a store of such a release (`projections.migrations`)."""
    return {
        keys: by_reach
        for keys, by_reach in _persistent_by_reach(tx, pack(MEMORIES)).items()
        if by_reach.unapplied
    }


def _persistent_by_reach(
    tx: StateTransaction, stored: bytes
) -> dict[MemoryKeys, PersistentByReach]:
    """The persistent memories under `stored` (a world's, or the whole store's), per world
    holding any, by whether their timelines have reached them."""
    reached: dict[tuple[str, str, str], int] = {}
    applied: dict[tuple[str, str], int] = {}
    found: dict[tuple[str, str], PersistentByCharacter] = {}
    for key, raw in tx.scan(stored):
        if (memory := DECODED.persistent(raw)) is None:
            continue
        _, tenant, world, *_ = unpack(key)
        of_world = (str(tenant), str(world))
        timeline = (*of_world, memory.timeline_id)
        if timeline not in reached:
            record = timelines.load(tx, *timeline)
            reached[timeline] = 0 if record is None else record.processed_seq
        if memory.seq <= reached[timeline]:
            applied[of_world] = applied.get(of_world, 0) + 1
            continue
        log_key = (
            pack_scope(MEMORY_LOG, tenant, world)
            + pack(memory.timeline_id, memory.seq)
            + pack_scope(memory.character_id)
            + pack(memory.belief_id)
        )
        found.setdefault(of_world, {}).setdefault(memory.character_id, {})[log_key] = memory
    return {
        MemoryKeys(*of_world): PersistentByReach(applied.get(of_world, 0), found.get(of_world, {}))
        for of_world in applied.keys() | found.keys()
    }


def set_persistent_count(tx: StateTransaction, tenant_id: str, world_id: str, applied: int) -> None:
    """Set the world's count of persistent memories (where it keeps one) to those its timelines
    have reached, before the caller takes out the others: an event half-applied left a count
    the event, applied again, would count on from. Set before they go, so a caller killed in
    the middle of taking them out finds the same memories applied, and sets the same count."""
    count_key = pack(PERSISTENT_WORLDS, tenant_id, world_id)
    if tx.get(count_key) is not None:
        tx.put(count_key, applied.to_bytes(8, "big"))


def _learned_without(
    tx: StateTransaction, keys: MemoryKeys, character: str, memories: Iterable[Memory]
) -> None:
    """Put the first position the character learned each origin of `memories` at, in the
    persistent scope, back to what their other persistent memories show (none: unlearned)."""
    left_out = {memory.belief_id: memory.origin for memory in memories}
    first_learned: dict[str, int] = {}
    for memory in persistent_memories(tx, keys, character):
        if memory.belief_id not in left_out:
            first = first_learned.get(memory.origin, memory.seq)
            first_learned[memory.origin] = min(first, memory.seq)
    origins = _character_prefixes(keys.tenant_id, keys.world_id, PERSISTENT_SCOPE, character)[4]
    for origin in set(left_out.values()):
        if origin in first_learned:
            tx.put(origins + pack(origin), first_learned[origin].to_bytes(8, "big"))
        else:
            tx.delete(origins + pack(origin))


def _rank(memory: Memory) -> int:
    """Where a belief sorts among its character's (`BELIEF_RANKS`): the most important first."""
    return _RANK_STEPS - round(memory.importance * _RANK_STEPS)


def scopes(keys: MemoryKeys, ancestry: Ancestry) -> Ancestry:
    """Where a character's memories are: the ancestry, and the world-wide persistent scope."""
    if not keys.any_persistent:
        return ancestry
    return (*ancestry, Segment(PERSISTENT_SCOPE, keys.persistent_upto))


def load_memory(
    tx: StateTransaction, keys: MemoryKeys, character: str, belief_id: str
) -> Memory | None:
    raw = tx.get(keys.memory(character, belief_id))
    return None if raw is None else DECODED.decode(raw)


def load_held(
    tx: StateTransaction, keys: MemoryKeys, ancestry: Ancestry, character: str, belief_id: str
) -> Memory | None:
    """A stored memory as the timeline holds it (`as_revised`)."""
    memory = load_memory(tx, keys, character, belief_id)
    return None if memory is None else as_revised(tx, keys, ancestry, memory)


def as_revised(
    tx: StateTransaction, keys: MemoryKeys, ancestry: Ancestry, memory: Memory
) -> Memory:
    """The memory with the confidence its newest revision on the ancestry gave it, if any."""
    if not keys.any_revised:
        return memory
    raw = read_through(
        tx,
        ancestry,
        lambda timeline: keys.revisions(timeline, memory.character_id, memory.belief_id),
    )
    if raw is None:
        return memory
    return memory.model_copy(update={"confidence": orjson.loads(raw)})


class MemoryWrites(Protocol):
    """Told of what the writes here store, from the memories themselves (the change feed,
    `projections.changes`)."""

    def memory_stored(self, memory: Memory, raw: bytes, key: bytes) -> None:
        """`memory` is about to be stored as `raw` at `key` (which may hold an earlier version
        of it)."""

    def confidence_revised(self, keys: MemoryKeys, memory: Memory) -> None:
        """The belief is held with `memory.confidence` from now on, on the event's timeline
        (told before the new version is written)."""


def revise_confidence(
    tx: StateTransaction,
    keys: MemoryKeys,
    timeline_id: str,
    seq: int,
    revised: Iterable[Memory],
    changes: MemoryWrites | None = None,
) -> None:
    """Keep each memory's new confidence as a version at a position of a timeline; mark the
    world as one whose reads look for revisions. `changes` is told of each."""
    marked = keys.any_revised
    for memory in revised:
        if changes is not None:
            changes.confidence_revised(keys, memory)
        tx.put(
            keys.revisions(timeline_id, memory.character_id, memory.belief_id) + pack(seq),
            orjson.dumps(memory.confidence),
        )
        if not marked:
            tx.put(pack(REVISED_WORLDS, keys.tenant_id, keys.world_id), b"")
            marked = True


class DecodedMemories:
    """Stored memories decoded once, by their stored bytes (a memory is written once and read
    again and again: by tellers, by reads). Storing one remembers it decoded already. Bounded
    by how many and by their stored bytes (the decoded objects take more again: some 1.3 times
    for a memory of large facts, several times for a small one, measured 69 to 76 MB in all):
    a memory copies its event's facts, and 16,384 memories of events of 16 KB held 600 MB.
    """

    def __init__(self, size: int, max_bytes: int) -> None:
        self._size = size
        self._max_bytes = max_bytes
        self._bytes = 0
        self._decoded: OrderedDict[bytes, Memory] = OrderedDict()

    def decode(self, raw: bytes) -> Memory:
        memory = self._decoded.get(raw)
        if memory is None:
            memory = Memory.model_validate_json(raw)
            self.remember(raw, memory)
        return memory

    def persistent(self, raw: bytes) -> Memory | None:
        """The stored memory if it is persistent, else None: the bytes are looked at first, so a
        scan over every memory of a store decodes only the persistent ones."""
        if b'"persistent":true' not in raw:
            return None
        memory = self.decode(raw)
        return memory if memory.persistent else None

    def remember(self, raw: bytes, memory: Memory) -> None:
        if len(raw) > self._max_bytes or raw in self._decoded:
            return
        self._bytes += len(raw)
        while len(self._decoded) >= self._size or self._bytes > self._max_bytes:
            oldest, _ = self._decoded.popitem(last=False)  # the oldest entry makes room
            self._bytes -= len(oldest)
        self._decoded[raw] = memory

    @property
    def held_bytes(self) -> int:
        """The stored bytes of the memories kept decoded."""
        return self._bytes


DECODED = DecodedMemories(size=1 << 14, max_bytes=32 << 20)
"""Enough for what is read again soon (the memories an event stores, tellers' newest news, a
busy character's read): every entry is some ten objects that each full garbage collection
walks, and a town stores a dozen memories an event. Some 700 bytes a memory in a town: 11 MB
of the 32 MB, which memories of events carrying large facts fill first."""


def visible(memory: Memory, keys: MemoryKeys, ancestry: Ancestry) -> bool:
    """Whether a timeline with this ancestry sees the memory: a persistent one, whatever
    timeline formed it, if formed up to `keys.persistent_upto` (a read as of a position stops
    there, as `scopes` does; an event sees them all)."""
    if memory.persistent:
        return memory.seq <= keys.persistent_upto
    return sees(ancestry, memory.timeline_id, memory.seq)


def ever_learned(
    tx: StateTransaction, keys: MemoryKeys, ancestry: Ancestry, character: str, origin: str
) -> bool:
    """Whether `character` ever learned this origin on the timeline: holds a memory of it,
    forgotten or not (whether it still holds it: `projections.knowing`).

    One point read per scope: each scope keeps the first position the character learned the
    origin at, and an ancestor's counts if it is at or before the branch point.
    """
    return ever_learned_in(tx, learned_scopes(keys, ancestry, character), origin)


LearnedScopes = list[tuple[bytes, int, str]]
"""Where a character's first learning of each origin is kept: each scope's key prefix, the
last position of the scope the timeline sees, and the scope (a timeline id, or the persistent
scope)."""


def learned_scopes(keys: MemoryKeys, ancestry: Ancestry, character: str) -> LearnedScopes:
    """The character's `LearnedScopes` on the timeline (packed once for the many origins a
    listener is offered at one event)."""
    return [
        (
            keys.scoped(ORIGINS, segment.timeline_id, character),
            segment.upto_seq,
            segment.timeline_id,
        )
        for segment in scopes(keys, ancestry)
    ]


def ever_learned_in(tx: StateTransaction, learned: LearnedScopes, origin: str) -> bool:
    """`ever_learned`, given the character's `learned_scopes`."""
    return first_learned_in(tx, learned, origin) is not None


def first_learned_in(
    tx: StateTransaction, learned: LearnedScopes, origin: str
) -> tuple[str, int] | None:
    """The scope and the first position the character learned the origin at there, of the
    first of its `learned_scopes` that saw it learned; None if it never learned it."""
    suffix = pack(origin)
    for prefix, upto_seq, scope in learned:
        first = tx.get(prefix + suffix)
        if first is not None and (position := int.from_bytes(first, "big")) <= upto_seq:
            return scope, position
    return None


def memories_of_origin(
    tx: StateTransaction,
    keys: MemoryKeys,
    ancestry: Ancestry,
    origin: str,
    character: str | None = None,
) -> list[Memory]:
    """Every memory of the news `origin` the timeline sees, whoever holds it (or `character`
    alone), as stored: one scan of the origin's entries per scope, not of the world's."""
    found = []
    for segment in scopes(keys, ancestry):
        prefix = pack_scope(ORIGIN_MEMORIES, keys.tenant_id, keys.world_id) + pack(
            origin, segment.timeline_id
        )
        if character is not None:
            prefix += pack(character)
        for key, _ in tx.scan(prefix):
            *holder, seq, belief_id = unpack(key[len(prefix) :])
            if int(seq) <= segment.upto_seq:
                holds = str(holder[0]) if character is None else character
                memory = load_memory(tx, keys, holds, str(belief_id))
                if memory is not None:
                    found.append(memory)
    return found


def memory_named(tx: StateTransaction, keys: MemoryKeys, belief_id: str) -> Memory | None:
    """The stored memory with this belief id, whoever holds it (a belief id names one memory):
    two point lookups."""
    holder = tx.get(pack_scope(BELIEF_HOLDERS, keys.tenant_id, keys.world_id) + pack(belief_id))
    return None if holder is None else load_memory(tx, keys, holder.decode(), belief_id)


def store_memories(
    tx: StateTransaction,
    keys: MemoryKeys,
    memories: Iterable[Memory],
    changes: MemoryWrites | None = None,
    rumours: Iterable[Memory] = (),
    spreading: bool = False,
    forgotten: Collection[tuple[str, str]] = (),
) -> None:
    """Keep the memories one event formed, then the `rumours` it spread (all at the event's
    position), with their indexes. `changes` is told of each before it is written. News kept
    with `spreading` on is added to its character's news head; kept without, it drops the head
    (`NEWS_HEAD_ENTRIES`). The persistent ones move the world's count of them, the event's
    record beside it written before the first of them (`persistent_count_before`).

    A rumour's listener did not know its news (spreading asked `knows`, once per listener and
    news), so the rumour is the first the listener learned of it: unless a memory of the same
    event taught them, or they had learned it before and forgotten it (`forgotten`: (listener,
    origin) pairs), its origin index is written without reading it first.
    """
    tenant, world = keys.tenant_id, keys.world_id
    formed = [(memory, False) for memory in memories]
    learned_before = {(memory.character_id, memory.origin) for memory, _ in formed}
    learned_before.update(forgotten)
    told = [
        (rumour, (rumour.character_id, rumour.origin) not in learned_before) for rumour in rumours
    ]
    # (timeline, seq) -> the packed start of its memory log keys, seq, and MAX_SEQ - seq: the
    # same for every memory an event forms or spreads
    positions: dict[tuple[str, int], tuple[bytes, bytes, bytes]] = {}
    # a news head's key -> its index's prefix, and the entries this event adds to it
    news_added: dict[bytes, tuple[bytes, list[bytes]]] = {}
    persistent_before: int | None = None  # the world's count before the event, once read
    persistent_stored = 0
    for memory, first_learned in chain(formed, told):
        character, seq = memory.character_id, memory.seq
        if memory.persistent:
            scope = PERSISTENT_SCOPE
            if persistent_before is None:  # the event's record first (`persistent_count_before`)
                persistent_before = persistent_count_before(
                    tx, tenant, world, memory.timeline_id, seq
                )
            persistent_stored += 1
        else:
            scope = memory.timeline_id
        of_character = _character_prefixes(tenant, world, scope, character)
        packed_character, stored_prefix, recollections, ranks, origins, news, head = of_character
        position = positions.get((memory.timeline_id, seq))
        if position is None:
            position = positions[(memory.timeline_id, seq)] = (
                pack_scope(MEMORY_LOG, tenant, world) + pack(memory.timeline_id, seq),
                pack(seq),
                pack(MAX_SEQ - seq),
            )
        raw = _MEMORY_JSON(memory)
        belief = pack(memory.belief_id)
        stored = stored_prefix + belief  # keys.memory
        if changes is not None:
            changes.memory_stored(memory, raw, stored)
        tx.put(stored, raw)
        tx.put(position[0] + packed_character + belief, b"")
        DECODED.remember(raw, memory)
        at = position[1] + belief
        if memory.kind == "event":
            tx.put(recollections + at, b"")
        else:
            tx.put(ranks + pack(_rank(memory)) + position[2] + belief, b"")
        origin = origins + pack(memory.origin)
        first = None if first_learned else tx.get(origin)
        if first is None or int.from_bytes(first, "big") > seq:
            tx.put(origin, seq.to_bytes(8, "big"))
        for lookup, value in memory_lookups(tenant, world, memory):
            tx.put(lookup, value)
        if is_news(memory):
            tx.put(news + at, b"")
            news_added.setdefault(head, (news, []))[1].append(at)
    if persistent_before is not None:
        stored_now = persistent_before + persistent_stored
        tx.put(pack(PERSISTENT_WORLDS, tenant, world), stored_now.to_bytes(8, "big"))
    for head, (news, entries) in news_added.items():
        kept_head = tx.get(head)
        if not spreading:
            if kept_head is not None:
                tx.delete(head)
            continue
        if kept_head is None:  # made from the index, this event's news in it already
            newest = islice(tx.scan(news, reverse=True), NEWS_HEAD_ENTRIES)
            tx.put(head, news_head(key[len(news) :] for key, _ in newest))
        else:
            tx.put(head, with_news(kept_head, entries))


def memory_lookups(tenant: str, world: str, memory: Memory) -> list[tuple[bytes, bytes]]:
    """The entries that find a stored memory again: among the memories of its origin
    (`ORIGIN_MEMORIES`, by scope and holder, then position), and by its belief id alone
    (`BELIEF_HOLDERS`, which holds its character)."""
    scope = PERSISTENT_SCOPE if memory.persistent else memory.timeline_id
    character, belief = memory.character_id, memory.belief_id
    of_origin = pack(memory.origin, scope, character, memory.seq, belief)
    return [
        (pack_scope(ORIGIN_MEMORIES, tenant, world) + of_origin, b""),
        (pack_scope(BELIEF_HOLDERS, tenant, world) + pack(belief), character.encode()),
    ]


def news_head(entries: Iterable[bytes]) -> bytes:
    """What a news head stores: the `NEWS_HEAD_ENTRIES` newest of `entries` (the packed position
    and belief id that end a news index key), newest first, each after its length (2 bytes)."""
    newest = sorted(set(entries), reverse=True)[:NEWS_HEAD_ENTRIES]
    return b"".join([_length(len(entry)) + entry for entry in newest])


def with_news(head: bytes, entries: list[bytes]) -> bytes:
    """The `news_head` of `entries` and those `head` holds. An event's news is mostly newer
    than all the head holds (its position is past theirs): it goes before the newest the head
    holds, kept as stored, not read apart and put together again (each listener of a rumour
    has its head moved)."""
    newest = sorted(set(entries), reverse=True)[:NEWS_HEAD_ENTRIES]
    if not head or newest[-1] <= _entry_at(head, 0)[0]:
        return news_head([*entries, *head_entries(head)])  # among them (an event applied again)
    end, kept = 0, len(newest)
    while end < len(head) and kept < NEWS_HEAD_ENTRIES:
        end = _entry_at(head, end)[1]
        kept += 1
    return news_head(newest) + head[:end]


def head_entries(head: bytes) -> list[bytes]:
    """The entries a news head stores, newest first (`news_head`)."""
    entries = []
    index = 0
    while index < len(head):
        entry, index = _entry_at(head, index)
        entries.append(entry)
    return entries


def _entry_at(head: bytes, index: int) -> tuple[bytes, int]:
    """The entry of a news head whose length starts at `index`, and where the next one's does."""
    end = index + 2 + (head[index] << 8 | head[index + 1])
    return head[index + 2 : end], end


@lru_cache(maxsize=64)
def _length(size: int) -> bytes:
    """An entry's length as a news head stores it (all entries are of a few lengths)."""
    return size.to_bytes(2, "big")


_CharacterPrefixes = tuple[bytes, bytes, bytes, bytes, bytes, bytes, bytes]
"""The key prefixes of one character's memories and their indexes in one scope: the packed
character, then its stored memories, recollections, belief ranks, origins and news, and the
key of its news head."""


@lru_cache(maxsize=1 << 12)
def _character_prefixes(tenant: str, world: str, scope: str, character: str) -> _CharacterPrefixes:
    """Packed once per character and scope: a town stores memories for a dozen characters
    an event, rumours' listeners among them, and the same few hundred again and again."""
    packed = pack_scope(character)
    return (
        packed,
        pack_scope(MEMORIES, tenant, world) + packed,
        pack_scope(RECOLLECTIONS, tenant, world, scope, character),
        pack_scope(BELIEF_RANKS, tenant, world, scope, character),
        pack_scope(ORIGINS, tenant, world, scope, character),
        pack_scope(NEWS, tenant, world, scope, character),
        pack_scope(NEWS_HEADS, tenant, world, scope, character),
    )


def formed_between(
    tx: StateTransaction, keys: MemoryKeys, timeline_id: str, after_seq: int, upto_seq: int
) -> Iterator[Memory]:
    """The memories formed on a timeline at positions after `after_seq` up to `upto_seq`, in
    order: what a derived index (words, vectors) catches up on."""
    return (memory for _, memory in _formed(tx, keys, timeline_id, after_seq, upto_seq))


def formed_upto(
    tx: StateTransaction,
    keys: MemoryKeys,
    timeline_id: str,
    after_seq: int,
    upto_seq: int,
    most: int,
) -> tuple[list[Memory], int]:
    """The first `most` memories `formed_between` the positions (more when the last position
    taken formed more: a position is taken whole), and the position they reach: what a
    derived index catches up on a slice at a time, without a world's whole history at once."""
    if most < 1:
        raise ValueError(f"a slice of {most} memories takes none")
    taken: list[Memory] = []
    last = b""
    for position, memory in _formed(tx, keys, timeline_id, after_seq, upto_seq):
        if len(taken) >= most and position != last:
            reached = unpack(last)[0]
            assert isinstance(reached, int)  # the packed position of a log key
            return taken, reached
        taken.append(memory)
        last = position
    return taken, upto_seq


def _formed(
    tx: StateTransaction, keys: MemoryKeys, timeline_id: str, after_seq: int, upto_seq: int
) -> Iterator[tuple[bytes, Memory]]:
    """Each memory formed on a timeline after `after_seq` up to `upto_seq`, in order, with the
    packed position it was formed at.

    A log key ends with the packed (character, belief id) the memory is stored under, so the
    memory's key is put together from it, not unpacked and packed again (the embedding agent
    reads every memory formed, beside ingest)."""
    prefix = pack(MEMORY_LOG, keys.tenant_id, keys.world_id, timeline_id)
    stored = pack(MEMORIES, keys.tenant_id, keys.world_id)
    past = prefix + pack(upto_seq + 1)
    after_position = len(prefix) + len(pack(upto_seq))
    for key, _ in tx.scan(prefix, start=prefix + pack(after_seq + 1)):
        if key >= past:
            break
        raw = tx.get(stored + key[after_position:])
        if raw is not None:
            yield key[len(prefix) : after_position], DECODED.decode(raw)


def newest_news(
    tx: StateTransaction,
    keys: MemoryKeys,
    ancestry: Ancestry,
    character: str,
    count: int,
    held: Callable[[Memory], Memory | None] | None = None,
    within: int = 0,
) -> list[Memory]:
    """The character's newest `count` pieces of news on the timeline (`rumour_rules.is_news`),
    newest first. With `held`, those it keeps, as it gives them back (None drops one), looked
    for among the newest `within` (at least `count`): the newest `count` are read first (a news
    head holds them), deeper only when `held` dropped some of them and there may be more, for a
    teller's newest news is mostly what it still holds."""
    if held is None:
        return list(_newest(tx, keys, ancestry, character, NEWS, count))
    kept: list[Memory] = []
    looked_at: set[str] = set()
    for depth in (count, within) if within > count else (count,):
        read = 0
        for memory in _newest(tx, keys, ancestry, character, NEWS, depth):
            read += 1
            if memory.belief_id in looked_at:
                continue
            looked_at.add(memory.belief_id)
            as_held = held(memory)
            if as_held is not None:
                kept.append(as_held)
                if len(kept) == count:
                    return kept
        if read < depth:  # no more news to look at
            break
    return kept


def newest_recollections(
    tx: StateTransaction, keys: MemoryKeys, ancestry: Ancestry, character: str, limit: int
) -> list[Memory]:
    """The character's newest `event` memories on the timeline, newest first."""
    return list(_newest(tx, keys, ancestry, character, RECOLLECTIONS, limit))


def _newest(
    tx: StateTransaction,
    keys: MemoryKeys,
    ancestry: Ancestry,
    character: str,
    index: str,
    limit: int,
) -> Iterator[Memory]:
    """The newest entries of a by-position index through the ancestry, newest first.

    An entry's key ends with the packed (position, belief id), which sorts as the pair does and
    ends with the packed belief id the memory is stored under: entries are compared and the
    memory's key put together without unpacking them (tellers read this at every meeting).
    """
    found: list[bytes] = []
    segments = scopes(keys, ancestry)
    for segment in segments:
        last = pack(segment.upto_seq) + _LAST_BELIEF
        if index == NEWS:
            headed = _newest_in_head(
                tx, keys.scoped(NEWS_HEADS, segment.timeline_id, character), last, limit
            )
            if headed is not None:
                found.extend(headed)
                continue
        prefix = keys.scoped(index, segment.timeline_id, character)
        newest = islice(tx.scan(prefix, reverse=True, start=prefix + last), limit)
        found.extend(key[len(prefix) :] for key, _ in newest)
    if len(segments) > 1:  # one scope's entries came newest first already
        found = heapq.nlargest(limit, found)
    stored = keys.held_by(character)
    for entry in found:
        raw = tx.get(stored + entry[_PACKED_SEQ:])
        if raw is not None:
            yield as_revised(tx, keys, ancestry, DECODED.decode(raw))


def _newest_in_head(
    tx: StateTransaction, head: bytes, last: bytes, limit: int
) -> list[bytes] | None:
    """The newest `limit` news entries up to `last` as the scope's head holds them, newest
    first; None when there is no head, or the index may hold some it does not (it is full, and
    the entries past `last` left fewer than `limit`)."""
    stored = tx.get(head)
    if stored is None:
        return None
    entries = head_entries(stored)
    seen = [entry for entry in entries if entry <= last]
    if len(seen) >= limit or len(entries) < NEWS_HEAD_ENTRIES:
        return seen[:limit]
    return None


def most_important_beliefs(
    tx: StateTransaction, keys: MemoryKeys, ancestry: Ancestry, character: str, limit: int
) -> list[Memory]:
    """What the character holds to be so on the timeline, most important (then newest) first."""
    found: list[tuple[int, int, str]] = []
    for segment in scopes(keys, ancestry):
        prefix = keys.scoped(BELIEF_RANKS, segment.timeline_id, character)
        taken = 0
        for key, _ in tx.scan(prefix):
            rank, inverted_seq, belief_id = _rank_entry(key[len(prefix) :])
            if MAX_SEQ - inverted_seq > segment.upto_seq:
                continue  # the abandoned future of an ancestor
            found.append((rank, inverted_seq, belief_id))
            taken += 1
            if taken == limit:
                break
    beliefs = []
    for _, _, belief_id in heapq.nsmallest(limit, found):
        memory = load_held(tx, keys, ancestry, character, belief_id)
        if memory is not None:
            beliefs.append(memory)
    return beliefs


_RANKED = re.compile(rb"\x15(.{8})\x15(.{8})\x02([0-9a-f]+)\x00", re.DOTALL)
"""A belief rank entry's end, as `pack` makes it of a rank, MAX_SEQ - seq and a belief id."""


def _rank_entry(entry: bytes) -> tuple[int, int, str]:
    """The rank, inverted seq and belief id a `BELIEF_RANKS` key ends with: read in place for
    the hexadecimal ids every belief has (a referee looks 800 deep at every line it weighs),
    unpacked for any other."""
    found = _RANKED.fullmatch(entry)
    if found is None:
        rank, inverted_seq, belief_id = unpack(entry)
        return int(rank), int(inverted_seq), str(belief_id)
    rank_bytes, seq_bytes, belief = found.groups()
    return int.from_bytes(rank_bytes, "big"), int.from_bytes(seq_bytes, "big"), belief.decode()


def held_in_order(
    tx: StateTransaction, keys: MemoryKeys, ancestry: Ancestry, character: str
) -> list[Memory]:
    """Every memory the character holds on the timeline, in story order (position, then belief
    id): each scope's recollections up to its end, and its beliefs formed up to it."""
    found: list[tuple[int, str]] = []
    for segment in scopes(keys, ancestry):
        prefix = keys.scoped(RECOLLECTIONS, segment.timeline_id, character)
        end = prefix + pack(segment.upto_seq) + _LAST_BELIEF
        for key, _ in tx.scan(prefix, reverse=True, start=end):
            seq, belief_id = unpack(key[len(prefix) :])
            found.append((int(seq), str(belief_id)))
        prefix = keys.scoped(BELIEF_RANKS, segment.timeline_id, character)
        for key, _ in tx.scan(prefix):
            _, inverted_seq, belief_id = unpack(key[len(prefix) :])
            if MAX_SEQ - int(inverted_seq) <= segment.upto_seq:
                found.append((MAX_SEQ - int(inverted_seq), str(belief_id)))
    held = (load_memory(tx, keys, character, belief_id) for _, belief_id in sorted(found))
    return [memory for memory in held if memory is not None]


def persistent_memories(tx: StateTransaction, keys: MemoryKeys, character: str) -> Iterator[Memory]:
    """Every persistent memory of the character (they belong to no timeline)."""
    if not keys.any_persistent:
        return
    for kind in (RECOLLECTIONS, BELIEF_RANKS):
        prefix = keys.scoped(kind, PERSISTENT_SCOPE, character)
        for key, _ in tx.scan(prefix):
            belief_id = str(unpack(key[len(prefix) :])[-1])
            memory = load_memory(tx, keys, character, belief_id)
            if memory is not None and memory.seq <= keys.persistent_upto:
                yield memory


def record_origin(tx: StateTransaction, keys: MemoryKeys, origin: str, event: Event) -> None:
    """Note that `event` formed memories of the news `origin`, so provenance can name where
    the news started: the first such event a timeline sees (`origin_event`)."""
    tx.put(
        pack(ORIGIN_EVENTS, keys.tenant_id, keys.world_id, origin, event.timeline_id, event.seq),
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


def origin_event(
    tx: StateTransaction, keys: MemoryKeys, ancestry: Ancestry, origin: str
) -> bytes | None:
    """Where news started as a timeline sees it (JSON, as `record_origin` kept it): the first
    event on its ancestry that formed memories of it. News that never started there (a
    persistent memory from another timeline) names the earliest event recorded anywhere, up
    to `keys.persistent_upto` as the persistent memory itself is (positions compare across
    timelines; stored by timeline id, the first stored may be the latest)."""
    everywhere = pack(ORIGIN_EVENTS, keys.tenant_id, keys.world_id, origin)
    for segment in reversed(ancestry):  # the oldest positions first
        for key, value in tx.scan(everywhere + pack(segment.timeline_id)):
            if int.from_bytes(key[-8:], "big") <= segment.upto_seq:
                return value
            break
    earliest: tuple[int, bytes] | None = None
    for key, value in tx.scan(everywhere):
        seq = int.from_bytes(key[-8:], "big")
        if seq <= keys.persistent_upto and (earliest is None or seq < earliest[0]):
            earliest = (seq, value)
    return None if earliest is None else earliest[1]
