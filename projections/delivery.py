"""Delivery: at-least-once in, exactly once in effect, and nothing undeliverable lost.

The broker delivers a message again when a worker stopped before its offset was committed.
What a message produced is kept in an outbox under its source position, so a redelivery
re-sends the very same acks and dead letters, and nothing is applied again. Its changes (the
change feed) are not kept: the worker sends the state holding the outbox row to the changelog
only once they are stored on the feed (`streams.app.Rumourmill.send_changes`), so a state that
recognises a redelivery has its changes on the feed already. Rows of releases that kept them
still give them back, and they are sent again (the same change ids). A message that
cannot be taken in is dead-lettered (key and value in base64, a value over the size limit cut
to it) with a plain reason, and still acked; the outbox keeps its dead letter without the bytes
(`without_bytes`), which a redelivery brings again (but for a waiting event's it released:
`kept_in_outbox`). Whatever the message, its acks and dead letter fit one record the
worker's producer takes (`MOST_RECORD_BYTES`), and the refused judgements its acks list a
share of the record size the settings give (`with_refusals_bounded`).
An outbox row too large for one record of the state changelog (a message that fills a gap keeps
an ack for each event it releases) is kept in parts (`outbox_parts`).
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
from collections.abc import Callable, Iterable
from contextlib import suppress
from dataclasses import dataclass, field, replace
from itertools import takewhile
from typing import Any, TypeVar

import orjson
from pydantic import ConfigDict, TypeAdapter, ValidationError
from pydantic_core import ErrorDetails

from projections.key_prefixes import OUTBOX, OUTBOX_PRUNED
from projections.keys import pack, unpack
from projections.state import StateTransaction
from schemas import Ack, DeadLetter, Outcome
from schemas.changes import ChangeRecords, as_records
from schemas.events import NAMEABLE_ID_PATTERN, Contract, NameableId, Seq
from schemas.judgements import RefusedJudgement
from schemas.records import OutboxRecord

_ACK_FIELDS = Ack.__pydantic_serializer__.to_python
"""`Ack.model_dump`, without its Python wrapper (an ack or more per message)."""
_REFUSED_JSON = RefusedJudgement.__pydantic_serializer__.to_json
"""A refused judgement as an ack's JSON holds it (its bytes are what an ack's listing costs)."""
OUTBOX_DEPTH = 100_000
"""How many source positions back a redelivery is still recognised, per partition."""

MOST_RECORD_BYTES = 1_000_000
"""The most one record the worker sends may be, key and value (as aiokafka measures it): its
producer's request limit (Faust's `producer_max_request_size`, which `streams.app` sets to
this), under the broker's default `message.max.bytes` (1,048,588). A record over it is refused,
the worker stops, and every restart stops again on the message that made it: so the bounds
below keep every ack and dead letter of any message within it. A dead letter's value, at
`RUMOURMILL_MAX_EVENT_BYTES`' most (700,000 bytes), is 933,336 bytes in base64; its reason at
most 6,000 in JSON (`MOST_REASON_CHARS`, 6 bytes for a control character's escape), its key at
most 2,392 (`MOST_KEY_BYTES_KEPT`, as the record's key and in base64), ids, topic and numbers
under 2,500: under 945,000 bytes in all."""
MOST_REFUSALS_LISTED = 100
"""The most judgements the rules made an ack lists (`Ack.refused_judgements`; then how many
more, `more_refused_judgements`): an event perceived by thousands of characters in model mode
raises a judgement each, and 40,000 listed made an ack of 5 MB. Listed, each is at most 7,000
bytes (a reason at `MOST_REASON_CHARS`, ids of 128 characters): the bytes bound them too
(`REFUSALS_SHARE_OF_RECORD`)."""
REFUSALS_SHARE_OF_RECORD = 0.5
"""The most the refused judgements the acks of one message list may take, as JSON, of the
largest record the worker sends and stores (`RUMOURMILL_CHANGELOG_BATCH_BYTES`); the rest are
counted, not listed. Each ack is a record of the acks topic, and the outbox row that keeps all
of a message's acks one of the state changelog: 100 listed an ack whatever the setting made
acks of 110 KB (215 KB seen, 700 KB at most), and the row of a message that filled a gap
three times that, which a broker the setting was lowered for refused; the worker stopped on
it, at every restart. Half leaves the row room for the rest of its acks (some 200 bytes each),
and at the least setting (16,384) still lists a first refusal of 7,000 bytes."""
OUTBOX_PART_BYTES = 14_000
"""The most one record of an outbox row holds, unless a single ack or dead letter is larger (an ack
listing the refused judgements of half of `RUMOURMILL_CHANGELOG_BATCH_BYTES`,
`REFUSALS_SHARE_OF_RECORD`, or the dead letter of a refused waiting event with its bytes, at most
70% of the setting: either fits a record of the setting's changelog topic). A message that fills a
gap keeps an ack for each event it releases (up to `sequencing.max_deferred`, 100,000 at most), some
160 bytes each: kept whole, 500 of them made a row of 80 KB, which the changelog topic of the least
setting (16,384, the topic taking 64 KiB more) refused, and the worker stopped on the message at
every restart. With its key (a topic's name is 249 characters at most) and Kafka's overheads, a part
fits a record batch of the least setting, as a part of an event's judgements does
(`projections.judgements.MOST_PART_BYTES`). A constant, not the setting: an upgrade splits the rows
of earlier releases (`projections.migrations`) without knowing it."""
_PART_FIELD_BYTES = len(b',"changes":[],"parts":') + 20
"""What a part's record may add to a row of no ack beyond its digest: a list of changes, and
how many parts there are (20 digits at most)."""
MOST_REASON_CHARS = 1_000
"""The longest reason an ack or dead letter carries: a reason saying everything wrong with a
message, or quoting it, grows with the message (15,000 numbers out of range made a reason of
1.2 MB). Longer ones are cut, saying how long they were (`bounded_reason`)."""
MOST_PROBLEMS_LISTED = 5
"""The problems of an invalid event a reason lists (`explain`), then how many
more there are: the first few say what is wrong, and the message is kept whole to see the rest."""
MOST_NESTED = 200
"""The most levels values nest within a message's own object that pydantic's JSON parser reads
(its recursion limit): `payload` holds 199 more, a string or number counting as one (the 200th
level holds only empty arrays and objects)."""
MOST_QUOTED_CHARS = 100
"""The most a reason quotes of anything the message chose, its key or where in it a problem is
(`projections.intake`): longer ones are shown by their start and their length."""
MOST_KEY_BYTES_KEPT = 1_024
"""The most of a message's key its dead letter keeps (in `key_base64`, and as the dead letter's
own key) and its acks naming no world are keyed by (`kept_key`): an event's key is its world id,
at most 512 bytes, and Kafka takes keys near its whole message limit, whose dead letter (three
copies, one in base64) could not be sent. A longer key's dead letter says its whole length
(`key_bytes`); the message itself stays at its topic, partition and offset."""


@dataclass(frozen=True, slots=True)
class SourceMessage:
    """One message as the broker (or a replayed file) delivered it."""

    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes
    timestamp_ms: int | None = None
    """The record's timestamp (ms since the epoch) where the broker gives one; dialogue lines
    without `occurred_at` keep it as their real time."""
    home_partition: int | None = None
    """The partition Kafka's default partitioner gives its key, where the reads and the
    deletion of its world look: an event on another is refused. None where nothing routes by
    partition (a replayed file)."""


@dataclass(frozen=True, slots=True)
class Intake:
    """What one message produced, to be published; `redelivered` if sent before."""

    acks: list[Ack] = field(default_factory=list)
    dead_letters: list[DeadLetter] = field(default_factory=list)
    redelivered: bool = False
    changes: ChangeRecords = field(default_factory=dict)
    """What it changed in the minds of its world, for the change feed (`projections.changes`);
    empty with the feed off, and for a redelivery (unless an earlier release's outbox row kept
    its changes)."""
    forgotten_judgements: tuple[bytes, ...] = ()
    """A deletion's: the keys of the model judgements it removed (`projections.deletion`), the
    same bytes as the judgements topic's keys, for the shell to tombstone there (the topic would
    keep the deleted world's answers for ever). Not kept in the outbox: the shell stores the
    tombstones before the state that holds the deletion, so a redelivery it recognises has
    nothing left to tombstone."""
    deleted_worlds: tuple[tuple[str, str], ...] = ()
    """A deletion's: the tenant and id of each world it removed, for the shell to drop from what
    it keeps in memory beside the state (the recall index, the read cache), which holds the
    world's memories, their words, until the world is looked at again. Not kept in the outbox:
    a redelivery it recognises comes to a worker that dropped them, or never held them."""
    deleted_after_outbox: tuple[bytes, ...] = ()
    """Keys `produce_once` deletes only after the outbox row: the deferral buffer's entries of
    the events the message took out (applied, refused, inherited by a branch) and the
    registrations of the branches it released, which a worker killed before the row must find
    still there for the message taken in again to ack those events (refuse them, with their
    bytes) again (`projections.sequencing.Sequenced`). Not kept in the outbox."""


def produce_once(
    tx: StateTransaction,
    message: SourceMessage,
    produce: Callable[[], Intake],
    record_bytes: int = MOST_RECORD_BYTES,
) -> Intake:
    """What `message` produces: worked out by `produce` the first time, and read back from the
    outbox when the same message comes again at the same source position. Either way its acks
    list the refused judgements that fit records of `record_bytes` (`with_refusals_bounded`):
    a row of a release that listed more, or of a larger setting, is re-sent bounded."""
    digest = hashlib.blake2b(
        (message.key or b"") + b"\x00" + message.value, digest_size=16
    ).hexdigest()
    key = pack(OUTBOX, message.topic, message.partition, message.offset)
    stored = tx.get(key)
    if stored is not None:
        outbox = OutboxRecord.from_bytes(stored)
        if outbox.message_digest == digest:
            outbox = whole_row(tx, key, outbox)
            return Intake(
                acks=with_refusals_bounded(
                    [stored_as(Ack, item) for item in outbox.acks], record_bytes
                ),
                dead_letters=[
                    stored_as(DeadLetter, with_bytes(item, message)) for item in outbox.dead_letters
                ],
                redelivered=True,
                changes=as_records(outbox.changes),
            )
    intake = produce()
    if (acks := with_refusals_bounded(intake.acks, record_bytes)) is not intake.acks:
        intake = replace(intake, acks=acks)
    if message.offset >= OUTBOX_DEPTH:
        forget_rows_upto(tx, message.topic, message.partition, message.offset - OUTBOX_DEPTH)
    keep_row(
        tx,
        key,
        outbox_parts(
            digest,
            [_ACK_FIELDS(item, mode="json") for item in intake.acks],
            [kept_in_outbox(item.model_dump(mode="json"), message) for item in intake.dead_letters],
        ),
    )
    for taken_out in intake.deleted_after_outbox:
        tx.delete(taken_out)
    return intake


Item = TypeVar("Item")


def in_parts(items: Iterable[Item], cost: Callable[[Item], int], room: int) -> list[list[Item]]:
    """`items` in their order, in parts whose items `cost` at most `room` in all (an item alone
    may cost more): what keeps something too large for one record in several. One part at
    least, empty for no items."""
    parts: list[list[Item]] = [[]]
    spent = 0
    for item in items:
        price = cost(item)
        if parts[-1] and spent + price > room:
            parts.append([])
            spent = 0
        parts[-1].append(item)
        spent += price
    return parts


def outbox_parts(
    digest: str,
    acks: list[dict[str, Any]],
    dead_letters: list[dict[str, Any]],
    changes: list[dict[str, Any]] | None = None,
) -> list[bytes]:
    """The records that keep a message's outbox row, the first saying how many there are: the
    row whole (the bytes of the releases before parts) while it fits `OUTBOX_PART_BYTES`, else
    its acks, dead letters and changes in their order, in parts each within it (but for one
    larger item alone), and the same row always in the same parts."""
    whole = OutboxRecord.encode(digest, acks, dead_letters, changes)
    if len(whole) <= OUTBOX_PART_BYTES:
        return [whole]
    room = OUTBOX_PART_BYTES - len(OutboxRecord.encode(digest, [], [])) - _PART_FIELD_BYTES
    items = [
        *(("acks", item) for item in acks),
        *(("dead_letters", item) for item in dead_letters),
        *(("changes", item) for item in changes or ()),
    ]
    parts = in_parts(items, lambda named: len(orjson.dumps(named[1])) + 1, room)  # and a comma
    records = []
    for number, part in enumerate(parts):
        fields: dict[str, list[dict[str, Any]]] = {"acks": [], "dead_letters": [], "changes": []}
        for name, item in part:
            fields[name].append(item)
        count = len(parts) if number == 0 else 1
        records.append(OutboxRecord.encode(digest, **fields, parts=count))
    return records


def part_key(row: bytes, part: int) -> bytes:
    """Where part `part` of the outbox row kept at `row` is: the first at `row` itself, the
    others under `row`'s tuple and their number (keys of no other row: a packed tuple's scope
    holds only the keys of the longer tuples that start with it)."""
    return row + pack(part) if part else row


def keep_row(tx: StateTransaction, row: bytes, parts: list[bytes]) -> None:
    """Store the records of an outbox row (`outbox_parts`) at `row`, the first last: the
    changelog keeps a message's writes in the order of their last (an event's split over record
    batches too, `streams.changelog`), so a state holding the first holds every other, and a
    crash between them leaves the message unrecognised, to be taken in again."""
    for part, record in enumerate(parts[1:], start=1):
        tx.put(part_key(row, part), record)
    tx.put(row, parts[0])


def whole_row(tx: StateTransaction, row: bytes, first: OutboxRecord) -> OutboxRecord:
    """The outbox row kept at `row` whose first record is `first`, with its other parts' acks,
    dead letters and changes after its own. A part missing, or of another message, is damage
    no crash leaves (`keep_row`, `forget_row`): an error, not a redelivery re-sending part of
    what the message produced."""
    if first.parts == 1:
        return first
    acks, letters, changes = [*first.acks], [*first.dead_letters], [*first.changes]
    for part in range(1, first.parts):
        stored = tx.get(part_key(row, part))
        record = None if stored is None else OutboxRecord.from_bytes(stored)
        if record is None or record.message_digest != first.message_digest:
            raise ValueError(
                f"the outbox row at {unpack(row)[1:]} is kept in {first.parts} parts, and part "
                f"{part} is {'missing' if record is None else 'of another message'}: the state "
                f"is damaged; rebuild it from the events topic into a fresh app id"
            )
        acks += record.acks
        letters += record.dead_letters
        changes += record.changes
    return OutboxRecord.model_construct(
        message_digest=first.message_digest, acks=acks, dead_letters=letters, changes=changes
    )


def forget_rows_upto(tx: StateTransaction, topic: str, partition: int, offset: int) -> None:
    """Forget the outbox row at `offset`, `OUTBOX_DEPTH` positions behind the message taken in;
    where none is kept (no message was delivered there: a transaction's commit marker, an
    aborted event), every older row of the partition too, whose own position that far ahead
    may be such a one (a third of a transactional topic's rows stayed for ever)."""
    row = pack(OUTBOX, topic, partition, offset)
    if tx.get(row) is not None:
        forget_row(tx, row)
        return
    # The scan starts where the last such pruning ended (from the first row, each walked the
    # partition's deleted rows: 5 ms a message), or at the first row when the partition's
    # offsets were read again from further back. It deletes each row before its parts, and
    # what a crash left of the row at `offset` (its parts, past it).
    pruned = pack(OUTBOX_PRUNED, topic, partition)
    below = int.from_bytes(tx.get(pruned) or b"", "big")
    prefix, end = pack(OUTBOX, topic, partition), pack(OUTBOX, topic, partition, offset + 1)
    start = prefix + pack(below if below <= offset else 0)
    kept = (key for key, _ in tx.scan(prefix, start=start))
    for key in list(takewhile(lambda key: key < end, kept)):
        tx.delete(key)
    tx.put(pruned, (offset + 1).to_bytes(8, "big"))


def forget_row(tx: StateTransaction, row: bytes) -> None:
    """Delete the outbox row kept at `row`, every part of it: the first first (a state without
    it reads none of the others), then the others from the last, so a crash in between leaves
    those from the second on, which the message taken in again (`produce_once` forgets before
    it keeps) finds and deletes. Parts of an attempt a crash cut short, past those the row
    says, go with them. One read (of a key mostly absent) for a row kept whole."""
    tx.delete(row)
    parts = 1
    while tx.get(part_key(row, parts)) is not None:
        parts += 1
    for part in reversed(range(1, parts)):
        tx.delete(part_key(row, part))


_MESSAGE_BYTES = frozenset({"key_base64", "value_base64"})
KEPT_BYTES = "kept_bytes"
"""In an outbox row's dead letter of a message over the size limit: how many of its bytes the
dead letter carried."""


def bounded_reason(reason: str) -> str:
    """`reason`, or its start and its whole length: at most `MOST_REASON_CHARS` characters."""
    if len(reason) <= MOST_REASON_CHARS:
        return reason
    tail = f"... ({len(reason)} characters in all)"
    return reason[: MOST_REASON_CHARS - len(tail)] + tail


def with_refusals_bounded(acks: list[Ack], record_bytes: int) -> list[Ack]:
    """The acks of one message, listing the judgements the rules made in their order while
    they fit: at most `MOST_REFUSALS_LISTED` an ack, and in all (as JSON, a comma each)
    `REFUSALS_SHARE_OF_RECORD` of `record_bytes`, the most one record may be. Each ack counts
    those it leaves out in `more_refused_judgements`; all are recorded with the state and on
    the judgements topic (`projections.judgements`). `acks` themselves when none lists any."""
    if not any(ack.refused_judgements for ack in acks):
        return acks
    room = int(record_bytes * REFUSALS_SHARE_OF_RECORD)
    bounded = []
    for ack in acks:
        listed = 0
        for refused in ack.refused_judgements[:MOST_REFUSALS_LISTED]:
            cost = len(_REFUSED_JSON(refused)) + 1
            if cost > room:
                room = 0  # the next ones come after it: none is listed past one left out
                break
            room -= cost
            listed += 1
        left_out = len(ack.refused_judgements) - listed
        if left_out:
            more = ack.more_refused_judgements + left_out
            listing = ack.refused_judgements[:listed]
            ack = ack.model_copy(
                update={"refused_judgements": listing, "more_refused_judgements": more}
            )
        bounded.append(ack)
    return bounded


def kept_key(key: bytes | None) -> bytes | None:
    """A message's key as its dead letter and its acks naming no world carry it: whole, or its
    first `MOST_KEY_BYTES_KEPT` bytes."""
    return None if key is None else key[:MOST_KEY_BYTES_KEPT]


def _key_fields(key: bytes | None) -> dict[str, Any]:
    """A dead letter's fields of the message's key: the key it keeps in base64, and the whole
    length of a key it keeps only the start of."""
    kept = kept_key(key)
    return {
        "key_base64": None if kept is None else base64.b64encode(kept).decode(),
        "key_bytes": None if key is None or kept == key else len(key),
    }


def without_bytes(stored: dict[str, Any]) -> dict[str, Any]:
    """A dead letter (its JSON fields) as the outbox keeps it: without the message's key and
    value, which a redelivery brings again (its digest says they are the very same bytes). Kept,
    they made a rejected message's bytes state: up to `OUTBOX_DEPTH` of them a partition, each
    up to the size limit (a third more in base64), in the changelog too, and left there after a
    deletion of their world."""
    kept = {name: value for name, value in stored.items() if name not in _MESSAGE_BYTES}
    if stored.get("value_bytes") is not None and "value_base64" in stored:
        kept[KEPT_BYTES] = len(base64.b64decode(stored["value_base64"]))
    return kept


def kept_in_outbox(letter: dict[str, Any], message: SourceMessage) -> dict[str, Any]:
    """A dead letter (its JSON fields) as the outbox keeps it: `without_bytes` when they are
    the message's, which a redelivery brings again; whole when they are not (a waiting event
    refused as the message released it: the redelivery finds it gone from the buffer)."""
    kept = without_bytes(letter)
    brought = with_bytes(kept, message)
    return kept if all(brought[name] == letter[name] for name in _MESSAGE_BYTES) else letter


def forget_letters_of(tx: StateTransaction, scope: tuple[str, ...]) -> None:
    """Take out of the outbox the dead letters of the worlds under `scope` ((tenant,) or
    (tenant, world)) that hold their events' bytes (`kept_in_outbox`: a waiting event refused
    as a later message released it; a row of a release that kept every dead letter's bytes),
    and the changes of those worlds a row of a release that kept changes holds (their memories'
    words: a redelivery sent them to the feed again, after the world's `world-deleted`): a
    world's deletion leaves no event of it in the state, nor in its changelog. Each record of
    a row keeps its place and its part count (a crash between two leaves a row that reads
    whole), and a redelivery of the message re-sends its acks and its other dead letters and
    changes. One scan of the outbox, a record decoded only where it holds bytes or changes: a
    deletion's cost."""
    rewritten = []
    for key, raw in tx.scan(pack(OUTBOX)):
        if b'"value_base64"' not in raw and b'"changes"' not in raw:
            continue
        record = OutboxRecord.from_bytes(raw)
        letters = [letter for letter in record.dead_letters if not _of_scope(letter, scope)]
        changes = [change for change in record.changes if not _names_scope(change, scope)]
        if len(letters) < len(record.dead_letters) or len(changes) < len(record.changes):
            kept = record.encode(record.message_digest, record.acks, letters, changes, record.parts)
            rewritten.append((key, kept))
    for key, kept in rewritten:
        tx.put(key, kept)


def _of_scope(letter: dict[str, Any], scope: tuple[str, ...]) -> bool:
    """Whether an outbox row's dead letter holds the bytes of an event of a world under
    `scope`."""
    return "value_base64" in letter and _names_scope(letter, scope)


def _names_scope(item: dict[str, Any], scope: tuple[str, ...]) -> bool:
    """Whether a dead letter or change names a world under `scope`."""
    return (item.get("tenant_id"), item.get("world_instance_id"))[: len(scope)] == scope


def with_bytes(stored: dict[str, Any], message: SourceMessage) -> dict[str, Any]:
    """An outbox row's dead letter with the redelivered message's bytes put back as they were
    sent the first time; a row of a release that kept the bytes has them already."""
    if "value_base64" in stored:
        return stored
    kept = stored.get(KEPT_BYTES)
    value = message.value if kept is None else message.value[:kept]
    return stored | _key_fields(message.key) | {"value_base64": base64.b64encode(value).decode()}


Output = TypeVar("Output", bound=Contract)


def stored_as(model: type[Output], stored: dict[str, Any]) -> Output:
    """An ack or dead letter read back from the outbox. It may have been stored by another
    release: a field this one does not know is dropped, and a reason longer than this one's
    bound is cut (and `produce_once` bounds the refused judgements the acks list), so a
    redelivery re-sends what this release would send."""
    known = {name: value for name, value in stored.items() if name in model.model_fields}
    if isinstance(reason := known.get("reason"), str):
        known["reason"] = bounded_reason(reason)
    return model.model_validate(known, strict=False)


def world_key(value: bytes) -> bytes | None:
    """The key an event is published with: its world id, as `rumourmill publish` keys it (None
    for a message that names no world)."""
    world = identity_of(value)["world_instance_id"]
    return None if world is None else str(world).encode()


def refuse(message: SourceMessage, reason: str, kept_bytes: int | None = None) -> Intake:
    """Dead-letter a message that cannot be taken in, with a `rejected` ack naming what it can
    (`dead_letter`, keeping at most `kept_bytes` of its value); the reason of both is bounded."""
    # read once: a large message takes a while
    identity = identity_of(message.value, within_limit=kept_bytes is None)
    letter = dead_letter(message, reason, kept_bytes, identity)
    return Intake(
        acks=[Ack(outcome=Outcome.REJECTED, reason=letter.reason, **identity)],
        dead_letters=[letter],
    )


def dead_letter(
    message: SourceMessage,
    reason: str,
    kept_bytes: int | None = None,
    identity: dict[str, Any] | None = None,
) -> DeadLetter:
    """The message, key and value in base64, with why it was not taken in (a bounded reason):
    the whole value, or its first `kept_bytes` and its whole length (a message over the size
    limit, whose whole bytes in base64 could be too large for the dead-letter topic); the key
    whole, or its first `MOST_KEY_BYTES_KEPT` bytes and its whole length. `identity`: the
    message's `identity_of`, where read already."""
    identity = identity_of(message.value) if identity is None else identity
    value = message.value
    cut = kept_bytes is not None and len(value) > kept_bytes
    return DeadLetter(
        reason=bounded_reason(reason),
        topic=message.topic,
        partition=message.partition,
        offset=message.offset,
        **_key_fields(message.key),
        value_base64=base64.b64encode(value[:kept_bytes] if cut else value).decode(),
        tenant_id=identity["tenant_id"],
        world_instance_id=identity["world_instance_id"],
        value_bytes=len(value) if cut else None,
    )


SEQ = TypeAdapter(Seq, config=ConfigDict(strict=True))
"""A seq as the contract reads one: `3` and `3.0` alike, never `true` or `"3"`."""


MOST_LENIENT_BYTES = 256 * 1024
"""The largest message whose identity is read past what breaks the contract (`_readable`)
whatever the limit on a message's size: beyond, only one within the limit is (read so, a
megabyte of small arrays took 0.1 s of the partition's time, and an oversized message is no
bounded size)."""


def identity_of(value: bytes, *, within_limit: bool = False) -> dict[str, Any]:
    """The identity fields a message names correctly, even when the rest of it is broken
    (read past what breaks it up to `MOST_LENIENT_BYTES`, or whatever its size `within_limit`,
    `RUMOURMILL_MAX_EVENT_BYTES`)."""
    identity: dict[str, Any] = dict.fromkeys(
        ("tenant_id", "world_instance_id", "timeline_id", "seq")
    )
    lenient = within_limit or len(value) <= MOST_LENIENT_BYTES
    document = _readable(value) if lenient else _document(value)
    if not isinstance(document, dict):
        return identity
    for name in ("world_instance_id", "timeline_id", "tenant_id"):
        candidate = document.get(name)
        if isinstance(candidate, str) and _encodable(candidate) and _nameable(candidate):
            identity[name] = candidate
    with suppress(ValidationError):
        identity["seq"] = SEQ.validate_python(document.get("seq"))
    if identity["world_instance_id"] is not None and "tenant_id" not in document:
        identity["tenant_id"] = "default"  # the contract's, for a message naming none
    return identity


def _document(value: bytes, constant: Callable[[str], Any] = float) -> Any:
    """The JSON a message holds, None if none: NaN and Infinity too, which the event parser
    reads (and refuses where they stand) and orjson does not (an event refused for a NaN in
    its payload was acked naming no world, timeline or seq); `constant` is given each."""
    try:
        return orjson.loads(value)
    except orjson.JSONDecodeError:
        pass
    try:
        return json.loads(value, parse_constant=constant)
    except (ValueError, RecursionError):  # not JSON, not UTF-8, or nested past the stack
        return None


_LONG_NUMBER = re.compile(rb"(?<!\d)\d{4301}")
"""More digits than Python reads as an integer (its `int_max_str_digits`, 4300), looked for
from the start of each run of digits only (from every digit, a run was read again and again:
0.8 s for a message of 4,300-digit numbers)."""


def _readable(value: bytes) -> Any:
    """`_document`, or the JSON read past what breaks the contract elsewhere in the message:
    bytes that are not UTF-8 (a Latin-1 `é` in a line), raw control characters in a string,
    an integer of more digits than Python reads. Each made a message naming its world,
    timeline and seq correctly acked naming none. An id holding such bytes names none still
    (read as lone surrogates: not UTF-8 text)."""
    document = _document(value)
    if document is not None:
        return document
    # an integer read by a Python function is a call each: only for a message that needs it
    integers = _any_int if _LONG_NUMBER.search(value) else None
    try:
        text = value.decode(errors="surrogateescape")
        return json.loads(text, parse_constant=float, parse_int=integers, strict=False)
    except (ValueError, RecursionError):
        return None


def _any_int(digits: str) -> int | float:
    """An integer however many digits it has: past what Python reads, an infinity of its sign
    (no seq is so large: refused as one all the same)."""
    try:
        return int(digits)
    except ValueError:
        return float("-inf") if digits.startswith("-") else float("inf")


NAMEABLE_ID: TypeAdapter[str] = TypeAdapter(NameableId)
"""A tenant, world, timeline or entity id as an event may carry it."""


def _nameable(text: str) -> bool:
    """Whether an event may carry `text` as an id (`.` and `..` name none: an ack or dead
    letter of a message naming `.` named it, and was keyed by it)."""
    try:
        NAMEABLE_ID.validate_python(text)
    except ValidationError:
        return False
    return True


def _encodable(text: str) -> bool:
    """Whether `text` is UTF-8 text (a lone surrogate, `\\ud800`, is read by `json` alone)."""
    try:
        text.encode()
    except UnicodeEncodeError:
        return False
    return True


UTF8_BOM = b"\xef\xbb\xbf"


def invalid_because(value: bytes, error: ValidationError) -> str:
    """Why a message is no event: `explain`, but for NaN and Infinity, which the event parser
    reads and then refuses with a range error that names neither, and for a byte order mark
    before the JSON, which it refuses "at line 1 column 1", where nothing shows."""
    if value.startswith(UTF8_BOM):
        return (
            "not valid JSON: it starts with a UTF-8 byte order mark (EF BB BF, which editors "
            "save as 'UTF-8 with BOM'): send the JSON without it"
        )
    constants: list[str] = []

    def noted(constant: str) -> float:
        constants.append(constant)
        return float(constant)

    if _document(value, noted) is not None and constants:  # parsed whole, NaN and all
        return f"not valid JSON: {constants[0]} is no JSON number (RFC 8259): send null or a string"
    return explain(error)


def explain(error: ValidationError, what: str = "invalid event") -> str:
    """A validation error in one plain line: what is wrong, and where; the first
    `MOST_PROBLEMS_LISTED` problems, then how many more (an event may hold thousands)."""
    items = error.errors(include_url=False, include_input=False)
    problems: list[str] = []
    for item in items:
        if item["type"] == "json_invalid":
            problem = item["msg"].removeprefix("Invalid JSON: ")
            if problem.startswith("recursion limit exceeded"):  # valid JSON, too deep to read
                deep = f"arrays and objects nest over {MOST_NESTED} levels deep"
                return f"not read: {deep} ({problem})"
            if problem.startswith("number out of range"):  # valid JSON, thousands of digits
                return f"not read: a number too long to read, far out of range ({problem})"
            return " ".join(f"not valid JSON: {problem}".split())
        if len(problems) < MOST_PROBLEMS_LISTED:
            where = ".".join(str(part) for part in item["loc"]) or "message"
            if len(where) > MOST_QUOTED_CHARS:  # a field name of the payload may be any length
                where = f"{where[:MOST_QUOTED_CHARS]}... ({len(where)} characters)"
            problems.append(f"{where}: {plainly(item)}")
    if len(items) > MOST_PROBLEMS_LISTED:
        problems.append(f"and {len(items) - MOST_PROBLEMS_LISTED} more")
    return " ".join(f"{what}: {'; '.join(problems)}".split())  # one line, whatever names it quotes


def plainly(problem: ErrorDetails) -> str:
    """What is wrong, in words rather than the pattern it failed, where pydantic's are a
    pattern."""
    if problem.get("ctx", {}).get("pattern") == NAMEABLE_ID_PATTERN:
        return "'.' and '..' are no ids: a URL cannot name them"
    return problem["msg"]
