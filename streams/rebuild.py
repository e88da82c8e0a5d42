"""Rebuild: every projection folded again from the events topic, into a fresh app id.

The rebuild does not run a worker. It reads the events topic itself, start to end, through the
same `Projector` the worker uses, and leaves behind exactly what a worker of the fresh app id
would have made: each partition's RocksDB in the fresh data dir (stamped as a clean stop
stamps it, `streams.durability`), the same per-key records in the fresh app id's changelog topic,
and the fresh consumer group committed at the end of the events it read. A worker started with
that app id and data dir keeps the local copies, recovers nothing, and goes on from there.

`--world W` folds only W's events (and its tenant's deletions): a check of one world, whose
result is kept apart the same way but holds that world only.
"""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import time
from collections.abc import AsyncIterator, Callable, Iterable, Iterator
from dataclasses import dataclass, field
from http import HTTPStatus

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient
from aiokafka.errors import KafkaError, OffsetOutOfRangeError, for_code
from aiokafka.structs import ConsumerRecord, RecordMetadata
from faust.types import TP
from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    ProgressColumn,
    Task,
    TextColumn,
)
from rich.text import Text
from rocksdict import Rdict

from projections.deletion import deletes_tenant, world_acked
from projections.delivery import Intake, SourceMessage, identity_of
from projections.digest import world_digest
from projections.judgements import NO_MODEL
from projections.migrations import upgrade
from projections.policy import PolicyBook
from projections.projector import Projector
from schemas.judgements import EventJudgements
from streams.app import (
    SESSION_TIMEOUT_SECONDS,
    Rumourmill,
    create_app,
    home_partition,
    partition_db,
)
from streams.changelog import ChangelogWriter, PartitionWrites
from streams.durability import Stamp, read_changelog
from streams.judging import Judge, JudgementLog, Send, topic_reader
from streams.kafka_clients import kafka_options
from streams.model_client import ModelClient
from streams.outputs import Delivery, Outputs, outputs_named
from streams.partitioning import partition_of
from streams.policies import PoliciesUnread, PolicyFeed, caught_up, log_conflict
from streams.settings import Settings
from streams.show import ReadFailed, fetch
from streams.state import (
    RocksTransaction,
    first_missing,
    recording_transaction,
    refuse_writes,
    unwritable_because,
    without_write_ahead_log,
)
from streams.tokens import wordllama_tokens
from streams.topics import (
    RETENTION,
    TopicsUnfit,
    changelog_topic,
    check_partitions,
    create_topics,
    kafka_trouble,
    new_changelog,
    partition_counts,
    retention_warning,
    topic_settings,
)

POLICIES_TIMEOUT = 60.0
"""How long the rebuild waits to have read the policies topic to its end."""
BATCH_EVENTS = 200
"""Events whose writes go to the changelog together, per partition."""
PENDING_SENDS = 2_000
"""Changelog sends in flight before the rebuild waits for Kafka to confirm them."""
OWED_PAUSE_SECONDS = 10.0
"""How long a rebuild beside stopped workers waits, once it said what it will send for them,
before it folds (`outputs_owed`): an operator who sees an app id of before a switch (which owes
every event since) stops it in time."""
STALL_SECONDS = 60.0
"""How long the rebuild waits for more events while some partition is short of its end: with
the broker gone, the consumer fetches nothing and raises nothing, and the progress bar would
stand still for ever."""

World = tuple[str, str]
"""(tenant_id, world_instance_id)"""
Advance = Callable[[int], None]
"""Told how many offsets of the events topic were read since it was last told (its events,
and the markers of a transactional producer's commits, which take offsets too)."""


class RebuildFailed(Exception):
    """Why the rebuild cannot go on, in one line for the operator."""


@dataclass
class Rebuilt:
    """What a rebuild made: events folded, the worlds seen and each one's digest."""

    events: int = 0
    seconds: float = 0.0
    digests: dict[World, str] = field(default_factory=dict)
    folded: dict[int, tuple[int, int]] = field(default_factory=dict)
    """Per partition of the events topic, the offsets folded: (first, end)."""
    changelog_topic: str = ""
    expired: int = 0
    """Events the topic no longer holds (its retention removed them): they were not folded."""


class NotCompared(Exception):
    """The live worker would not show this world to the API key: why, as it answered."""


def fresh_app_id(live: Settings) -> str:
    """The default target: the live app id with the time of the rebuild."""
    return f"{live.app_id}-rebuild-{time.strftime('%Y%m%d%H%M%S', time.gmtime())}"


