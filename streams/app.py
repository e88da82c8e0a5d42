"""The Faust app: topics, the state table and the agent that feeds the projector.

Everything domain-shaped happens in `projections.Projector`; this module only moves bytes
between Kafka and it. At-least-once: the agent (concurrency=1, faust-streaming #606) takes events
in batches and acks each, in offset order per partition, once Kafka stored all it produced;
redelivery is harmless because the projector recognises it.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence, Set
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import cached_property
from itertools import chain
from pathlib import Path
from typing import Any, Protocol, TypeVar, cast

import faust
from faust.exceptions import ConsumerNotStarted, ImproperlyConfigured
from faust.stores.rocksdb import Store as RocksDBStore
from faust.tables.manager import TableManager
from faust.transport.drivers import aiokafka as aiokafka_driver
from faust.types import TP, EventT, Message, RecordMetadata, StoreT, TableT
from faust.web import Request, Response, Web
from rocksdict import Rdict, WriteBatch
from yarl import URL

from projections import writing_systems
from projections.delivery import MOST_RECORD_BYTES, Intake, SourceMessage
from projections.judgements import RecordedAnswers
from projections.migrations import StateFormatError, current_format, stored_format, upgrade
from projections.policy import PolicyBook
from projections.projector import Projector
from projections.state import StateTransaction
from schemas import Ack
from schemas.changes import ChangeRecords
from schemas.events import MAX_ID_LENGTH
from schemas.policy import Policy
from streams import changelog, codec, forwarding, kafka_consumer
from streams.allocator import keep_large_buffers
from streams.durability import LocalDurability
from streams.embedding import WordLlamaEmbedder
from streams.embedding_agent import MemoryEmbedding, at_home
from streams.event_batches import event_batches
from streams.json_service import ClosedAtStop
from streams.judging import Judge, JudgementLog, topic_reader
from streams.kafka_clients import faust_credentials
from streams.logs import DEAD_LETTERS, logger, reason_kind
from streams.metrics import Metrics
from streams.model_client import ModelClient
from streams.outputs import Delivery, Outputs
from streams.partitioning import partition_of, world_partition
from streams.policies import PolicyFeed, log_conflict
from streams.process_stalls import ProcessStalls
from streams.progress_watch import ProgressWatch, Watching
from streams.read_cache import ReadCache
from streams.recall_index import SqliteRecallIndex
from streams.recovery import PersistentRecovery, StateTableManager
from streams.reranker import Reranker
from streams.settings import MOST_BATCH_EVENTS, Settings
from streams.state import (
    BatchTransaction,
    HotValues,
    Read,
    RocksTransaction,
    ScannedSpaces,
    SnapshotReads,
    StateOptions,
    decode_changes,
    disk_trouble,
    recording_transaction,
    refuse_writes,
    state_options,
    without_write_ahead_log,
)
from streams.tokens import wordllama_tokens
from streams.topics import STATE_TABLE
from streams.web import (
    RETRY_SECONDS,
    WEB_APPLICATION_OPTIONS,
    HTTPProblem,
    Readiness,
    register_views,
)

log = logger("worker")
E = TypeVar("E", bound=Exception)
dead_letters_log = logging.getLogger(DEAD_LETTERS)
BATCH_SECONDS = 0.005
"""How long the agent waits for more events before taking what it has (a lone event's delay)."""
RECOVERY_LOG_SECONDS = 5.0
"""How often recovery reports its progress."""
SESSION_TIMEOUT_SECONDS = 10.0
"""A crashed worker's partitions move to the others after this long without a heartbeat."""
HEARTBEAT_SECONDS = 2.0
"""How often a worker tells the group it is alive."""
FETCH_BYTES_PER_PARTITION = 8 * 1024**2
"""The most one fetch brings of a partition (Faust's `consumer_max_fetch_size`, 1 MiB by
default; aiokafka bounds a whole fetch at 50 MiB): recovery reads the changelog a fetch at a
time, and a full recovery of 273,916 records (10,000 tavern events) was ready in 18.2 s with
1 MiB, 14.6 s with this (medians of 3), the rest of the wait being fetches' round trips."""
CHECKPOINT_TICK = 0.5
"""How often the worker looks for partitions to checkpoint, or to stamp
(`LocalDurability.checkpoint_due`, `stamp_due`)."""
FULL_COLLECTION_SECONDS = 60.0
"""How often the ingest agent lets the collector walk the whole heap (`YoungGarbageOnly`)."""


class StateTable(faust.Table[bytes, bytes]):
    """The state table: its changelog carries one record per state key (`streams.changelog`).

    Recovery lays each partition's records of a changelog batch into its RocksDB at once (and
    the changesets an earlier release wrote, write by write).
    """

    recovered: Counter[int]
    """Changelog records recovery laid into each active partition since it last finished. Those
    a standby copy lays in all along are not counted (a takeover told them as replayed): at a
    takeover, the count is what the promoted copies still lacked."""
    reported_at: float
    """When recovery last reported its progress (`time.monotonic`)."""
    durability: LocalDurability | None
    """Closes the local copies cleanly at a stop (set by `create_app`)."""
    send_acks: Callable[[Sequence[Ack]], Awaitable[list[Delivery]]] | None
    """Sends the acks an upgrade gives (`Rumourmill.send_world_acks`; set by `create_app`)."""
    batch_bytes: int = changelog.BATCH_BYTES
    """The most one changelog record batch holds (`Settings.changelog_batch_bytes`)."""
    writer: changelog.ChangelogWriter
    changesets: defaultdict[int, dict[bytes, None]]
    """Per partition, the keys of the changesets of an earlier release that recovery read and
    found no delete of, until the records that retire them are stored (`retire_changesets`):
    the partition's copy is not stamped meanwhile (`LocalDurability.changesets`)."""
    hot: dict[int, HotValues]
    """Per partition, values the ingest agent read or wrote lately (`streams.state.HotValues`).
    Valid while only the agent writes the database: dropped whenever recovery, a migration or a
    rebalance may write it, and when a batch waited for the model (a rebalance may have come
    meanwhile)."""
    scanned: ScannedSpaces
    """The key spaces the ingest agent's transactions write straight through
    (`streams.state.BatchTransaction`)."""
    laying: dict[int, Future[None]]
    """Per partition, its last batch's held writes being laid into its database."""
    snapshot_reads: SnapshotReads
    """The reads made off the event loop (`streams.state.SnapshotReads`)."""
    stopping: asyncio.Future[None] | None
    """The worker's stop on a changelog it cannot recover from (`unrecoverable`)."""
    readable: set[int]
    """The active partitions whose state is whole: recovered (and upgraded) since they were
    assigned, or kept through a rebalance with nothing to replay (`held_through_rebalance`).
    Reads of the others are refused: recovery lays a copy in from the changelog a batch at a
    time, and a read meanwhile showed a world never seen, then characters who had forgotten
    most of their past."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.recovered = Counter()
        self.reported_at = 0.0
        self.durability = None
        self.send_acks = None
        self.stopping = None
        self.readable = set()
        self.writer = changelog.ChangelogWriter()
        self.changesets = defaultdict(dict)
        self.hot = {}
        self.scanned = ScannedSpaces()
        self.laying = {}
        self._layer = ThreadPoolExecutor(1, thread_name_prefix="state-writes")
        self.snapshot_reads = SnapshotReads()

    def _new_store(self) -> StoreT[bytes, bytes]:
        """Faust's RocksDB store, opening each partition with `StateOptions`.

        The worker writes and checkpoints through rocksdict alone: a table asking for Faust's
        other driver is refused."""
        store = cast(RocksDBStore, super()._new_store())
        if not store.use_rocksdict:
            raise ImproperlyConfigured(
                f"table {self.name!r} asks for RocksDB driver {store.driver!r};"
                " rumourmill's state needs rocksdict (options driver='rocksdict' or none)"
            )
        store.rocksdb_options = StateOptions(
            **(store.options or {}), use_rocksdict=store.use_rocksdict
        )
        return store

    def hot_values(self, partition: int) -> HotValues:
        """The values the agent keeps of `partition`, for its next batch."""
        if (hot := self.hot.get(partition)) is None:
            hot = self.hot[partition] = HotValues()
        return hot.next_batch()

    def lay_in(self, partition: int, tx: BatchTransaction, took: Callable[[float], None]) -> None:
        """Lay the writes a batch's finished transaction of the partition holds into its
        database, on the state writes' thread, telling `took` the seconds it took; the batch ends
        once they are `laid`. rocksdict holds the GIL while it inserts them, so this overlaps
        the batch's waits for the broker, not its sends: under a backlog the insert (55 to 70 us
        an event of the tavern benchmark, a tenth of the worker's time) is on the agent's path."""
        if tx.holding:
            self.laying[partition] = self._layer.submit(_timed_lay_in, tx, took)

    async def laid(self, partition: int) -> None:
        """Wait until the writes `lay_in` was given for the partition are in its database;
        raises what laying them raised."""
        if (laying := self.laying.get(partition)) is not None:
            await asyncio.wait([asyncio.wrap_future(laying)])  # a cancelled wait lays them still
            if self.laying.get(partition) is laying:
                del self.laying[partition]
            laying.result()

    async def settled(self, partition: int) -> None:
        """Wait, letting the loop go on, until no batch's writes are being laid into the
        partition's database (one that failed stops the worker through its batch)."""
        while (laying := self.laying.get(partition)) is not None and not laying.done():
            await asyncio.wait([asyncio.wrap_future(laying)])

    async def all_settled(self) -> None:
        """`settled` for every partition."""
        for partition in [*self.laying]:
            await self.settled(partition)

    async def on_rebalance(
        self, assigned: set[TP], revoked: set[TP], newly_assigned: set[TP], generation_id: int = 0
    ) -> None:
        self.hot.clear()
        changelog = self.changelog_topic.get_topic_name()
        assignor = self.app.assignor
        kept = {p for p in self.readable if assignor.is_active(TP(changelog, p))}
        self.readable = kept
        await self.all_settled()  # before Faust lets any database go
        await self.snapshot_reads.finished()  # a snapshot keeps its database open
        self.readable = await self.local_durability.held_through_rebalance(kept)
        afresh = self.local_durability.rebalanced(
            [tp.partition for tp in revoked if tp.topic == changelog],
            [tp.partition for tp in newly_assigned if tp.topic == changelog],
            self.readable,
            self.standbys_caught_up(),
        )
        for partition in afresh:  # recovery finds what is left of their changesets
            self.changesets.pop(partition, None)
        await super().on_rebalance(assigned, revoked, newly_assigned, generation_id)

    def standbys_caught_up(self) -> set[int]:
        """The standby partitions whose copies read the changelog up to where it ended at the
        last rebalance (Faust's recovery reads them on from there)."""
        recovery = cast(TableManager, self.app.tables).recovery
        return {
            tp.partition
            for tp in recovery.standby_tps
            if (read := recovery.standby_offsets.get(tp)) is not None
            and (end := recovery.standby_highwaters.get(tp)) is not None
            and read >= end  # Faust's highwaters are the last offsets
        }

    async def on_stop(self) -> None:
        """Runs once every event is acked and before Faust lets go of the databases (the
        standby records read and not laid in yet first laid in, as Faust's recovery would)."""
        try:
            await self.snapshot_reads.finished()
            if self.durability is not None:
                cast(TableManager, self.app.tables).recovery.flush_buffers()
                await self.durability.finish()
            await self.writer.stop()
        finally:
            self._layer.shutdown()
            self.snapshot_reads.stop()
        await super().on_stop()

    def unrecoverable(self, error: ValueError) -> ValueError:
        """Stop the worker on a changelog it cannot lay in, saying where and what to do; returns
        `error` to raise."""
        return self._stopped_on(
            error,
            f"{error}; the state cannot be recovered from this changelog: `rumourmill rebuild`"
            " makes it again from the events topic",
        )

    def _stopped_on(self, error: E, said: str) -> E:
        """Stop the worker, saying `said` once; returns `error` to raise. Faust's recovery
        logs a batch that failed as a warning and lays the same batch again with the next
        record, for ever: a disk full during a recovery warned every 5 s, the worker never
        ready and never stopped."""
        if self.stopping is None:
            log.critical("stopping the worker: %s", said)
            self.stopping = asyncio.ensure_future(self.app.crash(error))
        return error

    def apply_changelog_batch(self, batch: Iterable[EventT[bytes]]) -> None:
        if self.stopping is not None:  # Faust lays a batch that failed again, at its stop too
            return
        writes: dict[TP, WriteBatch] = {}
        offsets: dict[TP, int] = {}
        standbys = cast(TableManager, self.app.tables).recovery.standby_tps
        recovering = False
        for event in batch:
            message = event.message
            tp = message.tp
            if (tp_writes := writes.get(tp)) is None:
                tp_writes = writes[tp] = WriteBatch(raw_mode=True)
            key = cast(bytes, message.key)  # every changelog message has one
            if changelog.is_record(message.headers):
                _write_to(tp_writes, key, message.value)
                if message.value is None and (retiring := self.changesets.get(tp.partition)):
                    retiring.pop(key, None)  # a changeset already retired
            else:
                try:
                    changes = list(decode_changes(message.value or b""))
                except ValueError as error:
                    where = f"{tp.topic}[{tp.partition}] at offset {message.offset}"
                    raise self.unrecoverable(ValueError(f"changelog {where}: {error}")) from error
                for state_key, value in changes:
                    _write_to(tp_writes, state_key, value)
                if not self.changesets[tp.partition]:  # the first one read
                    self.local_durability.unstamp(tp.partition)
                self.changesets[tp.partition][key] = None
            offsets[tp] = max(message.offset, offsets.get(tp, -1))
            if tp not in standbys:
                self.recovered[message.partition] += 1
                recovering = True
        for tp, tp_writes in writes.items():
            self.hot.pop(tp.partition, None)
            try:
                without_write_ahead_log(partition_db(self, tp.partition)).write(tp_writes)
            except Exception as error:  # rocksdict raises Exception itself
                trouble = disk_trouble(error, Path(self.app.conf.datadir))
                if trouble is None:
                    raise
                said = f"laying the state changelog in: {error}; {trouble}"
                raise self._stopped_on(error, said) from None
            self.data.set_persisted_offset(tp, offsets[tp])
        if recovering and time.monotonic() - self.reported_at >= RECOVERY_LOG_SECONDS:
            self.reported_at = time.monotonic()
            log.info(
                "recovering state: %d record(s) laid so far",
                self.recovered.total(),
                extra={"records_by_partition": dict(self.recovered)},
            )

    async def on_recovery_completed(self, active_tps: set[TP], standby_tps: set[TP]) -> None:
        await super().on_recovery_completed(active_tps, standby_tps)
        if self.overtaken():  # the next recovery completes them
            return
        partitions = sorted(tp.partition for tp in active_tps)
        self.local_durability.recovered = set(partitions)
        log.info(
            "state recovered: %d record(s) laid; serving partitions %s",
            self.recovered.total(),
            partitions,
            extra={"records_by_partition": dict(self.recovered), "partitions": partitions},
        )
        self.recovered.clear()
        await self.upgrade_formats(partitions)
        await self.retire_changesets(partitions)
        self.hot.clear()
        if not self.overtaken():  # else the next recovery marks them, once done
            self.readable = set(partitions)

    async def upgrade_formats(self, partitions: Iterable[int]) -> None:
        """Take each recovered partition to this release's state format before any event
        (`projections.migrations`); its rewrites reach the changelog as one event's do, once
        the acks the upgrade gives are stored (a crash in between upgrades and acks again). A
        partition written by a newer release stops the worker, unchanged. Stops once a
        rebalance began (`overtaken`)."""
        for partition in partitions:
            if self.overtaken():
                return
            writes = changelog.PartitionWrites(self.batch_bytes)
            db = without_write_ahead_log(partition_db(self, partition))
            tx = recording_transaction(db, writes.write)
            if stored_format(tx) == current_format():
                continue
            try:
                async with self.local_durability.writing({partition: 1}):
                    done = upgrade(tx)
                    writes.end_event()
                    acked = await self.send_upgrade_acks(done.acks)
                    deliveries = await self.send_writes(partition, writes.batches, acked)
                await asyncio.gather(*deliveries)
            except StateFormatError as refusal:
                log.critical("partition %d: %s", partition, refusal, extra={"partition": partition})
                await self.app.crash(refusal)
                return
            log.info("partition %d: %s", partition, done, extra={"partition": partition})

    async def send_upgrade_acks(self, acks: Sequence[Ack]) -> list[Delivery]:
        """Send the acks an upgrade gave (`projections.migrations.Upgrade.acks`)."""
        if not acks:
            return []
        assert self.send_acks is not None, "set by create_app"
        return await self.send_acks(acks)

    async def retire_changesets(self, partitions: Iterable[int]) -> None:
        """Rewrite, as per-key records, the state of each partition whose changelog still holds
        changesets of an earlier release, then delete those changesets (tombstones under their
        keys), so compaction can drop them: compaction sees no state key inside a changeset, and
        a changeset left behind would bring back a key whose delete compaction dropped. Stops once
        a rebalance began (`overtaken`): a partition left unretired keeps its changesets, and
        whoever recovers it next retires them."""
        for partition in partitions:
            if self.overtaken():
                return
            if not (changesets := self.changesets.get(partition)):
                continue
            rewrites = (
                (cast(bytes, key), cast(bytes | None, value))
                for key, value in partition_db(self, partition).items()
                if key != self.data.offset_key  # type: ignore[attr-defined]
            )
            sent: list[asyncio.Future[RecordMetadata]] = []
            async with self.local_durability.writing({partition: 1}):
                writes = changelog.PartitionWrites(self.batch_bytes)
                retiring = [*changesets]  # a rebalance meanwhile may replay tombstones of some
                for key, value in chain(rewrites, ((key, None) for key in retiring)):
                    writes.write(key, value)
                    writes.end_event()  # no two records need to be stored together
                    if len(writes.batches) > 1:  # send the full batches as they come
                        full, writes.batches = writes.batches[:-1], writes.batches[-1:]
                        if self.overtaken():
                            break
                        sent += await self.send_writes(partition, full)
                if not self.overtaken():
                    sent += await self.send_writes(partition, writes.batches)
            await asyncio.gather(*sent)
            if self.overtaken():
                return
            self.changesets.pop(partition, None)  # retired for good: the copy may be stamped
            log.info(
                "partition %d: %d changeset(s) of an earlier release rewritten as records",
                partition,
                len(changesets),
                extra={"partition": partition},
            )

    def overtaken(self) -> bool:
        """Whether a rebalance began since the assignment whose recovery is completing: its
        partitions may be another worker's now, or being replayed into again
        (`streams.recovery.PersistentRecovery.current`)."""
        return not cast(PersistentRecovery, cast(TableManager, self.app.tables).recovery).current()

    @property
    def local_durability(self) -> LocalDurability:
        assert self.durability is not None, "set by create_app"
        return self.durability

    async def send_writes(
        self,
        partition: int,
        batches: list[changelog.Records],
        after: Sequence[Delivery] = (),
    ) -> list[asyncio.Future[RecordMetadata]]:
        """Send record batches of a partition to the changelog, once its earlier ones and
        `after` are stored (`changelog.ChangelogWriter`); their deliveries go to durability
        too, which checkpoints only once they are confirmed."""
        producer = cast(aiokafka_driver.Producer, self.app.producer)._ensure_producer()
        topic = self.changelog_topic.get_topic_name()
        sent = await self.writer.send(producer, topic, partition, batches, after)
        self.local_durability.sent(partition, sent)
        return sent


@dataclass(frozen=True)
class Rumourmill:
    """The app and the handles the agent, the web views (`streams.web.WorldReads`) need."""

    app: faust.App
    settings: Settings
    state: StateTable
    policies: PolicyFeed
    projector: Projector
    durability: LocalDurability
    judge: Judge
    metrics: Metrics = field(default_factory=Metrics)
    crashing: set[asyncio.Future[None]] = field(default_factory=set)
    recall_index: SqliteRecallIndex = field(default_factory=SqliteRecallIndex)
    """Derived local state for recall, caught up from the projections as it is searched."""
    read_cache: ReadCache = field(default_factory=ReadCache)
    """The runtime reads the web views answered, kept encoded (`streams.read_cache`)."""
    stalls: ProcessStalls = field(
        default_factory=lambda: ProcessStalls(
            SESSION_TIMEOUT_SECONDS - HEARTBEAT_SECONDS, SESSION_TIMEOUT_SECONDS
        )
    )
    """When the process stood still: a batch it stood still during is not sent."""
    reranker: Reranker | None = None
    """Recall's reranker (section 9, step 4); None when none is configured."""
    draining: threading.Event = field(default_factory=threading.Event)
    """Set once the worker is told to stop: it serves on a while (`stop_drain_seconds`),
    `/ready` saying it is stopping."""

    async def judged(
        self, transactions: Iterable[BatchTransaction], message: SourceMessage
    ) -> RecordedAnswers | None:
        """The model judgements `message` raises, answered and stored on the judgements topic
        (`streams.judging`); None when it raises none (rules mode, a redelivery...). Without a
        model and with no policy in force choosing model weighing, no message raises any: the
        pass over scratch state is skipped. Otherwise the writes the batch's `transactions`
        hold are laid in first: the judge reads the database and sees the batch's earlier
        events, and so does any read while the model is waited for."""
        if self.judge.client is None and not self.policies.model_weighing:
            return None
        for tx in transactions:
            tx.lay_in()
        read = RocksTransaction(partition_db(self.state, message.partition), refuse_writes)
        return await self.judge.message(self.projector, read, message)

    async def forget_judgements(
        self, transactions: Iterable[BatchTransaction], partition: int, intake: Intake
    ) -> None:
        """Tombstone on the judgements topic the judgements a deletion removed, and wait until
        Kafka has them, as `judged` waits for the model's answers: the batch's writes are laid
        in first, so that the values the batch kept can be forgotten after the wait.

        Before anything after the deletion is sent: its state goes to the changelog later
        (`_sent`), so a state that holds the deletion's outbox row has its tombstones stored
        (a crash in between applies the deletion again, from a state that still holds the
        keys, and they are sent again); and a later event of the batch, of the world begun
        anew at a position the deleted one had, has its judgements stored after them.
        """
        for tx in transactions:
            tx.lay_in()
        await self.judge.log.forget(partition, intake.forgotten_judgements)

    async def take(self, messages: Sequence[Message]) -> dict[int, list[Delivery]]:
        """Project a batch of messages in order; per partition, the deliveries its events wait for.

        Per partition, its events' changes go to the change feed first (`send_changes`); its
        state changes go to the changelog as one record batch (more only past
        `changelog.BATCH_BYTES`) once those changes are stored, and once a deletion's judgements
        are tombstoned (as it is taken, `forget_judgements`); then the acks and dead letters
        of its events, in order. All go straight to the producer, not through Faust's
        send buffer, whose flush gives up after 0.1 s. A projection that raises names its
        message in the error's notes.

        The state writes the transactions held are laid into RocksDB while those are sent, and
        the batch ends once they are in (`StateTable.lay_in`); a projection that raises drops
        them, and the values kept of every partition with them.
        """
        await self.state.all_settled()  # the batch before, if its wait was cancelled
        started = self.stalls.clock()
        self.metrics.batch_events.observe(len(messages))
        transactions: dict[int, BatchTransaction] = {}
        try:
            taken, writes = await self._projected(messages, transactions)
        except BaseException:
            self.state.hot.clear()
            raise
        for partition, tx in transactions.items():
            self.state.lay_in(partition, tx, self.metrics.laying_in.observe)
        self.forget_deleted(intake for intakes in taken.values() for _, intake in intakes)
        try:
            self.stalls.check(since=started)  # before anything of the batch is sent
            return await self._sent(taken, writes)
        finally:
            for partition in transactions:
                await self.state.laid(partition)

    def forget_deleted(self, intakes: Iterable[Intake]) -> None:
        """Drop the worlds these messages deleted from what the worker keeps of them in memory
        (`Intake.deleted_worlds`), once their state is laid in or being laid: a read waits
        for it (`read_transaction`), so none brings a deleted world back from the state."""
        for intake in intakes:
            for tenant, world in intake.deleted_worlds:
                self.recall_index.drop_world(tenant, world)
                self.embedding.forget(tenant, world)
                self.read_cache.forget_world(tenant, world)

    async def _projected(
        self, messages: Sequence[Message], transactions: dict[int, BatchTransaction]
    ) -> tuple[dict[int, list[tuple[Message, Intake]]], dict[int, changelog.PartitionWrites]]:
        """Project `messages` in order, each partition's through one transaction (left in
        `transactions`); per partition, its messages with what each produced, and its writes."""
        writes: dict[int, changelog.PartitionWrites] = {}
        hot: dict[int, HotValues] = {}
        taken: defaultdict[int, list[tuple[Message, Intake]]] = defaultdict(list)
        for message in messages:
            started = time.perf_counter()
            partition = message.partition
            if (tx := transactions.get(partition)) is None:
                partition_writes = writes[partition] = changelog.PartitionWrites(
                    self.settings.changelog_batch_bytes
                )
                hot[partition] = self.state.hot_values(partition)
                db = without_write_ahead_log(partition_db(self.state, partition))
                tx = transactions[partition] = BatchTransaction(
                    db, partition_writes, hot[partition], self.state.scanned
                )
            source = source_message(message, self.settings.partitions)
            answers = await self.judged(transactions.values(), source)
            if answers is not None:  # the model was waited for: what was known may be stale
                hot[partition].forget()
            try:
                intake = self.projector.receive(tx, source, answers)
            except Exception as error:
                error.add_note(f"projecting {message.topic}[{partition}]@{message.offset}")
                raise
            if answers is not None:
                self.judge.log.applied(partition, answers.positions)
            writes[partition].end_event()
            if intake.forgotten_judgements:
                await self.forget_judgements(transactions.values(), partition, intake)
                hot[partition].forget()  # Kafka was waited for: what was known may be stale
            taken[partition].append((message, intake))
            self.metrics.processing.observe(time.perf_counter() - started)
        return taken, writes

    async def _sent(
        self,
        taken: Mapping[int, list[tuple[Message, Intake]]],
        writes: Mapping[int, changelog.PartitionWrites],
    ) -> dict[int, list[Delivery]]:
        """Send what the taken messages produced, in the order `take` gives; per partition,
        the deliveries its events wait for."""
        deliveries: dict[int, list[Delivery]] = {}
        for partition, partition_writes in writes.items():
            told = await self.send_changes(intake for _, intake in taken[partition])
            changed = await self.state.send_writes(partition, partition_writes.batches, told)
            # the feed's too: redeliveries an earlier release's outbox kept changes for change
            # no state, so no changelog batch waits for them
            sent: dict[Delivery, None] = dict.fromkeys([*told, *changed])
            for message, intake in taken[partition]:
                sent.update(dict.fromkeys(await self.publish(message, intake)))
            deliveries[partition] = [*sent]  # a batch's delivery once, however many it carries
        acks = [ack for intakes in taken.values() for _, intake in intakes for ack in intake.acks]
        self.metrics.sent(
            acks,
            sum(len(intake.dead_letters) for intakes in taken.values() for _, intake in intakes),
        )
        for partition, intakes in taken.items():
            for _, intake in intakes:
                self.embedding.note(at_home(intake.acks, partition, self.settings.partitions))
        return deliveries

    async def send_changes(self, intakes: Iterable[Intake]) -> list[Delivery]:
        """Send the changes of these messages to the change feed; returns their deliveries (a
        batch's once).

        The state they were made with goes to the changelog only once these are stored: a
        state that holds an event (its outbox row with it) has its changes on the feed already,
        so the outbox keeps none, and a redelivery it recognises sends none. A crash in between
        applies the event again, from the changelog's state without it: its changes come again,
        with the same ids. With the feed off, none is sent, not even those an earlier release's
        outbox row kept for a redelivery.
        """
        taken: ChangeRecords = {}  # each world's, in order: one send a world, not a message
        for intake in intakes:
            for world, records in intake.changes.items():
                taken.setdefault(world, []).extend(records)
        return [*dict.fromkeys(await self.outputs.changes(taken))]

    async def publish(self, message: Message, intake: Intake) -> list[Delivery]:
        """Send the acks and dead letters one message produced (its changes went
        first: `send_changes`); returns their deliveries (a batch's once for all its
        records)."""
        deliveries = await self.outputs.acks(intake.acks, message.key, message.partition)
        for letter in intake.dead_letters:
            dead_letters_log.warning(
                "dead letter %s[%d]@%d: %s",
                letter.topic,
                letter.partition,
                letter.offset,
                letter.reason,
                extra=letter.model_dump(
                    include={"topic", "partition", "offset", "reason", "world_instance_id"}
                )
                | {"reason_kind": reason_kind(letter.reason)},
            )
            deliveries.append(await self.outputs.dead_letter(message.key, letter))
        return deliveries

    @cached_property
    def embedding(self) -> MemoryEmbedding:
        """Vectors for recall of what the batches formed (`streams.embedding_agent`)."""
        return MemoryEmbedding(self, WordLlamaEmbedder)

    @cached_property
    def outputs(self) -> Outputs:
        """The acks, dead letters and change feed, on the worker's producer."""
        producer = self.app.producer
        return Outputs(producer._ensure_producer, self.settings)  # type: ignore[attr-defined]

    async def send_world_acks(self, acks: Sequence[Ack]) -> list[Delivery]:
        """Acks that each name their world (an upgrade's), as a batch's are sent, counted
        among the events by outcome as a batch's are."""
        self.metrics.sent(acks, 0)
        return await self.outputs.acks(acks, None, 0)

    async def crash(self, error: BaseException, cause: str) -> None:
        """Stop the worker: nothing more is committed, the uncommitted events come again."""
        trouble = disk_trouble(error, self.settings.data_dir)
        said = str(error) if trouble is None else f"{error}; {trouble}"
        log.critical("stopping the worker: %s: %s", cause, said, exc_info=error)
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

    def searching(self, tenant_id: str, world_id: str) -> None:
        self.embedding.note_searched(tenant_id, world_id)

    def readiness(self) -> Readiness:
        """Ready once the state of this worker's partitions is recovered and policies caught up."""
        recovered = cast(TableManager, self.app.tables).recovery.completed.is_set()
        waiting_for = (
            *(() if recovered and not self.app.rebalancing else ("state recovery",)),
            *(() if self.policies.caught_up.is_set() else ("policies",)),
        )
        stopping = self.draining.is_set() or self.app.should_stop
        return Readiness(waiting_for, self.app.rebalancing_count, stopping)

    async def read_transaction(self, world_id: str) -> RocksTransaction:
        """Read-only state access for the partition that holds `world_id`, once the writes of
        the batch being sent are in: read before the next await, it never sees a batch's events
        half laid in."""
        return RocksTransaction(await self._settled_db(world_id), refuse_writes)

    async def read_aside(self, world_id: str, read: Callable[[StateTransaction], Read]) -> Read:
        """`read` of a snapshot of the partition that holds `world_id`, taken as
        `read_transaction` would give it, on the state reads' thread (`SnapshotReads`)."""
        return await self.state.snapshot_reads.read(await self._settled_db(world_id), read)

    async def _settled_db(self, world_id: str) -> Rdict:
        """The database of the partition that holds `world_id`, once no batch's writes are
        being laid into it (to be read before the next await)."""
        partition = partition_of(world_id.encode(), self.settings.partitions)
        if not self.app.assignor.is_active(TP(self.settings.topics.events, partition)):
            raise HTTPProblem(  # its owner could not be told apart from this worker
                503,
                f"world {world_id!r} is on partition {partition}, which this worker does not"
                " serve: give each worker its own RUMOURMILL_WEB_URL, then ask again",
            )
        if partition not in self.state.readable:
            raise HTTPProblem(
                503,
                f"world {world_id!r} is on partition {partition}, whose state this worker is"
                " still recovering; ask again shortly",
                RETRY_SECONDS,
            )
        await self.state.settled(partition)
        return partition_db(self.state, partition)

    async def owner_answer(
        self, world_id: str, web: Web, request: Request, wait_seconds: float
    ) -> Response | None:
        """The answer of the worker that owns `world_id` by this worker's partition map (None
        when that is this one), forwarded to it (`streams.forwarding`). Found in the map
        itself: Faust's `key_store` asks the producer for the topic's partitions, which it does
        not know in a worker's first moments (a read then failed with a 500)."""
        partition = partition_of(world_id.encode(), self.settings.partitions)
        changelog = self.state.changelog_topic.get_topic_name()
        owner = next(
            (
                URL(url)
                for url, topics in self.app.assignor.table_metadata(changelog).items()
                if partition in topics.get(changelog, ())
            ),
            None,
        )
        here = URL(self.app.conf.canonical_url)
        return await forwarding.owner_answer(
            world_id,
            owner,
            here,
            self.app.http_client,
            web,
            request,
            wait_seconds=wait_seconds,
        )


def table_dir(app_id: str) -> str:
    """Where, under `DATA_DIR/v1`, the local copies of `app_id`'s tables are kept: apart from
    any other app id's. A copy is reused only after checks of its stamp (`streams.durability`),
    which name no changelog: a worker switched to a rebuild's app id on the same data dir took
    the old app id's copies for the fresh changelog's, and recovery replayed its tail over them.
    Named `tables-APP_ID`, never a dot segment (`tables/..`), nor `tables` as before."""
    return f"tables-{app_id}"


def create_app(settings: Settings) -> Rumourmill:
    """Build the worker's Faust app from settings (no I/O until it starts)."""
    if not keep_large_buffers():  # each batch's megabyte buffers reuse the last ones' pages
        log.debug("allocator thresholds left as they are: the C library is not glibc")
    app = faust.App(
        settings.app_id,
        env={},  # Faust's own variables (`WEB_PORT`, `TOPIC_PARTITIONS`, `BROKER_URL`, some 80)
        # replaced what these settings give: a Kubernetes Service named `web` puts
        # `WEB_PORT=tcp://IP:80` in every pod of its namespace, and the worker stopped at start
        broker=[f"{kafka_consumer.SCHEME}://{address}" for address in settings.broker],
        broker_credentials=faust_credentials(settings),
        store="rocksdb://",
        datadir=str(settings.data_dir),
        tabledir=table_dir(settings.app_id),
        web_host=settings.web_host,
        web_bind=settings.web_host,
        web_port=settings.web_port,
        web_transport="tcp://",  # else `F_WEB_TRANSPORT`, which Faust reads as it is imported
        canonical_url=settings.canonical_url,
        web_application_options=WEB_APPLICATION_OPTIONS,
        topic_partitions=settings.partitions,
        topic_replication_factor=settings.replication,
        processing_guarantee="at_least_once",
        value_serializer=codec.CODEC_NAME,
        key_serializer="raw",
        autodiscover=False,
        table_standby_replicas=settings.standbys,
        Table=StateTable,
        TableManager=StateTableManager,
        broker_session_timeout=SESSION_TIMEOUT_SECONDS,
        producer_max_batch_size=settings.changelog_batch_bytes,
        producer_max_request_size=MOST_RECORD_BYTES,
        stream_buffer_maxsize=MOST_BATCH_EVENTS,
        broker_heartbeat_interval=HEARTBEAT_SECONDS,
        consumer_max_fetch_size=FETCH_BYTES_PER_PARTITION,
    )
    topic_options: dict[str, Any] = {
        "partitions": settings.partitions,
        "key_type": bytes,
        "key_serializer": "raw",
    }
    events = app.topic(
        settings.topics.events, value_type=bytes, value_serializer="raw", **topic_options
    )
    state = cast(
        StateTable,
        app.Table(
            STATE_TABLE,
            key_type=bytes,
            value_type=bytes,  # bytes in, bytes out: Faust picks the raw codec for bytes
            partitions=settings.partitions,
            options=state_options(settings.block_cache_mb),
            extra_topic_configs=changelog.topic_config(settings.changelog_batch_bytes),
        ),
    )
    state.durability = LocalDurability(state, settings, state.changesets)
    state.batch_bytes = settings.changelog_batch_bytes
    policies = PolicyFeed(settings, settings.topics.policies)
    progress = ProgressWatch(app, settings.topics.events)
    metrics = Metrics(
        lambda: consumer_lag(app, settings.topics.events, progress), lambda: standby_lag(app)
    )
    writing_systems.word_pattern()  # made as the worker starts: a first recall waited 30 ms
    projector = Projector(
        policies=PolicyBook(policies, log_conflict),
        max_event_bytes=settings.max_event_bytes,
        on_formed=metrics.formed,
        count=wordllama_tokens(),
        changes=bool(settings.topics.changes),
        record_bytes=settings.changelog_batch_bytes,
    )
    judgements = app.topic(
        settings.topics.judgements, value_type=bytes, value_serializer="raw", **topic_options
    )

    async def keep_judgements(partition: int, key: bytes, value: bytes | None) -> None:
        await (await judgements.send(key=key, value=value, partition=partition, force=True))

    judge = Judge(
        ModelClient.configured(settings, metrics.model_call),
        JudgementLog(topic_reader(settings, settings.topics.judgements), keep_judgements),
    )
    mill = Rumourmill(
        app,
        settings,
        state,
        policies,
        projector,
        state.durability,
        judge,
        metrics=metrics,
        reranker=Reranker.configured(settings, metrics.rerank_call),
    )
    state.send_acks = mill.send_world_acks
    state.writer.stalls = mill.stalls  # each changelog batch, as it goes to the producer
    app.add_dependency(ClosedAtStop([client for client in (judge.client, mill.reranker) if client]))
    app.add_dependency(Watching(progress))
    register_views(app, mill)

    @app.on_partitions_assigned.connect
    def forget_moved_worlds(sender: Any, /, *args: Any, signal: Any, **_: Any) -> None:
        """Faust sends the whole new assignment (a set of TPs) after every rebalance."""
        held = {tp.partition for tp in args[0] if tp.topic == settings.topics.events}
        keep_assigned_worlds(mill.recall_index, args[0], settings)
        mill.embedding.keep(lambda world: partition_of(world.encode(), settings.partitions) in held)
        judge.log.keep_partitions(held)

    @app.task  # type: ignore[untyped-decorator]
    async def follow_policies() -> None:
        await policies.follow()

    @app.task  # type: ignore[untyped-decorator]
    async def embed_memories() -> None:
        await mill.embedding.run()

    @app.timer(CHECKPOINT_TICK)  # type: ignore[untyped-decorator]
    async def checkpoint_partitions() -> None:
        try:
            await mill.durability.checkpoint_due()
            await mill.durability.stamp_due()
        except Exception as error:  # a disk full or failing: said, not left to Faust's crash
            await mill.crash(error, "checkpointing the local state")
            raise

    @app.task  # type: ignore[untyped-decorator]
    async def watch_for_stalls() -> None:
        mill.stalls.start()  # a thread: the event loop's own work stops no heartbeat

    @app.agent(events, concurrency=1)
    async def ingest(stream: faust.StreamT[bytes]) -> None:
        await policies.caught_up.wait()
        garbage = YoungGarbageOnly()
        acked: dict[int, asyncio.Future[bool]] = {}  # per partition: its last events acked?
        async for events in event_batches(stream, settings.batch_events, BATCH_SECONDS):
            counts = Counter(event.message.partition for event in events)
            try:
                async with mill.durability.writing(counts):
                    deliveries = await mill.take([event.message for event in events])
            except Exception as error:  # a bug, not bad input: stop rather than skip events
                await mill.crash(error, f"taking {len(events)} event(s) in")
                raise
            for partition, sent in deliveries.items():
                acked[partition] = ack_when_delivered(
                    [event for event in events if event.message.partition == partition],
                    sent,
                    mill.crash_soon,
                    after=acked.get(partition),
                )
            garbage.batch_done()

    return mill


class YoungGarbageOnly:
    """Keeps Python's garbage collector to what the current batch allocated.

    What outlives a batch mostly lives long (the projections' caches of decoded memories, some
    hundred thousand objects once full): left to the collector, every few thousand events a full
    collection walked all of it, a tenth of the worker's time. Frozen after each batch, it is
    out of every collection's way; a full collection still runs every `FULL_COLLECTION_SECONDS`,
    so cycles that die later are freed within that time.
    """

    def __init__(self) -> None:
        gc.freeze()  # what start-up built lives as long as the worker
        self.collected_at = time.monotonic()

    def batch_done(self) -> None:
        """After a batch: everything alive now is left alone (`gc.freeze` is a list splice)."""
        if time.monotonic() - self.collected_at >= FULL_COLLECTION_SECONDS:
            gc.unfreeze()
            gc.collect()
            self.collected_at = time.monotonic()
        gc.freeze()


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
    events: Sequence[Ackable],
    deliveries: Sequence[Delivery],
    on_failure: Callable[[BaseException], None],
    after: asyncio.Future[bool] | None = None,
) -> asyncio.Future[bool]:
    """Let Faust commit past `events` (of one partition, in offset order) only once Kafka has
    confirmed all they produced, and the events before them (`after`) are acked.

    Faust would ack an event as soon as the agent moves on, also when processing raised or
    was cancelled, and its commit flushes the producer without checking that the sends
    succeeded: any of these could commit past an event whose changes were never stored.
    Acked here instead, an event is committed only once its changes, acks and dead letters
    are in Kafka; a failed or cancelled send calls `on_failure` (the worker stops, and the
    event comes again). Acks go in offset order: Faust commits over a single unacked offset
    ahead of its acked ones (faust-streaming #606). Returns whether `events` were acked.
    """
    acked: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
    waited = [*deliveries, *([] if after is None else [after])]

    def delivered(outcome: asyncio.Future[list[Any]]) -> None:
        if outcome.cancelled():
            failure: BaseException | None = asyncio.CancelledError("a delivery was cancelled")
        else:
            failure = outcome.exception()  # a delivery that failed or was cancelled
        if failure is not None:
            on_failure(failure)
        in_order = failure is None and (after is None or outcome.result()[-1])
        if in_order:  # not after an earlier batch that failed (it stopped the worker)
            for event in events:
                event.ack()
        acked.set_result(in_order)

    asyncio.gather(*waited).add_done_callback(delivered)
    return acked


