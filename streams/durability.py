"""Local state that survives a restart, so a start replays recent work, not all history.

Each partition's RocksDB is a cache of the state table's changelog. It may be kept across a
restart only while it is a prefix of the changelog; it stops being one when the worker writes
to it ahead of Kafka's confirmation. Hence, per partition, under the table directory (the app
id's own, `streams.app.table_dir`: a stamp names no changelog):

- `state-P.dirty`: created before the first write of the worker's own processing and removed
  only at a clean stop, once every write is confirmed in the changelog and flushed to disk. A
  start that finds it throws the database away (it may hold writes the changelog never got);
- `checkpoints/state-P/`: a RocksDB checkpoint taken at a quiescent point (every write so far
  confirmed in the changelog) every `CHECKPOINT_SECONDS`, or once the partition has been idle
  for `IDLE_SECONDS`; while no event came since, its stamp is taken again every
  `CHECKPOINT_SECONDS` (`stamp_due`). After a crash the start restores it (hard links) and
  recovery replays only the changelog past it;
- `state-P.stamp.json` (and `stamp.json` inside a checkpoint): the Kafka cluster, the changelog
  offset the copy holds everything up to, and when it last followed the changelog to its end. A
  start keeps a copy only if it belongs to the same cluster, its offset is still in the
  changelog, and it followed the changelog within its `delete.retention.ms` (a copy left longer
  could miss a delete that compaction dropped). A rebalance that gives the worker a partition
  back checks its copy the same way before Faust opens it (`LocalDurability.rebalanced`): a copy
  let go at a rebalance, or kept at start and first used later, stops following meanwhile.

Faust keeps its recovery offset inside each database (`set_persisted_offset`); this module
writes it at the same quiescent points, so Faust's recovery itself replays only the tail.

The table directory is one worker's: it holds `worker.lock` (`hold_table_dir`) from before it
looks at any copy until the process ends. A second worker of the app id on the same data dir
would otherwise take the first's dirty markers for a crash's, and throw its live databases away.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import os
import shutil
import time
from collections.abc import AsyncIterator, Awaitable, Collection, Iterable, Mapping, Sequence, Set
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import cast

import orjson
from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient
from faust.exceptions import ConsumerNotStarted
from faust.stores.rocksdb import Store
from faust.types import TP, RecordMetadata, TableT
from rocksdict import AccessType, Checkpoint, Options, Rdict

from streams.changelog import FORMAT
from streams.kafka_clients import kafka_options
from streams.logs import logger
from streams.settings import Settings
from streams.stopping import STOP_DEADLINE_SECONDS
from streams.topics import topic_settings

log = logger("durability")

CHECKPOINT_SECONDS = 30.0
"""A partition that keeps receiving events is checkpointed this often (each costs ~50-100 ms)."""
IDLE_SECONDS = 1.0
"""A partition with new writes, then this long without an event, is checkpointed at once, so a
crash after a burst replays nothing of it."""
RETENTION_SHARE = 0.9
"""A kept copy is trusted for this share of the changelog's `delete.retention.ms`."""
CLOCK_SLACK_MS = 60_000
"""How far a stamp may be ahead of this machine's clock (a clock stepped back a little); a copy
stamped further ahead has an age nobody can tell, and is not reused."""
DELETE_RETENTION = "delete.retention.ms"
DEFAULT_DELETE_RETENTION_MS = 86_400_000
"""Kafka's default `delete.retention.ms`, when the topic does not say."""
STOP_TIMEOUT = 10.0
"""How long a clean stop waits for the changelog to confirm the last writes."""
REBALANCE_CONFIRM_SECONDS = 5.0
"""How long a rebalance waits for a kept partition's changelog sends before leaving it to
recovery (`held_through_rebalance`)."""
LOCK_FILE = "worker.lock"
"""Held (`flock`) in the table directory by the worker that uses it."""
LOCK_WAIT_SECONDS = STOP_DEADLINE_SECONDS + 5.0
"""How long a start waits for the worker holding the table directory to stop (a restart
that began before the worker it replaces had ended its stop)."""
LOCK_POLL_SECONDS = 0.2


