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
(`without_bytes`), which a redelivery brings again.
"""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

import orjson

from projections.key_prefixes import OUTBOX
from projections.keys import pack
from projections.state import StateTransaction
from schemas import Ack, DeadLetter, Outcome
from schemas.changes import ChangeRecords, as_records
from schemas.events import Contract
from schemas.records import OutboxRecord

_ACK_FIELDS = Ack.__pydantic_serializer__.to_python
"""`Ack.model_dump`, without its Python wrapper (an ack or more per message)."""
OUTBOX_DEPTH = 100_000
"""How many source positions back a redelivery is still recognised, per partition."""


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


def produce_once(
    tx: StateTransaction, message: SourceMessage, produce: Callable[[], Intake]
) -> Intake:
    """What `message` produces: worked out by `produce` the first time, and read back from the
    outbox when the same message comes again at the same source position."""
    digest = hashlib.blake2b(
        (message.key or b"") + b"\x00" + message.value, digest_size=16
    ).hexdigest()
    key = pack(OUTBOX, message.topic, message.partition, message.offset)
    stored = tx.get(key)
    if stored is not None:
        outbox = OutboxRecord.from_bytes(stored)
        if outbox.message_digest == digest:
            return Intake(
                acks=[stored_as(Ack, item) for item in outbox.acks],
                dead_letters=[
                    stored_as(DeadLetter, with_bytes(item, message)) for item in outbox.dead_letters
                ],
                redelivered=True,
                changes=as_records(outbox.changes),
            )
    intake = produce()
    tx.put(
        key,
        OutboxRecord.encode(
            digest,
            [_ACK_FIELDS(item, mode="json") for item in intake.acks],
            [without_bytes(item.model_dump(mode="json")) for item in intake.dead_letters],
        ),
    )
    if message.offset >= OUTBOX_DEPTH:
        tx.delete(pack(OUTBOX, message.topic, message.partition, message.offset - OUTBOX_DEPTH))
    return intake


_MESSAGE_BYTES = frozenset({"key_base64", "value_base64"})
KEPT_BYTES = "kept_bytes"
"""In an outbox row's dead letter of a message over the size limit: how many of its bytes the
dead letter carried."""


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


def with_bytes(stored: dict[str, Any], message: SourceMessage) -> dict[str, Any]:
    """An outbox row's dead letter with the redelivered message's bytes put back as they were
    sent the first time; a row of a release that kept the bytes has them already."""
    if "value_base64" in stored:
        return stored
    kept = stored.get(KEPT_BYTES)
    value = message.value if kept is None else message.value[:kept]
    return stored | {
        "key_base64": None if message.key is None else base64.b64encode(message.key).decode(),
        "value_base64": base64.b64encode(value).decode(),
    }


Output = TypeVar("Output", bound=Contract)


def stored_as(model: type[Output], stored: dict[str, Any]) -> Output:
    """An ack or dead letter read back from the outbox. It may have been stored by another
    release: a field this one does not know is dropped, so a redelivery re-sends what this release
    would send."""
    known = {name: value for name, value in stored.items() if name in model.model_fields}
    return model.model_validate(known, strict=False)


def world_key(value: bytes) -> bytes | None:
    """The key an event is published with: its world id, as `rumourmill publish` keys it (None
    for a message that names no world)."""
    world = identity_of(value)["world_instance_id"]
    return None if world is None else str(world).encode()


def refuse(message: SourceMessage, reason: str, kept_bytes: int | None = None) -> Intake:
    """Dead-letter a message that cannot be taken in, with a `rejected` ack naming what it can
    (`dead_letter`, keeping at most `kept_bytes` of its value)."""
    identity = identity_of(message.value)
    return Intake(
        acks=[Ack(outcome=Outcome.REJECTED, reason=reason, **identity)],
        dead_letters=[dead_letter(message, reason, kept_bytes)],
    )


def dead_letter(message: SourceMessage, reason: str, kept_bytes: int | None = None) -> DeadLetter:
    """The message, key and value in base64, with why it was not taken in: the whole value, or
    its first `kept_bytes` and its whole length (a message over the size limit, whose whole
    bytes in base64 could be too large for the dead-letter topic)."""
    identity = identity_of(message.value)
    value = message.value
    cut = kept_bytes is not None and len(value) > kept_bytes
    return DeadLetter(
        reason=reason,
        topic=message.topic,
        partition=message.partition,
        offset=message.offset,
        key_base64=None if message.key is None else base64.b64encode(message.key).decode(),
        value_base64=base64.b64encode(value[:kept_bytes] if cut else value).decode(),
        tenant_id=identity["tenant_id"],
        world_instance_id=identity["world_instance_id"],
        value_bytes=len(value) if cut else None,
    )


def identity_of(value: bytes) -> dict[str, Any]:
    """The identity fields a message names correctly, even when the rest of it is broken."""
    identity: dict[str, Any] = dict.fromkeys(
        ("tenant_id", "world_instance_id", "timeline_id", "seq")
    )
    try:
        document = orjson.loads(value)
    except orjson.JSONDecodeError:
        return identity
    if not isinstance(document, dict):
        return identity
    for name in ("world_instance_id", "timeline_id", "tenant_id"):
        candidate = document.get(name)
        if isinstance(candidate, str) and 1 <= len(candidate) <= 128:
            identity[name] = candidate
    seq = document.get("seq")
    if isinstance(seq, int) and not isinstance(seq, bool) and 1 <= seq < 2**63:
        identity["seq"] = seq
    if identity["world_instance_id"] is not None and identity["tenant_id"] is None:
        identity["tenant_id"] = "default"
    return identity
