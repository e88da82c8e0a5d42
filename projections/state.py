"""The one door to projection state: an ordered key-value transaction.

Projections never touch storage directly. They read and write through a `StateTransaction`,
so the same rules run inside a Faust agent (RocksDB tables) and in-process (`MemoryState`).
Keys come from `projections.keys.pack`; values are orjson documents.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Protocol

from sortedcontainers import SortedDict, SortedList


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
        """Entries of the scope `[prefix, prefix_end(prefix))`, in key order (or reversed).

        `start`, when given, is an inclusive bound that only cuts: the first key yielded is
        the first of the scope at or after it going forward, or at or before it in reverse.
        """


def prefix_end(prefix: bytes) -> bytes:
    """The end (exclusive) of the scope of `prefix`: `prefix` followed by ff.

    A packed key part never starts with ff, so the scope of a packed tuple holds exactly the
    keys of the longer tuples that start with it, and never the keys of an id that merely
    extends another (`npc-a` and `npc-a\\x00b`, whose packing goes on with 00 ff).
    """
    return prefix + b"\xff"


class MemoryState:
    """An in-process `StateTransaction` over a dict and its sorted keys: replays, tests,
    benchmarks. Values live in a plain dict; only a new key pays for keeping the order."""

    def __init__(self) -> None:
        self._data: dict[bytes, bytes] = {}
        self._keys: SortedList = SortedList()

    def get(self, key: bytes) -> bytes | None:
        return self._data.get(key)

    def put(self, key: bytes, value: bytes) -> None:
        if key not in self._data:
            self._keys.add(key)
        self._data[key] = value

    def delete(self, key: bytes) -> None:
        if self._data.pop(key, None) is not None:
            self._keys.remove(key)

    def scan(
        self, prefix: bytes, *, reverse: bool = False, start: bytes | None = None
    ) -> Iterator[tuple[bytes, bytes]]:
        for key in keys_in_scope(self._keys, prefix, reverse=reverse, start=start):
            yield key, self._data[key]

    def items(self) -> Iterator[tuple[bytes, bytes]]:
        """Every entry in key order (for comparing whole states)."""
        for key in self._keys:
            yield key, self._data[key]


def keys_in_scope(
    data: SortedDict | SortedList, prefix: bytes, *, reverse: bool, start: bytes | None
) -> Iterator[bytes]:
    """The keys of a sorted dict or list that a `StateTransaction.scan` of the same arguments
    visits."""
    end = prefix_end(prefix)
    if reverse:
        upper = end if start is None or start >= end else start
        yield from data.irange(prefix, upper, inclusive=(True, upper != end), reverse=True)
    else:
        lower = prefix if start is None else max(start, prefix)
        yield from data.irange(lower, end, inclusive=(True, False))
