"""(issue 4) Rumours in a town: 500 characters, 50 places, 200,000 events, spreading on vs off.

The same generated stream is folded in-process (on RocksDB, as in the worker: in batches of the
ingest agent's size, each through one `BatchTransaction` reading through the values the worker
keeps, its held writes laid in at its end) twice from an empty state: once with the
built-in policy (spreading off: the baseline) and once with `memory.spreading.enabled`. Each
run's rate is the median over equal slices of the stream; the ratio compares the two, by wall
clock and by the process's CPU time (what stays comparable when other work shares the cores),
and once more by the CPU time of the whole runs (what the garbage collector's occasional full
walks cost shows there). Spreading more than doubles the memories a town holds, so the CPU
time per memory held is printed beside: what a rumour costs against a memory formed otherwise;
and the ratio the town would show were a memory to cost the same with spreading as without
(the memories held off / on): below the goal, rumours must cost less than other memories to
reach it.
The cost per meeting is the extra time spreading took, divided by the meetings (movements into
a place where someone already was, and `characters-met` events) the stream held. What RocksDB's own
threads took of the CPU time (flushing and compacting what was written) and the size of each
state are printed beside: the memories rumours add cost their bytes there as well.
"""

from __future__ import annotations

import gc
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from rocksdict import Rdict

from benchmarks.story import encoded, tavern_story
from benchmarks.support import Options, median, rate, report, run_main
from benchmarks.worker_state import WorkerPartition
from projections.delivery import SourceMessage
from projections.key_prefixes import MEMORIES
from projections.keys import pack
from projections.policy import DEFAULT_POLICY, resolve
from projections.projector import Projector
from schemas.policy import Policy
from streams.settings import DEFAULT_BATCH_EVENTS as BATCH_EVENTS

FULL_EVENTS = 200_000
QUICK_EVENTS = 20_000
CHARACTERS = 500
PLACES = 50
SLICES = 10
GOAL = 0.5
WORLD = "town-0"


@dataclass
class Folded:
    """What folding a stream measured, and the state it left."""

    rates: list[float]
    """Events per wall-clock second, per slice."""
    cpu_rates: list[float]
    """Events per second of the process's CPU time, per slice."""
    seconds: float
    cpu_seconds: float
    """The process's CPU time over the whole fold: a collection of old objects falls in some
    slices and not others, so a median of slices can miss it, and the total cannot."""
    projector_cpu_seconds: float
    """The CPU time of the thread that folds: the rest of `cpu_seconds` is RocksDB's own
    threads flushing and compacting what was written (it grows with the bytes written)."""
    state: WorkerPartition


