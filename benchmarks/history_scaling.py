"""(d) Scaling with history: one character with 1,000 memories vs 100,000, in two stores.

The world shape is the same in both: a character at a place witnessing events there (one
memory each). Ingest cost is the CPU time per event over the last 1,000 events (steady on a
shared machine; wall time beside it); read latency is `runtime_read` of that character. The
large case is built once, then each repeat times a freshly built small case and the next
1,000 events of the large one in turn (its history grows by 1,000 per repeat), each followed by
its reads. Each mind has a world of its own, so no case replays ids a cache has already seen.

It runs twice: on the in-process store (`MemoryState`) and on RocksDB as a worker's partition
keeps it (`benchmarks.worker_state`), which is what a worker's ingest runs on.

What grows in-process (profiled at 1,000 and 100,000): not the projection's work, which makes
the same calls at both sizes, its scans yielding as many entries; but the ordered store under
it, which takes about 11 new keys per event, each a sorted insert into a longer key list (and
colder caches, and a heap that grows). On RocksDB, a small state sits in the write buffer while
a large one is spread over files: a point lookup passes most of them by their bloom filters, a
seek looks into each level-0 file.
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from itertools import islice
from pathlib import Path

from benchmarks.story import WITNESS, witness_story
from benchmarks.support import Options, median, percentile, report, run_main
from benchmarks.worker_state import WorkerPartition
from projections.delivery import SourceMessage
from projections.key_prefixes import MEMORIES
from projections.keys import pack
from projections.projector import Projector
from projections.runtime_read import runtime_read
from projections.state import MemoryState, StateTransaction

SMALL = 1_000
FULL_LARGE = 100_000
QUICK_LARGE = 20_000
WINDOW = 1_000
READS = 300
WORLD = "history"
TENANT = "default"


class InProcess:
    """The in-process store: every event straight into one `MemoryState`."""

    def __init__(self) -> None:
        self.state = MemoryState()

    def take(self, projector: Projector, messages: list[SourceMessage]) -> None:
        for message in messages:
            projector.receive(self.state, message)

    def reader(self) -> StateTransaction:
        return self.state


Store = InProcess | WorkerPartition
STORES: dict[str, Callable[[Path], Store]] = {
    "in-process": lambda directory: InProcess(),
    "RocksDB": WorkerPartition,
}
"""Each kind of store, made in a directory of its own (RocksDB's)."""


@dataclass
class Mind:
    """A state being fed one event stream, and how far it got."""

    world: str
    events: Iterator[bytes]
    projector: Projector
    store: Store
    offset: int = 0

    @classmethod
    def fresh(cls, memories: int, number: int, store: Store) -> Mind:
        """A mind of a world of its own: no id of its events was seen by a mind before it."""
        world = f"{WORLD}-{number}"
        return cls(world, witness_story(memories, world=world), Projector(), store)

    def feed(self, count: int) -> tuple[float, float]:
        """Wall and CPU seconds to take the next `count` events in."""
        key = self.world.encode()
        messages = [
            SourceMessage("bench", 0, offset, key, raw)
            for offset, raw in enumerate(islice(self.events, count), start=self.offset)
        ]
        self.offset += len(messages)
        began, began_cpu = time.perf_counter(), time.process_time()
        self.store.take(self.projector, messages)
        return time.perf_counter() - began, time.process_time() - began_cpu

    def memories(self) -> int:
        prefix = pack(MEMORIES, TENANT, self.world, WITNESS)
        return sum(1 for _ in self.store.reader().scan(prefix))

    def read_latencies(self, count: int) -> list[float]:
        """Seconds per `runtime_read` of the witness, `count` times."""
        latencies = []
        for _ in range(count):
            began = time.perf_counter()
            runtime_read(self.store.reader(), TENANT, self.world, "main", WITNESS)
            latencies.append(time.perf_counter() - began)
        return latencies


@dataclass(frozen=True)
class Sample:
    """One repeat: microseconds per ingested event (CPU, wall), read p50/p99 in milliseconds."""

    ingest_cpu_us: float
    ingest_us: float
    read_p50_ms: float
    read_p99_ms: float
    memories: int


def sample(mind: Mind, reads: int) -> Sample:
    """Time the next window of events, then the reads."""
    seconds, cpu_seconds = mind.feed(WINDOW)
    latencies = mind.read_latencies(reads)
    return Sample(
        ingest_cpu_us=cpu_seconds / WINDOW * 1e6,
        ingest_us=seconds / WINDOW * 1e6,
        read_p50_ms=percentile(latencies, 0.5) * 1e3,
        read_p99_ms=percentile(latencies, 0.99) * 1e3,
        memories=mind.memories(),
    )


def run(options: Options) -> None:
    for name, store in STORES.items():
        with tempfile.TemporaryDirectory(prefix="rumourmill-bench-") as directory:
            measure(options, name, store, Path(directory))


def measure(options: Options, name: str, store_in: Callable[[Path], Store], root: Path) -> None:
    """Both sizes on one kind of store, each mind in a store of its own under `root`."""

    def store(case: str) -> Store:
        return store_in(root / case)

    large_size = QUICK_LARGE if options.quick else FULL_LARGE
    reads = READS // 3 if options.quick else READS
    sample(Mind.fresh(SMALL, 0, store("warm-up")), reads)
    large_mind = Mind.fresh(large_size + WINDOW * options.repeats, 1, store("large"))
    built, _ = large_mind.feed(large_size + 1 - WINDOW)
    small: list[Sample] = []
    large: list[Sample] = []
    for attempt in range(options.repeats):
        mind = Mind.fresh(SMALL, 2 + attempt, store(f"small-{attempt}"))
        mind.feed(SMALL + 1 - WINDOW)  # the opening (and nothing else, at 1,000)
        small.append(sample(mind, reads))
        large.append(sample(large_mind, reads))

    def compared(label: str, name: str, unit: str, goal: str = "") -> list[tuple[str, str]]:
        """`Sample.name` at both sizes, each with its runs, and their ratio."""
        rows = []
        for size, samples in ((SMALL, small), (large_size, large)):
            values = [getattr(one, name) for one in samples]
            runs = " ".join(f"{value:.3f}" for value in values)
            rows.append((f"{label}, {size:,}", f"{median(values):,.3f} {unit}  (runs: {runs})"))
        ratio = median([getattr(one, name) for one in large]) / median(
            [getattr(one, name) for one in small]
        )
        return [*rows, (f"{label} ratio large/small{goal}", f"{ratio:.2f}")]

    keys = sum(1 for _ in large_mind.store.reader().scan(b""))
    sizes = f"{small[0].memories:,} vs {large[0].memories:,}..{large[-1].memories:,}"
    report(
        f"(d) scaling with history, {name}: memories {sizes}, median of {options.repeats}",
        [
            *compared("ingest CPU", "ingest_cpu_us", "us/event", " (goal <= 1.3)"),
            *compared("ingest wall", "ingest_us", "us/event"),
            *compared("runtime_read p50", "read_p50_ms", "ms", " (goal <= 2)"),
            *compared("runtime_read p99", "read_p99_ms", "ms"),
            ("building the large history (untimed above)", f"{built:.1f} s"),
            (
                "keys in the large state (its size is what grows)",
                f"{keys:,} ({keys / large_mind.offset:.1f} per event)",
            ),
        ],
    )


if __name__ == "__main__":
    run_main(__doc__ or "", in_process=run)