def consumer_lag(app: faust.App, topic: str, looked_up: ProgressWatch) -> dict[int, int]:
    """Per assigned partition of `topic`: its log end minus where the consumer goes on from,
    the committed offset, or the partition's first offset before any commit or past one
    retention removed (a log of which retention kept the last ten events lags ten, not its
    whole history). The log end is the later of the consumer's highwater and the progress
    watch's lookup (every 5 s), and the committed offset the group's, as the watch last looked
    it up, until the consumer knows its own: recovering, a partition was left out for minutes
    while its backlog was at its largest, and paused (events waiting on the model), its lag
    stood still while events came. A partition never committed is left out until its first
    offset is looked up: counted from 0, it showed its whole history."""
    consumer = app.consumer
    try:
        assigned = consumer.assignment()
    except ConsumerNotStarted:
        return {}
    known = cast(Mapping[TP, int | None], consumer._committed_offset)  # type: ignore[attr-defined]
    lag = {}
    for tp in assigned:
        if tp.topic != topic:
            continue
        ends = [end for end in (consumer.highwater(tp), looked_up.ends.get(tp)) if end is not None]
        committed = known.get(tp)
        if committed is None:
            committed = looked_up.committed.get(tp)
        start = looked_up.starts.get(tp)
        if not ends or (committed is None and start is None):
            continue
        lag[tp.partition] = max(max(ends) - max(start or 0, committed or 0), 0)
    return lag


