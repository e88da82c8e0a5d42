"""(a) End-to-end events/s through a `rumourmill worker` on Apache Kafka, next to a bare consumer.

N tavern-like events are published first (4 worlds, one per partition). Each repeat starts a
worker with a fresh consumer group and data dir and waits until the acks topic holds N
`processed` acks for it; the baseline is a bare aiokafka consumer reading the same N events.

Two figures each. "Steady": the worker from its first ack to its last (ack timestamps), the
consumer from its start (connected) to its last message. "Cold": from launching the worker
process (Python imports, Faust start-up, partition assignment included) or creating the
consumer, until all N are in.
"""

from __future__ import annotations

import asyncio
import tempfile
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import orjson
from aiokafka import AIOKafkaConsumer, TopicPartition

from benchmarks.story import tavern_story
from benchmarks.support import (
    Options,
    WorkerProcess,
    median,
    prepared_settings,
    rate,
    report,
    run_main,
    send_events,
    spread_worlds,
    worker_settings,
)
from streams.settings import Settings

PARTITIONS = 4
FULL_EVENTS = 10_000  # 20,000 took 90-150 s per worker run: over the suite's budget
QUICK_EVENTS = 4_000
ACK_TIMEOUT_PER_EVENT = 0.01  # seconds: 100 events/s would be a failure anyway
READ_TIMEOUT = 120.0


@dataclass(frozen=True)
class Run:
    """One timed pass over the N events: seconds from start, and from first to last output.

    For the worker, also events/s over the first and the last quarter of its acks.
    """

    cold: float
    steady: float
    first_quarter: float = 0.0
    last_quarter: float = 0.0


async def end_offsets(bootstrap: str, topic: str, partitions: int) -> dict[TopicPartition, int]:
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=None)
    await consumer.start()
    try:
        return dict(
            await consumer.end_offsets([TopicPartition(topic, n) for n in range(partitions)])
        )
    finally:
        await consumer.stop()


async def _processed_acks(
    bootstrap: str, start: dict[TopicPartition, int], count: int, timeout: float
) -> tuple[list[int], Counter[str]]:
    """Ack timestamps (ms) from `start` on, until `count` of them are `processed`."""
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=None)
    await consumer.start()
    stamps: list[int] = []
    outcomes: Counter[str] = Counter()
    try:
        consumer.assign(list(start))
        for partition, offset in start.items():
            consumer.seek(partition, offset)
        deadline = time.monotonic() + timeout
        while outcomes["processed"] < count and time.monotonic() < deadline:
            for records in (await consumer.getmany(timeout_ms=200, max_records=5000)).values():
                for record in records:
                    outcomes[str(orjson.loads(record.value or b"{}").get("outcome"))] += 1
                    stamps.append(record.timestamp)
    finally:
        await consumer.stop()
    if outcomes["processed"] < count:
        raise TimeoutError(f"only {dict(outcomes)} acks after {timeout:.0f}s")
    return stamps, outcomes


def worker_run(settings: Settings, count: int, workdir: Path, attempt: int) -> Run:
    """Start a fresh worker over the published events; time until N processed acks."""
    run_settings = worker_settings(settings, f"r{attempt}", workdir / f"data-{attempt}")
    start = asyncio.run(end_offsets(settings.bootstrap, settings.topics.acks, settings.partitions))
    worker = WorkerProcess(run_settings, workdir / f"worker-{attempt}.log")
    launched = time.perf_counter()
    try:
        worker.start()
        timeout = 60 + count * ACK_TIMEOUT_PER_EVENT
        try:
            stamps, _ = asyncio.run(_processed_acks(settings.bootstrap, start, count, timeout))
        except TimeoutError:
            print(worker.log_tail())
            raise
        done = time.perf_counter()
    finally:
        worker.stop()
    stamps.sort()
    quarter = len(stamps) // 4
    return Run(
        cold=done - launched,
        steady=(stamps[-1] - stamps[0]) / 1000,
        first_quarter=rate(quarter, (stamps[quarter] - stamps[0]) / 1000),
        last_quarter=rate(quarter, (stamps[-1] - stamps[-1 - quarter]) / 1000),
    )


