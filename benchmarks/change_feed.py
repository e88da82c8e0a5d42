"""(h) The change feed's cost: ingest with the feed on / off (goal >= 0.9), same run, medians.

Rumours spread (`memory.spreading.enabled`), so every change kind but deletion is produced.
In-process: `Projector.receive` over `MemoryState` with `changes=True` and without, alternated:
the fold alone, without the RocksDB, Kafka and Faust work a worker does for every event, so the
feed's share of it is larger than of ingest, which the goal is about.
On Apache Kafka: the events are published first; then fresh `rumourmill worker`s (a consumer
group, changelog and data dir of their own each) with `RUMOURMILL_CHANGES` true and false,
alternated after a discarded warm-up run, each timed as (a) times its worker: steady, the events
acked after its first ack (a batch's acks go out together) over the time from its first ack to
its last, since ingest is what the goal is about (timed from publishing, a run of a
few thousand events is mostly the publisher's pace and the last acks' wait). Also how many feed
messages each event sent.

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
from typing import Protocol

import orjson
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

from benchmarks.story import encoded, tavern_story
from benchmarks.support import (
    Options,
    median,
    prepared_settings,
    rate,
    report,
    run_main,
    send_events,
    spread_worlds,
)
from benchmarks.worker_throughput import PARTITIONS, Run, steady_rate, worker_run
from projections.delivery import SourceMessage
from projections.policy import policy_key, resolve
from projections.projector import Projector
from projections.state import MemoryState
from streams.batch_sender import BatchSender
from streams.publish import send_one
from streams.settings import Settings

SPREADING = {"memory": {"spreading": {"enabled": True}}}
FULL_EVENTS = 20_000
QUICK_EVENTS = 5_000
WORKER_FULL_EVENTS = 8_000
WORKER_QUICK_EVENTS = 3_000
SENDS = 50_000
"""Changes sent to time a send: a few thousand would time mostly the producer's start."""
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
            (
                "ratio on/off, CPU time (the fold alone: the goal is ingest's, on Kafka)",
                f"{cpu_on / cpu_off:.3f}",
            ),
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


def on_kafka(options: Options, bootstrap: str) -> None:
    """Publish the events once; then fresh workers over them, the feed on and off alternated
    after a discarded warm-up run (the broker's code is compiled as it runs, its JIT, and would
    otherwise be so only for the first run): each timed as (a) times its worker, steady
    (`worker_throughput.worker_run`, `steady_rate`)."""
    count = WORKER_QUICK_EVENTS if options.quick else WORKER_FULL_EVENTS
    events = tavern_story(count, seed=11, worlds=spread_worlds(PARTITIONS, PARTITIONS))
    on: list[Run] = []
    off: list[Run] = []
    sent: list[int] = []
    with tempfile.TemporaryDirectory(prefix="rumourmill-bench-") as temp:
        workdir = Path(temp)
        settings = prepared_settings(bootstrap, workdir / "data", PARTITIONS)
        asyncio.run(
            send_one(
                settings,
                settings.topics.policies,
                policy_key("default", None),
                orjson.dumps(SPREADING),
            )
        )
        send_events(settings, events)
        warm_up, feed_on, feed_off = (
            settings.model_copy(update={"changes": changes, "app_id": f"{settings.app_id}-{name}"})
            for changes, name in ((True, "warm-up"), (True, "on"), (False, "off"))
        )
        for side in ("warm-up", "on", "off"):
            (workdir / side).mkdir()
        worker_run(warm_up, count, workdir / "warm-up", 0)
        for attempt in range(options.repeats):  # alternated, so both see the same machine
            before = asyncio.run(messages_on(settings, settings.topics.changes))
            on.append(worker_run(feed_on, count, workdir / "on", attempt))
            sent.append(asyncio.run(messages_on(settings, settings.topics.changes)) - before)
            off.append(worker_run(feed_off, count, workdir / "off", attempt))
        story = encoded(tavern_story(200, seed=3, worlds=("tavern-0",)))
        sample = fold(story, b"tavern-0", changes=True).last
        assert sample is not None
        topic = settings.topics.changes
        send_cost = asyncio.run(producer_send_cpu(bootstrap, topic, SENDS, sample))
        batch_cost = asyncio.run(feed_sender_cpu(bootstrap, topic, SENDS, sample))
    wall_on, wall_off = (median([steady_rate(run, count) for run in runs]) for runs in (on, off))
    cpu_on, cpu_off = (median([run.cpu_per_event for run in runs]) for runs in (on, off))
    report(
        f"(h) change feed, worker on Apache Kafka: {count} events, median of {options.repeats}",
        [
            (
                "worker, feed on, steady (events acked after the first ack)",
                f"{wall_on:,.0f} events/s",
            ),
            (
                "worker, feed off, steady (events acked after the first ack)",
                f"{wall_off:,.0f} events/s",
            ),
            (f"ratio on/off, ingest (goal >= {GOAL})", f"{wall_on / wall_off:.3f}"),
            ("worker CPU time per event, feed on", f"{1e6 * cpu_on:,.0f} us"),
            ("worker CPU time per event, feed off", f"{1e6 * cpu_off:,.0f} us"),
            ("ratio on/off, worker CPU time", f"{cpu_off / cpu_on:.3f}"),
            ("the feed's cost per event, worker CPU time", f"{1e6 * (cpu_on - cpu_off):.0f} us"),
            ("feed messages per event", f"{median(sent) / count:.2f}"),
            ("a bare producer's send, CPU per message", f"{send_cost:.1f} us"),
            (
                f"the worker's way: batches of {CHANGES_PER_MESSAGE}, CPU per message",
                f"{batch_cost:.1f} us",
            ),
            ("runs on, events/s", " ".join(f"{steady_rate(r, count):,.0f}" for r in on)),
            ("runs off, events/s", " ".join(f"{steady_rate(r, count):,.0f}" for r in off)),
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
    """CPU microseconds per change the worker's way (`streams.batch_sender`): the changes of
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
