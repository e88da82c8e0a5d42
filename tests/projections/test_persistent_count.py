"""A world's count of persistent memories (in the digest, and in what a cached read is keyed by:
`runtime_read.read_position`) counts an event's once, however much of the event's writes were
laid in before it is applied again: the worker is at-least-once, and a crash between two
changelog batches of one event leaves a prefix of its writes."""

from __future__ import annotations

from collections.abc import Sequence

from projections.delivery import SourceMessage, world_key
from projections.digest import world_digest
from projections.memory_store import memory_keys, persistent_memories_stored, store_memories
from projections.projector import Projector
from projections.state import MemoryState
from schemas.memory import Memory
from tests.tavern import PERSISTENT, TAVERN

Formed = tuple[Sequence[Memory], Sequence[Memory]]
"""What an event formed: memories perceived or told, then rumours passed."""


class LastWrites(MemoryState):
    """A `MemoryState` that keeps the writes made to it in the order of their last write, as a
    worker's changelog keeps an event's."""

    def __init__(self, state: MemoryState) -> None:
        super().__init__()
        for key, value in state.items():
            super().put(key, value)
        self.writes: dict[bytes, bytes] = {}

    def put(self, key: bytes, value: bytes) -> None:
        super().put(key, value)
        self.writes.pop(key, None)
        self.writes[key] = value


def folded(lines: list[bytes]) -> tuple[MemoryState, list[Formed]]:
    """The lines taken in, and what each event formed."""
    formed: list[Formed] = []
    projector = Projector(
        policies=lambda tenant, world: PERSISTENT,
        on_formed=lambda memories, rumours: formed.append((memories, rumours)),
    )
    state = MemoryState()
    for offset, line in enumerate(lines):
        projector.receive(state, SourceMessage("events", 0, offset, world_key(line), line))
    return state, formed


def store(state: MemoryState, formed: Formed) -> None:
    """What an event formed, stored as the projector stores it (`Projector.apply`)."""
    memories, rumours = formed
    keys = memory_keys(state, "default", "save-1")
    store_memories(state, keys, memories, rumours=rumours, spreading=True)


def test_an_event_stored_again_over_any_prefix_of_its_writes_counts_its_memories_once() -> None:
    lines = TAVERN.splitlines()
    before, _ = folded(lines[:3])
    _, formed = folded(lines[:4])
    entered = formed[-1]  # Tomas enters: he sees Mara, and she tells him what she saw
    memories = [*entered[0], *entered[1]]
    assert entered[1] and all(memory.persistent for memory in memories)

    once = LastWrites(before)
    store(once, entered)
    counted = persistent_memories_stored(once, "default", "save-1")
    assert counted == persistent_memories_stored(before, "default", "save-1") + len(memories)
    digest = world_digest(once, "default", "save-1")
    writes = list(once.writes.items())
    for laid_in in range(len(writes) + 1):
        partial = LastWrites(before)
        for key, value in writes[:laid_in]:
            partial.put(key, value)
        store(partial, entered)
        assert persistent_memories_stored(partial, "default", "save-1") == counted, laid_in
        assert world_digest(partial, "default", "save-1") == digest, laid_in
