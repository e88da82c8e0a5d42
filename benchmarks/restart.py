"""(f) Restart at two history sizes: seconds from starting a worker again (after SIGTERM, and
after SIGKILL) until a newly published event is acked, and the worker's resident memory.

A worker takes in N tavern events (4 worlds, one per partition) and is left until it is idle
(its partitions checkpointed, the memories it formed embedded: no CPU used for a while). Then,
per repeat: SIGTERM it, publish the next event of the story, start it again, and time from
launching the process to the ack of that event (the ack's Kafka timestamp); let it go idle.
Then crash it under load: publish the next `BACKLOG` events, SIGKILL it once `KILLED_AFTER` of
them are acked (its state past its last checkpoint, with work in flight), publish the event
after them, start it again and time the same way: recovery, the rest of the backlog (the same
at both sizes), then that event. After SIGKILL the group also waits for the killed member's
session to time out (`SESSION_TIMEOUT_SECONDS`, at both sizes alike): the time beyond it is
printed beside, and its ratio is the one held to the goal. Measured right after the history is
in, a restart would also wait for the embedding backlog (the embedding agent shares the
worker's event loop, between batches). Resident memory (VmRSS) is read once the history is in
and again after the last restart. Failover to a standby is `benchmarks.failover`.

    python -m benchmarks.restart [--quick] [--repeats N]
"""

from __future__ import annotations

import asyncio
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
from aiokafka import AIOKafkaConsumer, TopicPartition

from benchmarks.story import tavern_story
from benchmarks.support import (
    Options,
    WorkerProcess,
    median,
    prepared_settings,
    report,
    run_main,
    send_events,
    spread_worlds,
    wait_until_idle,
)
from benchmarks.worker_throughput import end_offsets
from streams.app import SESSION_TIMEOUT_SECONDS
from streams.settings import Settings
from tests.support import read_topic

PARTITIONS = 4
SMALL = 2_000
FULL_LARGE = 50_000
QUICK_LARGE = 10_000
TERM_GOAL = 1.3
KILL_GOAL = 2.0
INGEST_SECONDS_PER_EVENT = 0.02
"""Generous: 50 events/s would be a failure anyway."""
ACK_TIMEOUT = 180.0
BACKLOG = 4_000
"""Events published before each SIGKILL: over 2 s of work for a worker on this machine."""
KILLED_AFTER = 1_000
"""Acks of the backlog after which the worker is killed."""


@dataclass(frozen=True)
class Restarts:
    """One history size: seconds to the first new ack per restart, and resident memory."""

    history: int
    after_term: list[float]
    after_kill: list[float]
    rss_after_history_mb: float
    rss_after_restarts_mb: float


def resident_mb(worker: WorkerProcess) -> float:
    """The worker process's resident set size (VmRSS), in MiB."""
    assert worker.process is not None
    for line in Path(f"/proc/{worker.process.pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS in /proc: not Linux?")


async def _processed_at_ms(
    settings: Settings,
    start: dict[TopicPartition, int],
    events: list[dict[str, Any]],
    enough: int = 1,
) -> int:
    """The Kafka timestamp of the `processed` ack that makes `enough` of `events` processed,
    read from `start` on."""
    wanted = {(event["world_instance_id"], event["seq"]) for event in events}
    processed: set[tuple[Any, Any]] = set()
    consumer = AIOKafkaConsumer(bootstrap_servers=settings.bootstrap, group_id=None)
    await consumer.start()
    try:
        consumer.assign(list(start))
        for partition, offset in start.items():
            consumer.seek(partition, offset)
        deadline = time.monotonic() + ACK_TIMEOUT
        while time.monotonic() < deadline:
            for records in (await consumer.getmany(timeout_ms=200)).values():
                for record in records:
                    ack = orjson.loads(record.value or b"{}")
                    position = (ack.get("world_instance_id"), ack.get("seq"))
                    if position in wanted and ack.get("outcome") == "processed":
                        processed.add(position)
                        if len(processed) >= enough:
                            return int(record.timestamp)
    finally:
        await consumer.stop()
    raise TimeoutError(f"{len(processed)} of {enough} acks processed in {ACK_TIMEOUT:.0f}s")


def acks_end(settings: Settings) -> dict[TopicPartition, int]:
    return asyncio.run(end_offsets(settings.bootstrap, settings.topics.acks, PARTITIONS))


def crash_under_load(
    worker: WorkerProcess, settings: Settings, backlog: list[dict[str, Any]]
) -> None:
    """Publish `backlog`, and SIGKILL the worker once `KILLED_AFTER` of it is acked."""
    start = acks_end(settings)
    send_events(settings, backlog)
    asyncio.run(_processed_at_ms(settings, start, backlog, KILLED_AFTER))
    worker.kill()


