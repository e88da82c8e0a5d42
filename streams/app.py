"""The Faust app: topics, the state table and the agent that feeds the projector.

Everything domain-shaped happens in `projections.Projector`; this module only moves bytes
between Kafka and it. At-least-once with one in-flight message per partition (concurrency=1,
faust-streaming #606); redelivery is harmless because the projector recognises it.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Iterable, Mapping, Set
from dataclasses import dataclass, field
from functools import cached_property, lru_cache
from typing import Any, Protocol, cast

import faust
import orjson
from aiokafka.partitioner import murmur2
from faust.exceptions import ConsumerNotStarted, SameNode
from faust.tables.manager import TableManager
from faust.types import TP, EventT, Message, RecordMetadata, TableT, TopicT
from faust.web import Request, Response, Web
from faust.web.exceptions import ServiceUnavailable
from rocksdict import Rdict, WriteBatch
from yarl import URL

from projections.delivery import SourceMessage
from projections.judgements import RecordedAnswers
from projections.key_prefixes import STATE_FORMAT
from projections.keys import KeyPart, pack
from projections.migrations import StateFormatError, current_format, stored_format, upgrade
from projections.policy import PolicyBook
from projections.projector import Projector
from schemas import Ack, DeadLetter
from schemas.changes import Change
from schemas.policy import Policy
from streams import codec, kafka_consumer
from streams.change_feed import ChangeFeedSender
from streams.durability import LocalDurability
from streams.embedding import WordLlamaEmbedder
from streams.embedding_agent import embedding_agent
from streams.judging import Judge, JudgementLog, topic_reader
from streams.logs import logger
from streams.metrics import Metrics
from streams.model_client import ModelClient
from streams.policies import PolicyFeed
from streams.recall_index import SqliteRecallIndex
from streams.settings import Settings
from streams.state import (
    Changes,
    RocksTransaction,
    chunked,
    decode_changes,
    encode_changes,
    recording_transaction,
    state_options,
    without_write_ahead_log,
)
from streams.web import Readiness, register_views

log = logger("worker")
STATE_TABLE = "state"
Delivery = Awaitable[RecordMetadata]
"""A message handed to the producer; it resolves once Kafka has stored it."""
CHANGESET_BYTES = 512 * 1024
"""Changelog messages stay well under Kafka's default 1 MiB limit; a larger event is split."""
RECOVERY_LOG_SECONDS = 5.0
"""How often recovery reports its progress."""
SESSION_TIMEOUT_SECONDS = 10.0
"""A crashed worker's partitions move to the others after this long without a heartbeat."""
CHECKPOINT_TICK = 0.5
"""How often the worker looks for partitions to checkpoint (`LocalDurability.checkpoint_due`)."""


