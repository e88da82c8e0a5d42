"""The one door to projection state: an ordered key-value transaction.

Projections never touch storage directly. They read and write through a `StateTransaction`,
so the same rules run inside a Faust agent (RocksDB tables) and in-process (`MemoryState`).
Keys come from `projections.keys.pack`; values are orjson documents.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Protocol

from sortedcontainers import SortedDict


class StateTransaction(Protocol):
    """Ordered key-value access, as RocksDB and a sorted dict both give it."""

    def get(self, key: bytes) -> bytes | None:
        """The value at `key`, or None."""

    def put(self, key: bytes, value: bytes) -> None:
        """Set `key` to `value`."""

    def delete(self, key: bytes) -> None:
        """Remove `key` (a tombstone where the store keeps a changelog)."""

    def scan(
        self, prefix: bytes, *, reverse: bool = False, start: bytes | None = None
    ) -> Iterator[tuple[bytes, bytes]]:
        """Entries whose key starts with `prefix`, in key order (or reversed).

        `start`, when given, is an inclusive bound: the first key yielded is the first at or
        after it going forward, or at or before it going in reverse.
        """


def prefix_end(prefix: bytes) -> bytes:
    """The smallest key greater than every key that starts with `prefix`."""
    return prefix + b"\xff"


class MemoryState:
    """An in-process `StateTransaction` over a sorted dict: replays, tests, benchmarks."""

    def __init__(self) -> None:
        self._data: SortedDict = SortedDict()

    def get(self, key: bytes) -> bytes | None:
        value: bytes | None = self._data.get(key)
        return value

    def put(self, key: bytes, value: bytes) -> None:
        self._data[key] = value

    def delete(self, key: bytes) -> None:
        self._data.pop(key, None)

    def scan(
        self, prefix: bytes, *, reverse: bool = False, start: bytes | None = None
    ) -> Iterator[tuple[bytes, bytes]]:
        if reverse:
            upper = prefix_end(prefix) if start is None else start
            keys = self._data.irange(prefix, upper, reverse=True)
        else:
            keys = self._data.irange(prefix if start is None else start, prefix_end(prefix))
        for key in keys:
            if not key.startswith(prefix):
                return
            yield key, self._data[key]
