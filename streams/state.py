"""RocksDB behind the `StateTransaction` door, as a Faust table partition holds it.

Reads go straight to the partition's rocksdict database (ordered seeks, no Faust overhead).
Writes go through a callback: in the worker that writes the database and collects the write for
the table's changelog topic (`streams.changelog`), so it survives the loss of the machine.
"""

from __future__ import annotations

import asyncio
import errno
import shutil
import tempfile
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from itertools import islice
from pathlib import Path
from typing import Any, TypeVar

from faust.stores.rocksdb import RocksDBOptions
from rocksdict import (
    AccessType,
    DBCompressionType,
    Options,
    Rdict,
    RdictIter,
    ReadOptions,
    WriteBatch,
    WriteOptions,
)

from projections.key_prefixes import HEADS
from projections.keys import pack
from projections.state import SPACE_END, StateTransaction, kept, prefix_end, space_of
from streams.batch_access import BatchAccess
from streams.changelog import PartitionWrites

Write = Callable[[bytes, bytes | None], None]
"""Set a key (or delete it, given None)."""


Known = dict[bytes, bytes | None]
"""Values of keys read or written lately (None: absent), as the database holds them."""

HOT_KEYS = 1 << 15
"""The values one generation of a partition's kept values (`HotValues`) holds before the next
batch starts a new one; heads have generations of their own, of `HEAD_KEYS`."""
HEAD_KEYS = 1 << 17
"""The heads one generation of a partition's `HotValues` holds (some 190 bytes each: a
500-character town with rumours spreading has 227,000 by 20,000 events, read again every few
thousand events)."""
HOT_BYTES = 32 << 20
"""The bytes of values a generation of `HOT_KEYS` holds before the next batch starts a new one,
however few they are: a memory copies its event's facts, and 32,768 memories of events of
16 KB are half a gigabyte (a town's fill by count first, at some 20 MB)."""
HEAD_BYTES = 64 << 20
"""The same for heads (a town's 131,072 take some 25 MB; a batch may add many more)."""
KEPT_GENERATION = 4
"""A full generation is kept as the one before if it holds at most this many times its size (a
batch may add more than a generation's size: a town's adds some 40,000 values) and at most
its bytes; one a batch filled far beyond (a world's deletion writes every key of the
world) is dropped at once."""
SAMPLED_VALUES = 256
"""How many values, evenly spread, a generation's bytes are estimated from between batches
(measuring them all cost a walk over 131,072 heads after every batch)."""
HEAD_SPACES = frozenset(pack(space) for space in HEADS)
"""The packed spaces (`space_of`) whose values `HotValues` keeps as heads."""


class Generations:
    """Values kept in two generations: the `current` one, read and written through, and the
    one `previous`, read through; a value read from there moves on into the current one."""

    def __init__(self, size: int, max_bytes: int) -> None:
        self.size = size
        self.max_bytes = max_bytes
        self.current: Known = {}
        self.previous: Known = {}

    def turn(self) -> None:
        """Start a new generation if the current one holds more than `size` values or
        `max_bytes`, keeping it as the one before (the one before that is dropped) unless a
        batch filled it far beyond its size, or beyond its bytes."""
        held = len(self.current)
        over_size = held > self.size
        held_bytes = _estimated_bytes(self.current)
        if over_size or held_bytes > self.max_bytes:
            kept = held <= KEPT_GENERATION * self.size and held_bytes <= self.max_bytes
            self.previous, self.current = self.current if kept else {}, {}

    def forget(self) -> None:
        """Drop every value, in place (transactions reading through them see it)."""
        self.current.clear()
        self.previous.clear()


