"""Encoded reads kept by what they were computed from, so a game polling a mind pays once.

A character's runtime read cannot change until something it folds moves: its timeline, an
ancestor up to the branch point, or the world's persistent scope
(`projections.runtime_read.read_position`). An answer is kept with that position and served
again only while the position is the same, so a new event is never hidden by the cache. One
answer per read asked (the character and timeline, and the position it is asked as of) is
kept, the least recently read make room first, and the
encoded bytes held stay under a bound. A deleted world's answers are dropped as the deletion
is taken (`forget_world`): they hold its memories, and would stay until pushed out.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Hashable

READ_CACHE_BYTES = 64 * 1024 * 1024
"""Encoded runtime reads a worker keeps (about 3,500 busy characters of 18 KB)."""
ENTRY_OVERHEAD = 800
"""Bytes counted per entry beyond its body, its position and the characters of its key: the
objects that hold them and the slots that find them (some 770 measured with `tracemalloc`
for a key of four ids and a world of its own; 200 counted half what small answers took)."""

Asked = tuple[Hashable, ...]
"""What was asked: the tenant and the world first, then what else tells the answer apart."""


class ReadCache:
    """Encoded answers by (what was asked, the position it was answered at), bounded in bytes."""

    def __init__(self, max_bytes: int = READ_CACHE_BYTES) -> None:
        self.max_bytes = max_bytes
        self.held_bytes = 0
        self._answers: OrderedDict[Asked, tuple[bytes, bytes]] = OrderedDict()
        self._by_world: dict[Asked, set[Asked]] = {}
        """What was asked of each world (the first two of `Asked`): a deletion drops them
        without a walk over every answer kept (a tenant's deletion names thousands of worlds)."""

    def get(self, asked: Asked, position: bytes) -> bytes | None:
        """The answer kept for `asked` if it was computed at `position`, else None."""
        found = self._answers.get(asked)
        if found is None or found[0] != position:
            return None
        self._answers.move_to_end(asked)
        return found[1]

    def put(self, asked: Asked, position: bytes, body: bytes) -> None:
        """Keep `body` as the answer to `asked` at `position`, replacing an older one."""
        self._forget(asked)
        size = _size(asked, position, body)
        if size > self.max_bytes:
            return
        while self.held_bytes + size > self.max_bytes:
            self._forget(next(iter(self._answers)))
        self._answers[asked] = (position, body)
        self._by_world.setdefault(asked[:2], set()).add(asked)
        self.held_bytes += size

    def forget_world(self, tenant_id: str, world_id: str) -> None:
        """Drop every answer asked of the world (it was deleted)."""
        for asked in self._by_world.pop((tenant_id, world_id), set()):
            self._forget(asked)

    def __len__(self) -> int:
        return len(self._answers)

    def _forget(self, asked: Asked) -> None:
        found = self._answers.pop(asked, None)
        if found is None:
            return
        self.held_bytes -= _size(asked, *found)
        world = self._by_world.get(asked[:2])
        if world is not None:
            world.discard(asked)
            if not world:
                del self._by_world[asked[:2]]


def _size(asked: Asked, position: bytes, body: bytes) -> int:
    named = sum(len(part) for part in asked if isinstance(part, str))
    return len(position) + len(body) + named + ENTRY_OVERHEAD