def standby_lag(app: faust.App) -> dict[int, int]:
    """Per partition of the state changelog this worker keeps a standby copy of: the records
    past what the copy has read (the consumer's highwater, the end it last fetched, minus the
    offset after the last read; all of them before the first). A failover to the copy lays
    them in before the partition serves: a standby beside a busy active worker fell behind
    by tens of thousands of records, and its takeover took 35 s instead of 14."""
    recovery = cast(TableManager, app.tables).recovery
    consumer = app.consumer
    try:
        assigned = consumer.assignment()
    except ConsumerNotStarted:
        return {}
    lag = {}
    for tp in assigned & set(recovery.standby_tps):
        if (end := consumer.highwater(tp)) is None:
            continue
        read = recovery.standby_offsets.get(tp)
        lag[tp.partition] = max(end - (0 if read is None else read + 1), 0)
    return lag


def partition_db(table: TableT[bytes, bytes], partition: int) -> Rdict:
    """The RocksDB holding one partition of the state table (Faust opens it on first use)."""
    db: Rdict = table.data._db_for_partition(partition)  # type: ignore[attr-defined]
    return db


def _timed_lay_in(tx: BatchTransaction, took: Callable[[float], None]) -> None:
    """`tx.lay_in`, telling `took` its seconds (on the state writes' thread)."""
    started = time.perf_counter()
    tx.lay_in()
    took(time.perf_counter() - started)