class ChangesetTable(faust.Table[bytes, bytes]):
    """The state table: its changelog carries one message per event with all its writes.

    An event's writes reach the changelog together (and their count does not slow the
    worker down); recovery lays each message's writes into the partition's RocksDB at once.
    """

    recovered: Counter[int]
    """Changelog messages laid into each partition since recovery last finished."""
    reported_at: float
    """When recovery last reported its progress (`time.monotonic`)."""
    durability: LocalDurability | None
    """Closes the local copies cleanly at a stop (set by `create_app`)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.recovered = Counter()
        self.reported_at = 0.0
        self.durability = None

    async def on_stop(self) -> None:
        """Runs once every event is acked and before Faust lets go of the databases."""
        if self.durability is not None:
            await self.durability.finish()
        await super().on_stop()

    def apply_changelog_batch(self, batch: Iterable[EventT[bytes]]) -> None:
        offsets: dict[TP, int] = {}
        for event in batch:
            message = event.message
            db = without_write_ahead_log(partition_db(self, message.partition))
            writes = WriteBatch(raw_mode=True)
            for key, value in decode_changes(message.value or b""):
                if value is None:
                    writes.delete(key)
                else:
                    writes.put(key, value)
            db.write(writes)
            offsets[message.tp] = max(message.offset, offsets.get(message.tp, -1))
            self.recovered[message.partition] += 1
        for tp, offset in offsets.items():
            self.data.set_persisted_offset(tp, offset)
        if time.monotonic() - self.reported_at >= RECOVERY_LOG_SECONDS:
            self.reported_at = time.monotonic()
            log.info(
                "recovering state: %d changeset(s) laid so far",
                self.recovered.total(),
                extra={"changesets_by_partition": dict(self.recovered)},
            )

    async def on_recovery_completed(self, active_tps: set[TP], standby_tps: set[TP]) -> None:
        await super().on_recovery_completed(active_tps, standby_tps)
        partitions = sorted(tp.partition for tp in active_tps)
        log.info(
            "state recovered: %d changeset(s) laid; serving partitions %s",
            self.recovered.total(),
            partitions,
            extra={"changesets_by_partition": dict(self.recovered), "partitions": partitions},
        )
        self.recovered.clear()
        await self.upgrade_formats(partitions)

    async def upgrade_formats(self, partitions: Iterable[int]) -> None:
        """Take each recovered partition to this release's state format before any event
        (`projections.migrations`); its rewrites reach the changelog as one event's do. A
        partition written by a newer release stops the worker, unchanged."""
        assert self.durability is not None
        for partition in partitions:
            tx, changes = recording_transaction(
                without_write_ahead_log(partition_db(self, partition))
            )
            if stored_format(tx) == current_format():
                continue
            try:
                async with self.durability.writing(partition):
                    done = upgrade(tx)
                    deliveries = await send_changes(
                        self, partition, changes, (STATE_FORMAT, partition, time.time_ns())
                    )
                    self.durability.sent(partition, deliveries)
                await asyncio.gather(*deliveries)
            except StateFormatError as refusal:
                log.critical("partition %d: %s", partition, refusal, extra={"partition": partition})
                await self.app.crash(refusal)
                return
            log.info("partition %d: %s", partition, done, extra={"partition": partition})


@dataclass(frozen=True)
class Rumourmill:
    """The app and the handles the agent, the web views (`streams.web.WorldReads`) need."""

    app: faust.App
    settings: Settings
    state: TableT[bytes, bytes]
    acks: TopicT
    deadletters: TopicT
    policies: PolicyFeed
    projector: Projector
    durability: LocalDurability
    judge: Judge
    metrics: Metrics = field(default_factory=Metrics)
    crashing: set[asyncio.Future[None]] = field(default_factory=set)
    recall_index: SqliteRecallIndex = field(default_factory=SqliteRecallIndex)
    """Derived local state for recall, caught up from the projections as it is searched."""
    changes: str = ""
    """The change feed's topic; empty when the feed is off."""

    async def judged(self, message: Message) -> RecordedAnswers | None:
        """The model judgements `message` raises, answered and stored on the judgements topic
        (`streams.judging`); None when it raises none (rules mode, a redelivery...)."""
        tx = RocksTransaction(partition_db(self.state, message.partition), _read_only)
        return await self.judge.message(self.projector, tx, source_message(message))

    async def take(
        self, message: Message, answers: RecordedAnswers | None = None
    ) -> list[Delivery]:
        """Project one message (with the model's `answers` to what it raises) and send
        everything it produced; returns the pending deliveries.

        The state changes go to the changelog as one message (split only past
        `CHANGESET_BYTES`), then the acks and dead letters. All go straight to the producer,
        not through Faust's send buffer, whose flush gives up after 0.1 s.
        """
        started = time.perf_counter()
        db = without_write_ahead_log(partition_db(self.state, message.partition))
        tx, changes = recording_transaction(db)
        intake = self.projector.receive(tx, source_message(message), answers)
        if answers is not None:
            self.judge.log.applied(message.partition, answers.positions)
        deliveries = await send_changes(
            self.state,
            message.partition,
            changes,
            (message.topic, message.partition, message.offset),
        )
        self.durability.sent(message.partition, deliveries)
        deliveries += [
            await self.acks.send(key=_world_key(ack, message.key), value=ack, force=True)
            for ack in intake.acks
        ]
        if intake.changes:
            deliveries += await self.send_changes_of(intake.changes)
        for letter in intake.dead_letters:
            log.warning(
                "dead letter %s[%d]@%d: %s",
                letter.topic,
                letter.partition,
                letter.offset,
                letter.reason,
                extra=letter.model_dump(
                    include={"topic", "partition", "offset", "reason", "world_instance_id"}
                ),
            )
            deliveries.append(
                await self.deadletters.send(key=message.key, value=letter, force=True)
            )
        self.metrics.sent(intake.acks, intake.dead_letters)
        self.metrics.processing.observe(time.perf_counter() - started)
        return deliveries

    @cached_property
    def change_feed(self) -> ChangeFeedSender:
        """The change feed's batches (`streams.change_feed`), on the worker's producer."""
        producer = self.app.producer
        return ChangeFeedSender(producer._ensure_producer, self.changes)  # type: ignore[attr-defined]

    async def send_changes_of(self, changes: list[Change]) -> list[Delivery]:
        """A message's changes on the change feed, one record each keyed by its world, on the
        world's partition (the feed has the events topic's partitions)."""
        by_world: dict[str, list[bytes]] = {}
        for change in changes:
            by_world.setdefault(change["world_instance_id"], []).append(orjson.dumps(change))
        deliveries: list[Delivery] = []
        for world, records in by_world.items():
            key = world.encode()
            partition = world_partition(key, self.settings.partitions)
            deliveries += await self.change_feed.send(partition, key, records)
        return deliveries

    async def crash(self, error: BaseException, cause: str) -> None:
        """Stop the worker: nothing more is committed, the uncommitted events come again."""
        log.critical("stopping the worker: %s: %s", cause, error, exc_info=error)
        await self.app.crash(error)

    def crash_soon(self, error: BaseException) -> None:
        """`crash` from a callback (a delivery to Kafka that failed)."""
        crash = asyncio.ensure_future(self.crash(error, "a delivery to Kafka failed"))
        self.crashing.add(crash)
        crash.add_done_callback(self.crashing.discard)

    @property
    def tenants_by_api_key(self) -> Mapping[str, str]:
        return self.settings.api_keys

    @property
    def model(self) -> ModelClient | None:
        return self.judge.client

    def policy_of(self, tenant_id: str, world_id: str) -> Policy:
        return self.projector.policies(tenant_id, world_id)

    def readiness(self) -> Readiness:
        """Ready once the state of this worker's partitions is recovered and policies caught up."""
        recovered = cast(TableManager, self.app.tables).recovery.completed.is_set()
        waiting_for = (
            *(() if recovered and not self.app.rebalancing else ("state recovery",)),
            *(() if self.policies.caught_up.is_set() else ("policies",)),
        )
        return Readiness(waiting_for, self.app.rebalancing_count)

    def read_transaction(self, world_id: str) -> RocksTransaction:
        """Read-only state access for the partition that holds `world_id`."""
        partition = partition_of(world_id.encode(), self.settings.partitions)
        return RocksTransaction(partition_db(self.state, partition), _read_only)

    async def owner_answer(self, world_id: str, web: Web, request: Request) -> Response | None:
        """Forward a read to the worker that owns `world_id`; None when that is this one."""
        try:
            if request.method == "POST":
                return await self._forward_posted(world_id, web, request)
            answer: Response = await self.app.router.route_req(
                self.state.name, world_id, web, request
            )
        except SameNode:
            return None
        return answer

    async def _forward_posted(self, world_id: str, web: Web, request: Request) -> Response:
        """Faust's `route_req` for a request with a body (Faust forwards none): the reply check
        goes to the owner with its reply."""
        try:
            owner = self.app.router.key_store(self.state.name, world_id)
        except KeyError:
            raise ServiceUnavailable() from None
        here = URL(self.app.conf.canonical_url)
        if (owner.host, owner.port or 80) == (here.host, here.port or 80):
            raise SameNode()
        routed = request.url.with_host(owner.host or "").with_port(owner.port)
        body = await cast(Any, request).read()  # aiohttp keeps the body it read
        async with self.app.http_client.request(
            method="POST", headers=request.headers, url=routed, data=body
        ) as response:
            return web.text(
                await response.text(), content_type=response.content_type, status=response.status
            )


