"""(a) End-to-end events/s through a `rumourmill worker` on Apache Kafka, against its own core.

N tavern-like events are published first (4 worlds, one per partition). Each repeat starts a
worker with a fresh consumer group and data dir and waits until the acks topic holds N
`processed` acks for it. Its core is the same N events folded in this process through
`Projector.receive` on in-process state (`MemoryState`, one per partition, each message at the
partition and offset Kafka gave it), with the worker's projector settings (the change feed on):
issue 9's goal is worker / core >= 0.6. A bare aiokafka consumer reading the same N events is
printed as context. The three alternate in each repeat, so all see the same machine.

"Steady": the worker from its first ack to its last (ack timestamps), the core from its first
event to its last, the consumer from its start (connected) to its last message. "Cold": from
launching the worker process (Python imports, Faust start-up, partition assignment included) or
creating the consumer, until all N are in. CPU time per event (the worker's from /proc, from
ready to its last ack, over the acks sent in that span; the core's of this process) moves far
less with the load of others on a shared machine than wall clock; its system (kernel) part moves
most (some 20 us per event on a quiet machine, over 100 on a busy one), so it is printed apart.
Where the worker's time goes is printed beside: projecting, by the worker's own metric, against
the core (the same projection on RocksDB rather than in memory, beside a busy broker), and the
rest (Faust, the sends, the embedding agent, and laying each batch's writes into RocksDB: the
state writes' thread does that, but rocksdict holds the GIL while it does, so under a backlog
the agent waits for it).
"""

from __future__ import annotations

import asyncio
import tempfile
import time
import urllib.request
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
from aiokafka import AIOKafkaConsumer, TopicPartition

from benchmarks.story import encoded, tavern_story
from benchmarks.support import (
    Options,
    WorkerProcess,
    cpu_times,
    median,
    prepared_settings,
    rate,
    report,
    run_main,
    samples_of,
    send_events,
    spread_worlds,
    worker_settings,
)
from projections.delivery import SourceMessage
from projections.projector import Projector
from projections.state import MemoryState
from streams.partitioning import partition_of
from streams.settings import Settings

PARTITIONS = 4
FULL_EVENTS = 10_000  # 20,000 took 90-150 s per worker run: over the suite's budget
QUICK_EVENTS = 4_000
ACK_TIMEOUT_PER_EVENT = 0.01  # seconds: 100 events/s would be a failure anyway
READ_TIMEOUT = 120.0
GOAL = 0.6
"""Issue 9: the worker end to end keeps at least this share of its core's rate."""


@dataclass(frozen=True)
class Run:
    """One timed pass over the N events: seconds from start, and from first to last output.

    For the worker, also events/s over the first and the last quarter of its acks, and its CPU
    seconds per event once ready; for the core, its CPU seconds per event.
    """

    cold: float
    steady: float
    steady_events: int | None = None
    """How many events `steady` times, None: all. A worker's first ack comes once its first
    batch is projected (acks go out a batch at a time), so its events are not in the steady
    interval that starts at that ack (counting them made a worker at 1,000 events/s read as
    1,143 over 4,000 events)."""
    first_quarter: float = 0.0
    last_quarter: float = 0.0
    cpu_per_event: float = 0.0
    system_per_event: float = 0.0
    projecting_per_event: float = 0.0
    """The worker's own measure of projecting one message (`rumourmill_processing_seconds`:
    wall clock, from taking the message to its writes collected), over all it projected."""
    laying_in_per_event: float = 0.0
    """The worker's own measure of laying its batches' state writes into RocksDB
    (`rumourmill_lay_in_seconds`), per message projected: rocksdict holds the GIL meanwhile."""


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
        assert worker.process is not None
        ready_user, ready_system = cpu_times(worker.process.pid)
        ready_ms = time.time() * 1000
        timeout = 60 + count * ACK_TIMEOUT_PER_EVENT
        try:
            stamps, _ = asyncio.run(_processed_acks(settings.bootstrap, start, count, timeout))
        except TimeoutError:
            print(worker.log_tail())
            raise
        done = time.perf_counter()
        user, system = cpu_times(worker.process.pid)
        ingest_system = system - ready_system
        ingest_cpu = user - ready_user + ingest_system
        projecting_per_event, laying_in_per_event = _own_measures(run_settings.web_port)
    finally:
        worker.stop()
    stamps.sort()
    quarter = len(stamps) // 4
    acked_once_ready = sum(stamp >= ready_ms for stamp in stamps)
    return Run(
        cold=done - launched,
        steady=(stamps[-1] - stamps[0]) / 1000,
        steady_events=sum(stamp > stamps[0] for stamp in stamps),
        first_quarter=rate(quarter, (stamps[quarter] - stamps[0]) / 1000),
        last_quarter=rate(quarter, (stamps[-1] - stamps[-1 - quarter]) / 1000),
        cpu_per_event=ingest_cpu / max(acked_once_ready, 1),
        system_per_event=ingest_system / max(acked_once_ready, 1),
        projecting_per_event=projecting_per_event,
        laying_in_per_event=laying_in_per_event,
    )


def _own_measures(web_port: int) -> tuple[float, float]:
    """Seconds per message the worker spent projecting, and laying state in, by its own
    metrics (`GET /metrics`)."""
    with urllib.request.urlopen(f"http://127.0.0.1:{web_port}/metrics", timeout=10) as reply:
        text = reply.read().decode()
    samples = samples_of(text)
    messages = max(samples[("rumourmill_processing_seconds_count", ())], 1)
    return (
        samples[("rumourmill_processing_seconds_sum", ())] / messages,
        samples[("rumourmill_lay_in_seconds_sum", ())] / messages,
    )


