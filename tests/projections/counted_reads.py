"""A state that counts what reads look at, for tests that a read's work does not grow with
what it need not touch."""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from projections.projector import Projector
from projections.state import MemoryState
from streams.replay import messages


class CountedReads(MemoryState):
    """A `MemoryState` that counts what reads look at: each point lookup and each entry a scan
    passes (`looked_at`), and each scan begun (`scans`: an empty one passes no entry)."""

    def __init__(self) -> None:
        super().__init__()
        self.looked_at = 0
        self.scans = 0

    def get(self, key: bytes) -> bytes | None:
        self.looked_at += 1
        return super().get(key)

    def scan(
        self, prefix: bytes, *, reverse: bool = False, start: bytes | None = None
    ) -> Iterator[tuple[bytes, bytes]]:
        self.scans += 1
        for entry in super().scan(prefix, reverse=reverse, start=start):
            self.looked_at += 1
            yield entry

    def uncounted(self) -> CountedReads:
        """This state, its counts back to 0 (what folding it looked at left out)."""
        self.looked_at = self.scans = 0
        return self


def counted_replay(lines: Sequence[bytes]) -> CountedReads:
    """The raw event lines folded as `streams.replay.replay_lines` folds them, into a state
    counting from 0 what later reads look at."""
    state, projector = CountedReads(), Projector()
    for message in messages(list(lines)):
        projector.receive(state, message)
    return state.uncounted()
