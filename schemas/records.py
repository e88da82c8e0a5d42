"""The records rumourmill keeps: what the projections store, one model per record kind.

Records are written with orjson and read back without re-validation (they were valid when
written), so loading stays cheap on the hot path.
"""

from __future__ import annotations

from typing import Any, Self, cast

import orjson
from pydantic import BaseModel, ConfigDict, Field

from schemas.events import Identifier


class Record(BaseModel):
    """Base of stored records: immutable, serialised with orjson."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    def to_bytes(self) -> bytes:
        """The stored form."""
        return orjson.dumps(self.model_dump(mode="json"))

    @classmethod
    def from_bytes(cls, data: bytes) -> Self:
        """Read back a stored record (trusted: no re-validation)."""
        fields: dict[str, Any] = orjson.loads(data)
        return cast(Self, cls.model_construct(**fields))


class TimelineRecord(Record):
    """A timeline's place in its world and its positions.

    `processed_seq` is the highest seq applied; `acknowledged_seq` the highest received. A
    branch starts both at its `after_seq`: the child's numbering continues the parent's.
    """

    tenant_id: Identifier
    world_instance_id: Identifier
    timeline_id: Identifier
    parent_timeline_id: Identifier | None = None
    after_seq: int = 0
    acknowledged_seq: int = 0
    processed_seq: int = 0
    applied_events: int = 0
    deferred_events: int = 0
    waiting_for_parent: bool = False

    @classmethod
    def from_bytes(cls, data: bytes) -> Self:
        """Read back in pydantic's core: for a record this flat (read once an event), cheaper
        than `model_construct` in Python."""
        return cls.model_validate_json(data)

    def to_bytes(self) -> bytes:
        """Its fields as they are (ids, numbers, a flag: JSON already), in declaration order:
        the bytes `Record.to_bytes` writes, without a pydantic pass (once an event)."""
        return orjson.dumps(self.__dict__)

    @property
    def started(self) -> bool:
        """Whether anything was ever applied or attached (a branch point counts)."""
        return self.processed_seq > 0 or self.parent_timeline_id is not None


class OutboxRecord(Record):
    """What one source message produced, kept so a redelivery re-sends it instead."""

    message_digest: str
    acks: list[dict[str, Any]] = Field(default_factory=list)
    dead_letters: list[dict[str, Any]] = Field(default_factory=list)
    changes: list[dict[str, Any]] = Field(default_factory=list)
    """Its change feed messages (`schemas.changes`), in records of the releases that kept them
    (this one stores them on the feed before the record leaves: `projections.delivery`)."""
    parts: int = 1
    """How many records keep the row: this one, the first, and the others after it under keys
    of their own, each holding the acks, dead letters and changes that follow on
    (`projections.delivery.outbox_parts`); left out of a row kept whole."""

    def to_bytes(self) -> bytes:
        return self.encode(
            self.message_digest, self.acks, self.dead_letters, self.changes, self.parts
        )

    @staticmethod
    def encode(
        message_digest: str,
        acks: list[dict[str, Any]],
        dead_letters: list[dict[str, Any]],
        changes: list[dict[str, Any]] | None = None,
        parts: int = 1,
    ) -> bytes:
        """The stored form of the record of these fields, without making the record (once
        per message: `model_construct` alone costs more than the encoding). Every field holds
        JSON-ready data already: written as it is. Without changes (this release keeps none)
        and kept whole, the very bytes of the releases before the change feed."""
        fields: dict[str, Any] = {
            "message_digest": message_digest,
            "acks": acks,
            "dead_letters": dead_letters,
        }
        if changes:
            fields["changes"] = changes
        if parts > 1:
            fields["parts"] = parts
        return orjson.dumps(fields)
