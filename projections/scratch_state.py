"""Scratch state: a `StateTransaction` that reads through to another and never writes to it.

Applying an event to scratch state shows what it would do (in model mode: which judgements it
raises) and leaves nothing behind: the writes stay in the scratch layer and are thrown away
with it.
"""

from __future__ import annotations

from collections.abc import Iterator

from sortedcontainers import SortedDict

from projections.state import StateTransaction, keys_in_scope

Entry = tuple[bytes, bytes]


class ScratchState:
    """`base` as it would read after this layer's writes (None in the layer: deleted)."""

    def __init__(self, base: StateTransaction) -> None:
        self._base = base
        self._written: SortedDict = SortedDict()

    def get(self, key: bytes) -> bytes | None:
        if key in self._written:
            value: bytes | None = self._written[key]
            return value
        return self._base.get(key)

    def put(self, key: bytes, value: bytes) -> None:
        self._written[key] = value

    def delete(self, key: bytes) -> None:
        self._written[key] = None

    def scan(
        self, prefix: bytes, *, reverse: bool = False, start: bytes | None = None
    ) -> Iterator[Entry]:
        base = self._base.scan(prefix, reverse=reverse, start=start)
        keys = list(keys_in_scope(self._written, prefix, reverse=reverse, start=start))
        written = ((key, self._written[key]) for key in keys)  # the layer is one message's
        below, over = next(base, None), next(written, None)
        while below is not None or over is not None:
            if below is not None and (over is None or _before(below[0], over[0], reverse)):
                yield below
                below = next(base, None)
                continue
            assert over is not None
            if below is not None and below[0] == over[0]:
                below = next(base, None)  # the layer's write hides the base's entry
            if over[1] is not None:
                yield over[0], over[1]
            over = next(written, None)


def _before(key: bytes, other: bytes, reverse: bool) -> bool:
    """Whether a scan in that direction visits `key` before `other`."""
    return key > other if reverse else key < other
