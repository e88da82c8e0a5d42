"""A batch transaction's get and put, one C call each (`batch_access.c` says why)."""

from rocksdict import Rdict, WriteBatch

from streams.changelog import PartitionWrites

class BatchAccess:
    """The fields `streams.state.BatchTransaction` assigns, and its get and put."""

    _db: Rdict
    _known: dict[bytes, bytes | None] | None
    _heads: dict[bytes, bytes | None]
    _earlier: dict[bytes, bytes | None]
    _earlier_heads: dict[bytes, bytes | None]
    _head_spaces: frozenset[bytes]
    _writes: PartitionWrites
    _through: set[bytes]
    _held: WriteBatch

    def get(self, key: bytes) -> bytes | None:
        """The value of `key`: from the kept values, else the database (kept then)."""

    def put(self, key: bytes, value: bytes) -> None:
        """Set `key` to `value`: kept, in the event's writes, and held or written through."""
