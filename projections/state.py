"""The one door to projection state: an ordered key-value transaction.

Projections never touch storage directly. They read and write through a `StateTransaction`,
so the same rules run inside a Faust agent (RocksDB tables) and in-process (`MemoryState`).
Keys come from `projections.keys.pack`; values are orjson documents.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Protocol

from sortedcontainers import SortedDict, SortedList

from projections.memory_access import MemoryAccess


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


def kept(value: bytes) -> bytes:
    """`value` in memory of its own length, for a store that keeps it: orjson (3.12 on) hands
    each document back in a buffer of 4 KB or more, which a held value would keep whole."""
    return b"".join((value, b""))


class MemoryState(MemoryAccess):
    """An in-process `StateTransaction` over a dict: replays, tests, benchmarks.

    Values live in a plain dict. Key order is kept per key space (a key's first packed part,
    `projections.key_prefixes`), and only when the space is scanned: a new key waits among its
    space's fresh keys until then. Most spaces an event writes (memories, their indexes, the
    outbox) are scanned by reads alone, so the fold pays a dict insert for them and the first
    scan after a run of writes sorts them in at once. Its get and put (`MemoryAccess`, in C)
    are the fold's commonest calls."""

    def __init__(self) -> None:
        self._data: dict[bytes, bytes] = {}
        self._spaces: dict[bytes, _Space] = {}
        self._new_space = _Space

    def delete(self, key: bytes) -> None:
        if self._data.pop(key, None) is not None:
            space = self._spaces[space_of(key)]
            if key in space.fresh:
                space.fresh.remove(key)
            else:
                space.ordered.remove(key)

    def scan(
        self, prefix: bytes, *, reverse: bool = False, start: bytes | None = None
    ) -> Iterator[tuple[bytes, bytes]]:
        data = self._data
        if SPACE_END in prefix:  # the one space the prefix names: no list of spaces to walk
            space = self._spaces.get(space_of(prefix))
            if space is not None:
                for key in keys_in_scope(space.sorted(), prefix, reverse=reverse, start=start):
                    yield key, data[key]
            return
        for space in self._spaces_of(prefix, reverse):
            for key in keys_in_scope(space.sorted(), prefix, reverse=reverse, start=start):
                yield key, data[key]

    def items(self) -> Iterator[tuple[bytes, bytes]]:
        """Every entry in key order (for comparing whole states)."""
        for name in sorted(self._spaces):
            for key in self._spaces[name].sorted():
                yield key, self._data[key]

    def _spaces_of(self, prefix: bytes, reverse: bool) -> list[_Space]:
        """The spaces whose names start with `prefix` (one shorter than a space name), in key
        order (or reversed)."""
        names = sorted((name for name in self._spaces if name.startswith(prefix)), reverse=reverse)
        return [self._spaces[name] for name in names]


SPACE_END = b"\x00"
"""Ends a key's first packed part, which names its key space (`space_of`)."""


def space_of(key: bytes) -> bytes:
    """The key space a key belongs to: its bytes up to the end of its first packed part (the
    whole key if it has none). Spaces never overlap: all keys of one sort before all keys of
    any space named after it."""
    end = key.find(SPACE_END)
    return key if end == -1 else key[: end + 1]


class _Space:
    """The keys of one key space: those in order, and those written since its last scan."""

    __slots__ = ("fresh", "ordered")

    def __init__(self) -> None:
        self.ordered: SortedList = SortedList()
        self.fresh: set[bytes] = set()

    def sorted(self) -> SortedList:
        """Every key of the space, in order: the fresh ones sorted in first."""
        if self.fresh:
            self.ordered.update(self.fresh)
            self.fresh.clear()
        return self.ordered


def keys_in_scope(
    data: SortedDict | SortedList, prefix: bytes, *, reverse: bool, start: bytes | None
) -> Iterator[bytes]:
    """The keys of a sorted dict or list that a `StateTransaction.scan` of the same arguments
    visits (the sorted container's own iterator: no generator of ours around it)."""
    end = prefix_end(prefix)
    if reverse:
        upper = end if start is None or start >= end else start
        keys: Iterator[bytes] = data.irange(
            prefix, upper, inclusive=(True, upper != end), reverse=True
        )
        return keys
    lower = prefix if start is None else max(start, prefix)
    keys = data.irange(lower, end, inclusive=(True, False))
    return keys
