"""(d) Scaling with history, in-process: one character with 1,000 memories vs 100,000.

The world shape is the same in both: a character at a place witnessing events there (one
memory each). Ingest cost is the time per event over the last 1,000 events; read latency is
`runtime_read` of that character. The small case is rebuilt for every repeat; the large one
is built once, then each repeat times the next 1,000 events (its history grows by 1,000 per
repeat) and the reads after them.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass
from itertools import islice

from benchmarks.story import WITNESS, witness_story
from benchmarks.support import Options, median, parse_options, percentile, report
from projections.delivery import SourceMessage
from projections.key_prefixes import MEMORIES
from projections.keys import pack
from projections.projector import Projector
from projections.runtime_read import runtime_read
from projections.state import MemoryState

SMALL = 1_000
FULL_LARGE = 100_000
QUICK_LARGE = 20_000
WINDOW = 1_000
READS = 300
WORLD = "history-0"
TENANT = "default"


@dataclass
class Mind:
    """A state being fed one event stream, and how far it got."""

    events: Iterator[bytes]
    projector: Projector
    state: MemoryState
    offset: int = 0

    @classmethod
    def fresh(cls, memories: int) -> Mind:
        return cls(witness_story(memories, world=WORLD), Projector(), MemoryState())

    def feed(self, count: int) -> float:
        """Seconds to take the next `count` events in."""
        key = WORLD.encode()
        began = time.perf_counter()
        for raw in islice(self.events, count):
            self.projector.receive(self.state, SourceMessage("bench", 0, self.offset, key, raw))
            self.offset += 1
        return time.perf_counter() - began

    def memories(self) -> int:
        return sum(1 for _ in self.state.scan(pack(MEMORIES, TENANT, WORLD, WITNESS)))

    def read_latencies(self, count: int) -> list[float]:
        """Seconds per `runtime_read` of the witness, `count` times."""
        latencies = []
        for _ in range(count):
            began = time.perf_counter()
            runtime_read(self.state, TENANT, WORLD, "main", WITNESS)
            latencies.append(time.perf_counter() - began)
        return latencies


@dataclass(frozen=True)
class Sample:
    """One repeat: microseconds per ingested event, and read p50/p99 in milliseconds."""

    ingest_us: float
    read_p50_ms: float
    read_p99_ms: float
    memories: int


def sample(mind: Mind, reads: int) -> Sample:
    """Time the next window of events, then the reads."""
    seconds = mind.feed(WINDOW)
    latencies = mind.read_latencies(reads)
    return Sample(
        ingest_us=seconds / WINDOW * 1e6,
        read_p50_ms=percentile(latencies, 0.5) * 1e3,
        read_p99_ms=percentile(latencies, 0.99) * 1e3,
        memories=mind.memories(),
    )


def run(options: Options) -> None:
    large_size = QUICK_LARGE if options.quick else FULL_LARGE
    reads = READS // 3 if options.quick else READS
    sample(Mind.fresh(SMALL), reads)  # warm-up
    small: list[Sample] = []
    for _ in range(options.repeats):
        mind = Mind.fresh(SMALL)
        mind.feed(SMALL + 1 - WINDOW)  # the opening (and nothing else, at 1,000)
        small.append(sample(mind, reads))
    large_mind = Mind.fresh(large_size + WINDOW * options.repeats)
    built = large_mind.feed(large_size + 1 - WINDOW)
    large = [sample(large_mind, reads) for _ in range(options.repeats)]

    def row(label: str, values: list[float], unit: str) -> tuple[str, str]:
        return (
            label,
            f"{median(values):,.3f} {unit}  (runs: {' '.join(f'{v:.3f}' for v in values)})",
        )

    ingest_s = median([s.ingest_us for s in small])
    ingest_l = median([s.ingest_us for s in large])
    p50_s, p50_l = median([s.read_p50_ms for s in small]), median([s.read_p50_ms for s in large])
    p99_s, p99_l = median([s.read_p99_ms for s in small]), median([s.read_p99_ms for s in large])
    sizes = f"{small[0].memories:,} vs {large[0].memories:,}..{large[-1].memories:,}"
    report(
        f"(d) scaling with history: memories {sizes}, median of {options.repeats}",
        [
            row(f"ingest, {SMALL:,} memories", [s.ingest_us for s in small], "us/event"),
            row(f"ingest, {large_size:,} memories", [s.ingest_us for s in large], "us/event"),
            ("ingest ratio large/small (goal <= 1.3)", f"{ingest_l / ingest_s:.2f}"),
            row(f"runtime_read p50, {SMALL:,}", [s.read_p50_ms for s in small], "ms"),
            row(f"runtime_read p50, {large_size:,}", [s.read_p50_ms for s in large], "ms"),
            ("read p50 ratio large/small (goal <= 2)", f"{p50_l / p50_s:.2f}"),
            row(f"runtime_read p99, {SMALL:,}", [s.read_p99_ms for s in small], "ms"),
            row(f"runtime_read p99, {large_size:,}", [s.read_p99_ms for s in large], "ms"),
            ("read p99 ratio large/small", f"{p99_l / p99_s:.2f}"),
            ("building the large history (untimed above)", f"{built:.1f} s"),
        ],
    )


def main() -> None:
    run(parse_options(__doc__ or ""))


if __name__ == "__main__":
    main()