def _estimated_bytes(values: Known) -> int:
    """The bytes of `values`, estimated from `SAMPLED_VALUES` of them evenly spread."""
    held = len(values)
    if not held:
        return 0
    sample = list(islice(values.values(), 0, None, max(1, held // SAMPLED_VALUES)))
    return sum(len(value) for value in sample if value is not None) * held // len(sample)


class HotValues:
    """The values a partition's ingest agent read or wrote lately, kept between its batches (a
    dict lookup where a RocksDB read costs fifty), in two pairs of generations.

    Heads (`projections.key_prefixes.HEADS`) are read again and again, but far apart: a pair's
    relation when its character next forms a memory of the other, hundreds of events later in a
    town. They keep generations of their own (`HEAD_KEYS`), which no other value fills. Every
    other value lives in generations of `HOT_KEYS`: what was written once and not read again
    (memories, versions, logs) goes with its generation. A key the batches keep reading moves
    on into each new generation at its first read. A single dict of every value, dropped whole
    once over 32,768, read every head of a town again from RocksDB after each batch.
    Valid while only the agent writes the database.
    """

    def __init__(self) -> None:
        self.heads = Generations(HEAD_KEYS, HEAD_BYTES)
        self.others = Generations(HOT_KEYS, HOT_BYTES)

    def next_batch(self) -> HotValues:
        """Start new generations where the current ones are full; these values, for the next
        batch. Between batches only: a batch's held writes are read from its values until laid
        in."""
        self.heads.turn()
        self.others.turn()
        return self

    def forget(self) -> None:
        """Drop every value, in place: something other than the agent may have written the
        database. Within a batch, only once its held writes are laid in
        (`BatchTransaction.lay_in`)."""
        self.heads.forget()
        self.others.forget()


class RocksTransaction:
    """A `StateTransaction` over one rocksdict database.

    Given `hot`, it answers a key read or written before from there and keeps it up to date
    with its writes: it may be shared by the transactions of consecutive events while nothing
    else writes the database.
    """

    def __init__(self, db: Rdict, write: Write, hot: HotValues | None = None) -> None:
        self._db = db
        self._write = write
        self._known = None if hot is None else hot.others.current
        self._heads: Known = {} if hot is None else hot.heads.current
        self._earlier: Known = {} if hot is None else hot.others.previous
        self._earlier_heads: Known = {} if hot is None else hot.heads.previous

    def get(self, key: bytes) -> bytes | None:
        known = self._known
        if known is None:
            value: bytes | None = self._db.get(key)
            return value
        if key in known:
            return known[key]
        heads = self._heads
        if key in heads:
            return heads[key]
        if space_of(key) in HEAD_SPACES:
            known, earlier = heads, self._earlier_heads
        else:
            earlier = self._earlier
        value = known[key] = earlier[key] if key in earlier else self._db.get(key)
        return value

    def _keep(self, key: bytes, value: bytes | None, space: bytes | None = None) -> None:
        """Keep a value written among the current heads or the other current values, by its
        key's space (`space`, when the caller has it already); nothing without kept values."""
        if self._known is None:
            return
        if (space_of(key) if space is None else space) in HEAD_SPACES:
            self._heads[key] = value
        else:
            self._known[key] = value

    def put(self, key: bytes, value: bytes) -> None:
        value = kept(value)
        self._keep(key, value)
        self._write(key, value)

    def delete(self, key: bytes) -> None:
        self._keep(key, None)
        self._write(key, None)

    def scan(
        self, prefix: bytes, *, reverse: bool = False, start: bytes | None = None
    ) -> Iterator[tuple[bytes, bytes]]:
        return ordered_scan(self._db.iter, prefix, reverse=reverse, start=start)


def ordered_scan(
    iterator_of: Callable[[], RdictIter], prefix: bytes, *, reverse: bool, start: bytes | None
) -> Iterator[tuple[bytes, bytes]]:
    """A `StateTransaction.scan` by ordered seeks of the iterator `iterator_of` gives once the
    scan begins."""
    end = prefix_end(prefix)
    iterator = iterator_of()
    if reverse:
        iterator.seek_for_prev(end if start is None or start >= end else start)
        if iterator.valid() and iterator.key() == end:
            iterator.prev()
        while iterator.valid() and (key := iterator.key()) >= prefix:
            yield key, iterator.value()
            iterator.prev()
    else:
        iterator.seek(prefix if start is None else max(start, prefix))
        while iterator.valid() and (key := iterator.key()) < end:
            yield key, iterator.value()
            iterator.next()


def refuse_writes(key: bytes, value: bytes | None) -> None:
    """The `Write` of a transaction that only reads."""
    raise PermissionError("reads never write state")


class SnapshotTransaction:
    """A read-only `StateTransaction` over a RocksDB database as it stood when this was made,
    whatever is written since, readable from another thread.

    rocksdict's own snapshots (0.3.29) honour the snapshot in a lookup but not in a scan, which
    reads the live database. A RocksDB iterator reads as of its creation: every get and scan
    here seeks one iterator, made with this. So one at a time: a get or scan inside another
    scan's loop would move the iterator under it, and is refused."""

    def __init__(self, db: Rdict) -> None:
        self._iterator = db.iter()
        self._scanning = False

    def _free_iterator(self) -> RdictIter:
        if self._scanning:
            raise RuntimeError("a snapshot is read by one get or scan at a time")
        return self._iterator

    def get(self, key: bytes) -> bytes | None:
        iterator = self._free_iterator()
        iterator.seek(key)
        if iterator.valid() and iterator.key() == key:
            value: bytes = iterator.value()
            return value
        return None

    def put(self, key: bytes, value: bytes) -> None:
        refuse_writes(key, value)

    def delete(self, key: bytes) -> None:
        refuse_writes(key, None)

    def scan(
        self, prefix: bytes, *, reverse: bool = False, start: bytes | None = None
    ) -> Iterator[tuple[bytes, bytes]]:
        iterator = self._free_iterator()
        self._scanning = True
        try:
            yield from ordered_scan(lambda: iterator, prefix, reverse=reverse, start=start)
        finally:
            self._scanning = False


Read = TypeVar("Read")


class SnapshotReads:
    """Reads of a partition made off the event loop, for those long enough to hold up every
    tenant's events and reads on the worker (a world's digest reads every key of the world: 2 to
    2.5 s in a world of 175,000 memories).

    Each reads the partition as it stood when it was asked (`SnapshotTransaction`), so it sees
    what a read on the loop would have seen then, on a thread of its own, one at a time (as a
    rumour's pictures are drawn): the loop goes on meanwhile, waiting for the GIL at most a
    switch interval at a time. A read keeps its database open: a partition is let go only once
    the reads are `finished`.
    """

    def __init__(self) -> None:
        self._reader = ThreadPoolExecutor(1, thread_name_prefix="state-reads")
        self._running: set[Future[Any]] = set()

    async def read(self, db: Rdict, read: Callable[[StateTransaction], Read]) -> Read:
        """`read` of `db` as it stands now (taken before this awaits anything)."""
        reading = self._reader.submit(read, SnapshotTransaction(db))
        self._running.add(reading)
        reading.add_done_callback(self._running.discard)
        return await asyncio.wrap_future(reading)

    async def finished(self) -> None:
        """Wait until no read runs or waits (one whose asker gave up runs on)."""
        if running := [asyncio.wrap_future(reading) for reading in set(self._running)]:
            await asyncio.wait(running)

    def stop(self) -> None:
        self._reader.shutdown()


MIN_FREE_MB = 64
"""The room a data dir must have for a worker to start: RocksDB writes a partition's state in
files of some MB (its write buffers, `RUMOURMILL_BLOCK_CACHE_MB` each). A full disk stopped
the worker with RocksDB's "No space left on device" and no word of where."""
DISK_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EIO, errno.EROFS})


def first_missing(path: Path) -> Path | None:
    """The outermost of `path` and its parents that does not exist: what making it makes (as
    `unwritable_because` does); None as well when a parent may not be looked into."""
    try:
        return next(
            (missing for missing in (*reversed(path.parents), path) if not missing.exists()), None
        )
    except OSError:
        return None


def unwritable_because(data_dir: Path) -> str | None:
    """Why `data_dir` cannot hold a worker's state (a file, a path that cannot be made, a
    read-only volume, a full disk), or None: made here if missing, so RocksDB is not the one to
    say it, in a traceback after Kafka's topics were made."""
    try:
        data_dir.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=data_dir):
            pass
        free_mb = shutil.disk_usage(data_dir).free // 2**20
    except FileExistsError:
        return "it is a file"
    except OSError as error:
        return error.strerror or str(error)
    if free_mb < MIN_FREE_MB:
        return f"its disk has {free_mb} MB free, under the {MIN_FREE_MB} MB a worker needs"
    return None