async def events_to_fold(
    live: Settings, world: str | None, warn: Callable[[str], None] = lambda line: None
) -> dict[int, tuple[int, int]]:
    """Per partition of the events topic to read: (first offset, end offset) as of now. A
    retention that deletes events is told to `warn`: the rebuild may start mid-history.

    Raises `RebuildFailed` when the topic is missing or has another partition count.
    """
    topic = live.topics.events
    partitions = await partitions_of(live, topic, warn)
    if not partitions:
        raise RebuildFailed(f"topic {topic!r} does not exist on {live.bootstrap}")
    with unfit_as_failure():
        check_partitions({topic: len(partitions)}, live)
    if world is not None:
        partitions = [partition_of(world.encode(), live.partitions)]
    wanted = [TopicPartition(topic, number) for number in partitions]
    consumer = AIOKafkaConsumer(  # its ends what the fold reads up to: what transactions
        **kafka_options(live),  # committed (one still open kept them short of the log's end)
        enable_auto_commit=False,
        isolation_level="read_committed",
    )
    await consumer.start()
    try:
        first = await consumer.beginning_offsets(wanted)
        end = await consumer.end_offsets(wanted)
    finally:
        await consumer.stop()
    return {tp.partition: (first[tp], end[tp]) for tp in wanted}


async def partitions_of(settings: Settings, topic: str, warn: Callable[[str], None]) -> list[int]:
    """The partition numbers of the events topic `topic` (none when it does not exist); its
    retention told to `warn` when it deletes events."""
    admin = AIOKafkaAdminClient(**kafka_options(settings))
    await admin.start()
    try:
        if topic not in set(await admin.list_topics()):
            return []
        warning = retention_warning(topic, await topic_settings(admin, topic, RETENTION))
        if warning is not None:
            warn(warning)
        return list(range((await partition_counts(admin, [topic]))[topic]))
    finally:
        await admin.close()


@contextlib.contextmanager
def kafka_as_failure(bootstrap: str) -> Iterator[None]:
    """A Kafka error of the checks before the fold, as the one line `RebuildFailed` gives."""
    try:
        yield
    except KafkaError as error:
        raise RebuildFailed(kafka_trouble(bootstrap, error)) from None


@contextlib.contextmanager
def unfit_as_failure() -> Iterator[None]:
    """Topics the rebuild cannot use (`TopicsUnfit`), as the one line `RebuildFailed` gives."""
    try:
        yield
    except TopicsUnfit as unfit:
        raise RebuildFailed(str(unfit)) from None


DIGEST_LATER = frozenset({HTTPStatus.FORBIDDEN, HTTPStatus.SERVICE_UNAVAILABLE})
"""What a live worker may answer `check_live`'s digest and still be compared with: a key of
one tenant (403 for others), or a group rebalancing (503): the health check said it is one."""
GATEWAY = frozenset(
    {HTTPStatus.BAD_GATEWAY, HTTPStatus.SERVICE_UNAVAILABLE, HTTPStatus.GATEWAY_TIMEOUT}
)
"""What a load balancer or proxy in front of the workers answers a health check with none
behind it: the workers may be stopped, as when nothing answers at all."""
KEY_CHECK_WORLD = "rebuild-key-check"
"""The world whose live digest `check_live` asks for: a world never seen digests at once, and
the answer is not used."""


def check_live(live: Settings) -> None:
    """The live worker answers its health check, and a digest to the API key the comparison
    will send, or `RebuildFailed` says why not, before anything is folded: a key missing or
    refused (401) was found at the first comparison, the whole fold thrown away. A key of one
    tenant (403 for another) compares that tenant's worlds (`live_digest`); a worker that
    cannot answer the digest yet (503, rebalancing) may by the comparison."""
    for path, query, later in (
        ("/health", {}, frozenset[int]()),
        ("/v2/admin/digest", {"world_instance_id": KEY_CHECK_WORLD}, DIGEST_LATER),
    ):
        try:
            fetch(live, path, query)
        except ReadFailed as error:  # another server than a worker answers too (404, 502...)
            if error.status not in later:
                gone = error.status is None or (path == "/health" and error.status in GATEWAY)
                stopped = " (with the workers stopped: --workers-stopped)" if gone else ""
                raise RebuildFailed(
                    f"the live worker at {live.canonical_url}: {error}{stopped}"
                ) from None


async def check_fresh(target: Settings, live: Settings) -> str:
    """The target app id holds nothing yet (no changelog records, no data dir); returns the
    Kafka cluster id."""
    if target.app_id == live.app_id:
        raise RebuildFailed(f"the app id {target.app_id!r} is the live one; name a fresh one")
    if target.data_dir.exists() and not target.data_dir.is_dir():
        raise RebuildFailed(f"the data dir {target.data_dir} is a file; name a fresh directory")
    if target.data_dir.exists() and any(target.data_dir.iterdir()):
        raise RebuildFailed(f"the data dir {target.data_dir} is not empty; name a fresh one")
    tried = target.data_dir
    made = first_missing(tried)
    why = unwritable_because(tried)  # before the topic is made
    if made is not None:  # made to be tried, not kept: each refused rebuild left one behind
        shutil.rmtree(made, ignore_errors=True)
    if why is not None:
        raise RebuildFailed(f"the data dir {tried} cannot hold the state: {why}")
    topic = changelog_topic(target)
    changelog = await read_changelog(target, topic, range(target.partitions))
    if any(changelog.end.values()):
        raise RebuildFailed(f"app id {target.app_id!r} already has state in {topic!r}")
    return changelog.cluster_id


