"""Changes: what one message changed in the minds of a world, as the change feed tells it.

Told by the writes themselves, as they write: the projector hands each applied event's
`EventChanges` to the functions that store minds, and each says what it wrote, from the very
objects it wrote (no stored bytes decoded again). With the feed off they are given None and pay
nothing.
- `memory_store.store_memories`: a memory stored where none was is `belief-formed` (it says what
  the key held before, so a rule that stores a memory again over a surer version of itself makes
  a `belief-weakened`); one the event passes on as a rumour (the projector names them:
  `EventChanges.passing`) is also `rumour-passed`, from its teller (`source_entity`) to the
  character who now holds it;
- `memory_store.revise_confidence` (the referee's `convinced`): a new confidence below the one
  the timeline held the belief with just before is `belief-weakened`;
- `relations.record_relations`: each relation version written is `relation-changed`, with the
  relation as it now stands;
- a deletion (`MessageChanges.deleting`) is `world-deleted` for each world whose timelines it
  removed.

Every `change_id` is a hash of where the change happened (world, timeline, seq, kind, subject),
so applying the same event again (a crash before its state was stored) gives the very same ids.
"""

from __future__ import annotations

import hashlib
from binascii import hexlify
from collections.abc import Iterable
from functools import lru_cache
from typing import Any, Literal, Protocol

import orjson

from projections.deletion import delete, deletions
from projections.event_keys import TENANT_DELETED
from projections.key_prefixes import DELETIONS, TIMELINES
from projections.keys import KeyPart, pack, unpack
from projections.memory_store import DECODED, MemoryKeys, load_held
from projections.relations import mean_feeling
from projections.sequencing import Applied, ApplyEvent
from projections.state import StateTransaction
from projections.timelines import Ancestry
from schemas import Ack, Event
from schemas.changes import Change, ChangeRecords
from schemas.memory import Memory

ID_BYTES = 16


def change_id(tenant_id: str, world_id: str, *where: KeyPart) -> str:
    """The id of a change: 32 hex characters from its world and where in it it happened."""
    return hashlib.blake2b(
        pack("change", tenant_id, world_id, *where), digest_size=ID_BYTES
    ).hexdigest()


class ApplyNoting(Protocol):
    """Applies one event as `ApplyEvent` does, telling `changes` what it changes."""

    def __call__(
        self, tx: StateTransaction, event: Event, ancestry: Ancestry, *, changes: EventChanges
    ) -> Applied: ...


class MessageChanges:
    """What one message changed so far, as the feed's records (`records`)."""

    __slots__ = ("records",)

    def __init__(self) -> None:
        self.records: ChangeRecords = {}
        """Each world's records, in the order they happened."""

    def around(self, apply: ApplyNoting) -> ApplyEvent:
        """`apply`, keeping the changes of each event it applies."""

        def applied(tx: StateTransaction, event: Event, ancestry: Ancestry) -> Applied:
            changes = EventChanges(tx, event, ancestry)
            note = apply(tx, event, ancestry, changes=changes)
            if changes.told:
                self._keep(event.world_instance_id, changes.in_order())
            return note

        return applied

    def deleting(self, tx: StateTransaction, event: Event) -> Ack:
        """Apply a deletion event (`deletion.delete`), keeping `world-deleted` for each world
        whose timelines it removed, numbered by the deletion count it wrote (per world, or per
        tenant for a tenant's deletion)."""
        scope: tuple[KeyPart, ...] = (event.tenant_id,)
        if event.key != TENANT_DELETED:
            scope += (event.world_instance_id,)
        worlds = dict.fromkeys(str(unpack(key)[2]) for key, _ in tx.scan(pack(TIMELINES, *scope)))
        ack = delete(tx, event)
        named: Literal["world", "tenant"] = "world" if len(scope) == 2 else "tenant"
        count = deletions(tx, pack(DELETIONS, *scope))
        tenant = event.tenant_id
        for world in worlds:
            change: Change = {
                "change_id": change_id(tenant, world, "world-deleted", named, count),
                "kind": "world-deleted",
                "tenant_id": tenant,
                "world_instance_id": world,
                "scope": named,
                "deletion": count,
            }
            self._keep(world, [orjson.dumps(change)])
        return ack

    def _keep(self, world: str, records: list[bytes]) -> None:
        kept = self.records.get(world)
        if kept is None:
            self.records[world] = records
        else:
            kept += records