def steady_rate(run: Run, count: int) -> float:
    """Events/s over the steady interval of a run of `count` events."""
    return rate(count if run.steady_events is None else run.steady_events, run.steady)


def as_delivered(events: list[dict[str, Any]], partitions: int) -> list[SourceMessage]:
    """The events as the worker receives them: keyed by world, on its partition, numbered by
    offset within it, with a record timestamp."""
    offsets: Counter[int] = Counter()
    now_ms = int(time.time() * 1000)
    messages = []
    for raw in encoded(events):
        key = str(orjson.loads(raw)["world_instance_id"]).encode()
        partition = partition_of(key, partitions)
        messages.append(SourceMessage("events", partition, offsets[partition], key, raw, now_ms))
        offsets[partition] += 1
    return messages


def core_run(messages: list[SourceMessage], changes: bool) -> Run:
    """Fold the messages into fresh in-process state, one per partition, as the worker's
    projector would (`changes`: the change feed on)."""
    projector = Projector(changes=changes)
    states: dict[int, MemoryState] = {}
    processed = 0
    began, began_cpu = time.perf_counter(), time.process_time()
    for message in messages:
        state = states.get(message.partition) or states.setdefault(message.partition, MemoryState())
        for ack in projector.receive(state, message).acks:
            processed += ack.outcome.value == "processed"
    seconds, cpu = time.perf_counter() - began, time.process_time() - began_cpu
    if processed != len(messages):
        raise RuntimeError(f"the core processed {processed} of {len(messages)} events")
    return Run(cold=seconds, steady=seconds, cpu_per_event=cpu / len(messages))


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
    """Publish, then time the bare consumer, the worker and the core alternately, `repeats`
    times each."""
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
        messages = as_delivered(events, PARTITIONS)
        changes = bool(settings.topics.changes)
        core_run(messages[: count // 10], changes)  # warm up imports and caches
        workers: list[Run] = []
        cores: list[Run] = []
        bare: list[Run] = []
        for attempt in range(options.repeats):
            bare.append(
                asyncio.run(_bare_read(bootstrap, settings.topics.events, count, READ_TIMEOUT))
            )
            workers.append(worker_run(settings, count, workdir, attempt))
            cores.append(core_run(messages, changes))
    _print(count, options.repeats, workers, cores, bare)


def _print(count: int, repeats: int, workers: list[Run], cores: list[Run], bare: list[Run]) -> None:
    worker_steady, core_steady, bare_steady = (
        median([steady_rate(r, count) for r in runs]) for runs in (workers, cores, bare)
    )
    worker_cpu = median([r.cpu_per_event for r in workers])
    worker_projecting = median([r.projecting_per_event for r in workers])
    worker_laying_in = median([r.laying_in_per_event for r in workers])
    core_cpu = median([r.cpu_per_event for r in cores])
    worker_cold = median([rate(count, r.cold) for r in workers])
    bare_cold = median([rate(count, r.cold) for r in bare])
    report(
        f"(a) worker end to end on Apache Kafka: {count} events, median of {repeats}",
        [
            ("worker, steady (events acked after the first ack)", f"{worker_steady:,.0f} events/s"),
            ("core in-process, same events (change feed on)", f"{core_steady:,.0f} events/s"),
            (f"ratio worker/core, steady (goal >= {GOAL})", f"{worker_steady / core_steady:.3f}"),
            ("worker, CPU time per event once ready", f"{1e6 * worker_cpu:,.0f} us"),
            (
                "  of which system (kernel) time",
                f"{1e6 * median([r.system_per_event for r in workers]):,.0f} us",
            ),
            ("core, CPU time per event", f"{1e6 * core_cpu:,.0f} us"),
            ("ratio worker/core, CPU time", f"{core_cpu / worker_cpu:.3f}"),
            (
                "worker, projecting per event (its own metric, wall) / core",
                f"{1e6 * worker_projecting:,.0f} us / {1e6 * core_cpu:,.0f} us"
                f" = {worker_projecting / core_cpu:.2f}",
            ),
            (
                "worker, the rest per event (CPU once ready, less projecting)",
                f"{1e6 * (worker_cpu - worker_projecting):,.0f} us",
            ),
            (
                "  of which laying state into RocksDB (its own metric; GIL held)",
                f"{1e6 * worker_laying_in:,.0f} us",
            ),
            ("bare aiokafka consumer, steady (context)", f"{bare_steady:,.0f} events/s"),
            (
                "worker, cold (from launch, incl. start-up)",
                f"{worker_cold:,.0f} events/s",
            ),
            (
                "bare consumer, cold (from start)",
                f"{bare_cold:,.0f} events/s",
            ),
            (
                "worker, first quarter of acks",
                f"{median([r.first_quarter for r in workers]):,.0f} events/s",
            ),
            (
                "worker, last quarter of acks",
                f"{median([r.last_quarter for r in workers]):,.0f} events/s",
            ),
            ("worker runs, steady s", " ".join(f"{r.steady:.2f}" for r in workers)),
            ("core runs, s", " ".join(f"{r.steady:.2f}" for r in cores)),
            ("worker runs, cold s", " ".join(f"{r.cold:.2f}" for r in workers)),
        ],
    )


if __name__ == "__main__":
    run_main(__doc__ or "", on_kafka=run)