async def check_judged(
    target: Settings, live: Settings, world: str | None, stall_seconds: float
) -> None:
    """A target without a model URL would leave the answers recorded on the judgements topic
    unread where the live worker had a model: the referee and the chronicle ask only with one
    configured, so the rules would judge what the model judged live, and the digests differ.
    `RebuildFailed` then says what to set (the model is not asked what was recorded). A topic
    holding only the rules' judgements for want of a model (a world weighing by the model on a
    worker without one) is no model's: the target makes them again alike (it was refused, and
    with a model URL set, the referee asked the model of lines the rules had judged live). A
    rebuild of one `world` looks at its records alone, on its partition."""
    if target.model_url:
        return
    topic = live.topics.judgements
    partitions: Iterable[int] = range(live.partitions)
    if world is not None:
        partitions = [partition_of(world.encode(), live.partitions)]
    offsets = await read_changelog(live, topic, partitions)
    read = topic_reader(live, topic, stall_seconds)
    for partition, end in offsets.end.items():
        if end > offsets.earliest[partition] and any(
            judged_by_model(record)
            for record in await read(partition, lambda at: world is None or at[1] == world)
        ):
            raise RebuildFailed(
                f"the live worker judged with a model ({topic!r} holds its answers): set "
                "RUMOURMILL_MODEL_URL and RUMOURMILL_MODEL_NAME as the live worker has them, so "
                "the rebuild reads those answers back; it asks the model only what was never "
                "recorded, and the model may be down"
            )


def judged_by_model(record: EventJudgements) -> bool:
    """Whether a model stood behind a record: one of its judgements is an answer, or a refusal
    for another reason than that no model is configured."""
    return any(made.answer is not None or made.reason != NO_MODEL for made in record.judgements)


def wanted(record: ConsumerRecord[bytes, bytes], world: str | None) -> bool:
    """Whether a `--world` rebuild folds this record: the world's events, and deletions of
    whole tenants (`tenant.deleted`, naming the world `*`; a world called `*` is folded only
    for `--world '*'`)."""
    value = record.value or b""
    return (
        world is None or identity_of(value)["world_instance_id"] == world or deletes_tenant(value)
    )


