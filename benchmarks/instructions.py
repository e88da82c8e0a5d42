"""(b) counted, not timed: the instructions one event takes in the projection core, and in a
worker's fold of the same stream, by valgrind's callgrind.

On a shared machine the rates drift: the same core folded at 241 to 553 us an event within one
hour, so a change of a few per cent cannot be seen in (b)'s rate. The instructions an event
takes barely move: (b)'s tavern stream is folded under callgrind to `FIRST` events and, in a
second process beside it, to `FIRST + counted` events; the difference of the two counts over
`counted` is the cost of an event (start-up, imports and building the story cancel out). String
hashing is seeded, so two counts of the same code agree within a fraction of a per cent.
Folded twice: in memory as (b) folds (`MemoryState`), and on RocksDB as a worker's partition is
written (`benchmarks.worker_state.WorkerPartition`: batches, kept values, the changelog's records
collected): the ratio of the two is what the worker's state costs beyond the core's. Without
valgrind on the PATH, nothing is counted.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from benchmarks import projection_core
from benchmarks.support import Options, report, run_main
from benchmarks.worker_state import WorkerPartition
from projections.delivery import SourceMessage
from projections.projector import Projector

FIRST = 500
"""Events folded before the counted ones: past the empty state's first, cheapest events."""
FULL_COUNTED = 2_000
QUICK_COUNTED = 1_000
KINDS = ("core", "worker")
_COLLECTED = re.compile(rb"Collected : (\d+)")


def fold(kind: str, count: int) -> None:
    """Fold the first `count` events of the stream: in memory (`core`) or as a worker's
    partition (`worker`). What callgrind counts, run in a process of its own."""
    lines = projection_core.stream(count)
    key = projection_core.WORLD.encode()
    if kind == "core":
        projection_core.fold(lines, key)
        return
    messages = [
        SourceMessage(projection_core.TOPIC, 0, offset, key, raw)
        for offset, raw in enumerate(lines)
    ]
    with tempfile.TemporaryDirectory(prefix="rumourmill-bench-") as directory:
        partition = WorkerPartition(Path(directory))
        partition.take(Projector(), messages)
        partition.db.close()


def counted(kind: str, events: int) -> subprocess.Popen[bytes]:
    """A callgrind run of `fold`, started."""
    return subprocess.Popen(
        [
            "valgrind",
            "--tool=callgrind",
            "--callgrind-out-file=/dev/null",
            sys.executable,
            "-m",
            "benchmarks.instructions",
            "--fold",
            kind,
            str(events),
        ],
        env={**os.environ, "PYTHONHASHSEED": "0"},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )


def instructions(run: subprocess.Popen[bytes]) -> int:
    """The instructions a finished callgrind run counted."""
    _, err = run.communicate()
    found = _COLLECTED.search(err)
    if run.returncode != 0 or found is None:
        raise RuntimeError(f"callgrind failed ({run.returncode}): {err[-2000:].decode()}")
    return int(found.group(1))


def per_event(kind: str, counted_events: int) -> float:
    """Instructions per event: two folds, side by side, differing by `counted_events`."""
    shorter, longer = counted(kind, FIRST), counted(kind, FIRST + counted_events)
    return (instructions(longer) - instructions(shorter)) / counted_events


def run(options: Options) -> None:
    if shutil.which("valgrind") is None:
        print("\n== (b) counted: skipped, no valgrind on the PATH")
        return
    counted_events = QUICK_COUNTED if options.quick else FULL_COUNTED
    core, worker = (per_event(kind, counted_events) for kind in KINDS)
    report(
        f"(b) counted by callgrind: events {FIRST:,} to {FIRST + counted_events:,} of (b)'s stream",
        [
            ("projection core (MemoryState), instructions per event", f"{core:,.0f}"),
            ("a worker's fold (RocksDB, batches), instructions per event", f"{worker:,.0f}"),
            ("ratio worker's fold/core", f"{worker / core:.3f}"),
        ],
    )


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "--fold":
        fold(sys.argv[2], int(sys.argv[3]))
    else:
        run_main(__doc__ or "", in_process=run)
