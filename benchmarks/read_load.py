"""(c) The runtime read under load: many concurrent clients on 127.0.0.1 for a fixed time.

Starts Apache Kafka (or uses `RUMOURMILL_TEST_BROKER`) and one worker, loads a tavern story
(characters with memories on `main` and on a reloaded branch), waits until every event is
processed, then runs CLIENTS concurrent aiohttp clients for SECONDS, each reading a random
character on a random timeline in a loop. Prints requests, throughput, p50/p99/max latency and
the error count (anything but a 200). Bounded: stops itself, and stops what it started.

    python -m benchmarks.read_load [--clients 32] [--seconds 20] [--events 3000]
"""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import tempfile
import time
from collections import Counter
from pathlib import Path

import aiohttp
import orjson

from benchmarks.support import kafka_bootstrap
from streams.replay import replay_lines
from streams.settings import Settings
from tests.streams.noisy_story import CHARACTERS, story
from tests.support import WorkerProcess, read_topic, send_events, unique_settings


def load_story(settings: Settings, events: int) -> tuple[list[str], int]:
    lines = story(worlds=1, events_per_world=events, seed=5)
    world = orjson.loads(lines[0])["world_instance_id"]
    expected = sum(replay_lines(lines).outcomes.values())
    send_events(settings, lines)
    read_topic(settings, settings.topics.acks, lambda got: len(got) >= expected, timeout=300)
    return [world], len(lines)


async def hammer(
    settings: Settings, worlds: list[str], clients: int, seconds: float
) -> tuple[list[float], Counter[str]]:
    base = f"http://127.0.0.1:{settings.web_port}/v2/memory/runtime/npcs"
    latencies: list[float] = []
    outcomes: Counter[str] = Counter()
    stop_at = time.perf_counter() + seconds
    connector = aiohttp.TCPConnector(limit=clients)
    async with aiohttp.ClientSession(
        connector=connector, timeout=aiohttp.ClientTimeout(total=10)
    ) as session:

        async def client(number: int) -> None:
            rng = random.Random(number)
            while time.perf_counter() < stop_at:
                npc = rng.choice(CHARACTERS)
                timeline = rng.choice(["main", "reload"])
                url = f"{base}/{npc}?world_instance_id={rng.choice(worlds)}&timeline_id={timeline}"
                started = time.perf_counter()
                try:
                    async with session.get(url) as reply:
                        await reply.read()
                        outcomes["200" if reply.status == 200 else f"error {reply.status}"] += 1
                except (TimeoutError, aiohttp.ClientError) as failure:
                    outcomes[f"error {type(failure).__name__}"] += 1
                latencies.append(time.perf_counter() - started)

        await asyncio.gather(*(client(number) for number in range(clients)))
    return latencies, outcomes


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


def run(bootstrap: str, clients: int, seconds: float, events: int) -> None:
    with tempfile.TemporaryDirectory(prefix="read-load-") as tmp:
        settings = unique_settings(bootstrap, Path(tmp) / "data")
        worker = WorkerProcess(settings, Path(tmp) / "worker.log").start()
        try:
            worlds, published = load_story(settings, events)
            print(f"loaded {published} events into {worlds}; {clients} clients for {seconds:.0f} s")
            latencies, outcomes = asyncio.run(hammer(settings, worlds, clients, seconds))
        finally:
            worker.stop()
    errors = sum(count for name, count in outcomes.items() if name != "200")
    total = len(latencies)
    print(f"requests:   {total} ({total / seconds:.0f}/s)")
    print(
        f"latency:    p50 {percentile(latencies, 0.5) * 1000:.2f} ms, "
        f"p99 {percentile(latencies, 0.99) * 1000:.2f} ms, "
        f"max {max(latencies) * 1000:.2f} ms, mean {statistics.fmean(latencies) * 1000:.2f} ms"
    )
    print(f"errors:     {errors} {dict(outcomes) if errors else ''}".rstrip())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, default=32)
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--events", type=int, default=3000, help="events in the story")
    args = parser.parse_args()
    with kafka_bootstrap() as bootstrap:
        run(bootstrap, args.clients, args.seconds, args.events)


if __name__ == "__main__":
    main()