async def rebuild(
    live: Settings,
    target: Settings,
    world: str | None = None,
    on_total: Callable[[int], None] = lambda total: None,
    advance: Advance = lambda done: None,
    stall_seconds: float = STALL_SECONDS,
    warn: Callable[[str], None] = lambda line: None,
    workers_stopped: bool = False,
    owed_sent: Callable[[int], None] = lambda sent: None,
) -> Rebuilt:
    """Fold the events topic (as far as it reaches now) into `target`'s state and changelog;
    `warn` is told of an events topic whose retention deletes events. With the live workers
    stopped, the outputs of the events they had not committed are sent too (`Owed`), and
    `owed_sent` told how many events' so far.

    Raises `RebuildFailed` when there is nothing to fold, the target is not fresh, Kafka
    cannot be reached or fails before the fold, `world` has no event in the topic (the fresh
    changelog topic is deleted again), or Kafka fails partway (or gives no events, or nothing
    of the judgements topic read back, for `stall_seconds` while some are left): the target
    then holds part of a rebuild, which the reason says.
    """
    topic = changelog_topic(target)
    with kafka_as_failure(live.bootstrap):
        spans = await events_to_fold(live, world, warn)
        await check_judged(target, live, world, stall_seconds)
        owed_since = (
            await outputs_owed(live, spans, warn) if workers_stopped and world is None else {}
        )
    made = first_missing(target.data_dir)  # what to take away again if nothing is rebuilt
    with kafka_as_failure(target.bootstrap):
        cluster_id = await check_fresh(target, live)
        await create_changelog(target)
    on_total(sum(end - first for first, end in spans.values()))
    mill = create_app(target)
    began = time.perf_counter()
    folder: Folder | None = None
    try:
        async with (
            policies_caught_up(live) as policies,
            kafka_clients(live, target.changelog_batch_bytes) as (consumer, producer),
        ):
            folder = Folder(
                Projector(
                    policies=PolicyBook(policies, log_conflict),
                    max_event_bytes=live.max_event_bytes,
                    count=wordllama_tokens(),
                    record_bytes=target.changelog_batch_bytes,
                ),
                producer,
                topic,
                lambda partition: without_write_ahead_log(partition_db(mill.state, partition)),
                recorded_judge(target, live, producer, stall_seconds),
                target.changelog_batch_bytes,
                live.partitions,
                Owed(Outputs(lambda: producer, live), owed_since, told=owed_sent),
            )
            try:
                await folder.fold(
                    consumer, live.topics.events, spans, world, advance, stall_seconds
                )
                ends = await folder.confirmed()
            finally:
                folder.let_go()
                if folder.judge.client is not None:
                    await folder.judge.client.close()
        if world is None:
            await commit_group(live, target.app_id, spans)
    except (KafkaError, RebuildFailed) as error:
        why = (
            f"Kafka at {live.bootstrap} failed: {error}" if isinstance(error, KafkaError) else error
        )
        raise RebuildFailed(
            f"{why}; stopped after {0 if folder is None else folder.events} event(s) folded: "
            f"app id {target.app_id!r} holds part of a rebuild; rebuild into a fresh app id, "
            f"and delete this one's changelog topic {topic!r} and data dir {target.data_dir}"
        ) from None
    assert folder is not None  # the fold ran to its end
    if world is not None and not folder.worlds:
        with kafka_as_failure(target.bootstrap):
            await delete_topic(target, topic)
        close_stores(mill)  # and the data dir emptied: a retry into it was refused
        for made_here in [made] if made is not None else target.data_dir.iterdir():
            shutil.rmtree(made_here, ignore_errors=True)
        raise RebuildFailed(
            f"the events topic {live.topics.events!r} holds no event of world {world!r}: "
            "nothing rebuilt"
        )
    result = Rebuilt(folder.events, time.perf_counter() - began, changelog_topic=topic)
    result.expired = sum(first for first, _ in spans.values())
    result.folded = spans
    store = mill.state.data
    for partition, offset in ends.items():  # stamped as a clean stop stamps them
        store.set_persisted_offset(TP(topic, partition), offset)
        partition_db(mill.state, partition).flush()
        stamp = Stamp(cluster_id, offset, int(time.time() * 1000))
        mill.durability.files(partition).stamp.write_bytes(stamp.to_bytes())
    for tenant, world_id in sorted(folder.worlds):
        db = partition_db(mill.state, partition_of(world_id.encode(), target.partitions))
        tx = RocksTransaction(db, refuse_writes)
        result.digests[(tenant, world_id)] = world_digest(tx, tenant, world_id)
    close_stores(mill)
    return result


def close_stores(mill: Rumourmill) -> None:
    """Close every partition's RocksDB the rebuild opened."""
    for db in list(mill.state.data._dbs.values()):  # type: ignore[attr-defined]
        db.close()


