"""Test helpers: a worker process we can kill, and an ack reader, on a real broker."""

from __future__ import annotations

import asyncio
import os
import re
import signal
import subprocess
import sys
import time
import urllib.request
import uuid
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

import orjson
from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from prometheus_client.parser import text_string_to_metric_families

from localbroker import free_port
from projections.projector import Projector
from projections.state import MemoryState
from streams.dev import NotReady, wait_until_ready
from streams.durability import Stamp
from streams.kafka_clients import kafka_options
from streams.publish import parse_line, publish
from streams.replay import messages
from streams.settings import Settings
from streams.topics import STATE_TABLE, changelog_topic


def unique_settings(bootstrap: str, data_dir: Path, **overrides: Any) -> Settings:
    """Settings with topics and a consumer group of their own, so tests never see each other."""
    name = f"t{uuid.uuid4().hex[:10]}"
    return Settings(
        broker=bootstrap,
        data_dir=data_dir,
        web_port=free_port(),
        app_id=name,
        topic_prefix=name,
        partitions=overrides.pop("partitions", 2),
        **overrides,
    )


ROOT = Path(__file__).resolve().parent.parent
"""The checkout under test."""


def settings_env(settings: Settings) -> dict[str, str]:
    """The environment a `rumourmill` subprocess reads the same settings from, importing this
    checkout's code whatever its working directory (from elsewhere, `python -m streams` would
    import the installed copy, which may be another checkout's)."""
    paths = [str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])]
    return {**os.environ, **settings.environment(), "PYTHONPATH": os.pathsep.join(paths)}


def run_command(settings: Settings, *command: str) -> subprocess.CompletedProcess[str]:
    """`rumourmill COMMAND` in a process of its own, with `settings`."""
    return subprocess.run(
        [sys.executable, "-m", "streams", *command],
        env=settings_env(settings),
        capture_output=True,
        text=True,
        timeout=90,
    )


class WorkerProcess:
    """`rumourmill worker` as a child process: started, stopped or SIGKILLed by the test."""

    def __init__(self, settings: Settings, log_path: Path) -> None:
        self.settings = settings
        self.log_path = log_path
        self.process: subprocess.Popen[bytes] | None = None

    def start(self, timeout: float = 90.0) -> WorkerProcess:
        """Start and wait until the worker says it is ready (`GET /ready`)."""
        self.spawn()
        self.wait_until_ready(timeout=timeout)
        return self

    def spawn(self) -> WorkerProcess:
        """Start without waiting for anything."""
        with self.log_path.open("ab") as log:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "streams", "worker"],
                env=settings_env(self.settings),
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        return self

    def wait_until_ready(self, timeout: float = 90.0) -> None:
        """Wait until the worker says it is ready (`GET /ready`)."""
        assert self.process is not None
        try:
            wait_until_ready(self.process, self.settings, timeout)
        except NotReady as error:
            self.kill()
            raise NotReady(f"{error}:\n{self.log_tail()}") from None

    def wait_for_log(self, line: bytes, timeout: float = 60.0) -> None:
        """Wait until the worker's log holds `line`; raises with the log's tail if the worker
        exits or `timeout` passes first."""
        assert self.process is not None
        deadline = time.monotonic() + timeout
        while line not in self.log_path.read_bytes():
            if self.process.poll() is not None or time.monotonic() > deadline:
                self.kill()
                raise NotReady(f"no {line!r} in the worker's log:\n{self.log_tail()}")
            time.sleep(0.05)

    def kill(self) -> None:
        """SIGKILL: no shutdown, no flush, no commit."""
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait(30)

    def stop(self) -> None:
        """A clean shutdown (SIGTERM), SIGKILL if it hangs."""
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(60)
            except subprocess.TimeoutExpired:
                self.kill()

    def owned_partitions(self) -> list[int]:
        """The partitions the worker last said it serves (its `state recovered` log line)."""
        said = re.findall(
            r"serving partitions \[([\d, ]*)\]", self.log_path.read_text("utf-8", "replace")
        )
        return [int(number) for number in said[-1].split(",") if number.strip()] if said else []

    def log_tail(self, lines: int = 40) -> str:
        return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])


