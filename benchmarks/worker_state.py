"""State as a worker's partition keeps it, for benchmarks that fold in-process.

RocksDB opened as a worker opens a partition (`StateOptions`), written as the ingest agent
writes it (`streams.app.Rumourmill.take`), its writes collected for the changelog but never
sent: in batches of `BATCH_EVENTS`, each through one `BatchTransaction` reading through the
values kept between batches (`HotValues`), its held writes laid in at its end (here, not on
another thread); what outlives a batch is then left out of the garbage collector's walks, as the
ingest agent leaves it (`YoungGarbageOnly`: without, a town's fold spent a second more of its 30
collecting, spreading on, the memories it keeps).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from rocksdict import Rdict

from projections.delivery import SourceMessage
from projections.projector import Projector
from streams.app import YoungGarbageOnly
from streams.changelog import PartitionWrites
from streams.settings import DEFAULT_BATCH_EVENTS as BATCH_EVENTS
from streams.state import (
    BatchTransaction,
    HotValues,
    RocksTransaction,
    ScannedSpaces,
    StateOptions,
    refuse_writes,
    state_options,
    without_write_ahead_log,
)

BLOCK_CACHE_MB = 16
"""As a worker's partition has it by default (`RUMOURMILL_BLOCK_CACHE_MB`)."""


class WorkerPartition:
    """One partition's RocksDB, fed as the ingest agent feeds it."""

    def __init__(self, directory: Path) -> None:
        options = StateOptions(**state_options(BLOCK_CACHE_MB), use_rocksdict=True)
        self.db: Rdict = without_write_ahead_log(options.open(directory))
        self._hot = HotValues()
        self._scanned = ScannedSpaces()
        self._garbage = YoungGarbageOnly()

    def take(self, projector: Projector, messages: Sequence[SourceMessage]) -> None:
        """Fold `messages` in, `BATCH_EVENTS` at a time."""
        for start in range(0, len(messages), BATCH_EVENTS):
            writes = PartitionWrites()  # collected as the agent collects them, then dropped
            tx = BatchTransaction(self.db, writes, self._hot.next_batch(), self._scanned)
            for message in messages[start : start + BATCH_EVENTS]:
                projector.receive(tx, message)
                writes.end_event()
            tx.lay_in()
            self._garbage.batch_done()

    def reader(self) -> RocksTransaction:
        """A read-only transaction, as a worker's HTTP reads have (no kept values)."""
        return RocksTransaction(self.db, refuse_writes)
