"""Faults on a real Apache Kafka broker: SIGKILLed workers, a restarted broker, a worker stopped
while its broker is gone, noisy delivery.

Every case ends the same way: each world's digest equals an in-process replay of the very same
published stream, every event the replay processed was acked `processed`, no timeline
applied an event twice (`applied_events` equals the replay's), and the change feed holds every
change the replay made, and no other.
`RUMOURMILL_SOAK=1` kills more often, over a longer stream.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
import pytest

from localbroker import ApacheKafkaBroker
from projections import timelines
from projections.projector import Projector
from streams.dev import apache_kafka
from streams.replay import Replay, replay_lines
from streams.settings import Settings
from streams.stopping import GAVE_UP_EXIT_CODE, STOP_DEADLINE_SECONDS
from tests.streams.noisy_story import noisy, story
from tests.support import (
    WorkerProcess,
    feed_holding,
    read_topic,
    replayed_change_ids,
    send_events,
    unique_settings,
)

SOAK = os.environ.get("RUMOURMILL_SOAK") == "1"
pytestmark = [pytest.mark.integration, pytest.mark.timeout(3 * 3600 if SOAK else 600)]
KILLS = 20 if SOAK else 6


def get_json(settings: Settings, path: str) -> Any:
    url = f"http://127.0.0.1:{settings.web_port}{path}"
    with urllib.request.urlopen(url, timeout=10) as reply:
        return json.loads(reply.read())


def processed(acks: list[dict[str, Any]]) -> set[tuple[str, str, int]]:
    return {
        (a["world_instance_id"], a["timeline_id"], a["seq"])
        for a in acks
        if a["outcome"] == "processed"
    }


def expected_processed(clean: Replay, lines: list[bytes]) -> set[tuple[str, str, int]]:
    events = {
        (e["world_instance_id"], e["timeline_id"], e["seq"]) for e in map(orjson.loads, lines)
    }
    return {
        key
        for key in events
        if (record := timelines.load(clean.state, "default", key[0], key[1])) is not None
        and key[2] <= record.processed_seq
    }


def assert_same_as_replay(settings: Settings, lines: list[bytes], clean: Replay) -> None:
    """Digests, positions and applied counts of every world equal the clean replay's."""
    for (tenant, world), digest in clean.digests.items():
        reply = get_json(settings, f"/v2/admin/digest?world_instance_id={world}&tenant_id={tenant}")
        assert reply["digest"] == digest, f"{world} differs from the clean replay"
        for timeline in ("main", "reload"):
            record = timelines.load(clean.state, tenant, world, timeline)
            assert record is not None
            shown = get_json(settings, f"/v2/timelines/{timeline}?world_instance_id={world}")
            assert (shown["processed_seq"], shown["applied_events"]) == (
                record.processed_seq,
                record.applied_events,
            ), f"{world}/{timeline}: applied twice or lost"
        mind = get_json(
            settings,
            f"/v2/memory/runtime/npcs/npc-mara?world_instance_id={world}&timeline_id=reload",
        )
        assert mind["beliefs"] or mind["recollections"], "the story formed memories"


def assert_feed_complete(settings: Settings, lines: list[bytes]) -> None:
    """Once every event is acked, the change feed holds the ids of every change an in-process
    replay makes, and no other (a change sent again after a crash repeats its id): read to its
    end, so a change that should not be there is seen too."""
    wanted = replayed_change_ids(lines, Projector(changes=True))
    assert wanted, "the story changed minds"
    seen = {change["change_id"] for change in feed_holding(settings, wanted)}
    assert not wanted - seen, f"{len(wanted - seen)} changes never on the feed"
    assert not seen - wanted, f"{len(seen - wanted)} changes no replay makes"


def wait_for_everything(
    settings: Settings, wanted: set[tuple[str, str, int]], timeout: float
) -> None:
    seen: list[dict[str, Any]] = []

    def done(got: list[dict[str, Any]]) -> bool:
        seen[:] = got
        return processed(got) >= wanted

    try:
        read_topic(settings, settings.topics.acks, done, timeout)
    except TimeoutError:
        raise AssertionError(describe_missing(seen, wanted)) from None


def describe_missing(acks: list[dict[str, Any]], wanted: set[tuple[str, str, int]]) -> str:
    """Per timeline, the first event never processed and every ack it got."""
    missing = sorted(wanted - processed(acks))
    firsts = {key[:2]: key for key in reversed(missing)}
    lines = [f"{len(missing)} events never processed; the first of each timeline:"]
    for world, timeline, seq in sorted(firsts.values()):
        got = [
            (a["outcome"], a["reason"], a["processed_seq"])
            for a in acks
            if (a["world_instance_id"], a["timeline_id"], a["seq"]) == (world, timeline, seq)
        ]
        lines.append(f"{world}/{timeline} seq {seq}: acks {got}")
    return "\n".join(lines)


@pytest.fixture
def settings(kafka_bootstrap: str, tmp_path: Path) -> Settings:
    return unique_settings(kafka_bootstrap, tmp_path / "data")