def topics_on(settings: Settings) -> set[str]:
    """The topics the broker has (listed: asking for a missing one's metadata may create it)."""

    async def listed() -> set[str]:
        admin = AIOKafkaAdminClient(**kafka_options(settings))
        await admin.start()
        try:
            return set(await admin.list_topics())
        finally:
            await admin.close()

    return asyncio.run(listed())


def create_topic(
    settings: Settings, topic: str, partitions: int, configs: dict[str, str] | None = None
) -> None:
    """Make `topic` on the broker as something other than rumourmill would."""

    async def create() -> None:
        admin = AIOKafkaAdminClient(**kafka_options(settings))
        await admin.start()
        try:
            await admin.create_topics([NewTopic(topic, partitions, 1, topic_configs=configs)])
        finally:
            await admin.close()

    asyncio.run(create())


def topic_ends(settings: Settings, topic: str) -> dict[int, int]:
    """Each partition's end offset of `topic`: the records ever written to it."""

    async def ends() -> dict[int, int]:
        admin = AIOKafkaAdminClient(**kafka_options(settings))
        consumer = AIOKafkaConsumer(**kafka_options(settings))
        await admin.start()
        await consumer.start()
        try:
            [described] = await admin.describe_topics([topic])
            numbers = [partition["partition"] for partition in described["partitions"]]
            found = await consumer.end_offsets([TopicPartition(topic, n) for n in numbers])
            return {tp.partition: int(offset) for tp, offset in found.items()}
        finally:
            await consumer.stop()
            await admin.close()

    return asyncio.run(ends())


def changelog_ends(settings: Settings) -> dict[int, int]:
    """Each partition's end offset of the state changelog."""
    return topic_ends(settings, changelog_topic(settings))


def read_all(settings: Settings, topic: str, timeout: float = 60.0) -> list[dict[str, Any]]:
    """Every message `topic` holds now (up to its end offsets as this is called)."""
    total = sum(topic_ends(settings, topic).values())
    return read_topic(settings, topic, lambda got: len(got) >= total, timeout)


def feed_holding(
    settings: Settings, change_ids: set[str], timeout: float = 120.0
) -> list[dict[str, Any]]:
    """Every message of the change feed, once it holds these change ids (then read to its end,
    so a change that should not be there is seen too): the acks of an event do not wait for
    its change records, which the producer sends first but Kafka may store after them."""
    seen: set[str] = set()
    looked_at = 0

    def holds_them(got: list[dict[str, Any]]) -> bool:
        nonlocal looked_at
        seen.update(str(change["change_id"]) for change in got[looked_at:])
        looked_at = len(got)
        return change_ids <= seen

    read_topic(settings, settings.topics.changes, holds_them, timeout)
    return read_all(settings, settings.topics.changes, timeout)


def wait_until_checkpointed(settings: Settings, timeout: float = 60.0) -> None:
    """Wait until every partition with changelog records has a checkpoint holding them all (a
    worker takes one once idle, `streams.durability`); raises on timeout."""
    deadline = time.monotonic() + timeout
    while True:
        stamps = checkpoint_stamps(settings)
        behind = {
            partition: end
            for partition, end in changelog_ends(settings).items()
            if end
            and ((stamp := stamps.get(partition)) is None or stamp.changelog_offset < end - 1)
        }
        if not behind:
            return
        assert time.monotonic() < deadline, f"no checkpoint holds these changelog ends: {behind}"
        time.sleep(0.2)


def checkpoint_stamps(settings: Settings) -> dict[int, Stamp | None]:
    """Each partition's checkpoint stamp, as the worker's files hold them now (None: going as
    it is read): the `.old` and `.tmp` copies beside a checkpoint the worker is swapping in are
    not checkpoints."""
    return {
        int(partition): Stamp.read(path)
        for path in settings.data_dir.rglob(f"checkpoints/{STATE_TABLE}-*/stamp.json")
        if (partition := path.parent.name.removeprefix(f"{STATE_TABLE}-")).isdigit()
    }


