"""(c) The runtime read under load: 32 concurrent clients, beside a static handler of its bytes.

Starts Apache Kafka (or uses `RUMOURMILL_TEST_BROKER`) and one worker, loads a tavern story
(characters with memories on `main` and on a reloaded branch) and waits until every event is
processed. Every character's read on both timelines is fetched once; a static aiohttp server in
its own process then serves those very bytes at the same paths. CLIENTS concurrent aiohttp
clients read a random character on a random timeline in a loop for a fixed time, from the
worker and from the static server in turn, `repeats` times each. Prints reads/s, p50/p99
latency, the server's CPU time per read and errors (anything but a 200 with the expected bytes)
of each, and the ratio of their throughputs (the CPU ratio beside it is steadier on a shared
machine). Only reads answered whole count, in the rates and the latencies; with any error,
the ratios say n/a. Bounded: stops itself, and stops what it started.
"""

from __future__ import annotations

import asyncio
import random
import subprocess
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

import aiohttp
import orjson

from benchmarks.static_server import StaticServer
from benchmarks.support import Options, cpu_seconds, median, percentile, report, run_main
from streams.replay import replay_lines
from streams.settings import Settings
from tests.streams.noisy_story import CHARACTERS, story
from tests.support import WorkerProcess, read_topic, send_events, unique_settings

CLIENTS = 32
EVENTS = 3_000
FULL_SECONDS = 10.0
QUICK_SECONDS = 5.0
THROUGHPUT_GOAL = 0.3
"""Worker reads/s over the static handler's, same clients, same bytes (issue 9)."""


@dataclass(frozen=True)
class Load:
    """One run of the clients against one server: reads/s, latencies, the server's CPU
    seconds per read and what went wrong."""

    reads_per_second: float
    latencies: list[float]
    cpu_per_read: float
    errors: Counter[str]


def load_story(settings: Settings) -> str:
    """The story's world, once the worker has acknowledged every event of it."""
    lines = story(worlds=1, events_per_world=EVENTS, seed=5)
    expected = sum(replay_lines(lines).outcomes.values())
    send_events(settings, lines)
    read_topic(settings, settings.topics.acks, lambda got: len(got) >= expected, timeout=300)
    return str(orjson.loads(lines[0])["world_instance_id"])


def read_paths(world: str) -> list[str]:
    """Every character's runtime read on `main` and on the reloaded branch."""
    return [
        f"/v2/memory/runtime/npcs/{npc}?world_instance_id={world}&timeline_id={timeline}"
        for npc in CHARACTERS
        for timeline in ("main", "reload")
    ]


async def fetch_all(base: str, paths: list[str]) -> dict[str, bytes]:
    """The body of each path, which must answer 200."""
    bodies: dict[str, bytes] = {}
    async with aiohttp.ClientSession() as session:
        for path in paths:
            async with session.get(base + path) as reply:
                body = await reply.read()
                if reply.status != 200:
                    raise RuntimeError(f"{path}: {reply.status} {body[:200]!r}")
                bodies[path] = body
    return bodies


async def hammer(
    base: str, server_pid: int, bodies: Mapping[str, bytes], clients: int, seconds: float
) -> Load:
    """`clients` concurrent readers of random paths of `bodies` for `seconds`."""
    paths = sorted(bodies)
    latencies: list[float] = []
    errors: Counter[str] = Counter()
    connector = aiohttp.TCPConnector(limit=clients)
    async with aiohttp.ClientSession(
        connector=connector, timeout=aiohttp.ClientTimeout(total=10)
    ) as session:
        began, began_cpu = time.perf_counter(), cpu_seconds(server_pid)
        stop_at = began + seconds

        async def client(number: int) -> None:
            rng = random.Random(number)
            while time.perf_counter() < stop_at:
                path = rng.choice(paths)
                started = time.perf_counter()
                try:
                    async with session.get(base + path) as reply:
                        body = await reply.read()
                    if reply.status != 200:
                        errors[f"status {reply.status}"] += 1
                    elif body != bodies[path]:
                        errors["other bytes"] += 1
                    else:  # only a read answered whole counts, in the rate and the latencies
                        latencies.append(time.perf_counter() - started)
                except (TimeoutError, aiohttp.ClientError) as failure:
                    errors[type(failure).__name__] += 1

        await asyncio.gather(*(client(number) for number in range(clients)))
        elapsed, cpu = time.perf_counter() - began, cpu_seconds(server_pid) - began_cpu
    if not latencies:
        raise RuntimeError(f"no read of {base} was answered whole: {dict(errors)}")
    return Load(len(latencies) / elapsed, latencies, cpu / len(latencies), errors)


