"""A worker paused past its session timeout (SIGSTOP: `docker pause`, a frozen VM or host) while
it projects a batch: the other worker takes its partition over and processes every event; the
paused one, resumed, sent the batch's state writes after the new owner's, and a recovery laid
them over its work: the state went back thousands of events, and those, committed by the new
owner, never came again (a reviewer's find). Resumed now, it sends nothing of that batch and
stops, saying the loop stood still (`streams.loop_stalls`)."""

from __future__ import annotations

import shutil
import signal
import time
from pathlib import Path
from typing import Any

import pytest

from localbroker import free_port
from streams.partitioning import partition_of
from streams.settings import Settings
from tests.streams.test_restart import answer
from tests.support import WorkerProcess, event, read_topic, send_events, unique_settings

pytestmark = [pytest.mark.integration, pytest.mark.timeout(900)]
BURST = 30_000
"""Events published at once: the paused worker is mid-batch a second later."""


def timeline(settings: Settings, world: str) -> Any:
    """The world's main timeline as the worker reads it."""
    url = f"http://127.0.0.1:{settings.web_port}/v2/timelines/main?world_instance_id={world}"
    answered = answer(url)
    assert answered is not None and answered[0] == 200, answered
    return answered[1]["processed_seq"]


def processed(settings: Settings, world: str, seq: int, timeout: float) -> None:
    """Wait for the ack of `seq` processed."""

    def done(acks: list[dict[str, Any]]) -> bool:
        return any(
            a["world_instance_id"] == world and a["seq"] == seq and a["outcome"] == "processed"
            for a in acks
        )

    read_topic(settings, settings.topics.acks, done, timeout)


def test_a_worker_resumed_after_its_partition_moved_sends_nothing_of_its_batch(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    one = unique_settings(kafka_bootstrap, tmp_path / "one", partitions=2)
    other = one.model_copy(update={"data_dir": tmp_path / "other", "web_port": free_port()})
    staying = WorkerProcess(one, tmp_path / "one.log").start()
    paused = WorkerProcess(other, tmp_path / "other.log").start()
    try:
        time.sleep(3)
        [partition] = paused.owned_partitions()
        world = next(f"w{n}" for n in range(100) if partition_of(f"w{n}".encode(), 2) == partition)
        send_events(one, [event(world, seq) for seq in range(1, 201)])
        processed(one, world, 200, 120)
        time.sleep(4)  # its offsets committed
        last = 200 + BURST
        send_events(one, [event(world, seq) for seq in range(201, last + 1)])
        while timeline(other, world) < 1200:  # well into the burst: mid-batch, most likely
            time.sleep(0.05)
        assert paused.process is not None
        paused.process.send_signal(signal.SIGSTOP)
        processed(one, world, last, 180)  # the partition moved, and every event was taken in
        time.sleep(3)
        assert timeline(one, world) == last
        paused.process.send_signal(signal.SIGCONT)
        time.sleep(5)  # it stops, saying the loop stood still (or rejoins, paused between batches)
        paused.kill()
        time.sleep(25)  # the staying worker owns both partitions again
        send_events(one, [event(world, last + 1)])
        processed(one, world, last + 1, 60)
        assert timeline(one, world) == last + 1
        staying.stop()
        shutil.rmtree(one.data_dir)  # a start that takes the whole state from the changelog
        staying.start(timeout=180)
        assert timeline(one, world) == last + 1
    finally:
        if paused.process is not None and paused.process.poll() is None:
            paused.process.send_signal(signal.SIGCONT)
        paused.kill()
        staying.stop()