def disk_trouble(error: BaseException, data_dir: Path) -> str | None:
    """What an operator should hear of `error` if writing the local state failed for the disk
    (full, failing, read-only), or None for any other error."""
    said = str(error)
    on_disk = isinstance(error, OSError) and error.errno in DISK_ERRNOS
    if not (on_disk or said.startswith("IO error") or "No space left on device" in said):
        return None
    try:
        free = f"{shutil.disk_usage(data_dir).free // 2**20} MB free there"
    except OSError as unreadable:
        free = f"its disk unreadable: {unreadable.strerror or unreadable}"
    return (
        f"the local state in RUMOURMILL_DATA_DIR={str(data_dir)!r} could not be written"
        f" ({free}): free some space there, or start the worker on another data dir; nothing"
        " is lost: the events not committed come again at the next start, and each partition"
        " is restored from its checkpoint or the changelog"
    )


BLOOM_BITS_PER_KEY = 10
"""Most lookups ask whether a character knows some news, and the answer is mostly no: a
10-bit bloom filter (~1% false positives) answers those without reading a block."""


def state_options(block_cache_mb: int) -> dict[str, int]:
    """RocksDB options of each state partition (Faust's `RocksDBOptions` keywords).

    Faust's defaults (a 2 GiB block cache per partition, 3-bit bloom filters) are sized down
    to the cache asked for and up to useful filters. Faust keeps RocksDB's 3 write buffers, each
    the cache's size: a partition may hold 4 times it (the README's RUMOURMILL_BLOCK_CACHE_MB).
    """
    size = block_cache_mb * 1024 * 1024
    return {
        "block_cache_size": size,
        "write_buffer_size": size,
        "bloom_filter_size": BLOOM_BITS_PER_KEY,
    }