def create_app(settings: Settings) -> Rumourmill:
    """Build the worker's Faust app from settings (no I/O until it starts)."""
    app = faust.App(
        settings.app_id,
        broker=[f"{kafka_consumer.SCHEME}://{address}" for address in settings.broker],
        store="rocksdb://",
        datadir=str(settings.data_dir),
        web_host=settings.web_host,
        web_bind=settings.web_host,
        web_port=settings.web_port,
        canonical_url=settings.canonical_url,
        topic_partitions=settings.partitions,
        topic_replication_factor=settings.replication,
        processing_guarantee="at_least_once",
        value_serializer=codec.CODEC_NAME,
        key_serializer="raw",
        autodiscover=False,
        table_standby_replicas=settings.standbys,
        Table=ChangesetTable,
        broker_session_timeout=SESSION_TIMEOUT_SECONDS,
        broker_heartbeat_interval=2.0,
    )
    topic_options: dict[str, Any] = {
        "partitions": settings.partitions,
        "key_type": bytes,
        "key_serializer": "raw",
    }
    events = app.topic(
        settings.topics.events, value_type=bytes, value_serializer="raw", **topic_options
    )
    acks = app.topic(settings.topics.acks, **topic_options)
    deadletters = app.topic(settings.topics.deadletter, **topic_options)
    state = cast(
        ChangesetTable,
        app.Table(
            STATE_TABLE,
            key_type=bytes,
            value_type=bytes,  # bytes in, bytes out: Faust picks the raw codec for bytes
            partitions=settings.partitions,
            options=state_options(settings.block_cache_mb),
        ),
    )
    state.durability = LocalDurability(state, settings.bootstrap)
    policies = PolicyFeed(settings.bootstrap, settings.topics.policies)
    metrics = Metrics(lambda: consumer_lag(app, settings.topics.events))
    projector = Projector(
        policies=PolicyBook(policies),
        max_event_bytes=settings.max_event_bytes,
        on_formed=metrics.formed,
        changes=bool(settings.topics.changes),
    )
    judgements = app.topic(
        settings.topics.judgements, value_type=bytes, value_serializer="raw", **topic_options
    )

    async def keep_judgements(partition: int, key: bytes, value: bytes) -> None:
        await (await judgements.send(key=key, value=value, partition=partition, force=True))

    judge = Judge(
        ModelClient.configured(settings),
        JudgementLog(topic_reader(settings.bootstrap, settings.topics.judgements), keep_judgements),
    )
    mill = Rumourmill(
        app,
        settings,
        state,
        acks,
        deadletters,
        policies,
        projector,
        state.durability,
        judge,
        metrics=metrics,
        changes=settings.topics.changes,
    )
    register_views(app, mill)
    app.agent(acks, name="embed-memories", concurrency=1)(embedding_agent(mill, WordLlamaEmbedder))

    @app.on_partitions_assigned.connect
    def forget_moved_worlds(sender: Any, /, *args: Any, signal: Any, **_: Any) -> None:
        """Faust sends the whole new assignment (a set of TPs) after every rebalance."""
        keep_assigned_worlds(mill.recall_index, args[0], settings)
        judge.log.keep_partitions(
            {tp.partition for tp in args[0] if tp.topic == settings.topics.events}
        )

    @app.task  # type: ignore[untyped-decorator]
    async def follow_policies() -> None:
        await policies.follow()

    @app.timer(CHECKPOINT_TICK)  # type: ignore[untyped-decorator]
    async def checkpoint_partitions() -> None:
        await mill.durability.checkpoint_due()

    @app.agent(events, concurrency=1)
    async def ingest(stream: faust.StreamT[bytes]) -> None:
        event: EventT[bytes]
        await policies.caught_up.wait()
        unacked: faust.Stream[bytes] = stream.noack()  # type: ignore[attr-defined]
        async for event in unacked.events():
            try:
                answers = await mill.judged(event.message)  # the model, before the writing
                async with mill.durability.writing(event.message.partition):
                    deliveries = await mill.take(event.message, answers)
            except Exception as error:  # a bug, not bad input: stop rather than skip the event
                message = event.message
                await mill.crash(
                    error, f"projecting {message.topic}[{message.partition}]@{message.offset}"
                )
                raise
            ack_when_delivered(event, deliveries, mill.crash_soon)

    return mill


