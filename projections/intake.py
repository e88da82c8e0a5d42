"""Intake: from one raw message to the event it carries, its acks and its dead letters.

Bad input is never lost and never stops the stream: a message too large, undecodable or
invalid is refused with a plain reason (`projections.delivery` dead-letters it whole), and an
event the sequencer rejects is dead-lettered too. So is an event not keyed by its world id:
the broker put it on a partition chosen by another key (or none), where reads of its world
never look. A valid event goes to the sequencer, which applies it in order; a waiting event it
refuses as the event releases it (stored by a release before, it no longer reads as one) is
dead-lettered with its own bytes, at the position of the message that released it. A
redelivered message gives the acks and dead letters it gave the first time, and no changes
(`projections.delivery`).
"""

from __future__ import annotations

from dataclasses import replace

from pydantic import ValidationError

from projections.changes import MessageChanges
from projections.deletion import delete, deleted_since, is_deletion
from projections.delivery import (
    MOST_QUOTED_CHARS,
    MOST_RECORD_BYTES,
    NAMEABLE_ID,
    Intake,
    SourceMessage,
    dead_letter,
    invalid_because,
    plainly,
    produce_once,
    refuse,
)
from projections.dialogue import with_real_time
from projections.event_keys import TENANT_DELETED
from projections.policy import PolicyLookup
from projections.sequencing import ApplyEvent, forget_taken_out, sequence
from projections.state import StateTransaction
from schemas import Event, Outcome

DEFAULT_MAX_EVENT_BYTES = 256 * 1024


def receive(
    tx: StateTransaction,
    message: SourceMessage,
    apply: ApplyEvent,
    policies: PolicyLookup,
    max_event_bytes: int = DEFAULT_MAX_EVENT_BYTES,
    changes: MessageChanges | None = None,
    record_bytes: int = MOST_RECORD_BYTES,
) -> Intake:
    """Take one message in and say what to publish for it; with `changes` (which `apply`
    tells of the events it applies), also what it changed, kept and re-sent like its acks. Its
    acks list the refused judgements that fit records of `record_bytes` (`produce_once`). A
    redelivery re-sent from the outbox deletes what a crash just after the row left of the
    message in the deferral buffer (`forget_taken_out`), unless its world was deleted since:
    what waits then is the world begun anew's."""

    def produce() -> Intake:
        intake = _take_in(tx, message, apply, policies, max_event_bytes, changes)
        if changes is None:
            return intake
        return Intake(  # not `dataclasses.replace`: it costs more than the rest of this
            acks=intake.acks,
            dead_letters=intake.dead_letters,
            changes=changes.records,
            forgotten_judgements=intake.forgotten_judgements,
            deleted_worlds=intake.deleted_worlds,
            deleted_after_outbox=intake.deleted_after_outbox,
        )

    intake = produce_once(tx, message, produce, record_bytes)
    if intake.redelivered and intake.acks:
        own = intake.acks[0]  # names the message's world, which a deletion since leaves alone
        tenant, world = own.tenant_id, own.world_instance_id
        if (
            tenant is not None
            and world is not None
            and not deleted_since(tx, tenant, world, message.offset)
        ):
            forget_taken_out(tx, intake.acks)
    return intake


def _take_in(
    tx: StateTransaction,
    message: SourceMessage,
    apply: ApplyEvent,
    policies: PolicyLookup,
    max_event_bytes: int,
    changes: MessageChanges | None,
) -> Intake:
    oversized = too_large(message.value, max_event_bytes)
    if oversized is not None:
        return refuse(message, oversized, kept_bytes=max_event_bytes)
    try:
        event = Event.model_validate_json(message.value)
    except ValidationError as error:
        return refuse(message, invalid_because(message.value, error))
    misrouted = misrouted_because(message.key, event.world_instance_id)
    if misrouted is None and event.key != TENANT_DELETED:  # a tenant's goes to every partition
        misrouted = off_home_because(message)
    if misrouted is not None:
        return refuse(message, misrouted)
    if is_deletion(event):
        if changes is None:
            return delete(tx, event, message.offset)
        return changes.deleting(tx, event, message.offset)
    policy = policies(event.tenant_id, event.world_instance_id)
    event, raw = with_real_time(event, message.value, message.timestamp_ms)
    acks, refused, taken_out = sequence(tx, event, raw, apply, policy.sequencing)
    if acks[0].outcome is Outcome.REJECTED:
        return Intake(acks=acks, dead_letters=[dead_letter(message, acks[0].reason or "rejected")])
    # waiting events it released, refused: their bytes at this message's position
    letters = [dead_letter(replace(message, value=waited.raw), waited.reason) for waited in refused]
    return Intake(acks=acks, dead_letters=letters, deleted_after_outbox=taken_out)


def misrouted_because(key: bytes | None, world_id: str) -> str | None:
    """Why a message keyed `key` cannot carry an event of `world_id`; None if it can."""
    if key is None:
        return f"message has no key: an event must be keyed by its world_instance_id {world_id!r}"
    if key != world_id.encode():
        shown = key[:MOST_QUOTED_CHARS].decode("utf-8", errors="backslashreplace")
        longer = f"... ({len(key)} bytes)" if len(key) > MOST_QUOTED_CHARS else ""
        return (
            f"message key {shown!r}{longer} is not the event's world_instance_id {world_id!r}: "
            "an event must be keyed by its world"
        )
    return None


def off_home_because(message: SourceMessage) -> str | None:
    """Why a message is on a partition other than its key's (`SourceMessage.home_partition`),
    or None: applied there, its world's reads never saw it, nor its deletion took it away."""
    home = message.home_partition
    if home is None or message.partition == home:
        return None
    return (
        f"message is on partition {message.partition} of {message.topic}, and its key belongs"
        f" on partition {home}, where its world is read: Kafka's default partitioner (murmur2)"
        " places it there; a producer on librdkafka (C, C++, Go, .NET, Python's"
        " confluent-kafka) must set partitioner=murmur2_random"
    )


def too_large(value: bytes, max_event_bytes: int) -> str | None:
    """Why a message is refused for its size (`rumourmill publish` refuses it as the worker
    does), or None."""
    if len(value) > max_event_bytes:
        return f"message is {len(value)} bytes, over the limit of {max_event_bytes}"
    return None


def id_problem(value: str) -> str | None:
    """Why no event could carry `value` as its tenant, world, timeline or entity id, in words;
    None if one can. For an id named apart from any event (an API key's tenant, a policy's
    world), which would otherwise govern or serve nothing, for ever."""
    try:
        NAMEABLE_ID.validate_python(value)
    except ValidationError as error:
        return plainly(error.errors(include_url=False)[0])
    return None