class Folder:
    """Folds records through the projector into partition databases, sending each event's
    writes to the changelog as the worker does (`streams.app.Rumourmill.take`)."""

    def __init__(
        self,
        projector: Projector,
        producer: AIOKafkaProducer,
        changelog: str,
        database: Callable[[int], Rdict],
        judge: Judge,
        batch_bytes: int,
        partitions: int,
        owed: Owed | None = None,
    ) -> None:
        self.projector = projector
        self.producer = producer
        self.changelog = changelog
        self.database = database
        self.batch_bytes = batch_bytes
        self.partitions = partitions
        """The events topic's: an event on a partition other than its key's is refused, as the
        worker refuses it (`SourceMessage.home_partition`)."""
        self.judge = judge
        """Model judgements, as a worker of the fresh app id makes them (`streams.judging`):
        read back from the judgements topic, so the model is not asked again."""
        self.stored_judgements: set[bytes] = set()
        """The keys of the records this fold stored on the judgements topic: the only ones a
        deletion it folds tombstones there. The topic's others at a deleted world's positions
        are the live records of a world begun anew at them."""
        judge.log.send = self._noting_stored(judge.log.send)
        self.events = 0
        self.worlds: set[World] = set()
        self.pending: list[asyncio.Future[RecordMetadata]] = []
        self.ends: dict[int, int] = {}
        self.writer = ChangelogWriter()
        self.writes: dict[int, PartitionWrites] = {}
        """Per partition, the writes of the events taken since the last send."""
        self.stamped: set[int] = set()
        """The partitions whose fresh store is stamped with this release's state format."""
        self.owed = owed or Owed(None, {})

    def _noting_stored(self, send: Send) -> Send:
        """`send`, noting the key of each record it stores in `stored_judgements`."""

        async def noted(partition: int, key: bytes, value: bytes | None) -> None:
            await send(partition, key, value)
            if value is not None:
                self.stored_judgements.add(key)

        return noted

    async def fold(
        self,
        consumer: AIOKafkaConsumer,
        topic: str,
        spans: dict[int, tuple[int, int]],
        world: str | None,
        advance: Advance,
        stall_seconds: float = STALL_SECONDS,
    ) -> None:
        """Read each partition from its first offset to its end (as of the start); raises
        `RebuildFailed` when no event comes for `stall_seconds` while some are left. A partition
        is done once the consumer's position reaches its end: a transactional producer's commit
        marker takes the last offset, and no consumer is ever given it (the consumer refuses to
        jump past events retention removed meanwhile: the fold fails, as it did before)."""
        remaining = {
            TopicPartition(topic, partition): end
            for partition, (first, end) in spans.items()
            if end > first
        }
        read = {tp: spans[tp.partition][0] for tp in remaining}
        consumer.assign(list(remaining))
        for tp, first in read.items():
            consumer.seek(tp, first)
        last_fetched = time.monotonic()
        while remaining:
            try:
                batch = await consumer.getmany(*remaining, timeout_ms=1000)
            except OffsetOutOfRangeError as error:  # its position would jump past them
                raise RebuildFailed(
                    "the events topic's retention removed events the rebuild had still to read"
                    f" ({error}): keep every event (retention.ms and retention.bytes -1)"
                ) from None
            if not any(batch.values()) and time.monotonic() - last_fetched > stall_seconds:
                short = sorted(tp.partition for tp in remaining)
                raise RebuildFailed(
                    f"no events for {stall_seconds:.0f} s, partitions {short} short of their ends"
                )
            for tp, records in batch.items():
                end = remaining.get(tp)
                if end is None:
                    continue
                for record in records:
                    if record.offset < end and wanted(record, world):
                        await self.take(record)
            for tp, end in list(remaining.items()):
                reached = min(await consumer.position(tp), end)
                advance(reached - read[tp])
                read[tp] = reached
                if reached == end:
                    del remaining[tp]
            if any(batch.values()):  # from the end of their folding: it may wait on a model
                last_fetched = time.monotonic()

    async def take(self, record: ConsumerRecord[bytes, bytes]) -> None:
        db = self.database(record.partition)
        writes = self.writes.setdefault(record.partition, PartitionWrites(self.batch_bytes))
        tx = recording_transaction(db, writes.write)
        if record.partition not in self.stamped:
            # Stamped as a worker stamps an empty partition (`projections.migrations`): else
            # the worker of the fresh app id would take the store for format 1 and migrate it.
            upgrade(tx)
            self.stamped.add(record.partition)
        message = SourceMessage(
            record.topic,
            record.partition,
            record.offset,
            record.key,
            record.value or b"",
            None if record.timestamp < 0 else record.timestamp,
            home_partition(record.key, self.partitions),
        )
        answers = await self.judge.message(self.projector, tx, message)
        owed = self.owed.outputs if self.owed.of(record) else None
        intake = self.projector.receive(tx, message, answers, owed is not None and owed.feed)
        if answers is not None:
            self.judge.log.applied(record.partition, answers.positions)
        # a deletion's judgements that the fold asked for again and stored on the live topic:
        # tombstoned again, before its changelog records are sent (`send`)
        stored = [key for key in intake.forgotten_judgements if key in self.stored_judgements]
        await self.judge.log.forget(record.partition, stored)
        self.stored_judgements.difference_update(stored)
        if owed is not None:
            await self.owed.send(owed, record.key, record.partition, intake)
        self.events += 1
        for ack in intake.acks:
            if (acked := world_acked(ack, message.value)) is not None:
                self.worlds.add(acked)
        writes.end_event()
        if self.events % BATCH_EVENTS == 0:
            await self.send()
        if len(self.pending) >= PENDING_SENDS:
            await self.confirmed()

    async def send(self) -> None:
        """Send the writes taken since the last send, one record batch per partition."""
        writes, self.writes = self.writes, {}
        for partition, partition_writes in writes.items():
            self.pending += await self.writer.send(
                self.producer, self.changelog, partition, partition_writes.batches
            )

    def let_go(self) -> None:
        """Leave the changelog sends still in flight to the producer's stop: a fold stopped
        (Ctrl-C, a failure) said so in one line, then each send the stopping producer failed
        printed `Future exception was never retrieved` with its traceback."""
        for delivery in [*self.pending, *self.owed.deliveries]:
            delivery.add_done_callback(_failure_seen)

    async def confirmed(self) -> dict[int, int]:
        """Wait for every changelog send; per partition, the last changelog offset written."""
        await self.send()
        for delivered in await asyncio.gather(*self.pending):
            self.ends[delivered.partition] = max(
                delivered.offset, self.ends.get(delivered.partition, -1)
            )
        self.pending.clear()
        await self.owed.delivered()
        return self.ends