class EventChanges:
    """The changes of one applied event, told by the writes that make them
    (`memory_store.MemoryWrites`, `relations.RelationWrites`), each kind kept apart so the
    records come in one order whatever order the writes come in: memories (each belief formed,
    then the rumour it passed), relations, confidence revisions.

    Each record is built where its change is told, in one step (`_spliced`): there are a dozen
    an event, and the feed's cost is mostly theirs."""

    __slots__ = (
        "_ancestry",
        "_hashed",
        "_memories",
        "_relations",
        "_revisions",
        "_rumours",
        "_stored",
        "_tx",
        "_where",
        "event",
        "told",
    )

    def __init__(self, tx: StateTransaction, event: Event, ancestry: Ancestry) -> None:
        self._tx = tx
        self.event = event
        self._ancestry = ancestry
        self._hashed: hashlib.blake2b | None = None
        """A change id's hash fed with the event's position (once a change is told)."""
        self._where = b""
        """The event's fields as each record holds them (once a change is told)."""
        self._memories: list[bytes] = []
        self._relations: list[bytes] = []
        self._revisions: list[bytes] = []
        self._rumours: frozenset[str] = frozenset()
        self._stored: dict[bytes, bytes] = {}
        """The memories stored at this event so far, by key."""
        self.told = False
        """Whether any change was told."""

    def passing(self, rumours: Iterable[Memory]) -> None:
        """The memories the event passes on as rumours (`rumour_spreading.spread`): stored,
        each is a `rumour-passed` from its teller too."""
        self._rumours = frozenset(memory.belief_id for memory in rumours)

    def memory_stored(self, memory: Memory, raw: bytes, key: bytes) -> None:
        """`memory` is about to be stored as `raw` at `key`: a belief formed if the key holds
        nothing, or the same bytes formed at this very event (the event applied again over its
        own state, after a crash between applying it and saving its positions); weakened if it
        holds a surer version.

        A memory formed at this event (its `seq`) has an id made of this event's position, so
        only this event can have stored it before: what the key held is read off the event's own
        writes, not the state (a point read that misses, for most of the memories an event
        stores). Applied again after a crash, the event meets its own bytes there, which tell
        the same as nothing: a belief formed."""
        formed_here = memory.seq == self.event.seq
        before = self._stored.get(key) if formed_here else self._tx.get(key)
        self._stored[key] = raw
        held = memory.__dict__  # its fields: read a dozen times, past pydantic's attribute hook
        character, belief, confidence = held["character_id"], held["belief_id"], held["confidence"]
        if before is None or (before == raw and formed_here):
            teller = held["source_entity"]
            self._memories.append(
                self._record(
                    "belief-formed",
                    character,
                    belief,
                    {
                        "character_id": character,
                        "belief_id": belief,
                        "memory_kind": held["kind"],
                        "content": held["content"],
                        "source": held["source"],
                        "source_entity": teller,
                        "confidence": confidence,
                        "importance": held["importance"],
                        "feeling": held["feeling"],
                        "persistent": held["persistent"],
                    },
                )
            )
            if teller is not None and belief in self._rumours:
                self._memories.append(
                    self._record(
                        "rumour-passed",
                        character,
                        belief,
                        {
                            "teller_id": teller,
                            "listener_id": character,
                            "belief_id": belief,
                            "origin": held["origin"],
                            "hops": held["hops"],
                            "confidence": confidence,
                            "content": held["content"],
                        },
                    )
                )
        elif before != raw:
            earlier = DECODED.decode(before).confidence
            if confidence < earlier:
                self._memories.append(self._weakened(memory, earlier, confidence))

    def confidence_revised(self, keys: MemoryKeys, memory: Memory) -> None:
        """The belief is now held with `memory.confidence` on the event's timeline: a
        weakening if below the confidence the timeline held it with just before."""
        character, belief = memory.character_id, memory.belief_id
        held = load_held(self._tx, keys, self._ancestry, character, belief)
        if held is not None and memory.confidence < held.confidence:
            self._revisions.append(self._weakened(held, held.confidence, memory.confidence))

    def relation_changed(self, character: str, entity: str, total: float, count: int) -> None:
        """The relation of `character` to `entity` now stands at `count` memories summing to
        `total`."""
        subject, fields = _relation(character, entity)
        self._relations.append(
            self._spliced(_RELATION_CHANGED, subject, fields, _standing(total, count))
        )

    def in_order(self) -> list[bytes]:
        """The records told: memories, then relations, then revisions."""
        return [*self._memories, *self._relations, *self._revisions]

    def _weakened(self, memory: Memory, before: float, now: float) -> bytes:
        character, belief = memory.character_id, memory.belief_id
        return self._record(
            "belief-weakened",
            character,
            belief,
            {
                "character_id": character,
                "belief_id": belief,
                "confidence_before": before,
                "confidence": now,
            },
        )

    def _record(self, kind: str, one: str, other: str, own: dict[str, Any]) -> bytes:
        """The record of a change of `kind` to the subject (`one`, `other`) with its `own`
        fields."""
        return self._spliced(_KIND_FIELDS[kind], pack(kind, one, other), orjson.dumps(own)[1:])

    def _spliced(self, kind_fields: bytes, subject: bytes, own: bytes, more: bytes = b"") -> bytes:
        """The record of a change to `subject` (`pack(kind, one, other)`) at the event, with
        its kind's `_KIND_FIELDS` and its own fields (`own` then `more`, encoded as orjson
        encodes them, the first less its opening brace) after those every change at an event
        has: byte for byte the `orjson.dumps` of the whole change ({change_id, kind,
        tenant_id, world_instance_id, timeline_id, seq, game_time, story_minutes, *own}),
        spliced from orjson's encodings of its parts (the event's once), at half the cost of
        building the dict and encoding it. Its id is
        `change_id(world, timeline, seq, kind, one, other)`."""
        hashed = self._hashed
        if hashed is None:
            hashed, self._where = _at(self.event)
            self._hashed = hashed
            self.told = True
        hashed = hashed.copy()
        hashed.update(subject)
        change = hexlify(hashed.digest())
        return b"".join((b'{"change_id":"', change, kind_fields, self._where, own, more))