def fold(lines: list[bytes], policy: Policy, directory: Path) -> Folded:
    """Rates of each slice, total seconds, and the RocksDB state, folding `lines` under `policy`.

    The state lives in RocksDB as a worker's partition keeps it (`WorkerPartition`): a
    town's millions of memories do not fit an in-memory sorted dict.
    """
    partition = WorkerPartition(directory)
    projector = Projector(policies=lambda tenant, world: policy)
    messages = [
        SourceMessage("bench", 0, offset, WORLD.encode(), line) for offset, line in enumerate(lines)
    ]
    size = max(BATCH_EVENTS, len(lines) // SLICES // BATCH_EVENTS * BATCH_EVENTS)
    folded = Folded([], [], 0.0, 0.0, 0.0, partition)
    for start in range(0, len(lines), size):
        began, began_cpu, began_thread = (
            time.perf_counter(),
            time.process_time(),
            time.thread_time(),
        )
        partition.take(projector, messages[start : start + size])
        seconds, cpu_seconds = time.perf_counter() - began, time.process_time() - began_cpu
        folded.seconds += seconds
        folded.cpu_seconds += cpu_seconds
        folded.projector_cpu_seconds += time.thread_time() - began_thread
        folded.rates.append(rate(min(size, len(lines) - start), seconds))
        folded.cpu_rates.append(rate(min(size, len(lines) - start), cpu_seconds))
    return folded


def memories_held(partition: WorkerPartition) -> int:
    """How many memories the town holds (what spreading adds shows here)."""
    return sum(1 for _ in partition.reader().scan(pack(MEMORIES)))


def live_megabytes(db: Rdict) -> int:
    """What the state takes once written out: what rumours' bytes cost RocksDB's threads."""
    db.flush()
    return (db.property_int_value("rocksdb.estimate-live-data-size") or 0) // (1024 * 1024)


def run(options: Options) -> None:
    count = QUICK_EVENTS if options.quick else FULL_EVENTS
    events = tavern_story(count, seed=11, worlds=(WORLD,), characters=CHARACTERS, places=PLACES)
    lines = encoded(events)
    meetings = sum(1 for event in events if event["key"].startswith("loreweaver.movement"))
    del events  # a worker never holds its stream: kept, its objects would slow every collection
    gc.freeze()  # as a started worker does (`streams.app`): no collection walks what set-up built
    spreading = resolve(None, {"memory": {"spreading": {"enabled": True}}})
    with tempfile.TemporaryDirectory(prefix="rumourmill-bench-") as directory:
        off = fold(lines, DEFAULT_POLICY, Path(directory) / "off")
        on = fold(lines, spreading, Path(directory) / "on")
        held_off, held_on = memories_held(off.state), memories_held(on.state)
        live_off, live_on = live_megabytes(off.state.db), live_megabytes(on.state.db)
        off.state.db.close()
        on.state.db.close()
    gc.unfreeze()
    off_rate, on_rate = median(off.rates), median(on.rates)
    off_cpu_rate, on_cpu_rate = median(off.cpu_rates), median(on.cpu_rates)
    report(
        f"(rumours) a town of {CHARACTERS} characters and {PLACES} places, {count:,} events,"
        f" median of {len(on.rates)} slices",
        [
            ("spreading off (baseline)", f"{off_rate:,.0f} events/s"),
            ("spreading on", f"{on_rate:,.0f} events/s"),
            (f"ratio on/off (goal >= {GOAL})", f"{on_rate / off_rate:.3f}"),
            ("by CPU time: off / on", f"{off_cpu_rate:,.0f} / {on_cpu_rate:,.0f} events/s"),
            (f"ratio on/off by CPU time (goal >= {GOAL})", f"{on_cpu_rate / off_cpu_rate:.3f}"),
            (
                f"ratio on/off over the whole run by CPU time (goal >= {GOAL})",
                f"{off.cpu_seconds / on.cpu_seconds:.3f}",
            ),
            (
                "CPU in RocksDB's own threads (flushes, compactions), off / on",
                f"{off.cpu_seconds - off.projector_cpu_seconds:,.1f}"
                f" / {on.cpu_seconds - on.projector_cpu_seconds:,.1f} s"
                f" of {off.cpu_seconds:,.1f} / {on.cpu_seconds:,.1f} s",
            ),
            ("memories held, off / on", f"{held_off:,} / {held_on:,}"),
            (
                "CPU time per memory held, off / on, on/off",
                f"{1e6 * off.cpu_seconds / held_off:,.0f} / {1e6 * on.cpu_seconds / held_on:,.0f}"
                f" us, {(on.cpu_seconds / held_on) / (off.cpu_seconds / held_off):.2f}",
            ),
            (
                "ratio on/off at the same cost per memory (memories held off / on)",
                f"{held_off / held_on:.3f}",
            ),
            ("state on disk, off / on (RocksDB's estimate)", f"{live_off:,} / {live_on:,} MB"),
            ("movements (possible meetings)", f"{meetings:,}"),
            (
                "extra cost per movement with spreading",
                f"{1e6 * (on.seconds - off.seconds) / max(1, meetings):,.0f} us",
            ),
        ],
    )


if __name__ == "__main__":
    run_main(__doc__ or "", in_process=run)