@dataclass
class Owed:
    """The outputs a rebuild beside stopped workers owes: the acks, dead letters and change
    records of the events past their committed offsets (`outputs_owed`). A worker switched to
    the rebuild's app id goes on after the events folded, and the stopped ones never took
    those in (a game waited for their acks for ever). Sent as the fold goes, each partition's
    in its events' order, the same records a worker sends (the same change ids). Running
    workers send their own: a rebuild beside them owes nothing."""

    outputs: Outputs | None
    since: dict[int, int]
    """Per partition of the events topic, the first offset owed (none: nothing owed)."""
    sent: int = 0
    """The events whose outputs were sent."""
    deliveries: list[Delivery] = field(default_factory=list)
    told: Callable[[int], None] = lambda sent: None
    """Told how many events' outputs were sent, after each (what an interrupt says)."""

    def of(self, record: ConsumerRecord[bytes, bytes]) -> bool:
        """Whether the rebuild owes `record`'s outputs."""
        since = self.since.get(record.partition)
        return since is not None and record.offset >= since

    async def send(
        self, outputs: Outputs, key: bytes | None, partition: int, intake: Intake
    ) -> None:
        """Send what one message produced, as the worker sends it: changes, acks, then dead
        letters."""
        self.deliveries += await outputs.changes(intake.changes)
        self.deliveries += await outputs.acks(intake.acks, key, partition)
        for letter in intake.dead_letters:
            self.deliveries.append(await outputs.dead_letter(key, letter))
        self.sent += 1
        self.told(self.sent)

    async def delivered(self) -> None:
        """Wait until Kafka stored every output sent so far."""
        await asyncio.gather(*self.deliveries)
        self.deliveries.clear()


async def outputs_owed(
    live: Settings, spans: dict[int, tuple[int, int]], warn: Callable[[str], None]
) -> dict[int, int]:
    """Per partition, the first offset whose outputs the rebuild owes (`Owed`): the stopped
    workers' committed offset, read again once `OWED_PAUSE_SECONDS` passed. Refused while the
    workers' group has members, before the pause and after it. A group that committed nothing
    where there are events to fold is no workers' (an app id whose offsets Kafka expired, say):
    told to `warn`, and nothing is owed, rather than an ack of every event ever published sent
    again. How many events are owed, and from where, is told to `warn` before the pause (an
    app id of before a switch owes every event since the switch: seen there, the rebuild can
    be stopped in time); none, no pause (a transaction's marker takes an offset, no event)."""
    committed = await live_committed(live, spans)
    await refuse_running(live)
    if not any(committed[partition] for partition, (first, end) in spans.items() if end > first):
        warn(
            f"the consumer group {live.app_id!r} ({live.named('app_id')}) has committed nothing on"
            " the events topic: no acks, dead letters or change records are sent for the"
            " events rebuilt"
        )
        return {}
    owed = {
        partition: (max(first, committed[partition]), end)
        for partition, (first, end) in spans.items()
        if end > max(first, committed[partition])
    }
    if (events := (await named_between(live, owed)).records if owed else 0) == 0:
        return committed
    warn(
        f"the stopped workers of {live.app_id!r} left {events} event(s) uncommitted (partition:"
        f" (from offset, to): {owed}): in {OWED_PAUSE_SECONDS:.0f} s the rebuild sends their"
        f" {outputs_named(live)} as it folds them (Ctrl-C before then sends none)"
    )
    await asyncio.sleep(OWED_PAUSE_SECONDS)
    await refuse_running(live)  # one started meanwhile sends its own
    return await live_committed(live, spans)


async def refuse_running(live: Settings) -> None:
    """`RebuildFailed` while the workers' consumer group has members (running workers, which
    send their own outputs), or cannot be described."""
    admin = AIOKafkaAdminClient(**kafka_options(live))
    await admin.start()
    try:
        [described] = await admin.describe_consumer_groups([live.app_id])
        [group] = described.to_object()["groups"]
    finally:
        await admin.close()
    if group["error_code"]:
        error = for_code(group["error_code"])
        raise RebuildFailed(
            f"the consumer group {live.app_id!r} could not be described ({error.__name__});"
            " try again"
        )
    if running := len(group["members"]):
        raise RebuildFailed(
            f"--workers-stopped, but {running} worker(s) of app id {live.app_id!r} are in its"
            " consumer group: stop them first (they send their own acks; without the flag"
            " the rebuild sends none); a worker killed stays in it for its session timeout"
            f" ({SESSION_TIMEOUT_SECONDS:.0f} s): try again then"
        )


def _failure_seen(delivery: asyncio.Future[RecordMetadata]) -> None:
    if not delivery.cancelled():
        delivery.exception()


async def create_changelog(target: Settings) -> None:
    """The fresh app id's changelog topic, configured as the worker's (`streams.changelog`)."""
    admin = AIOKafkaAdminClient(**kafka_options(target))
    await admin.start()
    try:
        if changelog_topic(target) not in set(await admin.list_topics()):
            with unfit_as_failure():
                await create_topics(admin, [new_changelog(target)])
    finally:
        await admin.close()


