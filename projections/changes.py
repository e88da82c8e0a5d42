"""Changes: what one message changed in the minds of a world, as the change feed tells it.

Read off the state an event writes, whoever writes it, so a new rule that stores memories or
relations shows in the feed without telling it:
- a memory stored where none was is `belief-formed`; a new confidence version of a belief
  (`memory_store.revise_confidence`, the referee's `convinced`) below the confidence the
  timeline held it with just before is `belief-weakened`, and so is a memory stored again over
  a surer version of itself;
- a memory formed as a rumour (`rumour_rules.rumour_id`) is also `rumour-passed`, from its
  teller (`source_entity`) to the character who now holds it;
- each relation version written is `relation-changed`, with the relation as it now stands;
- a world whose timelines a deletion removed is `world-deleted`.

Every `change_id` is a hash of where the change happened (world, timeline, seq, kind, subject),
so applying the same event again, or redelivering it, gives the very same ids.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Iterator
from functools import lru_cache
from typing import Literal

import orjson

from projections.key_prefixes import BELIEF_VERSIONS, DELETIONS, MEMORIES, RELATIONS, TIMELINES
from projections.keys import KeyPart, pack, unpack
from projections.memory_store import DECODED, load_held, memory_keys
from projections.relations import mean_feeling
from projections.rumour_rules import rumour_id
from projections.sequencing import Applied, ApplyEvent
from projections.state import StateTransaction
from projections.timelines import Ancestry
from schemas import Event
from schemas.changes import Change, ChangeRecords, as_records
from schemas.memory import Memory

_MEMORY = pack(MEMORIES)
_RELATION = pack(RELATIONS)
_TIMELINE = pack(TIMELINES)
_DELETIONS = pack(DELETIONS)
_REVISION = pack(BELIEF_VERSIONS)
_WATCHED = (_MEMORY, _RELATION, _REVISION, _DELETIONS)
_WATCHED_INITIALS = frozenset(prefix[1] for prefix in _WATCHED)
"""The first letters of the watched prefixes: most writes are told apart by one byte."""
ID_BYTES = 16


def change_id(tenant_id: str, world_id: str, *where: KeyPart) -> str:
    """The id of a change: 32 hex characters from its world and where in it it happened."""
    return hashlib.blake2b(
        pack("change", tenant_id, world_id, *where), digest_size=ID_BYTES
    ).hexdigest()


class ChangeWatch:
    """A state transaction that passes every read and write through, noting those that change
    a mind; `around` turns what one applied event noted into changes."""

    __slots__ = (
        "_deleted_timelines",
        "_deletions",
        "_memories",
        "_relations",
        "_revisions",
        "_tx",
        "changes",
        "get",
        "scan",
    )

    get: Callable[[bytes], bytes | None]
    scan: Callable[..., Iterator[tuple[bytes, bytes]]]

    def __init__(self, tx: StateTransaction) -> None:
        self._tx = tx
        self.get = tx.get  # reads pass straight through: no frame of ours on each
        self.scan = tx.scan
        self._memories: list[tuple[bytes | None, bytes]] = []
        self._relations: list[tuple[bytes, bytes]] = []
        self._revisions: list[tuple[bytes, bytes]] = []
        self._deleted_timelines: list[bytes] = []
        self._deletions: list[tuple[bytes, bytes]] = []
        self.changes: ChangeRecords = {}
        """What the message changed so far, encoded."""

    def put(self, key: bytes, value: bytes) -> None:
        if key[1] in _WATCHED_INITIALS and key.startswith(_WATCHED):
            if key.startswith(_RELATION):
                self._relations.append((key, value))
            elif key.startswith(_MEMORY):
                self._memories.append((self._tx.get(key), value))
            elif key.startswith(_REVISION):
                self._revisions.append((key, value))
            else:
                self._deletions.append((key, value))
        self._tx.put(key, value)

    def delete(self, key: bytes) -> None:
        if key.startswith(_TIMELINE):
            self._deleted_timelines.append(key)
        self._tx.delete(key)

    def around(self, apply: ApplyEvent) -> ApplyEvent:
        """`apply`, noting the changes of each event it applies."""

        def applied(tx: StateTransaction, event: Event, ancestry: Ancestry) -> Applied:
            note = apply(tx, event, ancestry)
            if self._memories or self._relations or self._revisions:
                at = At(event)
                changes: list[Change] = []
                if self._memories:
                    changes += memory_changes(at, self._memories)
                    self._memories.clear()
                if self._relations:
                    changes += relation_changes(at, self._relations)
                    self._relations.clear()
                if self._revisions:
                    changes += weakenings(at, tx, ancestry, self._revisions)
                    self._revisions.clear()
                self._keep(changes)
            return note

        return applied

    def noted(self) -> ChangeRecords:
        """Every change of the message: those of the events applied, then deletions."""
        if self._deleted_timelines:
            self._keep(world_deletions(self._deleted_timelines, self._deletions))
        return self.changes

    def _keep(self, changes: Iterable[Change]) -> None:
        """Add `changes`, encoded, after those of the message so far."""
        for world, records in as_records(changes).items():
            self.changes.setdefault(world, []).extend(records)


def memory_changes(at: At, written: list[tuple[bytes | None, bytes]]) -> list[Change]:
    """Beliefs formed or weakened, and rumours passed, by the memories an event stored (each
    with what its key held before)."""
    event = at.event
    changes: list[Change] = []
    for before, raw in written:
        memory = DECODED.decode(raw)
        # the same bytes again: the event applied again over its own state (a crash between
        # applying it and saving its positions)
        if before is None or (before == raw and memory.seq == event.seq):
            changes.append(belief_formed(at, memory))
            teller = memory.source_entity
            if teller is not None and _is_rumour(event, memory):
                changes.append(rumour_passed(at, memory, teller))
        elif before != raw:
            earlier = DECODED.decode(before)
            if memory.confidence < earlier.confidence:
                changes.append(belief_weakened(at, memory, earlier.confidence, memory.confidence))
    return changes


def weakenings(
    at: At, tx: StateTransaction, ancestry: Ancestry, revisions: list[tuple[bytes, bytes]]
) -> Iterator[Change]:
    """`belief-weakened` for each confidence version an event wrote (keyed (prefix, tenant,
    world, timeline, character, belief, seq), holding the confidence) below the confidence the
    timeline held the belief with before the event (`ancestry` is as of just before it)."""
    event = at.event
    keys = memory_keys(tx, event.tenant_id, event.world_instance_id)
    for key, value in revisions:
        character, belief_id = (str(part) for part in unpack(key)[4:6])
        held = load_held(tx, keys, ancestry, character, belief_id)
        confidence = orjson.loads(value)
        if held is not None and confidence < held.confidence:
            yield belief_weakened(at, held, held.confidence, confidence)


def _is_rumour(event: Event, memory: Memory) -> bool:
    """Whether the memory is news passed on at `event` (spreading names it by `rumour_id`)."""
    return memory.belief_id == rumour_id(event, memory.character_id, memory.origin)


class At:
    """Where an applied event's changes happened: the fields each carries, and its id's hash
    so far (each change adds its kind and subject to a copy)."""

    __slots__ = ("_hashed", "event", "fields")

    def __init__(self, event: Event) -> None:
        self.event = event
        tenant, world, timeline = event.tenant_id, event.world_instance_id, event.timeline_id
        self._hashed = _timeline_hashed(tenant, world, timeline).copy()
        self._hashed.update(pack(event.seq))
        self.fields: Change = {
            "tenant_id": tenant,
            "world_instance_id": world,
            "timeline_id": timeline,
            "seq": event.seq,
            "game_time": event.game_time,
            "story_minutes": event.story_minutes,
        }

    def change_id(self, kind: str, one: str, other: str) -> str:
        """The id of a change of `kind` to the subject (`one`, `other`) here:
        `change_id(world, timeline, seq, kind, one, other)`."""
        hashed = self._hashed.copy()
        hashed.update(_packed(kind, one, other))
        return hashed.hexdigest()


@lru_cache(maxsize=1 << 16)
def _packed(kind: str, one: str, other: str) -> bytes:
    """A change's kind and subject packed: the same ones recur (relations) event after event."""
    return pack(kind, one, other)


