"""(c) Runtime read latency over HTTP against a running worker, next to a static handler.

A worker on Apache Kafka takes in the seed's tavern story and a generated tavern-like world,
then `GET /v2/memory/runtime/npcs/{npc}` is sent sequentially over one keep-alive connection
(aiohttp). The baseline is a tiny aiohttp server in its own process returning the very same
bytes, measured the same way, alternately with the worker. Both are measured once the worker is
idle (its partitions checkpointed and the memories it formed embedded): the embedding agent
catching up the world just taken in shares the event loop with the reads, and moved the busy
read's p99 from 1.5 to 3.2 times the static handler's between runs.

Then the busy read again, sequentially, while the worker takes in a backlog of another world's
events (so the read's bytes stay the same): a batch of events holds the worker's event loop while
it is projected, and a read that comes meanwhile waits (`RUMOURMILL_BATCH_EVENTS` sets how many
a batch takes while a backlog waits).
"""

from __future__ import annotations

import asyncio
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import orjson

from benchmarks.static_server import StaticServer
from benchmarks.story import encoded, tavern_story
from benchmarks.support import (
    Options,
    WorkerProcess,
    median,
    percentile,
    prepared_settings,
    run_main,
    send_events,
    wait_until_idle,
)
from streams.dev import DEMO_STORY
from streams.settings import Settings
from tests.support import read_topic

FULL_REQUESTS = 1_000
QUICK_REQUESTS = 300
WARM_UP = 50
FULL_STORY = 5_000
QUICK_STORY = 2_000
P99_GOAL_MS = 5.0
FULL_BACKLOG = 8_000
QUICK_BACKLOG = 3_000
LONGEST = 8
"""How many of the longest reads during the backlog are printed: one read waits per batch."""


@dataclass(frozen=True)
class Target:
    """One character's read: what it is called in the report, and its path."""

    label: str
    path: str


TARGETS = (
    Target(
        "seed: npc-mara on save-1/main",
        "/v2/memory/runtime/npcs/npc-mara?world_instance_id=save-1&timeline_id=main",
    ),
    Target(
        "busy: npc-007 on tavern-0/main",
        "/v2/memory/runtime/npcs/npc-007?world_instance_id=tavern-0&timeline_id=main",
    ),
)


async def latencies(url: str, count: int, expected: bytes) -> list[float]:
    """Seconds per sequential GET of `url` on one keep-alive connection (after a warm-up)."""
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=1)) as session:
        for _ in range(WARM_UP):
            await timed_get(session, url, expected)
        return [await timed_get(session, url, expected) for _ in range(count)]


async def latencies_until(url: str, expected: bytes, done: asyncio.Event) -> list[float]:
    """Seconds per sequential GET of `url` on one keep-alive connection, until `done` is set."""
    timings: list[float] = []
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=1)) as session:
        while not done.is_set():
            timings.append(await timed_get(session, url, expected))
    return timings


async def timed_get(session: aiohttp.ClientSession, url: str, expected: bytes) -> float:
    """Seconds one GET of `url` took; raises unless it answered 200 with `expected`."""
    began = time.perf_counter()
    async with session.get(url) as response:
        body = await response.read()
    elapsed = time.perf_counter() - began
    if response.status != 200 or body != expected:
        raise RuntimeError(f"{url}: {response.status} {body[:200]!r}")
    return elapsed


async def fetch(url: str) -> bytes:
    async with aiohttp.ClientSession() as session, session.get(url) as response:
        body = await response.read()
        if response.status != 200:
            raise RuntimeError(f"{url}: {response.status} {body[:200]!r}")
        return body


def load_world(story_events: int) -> list[bytes]:
    """The seed's tavern story, then a generated tavern-like world."""
    seed = [line for line in DEMO_STORY.read_bytes().splitlines() if line.strip()]
    return seed + encoded(tavern_story(story_events, seed=5, worlds=("tavern-0",)))


