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
