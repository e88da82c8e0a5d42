"""Development on one machine: `rumourmill dev` (`make run`) and the local brokers' settings.

`rumourmill dev` starts the embedded Tansu broker, a worker with its web server, publishes the
bundled demo story (or the story given, checked first), prints every ack as it comes back and
the minds of the story's characters, then serves until Ctrl-C.
"""

from __future__ import annotations

import asyncio
import os
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any, NamedTuple

import click
import orjson
from aiokafka import AIOKafkaConsumer

from localbroker import ApacheKafkaBroker, TansuBroker, die_with_parent
from schemas import Event
from streams.kafka_clients import kafka_options
from streams.publish import Line, publish
from streams.settings import ENV_PREFIX, KAFKA_SECURITY, Settings
from streams.show import ReadFailed, fetch, for_terminal, mind_tables, read_path

DEMO_STORY = Path(__file__).resolve().parent / "demo" / "tavern.ndjson"
"""The demo story, installed with the package (`make run` in a checkout, `rumourmill dev` in
an install or the image alike)."""
MINDS_SHOWN = 6
"""The most characters' minds printed after the story (a long story names many)."""
WATCH_SECONDS = 1.0
"""How often a serving `dev` looks whether its worker still runs (one that died served
nothing, and `dev` said it was serving until Ctrl-C)."""


class Mind(NamedTuple):
    """One character on one timeline: what `rumourmill dev` reads back after the story."""

    tenant: str
    world: str
    timeline: str
    npc: str

    def query(self) -> dict[str, str]:
        """The runtime read's query for this character."""
        return {
            "world_instance_id": self.world,
            "timeline_id": self.timeline,
            "tenant_id": self.tenant,
        }


def minds_of(lines: list[Line]) -> list[Mind]:
    """The characters of a story (who acts, is acted on or witnesses; players aside) on each
    timeline they appear on, first seen first: for the demo, Mara and Tomas now, and Mara in
    the save loaded before the fight."""
    found: dict[Mind, None] = {}
    for line in lines:
        event = Event.model_validate_json(line.raw)
        for npc in (event.actor, event.target, *(event.witnesses or ())):
            if npc is not None and npc not in event.players:
                found.setdefault(
                    Mind(event.tenant_id, event.world_instance_id, event.timeline_id, npc)
                )
    return list(found)


def apache_kafka(settings: Settings) -> ApacheKafkaBroker:
    """The local Apache Kafka broker the settings ask for (version, jar cache, java). Raises
    `RuntimeError` naming `RUMOURMILL_JAVA` when it is no program to run: found only once the
    jars were fetched, it was said as `No such file or directory: '/nope/java'`."""
    if settings.java and shutil.which(settings.java) is None:
        raise RuntimeError(f"{settings.named('java')}={settings.java!r} is no program to run")
    return ApacheKafkaBroker(
        version=settings.kafka_version, cache=settings.kafka_cache, java=settings.java or None
    )


class NotReady(Exception):
    """A worker that exited or did not become ready in time."""


def wait_until_ready(
    worker: subprocess.Popen[bytes], settings: Settings, timeout: float
) -> dict[str, Any]:
    """Poll the worker's `GET /ready` until it answers 200, where it listens
    (`RUMOURMILL_WEB_HOST`: 127.0.0.1 was polled, and a worker on `::1` or a LAN address was
    never seen ready).

    Returns the answer; raises `NotReady` if the worker exits or the time runs out.
    """
    url = f"{settings.canonical_url}/ready"
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if worker.poll() is not None:
            raise NotReady(f"the worker exited with code {worker.returncode}")
        try:
            with urllib.request.urlopen(url, timeout=2) as reply:
                answer: dict[str, Any] = orjson.loads(reply.read())
            if worker.poll() is None:  # else another server answered where it was to listen
                return answer
        except OSError:
            pass  # not listening yet (connection refused) or not ready yet (503)
        time.sleep(0.2)
    raise NotReady(f"the worker was not ready after {timeout:.0f}s")


def run_demo(
    story: Path, lines: list[Line], settings: Settings, ready_timeout: float = 120.0
) -> None:
    """Run broker, worker and the story's `lines` (checked already) until Ctrl-C (or SIGTERM);
    stop both on the way out, and remove the worker's state (its broker kept the rest in
    memory), keeping its log. The worker is reached where it listens: a `RUMOURMILL_WEB_URL`
    exported for the read commands (a proxy's, say) is not this worker's."""
    data_dir = Path(tempfile.mkdtemp(prefix="rumourmill-dev-"))
    deployed = settings
    with TansuBroker() as broker:
        settings = settings.on_local_broker(broker.bootstrap).model_copy(
            update={"data_dir": data_dir, "web_url": "", "stop_drain_seconds": 0.0}
        )  # no load balancer to drain for: a deployment's drain held its Ctrl-C
        click.echo(f"broker: Tansu on {broker.bootstrap} (memory only)")
        log_path = data_dir / "worker.log"
        with log_path.open("wb") as log:
            worker = subprocess.Popen(
                [sys.executable, "-m", "streams", "worker"],
                env={**os.environ, **settings.environment()},
                stdout=log,
                stderr=log,
                preexec_fn=die_with_parent,
            )
        try:
            try:
                wait_until_ready(worker, settings, ready_timeout)
            except NotReady as error:
                raise click.ClickException(f"{error}; see {log_path}") from None
            click.echo(f"worker: ready, web on {settings.canonical_url}")
            sent = asyncio.run(publish(settings, settings.topics.events, lines))
            click.echo(f"published {len(lines)} events from {story}")
            for ack in asyncio.run(_read_acks(settings, sent)):
                why = f": {ack['reason']}" if ack.get("reason") else ""
                click.echo(
                    for_terminal(
                        f"  ack {ack['timeline_id']}#{ack['seq']}: {ack['outcome']}"
                        f" (processed_seq {ack['processed_seq']}){why}"
                    )
                )
            show_minds(settings, minds_of(lines))
            stop_signals = block_stop_signals()
            click.echo(
                f"more events: {publishing_to(settings, deployed)} {our_command()} publish"
                " FILE.ndjson"
                f"\nworker log: {log_path}\nserving until Ctrl-C"
            )
            while signal.sigtimedwait(stop_signals, WATCH_SECONDS) is None:
                if worker.poll() is not None:  # it serves nothing now: say so, and stop
                    raise click.ClickException(
                        f"the worker exited with code {worker.returncode}; see {log_path}"
                    )
        finally:
            worker.send_signal(signal.SIGTERM)
            try:
                worker.wait(30)
            except subprocess.TimeoutExpired:
                worker.kill()
                worker.wait()
            if removed_but_log(data_dir, log_path):
                click.echo(f"stopped (worker log kept: {log_path})")
            elif data_dir.exists():
                click.echo(f"stopped (its worker log {log_path} was removed meanwhile)")
            else:
                click.echo(f"stopped ({data_dir} was removed meanwhile, the worker log with it)")