@dataclass(frozen=True)
class Stamp:
    """What a kept copy of a partition holds: the changelog up to `changelog_offset`."""

    cluster_id: str
    changelog_offset: int
    taken_at_ms: int
    changelog_format: int = FORMAT

    def to_bytes(self) -> bytes:
        return orjson.dumps(self.__dict__)

    @classmethod
    def read(cls, path: Path) -> Stamp | None:
        """The stamp at `path`; None when missing or unreadable (the copy is not trusted)."""
        try:
            document = orjson.loads(path.read_bytes())
            return cls(
                str(document["cluster_id"]),
                int(document["changelog_offset"]),
                int(document["taken_at_ms"]),
                int(document.get("changelog_format", 1)),
            )
        except (OSError, ValueError, KeyError, TypeError):
            return None


@dataclass(frozen=True)
class Changelog:
    """The state changelog as the broker has it now: what a kept copy is checked against."""

    cluster_id: str
    earliest: Mapping[int, int]
    """Per partition, the first offset still in the log."""
    end: Mapping[int, int]
    """Per partition, the offset the next record will get."""
    delete_retention_ms: int


def reason_to_discard(
    stamp: Stamp | None, changelog: Changelog, partition: int, now_ms: int
) -> str | None:
    """Why a kept copy of `partition` must not be reused (None: it may be)."""
    if stamp is None:
        return "it has no stamp"
    if stamp.changelog_format != FORMAT:
        return f"it was written with changelog format {stamp.changelog_format}, not {FORMAT}"
    if stamp.changelog_offset < 0:
        return "it holds no changelog offset"
    if stamp.cluster_id != changelog.cluster_id:
        return f"it comes from Kafka cluster {stamp.cluster_id}, not {changelog.cluster_id}"
    end = changelog.end.get(partition, 0)
    if stamp.changelog_offset >= end:
        return f"it holds changelog offset {stamp.changelog_offset}, the changelog ends at {end}"
    earliest = changelog.earliest.get(partition, 0)
    if stamp.changelog_offset + 1 < earliest:
        return f"the changelog no longer holds the offsets after {stamp.changelog_offset}"
    return reason_of_age(now_ms - stamp.taken_at_ms, changelog.delete_retention_ms)


def reason_of_age(age_ms: int, delete_retention_ms: int) -> str | None:
    """Why a copy that last followed the changelog `age_ms` ago must not be reused (None: it
    may be): compaction may have dropped deletes it never saw, or its age cannot be told."""
    if age_ms < -CLOCK_SLACK_MS:
        return (
            f"it is stamped {-age_ms // 1000} s ahead of this machine's clock, which went back:"
            " its age cannot be told"
        )
    if age_ms > delete_retention_ms * RETENTION_SHARE:
        return (
            f"it last followed the changelog {age_ms // 1000} s ago; deletes are kept in the"
            f" changelog for {delete_retention_ms // 1000} s"
        )
    return None


class TableDirInUse(Exception):
    """Another worker holds the table directory; the message says what to do."""


async def hold_table_dir(tabledir: Path, wait_seconds: float) -> int:
    """Lock `tabledir` for this process (the lock goes with it, however it ends); returns the
    lock file's descriptor, to keep open. Waits up to `wait_seconds` for another holder to
    stop, then raises `TableDirInUse`."""
    tabledir.mkdir(parents=True, exist_ok=True)
    descriptor = os.open(tabledir / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o644)
    if _locked(descriptor):
        return descriptor
    log.info("waiting up to %.0f s for the worker using %s to stop", wait_seconds, tabledir)
    deadline = time.monotonic() + wait_seconds
    while not _locked(descriptor):
        if time.monotonic() >= deadline:
            os.close(descriptor)
            raise TableDirInUse(
                f"another worker uses {tabledir} (it holds {LOCK_FILE} there): give each "
                "worker a data dir of its own (RUMOURMILL_DATA_DIR, --data-dir); nothing in it"
                " was touched"
            )
        await asyncio.sleep(LOCK_POLL_SECONDS)
    return descriptor


def _locked(descriptor: int) -> bool:
    """Take the lock of `descriptor` if no other holds it."""
    try:
        fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    return True