MEMTABLE_BLOOM_RATIO = 0.1
"""The share of a partition's write buffer given to the memtable's bloom filter."""
UNCOMPRESSED_LEVELS = 2
"""The levels written without compression: level 0 (each flush) and the level every compaction
of level 0 rewrites (with RocksDB's dynamic level sizes, the bottom one while a state is small:
such a state stays uncompressed)."""
LEVEL0_FILES_TO_COMPACT = 8
"""The flushed files level 0 gathers before they are compacted into the level below (RocksDB's
default is 4). State keys are spread over the whole key space, so every compaction of level 0
rewrites most of the level below it: gathering twice the files halves those rewrites."""


class StateOptions(RocksDBOptions):
    """Faust's `RocksDBOptions` (`state_options` keywords) plus a bloom filter on the memtable,
    and no compression on the levels rewritten most.

    Most of the projector's lookups ask for a key that is absent (nearly all that miss the
    worker's kept values, `HotValues`); without the filter each one searches the memtable's
    skiplist, seven times the cost of a filtered miss with a few hundred thousand keys in it.

    Compaction compresses what it rewrites: a town of 200,000 events with spreading on spent a
    third of its CPU time in RocksDB's own threads. Level 0 and the level it compacts into stay
    uncompressed (`UNCOMPRESSED_LEVELS`, as RocksDB's tuning guide advises) and the deeper
    levels, which hold most of a large state, use LZ4: RocksDB's threads took 40% less, the
    whole fold 20% less, for 5% more disk at that size (`benchmarks.rumours`; a small state, all
    in the first levels, takes twice).

    Level 0 is compacted at `LEVEL0_FILES_TO_COMPACT` files, not 4: in a town of 60,000 events
    with spreading on, RocksDB's threads then took 320 us of CPU per event instead of 570 (at
    200,000 events, a quarter less). It costs no memory: the write buffers stay as they are. A
    get looks through up to twice the level-0 files, each behind its bloom filter; a scan seeks
    in each of them, unfiltered: with 9 level-0 files a seek took 17-21 us against 4-6 us with
    none, a get 4-6 us either way. So what an event reads every time is a point lookup
    (`projections.versions.write_headed`), and scans are left to reads that need a range.
    """

    def as_options(self) -> Options:
        options: Options = super().as_options()
        options.set_memtable_whole_key_filtering(True)
        options.set_memtable_prefix_bloom_ratio(MEMTABLE_BLOOM_RATIO)
        options.set_level_zero_file_num_compaction_trigger(LEVEL0_FILES_TO_COMPACT)
        options.set_compression_per_level(
            [DBCompressionType.none()] * UNCOMPRESSED_LEVELS + [DBCompressionType.lz4()]
        )
        return options

    def open(self, path: Path, *, read_only: bool = False) -> Rdict:
        """The partition at `path`, run with these options even where it exists already.

        Faust opens it naming no column family, and rocksdict then takes the default family's
        options (block cache, filters, compression) from the directory's own OPTIONS file: a
        restart that keeps the local state would run on whatever it was created with, and a
        changed `RUMOURMILL_BLOCK_CACHE_MB` would do nothing. Named (none but the default, which
        Faust never adds to), the family is opened with these. `read_only` opens it so, as
        Faust's python-rocksdb driver did (its rocksdict one dropped it)."""
        if read_only:
            access = AccessType.read_only()
        elif self.ttl is None:
            access = AccessType.read_write()
        else:
            access = AccessType.with_ttl(self.ttl)
        db = Rdict(str(path), options=self.as_options(), column_families={}, access_type=access)
        db.set_read_options(ReadOptions())
        return db


