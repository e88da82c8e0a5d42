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
- `relations.record_relations`: each relation an event's memories move, persistent ones too, is
  `relation-changed`, with the relation as a read at the event's position shows it;
- a deletion (`MessageChanges.deleting`) is `world-deleted` for each world whose timelines it
  removed.

Every `change_id` is a hash of where the change happened (world, timeline, seq, kind, subject,
and the world's life once it was deleted), so applying the same event again (a crash before its
state was stored) gives the very same ids, and a world begun anew never repeats the deleted
one's.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from functools import lru_cache
from typing import Any, Literal, Protocol

import orjson

from projections.change_records import record
from projections.deletion import delete, incarnation
from projections.delivery import Intake
from projections.event_keys import TENANT_DELETED, TOLD
from projections.key_prefixes import TIMELINES
from projections.keys import KeyPart, pack, pack_scope, unpack
from projections.memory_store import DECODED, MemoryKeys, load_held
from projections.relations import mean_feeling
from projections.sequencing import Applied, ApplyEvent
from projections.state import StateTransaction
from projections.timelines import Ancestry
from schemas import Event
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

    def deleting(self, tx: StateTransaction, event: Event, offset: int) -> Intake:
        """Apply a deletion event at source `offset` (`deletion.delete`), keeping
        `world-deleted` for each world whose timelines it removed, numbered by the world's
        deletion count (`deletion.incarnation`: by itself or with its tenant, this one
        included). Not the tenant's own count: each partition keeps one, so a replay of every
        partition into one state would number the changes (and their ids) otherwise."""
        scope: tuple[KeyPart, ...] = (event.tenant_id,)
        if event.key != TENANT_DELETED:
            scope += (event.world_instance_id,)
        worlds = dict.fromkeys(str(unpack(key)[2]) for key, _ in tx.scan(pack(TIMELINES, *scope)))
        deleted = delete(tx, event, offset)
        named: Literal["world", "tenant"] = "world" if len(scope) == 2 else "tenant"
        tenant = event.tenant_id
        for world in worlds:
            count = int(incarnation(tx, tenant, world))  # counted by `delete`: never empty
            change: Change = {
                "change_id": change_id(tenant, world, "world-deleted", named, count),
                "kind": "world-deleted",
                "tenant_id": tenant,
                "world_instance_id": world,
                "scope": named,
                "deletion": count,
            }
            self._keep(world, [orjson.dumps(change)])
        return deleted

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

    Each record is built where its change is told, in one call (`change_records.record`, in C):
    byte for byte the `orjson.dumps` of the whole change ({change_id, kind, tenant_id,
    world_instance_id, timeline_id, seq, game_time, story_minutes, *own}), its id
    `change_id(world, timeline, seq, kind, one, other)`. There are a dozen an event, and the
    feed's cost is mostly theirs."""

    __slots__ = (
        "_ancestry",
        "_memories",
        "_position",
        "_relations",
        "_revisions",
        "_rumours",
        "_stored",
        "_tx",
        "event",
    )

    def __init__(self, tx: StateTransaction, event: Event, ancestry: Ancestry) -> None:
        self._tx = tx
        self.event = event
        self._ancestry = ancestry
        self._position: tuple[bytes, bytes] | None = None
        """What every record of the event starts from (`_at`), once a change is told."""
        self._memories: list[bytes] = []
        self._relations: list[bytes] = []
        self._revisions: list[bytes] = []
        self._rumours: frozenset[str] = frozenset()
        self._stored: dict[bytes, bytes] = {}
        """The memories stored at this event so far, by key."""

    @property
    def told(self) -> bool:
        """Whether any change was told."""
        return self._position is not None

    def passing(self, rumours: Iterable[Memory]) -> None:
        """The memories the event passes on as rumours (`rumour_spreading.spread`): stored,
        each is a `rumour-passed` from its teller too."""
        self._rumours = frozenset(memory.belief_id for memory in rumours)

    def _told_here(self, held: dict[str, Any]) -> bool:
        """Whether a memory is news the event's `told` passed on (to its listener, or a named
        witness who heard it): a rumour passed, as at a meeting (the feed had only those, and
        "who passed the most rumours" missed every `told`)."""
        return (
            self.event.key == TOLD
            and held["seq"] == self.event.seq
            and held["source"] in ("told", "rumour")
        )

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
            teller, content = held["source_entity"], held["content"]
            self._memories.append(
                record(
                    self._position or self._locate(),
                    _BELIEF_FORMED,
                    character,
                    belief,
                    (
                        character,
                        belief,
                        held["kind"],
                        content,
                        held["source"],
                        teller,
                        confidence,
                        held["importance"],
                        held["feeling"],
                        held["persistent"],
                    ),
                )
            )
            if teller is not None and (belief in self._rumours or self._told_here(held)):
                self._memories.append(
                    record(
                        self._position or self._locate(),
                        _RUMOUR_PASSED,
                        character,
                        belief,
                        (
                            teller,
                            character,
                            belief,
                            held["origin"],
                            held["hops"],
                            confidence,
                            content,
                        ),
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
        self._relations.append(
            record(
                self._position or self._locate(),
                _RELATION_CHANGED,
                character,
                entity,
                (character, entity, _standing(total, count)),
            )
        )

    def in_order(self) -> list[bytes]:
        """The records told: memories, then relations, then revisions."""
        return [*self._memories, *self._relations, *self._revisions]

    def _weakened(self, memory: Memory, before: float, now: float) -> bytes:
        character, belief = memory.character_id, memory.belief_id
        return record(
            self._position or self._locate(),
            _BELIEF_WEAKENED,
            character,
            belief,
            (character, belief, before, now),
        )

    def _locate(self) -> tuple[bytes, bytes]:
        """Where the event is, as every record of a change at it starts (`_at`): worked out
        at the first change told."""
        event = self.event
        life = incarnation(self._tx, event.tenant_id, event.world_instance_id)
        self._position = _at(event, life)
        return self._position


RecordShape = tuple[bytes, bytes, tuple[bytes, ...]]
"""What the records of one kind of change hold besides their values, as
`change_records.record` takes it: what a record holds between its id and the event's fields,
the kind as its subject starts (`pack(kind)`, which the id hashes), and its own fields' names,
each as the record holds it before the value (an empty one: the value holds its names, encoded
already)."""


def _shape(kind: str, *names: str) -> RecordShape:
    """The shape of the records of `kind`, their own fields `names` (an empty one: a value that
    holds its names, encoded already)."""
    return (
        b'","kind":' + orjson.dumps(kind) + b",",
        pack(kind),
        tuple(orjson.dumps(name) + b":" if name else b"" for name in names),
    )


_BELIEF_FORMED = _shape(
    "belief-formed",
    "character_id",
    "belief_id",
    "memory_kind",
    "content",
    "source",
    "source_entity",
    "confidence",
    "importance",
    "feeling",
    "persistent",
)
_BELIEF_WEAKENED = _shape(
    "belief-weakened", "character_id", "belief_id", "confidence_before", "confidence"
)
_RELATION_CHANGED = _shape("relation-changed", "character_id", "entity_id", "")
"""Its last value is the relation's standing, encoded already (`_standing`)."""
_RUMOUR_PASSED = _shape(
    "rumour-passed",
    "teller_id",
    "listener_id",
    "belief_id",
    "origin",
    "hops",
    "confidence",
    "content",
)


def _at(event: Event, life: str) -> tuple[bytes, bytes]:
    """Where the event is, as every change id at it starts (`pack("change", tenant, world,
    timeline, seq)`, then the world's `life` when it was deleted before: a world begun anew
    starts its positions again, and its changes are others than the deleted world's), and the
    event's fields as every record of a change at it holds them (with the comma before the
    change's own)."""
    prefix = pack_scope("change", event.tenant_id, event.world_instance_id, event.timeline_id)
    where = orjson.dumps(
        {
            "tenant_id": event.tenant_id,
            "world_instance_id": event.world_instance_id,
            "timeline_id": event.timeline_id,
            "seq": event.seq,
            "game_time": event.game_time,
            "story_minutes": event.story_minutes,
            "life": int(life) if life else 0,
        }
    )
    position = prefix + (pack(event.seq, life) if life else pack(event.seq))
    return position, where[1:-1] + b","


@lru_cache(maxsize=1 << 14)
def _standing(total: float, count: int) -> bytes:
    """The last of a relation change's own fields, encoded as orjson encodes them, without
    braces: the relation's feeling (`relations.mean_feeling`, worked out in decimal) and
    memories. The same sums and counts recur (five in six in a long story)."""
    return orjson.dumps({"feeling": mean_feeling(total, count), "memories": count})[1:-1]