@dataclass(frozen=True)
class PartitionFiles:
    """Where one partition's database, marker, stamp and checkpoint live."""

    db: Path
    """`state-P.db`, as Faust names it."""

    @property
    def dirty(self) -> Path:
        return self._sibling(".dirty")

    @property
    def stamp(self) -> Path:
        return self._sibling(".stamp.json")

    @property
    def stamp_draft(self) -> Path:
        """The copy's stamp taken again, written whole before it replaces the one there."""
        return self.with_suffix(self.stamp, ".tmp")

    @property
    def checkpoint(self) -> Path:
        return self.db.parent / "checkpoints" / self.db.name.removesuffix(".db")

    @property
    def checkpoint_stamp(self) -> Path:
        return self.checkpoint / "stamp.json"

    @property
    def checkpoint_stamp_draft(self) -> Path:
        """A checkpoint's stamp taken again, written whole before it replaces the one there."""
        return self.with_suffix(self.checkpoint_stamp, ".tmp")

    def _sibling(self, suffix: str) -> Path:
        return self.db.with_name(self.db.name.removesuffix(".db") + suffix)

    def with_suffix(self, path: Path, suffix: str) -> Path:
        return path.with_name(path.name + suffix)


def prepare_partition(files: PartitionFiles, changelog: Changelog, now_ms: int) -> str:
    """Make `files.db` a copy of the changelog prefix recovery may resume from (or remove it).

    Returns what was done, for the log.
    """
    _settle_checkpoint(files)
    partition = int(files.db.name.removesuffix(".db").rpartition("-")[2])
    restored = False
    if files.dirty.exists():
        _remove(files.db, files.stamp)
        checkpoint = Stamp.read(files.checkpoint_stamp)
        if reason_to_discard(checkpoint, changelog, partition, now_ms) is None:
            _restore(files)
            restored = True
        files.dirty.unlink()
        _fsync_directory(files.db.parent)
    if not files.db.exists():
        return "no local state: recovery replays the whole changelog"
    stamp = Stamp.read(files.stamp)
    reason = reason_to_discard(stamp, changelog, partition, now_ms) or _unopenable(files.db)
    if reason is not None or stamp is None:
        _remove(files.db, files.stamp)
        return f"local state discarded ({reason}): recovery replays the whole changelog"
    origin = "checkpoint restored" if restored else "local state kept"
    return f"{origin}: recovery replays the changelog after offset {stamp.changelog_offset}"


def _unopenable(db: Path) -> str | None:
    """Why the copy at `db` does not open, if it does not (a file of it lost or damaged on the
    disk): kept by its stamp alone, it stopped the worker at every start."""
    try:
        Rdict(str(db), options=Options(raw_mode=True), access_type=AccessType.read_only()).close()
    except Exception as error:  # rocksdict raises Exception itself, saying what RocksDB said
        return f"it does not open: {' '.join(str(error).split())}"
    return None


