"""Deletion: a `world.deleted` or `tenant.deleted` event removes everything of the world.

Every key space keyed by world (`projections.key_prefixes.WORLD_PREFIXES`: every projection,
persistent memories included, and the events still waiting in the deferral buffer) is emptied
through the state transaction, so the worker's changelog carries a tombstone for each key. What
is left digests as a world never seen, and a replay of the whole log deletes it again.

A deletion is not sequenced: its `timeline_id` and `seq` are required by the event contract
but not used, and it is applied when it arrives. After it the world is unknown: reads answer
404, and the next events start it anew (a timeline's seq restarts at 1). A redelivery of an
event from before the deletion is still recognised by its source position (the outbox is kept)
and changes nothing. Deleting what was never seen is acked and does nothing else.

A tenant's worlds are spread over the partitions of the events topic: `tenant.deleted` must
reach each partition (`rumourmill tenant delete` sends one to every partition), and each
deletes what its own state holds.

How often a world (or tenant) was deleted is counted apart, as bookkeeping (`DELETIONS`), so
an answer cached before a deletion is never served for the world begun anew
(`runtime_read.read_position`), and the model's answers of a world begun anew are kept apart
from the deleted world's at the same positions (`incarnation`). A tenant's deletion counts for
the tenant and for each world it removed. Each count is kept with the source offset of the
deletion that made it: the same deletion given again (a worker killed mid-deletion) counts
once, so a rebuild counts what the live worker counted.

The model's answers (feelings, retold rumours, verdicts, chronicle summaries) are also on the
shell's judgements topic, keyed as the `JUDGEMENTS` space is: a deletion gives those keys back
(`Intake.forgotten_judgements`) for the shell to tombstone there. And the worker keeps the
world's memories in memory beside the state, derived from it (the recall index, the read
cache): a deletion names the worlds it removed (`Intake.deleted_worlds`) for the shell to drop
from there at once, not when the world is next looked at, which may be never.
"""

from __future__ import annotations

import orjson

from projections.delivery import Intake, forget_letters_of
from projections.event_keys import DELETION_KEYS, TENANT_DELETED, WORLD_DELETED
from projections.key_prefixes import DELETIONS, JUDGEMENTS, WORLD_PREFIXES
from projections.keys import KeyPart, pack, unpack
from projections.state import StateTransaction
from schemas import Ack, Event, Outcome

ANY = "*"
"""What a deletion event gives for the fields it does not use (they are required)."""


def deletion_event(tenant_id: str, world_id: str | None) -> Event:
    """The event that deletes one world of the tenant or, without a world, the whole tenant
    (an empty world id is refused as the contract refuses it, never taken for every world)."""
    return Event(
        tenant_id=tenant_id,
        world_instance_id=ANY if world_id is None else world_id,
        timeline_id=ANY,
        seq=1,
        key=TENANT_DELETED if world_id is None else WORLD_DELETED,
    )


def is_deletion(event: Event) -> bool:
    return event.key in DELETION_KEYS


def deletes_tenant(value: bytes) -> bool:
    """Whether a message's bytes are a `tenant.deleted` event. It names the world `ANY`, and so
    do its acks, as the events of a world called `*` do (an id like any other): what tells a
    tenant's deletion from that world's events is its key."""
    try:
        document = orjson.loads(value)
    except orjson.JSONDecodeError:
        return False
    return isinstance(document, dict) and document.get("key") == TENANT_DELETED


def world_acked(ack: Ack, value: bytes) -> tuple[str, str] | None:
    """The tenant and the world `ack` tells of, given the bytes of the message acked: None for
    an ack naming no world, and for a tenant's deletion (its world `*` is no world, unless a
    world is called so: `deletes_tenant`)."""
    tenant, world = ack.tenant_id, ack.world_instance_id
    if tenant is None or world is None or (world == ANY and deletes_tenant(value)):
        return None
    return tenant, world


def delete(tx: StateTransaction, event: Event, offset: int) -> Intake:
    """Remove what the deletion event names (given at source `offset`); its ack says how much
    went, and the keys of the judgements removed are the judgements topic's to tombstone."""
    scope: tuple[KeyPart, ...] = (event.tenant_id,)
    if event.key == TENANT_DELETED:
        what = f"tenant {event.tenant_id!r}"
    else:
        scope += (event.world_instance_id,)
        what = f"world {event.world_instance_id!r} of tenant {event.tenant_id!r}"
    removed, worlds = delete_scope(tx, scope, offset)
    said = f"deleted {len(removed)} records of {what}" if removed else f"{what}: nothing to delete"
    ack = Ack(
        tenant_id=event.tenant_id,
        world_instance_id=event.world_instance_id,
        timeline_id=event.timeline_id,
        seq=event.seq,
        outcome=Outcome.PROCESSED,
        reason=said,
    )
    judgements = pack(JUDGEMENTS, *scope)
    return Intake(
        acks=[ack],
        forgotten_judgements=tuple(key for key in removed if key.startswith(judgements)),
        deleted_worlds=tuple((event.tenant_id, world) for world in worlds),
    )