_WITHOUT_WAL = WriteOptions()
_WITHOUT_WAL.disable_wal = True  # type: ignore[method-assign,assignment]  # a property; stub says method


def without_write_ahead_log(db: Rdict) -> Rdict:
    """`db`, writing without RocksDB's write-ahead log (2-3x faster puts).

    The local RocksDB is only a cache of the changelog: a crash that loses its unflushed
    writes loses nothing, since a start never reuses a copy written to since its last
    checkpoint or clean stop (`streams.durability`).
    """
    db.set_write_options(_WITHOUT_WAL)
    return db


Changes = list[tuple[bytes, bytes | None]]
"""The writes of one event, in order (None deletes)."""

_DELETED = (0xFFFFFFFF).to_bytes(4, "big")
"""In a changeset, where a value's length would be: the key is deleted."""


def encode_changes(changes: Changes) -> bytes:
    """One changeset: all the writes of one event, length-prefixed pairs, as the releases before
    per-key changelog records wrote them (`decode_changes` reads their changelogs; the test
    fixtures of those releases are written with this)."""
    out = bytearray()
    for key, value in changes:
        out += len(key).to_bytes(4, "big") + key
        if value is None:
            out += _DELETED
        else:
            out += len(value).to_bytes(4, "big") + value
    return bytes(out)


def decode_changes(data: bytes) -> Iterator[tuple[bytes, bytes | None]]:
    """The writes `encode_changes` packed, in order; ValueError for bytes cut short (a length
    announcing more than follows), which would otherwise be laid into the store as keys."""
    index = 0
    while index < len(data):
        key = _sized(data, index)
        index += 4 + len(key)
        if data[index : index + 4] == _DELETED:
            yield key, None
            index += 4
        else:
            value = _sized(data, index)
            yield key, value
            index += 4 + len(value)


def _sized(data: bytes, index: int) -> bytes:
    """The bytes whose 4-byte length starts at `index` of a changeset."""
    size = int.from_bytes(data[index : index + 4], "big")
    if index + 4 + size > len(data):
        raise ValueError(
            f"not a changeset: {size} byte(s) announced at byte {index}, "
            f"{max(len(data) - index - 4, 0)} follow"
        )
    return data[index + 4 : index + 4 + size]


class RecordingTransaction(RocksTransaction):
    """A `RocksTransaction` whose writes apply to the database at once (later reads of the same
    event see them), each also handed to `note` (which collects them for the changelog)."""

    def put(self, key: bytes, value: bytes) -> None:
        super().put(key, value)
        self._db.put(key, value)

    def delete(self, key: bytes) -> None:
        super().delete(key)
        self._db.delete(key)


LATELY = 64
"""How many batch transactions a key space stays written through after its last scan."""