CHANGE_KINDS = ("belief-formed", "belief-weakened", "relation-changed", "rumour-passed")
"""The kinds of change an applied event makes (a deletion makes `world-deleted`)."""
_KIND_FIELDS = {kind: b'","kind":' + orjson.dumps(kind) + b"," for kind in CHANGE_KINDS}
"""What a record holds between its id and the event's fields."""
_RELATION_CHANGED = _KIND_FIELDS["relation-changed"]


def _at(event: Event) -> tuple[hashlib.blake2b, bytes]:
    """A change id's hash fed with where the event is, and the event's fields as every record
    of a change at it holds them (with the comma before the change's own)."""
    hashed = _timeline_hashed(event.tenant_id, event.world_instance_id, event.timeline_id).copy()
    hashed.update(pack(event.seq))
    where = orjson.dumps(
        {
            "tenant_id": event.tenant_id,
            "world_instance_id": event.world_instance_id,
            "timeline_id": event.timeline_id,
            "seq": event.seq,
            "game_time": event.game_time,
            "story_minutes": event.story_minutes,
        }
    )
    return hashed, where[1:-1] + b","


@lru_cache(maxsize=1 << 16)
def _relation(character: str, entity: str) -> tuple[bytes, bytes]:
    """The subject of a relation's changes, and the first of their own fields, encoded as
    orjson encodes them but open at both ends: the same relations change event after event."""
    subject = pack("relation-changed", character, entity)
    fields = orjson.dumps({"character_id": character, "entity_id": entity})
    return subject, fields[1:-1] + b","


@lru_cache(maxsize=1 << 14)
def _standing(total: float, count: int) -> bytes:
    """The last of a relation change's own fields, encoded as orjson encodes them, less the
    opening brace: the relation's feeling (`relations.mean_feeling`, worked out in decimal)
    and memories. The same sums and counts recur (five in six in a long story)."""
    return orjson.dumps({"feeling": mean_feeling(total, count), "memories": count})[1:]


@lru_cache(maxsize=1 << 12)
def _timeline_hashed(tenant: str, world: str, timeline: str) -> hashlib.blake2b:
    """A change id's hash fed with its timeline: what every change there starts from."""
    return hashlib.blake2b(pack("change", tenant, world, timeline), digest_size=ID_BYTES)