async def delete_topic(settings: Settings, topic: str) -> None:
    """Delete `topic`: the fresh changelog of a rebuild that made nothing."""
    admin = AIOKafkaAdminClient(**kafka_options(settings))
    await admin.start()
    try:
        await admin.delete_topics([topic])
    finally:
        await admin.close()


async def commit_group(live: Settings, group: str, spans: dict[int, tuple[int, int]]) -> None:
    """The fresh app id's consumer group starts after the events the rebuild folded."""
    consumer = AIOKafkaConsumer(**kafka_options(live), group_id=group, enable_auto_commit=False)
    await consumer.start()
    try:
        offsets = {
            TopicPartition(live.topics.events, partition): end
            for partition, (_, end) in spans.items()
        }
        consumer.assign(list(offsets))
        await consumer.commit(offsets)
    finally:
        await consumer.stop()


@contextlib.asynccontextmanager
async def policies_caught_up(live: Settings) -> AsyncIterator[PolicyFeed]:
    """The policies topic read to its end, and followed while the rebuild runs."""
    try:
        async with caught_up(live, live.topics.policies, POLICIES_TIMEOUT) as policies:
            yield policies
    except PoliciesUnread as unread:
        raise RebuildFailed(str(unread)) from None


@contextlib.asynccontextmanager
async def kafka_clients(
    live: Settings, batch_bytes: int
) -> AsyncIterator[tuple[AIOKafkaConsumer, AIOKafkaProducer]]:
    consumer = AIOKafkaConsumer(  # an offset retention removed is an error, never a jump
        **kafka_options(live),
        enable_auto_commit=False,
        fetch_max_bytes=16 * 2**20,
        auto_offset_reset="none",
        isolation_level="read_committed",  # as the worker reads: no aborted transaction's event
    )
    producer = AIOKafkaProducer(
        **kafka_options(live),
        acks="all",
        linger_ms=5,
        max_request_size=2**20,
        max_batch_size=batch_bytes,  # one record batch holds a batch of events' writes
    )
    await consumer.start()
    await producer.start()
    try:
        yield consumer, producer
    finally:
        await producer.stop()
        # aiokafka's consumer, stopped while a fetch from a broker gone is pending, raises that
        # fetch's cancellation: it would stand for the error that made the rebuild stop
        with contextlib.suppress(asyncio.CancelledError):
            await consumer.stop()


def recorded_judge(
    target: Settings, live: Settings, producer: AIOKafkaProducer, stall_seconds: float
) -> Judge:
    """The judge of a worker of `target`: the live judgements topic read back first (stopping
    once it gives nothing for `stall_seconds`), the model (if `target` configures one) asked
    only what was never recorded, and that stored."""

    async def keep(partition: int, key: bytes, value: bytes | None) -> None:
        await (await producer.send(live.topics.judgements, value, key=key, partition=partition))

    return Judge(
        ModelClient.configured(target),
        JudgementLog(topic_reader(live, live.topics.judgements, stall_seconds), keep),
    )


def live_digest(live: Settings, tenant: str, world_id: str) -> str:
    """The live worker's digest of a world. Raises `NotCompared` when the worker refuses the API
    key this world (403: a key reads its own tenant only), `RebuildFailed` when it cannot
    answer."""
    query = {"world_instance_id": world_id, "tenant_id": tenant}
    try:
        digest = fetch(live, "/v2/admin/digest", query).get("digest")
    except ReadFailed as error:
        if error.status == HTTPStatus.FORBIDDEN:
            raise NotCompared(str(error)) from None
        raise RebuildFailed(f"the live worker at {live.canonical_url}: {error}") from None
    if not isinstance(digest, str):
        raise RebuildFailed(
            f"the live worker at {live.canonical_url} answered no digest of {world_id!r}"
        )
    return digest


@dataclass
class Named:
    """The worlds some events of the events topic name, and how many each; a tenant's deletion
    names every world of its tenant."""

    worlds: dict[World, int] = field(default_factory=dict)
    tenants: set[str] = field(default_factory=set)
    """The tenants deleted (a deletion is sent to each partition: counted once)."""
    records: int = 0
    """The records read, a world's or not (a transaction's markers are none)."""

    def events_of(self, world: World) -> int:
        return self.worlds.get(world, 0) + (world[0] in self.tenants)


