"""(h) The change feed's cost: ingest with the feed on / off (goal >= 0.9), same run, medians.

Rumours spread (`memory.spreading.enabled`), so every change kind but deletion is produced.
In-process: `Projector.receive` over `MemoryState` with `changes=True` and without, alternated.
On Apache Kafka: a fresh `rumourmill worker` (topics of its own) with `RUMOURMILL_CHANGES` true
and false, alternated after a discarded warm-up run; once it is ready the same events are
published, timed until the last `processed` ack, and how many feed messages each event sent.

Besides wall-clock rates, each side's CPU time is printed (this process's for in-process, the
worker's from /proc for Kafka): on a shared machine it moves far less with the load of others.
One extra in-process pass with the feed on runs under cProfile: the feed's own entries.
"""

from __future__ import annotations

import asyncio
import cProfile
import io
import pstats
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import orjson
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

from benchmarks.story import encoded, tavern_story
from benchmarks.support import (
    Options,
    WorkerProcess,
    cpu_seconds,
    median,
    prepared_settings,
    rate,
    report,
    run_main,
    send_events,
    spread_worlds,
)
from benchmarks.worker_throughput import PARTITIONS
from projections.delivery import SourceMessage
from projections.policy import policy_key, resolve
from projections.projector import Projector
from projections.state import MemoryState
from streams.batch_sender import BatchSender
from streams.publish import send_one
from streams.settings import Settings
from tests.support import read_topic

SPREADING = {"memory": {"spreading": {"enabled": True}}}
FULL_EVENTS = 20_000
QUICK_EVENTS = 5_000
WORKER_FULL_EVENTS = 8_000
WORKER_QUICK_EVENTS = 3_000
GOAL = 0.9


def fold(lines: list[bytes], key: bytes, changes: bool) -> Fold:
    """Fold `lines` into a fresh state: wall and CPU seconds, and how many changes they made."""
    policy = resolve(SPREADING, None)
    projector, state = Projector(lambda tenant, world: policy, changes=changes), MemoryState()
    made, last = 0, None
    wall, cpu = time.perf_counter(), time.process_time()
    for offset, raw in enumerate(lines):
        now = projector.receive(state, SourceMessage("bench", 0, offset, key, raw)).changes
        for records in now.values():
            made, last = made + len(records), records[-1]
    return Fold(time.perf_counter() - wall, time.process_time() - cpu, made, last)


@dataclass(frozen=True)
class Fold:
    wall: float
    cpu: float
    changes: int
    """How many changes were made: counted, not kept (the worker keeps none once sent, and
    keeping tens of thousands here would time the garbage collector walking them)."""
    last: bytes | None
    """The last change made, as its record."""


class Timed(Protocol):
    """A run timed by wall clock and by CPU."""

    @property
    def wall(self) -> float: ...

    @property
    def cpu(self) -> float: ...


def median_rates(runs: Sequence[Timed], count: int) -> tuple[float, float]:
    """The median events/s of `runs` of `count` events, by wall clock and by CPU time."""
    return median([rate(count, run.wall) for run in runs]), median(
        [rate(count, run.cpu) for run in runs]
    )


