"""The policies topic as every worker sees it: all documents, kept current, in memory.

Like a Faust global table (every worker holds every entry), but read with a plain consumer:
the topic is small, compacted and has one partition. The agent waits until the reader has
caught up with the topic's end, so policies set before a worker starts are in force for the
first event it applies.

Every document is checked on its way in, by `rumourmill policy set` and again here: one
written past the command (by another producer) is refused with its reason in the log, and the
last valid document under its key stays in force.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

import orjson
from aiokafka import AIOKafkaConsumer, TopicPartition
from pydantic import ValidationError

from projections.delivery import explain
from projections.policy import DEFAULT_POLICY, is_policy_key, policy_key, resolve
from schemas.policy import Policy, merge_policy
from streams.codec import key_given_twice
from streams.kafka_clients import kafka_options
from streams.logs import logger
from streams.settings import Settings

log = logger("policies")


class InvalidPolicy(ValueError):
    """A policy document that cannot be in force; the message says why."""


def check_policy_document(raw: bytes) -> dict[str, Any]:
    """The document in `raw`, if it is a (partial) policy; raises `InvalidPolicy` if not."""
    return _policy_of(raw)[0]


def _policy_of(raw: bytes) -> tuple[dict[str, Any], Policy]:
    """The (partial) policy document in `raw` and the policy it makes over the defaults;
    raises `InvalidPolicy` if it is none."""
    try:
        document = orjson.loads(raw)
    except orjson.JSONDecodeError as error:
        if str(error).startswith("depth limit exceeded"):  # orjson's, past 1,024 levels
            raise InvalidPolicy(TOO_DEEP) from None
        raise InvalidPolicy(f"not valid JSON: {error}") from None
    if not isinstance(document, dict):
        raise InvalidPolicy("a policy is a JSON object")
    if _nested_deeper_than(document, MOST_NESTED):
        raise InvalidPolicy(TOO_DEEP)
    if (twice := key_given_twice(raw)) is not None:
        raise InvalidPolicy(f"{twice!r} is given twice in one object: give each key once")
    try:
        return document, merge_policy(DEFAULT_POLICY, document)
    except ValidationError as error:
        raise InvalidPolicy(explain(error, "invalid policy")) from None


MOST_NESTED = 16
"""The deepest nesting of arrays and objects a policy document may have (its fields go four
deep): a document nested hundreds deep stopped the worker's policy follower with a recursion
error, where it is to be refused and logged."""
TOO_DEEP = f"nested deeper than {MOST_NESTED} levels, which no policy field is"


def _nested_deeper_than(document: object, levels: int) -> bool:
    """Whether arrays and objects in `document` nest deeper than `levels` (walked without
    recursion)."""
    frontier: list[Any] = [document]
    depth = 0
    while frontier:
        depth += 1
        if depth > levels:
            return True
        frontier = [
            inner
            for value in frontier
            for inner in (value.values() if isinstance(value, dict) else value)
            if isinstance(inner, dict | list)
        ]
    return False


def conflict_reason(conflict: ValidationError) -> str:
    """Why a world's document and its tenant's cannot lie over the defaults together."""
    return explain(conflict, "conflicting policies")


def log_conflict(tenant_id: str, world_id: str, conflict: ValidationError) -> None:
    """A world's policy document conflicts with its tenant's (`PolicyBook`): say which, why,
    and what governs the world meanwhile."""
    reason = conflict_reason(conflict)
    log.error(
        "the policy of world %s (tenant %s) conflicts with its tenant's default: %s;"
        " the tenant's default governs the world until either document changes",
        world_id,
        tenant_id,
        reason,
        extra={"tenant_id": tenant_id, "world_instance_id": world_id, "reason": reason},
    )


class PolicyFeed:
    """Valid policy documents by key (see `projections.policy.policy_key`)."""

    def __init__(self, settings: Settings, topic: str) -> None:
        self.settings = settings
        self.topic = topic
        self.documents: dict[bytes, bytes] = {}
        self.caught_up = asyncio.Event()
        self.choosing_model: set[bytes] = set()
        """The keys of the documents that choose model weighing."""

    def get(self, key: bytes, /) -> bytes | None:
        return self.documents.get(key)

    @property
    def model_weighing(self) -> bool:
        """Whether some world may be in model mode: a document in force chooses it (one of a
        world may choose rules again over its tenant's, so this is an upper bound)."""
        return bool(self.choosing_model)

    def take(self, key: bytes, value: bytes | None) -> None:
        """Keep one record: a tombstone removes a document, an invalid one is refused, and so
        is one under a key `policy_key` never makes (written by another producer, it would
        govern nothing, without a word)."""
        if not is_policy_key(key):
            log.error(
                "refused the policy under %s: its key is not [TENANT, WORLD] or [TENANT, null]"
                " as JSON, each id of 1 to 128 characters (`rumourmill policy set` writes it)",
                key.decode(errors="replace"),
                extra={"policy_key": key.decode(errors="replace"), "reason": "not a policy key"},
            )
            return
        if value is None:
            self.documents.pop(key, None)
            self.choosing_model.discard(key)
            return
        try:
            _, policy = _policy_of(value)
        except InvalidPolicy as refusal:
            kept = "keeping the last valid one" if key in self.documents else "none was set before"
            log.error(
                "refused the policy under %s: %s; %s",
                key.decode(errors="replace"),
                refusal,
                kept,
                extra={"policy_key": key.decode(errors="replace"), "reason": str(refusal)},
            )
            return
        self.documents[key] = value
        if policy.memory.weighing == "model":
            self.choosing_model.add(key)
        else:
            self.choosing_model.discard(key)

    async def follow(self) -> None:
        """Read the topic from its start, forever, keeping each record (`take`)."""
        consumer = AIOKafkaConsumer(
            **kafka_options(self.settings), group_id=None, enable_auto_commit=False
        )
        await consumer.start()
        try:
            partitions = [
                TopicPartition(self.topic, number)
                for number in sorted(consumer.partitions_for_topic(self.topic) or {0})
            ]
            consumer.assign(partitions)
            await consumer.seek_to_beginning(*partitions)
            ends = await consumer.end_offsets(partitions)
            while True:
                batch = await consumer.getmany(timeout_ms=1000)
                for records in batch.values():
                    for record in records:
                        if record.key is not None:
                            self.take(record.key, record.value)
                if not self.caught_up.is_set():
                    positions = {tp: await consumer.position(tp) for tp in partitions}
                    if all(positions[tp] >= ends[tp] for tp in partitions):
                        log.info("policies caught up: %d document(s)", len(self.documents))
                        self.caught_up.set()
        finally:
            await consumer.stop()


class PoliciesUnread(Exception):
    """The policies topic was not read to its end in time."""


@contextlib.asynccontextmanager
async def caught_up(settings: Settings, topic: str, timeout: float) -> AsyncIterator[PolicyFeed]:
    """The policies topic read to its end, and followed until the block ends; raises
    `PoliciesUnread` if its end is not reached within `timeout` seconds."""
    policies = PolicyFeed(settings, topic)
    following = asyncio.ensure_future(policies.follow())
    try:
        try:
            await asyncio.wait_for(asyncio.shield(policies.caught_up.wait()), timeout)
        except TimeoutError:
            raise PoliciesUnread(
                f"the policies topic {topic!r} was not read within {timeout:.0f} s"
            ) from None
        yield policies
    finally:
        following.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await following


def conflicts(
    documents: PolicyFeed, tenant_id: str, world_id: str | None, document: dict[str, Any]
) -> list[str]:
    """Why setting `document` for the world (None: as the tenant's default) would leave worlds
    governed by their tenant's policy instead (`PolicyBook`): one line per world whose document
    and tenant's would break a rule between fields together; none when it fits."""
    if world_id is not None:
        tenant = documents.get(policy_key(tenant_id, None))
        pairs = [(world_id, None if tenant is None else orjson.loads(tenant), document)]
    else:
        pairs = [
            (world, document, orjson.loads(raw))
            for key, raw in documents.documents.items()
            for tenant, world in [orjson.loads(key)]
            if tenant == tenant_id and world is not None
        ]
    found = []
    for world, tenant_document, world_document in pairs:
        try:
            resolve(tenant_document, world_document)
        except ValidationError as conflict:
            found.append(f"world {world!r}: {conflict_reason(conflict)}")
    return found
