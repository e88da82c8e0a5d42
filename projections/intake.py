"""Intake: from one raw message to its acks and dead letters, exactly once in effect.

Bad input is never lost and never stops the stream: a message too large, undecodable or
invalid is dead-lettered whole with a plain reason, and still acked. What a message produced
is kept in an outbox under its source position, so when the broker delivers it again (after a
crash, before the offset was committed) the same acks are sent again and nothing is re-applied.
"""

from __future__ import annotations

import base64
import hashlib
from dataclasses import dataclass, field
from typing import Any

import orjson
from pydantic import ValidationError

from projections.keys import pack
from projections.policy import PolicyLookup
from projections.sequencing import ApplyEvent, sequence
from projections.state import StateTransaction
from schemas import Ack, DeadLetter, Event, Outcome
from schemas.records import OutboxRecord

OUTBOX = "outbox"
OUTBOX_DEPTH = 100_000
"""How many source positions back a redelivery is still recognised, per partition."""

DEFAULT_MAX_EVENT_BYTES = 256 * 1024


@dataclass(frozen=True, slots=True)
class SourceMessage:
    """One message as the broker (or a replayed file) delivered it."""

    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes


@dataclass(frozen=True, slots=True)
class Intake:
    """What one message produced, to be published; `redelivered` if sent before."""

    acks: list[Ack] = field(default_factory=list)
    dead_letters: list[DeadLetter] = field(default_factory=list)
    redelivered: bool = False


def receive(
    tx: StateTransaction,
    message: SourceMessage,
    apply: ApplyEvent,
    policies: PolicyLookup,
    max_event_bytes: int = DEFAULT_MAX_EVENT_BYTES,
) -> Intake:
    """Take one message in and say what to publish for it."""
    digest = hashlib.blake2b(
        (message.key or b"") + b"\x00" + message.value, digest_size=16
    ).hexdigest()
    key = pack(OUTBOX, message.topic, message.partition, message.offset)
    stored = tx.get(key)
    if stored is not None:
        outbox = OutboxRecord.from_bytes(stored)
        if outbox.message_digest == digest:
            return Intake(
                acks=[Ack.model_validate(item, strict=False) for item in outbox.acks],
                dead_letters=[
                    DeadLetter.model_validate(item, strict=False) for item in outbox.dead_letters
                ],
                redelivered=True,
            )
    intake = _take_in(tx, message, apply, policies, max_event_bytes)
    tx.put(
        key,
        OutboxRecord(
            message_digest=digest,
            acks=[item.model_dump(mode="json") for item in intake.acks],
            dead_letters=[item.model_dump(mode="json") for item in intake.dead_letters],
        ).to_bytes(),
    )
    if message.offset >= OUTBOX_DEPTH:
        tx.delete(pack(OUTBOX, message.topic, message.partition, message.offset - OUTBOX_DEPTH))
    return intake


def _take_in(
    tx: StateTransaction,
    message: SourceMessage,
    apply: ApplyEvent,
    policies: PolicyLookup,
    max_event_bytes: int,
) -> Intake:
    if len(message.value) > max_event_bytes:
        return refuse(
            message, f"message is {len(message.value)} bytes, over the limit of {max_event_bytes}"
        )
    try:
        event = Event.model_validate_json(message.value)
    except ValidationError as error:
        return refuse(message, explain(error))
    policy = policies(event.tenant_id, event.world_instance_id)
    acks = sequence(tx, event, message.value, apply, policy.sequencing)
    if acks[0].outcome is Outcome.REJECTED:
        return Intake(acks=acks, dead_letters=[_dead_letter(message, acks[0].reason or "rejected")])
    return Intake(acks=acks)


def refuse(message: SourceMessage, reason: str) -> Intake:
    """Dead-letter a message that cannot be taken in, with a `rejected` ack naming what it can."""
    identity = identity_of(message.value)
    return Intake(
        acks=[Ack(outcome=Outcome.REJECTED, reason=reason, **identity)],
        dead_letters=[_dead_letter(message, reason)],
    )


def explain(error: ValidationError, what: str = "invalid event") -> str:
    """A validation error in one plain line: what is wrong, and where."""
    problems = []
    for item in error.errors(include_url=False, include_input=False):
        if item["type"] == "json_invalid":
            return " ".join(f"not valid JSON: {item['msg'].removeprefix('Invalid JSON: ')}".split())
        where = ".".join(str(part) for part in item["loc"]) or "message"
        problems.append(f"{where}: {item['msg']}")
    return " ".join(f"{what}: {'; '.join(problems)}".split())  # one line, whatever names it quotes


def _dead_letter(message: SourceMessage, reason: str) -> DeadLetter:
    identity = identity_of(message.value)
    return DeadLetter(
        reason=reason,
        topic=message.topic,
        partition=message.partition,
        offset=message.offset,
        key_base64=None if message.key is None else base64.b64encode(message.key).decode(),
        value_base64=base64.b64encode(message.value).decode(),
        tenant_id=identity["tenant_id"],
        world_instance_id=identity["world_instance_id"],
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