class ScannedSpaces:
    """The key spaces the ingest agent's transactions scanned lately, which the next ones write
    straight through (`BatchTransaction`). A space left unscanned for `LATELY` transactions is
    held again: a world's deletion scans every space of it once, and would otherwise have every
    write go through for as long as the worker runs."""

    def __init__(self) -> None:
        self.transactions = 0
        self.last_scanned: dict[bytes, int] = {}
        """Each space scanned, and the transaction (by count) that scanned it last."""

    def lately(self) -> set[bytes]:
        """For a new transaction: the spaces scanned in the last `LATELY` ones."""
        self.transactions += 1
        since = self.transactions - LATELY
        return {space for space, last in self.last_scanned.items() if last >= since}

    def scanned(self, space: bytes) -> None:
        self.last_scanned[space] = self.transactions


class BatchTransaction(BatchAccess, RocksTransaction):
    """The transaction of one partition's events in a batch the agent takes: each write goes
    into `writes` (the changelog's record batches) and is kept in its `HotValues`, and most wait
    in a RocksDB write batch, laid into the database in one call at the batch's end (`lay_in`).

    A rocksdict put costs over 2 us, most of it the memtable insert; a write batch takes a write
    in a quarter of that, and lays them all in at once. rocksdict (0.3) holds the GIL while it
    does: some 1.3 us a key into a 16 MB memtable, during which the agent's thread runs next to
    nothing, so laying in on another thread overlaps what the agent waits for (the broker), not
    what it computes.

    Reads see the held writes: a get through the kept values, which have them all (no
    generation is dropped within a batch, and the agent forgets them only once the batch's held
    writes are laid in), and a scan because the key spaces ingest scans (a few: who is where,
    waiting timelines) are written straight through. Those are the spaces `scanned` lately: a
    transaction learns one at its first scan, laying in all it held then.

    Its get and put (`BatchAccess`, in C) are the agent's commonest calls. The get is
    `RocksTransaction.get`; a put keeps the value (`kept`) among the kept values, adds it to the
    event's writes (`PartitionWrites.write`), and holds it, or writes it through by its space.
    """

    def __init__(
        self, db: Rdict, writes: PartitionWrites, hot: HotValues, scanned: ScannedSpaces
    ) -> None:
        super().__init__(db, writes.write, hot)
        self._writes = writes
        self._known: Known = hot.others.current
        self._scanned = scanned
        self._through = scanned.lately()
        """The spaces this transaction writes through: those scanned lately when it began, and
        those it learned itself (one another learned since may have writes held here)."""
        self._held = WriteBatch(raw_mode=True)
        self._head_spaces = HEAD_SPACES

    def delete(self, key: bytes) -> None:
        space = space_of(key)
        self._keep(key, None, space)
        self._write(key, None)
        if space in self._through:
            self._db.delete(key)
        else:
            self._held.delete(key)

    def scan(
        self, prefix: bytes, *, reverse: bool = False, start: bytes | None = None
    ) -> Iterator[tuple[bytes, bytes]]:
        if SPACE_END not in prefix:  # a prefix of several spaces: what they hold, laid in
            self.lay_in()
        else:
            space = space_of(prefix)
            if space not in self._through:
                self.lay_in()
                self._through.add(space)
            self._scanned.scanned(space)
        return super().scan(prefix, reverse=reverse, start=start)

    @property
    def holding(self) -> bool:
        """Whether writes wait to be laid in."""
        return not self._held.is_empty()

    def lay_in(self) -> None:
        """Lay the writes held so far into the database, in one call that holds the GIL
        throughout: the agent lays a finished batch's in on another thread while it waits for
        the broker (`streams.app.StateTable`)."""
        if self.holding:
            held, self._held = self._held, WriteBatch(raw_mode=True)
            self._db.write(held)


def recording_transaction(db: Rdict, note: Write, hot: HotValues | None = None) -> RocksTransaction:
    """A transaction over `db` whose writes apply at once, each also handed to `note` (which
    collects them for the changelog); reads answered from `hot` where they can."""
    return RecordingTransaction(db, note, hot)
