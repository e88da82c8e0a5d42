"""Migrations: stored state taken, step by step, to the format this release writes.

Every record of a store (a worker's RocksDB partition, a `MemoryState`) was written in the
format of one release, so the store carries one schema version for all its records: the
`STATE_FORMAT` key. A release that changes how anything is stored appends a `Migration` to
`MIGRATIONS`: a plain, deterministic function from one stored record (key and value bytes) to
the records that replace it. On start (`upgrade`), a store is taken through every step after
its version, in order, each step stamping the version it reached; a store written by a newer
release is refused rather than misread.

A store without the key was written before formats were versioned: format 1, which a test
keeps reading from a fixture of that release (`tests/fixtures/previous_release`). An empty
store is stamped with the current format at once: there is nothing in it to upgrade.

A crash in the middle of a step runs the step again, over records it partly rewrote already:
a rewrite must give a record already in its new form back unchanged. A step may take events
out of the deferral buffer that a release before left there for ever (`Migration.settles`):
their acks come with the upgrade, and the worker sends them before the upgraded state, so a
crash in between sends them again (acks are at-least-once, as every ack is).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import suppress
from dataclasses import dataclass

import orjson
from pydantic import AwareDatetime, TypeAdapter, ValidationError

from projections.delivery import OUTBOX_PART_BYTES, outbox_parts, part_key, without_bytes
from projections.judgements import MOST_PART_BYTES, judgement_parts, position_of, record_key
from projections.key_prefixes import (
    GROUP_EXCHANGE_HEADS,
    GROUP_EXCHANGES,
    JUDGEMENTS,
    LOCATION_HEADS,
    LOCATIONS,
    MEMORIES,
    OCCUPANT_HEADS,
    OCCUPANTS,
    OUTBOX,
    PENDING,
    STATE_FORMAT,
    WAITED_ON,
    WAITING_CHILDREN,
)
from projections.keys import pack, unpack
from projections.memory_store import (
    DECODED,
    forget_persistent,
    half_applied_persistent,
    memory_lookups,
    set_persistent_count,
)
from projections.reinforcement import recalls_counted
from projections.relations import head_persistent_relations, head_persistent_relations_without
from projections.sequencing import settle_inherited_everywhere
from projections.state import StateTransaction
from projections.versions import head_value
from schemas import Ack
from schemas.events import DATE_TIME_PATTERN
from schemas.judgements import EventJudgements
from schemas.records import OutboxRecord

FIRST_FORMAT = 1
"""The format of a store that has no `STATE_FORMAT` key: everything before formats had one."""
FORMAT_KEY = pack(STATE_FORMAT)

StoredRecord = tuple[bytes, bytes]


@dataclass(frozen=True)
class Migration:
    """One step: from format `version - 1` to `version`."""

    version: int
    what_changed: str
    spaces: tuple[str, ...]
    """The key spaces (`projections.key_prefixes`) whose records it rewrites; others stay."""
    rewrite: Callable[[bytes, bytes], Sequence[StoredRecord]]
    """The records that replace one stored record: itself, unchanged, to keep it as it is;
    none to drop it."""
    then: Callable[[StateTransaction], int] | None = None
    """What the step writes once its records are rewritten, from the store as they left it:
    what no record alone gives (a sum over many). Returns how many records it wrote."""
    settles: Callable[[StateTransaction], list[Ack]] | None = None
    """The events the step takes out of the deferral buffer, once its records are rewritten,
    each with the ack it has now: their producers had none to come (the worker sends them)."""


HEADS_OF = {
    LOCATIONS: LOCATION_HEADS,
    OCCUPANTS: OCCUPANT_HEADS,
    GROUP_EXCHANGES: GROUP_EXCHANGE_HEADS,
}
"""The versioned spaces read at every event that format 2 heads (`versions.write_headed`)."""


def _heads_and_marks(key: bytes, value: bytes) -> list[StoredRecord]:
    """Format 2: a version of a space in `HEADS_OF` is kept and repeated as its timeline's head
    (a scope's versions come oldest first, so the newest is the head left); a waiting branch is
    kept and marks the timeline it waits for as waited on."""
    space, *scope, last = unpack(key)
    if space == WAITING_CHILDREN:
        return [(key, value), (pack(WAITED_ON, *scope), b"1")]
    return [(key, value), (pack(HEADS_OF[str(space)], *scope), head_value(int(last), value))]


def _unchanged(key: bytes, value: bytes) -> list[StoredRecord]:
    """A step that rewrites nothing: it only marks the format a release before cannot read."""
    return [(key, value)]


def _dead_letters_without_bytes(key: bytes, value: bytes) -> list[StoredRecord]:
    """Format 5: an outbox row's dead letters keep no bytes of the rejected message
    (`delivery.without_bytes`); a row without dead letters stays as it is."""
    if b'"value_base64"' not in value:
        return [(key, value)]
    row = OutboxRecord.from_bytes(value)
    letters = [without_bytes(letter) for letter in row.dead_letters]
    return [(key, OutboxRecord.encode(row.message_digest, row.acks, letters, row.changes))]


def _judgements_in_parts(key: bytes, value: bytes) -> list[StoredRecord]:
    """Format 6: an event's judgements kept in the parts this release keeps them in
    (`judgements.judgement_parts`), each under a key of its own, the first written last: run
    again after a crash that kept some of the others, the record still whole under the first's
    key is split again. A part, and a record this release keeps whole, stay as they are."""
    if len(value) <= MOST_PART_BYTES // 2:  # far from any part's room: no need to read it
        return [(key, value)]
    record = EventJudgements.model_validate_json(value)
    if record.part:
        return [(key, value)]
    first, *others = judgement_parts(position_of(record), record.judgements)
    if not others:
        return [(key, value)]
    return [*((record_key(part), part.to_bytes()) for part in others), (key, first.to_bytes())]


def _facts_valued(key: bytes, value: bytes) -> list[StoredRecord]:
    """Format 9: each fact of a waiting event has its `value`. A release before stored a
    dialogue line stamped with its record's time without the facts' null values (`value` is
    required, null allowed), and the line no longer read as an event when its gap filled: the
    worker stopped on it at every start. Such a fact gets its null back; anything else stays."""
    if b'"facts"' not in value:
        return [(key, value)]
    event = orjson.loads(value)
    facts = event.get("facts")
    if not isinstance(facts, list) or all("value" in fact for fact in facts):
        return [(key, value)]
    event["facts"] = [fact if "value" in fact else fact | {"value": None} for fact in facts]
    return [(key, orjson.dumps(event))]


_DATETIME_AS_ONCE_READ = TypeAdapter(AwareDatetime)
"""A date-time as a release before format 10 took one: any that pydantic's parser reads."""


def _times_as_the_contract_writes(key: bytes, value: bytes) -> list[StoredRecord]:
    """Format 10: a waiting event's `occurred_at` and `game_time` in the forms the contract now
    takes. A release before took any date-time pydantic reads (`2024-05-01 21:05Z`, a unix time
    as text) and a `game_time` with a final line break: such an event, no longer read as one,
    would stop the worker when its gap filled. The time is written as the moment it named
    (RFC 3339), the line break dropped; anything else stays."""
    event = orjson.loads(value)
    if not isinstance(event, dict):
        return [(key, value)]
    rewritten = dict(event)
    occurred_at, game_time = event.get("occurred_at"), event.get("game_time")
    if isinstance(occurred_at, str) and DATE_TIME_PATTERN.fullmatch(occurred_at) is None:
        with suppress(ValidationError):
            moment = _DATETIME_AS_ONCE_READ.validate_strings(occurred_at)
            rewritten["occurred_at"] = moment.isoformat()
    if isinstance(game_time, str) and game_time.endswith("\n"):
        rewritten["game_time"] = game_time.removesuffix("\n")
    return [(key, value if rewritten == event else orjson.dumps(rewritten))]


def _half_applied_persistent_taken_out(tx: StateTransaction) -> int:
    """Format 12: the persistent memories a worker of a release before stored of an event
    before it was killed in its middle (`memory_store.half_applied_persistent`) are taken out,
    with what they changed: the event, applied again, forms them as applying it once does.
    Where it had counted them, or the migration to format 8 summed them into relation heads,
    the count and those heads are made again from the memories left.

    The count and heads are written first, each memory itself last: run again after a crash
    that kept a prefix of the writes (the worker sends them in the order of their last write),
    the step finds the memories not yet taken out, and counts and sums the same from what is
    left without them. Returns how many memories and heads it rewrote."""
    rewritten = 0
    for keys, (applied, memories) in half_applied_persistent(tx).items():
        taken_out = [
            memory for of_character in memories.values() for memory in of_character.values()
        ]
        set_persistent_count(tx, keys.tenant_id, keys.world_id, applied)
        rewritten += len(taken_out) + head_persistent_relations_without(tx, keys, taken_out)
        forget_persistent(tx, keys, memories, found_by_log=False)
    return rewritten


def _memory_with_lookups(key: bytes, value: bytes) -> list[StoredRecord]:
    """Format 13: a stored memory, and the entries that find it again among the memories of its
    origin and by its belief id alone (`memory_store.memory_lookups`)."""
    _, tenant, world, *_ = unpack(key)
    memory = DECODED.decode(value)
    return [(key, value), *memory_lookups(str(tenant), str(world), memory)]


def _outbox_rows_in_parts(key: bytes, value: bytes) -> list[StoredRecord]:
    """Format 14: an outbox row over `delivery.OUTBOX_PART_BYTES` kept in the parts this release
    keeps (`delivery.outbox_parts`), the first written last (`delivery.keep_row`); a row that
    fits, a part, and a first part already saying how many there are (a step run again after a
    crash) stay as they are."""
    if len(value) <= OUTBOX_PART_BYTES:
        return [(key, value)]
    _, _, _, _, *number = unpack(key)  # outbox, topic, partition, offset (, a part's number)
    row = OutboxRecord.from_bytes(value)
    if number or row.parts > 1:
        return [(key, value)]
    first, *others = outbox_parts(row.message_digest, row.acks, row.dead_letters, row.changes)
    return [*((part_key(key, part), record) for part, record in enumerate(others, 1)), (key, first)]


MIGRATIONS: tuple[Migration, ...] = (
    Migration(
        2,
        "where characters are, who is at each place and when groups last met kept as heads, "
        "and the timelines branches wait for marked: a point lookup per event, not a seek",
        (*HEADS_OF, WAITING_CHILDREN),
        _heads_and_marks,
    ),
    Migration(
        3,
        "news heads kept as news spreads (`memory_store.NEWS_HEAD_ENTRIES`): nothing rewritten, "
        "but a release before them, adding news without its heads, would leave them stale",
        (),
        _unchanged,
    ),
    Migration(
        4,
        "the model's answers of a world deleted and begun anew kept apart from the deleted "
        "world's (`deletion.incarnation`), and each deletion count with the deletion that made "
        "it: nothing rewritten, but a release before would misread both",
        (),
        _unchanged,
    ),
    Migration(
        5,
        "the outbox keeps no bytes of a rejected message: its dead letter takes them from the "
        "message again when it is redelivered",
        (OUTBOX,),
        _dead_letters_without_bytes,
    ),
    Migration(
        6,
        "an event's judgements kept in parts of at most 14,000 bytes, each under a key of its "
        "own: thousands of them made a record no producer sends",
        (JUDGEMENTS,),
        _judgements_in_parts,
    ),
    Migration(
        7,
        "where the run of a fact said again unchanged began kept with its version "
        "(`world.made_by`): nothing rewritten, but a release before, deleting a world without "
        "its runs, would leave them to a world begun anew",
        (),
        _unchanged,
    ),
    Migration(
        8,
        "what persistent memories add to each relation kept summed in a head per pair, with the "
        "event that moved it last: the change feed tells the relations they move; a release "
        "before, adding persistent memories without their heads, would leave them stale",
        (),
        _unchanged,
        head_persistent_relations,
    ),
    Migration(
        9,
        "each fact of a dialogue line waiting for an earlier seq has its value: a release before "
        "dropped the null ones, and the line stopped the worker when its gap filled",
        (PENDING,),
        _facts_valued,
    ),
    Migration(
        10,
        "the real time and story time of an event waiting for an earlier seq in the forms the "
        "contract now takes (RFC 3339 with an offset; no final line break): a release before "
        "took others, which no longer read as an event when the gap filled",
        (PENDING,),
        _times_as_the_contract_writes,
    ),
    Migration(
        11,
        "an event that waited on a timeline before its first event made it a branch, at a "
        "position the branch inherits, leaves the deferral buffer with its `duplicate` ack: a "
        "release before left it waiting for ever, holding a place in the buffer",
        (),
        _unchanged,
        settles=settle_inherited_everywhere,
    ),
    Migration(
        12,
        "the persistent memories of an event a worker of a release before was killed in the "
        "middle of are taken out until the event is applied again: that release kept no record "
        "of the event before them, and the event, applied again, found its characters knowing "
        "already what it was about to teach them",
        (),
        _unchanged,
        _half_applied_persistent_taken_out,
    ),
    Migration(
        13,
        "every memory findable among its origin's and by its belief id alone: a listener who "
        "forgot news can be told it again, and a rumour's map reads what it draws, not every "
        "memory of its world",
        (MEMORIES,),
        _memory_with_lookups,
    ),
    Migration(
        14,
        "an outbox row over 14,000 bytes kept in parts, each under a key of its own: a message "
        "that filled a gap, keeping an ack for each event it released, made a row the state "
        "changelog refused; a release before would read the first part alone",
        (OUTBOX,),
        _outbox_rows_in_parts,
    ),
    Migration(
        15,
        "each recall of a memory counts those before it on its timeline: a read, and each "
        "recall event, sought the last one where it scanned them all (a memory recalled each "
        "turn took the partition quadratic time)",
        (),
        _unchanged,
        recalls_counted,
    ),
)
"""Every step since format 1, oldest first; a new one goes at the end."""


class StateFormatError(Exception):
    """The store cannot be taken to this release's format (a newer release wrote it)."""


@dataclass(frozen=True)
class Upgrade:
    """What `upgrade` did to a store."""

    from_format: int
    to_format: int
    records_rewritten: int
    acks: tuple[Ack, ...] = ()
    """The acks of the events the steps took out of the deferral buffer (`Migration.settles`),
    for the worker to send before the upgraded state."""

    def __str__(self) -> str:
        if self.from_format == self.to_format:
            return f"state in format {self.to_format}"
        acked = f", {len(self.acks)} waiting event(s) acked" if self.acks else ""
        return (
            f"state upgraded from format {self.from_format} to {self.to_format} "
            f"({self.records_rewritten} record(s) rewritten{acked})"
        )


def current_format(migrations: Sequence[Migration] = MIGRATIONS) -> int:
    """The format this release writes: one past the last step's start."""
    return FIRST_FORMAT + len(migrations)


def stored_format(tx: StateTransaction) -> int | None:
    """The format the store is stamped with; None for a store never stamped."""
    raw = tx.get(FORMAT_KEY)
    return None if raw is None else int(raw)


def upgrade(tx: StateTransaction, migrations: Sequence[Migration] = MIGRATIONS) -> Upgrade:
    """Take the store through every step after its format, in order, stamping each.

    Raises `StateFormatError` for a store newer than `migrations` know, before writing
    anything. Upgrading a store already current writes nothing.
    """
    _check_chain(migrations)
    current = current_format(migrations)
    found = stored_format(tx)
    if found is None:
        found = FIRST_FORMAT if _holds_records(tx) else current
    if found > current:
        raise StateFormatError(
            f"the stored state is in format {found}, and this release of rumourmill reads "
            f"formats up to {current}: run the release that wrote it (or a newer one), or "
            f"rebuild the state from the events topic into a fresh app id"
        )
    rewritten = 0
    acks: list[Ack] = []
    for migration in migrations[found - FIRST_FORMAT :]:
        rewritten += _apply(tx, migration)
        if migration.then is not None:
            rewritten += migration.then(tx)
        if migration.settles is not None:
            acks += migration.settles(tx)
        _stamp(tx, migration.version)
    if stored_format(tx) != current:
        _stamp(tx, current)
    return Upgrade(found, current, rewritten, tuple(acks))


def _check_chain(migrations: Sequence[Migration]) -> None:
    """The steps follow each other from format 1, one version each: order is the contract."""
    for expected, migration in enumerate(migrations, start=FIRST_FORMAT + 1):
        if migration.version != expected:
            raise ValueError(
                f"migration {migration.what_changed!r} is to format {migration.version}; "
                f"step {expected - FIRST_FORMAT} must be to format {expected}"
            )


def _holds_records(tx: StateTransaction) -> bool:
    return any(True for _ in tx.scan(b""))


def _apply(tx: StateTransaction, migration: Migration) -> int:
    """Rewrite the records of the step's spaces; returns how many changed.

    Every replacement is computed from the store as it was, in key order, then old keys are
    removed and new records written, so a record moved onto another's key is never rewritten
    twice. A key several records are rewritten to is written once, with the last of them
    (a head: the newest version); a record kept as it is is not written again.
    """
    removed: list[bytes] = []
    written: dict[bytes, bytes] = {}
    changed = 0
    for space in migration.spaces:
        for key, value in tx.scan(pack(space)):
            replacements = list(migration.rewrite(key, value))
            if replacements == [(key, value)]:
                continue
            changed += 1
            if all(new_key != key for new_key, _ in replacements):
                removed.append(key)
            written.update(record for record in replacements if record != (key, value))
    for key in removed:
        tx.delete(key)
    for key, value in written.items():
        tx.put(key, value)
    return changed


def _stamp(tx: StateTransaction, version: int) -> None:
    tx.put(FORMAT_KEY, b"%d" % version)
