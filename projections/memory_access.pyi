"""A memory state's get and put, one C call each (`memory_access.c` says why)."""

from collections.abc import Callable
from typing import Any

class MemoryAccess:
    """The fields `projections.state.MemoryState` assigns, and its get and put."""

    _data: dict[bytes, bytes]
    _spaces: dict[bytes, Any]
    _new_space: Callable[[], Any]

    def get(self, key: bytes) -> bytes | None:
        """The value at `key`, or None."""

    def put(self, key: bytes, value: bytes) -> None:
        """Set `key` to `value`; a new key waits among its space's fresh keys."""
