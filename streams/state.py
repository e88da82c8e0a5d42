"""RocksDB behind the `StateTransaction` door, as a Faust table partition holds it.

Reads go straight to the partition's rocksdict database (ordered seeks, no Faust overhead).
Writes go through a callback: in the worker that writes the database and collects the write for
the table's changelog topic (`streams.changelog`), so it survives the loss of the machine.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from rocksdict import Rdict, WriteOptions

from projections.state import prefix_end

Write = Callable[[bytes, bytes | None], None]
"""Set a key (or delete it, given None)."""


class RocksTransaction:
    """A `StateTransaction` over one rocksdict database."""

    def __init__(self, db: Rdict, write: Write) -> None:
        self._db = db
        self._write = write

    def get(self, key: bytes) -> bytes | None:
        value: bytes | None = self._db.get(key)
        return value

    def put(self, key: bytes, value: bytes) -> None:
        self._write(key, value)

    def delete(self, key: bytes) -> None:
        self._write(key, None)

    def scan(
        self, prefix: bytes, *, reverse: bool = False, start: bytes | None = None
    ) -> Iterator[tuple[bytes, bytes]]:
        end = prefix_end(prefix)
        iterator = self._db.iter()
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


BLOOM_BITS_PER_KEY = 10
"""Most lookups ask whether a character knows some news, and the answer is mostly no: a
10-bit bloom filter (~1% false positives) answers those without reading a block."""


def state_options(block_cache_mb: int) -> dict[str, int]:
    """RocksDB options of each state partition (Faust's `RocksDBOptions` keywords).

    Faust's defaults (a 2 GiB block cache per partition, 3-bit bloom filters) are sized down
    to the cache asked for and up to useful filters.
    """
    size = block_cache_mb * 1024 * 1024
    return {
        "block_cache_size": size,
        "write_buffer_size": size,
        "bloom_filter_size": BLOOM_BITS_PER_KEY,
    }


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