def delete_scope(
    tx: StateTransaction, scope: tuple[KeyPart, ...], offset: int
) -> tuple[list[bytes], list[str]]:
    """Delete every key of every world space under `scope` ((tenant,) or (tenant, world)), for
    the deletion at source `offset`.

    Returns the keys that went, and the worlds they were of; when any went, the scope's deletion
    count goes up by one, and so does that of each world a tenant's deletion removed (its life
    ends too), unless this deletion counted already. The counts are written first: a worker
    killed mid-deletion keeps a prefix of these writes (what its changelog got) and is given the
    deletion again, which finishes it without counting it twice.
    """
    doomed = [key for prefix in WORLD_PREFIXES for key, _ in tx.scan(pack(prefix, *scope))]
    worlds = []
    if doomed:
        _count(tx, scope, offset)
        if len(scope) == 1:
            worlds = sorted({str(unpack(key)[2]) for key in doomed})
            for world in worlds:
                _count(tx, (*scope, world), offset)
        else:
            worlds = [str(scope[1])]
    forget_letters_of(tx, tuple(str(part) for part in scope))
    for key in doomed:
        tx.delete(key)
    return doomed, worlds


def _count(tx: StateTransaction, scope: tuple[KeyPart, ...], offset: int) -> None:
    """Count the deletion at source `offset` of `scope`, unless it was counted."""
    count_key = pack(DELETIONS, *scope)
    count, counted_at = _counted(tx.get(count_key))
    if counted_at != offset:
        tx.put(count_key, b"%d@%d" % (count + 1, offset))


def deletions(tx: StateTransaction, count_key: bytes) -> int:
    """How often the scope of `count_key` was deleted."""
    return _counted(tx.get(count_key))[0]


def _counted(raw: bytes | None) -> tuple[int, int | None]:
    """A deletion count as stored: (count, the source offset of the deletion that made it;
    None in a store of a release that kept the count alone)."""
    if raw is None:
        return 0, None
    count, _, offset = raw.partition(b"@")
    return int(count), int(offset) if offset else None


def deleted_since(tx: StateTransaction, tenant_id: str, world_id: str, offset: int) -> bool:
    """Whether the world, or its tenant, was deleted by a message past source `offset` (or by
    one a store of an earlier release kept no offset of): what the message at `offset` did
    belongs to a life of the world that is gone, and its redelivery changes nothing of the
    world begun anew. A deletion kept without its offset counts as later than every message:
    taken for an earlier one, a message from before it, taken in again after the upgrade,
    deleted a waiting event of the world begun anew, which was never released; so taken, a
    redelivery after a crash in the world begun anew leaves what it released in the deferral
    buffer, acked `processed` again by the next duplicate (README, "Known limits")."""
    for count_key in (pack(DELETIONS, tenant_id), pack(DELETIONS, tenant_id, world_id)):
        count, deleted_at = _counted(tx.get(count_key))
        if count and (deleted_at is None or deleted_at > offset):
            return True
    return False


def deletion_marks(tx: StateTransaction, tenant_id: str, world_id: str) -> bytes:
    """How often the tenant and the world were deleted, as bytes a read cache keys on."""
    return b"%d/%d" % (
        deletions(tx, pack(DELETIONS, tenant_id)),
        deletions(tx, pack(DELETIONS, tenant_id, world_id)),
    )


def incarnation(tx: StateTransaction, tenant_id: str, world_id: str) -> str:
    """Which life of the world this is: empty until the world is deleted (by itself or with its
    tenant), then how often it was. A world begun anew after a deletion starts its positions
    again; this tells them from the deleted world's. The world's own count, not its tenant's: a
    tenant's deletion counts for the worlds it removed, so a state holding one world (a
    `rumourmill rebuild --world`) or every partition's (`rumourmill replay`) counts a world's
    lives as its worker's partition does."""
    count = deletions(tx, pack(DELETIONS, tenant_id, world_id))
    return "" if count == 0 else str(count)