def keep_assigned_worlds(index: SqliteRecallIndex, assigned: Set[TP], settings: Settings) -> None:
    """Drop from the recall index the worlds whose partition of the events topic is no longer
    assigned here (a rebalance moved it): the new owner indexes them, and this worker would
    otherwise hold them, stale, for as long as it runs."""
    held = {tp.partition for tp in assigned if tp.topic == settings.topics.events}
    for tenant, world in list(index.worlds()):
        if partition_of(world.encode(), settings.partitions) not in held:
            index.drop_world(tenant, world)


class Ackable(Protocol):
    """What `ack_when_delivered` acks: a Faust event."""

    def ack(self) -> bool: ...


def ack_when_delivered(
    event: Ackable, deliveries: list[Delivery], on_failure: Callable[[BaseException], None]
) -> None:
    """Let Faust commit past `event` only once Kafka has confirmed all it produced.

    Faust would ack an event as soon as the agent moves on, also when processing raised or
    was cancelled, and its commit flushes the producer without checking that the sends
    succeeded: any of these could commit past an event whose changes were never stored.
    Acked here instead, an event is committed only once its changes, acks and dead letters
    are in Kafka; a failed or cancelled send calls `on_failure` (the worker stops, and the
    event comes again).
    """

    def delivered(outcome: asyncio.Future[list[RecordMetadata]]) -> None:
        if outcome.cancelled():
            on_failure(asyncio.CancelledError("a delivery to Kafka was cancelled"))
        elif (failure := outcome.exception()) is not None:
            on_failure(failure)  # a delivery that failed or was cancelled
        else:
            event.ack()

    asyncio.gather(*deliveries).add_done_callback(delivered)