async def _bare_read(bootstrap: str, topic: str, count: int, timeout: float) -> Run:
    """A bare consumer from the earliest offset until it has read `count` messages.

    Cold counts from creating the consumer; steady from its start (connected, no fetch yet).
    """
    began = time.perf_counter()
    consumer = AIOKafkaConsumer(
        topic,
        bootstrap_servers=bootstrap,
        group_id=None,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
    )
    await consumer.start()
    seen = 0
    first = time.perf_counter()
    last = first
    try:
        deadline = time.monotonic() + timeout
        while seen < count and time.monotonic() < deadline:
            batch = await consumer.getmany(timeout_ms=200, max_records=5000)
            got = sum(len(records) for records in batch.values())
            if got:
                last = time.perf_counter()
                seen += got
    finally:
        await consumer.stop()
    if seen < count:
        raise TimeoutError(f"read {seen} of {count} messages in {timeout:.0f}s")
    return Run(cold=last - began, steady=last - first)


def run(options: Options, bootstrap: str) -> None:
    """Publish, then time the worker and the bare consumer alternately, `repeats` times each."""
    count = QUICK_EVENTS if options.quick else FULL_EVENTS
    with tempfile.TemporaryDirectory(prefix="rumourmill-bench-") as temp:
        workdir = Path(temp)
        settings = prepared_settings(bootstrap, workdir / "data", PARTITIONS)
        worlds = spread_worlds(PARTITIONS, PARTITIONS)
        events = tavern_story(count, seed=11, worlds=worlds)
        began = time.perf_counter()
        send_events(settings, events)
        took = time.perf_counter() - began
        print(f"(published {count} events to {len(worlds)} worlds in {took:.1f}s)")
        workers: list[Run] = []
        bare: list[Run] = []
        for attempt in range(options.repeats):
            bare.append(
                asyncio.run(_bare_read(bootstrap, settings.topics.events, count, READ_TIMEOUT))
            )
            workers.append(worker_run(settings, count, workdir, attempt))
    _print(count, options.repeats, workers, bare)


def _print(count: int, repeats: int, workers: list[Run], bare: list[Run]) -> None:
    worker_steady = median([rate(count, r.steady) for r in workers])
    bare_steady = median([rate(count, r.steady) for r in bare])
    worker_cold = median([rate(count, r.cold) for r in workers])
    bare_cold = median([rate(count, r.cold) for r in bare])
    report(
        f"(a) worker end to end on Apache Kafka: {count} events, median of {repeats}",
        [
            ("worker, steady (first to last ack)", f"{worker_steady:,.0f} events/s"),
            ("bare aiokafka consumer, steady", f"{bare_steady:,.0f} events/s"),
            ("ratio worker/bare, steady (goal >= 0.5)", f"{worker_steady / bare_steady:.3f}"),
            ("worker, cold (from launch, incl. start-up)", f"{worker_cold:,.0f} events/s"),
            ("bare consumer, cold (from start)", f"{bare_cold:,.0f} events/s"),
            ("ratio worker/bare, cold", f"{worker_cold / bare_cold:.3f}"),
            (
                "worker, first quarter of acks",
                f"{median([r.first_quarter for r in workers]):,.0f} events/s",
            ),
            (
                "worker, last quarter of acks",
                f"{median([r.last_quarter for r in workers]):,.0f} events/s",
            ),
            ("worker runs, steady s", " ".join(f"{r.steady:.2f}" for r in workers)),
            ("worker runs, cold s", " ".join(f"{r.cold:.2f}" for r in workers)),
        ],
    )


if __name__ == "__main__":
    run_main(__doc__ or "", on_kafka=run)
