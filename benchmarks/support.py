"""What every benchmark shares: options, statistics, printing, a broker and worker handling."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import os
import statistics
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from localbroker import free_port
from streams.dev import apache_kafka
from streams.durability import IDLE_SECONDS
from streams.partitioning import partition_of
from streams.settings import Settings
from streams.topics import ensure_topics
from tests.support import WorkerProcess, samples_of, send_events, unique_settings

__all__ = [
    "Options",
    "WorkerProcess",
    "cpu_seconds",
    "kafka_bootstrap",
    "median",
    "parse_options",
    "percentile",
    "prepared_settings",
    "rate",
    "repeat",
    "report",
    "run_main",
    "samples_of",
    "send_events",
    "spread_worlds",
    "wait_until_idle",
    "worker_settings",
]

T = TypeVar("T")

logging.getLogger("aiokafka").setLevel(logging.ERROR)  # retries right after topic creation


@dataclass(frozen=True)
class Options:
    """How big a run is: `quick` shrinks every benchmark; `repeats` per measurement."""

    quick: bool = False
    repeats: int = 5


def parse_options(description: str, argv: Sequence[str] | None = None) -> Options:
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--quick", action="store_true", help="a smaller, faster run")
    parser.add_argument("--repeats", type=int, default=None, help="repeats (default 5, quick 3)")
    args = parser.parse_args(argv)
    repeats = args.repeats if args.repeats is not None else (3 if args.quick else 5)
    return Options(quick=args.quick, repeats=max(1, repeats))


def run_main(
    description: str,
    in_process: Callable[[Options], None] | None = None,
    on_kafka: Callable[[Options, str], None] | None = None,
) -> None:
    """`python -m benchmarks.NAME`: the options, the in-process part, then the part on Apache
    Kafka (`kafka_bootstrap`'s broker, started only for it)."""
    options = parse_options(description)
    if in_process is not None:
        in_process(options)
    if on_kafka is not None:
        with kafka_bootstrap() as bootstrap:
            on_kafka(options, bootstrap)


def median(values: Sequence[float]) -> float:
    return float(statistics.median(values))


def percentile(values: Sequence[float], fraction: float) -> float:
    """The nearest-rank percentile (`fraction` in 0..1) of `values`."""
    ordered = sorted(values)
    index = max(0, min(len(ordered) - 1, round(fraction * len(ordered) + 0.5) - 1))
    return ordered[index]


def cpu_times(pid: int) -> tuple[float, float]:
    """User and system (kernel) CPU seconds a process has used so far, all threads (Linux
    /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    tick = os.sysconf("SC_CLK_TCK")
    return int(fields[11]) / tick, int(fields[12]) / tick


def cpu_seconds(pid: int) -> float:
    """User and system CPU seconds a process has used so far (Linux /proc)."""
    return sum(cpu_times(pid))


def rate(count: int, seconds: float) -> float:
    return count / seconds if seconds > 0 else float("inf")


def repeat(times: int, measure: Callable[[int], T]) -> list[T]:
    """`measure(attempt)` for attempt 0..times-1, in order."""
    return [measure(attempt) for attempt in range(times)]


def report(title: str, rows: Sequence[tuple[str, str]]) -> None:
    """Print a titled block of aligned `label  value` rows."""
    width = max(len(label) for label, _ in rows)
    print(f"\n== {title}")
    for label, value in rows:
        print(f"  {label.ljust(width)}  {value}")


@contextlib.contextmanager
def kafka_bootstrap() -> Iterator[str]:
    """`RUMOURMILL_TEST_BROKER` if set, else an Apache Kafka broker started and stopped here."""
    settings = Settings.from_env()
    if settings.test_broker:
        yield ",".join(settings.test_broker)
        return
    started = time.perf_counter()
    with apache_kafka(settings) as broker:
        print(f"(Apache Kafka on {broker.bootstrap}, up in {time.perf_counter() - started:.1f}s)")
        yield broker.bootstrap


def spread_worlds(count: int, partitions: int, prefix: str = "tavern") -> list[str]:
    """`count` world ids whose events land on distinct partitions (while there are enough)."""
    worlds: list[str] = []
    taken: set[int] = set()
    number = 0
    while len(worlds) < count and number < 10_000:
        world = f"{prefix}-{number}"
        partition = partition_of(world.encode(), partitions)
        if partition not in taken or len(taken) == partitions:
            worlds.append(world)
            taken.add(partition)
        number += 1
    return worlds


def prepared_settings(bootstrap: str, data_dir: Path, partitions: int = 4) -> Settings:
    """Settings with topics of their own, created (with their partitions) before publishing."""
    settings = unique_settings(bootstrap, data_dir, partitions=partitions)
    asyncio.run(ensure_topics(settings))
    return settings


def worker_settings(settings: Settings, name: str, data_dir: Path) -> Settings:
    """The same topics, but a fresh consumer group, changelog, data dir and web port."""
    return settings.model_copy(
        update={
            "app_id": f"{settings.app_id}-{name}",
            "data_dir": data_dir,
            "web_port": free_port(),
        }
    )


IDLE_CPU_SHARE = 0.05
"""Below this share of one core over `IDLE_WINDOW` seconds, the worker counts as idle."""
IDLE_WINDOW = 3.0
IDLE_TIMEOUT = 600.0


def wait_until_idle(worker: WorkerProcess) -> None:
    """Until the worker uses under `IDLE_CPU_SHARE` of a core for `IDLE_WINDOW` seconds (after
    the idle checkpoint, and once the memories it formed are embedded)."""
    assert worker.process is not None
    pid = worker.process.pid
    time.sleep(IDLE_SECONDS + 1)
    deadline = time.monotonic() + IDLE_TIMEOUT
    while time.monotonic() < deadline:
        used = cpu_seconds(pid)
        time.sleep(IDLE_WINDOW)
        if cpu_seconds(pid) - used < IDLE_CPU_SHARE * IDLE_WINDOW:
            return
    raise TimeoutError(f"the worker was still busy after {IDLE_TIMEOUT:.0f} s")