def in_process(options: Options) -> None:
    count = QUICK_EVENTS if options.quick else FULL_EVENTS
    world = "tavern-0"
    lines = encoded(tavern_story(count, seed=3, worlds=(world,)))
    key = world.encode()
    fold(lines[: count // 10], key, changes=True)  # warm up imports and caches
    on: list[Fold] = []
    off: list[Fold] = []
    for _ in range(options.repeats):  # alternated, so both see the same machine
        on.append(fold(lines, key, changes=True))
        off.append(fold(lines, key, changes=False))
    (wall_on, cpu_on), (wall_off, cpu_off) = (median_rates(runs, count) for runs in (on, off))
    report(
        f"(h) change feed in-process: {count} events, spreading on, median of {options.repeats}",
        [
            ("feed on, CPU time", f"{cpu_on:,.0f} events/s"),
            ("feed off, CPU time", f"{cpu_off:,.0f} events/s"),
            (f"ratio on/off, CPU time (goal >= {GOAL})", f"{cpu_on / cpu_off:.3f}"),
            ("cost per event, CPU time", f"{1e6 / cpu_on - 1e6 / cpu_off:,.1f} us"),
            ("ratio on/off, wall clock", f"{wall_on / wall_off:.3f}"),
            ("changes per event", f"{on[0].changes / count:.2f}"),
        ],
    )
    print(f"\n-- cProfile of one fold with the feed on ({count // 4} events), the feed's entries")
    print(profile(lines[: count // 4], key))


def profile(lines: list[bytes], key: bytes) -> str:
    profiler = cProfile.Profile()
    profiler.enable()
    fold(lines, key, changes=True)
    profiler.disable()
    out = io.StringIO()
    stats = pstats.Stats(profiler, stream=out).strip_dirs().sort_stats("cumulative")
    stats.print_stats(r"changes\.py|app\.py.*take|send", 12)
    return "\n".join(line for line in out.getvalue().splitlines() if line.strip())


@dataclass(frozen=True)
class WorkerRun:
    wall: float
    """From publishing the first event to the last `processed` ack."""
    cpu: float
    """The worker's CPU seconds over the same span."""
    sent: int
    """Messages on the changes topic afterwards."""


def worker_run(
    bootstrap: str, events: list[dict[str, Any]], workdir: Path, changes: bool
) -> WorkerRun:
    """A fresh worker with its own topics, started and ready before the events are published."""
    settings = prepared_settings(bootstrap, workdir / "data", PARTITIONS).model_copy(
        update={"changes": changes}
    )
    asyncio.run(
        send_one(
            bootstrap,
            settings.topics.policies,
            policy_key("default", None),
            orjson.dumps(SPREADING),
        )
    )
    workdir.mkdir(parents=True, exist_ok=True)
    worker = WorkerProcess(settings, workdir / "worker.log").start()
    try:
        assert worker.process is not None
        cpu, wall = cpu_seconds(worker.process.pid), time.perf_counter()
        send_events(settings, events)
        read_topic(
            settings,
            settings.topics.acks,
            lambda got: sum(ack["outcome"] == "processed" for ack in got) >= len(events),
            timeout=60 + len(events) * 0.02,
        )
        wall, cpu = time.perf_counter() - wall, cpu_seconds(worker.process.pid) - cpu
    finally:
        worker.stop()
    sent = asyncio.run(messages_on(settings, settings.topics.changes)) if changes else 0
    return WorkerRun(wall, cpu, sent)


def on_kafka(options: Options, bootstrap: str) -> None:
    count = WORKER_QUICK_EVENTS if options.quick else WORKER_FULL_EVENTS
    events = tavern_story(count, seed=11, worlds=spread_worlds(PARTITIONS, PARTITIONS))
    on: list[WorkerRun] = []
    off: list[WorkerRun] = []
    with tempfile.TemporaryDirectory(prefix="rumourmill-bench-") as temp:
        # discarded: the broker's code is compiled as it runs (its JIT), and would otherwise
        # be so only for the first run, with the feed on
        worker_run(bootstrap, events, Path(temp) / "warm-up", changes=True)
        for attempt in range(options.repeats):  # alternated, so both see the same machine
            on.append(worker_run(bootstrap, events, Path(temp) / f"on-{attempt}", changes=True))
            off.append(worker_run(bootstrap, events, Path(temp) / f"off-{attempt}", changes=False))
        story = encoded(tavern_story(200, seed=3, worlds=("tavern-0",)))
        sample = fold(story, b"tavern-0", changes=True).last
        assert sample is not None
        topic = prepared_settings(bootstrap, Path(temp) / "send", PARTITIONS).topics.changes
        send_cost = asyncio.run(producer_send_cpu(bootstrap, topic, count, sample))
        batch_cost = asyncio.run(feed_sender_cpu(bootstrap, topic, count, sample))
    (wall_on, cpu_on), (wall_off, cpu_off) = (median_rates(runs, count) for runs in (on, off))
    report(
        f"(h) change feed, worker on Apache Kafka: {count} events, median of {options.repeats}",
        [
            ("worker, feed on (publish to last ack)", f"{wall_on:,.0f} events/s"),
            ("worker, feed off (publish to last ack)", f"{wall_off:,.0f} events/s"),
            (f"ratio on/off (goal >= {GOAL})", f"{wall_on / wall_off:.3f}"),
            ("worker CPU time, feed on", f"{cpu_on:,.0f} events/s"),
            ("worker CPU time, feed off", f"{cpu_off:,.0f} events/s"),
            ("ratio on/off, worker CPU time", f"{cpu_on / cpu_off:.3f}"),
            (
                "the feed's cost per event, worker CPU time",
                f"{1e6 / cpu_on - 1e6 / cpu_off:.0f} us",
            ),
            ("feed messages per event", f"{median([r.sent for r in on]) / count:.2f}"),
            ("a bare producer's send, CPU per message", f"{send_cost:.1f} us"),
            (
                f"the worker's way: batches of {CHANGES_PER_MESSAGE}, CPU per message",
                f"{batch_cost:.1f} us",
            ),
            ("runs on, events/s", " ".join(f"{rate(count, r.wall):,.0f}" for r in on)),
            ("runs off, events/s", " ".join(f"{rate(count, r.wall):,.0f}" for r in off)),
        ],
    )


async def producer_send_cpu(bootstrap: str, topic: str, count: int, change: bytes) -> float:
    """CPU microseconds a bare aiokafka producer spends per change sent (partition given, as
    the worker gives it), delivery included: the floor of what each change costs the worker."""
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap)
    await producer.start()
    try:
        began = time.process_time()
        sent = [
            await producer.send(topic, change, key=b"tavern-0", partition=0) for _ in range(count)
        ]
        await asyncio.gather(*sent)
        return (time.process_time() - began) * 1e6 / count
    finally:
        await producer.stop()


CHANGES_PER_MESSAGE = 13
"""About how many changes an event of the story makes."""


async def feed_sender_cpu(bootstrap: str, topic: str, count: int, change: bytes) -> float:
    """CPU microseconds per change the worker's way (`streams.change_feed`): the changes of
    one event added to their partition's open batch together, one future per batch."""
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap)
    await producer.start()
    try:
        feed = BatchSender(lambda: producer, topic)
        began = time.process_time()
        sent = [
            delivery
            for _ in range(count // CHANGES_PER_MESSAGE)
            for delivery in await feed.send(0, b"tavern-0", [change] * CHANGES_PER_MESSAGE)
        ]
        await asyncio.gather(*sent)
        return (
            (time.process_time() - began)
            * 1e6
            / (count // CHANGES_PER_MESSAGE * CHANGES_PER_MESSAGE)
        )
    finally:
        await producer.stop()


async def messages_on(settings: Settings, topic: str) -> int:
    """How many messages `topic` holds."""
    consumer = AIOKafkaConsumer(bootstrap_servers=settings.bootstrap, group_id=None)
    await consumer.start()
    try:
        ends = await consumer.end_offsets(
            [TopicPartition(topic, n) for n in range(settings.partitions)]
        )
        return sum(ends.values())
    finally:
        await consumer.stop()


if __name__ == "__main__":
    run_main(__doc__ or "", in_process=in_process, on_kafka=on_kafka)
