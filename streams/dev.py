"""`rumourmill dev` (`make run`): the whole system on one machine, with a story to watch.

Starts the embedded Tansu broker, a worker with its web server, publishes the bundled demo
story, prints every ack as it comes back and the minds it produced, then serves until Ctrl-C.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import click
import orjson
from aiokafka import AIOKafkaConsumer

from streams.brokers import die_with_parent, tansu
from streams.publish import publish, read_lines
from streams.settings import Settings
from streams.show import fetch, mind_tables

DEMO_STORY = Path(__file__).resolve().parent.parent / "examples" / "tavern.ndjson"
DEMO_READS = [("main", "npc-mara"), ("main", "npc-tomas"), ("reload", "npc-mara")]
"""The minds the demo prints: Mara and Tomas now, and Mara in the save loaded before the fight."""


def run_demo(story: Path, web_port: int, ready_timeout: float = 120.0) -> None:
    """Run broker, worker and demo until Ctrl-C (or SIGTERM); stop both on the way out."""
    data_dir = Path(tempfile.mkdtemp(prefix="rumourmill-dev-"))
    with tansu() as broker:
        settings = Settings.from_env(broker=broker.bootstrap, data_dir=data_dir, web_port=web_port)
        click.echo(f"broker: Tansu on {broker.bootstrap} (memory only)")
        env = {
            **os.environ,
            **{f"RUMOURMILL_{k.upper()}": str(v) for k, v in vars(settings).items()},
        }
        log_path = data_dir / "worker.log"
        with log_path.open("wb") as log:
            worker = subprocess.Popen(
                [sys.executable, "-m", "streams", "worker"],
                env=env,
                stdout=log,
                stderr=log,
                preexec_fn=die_with_parent,
            )
        try:
            _wait_until_ready(worker, log_path, ready_timeout)
            click.echo(f"worker: ready, web on http://{settings.web_host}:{settings.web_port}")
            lines = list(read_lines(story))
            asyncio.run(publish(settings.broker, settings.events_topic, lines))
            click.echo(f"published {len(lines)} events from {story}")
            for ack in asyncio.run(_read_acks(settings, len(lines))):
                click.echo(
                    f"  ack {ack['timeline_id']}#{ack['seq']}: {ack['outcome']}"
                    f" (processed_seq {ack['processed_seq']})"
                )
            for timeline, npc in DEMO_READS:
                query = {"world_instance_id": "save-1", "timeline_id": timeline}
                mind = fetch(settings, f"/v2/memory/runtime/npcs/{npc}", query, None)
                click.echo(f"\n{mind_tables(mind)}\n")
            click.echo(
                f"try: curl '{settings.canonical_url}/v2/memory/runtime/npcs/npc-mara"
                "?world_instance_id=save-1&timeline_id=main'"
            )
            stop_signals = block_stop_signals()
            click.echo(f"worker log: {log_path}\nserving until Ctrl-C")
            signal.sigwait(stop_signals)
        finally:
            worker.send_signal(signal.SIGTERM)
            try:
                worker.wait(30)
            except subprocess.TimeoutExpired:
                worker.kill()
            click.echo("stopped")


def _wait_until_ready(worker: subprocess.Popen[bytes], log_path: Path, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if worker.poll() is not None:
            raise click.ClickException(f"worker exited; see {log_path}")
        if b"Ready" in log_path.read_bytes():
            return
        time.sleep(0.2)
    raise click.ClickException(f"worker not ready after {timeout:.0f}s; see {log_path}")


async def _read_acks(
    settings: Settings, count: int, timeout: float = 60.0
) -> list[dict[str, object]]:
    consumer = AIOKafkaConsumer(
        settings.acks_topic, bootstrap_servers=settings.broker, auto_offset_reset="earliest"
    )
    await consumer.start()
    acks: list[dict[str, object]] = []
    try:
        deadline = time.monotonic() + timeout
        while len(acks) < count and time.monotonic() < deadline:
            for records in (await consumer.getmany(timeout_ms=500)).values():
                acks.extend(orjson.loads(record.value) for record in records)
    finally:
        await consumer.stop()
    return acks


def block_stop_signals() -> set[signal.Signals]:
    """Hold Ctrl-C and SIGTERM for `signal.sigwait`, so the caller's clean-up always runs.

    Call it after starting child processes: they would inherit the blocked mask.
    """
    stop_signals = {signal.SIGINT, signal.SIGTERM}
    signal.pthread_sigmask(signal.SIG_BLOCK, stop_signals)
    return stop_signals