def consumer_lag(app: faust.App, topic: str) -> dict[int, int]:
    """Per assigned partition of `topic`: its highwater (the log end the consumer last saw)
    minus the committed offset (0 before any commit); partitions not yet fetched are left out."""
    consumer = app.consumer
    try:
        assigned = consumer.assignment()
    except ConsumerNotStarted:
        return {}
    lag = {}
    for tp in assigned:
        highwater = consumer.highwater(tp) if tp.topic == topic else None
        if highwater is not None:
            committed = cast(Mapping[TP, int | None], consumer._committed_offset).get(tp)  # type: ignore[attr-defined]
            lag[tp.partition] = max(highwater - (committed or 0), 0)
    return lag


async def send_changes(
    table: TableT[bytes, bytes], partition: int, changes: Changes, source: tuple[KeyPart, ...]
) -> list[Delivery]:
    """Send a partition's writes to the state changelog: one message per run of at most
    `CHANGESET_BYTES`, keyed by what made them (`source`) and the run's number."""
    return [
        await table.changelog_topic.send(
            key=pack(*source, number),
            value=encode_changes(run),
            partition=partition,
            force=True,
        )
        for number, run in enumerate(chunked(changes, CHANGESET_BYTES))
    ]


def partition_db(table: TableT[bytes, bytes], partition: int) -> Rdict:
    """The RocksDB holding one partition of the state table (Faust opens it on first use)."""
    db: Rdict = table.data._db_for_partition(partition)  # type: ignore[attr-defined]
    return db


def partition_of(key: bytes, partitions: int) -> int:
    """The partition Kafka's default partitioner gives `key` (murmur2, as producers use)."""
    hashed: int = murmur2(key)
    return (hashed & 0x7FFFFFFF) % partitions


world_partition = lru_cache(maxsize=1 << 12)(partition_of)
"""`partition_of` for the worlds of this worker, worked out once each."""


def _read_only(key: bytes, value: bytes | None) -> None:
    raise PermissionError("reads never write state")


def _world_key(item: Ack | DeadLetter, fallback: bytes | None) -> bytes | None:
    """Key outputs by world, like the events, so a world's acks stay in order."""
    world = item.world_instance_id
    return fallback if world is None else world.encode()


def source_message(message: Message) -> SourceMessage:
    """A Kafka message as the projector takes it."""
    return SourceMessage(
        topic=message.topic,
        partition=message.partition,
        offset=message.offset,
        key=message.key,
        value=message.value or b"",
        timestamp_ms=record_timestamp_ms(message.timestamp),
    )


def record_timestamp_ms(timestamp: float | None) -> int | None:
    """A Kafka record's timestamp (seconds, as Faust gives it) in whole milliseconds."""
    return None if timestamp is None or timestamp < 0 else round(timestamp * 1000)
