"""A state that records its writes: what a worker killed mid-event keeps is a prefix of them."""

from __future__ import annotations

from projections.state import MemoryState


class Recorded(MemoryState):
    """A copy of a state that records every write made to it, in order."""

    def __init__(self, source: MemoryState) -> None:
        super().__init__()
        for key, value in source.items():
            super().put(key, value)
        self.writes: list[tuple[bytes, bytes | None]] = []

    def put(self, key: bytes, value: bytes) -> None:
        self.writes.append((key, value))
        super().put(key, value)

    def delete(self, key: bytes) -> None:
        self.writes.append((key, None))
        super().delete(key)

    def last_writes(self) -> list[tuple[bytes, bytes | None]]:
        """Each key written once, with its last value, in the order of its last write: what the
        worker sends to the changelog (`streams.changelog`), of which a crash keeps a prefix."""
        last: dict[bytes, bytes | None] = {}
        for key, value in self.writes:
            last.pop(key, None)
            last[key] = value
        return list(last.items())


def laid_in(state: MemoryState, writes: list[tuple[bytes, bytes | None]]) -> Recorded:
    """A copy of `state` with `writes` made to it: what a worker killed mid-event (or
    mid-upgrade) restarts from."""
    copy = Recorded(state)
    for key, value in writes:
        copy.put(key, value) if value is not None else copy.delete(key)
    return copy