def first_new_ack_seconds(
    worker: WorkerProcess, settings: Settings, event: dict[str, Any], killed: bool
) -> float:
    """Stop the worker (unless `killed` already), publish `event`, start the worker: seconds
    from launch to its ack."""
    if not killed:
        worker.stop()
    start = acks_end(settings)
    send_events(settings, [event])
    launched_ms = time.time() * 1000
    worker.spawn()
    acked_ms = asyncio.run(_processed_at_ms(settings, start, [event]))
    worker.wait_until_ready()
    return (acked_ms - launched_ms) / 1000


def wait_for_history(settings: Settings, events: list[dict[str, Any]], timeout: float) -> None:
    """Until the last event of every world has a `processed` ack."""
    last: dict[str, int] = {}
    for event in events:
        world = event["world_instance_id"]
        last[world] = max(event["seq"], last.get(world, 0))

    def caught_up(acks: list[dict[str, Any]]) -> bool:
        done = {
            (ack["world_instance_id"], ack["seq"]) for ack in acks if ack["outcome"] == "processed"
        }
        return set(last.items()) <= done

    read_topic(settings, settings.topics.acks, caught_up, timeout)


def measure(bootstrap: str, workdir: Path, history: int, repeats: int) -> Restarts:
    settings = prepared_settings(bootstrap, workdir / "data", PARTITIONS)
    worlds = spread_worlds(PARTITIONS, PARTITIONS)
    per_repeat = 2 + BACKLOG
    events = tavern_story(history + per_repeat * repeats, seed=13, worlds=worlds)
    send_events(settings, events[:history])
    worker = WorkerProcess(settings, workdir / "worker.log").start()
    try:
        wait_for_history(settings, events[:history], 60 + history * INGEST_SECONDS_PER_EVENT)
        wait_until_idle(worker)  # checkpointed, offsets committed, memories embedded
        rss_history = resident_mb(worker)
        after_term, after_kill = [], []
        for attempt in range(repeats):
            term, *backlog, kill = events[history + per_repeat * attempt :][:per_repeat]
            after_term.append(first_new_ack_seconds(worker, settings, term, killed=False))
            wait_until_idle(worker)
            crash_under_load(worker, settings, backlog)
            after_kill.append(first_new_ack_seconds(worker, settings, kill, killed=True))
            wait_until_idle(worker)
        return Restarts(history, after_term, after_kill, rss_history, resident_mb(worker))
    except BaseException:
        print(worker.log_tail())
        raise
    finally:
        worker.stop()


def run(options: Options, bootstrap: str) -> None:
    large = QUICK_LARGE if options.quick else FULL_LARGE
    repeats = max(1, options.repeats // 2) if options.quick else options.repeats
    results = []
    for history in (SMALL, large):
        with tempfile.TemporaryDirectory(prefix="rumourmill-bench-") as temp:
            results.append(measure(bootstrap, Path(temp), history, repeats))
    small, big = results
    term = median(big.after_term) / median(small.after_term)
    kill = median(big.after_kill) / median(small.after_kill)
    small_beyond = median(small.after_kill) - SESSION_TIMEOUT_SECONDS
    beyond = (
        f"{(median(big.after_kill) - SESSION_TIMEOUT_SECONDS) / small_beyond:.2f}"
        if small_beyond > 0
        else "n/a (the small history's restart ended within the session timeout)"
    )
    rows = []
    for result in results:
        rows += [
            (
                f"{result.history:>6,} events: first new ack after SIGTERM",
                f"{median(result.after_term):5.2f} s  "
                f"({' '.join(f'{s:.2f}' for s in result.after_term)})",
            ),
            (
                f"{result.history:>6,} events: first new ack after SIGKILL under load",
                f"{median(result.after_kill):5.2f} s  "
                f"({' '.join(f'{s:.2f}' for s in result.after_kill)}), "
                f"{median(result.after_kill) - SESSION_TIMEOUT_SECONDS:.2f} s beyond the "
                f"session timeout",
            ),
            (
                f"{result.history:>6,} events: worker RSS after history, after restarts",
                f"{result.rss_after_history_mb:.0f} MiB, {result.rss_after_restarts_mb:.0f} MiB",
            ),
        ]
    rows += [
        (f"ratio {large:,} / {SMALL:,} after SIGTERM (goal <= {TERM_GOAL})", f"{term:.2f}"),
        (f"ratio {large:,} / {SMALL:,} after SIGKILL, with the session timeout", f"{kill:.2f}"),
        (
            f"ratio {large:,} / {SMALL:,} after SIGKILL, beyond it (goal <= {KILL_GOAL})",
            beyond,
        ),
        (
            f"ratio {large:,} / {SMALL:,} worker RSS after restarts",
            f"{big.rss_after_restarts_mb / small.rss_after_restarts_mb:.2f}",
        ),
    ]
    report(f"(f) restart at {SMALL:,} and {large:,} events of history; medians of {repeats}", rows)


if __name__ == "__main__":
    run_main(__doc__ or "", on_kafka=run)