def _write_to(writes: WriteBatch, key: bytes, value: bytes | None) -> None:
    if value is None:
        writes.delete(key)
    else:
        writes.put(key, value)


MOST_ID_BYTES = 4 * MAX_ID_LENGTH
"""The longest a world id is in UTF-8: the longest key an event can be keyed by."""


def source_message(message: Message, partitions: int) -> SourceMessage:
    """A Kafka message of a topic of `partitions` partitions as the projector takes it."""
    return SourceMessage(
        topic=message.topic,
        partition=message.partition,
        offset=message.offset,
        key=message.key,
        value=message.value or b"",
        timestamp_ms=record_timestamp_ms(message.timestamp),
        home_partition=home_partition(message.key, partitions),
    )


def home_partition(key: bytes | None, partitions: int) -> int | None:
    """Where a message keyed `key` belongs (`SourceMessage.home_partition`): None unkeyed, or
    keyed longer than any world id (refused for its key: hashed and kept, a producer keying
    each message by its own 900 KB held the loop 0.1 s a message and the cache 4 GB)."""
    if key is None or len(key) > MOST_ID_BYTES:
        return None
    return world_partition(key, partitions)


def record_timestamp_ms(timestamp: float | None) -> int | None:
    """A Kafka record's timestamp (seconds, as Faust gives it) in whole milliseconds."""
    return None if timestamp is None or timestamp < 0 else round(timestamp * 1000)