@lru_cache(maxsize=1 << 12)
def _timeline_hashed(tenant: str, world: str, timeline: str) -> hashlib.blake2b:
    """A change id's hash fed with its timeline: what every change there starts from."""
    return hashlib.blake2b(pack("change", tenant, world, timeline), digest_size=ID_BYTES)


# Each builder spells its change out in one dict display (the id, the kind, where, its own
# fields): a dozen changes an event, and merging dicts built apart costs as much again.


def belief_formed(at: At, memory: Memory) -> Change:
    character, belief = memory.character_id, memory.belief_id
    return {
        "change_id": at.change_id("belief-formed", character, belief),
        "kind": "belief-formed",
        **at.fields,
        "character_id": character,
        "belief_id": belief,
        "memory_kind": memory.kind,
        "content": memory.content,
        "source": memory.source,
        "source_entity": memory.source_entity,
        "confidence": memory.confidence,
        "importance": memory.importance,
        "feeling": memory.feeling,
        "persistent": memory.persistent,
    }


def belief_weakened(at: At, memory: Memory, confidence_before: float, now: float) -> Change:
    character, belief = memory.character_id, memory.belief_id
    return {
        "change_id": at.change_id("belief-weakened", character, belief),
        "kind": "belief-weakened",
        **at.fields,
        "character_id": character,
        "belief_id": belief,
        "confidence_before": confidence_before,
        "confidence": now,
    }