def test_workers_killed_or_stopped_at_random_moments_while_events_flow(
    settings: Settings, tmp_path: Path
) -> None:
    """SIGKILL (nothing flushed, nothing committed) or SIGTERM (Faust cancels the event in
    hand and commits on the way out): either way no event is lost or applied twice."""
    seed = int(os.environ.get("RUMOURMILL_FAULT_SEED") or random.randrange(1_000_000))
    rng = random.Random(seed)  # the kills'; the publisher draws from its own, so a seed replays
    publishing = random.Random(seed + 1)
    run = faulted_story(seed, worlds=4, events_per_world=900 if SOAK else 450)
    lines, clean, wanted = run.lines, run.clean, run.wanted

    worker = WorkerProcess(settings, tmp_path / "worker.log").start()
    chunks = [lines[i : i + 150] for i in range(0, len(lines), 150)]

    def publish() -> None:
        for chunk in chunks:
            send_events(settings, chunk)
            time.sleep(publishing.uniform(0.2, 1.0))

    publisher = threading.Thread(target=publish)
    publisher.start()
    try:
        for _ in range(KILLS):
            time.sleep(rng.uniform(0.5, 4.0))
            if rng.random() < 0.5:
                worker.kill()
            else:
                worker.stop()
            worker.start()
        publisher.join(300)
        wait_for_everything(settings, wanted, timeout=300)
        assert_same_as_replay(settings, lines, clean)
        assert_feed_complete(settings, lines)
    except BaseException as failure:
        raise AssertionError(f"seed {seed}; worker log:\n{worker.log_tail(60)}") from failure
    finally:
        publisher.join(300)
        worker.stop()


@dataclass(frozen=True)
class FaultedStory:
    """A seeded noisy story a fault test delivers, and what a clean replay of it makes."""

    seed: int
    lines: list[bytes]
    clean: Replay
    wanted: set[tuple[str, str, int]]
    """Every (world, timeline, seq) the worker must process."""


def faulted_story(seed: int, worlds: int, events_per_world: int) -> FaultedStory:
    lines = noisy(story(worlds=worlds, events_per_world=events_per_world, seed=seed), seed)
    clean = replay_lines(lines)
    return FaultedStory(seed, lines, clean, expected_processed(clean, lines))


@contextmanager
def worker_on_its_own_broker(
    tmp_path: Path, seed: int
) -> Iterator[tuple[ApacheKafkaBroker, Settings, WorkerProcess]]:
    """A started worker on a broker of its own, for a test that stops or kills the broker; a
    failure inside names the seed and shows the worker's log."""
    with apache_kafka(Settings.from_env()) as broker:
        settings = unique_settings(broker.bootstrap, tmp_path / "data")
        worker = WorkerProcess(settings, tmp_path / "worker.log").start()
        try:
            yield broker, settings, worker
        except BaseException as failure:
            raise AssertionError(f"seed {seed}; worker log:\n{worker.log_tail(60)}") from failure
        finally:
            worker.stop()


def test_a_broker_restart_mid_stream(tmp_path: Path) -> None:
    run = faulted_story(random.randrange(1_000_000), worlds=3, events_per_world=300)
    with worker_on_its_own_broker(tmp_path, run.seed) as (broker, settings, worker):
        half = len(run.lines) // 2
        send_events(settings, run.lines[:half])
        read_topic(settings, settings.topics.acks, lambda got: len(got) >= half // 3, 120)
        broker.restart()
        send_events(settings, run.lines[half:])
        wait_for_everything(settings, run.wanted, timeout=300)
        assert worker.process is not None and worker.process.poll() is None, "worker died"
        assert_same_as_replay(settings, run.lines, run.clean)
        assert_feed_complete(settings, run.lines)


def test_ctrl_c_while_the_broker_is_gone(tmp_path: Path) -> None:
    """The broker killed with events in flight, then Ctrl-C: the worker exits within its stop
    deadline and says why (Faust's stop waited for Kafka without a bound: still running 30
    minutes on). Started again once the broker is back, it loses no event and applies none
    twice."""
    run = faulted_story(random.randrange(1_000_000), worlds=3, events_per_world=300)
    with worker_on_its_own_broker(tmp_path, run.seed) as (broker, settings, worker):
        send_events(settings, run.lines)
        read_topic(settings, settings.topics.acks, lambda got: len(got) >= len(run.lines) // 3)
        broker.halt(kill=True)
        assert worker.process is not None
        worker.process.send_signal(signal.SIGINT)
        bound = STOP_DEADLINE_SECONDS + 10
        try:
            code = worker.process.wait(bound)
        except subprocess.TimeoutExpired:
            worker.kill()
            pytest.fail(f"the worker still ran {bound:.0f} s after Ctrl-C")
        said = worker.log_path.read_text(errors="replace")
        assert "is Kafka at" in said and "exiting without the rest of the clean stop" in said
        assert code == GAVE_UP_EXIT_CODE, "a stop cut short is not a clean exit"
        broker.restart()
        worker.start()
        wait_for_everything(settings, run.wanted, timeout=300)
        assert_same_as_replay(settings, run.lines, run.clean)
        assert_feed_complete(settings, run.lines)