def removed_but_log(data_dir: Path, log_path: Path) -> bool:
    """Remove what the worker wrote in `data_dir` but its log; whether the log is kept. Something
    else may have removed the temporary directory meanwhile (a cleaner of /tmp): the stop went
    on with a traceback."""
    try:
        written = [*data_dir.iterdir()]
    except FileNotFoundError:
        return False
    for path in written:
        if path.is_dir():
            shutil.rmtree(path, ignore_errors=True)
        elif path != log_path:
            path.unlink(missing_ok=True)
    return log_path.exists()


def publishing_to(local: Settings, deployed: Settings) -> str:
    """The variables `rumourmill publish` reaches the demo's broker with: its address, and the
    Kafka security settings exported for the deployment's Kafka set back (taken as they are,
    a SASL login the demo's broker refused)."""
    ours, theirs = local.environment(), deployed.environment()
    security = {f"{ENV_PREFIX}{name.upper()}" for name in KAFKA_SECURITY}
    reset = [f"{name}={ours[name]}" for name in sorted(security) if ours[name] != theirs[name]]
    return " ".join([f"{ENV_PREFIX}BROKER={local.bootstrap}", *reset])


def our_command() -> str:
    """How to run `rumourmill` from any shell: its name where the shell finds this install's
    under it, else its whole path (`make run` installs it in `.venv/bin`, which a new user's
    shell does not search, and a second terminal opens elsewhere)."""
    installed = Path(sys.executable).parent / "rumourmill"
    found = shutil.which("rumourmill")
    if not installed.exists() or (found is not None and Path(found).samefile(installed)):
        return "rumourmill"
    return shlex.quote(str(installed.absolute()))


def reading_as(settings: Settings, tenant: str) -> Settings:
    """The settings a read of `tenant` is made with: `RUMOURMILL_API_KEY` when given, else, with
    `RUMOURMILL_API_KEYS` set, a key of that tenant (the worker answers 401 without one)."""
    if settings.api_key:
        return settings
    key = next((key for key, owner in settings.api_keys.items() if owner == tenant), "")
    return settings.model_copy(update={"api_key": key})


def show_minds(settings: Settings, minds: list[Mind]) -> None:
    """Print the first minds as tables, then how to read one; a read that fails is printed
    and the demo goes on serving."""
    for mind in minds[:MINDS_SHOWN]:
        path = read_path("/v2/memory/runtime/npcs/{npc_id}", npc_id=mind.npc)
        try:
            answer = fetch(reading_as(settings, mind.tenant), path, mind.query())
            click.echo(f"\n{mind_tables(answer)}\n")
        except ReadFailed as error:
            click.echo(f"\n{mind.npc} on {mind.world}/{mind.timeline}: {error}\n")
    if len(minds) > MINDS_SHOWN:
        click.echo(f"{len(minds) - MINDS_SHOWN} more character(s): see `rumourmill npc --help`")
    if minds:
        path = read_path("/v2/memory/runtime/npcs/{npc_id}", npc_id=minds[0].npc)
        query = urllib.parse.urlencode(minds[0].query())
        header = " -H 'Authorization: Bearer KEY'" if settings.api_keys else ""
        click.echo(f"try: curl{header} '{settings.canonical_url}{path}?{query}'")
        if header:
            click.echo(f"  (KEY: a key of tenant {minds[0].tenant!r} in RUMOURMILL_API_KEYS)")


def final(acks: list[dict[str, object]]) -> int:
    """How many of `acks` end their event: one an event waiting for a gap is acked `deferred`,
    then again once the gap fills (with the message that fills it)."""
    return sum(ack["outcome"] != "deferred" for ack in acks)


async def _read_acks(
    settings: Settings, count: int, timeout: float = 60.0
) -> list[dict[str, object]]:
    """The acks of the `count` messages sent, each event's last (and any it was deferred by)."""
    consumer = AIOKafkaConsumer(
        settings.topics.acks, **kafka_options(settings), auto_offset_reset="earliest"
    )
    await consumer.start()
    acks: list[dict[str, object]] = []
    try:
        deadline = time.monotonic() + timeout
        while final(acks) < count and time.monotonic() < deadline:
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