def rumour_passed(at: At, memory: Memory, teller: str) -> Change:
    listener, belief = memory.character_id, memory.belief_id
    return {
        "change_id": at.change_id("rumour-passed", listener, belief),
        "kind": "rumour-passed",
        **at.fields,
        "teller_id": teller,
        "listener_id": listener,
        "belief_id": belief,
        "origin": memory.origin,
        "hops": memory.hops,
        "confidence": memory.confidence,
        "content": memory.content,
    }


def relation_changes(at: At, written: list[tuple[bytes, bytes]]) -> list[Change]:
    """A relation as it stands after an event, for each relation version the event wrote
    (keyed (prefix, tenant, world, timeline, character, entity, seq), holding [sum, count,
    last])."""
    changes: list[Change] = []
    for key, value in written:
        character, entity = _relation_between(key[:-_SEQ_PART])
        total, count, _ = orjson.loads(value)
        changes.append(
            {
                "change_id": at.change_id("relation-changed", character, entity),
                "kind": "relation-changed",
                **at.fields,
                "character_id": character,
                "entity_id": entity,
                "feeling": _mean_feeling(total, count),
                "memories": count,
            }
        )
    return changes


_mean_feeling = lru_cache(maxsize=1 << 14)(mean_feeling)
"""`relations.mean_feeling` kept: worked out in decimal, and the same sums and counts recur
(five in six in a long story)."""

_SEQ_PART = len(pack(0))


@lru_cache(maxsize=1 << 16)
def _relation_between(versions: bytes) -> tuple[str, str]:
    """(character, entity) of a relation's versions (a version's key less its seq): the same
    pairs change again and again."""
    _, _, _, _, character, entity = unpack(versions)
    return str(character), str(entity)


def world_deletions(
    deleted_timelines: list[bytes], deletion_counts: list[tuple[bytes, bytes]]
) -> list[Change]:
    """`world-deleted` for each world whose timelines went, numbered by the deletion count the
    deletion wrote (per world, or per tenant for a tenant's deletion)."""
    worlds = dict.fromkeys(
        (str(tenant), str(world)) for _, tenant, world, _ in map(unpack, deleted_timelines)
    )
    changes: list[Change] = []
    for key, value in deletion_counts:
        scope: Literal["world", "tenant"] = "world" if len(unpack(key)) == 3 else "tenant"
        tenant = str(unpack(key)[1])
        for world_tenant, world in worlds:
            if world_tenant != tenant or (scope == "world" and unpack(key)[2] != world):
                continue
            changes.append(
                {
                    "change_id": change_id(tenant, world, "world-deleted", scope, int(value)),
                    "kind": "world-deleted",
                    "tenant_id": tenant,
                    "world_instance_id": world,
                    "scope": scope,
                    "deletion": int(value),
                }
            )
    return changes
