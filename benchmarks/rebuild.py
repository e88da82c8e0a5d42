"""(i) `rumourmill rebuild` events/s next to the worker's own ingest rate, in the same run.

N tavern-like events are published first (4 worlds, one per partition). Each repeat times a
fresh worker over them (`worker_throughput.worker_run`: first to last ack) and a rebuild of
the same topic into a fresh app id (`streams.rebuild.rebuild`: from its first read to the last
changeset confirmed in the changelog, local state and stamps written).
"""

from __future__ import annotations

import asyncio
import tempfile
import time
from pathlib import Path

from benchmarks.story import tavern_story
from benchmarks.support import (
    Options,
    median,
    prepared_settings,
    rate,
    report,
    run_main,
    send_events,
    spread_worlds,
    worker_settings,
)
from benchmarks.worker_throughput import PARTITIONS, worker_run
from streams.rebuild import rebuild

FULL_EVENTS = 10_000
QUICK_EVENTS = 4_000


def run(options: Options, bootstrap: str) -> None:
    """Publish, then time the worker and a rebuild alternately, `repeats` times each."""
    count = QUICK_EVENTS if options.quick else FULL_EVENTS
    with tempfile.TemporaryDirectory(prefix="rumourmill-bench-") as temp:
        workdir = Path(temp)
        settings = prepared_settings(bootstrap, workdir / "data", PARTITIONS)
        send_events(settings, tavern_story(count, seed=13, worlds=spread_worlds(4, PARTITIONS)))
        workers: list[float] = []
        rebuilds: list[float] = []
        worlds = 0
        for attempt in range(options.repeats):
            workers.append(rate(count, worker_run(settings, count, workdir, attempt).steady))
            target = worker_settings(settings, f"rebuild{attempt}", workdir / f"rebuilt-{attempt}")
            began = time.perf_counter()
            rebuilt = asyncio.run(rebuild(settings, target))
            took = time.perf_counter() - began
            assert rebuilt.events == count, f"rebuilt {rebuilt.events} of {count} events"
            rebuilds.append(rate(count, rebuilt.seconds))
            worlds = len(rebuilt.digests)
            print(f"(rebuild {attempt}: {took:.1f}s including its checks, {worlds} worlds)")
    worker, rebuilt_rate = median(workers), median(rebuilds)
    report(
        f"(i) rebuild from the events topic: {count} events, median of {options.repeats}",
        [
            ("worker ingest, steady (first to last ack)", f"{worker:,.0f} events/s"),
            ("rebuild into a fresh app id", f"{rebuilt_rate:,.0f} events/s"),
            ("ratio rebuild/worker", f"{rebuilt_rate / worker:.3f}"),
            ("rebuild runs, events/s", " ".join(f"{r:,.0f}" for r in rebuilds)),
            ("worker runs, events/s", " ".join(f"{r:,.0f}" for r in workers)),
        ],
    )


if __name__ == "__main__":
    run_main(__doc__ or "", on_kafka=run)