async def named_between(
    live: Settings, ranges: dict[int, tuple[int, int]], stall_seconds: float = STALL_SECONDS
) -> Named:
    """What the events topic's records in each partition's [start, end) name (committed ones,
    as the worker reads them; from the first the topic still holds). `RebuildFailed` when none
    come for `stall_seconds` while some are left (a broker gone: aiokafka waits for ever)."""
    named = Named()
    wanted = {
        TopicPartition(live.topics.events, partition): span
        for partition, span in ranges.items()
        if span[1] > span[0]
    }
    if not wanted:
        return named
    consumer = AIOKafkaConsumer(
        **kafka_options(live),
        enable_auto_commit=False,
        isolation_level="read_committed",
        auto_offset_reset="earliest",  # a start retention removed: from the first still held
    )
    await consumer.start()
    try:
        consumer.assign(list(wanted))
        for tp, (start, _) in wanted.items():
            consumer.seek(tp, start)
        moved = time.monotonic()
        while wanted:
            for tp, records in (await consumer.getmany(*wanted, timeout_ms=1000)).items():
                for record in records:
                    if record.offset < wanted[tp][1] and record.value is not None:
                        _count(named, record.value)
                moved = time.monotonic()
            for tp in [tp for tp, (_, end) in wanted.items() if await consumer.position(tp) >= end]:
                del wanted[tp]
            if wanted and time.monotonic() - moved > stall_seconds:
                short = sorted(tp.partition for tp in wanted)
                raise RebuildFailed(
                    f"no events for {stall_seconds:.0f} s reading partitions {short} for the"
                    " comparison"
                )
    finally:
        await consumer.stop()
    return named


def _count(named: Named, value: bytes) -> None:
    """Count the world (or the tenant, deleted whole) one event names."""
    named.records += 1
    identity = identity_of(value)
    tenant, world = identity["tenant_id"], identity["world_instance_id"]
    if world is None:  # names no world: it was refused, live and in the rebuild alike
        return
    if deletes_tenant(value):
        named.tenants.add(tenant)
    else:
        named.worlds[(tenant, world)] = named.worlds.get((tenant, world), 0) + 1


async def live_committed(live: Settings, partitions: Iterable[int]) -> dict[int, int]:
    """The live workers' committed offset on each partition of the events topic (0 where none):
    what they have processed for good. Asked as a member of their group that joins nothing
    (assigned no partition), so the live workers are not rebalanced."""
    consumer = AIOKafkaConsumer(
        **kafka_options(live), group_id=live.app_id, enable_auto_commit=False
    )
    await consumer.start()
    try:
        return {
            partition: await consumer.committed(TopicPartition(live.topics.events, partition)) or 0
            for partition in partitions
        }
    finally:
        await consumer.stop()


async def events_since(live: Settings, folded: dict[int, tuple[int, int]]) -> Named:
    """What the events published since the rebuild took its ends name: past each partition's
    end folded, up to its end now."""
    now = await events_to_fold(live, None)
    return await named_between(
        live, {partition: (end, now[partition][1]) for partition, (_, end) in folded.items()}
    )


async def events_not_processed_live(
    live: Settings,
    folded: dict[int, tuple[int, int]],
    committed: dict[int, int],
    warn: Callable[[str], None],
) -> Named:
    """What the events the rebuild folded and the live workers had not `committed`
    (`live_committed`) name. A group with no committed offset where events were folded is no
    live workers' (an app id of before a switch, say): told to `warn`, and nothing is taken for
    not processed, so a world that differs is said to (every event would seem unprocessed,
    hiding what differs)."""
    if not any(committed[partition] for partition, (first, end) in folded.items() if end > first):
        warn(
            f"the consumer group {live.app_id!r} ({live.named('app_id')}) has committed nothing on"
            " the events topic: not the live workers' app id? Worlds are compared whatever"
            " they have processed"
        )
        return Named()
    return await named_between(
        live,
        {
            partition: (max(first, committed[partition]), end)
            for partition, (first, end) in folded.items()
        },
    )


def fold_rate(task: Task) -> float | None:
    """Events per second since the fold began; None before any. Not rich's speed, measured
    between its last samples: the fold advances once per partition per fetch, thousands of
    events microseconds after the other partition's, and rich showed millions a second (and
    as little time left)."""
    elapsed = task.finished_time if task.finished else task.elapsed
    return task.completed / elapsed if elapsed and task.completed else None


class EventRate(ProgressColumn):
    """Events per second (`fold_rate`)."""

    def render(self, task: Task) -> Text:
        rate = fold_rate(task)
        return Text("" if rate is None else f"{rate:,.0f} events/s")


class TimeLeft(ProgressColumn):
    """The time the events left take at the rate so far (`fold_rate`)."""

    def render(self, task: Task) -> Text:
        rate = fold_rate(task)
        if rate is None or task.total is None:
            return Text("-:--:--")
        left = int((task.total - task.completed) / rate)
        return Text(f"{left // 3600}:{left // 60 % 60:02d}:{left % 60:02d}")


def progress_bar(console: Console) -> Progress:
    """Events done of the total, rate and time left, on `console` (stderr)."""
    return Progress(
        TextColumn("rebuilding"),
        BarColumn(),
        MofNCompleteColumn(),
        EventRate(),
        TimeLeft(),
        console=console,
        transient=False,
    )
