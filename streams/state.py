"""RocksDB behind the `StateTransaction` door, as a Faust table partition holds it.

Reads go straight to the partition's rocksdict database (ordered seeks, no Faust overhead).
Writes go through a callback: in the worker that is the Faust table, so every write also
reaches the table's changelog topic and survives the loss of the machine.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from rocksdict import Rdict

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
        iterator = self._db.iter()
        if reverse:
            iterator.seek_for_prev(prefix_end(prefix) if start is None else start)
        else:
            iterator.seek(prefix if start is None else start)
        while iterator.valid():
            key = iterator.key()
            if not key.startswith(prefix):
                return
            yield key, iterator.value()
            if reverse:
                iterator.prev()
            else:
                iterator.next()