def send_events(settings: Settings, events: Iterable[dict[str, Any] | bytes]) -> int:
    """Publish events (dicts or raw bytes) in order, keyed by world like the CLI does."""
    lines = [
        parse_line(number, item if isinstance(item, bytes) else orjson.dumps(item), raw=True)
        for number, item in enumerate(events, start=1)
    ]
    return asyncio.run(publish(settings, settings.topics.events, lines))


def read_topic(
    settings: Settings,
    topic: str,
    until: Callable[[list[dict[str, Any]]], bool],
    timeout: float = 60.0,
    since: Mapping[int, int] | None = None,
) -> list[dict[str, Any]]:
    """Read a topic from the start (or from the offsets `since` gives each partition: its
    `topic_ends` before the test sent anything) until `until(messages)` holds; raises on
    timeout."""

    async def run() -> list[dict[str, Any]]:
        consumer = AIOKafkaConsumer(
            *([] if since is not None else [topic]),
            **kafka_options(settings),
            auto_offset_reset="earliest",
            enable_auto_commit=False,
            group_id=None,
        )
        await consumer.start()
        messages: list[dict[str, Any]] = []
        try:
            if since is not None:
                consumer.assign([TopicPartition(topic, partition) for partition in since])
                for partition, offset in since.items():
                    consumer.seek(TopicPartition(topic, partition), offset)
            deadline = time.monotonic() + timeout
            while time.monotonic() < deadline:
                batch = await consumer.getmany(timeout_ms=500)
                for records in batch.values():
                    messages.extend(orjson.loads(record.value) for record in records)
                if until(messages):
                    return messages
        finally:
            await consumer.stop()
        raise TimeoutError(f"{topic}: condition not met; {len(messages)} messages: {messages[-5:]}")

    return asyncio.run(run())


def event(world: str, seq: int, timeline: str = "main", **fields: Any) -> dict[str, Any]:
    """A minimal valid event."""
    return {
        "world_instance_id": world,
        "timeline_id": timeline,
        "seq": seq,
        "key": fields.pop("key", "story.happened"),
        **fields,
    }


def replayed_change_ids(lines: list[bytes], projector: Projector) -> set[str]:
    """The ids of the changes an in-process replay of `lines` makes (as `streams.replay` feeds
    them: one partition, in order), with `projector` (its feed on)."""
    state = MemoryState()
    return {
        orjson.loads(record)["change_id"]
        for message in messages(lines)
        for records in projector.receive(state, message).changes.values()
        for record in records
    }


Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def samples_of(text: str) -> Samples:
    """Every sample of a Prometheus exposition: (name, sorted labels) -> value."""
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def scrape(settings: Settings) -> Samples:
    """The worker's `GET /metrics`, served as Prometheus expects it and parsed as it parses it."""
    url = f"http://127.0.0.1:{settings.web_port}/metrics"
    with urllib.request.urlopen(url, timeout=10) as reply:
        assert reply.headers["Content-Type"].startswith("text/plain")
        return samples_of(reply.read().decode())


def by_partition(samples: Samples, name: str) -> dict[str, float]:
    """The samples of the family `name`, by their `partition` label."""
    return {
        dict(labels)["partition"]: value
        for (sample, labels), value in samples.items()
        if sample == name
    }


def stopped_saying(result: subprocess.CompletedProcess[str]) -> str:
    """The line a command stopped with, as click prints it (`Error: ...`): a worker logging
    JSON says it as the message of its last line, a critical one."""
    last = result.stderr.splitlines()[-1]
    if not last.startswith("{"):
        return last
    entry = orjson.loads(last)
    assert entry["level"] == "critical", last
    return f"Error: {entry['message']}"