def _settle_checkpoint(files: PartitionFiles) -> None:
    """Finish or undo a checkpoint swap a crash interrupted (see `take_checkpoint`), and drop
    the drafts of stamps a crash kept from replacing the copy's (`_close_cleanly`) or the
    checkpoint's (`_restamp_checkpoint`: restored with the checkpoint, it would lie in the
    database's directory)."""
    final = files.checkpoint
    old, tmp = files.with_suffix(final, ".old"), files.with_suffix(final, ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    if old.exists():
        if final.exists():
            shutil.rmtree(old)
        else:
            old.rename(final)
    files.checkpoint_stamp_draft.unlink(missing_ok=True)
    files.stamp_draft.unlink(missing_ok=True)


def _restore(files: PartitionFiles) -> None:
    """The checkpoint as the live database: SST files hard-linked (they never change), the
    rest copied; the checkpoint's stamp becomes the database's."""
    files.db.mkdir(parents=True)
    for source in files.checkpoint.iterdir():
        if source.name == files.checkpoint_stamp.name:
            continue
        target = files.db / source.name
        if source.suffix == ".sst":
            try:
                os.link(source, target)
                continue
            except OSError:
                pass
        shutil.copy2(source, target)
    shutil.copy2(files.checkpoint_stamp, files.stamp)
    _fsync_directory(files.db)


def _remove(db: Path, stamp: Path) -> None:
    shutil.rmtree(db, ignore_errors=True)
    stamp.unlink(missing_ok=True)


def _fsync_directory(path: Path) -> None:
    descriptor = os.open(path, os.O_RDONLY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)


def _write_durably(path: Path, data: bytes) -> None:
    with path.open("wb") as out:
        out.write(data)
        out.flush()
        os.fsync(out.fileno())


def _replace_durably(path: Path, draft: Path, data: bytes) -> None:
    """`data` in place of what `path` holds, through `draft` (in the same directory): a crash
    leaves one or the other whole, never a file cut short (an unreadable stamp)."""
    _write_durably(draft, data)
    draft.replace(path)
    _fsync_directory(path.parent)


async def read_changelog(settings: Settings, topic: str, partitions: Iterable[int]) -> Changelog:
    """The cluster and the changelog's offsets and delete retention (none if it is missing)."""
    admin = AIOKafkaAdminClient(**kafka_options(settings))
    await admin.start()
    try:
        cluster_id = str((await admin.describe_cluster())["cluster_id"])
        if topic not in set(await admin.list_topics()):
            return Changelog(cluster_id, {}, {}, DEFAULT_DELETE_RETENTION_MS)
        configs = await topic_settings(admin, topic, [DELETE_RETENTION])
        retention = int(configs.get(DELETE_RETENTION, DEFAULT_DELETE_RETENTION_MS))
    finally:
        await admin.close()
    consumer = AIOKafkaConsumer(**kafka_options(settings), enable_auto_commit=False)
    await consumer.start()
    try:
        wanted = [TopicPartition(topic, partition) for partition in partitions]
        earliest = await consumer.beginning_offsets(wanted)
        end = await consumer.end_offsets(wanted)
    finally:
        await consumer.stop()
    return Changelog(
        cluster_id,
        {tp.partition: offset for tp, offset in earliest.items()},
        {tp.partition: offset for tp, offset in end.items()},
        retention,
    )


@dataclass
class _Partition:
    """What the worker knows about one partition it writes to."""

    deliveries: list[Awaitable[RecordMetadata]] = field(default_factory=list)
    """Changelog sends not yet seen confirmed, in order."""
    confirmed_offset: int = -1
    """The changelog offset every write so far is confirmed up to (once `deliveries` is empty)."""
    dirty: bool = False
    broken: bool = False
    """A write whose changelog send failed or never happened: never mark this copy clean."""
    events_since_checkpoint: int = 0
    last_checkpoint: float = field(default_factory=time.monotonic)
    last_event: float = 0.0
    checkpoint_before_writes: bool = True
    """The copy holds what no checkpoint of it does (recovered at start or at a rebalance that
    gave it, kept at start): the next write is preceded by one (`writing`)."""


class LocalDurability:
    """Marks, checkpoints and cleanly closes the state partitions the worker writes to.

    The agent projects inside `writing(events)` and hands over each changelog send with
    `sent`; `checkpoint_due` (a timer) and `finish` (the table's stop) run between events, when
    every write is in the changelog.
    """

    def __init__(
        self,
        table: TableT[bytes, bytes],
        settings: Settings,
        changesets: Mapping[int, Collection[bytes]],
    ) -> None:
        self.table = table
        self.settings = settings
        self.changesets = changesets
        """Per partition, the changesets of an earlier release that recovery read and no record
        has retired yet (`streams.app.StateTable.changesets`). A copy holding any is never
        stamped nor checkpointed: they are kept nowhere else, so a start that kept the copy
        would replay only the changelog past it and never retire them, and once compaction
        dropped a delete after one, a full replay would bring its keys back."""
        self.cluster_id = ""
        self.partitions: dict[int, _Partition] = {}
        self.quiet = asyncio.Lock()
        """Held while an event is projected; a checkpoint or a stop holds it in between."""
        self.lock: int | None = None
        """The table directory's lock file, held open for as long as the process runs."""
        self.delete_retention_ms = DEFAULT_DELETE_RETENTION_MS
        """The changelog's, as `prepare` read it."""
        self.followed_at: dict[int, int] = {}
        """Per partition, when (ms) its copy last followed the changelog to its end, as far as
        known: a kept copy's stamp, when a copy was let go at the end, or begun afresh, or the
        last stamp taken of it at the end (`_stamp`)."""
        self.recovered: set[int] = set()
        """The active partitions whose recovery completed: at the changelog's end, which only
        this worker writes to."""
        self.stamped_at: dict[int, float] = {}
        """Per partition, when (`time.monotonic`) `stamp_due` last stamped its copy, or the
        checkpoint of one written to."""

    @property
    def store(self) -> Store:
        """The table's Faust RocksDB store (offsets, open databases, paths)."""
        return cast(Store, self.table.data)

    def files(self, partition: int) -> PartitionFiles:
        """The partition's files, named as Faust's `Store.partition_path` names the database
        (without creating the store, which would bind it to the wrong event loop at start)."""
        tabledir = Path(self.table.app.conf.tabledir)
        return PartitionFiles(tabledir / f"{self.table.name}-{partition}.db")

    async def prepare(self, partitions: Sequence[int]) -> None:
        """At start, before Faust opens anything: hold the table directory (`hold_table_dir`),
        then keep, restore or discard each partition."""
        if self.lock is None:
            self.lock = await hold_table_dir(Path(self.table.app.conf.tabledir), LOCK_WAIT_SECONDS)
        topic = self.table.changelog_topic.get_topic_name()
        changelog = await read_changelog(self.settings, topic, partitions)
        self.cluster_id = changelog.cluster_id
        self.delete_retention_ms = changelog.delete_retention_ms
        now_ms = int(time.time() * 1000)
        for partition in partitions:
            files = self.files(partition)
            if files.db.exists() or files.dirty.exists() or files.checkpoint.exists():
                outcome = prepare_partition(files, changelog, now_ms)
                log.info("partition %d: %s", partition, outcome, extra={"partition": partition})
            kept = Stamp.read(files.stamp) if files.db.exists() else None
            self.followed_at[partition] = now_ms if kept is None else kept.taken_at_ms

    def rebalanced(
        self,
        revoked: Iterable[int],
        assigned: Iterable[int],
        held: Set[int],
        standbys_caught_up: Set[int],
    ) -> list[int]:
        """At a rebalance, before Faust lets go of a database or opens one: note when each
        copy let go last followed the changelog (now, if it was recovered or a standby that
        caught up with it, `standbys_caught_up`, and read on since), and throw away each copy
        given to the worker that stopped following it longer ago than a start would keep it
        (`reason_to_discard`): compaction may have dropped deletes it never saw.

        Only the active partitions `held` through the rebalance (`held_through_rebalance`) stay
        recovered. Faust replays the changelog into the others from their last checkpoint, over
        their newer state: one that turned standby (it stays assigned, neither revoked nor newly
        assigned), or one kept whose sends were not confirmed in time. Counted as whole
        meanwhile, such a copy was checkpointed, or stamped at a clean stop, half replayed, as
        holding every write the worker had confirmed: the next start kept values older than the
        changelog's.

        Returns the partitions given whose copy is begun afresh: recovery replays their whole
        changelog."""
        now_ms = int(time.time() * 1000)
        for partition in self.recovered - held:
            self.followed_at[partition] = now_ms
        for partition, state in self.partitions.items():
            if partition not in held:  # recovered again (or a standby) before its next write
                state.checkpoint_before_writes = True
        for partition in revoked:
            if partition in standbys_caught_up:
                self.followed_at[partition] = now_ms
        self.recovered &= held
        afresh = []
        for partition in assigned:
            files = self.files(partition)
            age_ms = now_ms - self.followed_at.get(partition, now_ms)
            reason = reason_of_age(age_ms, self.delete_retention_ms)
            if files.db.exists() and reason is not None:
                _remove(files.db, files.stamp)
                files.dirty.unlink(missing_ok=True)
                _fsync_directory(files.db.parent)
                self.partitions.pop(partition, None)
                log.warning(
                    "partition %d: local state discarded (%s): recovery replays the whole"
                    " changelog",
                    partition,
                    reason,
                    extra={"partition": partition},
                )
            if not files.db.exists():
                self.followed_at[partition] = now_ms  # a copy begun afresh
                afresh.append(partition)
        return afresh

    def at_changelog_end(self, partition: int) -> bool:
        """Whether the partition's open copy holds the whole changelog: an active partition
        once recovered, another that laid in everything up to the end the consumer last
        fetched (a standby, all it read laid in)."""
        if partition in self.recovered:
            return True
        db = self._open_db(partition)
        if db is None:
            return False
        tp = TP(self.table.changelog_topic.get_topic_name(), partition)
        try:
            highwater = self.table.app.consumer.highwater(tp)
        except (AssertionError, KeyError, ConsumerNotStarted):  # not assigned now, or stopped
            return False
        laid = db.get(self.store.offset_key)
        return highwater is not None and laid is not None and int(laid) >= highwater - 1

    @contextlib.asynccontextmanager
    async def writing(self, events: Mapping[int, int]) -> AsyncIterator[None]:
        """Project a batch of events (how many per partition): marks their partitions dirty
        first; a failure keeps them so.

        A copy's first write since it was recovered (at start, or at a rebalance that gave it
        to the worker) or kept at start is preceded by a checkpoint (its memtable flushed, its
        files linked: some milliseconds): a start throws a dirty copy away for its checkpoint,
        and the copy had none of what it held, or an older one. A crash before the first
        periodic checkpoint replayed the whole changelog, or all another worker wrote since the
        partition was last here, and a worker crashing in a loop on an event did so at every
        start."""
        async with self.quiet:
            states = {
                partition: self.partitions.setdefault(partition, _Partition())
                for partition in events
            }
            for partition, state in states.items():
                if state.checkpoint_before_writes:
                    await self.take_checkpoint(partition, state)
                if not state.dirty:
                    files = self.files(partition)
                    files.dirty.parent.mkdir(parents=True, exist_ok=True)
                    _write_durably(files.dirty, b"")
                    _fsync_directory(files.dirty.parent)
                    state.dirty = True
            try:
                yield
            except BaseException:
                for state in states.values():
                    state.broken = True
                raise
            now = time.monotonic()
            for partition, state in states.items():
                state.events_since_checkpoint += events[partition]
                state.last_event = now

    def unstamp(self, partition: int) -> None:
        """Take the stamp off the partition's copy: it holds changesets of an earlier release,
        kept nowhere else (`changesets`); kept by its stamp, the next start would resume the
        changelog past them and never retire them."""
        files = self.files(partition)
        if files.stamp.exists():
            files.stamp.unlink()
            _fsync_directory(files.db.parent)

    def unretired(self, partition: int) -> bool:
        """Whether the partition's copy holds changesets no record has retired yet."""
        return bool(self.changesets.get(partition))

    def sent(self, partition: int, deliveries: Iterable[Awaitable[RecordMetadata]]) -> None:
        """The changelog sends an event of `partition` made, in order."""
        self.partitions[partition].deliveries.extend(deliveries)

    async def _confirmed(self, state: _Partition, timeout: float | None = None) -> bool:
        """Wait for the partition's changelog sends (never cancelling them); False if one
        failed (the agent's acking stops the worker then) or the wait timed out."""
        pending = [asyncio.ensure_future(delivery) for delivery in state.deliveries]
        if pending:
            _, waiting = await asyncio.wait(pending, timeout=timeout)
            if waiting:
                return False
        for delivery in pending:
            if delivery.cancelled() or delivery.exception() is not None:
                state.broken = True
                return False
            state.confirmed_offset = max(state.confirmed_offset, delivery.result().offset)
        state.deliveries.clear()
        return not state.broken

    def _persist_offset(self, partition: int, offset: int) -> None:
        topic = self.table.changelog_topic.get_topic_name()
        self.store.set_persisted_offset(TP(topic, partition), offset)

    def _open_db(self, partition: int) -> Rdict | None:
        return self.store._dbs.get(partition)

    async def checkpoint_due(self) -> None:
        """Checkpoint each partition that has new writes and is idle or due."""
        now = time.monotonic()
        for partition, state in list(self.partitions.items()):
            due = state.events_since_checkpoint and (
                now - state.last_event >= IDLE_SECONDS
                or now - state.last_checkpoint >= CHECKPOINT_SECONDS
            )
            if due and not state.broken:
                async with self.quiet:
                    await self.take_checkpoint(partition, state)

    async def stamp_due(self) -> None:
        """Every `CHECKPOINT_SECONDS`, for each open copy at the changelog's end: flush and
        stamp it if the worker has not written to it, as a clean stop does (`_close_cleanly`),
        else stamp its checkpoint again if that holds all the copy does
        (`_restamp_checkpoint`). A copy recovered whole that no event reached since (or a
        standby) was stamped only at a clean stop, and every crash threw it away, its whole
        changelog replayed again; one written to, then idle for most of `delete.retention.ms`,
        had only a checkpoint too old to keep, and a crash replayed its whole changelog too."""
        now = time.monotonic()
        for partition, db in list(self.store._dbs.items()):
            if self.unretired(partition):
                continue
            if now - self.stamped_at.get(partition, -CHECKPOINT_SECONDS) < CHECKPOINT_SECONDS:
                continue
            if self.at_changelog_end(partition):
                async with self.quiet:
                    state = self.partitions.get(partition)
                    if state is not None and state.dirty:
                        self._restamp_checkpoint(partition, state)
                    else:
                        await self._close_cleanly(partition, db)
                self.stamped_at[partition] = now

    def _restamp_checkpoint(self, partition: int, state: _Partition) -> None:
        """Between events: the partition's checkpoint stamped as of now, if it holds all the
        copy does and the copy is at the changelog's end: no event applied since it was taken
        (nor one that failed), and it holds the changelog up to the offset the copy does (a
        standby that laid in another worker's writes since is further on than its checkpoint,
        which a stamp of now would claim followed them)."""
        if state.broken or state.events_since_checkpoint or self._whole(partition) is None:
            return
        offset = self._held_offset(partition, state.confirmed_offset)
        files = self.files(partition)
        taken = Stamp.read(files.checkpoint_stamp)
        if offset is None or taken is None:
            return
        restamped = self._stamp(partition, offset)
        if taken == replace(restamped, taken_at_ms=taken.taken_at_ms):
            _replace_durably(
                files.checkpoint_stamp, files.checkpoint_stamp_draft, restamped.to_bytes()
            )

    async def held_through_rebalance(self, partitions: Iterable[int]) -> set[int]:
        """At a rebalance, for each active partition the worker keeps, write where Faust's
        recovery starts reading (the offset its database holds everything up to, every send
        confirmed), so the recovery that follows replays nothing of it. It re-seeks every active
        partition to its persisted offset: from the last checkpoint, it laid in again, over the
        newer state, every write since (tens of seconds under load), reads showed the state go
        back meanwhile and the partition's events waited. Returns the partitions so held; the
        others (a send unconfirmed within `REBALANCE_CONFIRM_SECONDS`, or failed) replay from
        their last checkpoint."""
        held: set[int] = set()
        loop = asyncio.get_running_loop()
        deadline = loop.time() + REBALANCE_CONFIRM_SECONDS  # for them all: the rebalance waits
        try:
            await asyncio.wait_for(self.quiet.acquire(), REBALANCE_CONFIRM_SECONDS)
        except TimeoutError:
            return held
        try:
            for partition in partitions:
                state = self.partitions.get(partition) or _Partition()  # not written to
                if self._open_db(partition) is None or state.broken:
                    continue
                if not await self._confirmed(state, max(0.0, deadline - loop.time())):
                    continue
                offset = self._held_offset(partition, state.confirmed_offset)
                if offset is not None:
                    self._persist_offset(partition, offset)
                held.add(partition)
        finally:
            self.quiet.release()
        return held

    async def take_checkpoint(self, partition: int, state: _Partition) -> None:
        """At a quiescent point: the offset into the database, then a checkpoint swapped in.

        Whether the copy is whole is asked again once its sends are confirmed, however long
        that took: a rebalance meanwhile may have Faust replaying the changelog into it."""
        if self._whole(partition) is None or not await self._confirmed(state):
            return
        if (db := self._whole(partition)) is None:
            return
        started = time.monotonic()
        offset = self._held_offset(partition, state.confirmed_offset)
        if offset is None:  # it holds nothing of the changelog: nothing to restore
            state.events_since_checkpoint = 0
            state.checkpoint_before_writes = False
            return
        self._persist_offset(partition, offset)
        files = self.files(partition)
        final = files.checkpoint
        old, tmp = files.with_suffix(final, ".old"), files.with_suffix(final, ".tmp")
        final.parent.mkdir(parents=True, exist_ok=True)
        shutil.rmtree(tmp, ignore_errors=True)
        Checkpoint(db).create_checkpoint(str(tmp))
        _write_durably(tmp / files.checkpoint_stamp.name, self._stamp(partition, offset).to_bytes())
        _fsync_directory(tmp)
        if final.exists():
            final.rename(old)
        tmp.rename(final)  # the commit point
        _fsync_directory(final.parent)
        shutil.rmtree(old, ignore_errors=True)
        state.events_since_checkpoint = 0
        state.checkpoint_before_writes = False
        state.last_checkpoint = time.monotonic()
        log.debug(
            "partition %d checkpointed at changelog offset %d in %.0f ms",
            partition,
            offset,
            (state.last_checkpoint - started) * 1000,
        )

    def _whole(self, partition: int) -> Rdict | None:
        """The partition's open copy if a checkpoint may be taken of it: it holds the whole
        changelog, no changeset of which waits to be retired."""
        db = self._open_db(partition)
        if db is None or not self.at_changelog_end(partition) or self.unretired(partition):
            return None
        return db

    def _held_offset(self, partition: int, confirmed_offset: int) -> int | None:
        """The changelog offset the partition's database holds everything up to: the last of
        its own writes confirmed, or what recovery laid in before them (a partition given only
        events it held already, redelivered after a kill, sent nothing); None if neither."""
        topic = self.table.changelog_topic.get_topic_name()
        recovered = self.store.persisted_offset(TP(topic, partition))
        held = max(confirmed_offset, -1 if recovered is None else recovered)
        return None if held < 0 else held

    def _stamp(self, partition: int, offset: int, followed_at_ms: int | None = None) -> Stamp:
        """A stamp of the partition's copy at the changelog's end now, or last at
        `followed_at_ms`. Now is noted in `followed_at`: a standby stamped at the end every
        `CHECKPOINT_SECONDS` kept the time the worker started, and a clean stop that caught it
        a record behind stamped it with that, throwing away the stamps since."""
        if followed_at_ms is None:
            followed_at_ms = self.followed_at[partition] = int(time.time() * 1000)
        return Stamp(self.cluster_id, offset, followed_at_ms)

    async def finish(self) -> None:
        """At a clean stop: every open partition flushed and stamped; dirty ones marked clean
        once their writes are confirmed (else they stay dirty, and the next start restores
        their checkpoint)."""
        dbs = dict(self.store._dbs)
        try:
            await asyncio.wait_for(self.quiet.acquire(), STOP_TIMEOUT)
        except TimeoutError:
            log.warning("stopping mid-event: local state is restored from checkpoints next start")
            return
        try:
            for partition, db in dbs.items():
                await self._close_cleanly(partition, db)
        finally:
            self.quiet.release()

    async def _close_cleanly(self, partition: int, db: Rdict) -> None:
        """Flush and stamp the copy: as of now if it is at the changelog's end, else as of when
        it last was (a standby behind, a copy whose recovery the stop cut short). The stamp is
        replaced whole: written in place every `CHECKPOINT_SECONDS` (`stamp_due`), a crash in
        the middle of it left a stamp cut short, and the next start replayed the whole
        changelog."""
        files = self.files(partition)
        state = self.partitions.get(partition) or _Partition()  # not written to: clean
        if self.unretired(partition):
            log.info(
                "partition %d: changesets of an earlier release not yet retired: the copy is"
                " not stamped, the next start reads them again",
                partition,
                extra={"partition": partition},
            )
            return
        confirming = state.dirty and self.at_changelog_end(partition)
        if confirming and not await self._confirmed(state, STOP_TIMEOUT):
            log.warning("partition %d: changes unconfirmed, its checkpoint is used", partition)
            return
        at_end = self.at_changelog_end(partition)  # after the wait: a rebalance may have come
        if state.dirty and not at_end:  # let go at a rebalance, given back as a standby
            log.info("partition %d: behind the changelog, its checkpoint is used", partition)
            return
        offset = self._held_offset(partition, state.confirmed_offset)
        followed_at = None if at_end else self.followed_at.get(partition)
        if offset is None or not self.cluster_id or not (at_end or followed_at is not None):
            return
        self._persist_offset(partition, offset)
        db.flush()
        stamp = self._stamp(partition, offset, followed_at)
        _replace_durably(files.stamp, files.stamp_draft, stamp.to_bytes())
        if state.dirty:
            files.dirty.unlink(missing_ok=True)
            state.dirty = False
        _fsync_directory(files.db.parent)
