"""What rumourmill answers for every message: an ack, and for bad input a dead letter."""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated

from pydantic import Field

from schemas.events import AsInteger, Contract, Identifier
from schemas.judgements import RefusedJudgement


class Outcome(StrEnum):
    """What became of one event."""

    PROCESSED = "processed"
    DEFERRED = "deferred"
    DUPLICATE = "duplicate"
    REJECTED = "rejected"


class Ack(Contract):
    """One message on `rumourmill.acks` per event received (keyed by world).

    Identity fields are null only for a message too broken to name them. The positions are the
    timeline's right after this outcome. In model mode, `refused_judgements` lists the
    judgements of the event that fell back to rules: each, or the first that fit (at most 100,
    and those of all the acks of one message in half of `RUMOURMILL_CHANGELOG_BATCH_BYTES`) and
    how many more (`more_refused_judgements`); the judgements topic records every one.
    """

    tenant_id: str | None
    world_instance_id: str | None
    timeline_id: str | None
    seq: Annotated[int, AsInteger] | None
    outcome: Outcome
    reason: str | None = None
    acknowledged_seq: Annotated[int, Field(ge=0), AsInteger] | None = None
    processed_seq: Annotated[int, Field(ge=0), AsInteger] | None = None
    refused_judgements: list[RefusedJudgement] = Field(
        default_factory=list, exclude_if=lambda refused: not refused
    )
    """Judgements the model did not make for this event (the rules made them), with why; left
    out when there are none."""
    more_refused_judgements: Annotated[int, Field(ge=0), AsInteger] = Field(
        default=0, exclude_if=lambda more: not more
    )
    """How many judgements the rules made beyond those `refused_judgements` lists (an event
    perceived by thousands of characters raises a judgement each, and an ack lists at most 100);
    left out when it lists them all."""


class DeadLetter(Contract):
    """A message that could not be taken in, kept on `rumourmill.deadletter`: whole, or, for a
    message over the size limit, its first limit's worth of bytes and its whole length
    (`value_bytes`), and for a key over 1,024 bytes its start and its whole length
    (`key_bytes`), so that its dead letter fits on the topic; the message itself stays at
    `topic`, `partition`, `offset` for the topic's retention."""

    reason: str
    topic: str
    partition: Annotated[int, Field(ge=0), AsInteger]
    offset: Annotated[int, Field(ge=0), AsInteger]
    key_base64: str | None
    value_base64: str
    tenant_id: Identifier | None = None
    world_instance_id: Identifier | None = None
    value_bytes: Annotated[int, Field(ge=0), AsInteger] | None = Field(
        default=None, exclude_if=lambda size: size is None
    )
    """The message's whole length when `value_base64` holds only its start; left out when it
    holds the whole message."""
    key_bytes: Annotated[int, Field(ge=0), AsInteger] | None = Field(
        default=None, exclude_if=lambda size: size is None
    )
    """The key's whole length when `key_base64` holds only its start; left out when it holds
    the whole key."""