def pid_of(process: subprocess.Popen[bytes] | None) -> int:
    if process is None:
        raise RuntimeError("the server is not running")
    return process.pid


def run(options: Options, bootstrap: str) -> None:
    seconds = QUICK_SECONDS if options.quick else FULL_SECONDS
    worker_runs: list[Load] = []
    static_runs: list[Load] = []
    with tempfile.TemporaryDirectory(prefix="read-load-") as tmp:
        workdir = Path(tmp)
        settings = unique_settings(bootstrap, workdir / "data")
        worker = WorkerProcess(settings, workdir / "worker.log").start()
        try:
            world = load_story(settings)
            worker_url = f"http://127.0.0.1:{settings.web_port}"
            bodies = asyncio.run(fetch_all(worker_url, read_paths(world)))
            with StaticServer(bodies, workdir) as static:
                servers = [(worker_url, pid_of(worker.process))]
                servers.append((static.url, pid_of(static.process)))
                for _ in range(options.repeats):
                    worker_load, static_load = (
                        asyncio.run(hammer(url, pid, bodies, CLIENTS, seconds))
                        for url, pid in servers
                    )
                    worker_runs.append(worker_load)
                    static_runs.append(static_load)
        finally:
            worker.stop()

    def rows(name: str, runs: list[Load]) -> list[tuple[str, str]]:
        errors = sum((load.errors for load in runs), Counter[str]())
        latency = [
            f"p{round(fraction * 100)} "
            f"{median([percentile(load.latencies, fraction) for load in runs]) * 1e3:.2f} ms"
            for fraction in (0.5, 0.99)
        ]
        return [
            (f"{name} reads/s", runs_of([load.reads_per_second for load in runs], "{:,.0f}")),
            (f"{name} latency", ", ".join(latency)),
            (f"{name} CPU/read", runs_of([load.cpu_per_read * 1e6 for load in runs], "{:.0f} us")),
            (f"{name} errors", f"{sum(errors.values())} {dict(errors) if errors else ''}".rstrip()),
        ]

    def paired(measure: Callable[[Load, Load], float]) -> str:
        failed = sum(sum(load.errors.values()) for load in [*worker_runs, *static_runs])
        if failed:  # a server answering errors fast is no server serving reads
            return f"n/a: {failed} read(s) failed (the errors rows)"
        return runs_of([measure(*pair) for pair in zip(worker_runs, static_runs, strict=True)])

    sizes = sorted(len(body) for body in bodies.values())
    report(
        f"(c) runtime read under load: {CLIENTS} clients, {len(bodies)} reads of "
        f"{sizes[0]:,}..{sizes[-1]:,} bytes, {seconds:.0f} s per run, "
        f"worker and static in turn, median of {options.repeats}",
        [
            *rows("worker", worker_runs),
            *rows("static", static_runs),
            (
                f"throughput worker/static, same bytes (goal >= {THROUGHPUT_GOAL})",
                paired(lambda mine, theirs: mine.reads_per_second / theirs.reads_per_second),
            ),
            (
                "CPU per read static/worker (steadier)",
                paired(lambda mine, theirs: theirs.cpu_per_read / mine.cpu_per_read),
            ),
        ],
    )


def runs_of(values: list[float], form: str = "{:.2f}") -> str:
    """The median of `values`, then each of them, in `form`."""
    return f"{form.format(median(values))}  (runs: {' '.join(form.format(v) for v in values)})"


if __name__ == "__main__":
    run_main(__doc__ or "", on_kafka=run)