def measure(target: Target, worker_url: str, workdir: Path, options: Options) -> list[str]:
    """p50/p99 of the worker and of the static twin for one read: the report's rows."""
    count = QUICK_REQUESTS if options.quick else FULL_REQUESTS
    body = asyncio.run(fetch(worker_url + target.path))
    worker: list[list[float]] = []
    static: list[list[float]] = []
    with StaticServer({target.path: body}, workdir) as server:
        for _ in range(options.repeats):
            worker.append(asyncio.run(latencies(worker_url + target.path, count, body)))
            static.append(asyncio.run(latencies(server.url + target.path, count, body)))

    def ms(runs: list[list[float]], fraction: float) -> float:
        return median([percentile(run, fraction) for run in runs]) * 1e3

    mind: dict[str, Any] = orjson.loads(body)
    shape = ", ".join(
        f"{len(mind[part])} {part}" for part in ("beliefs", "recollections", "relations")
    )
    ratio = ms(worker, 0.99) / ms(static, 0.99)
    return [
        f"{target.label}: {len(body):,} bytes ({shape}); {count} requests x {options.repeats}",
        f"  worker  p50 {ms(worker, 0.5):.3f} ms  p99 {ms(worker, 0.99):.3f} ms"
        f"  (goal p99 <= {P99_GOAL_MS} ms)",
        f"  static  p50 {ms(static, 0.5):.3f} ms  p99 {ms(static, 0.99):.3f} ms",
        f"  ratio p99 worker/static {ratio:.2f} (goal <= 2); "
        f"ratio p50 {ms(worker, 0.5) / ms(static, 0.5):.2f}",
    ]


def catching_up(settings: Settings, worker_url: str, processed: int, options: Options) -> list[str]:
    """The busy read, sequentially, while the worker takes in a backlog of another world; the
    worker has `processed` events before it. The report's rows."""
    target = TARGETS[1]
    body = asyncio.run(fetch(worker_url + target.path))
    backlog = encoded(
        tavern_story(QUICK_BACKLOG if options.quick else FULL_BACKLOG, seed=7, worlds=("tavern-1",))
    )
    send_events(settings, backlog)

    async def reading() -> tuple[list[float], float]:
        done = asyncio.Event()
        began = time.perf_counter()
        reads = asyncio.create_task(latencies_until(worker_url + target.path, body, done))
        try:
            await asyncio.to_thread(
                read_topic,
                settings,
                settings.topics.acks,
                lambda acks: (
                    sum(ack["outcome"] == "processed" for ack in acks) >= processed + len(backlog)
                ),
                timeout=60 + len(backlog) * 0.01,
            )
        finally:
            done.set()
        return await reads, time.perf_counter() - began

    timings, seconds = asyncio.run(reading())
    return [
        f"{target.label}, while the worker takes in a backlog of {len(backlog):,} events of "
        f"another world (batches of up to {settings.batch_events}; one run)",
        f"  {len(timings)} reads in {seconds:.1f} s: p50 {percentile(timings, 0.5) * 1e3:.1f} ms"
        f"  p99 {percentile(timings, 0.99) * 1e3:.1f} ms",
        "  the longest (a read that came while a batch was projected waited for it): "
        + ", ".join(f"{seconds * 1e3:.0f}" for seconds in sorted(timings)[-LONGEST:][::-1])
        + " ms",
    ]


def run(options: Options, bootstrap: str) -> None:
    story_events = QUICK_STORY if options.quick else FULL_STORY
    with tempfile.TemporaryDirectory(prefix="rumourmill-bench-") as temp:
        workdir = Path(temp)
        settings = prepared_settings(bootstrap, workdir / "data")
        lines = load_world(story_events)
        send_events(settings, lines)
        worker = WorkerProcess(settings, workdir / "worker.log")
        try:
            worker.start()
            read_topic(
                settings,
                settings.topics.acks,
                lambda acks: sum(ack["outcome"] == "processed" for ack in acks) >= len(lines),
                timeout=60 + len(lines) * 0.01,
            )
            wait_until_idle(worker)
            worker_url = f"http://127.0.0.1:{settings.web_port}"
            rows = [
                row for target in TARGETS for row in measure(target, worker_url, workdir, options)
            ]
            rows += catching_up(settings, worker_url, len(lines), options)
        finally:
            worker.stop()
    print(f"\n== (c) runtime read over HTTP, keep-alive, sequential; medians of {options.repeats}")
    print("\n".join(f"  {row}" for row in rows))


if __name__ == "__main__":
    run_main(__doc__ or "", on_kafka=run)
