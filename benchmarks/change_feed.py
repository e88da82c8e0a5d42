"""(h) The change feed's cost: ingest with the feed on / off (goal >= 0.9), same run, medians.

Rumours spread (`memory.spreading.enabled`), so every change kind but deletion is produced.
In-process: `Projector.receive` over `MemoryState` with `changes=True` and without, alternated.
On Apache Kafka: a fresh `rumourmill worker` with `RUMOURMILL_CHANGES` true and false,
alternated over the same published events, steady rate from its first to its last ack
(`worker_throughput.worker_run`), and how many feed messages each event sent.
One extra in-process pass with the feed on runs under cProfile: the feed's own entries.
"""

from __future__ import annotations

import asyncio
import cProfile
import io
import pstats
import tempfile
import time
from pathlib import Path

import orjson
from aiokafka import AIOKafkaConsumer, TopicPartition

from benchmarks.story import encoded, tavern_story
from benchmarks.support import (
    Options,
    kafka_bootstrap,
    median,
    parse_options,
    prepared_settings,
    rate,
    report,
    send_events,
    spread_worlds,
)
from benchmarks.worker_throughput import PARTITIONS, worker_run
from projections.delivery import SourceMessage
from projections.policy import policy_key, resolve
from projections.projector import Projector
from projections.state import MemoryState
from streams.publish import send_one
from streams.settings import Settings

SPREADING = {"memory": {"spreading": {"enabled": True}}}
FULL_EVENTS = 20_000
QUICK_EVENTS = 5_000
WORKER_FULL_EVENTS = 8_000
WORKER_QUICK_EVENTS = 3_000
GOAL = 0.9


def fold(lines: list[bytes], key: bytes, changes: bool) -> tuple[float, int]:
    """Seconds to fold `lines` into a fresh state, and how many changes they made."""
    policy = resolve(SPREADING, None)
    projector, state = Projector(lambda tenant, world: policy, changes=changes), MemoryState()
    made = 0
    began = time.perf_counter()
    for offset, raw in enumerate(lines):
        made += len(projector.receive(state, SourceMessage("bench", 0, offset, key, raw)).changes)
    return time.perf_counter() - began, made


def in_process(options: Options) -> None:
    count = QUICK_EVENTS if options.quick else FULL_EVENTS
    world = "tavern-0"
    lines = encoded(tavern_story(count, seed=3, worlds=(world,)))
    key = world.encode()
    fold(lines[: count // 10], key, changes=True)  # warm up imports and caches
    on: list[float] = []
    off: list[float] = []
    made = 0
    for _ in range(options.repeats):
        seconds, made = fold(lines, key, changes=True)
        on.append(rate(count, seconds))
        off.append(rate(count, fold(lines, key, changes=False)[0]))
    on_rate, off_rate = median(on), median(off)
    report(
        f"(h) change feed in-process: {count} events, spreading on, median of {options.repeats}",
        [
            ("feed on", f"{on_rate:,.0f} events/s"),
            ("feed off", f"{off_rate:,.0f} events/s"),
            (f"ratio on/off (goal >= {GOAL})", f"{on_rate / off_rate:.3f}"),
            ("cost per event", f"{1e6 / on_rate - 1e6 / off_rate:,.1f} us"),
            ("changes per event", f"{made / count:.2f}"),
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
    stats.print_stats(r"changes\.py|model_dump|model_construct", 12)
    return "\n".join(line for line in out.getvalue().splitlines() if line.strip())


def on_kafka(options: Options, bootstrap: str) -> None:
    count = WORKER_QUICK_EVENTS if options.quick else WORKER_FULL_EVENTS
    with tempfile.TemporaryDirectory(prefix="rumourmill-bench-") as temp:
        workdir = Path(temp)
        settings = prepared_settings(bootstrap, workdir / "data", PARTITIONS)
        asyncio.run(
            send_one(
                settings.bootstrap,
                settings.topics.policies,
                policy_key("default", None),
                orjson.dumps(SPREADING),
            )
        )
        events = tavern_story(count, seed=11, worlds=spread_worlds(PARTITIONS, PARTITIONS))
        send_events(settings, events)
        off_settings = settings.model_copy(update={"changes": False})
        on: list[float] = []
        off: list[float] = []
        for attempt in range(options.repeats):
            on.append(rate(count, worker_run(settings, count, workdir, 2 * attempt).steady))
            off.append(
                rate(count, worker_run(off_settings, count, workdir, 2 * attempt + 1).steady)
            )
        sent = asyncio.run(feed_messages(settings))
    on_rate, off_rate = median(on), median(off)
    report(
        f"(h) change feed, worker on Apache Kafka: {count} events, median of {options.repeats}",
        [
            ("worker, feed on (steady)", f"{on_rate:,.0f} events/s"),
            ("worker, feed off (steady)", f"{off_rate:,.0f} events/s"),
            (f"ratio on/off (goal >= {GOAL})", f"{on_rate / off_rate:.3f}"),
            ("feed messages per event", f"{sent / (count * options.repeats):.2f}"),
            ("runs on, events/s", " ".join(f"{r:,.0f}" for r in on)),
            ("runs off, events/s", " ".join(f"{r:,.0f}" for r in off)),
        ],
    )


async def feed_messages(settings: Settings) -> int:
    """How many messages the changes topic holds (every run with the feed on wrote to it)."""
    consumer = AIOKafkaConsumer(bootstrap_servers=settings.bootstrap, group_id=None)
    await consumer.start()
    try:
        ends = await consumer.end_offsets(
            [TopicPartition(settings.topics.changes, n) for n in range(settings.partitions)]
        )
        return sum(ends.values())
    finally:
        await consumer.stop()


def main() -> None:
    options = parse_options(__doc__ or "")
    in_process(options)
    with kafka_bootstrap() as bootstrap:
        on_kafka(options, bootstrap)


if __name__ == "__main__":
    main()
