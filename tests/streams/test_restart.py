"""A restart replays recent work, not history: the local RocksDB is kept across a clean stop and
restored from its last checkpoint after a crash, on a real Apache Kafka broker.

How much was replayed is read off the worker's own log (`state recovered: N record(s)`);
every case still ends on the digest of a clean in-process replay.
"""

from __future__ import annotations

import asyncio
import re
import shutil
import signal
import subprocess
import time
import urllib.error
import urllib.request
from collections import Counter
from pathlib import Path
from typing import Any

import orjson
import pytest
from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient

from localbroker import free_port
from streams.app import CHECKPOINT_TICK
from streams.durability import IDLE_SECONDS, LOCK_WAIT_SECONDS
from streams.partitioning import partition_of
from streams.replay import replay_lines
from streams.settings import Settings
from streams.topics import STATE_TABLE
from tests.streams.noisy_story import story
from tests.streams.test_faults import assert_same_as_replay, expected_processed, wait_for_everything
from tests.support import (
    WorkerProcess,
    by_partition,
    changelog_ends,
    checkpoint_stamps,
    event,
    run_command,
    scrape,
    send_events,
    topic_ends,
    unique_settings,
    wait_until_checkpointed,
)

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]
RECOVERED = re.compile(r"state recovered: (\d+) record\(s\) laid")


def replayed_at_last_start(worker: WorkerProcess) -> int:
    """The changelog records the latest start laid into RocksDB."""
    counts = RECOVERED.findall(worker.log_path.read_text(errors="replace"))
    assert counts, f"no recovery line in the log:\n{worker.log_tail()}"
    return int(counts[-1])


def wait_until_committed(settings: Settings, timeout: float = 60.0) -> None:
    """Wait until the worker's group has committed every event published so far."""

    async def committed() -> dict[int, int]:
        admin = AIOKafkaAdminClient(bootstrap_servers=settings.bootstrap)
        await admin.start()
        try:
            offsets = await admin.list_consumer_group_offsets(settings.app_id)
            return {tp.partition: done.offset for tp, done in offsets.items()}
        finally:
            await admin.close()

    deadline = time.monotonic() + timeout
    while True:
        done = asyncio.run(committed())
        ends = topic_ends(settings, settings.topics.events)
        waiting = {p: end for p, end in ends.items() if end and done.get(p, -1) < end}
        if not waiting:
            return
        assert time.monotonic() < deadline, f"uncommitted event partitions: {waiting}"
        time.sleep(0.2)


def changelog_records(settings: Settings) -> int:
    """How many records were ever written to the state changelog (its end offsets)."""
    return sum(changelog_ends(settings).values())


@pytest.fixture
def settings(kafka_bootstrap: str, tmp_path: Path) -> Settings:
    return unique_settings(kafka_bootstrap, tmp_path / "data")


def test_a_clean_stop_keeps_the_state_and_the_next_start_replays_nothing(
    settings: Settings, tmp_path: Path
) -> None:
    lines = story(worlds=2, events_per_world=300, seed=7)
    first, rest = lines[:400], lines[400:]
    worker = WorkerProcess(settings, tmp_path / "worker.log").start()
    try:
        send_events(settings, first)
        wait_for_everything(settings, expected_processed(replay_lines(first), first), 120)
        worker.stop()
        worker.start()
        assert replayed_at_last_start(worker) == 0
        send_events(settings, rest)
        clean = replay_lines(lines)
        wait_for_everything(settings, expected_processed(clean, lines), 120)
        assert_same_as_replay(settings, lines, clean)
    finally:
        worker.stop()


def test_after_a_kill_only_the_events_since_the_last_checkpoint_are_replayed(
    settings: Settings, tmp_path: Path
) -> None:
    lines = story(worlds=2, events_per_world=300, seed=11)
    history, burst, rest = lines[:400], lines[400:450], lines[450:]
    worker = WorkerProcess(settings, tmp_path / "worker.log").start()
    try:
        send_events(settings, history)
        wait_for_everything(settings, expected_processed(replay_lines(history), history), 120)
        wait_until_committed(settings)  # after the changelog records: its ends are the history's
        wait_until_checkpointed(settings)  # idle: every partition is checkpointed
        checkpointed = sum(
            stamp.changelog_offset + 1
            for stamp in checkpoint_stamps(settings).values()
            if stamp is not None
        )
        send_events(settings, burst)
        sent = history + burst
        wait_for_everything(settings, expected_processed(replay_lines(sent), sent), 120)
        worker.kill()  # before the burst's idle checkpoint, or just after it
        since_checkpoint = changelog_records(settings) - checkpointed  # all the killed one sent
        worker.start()
        assert replayed_at_last_start(worker) <= since_checkpoint  # not the history before it
        send_events(settings, rest)
        clean = replay_lines(lines)
        wait_for_everything(settings, expected_processed(clean, lines), 120)
        assert_same_as_replay(settings, lines, clean)
    finally:
        worker.stop()


def test_a_kill_while_events_flow_restores_a_checkpoint_and_ends_on_the_replay(
    settings: Settings, tmp_path: Path
) -> None:
    lines = story(worlds=3, events_per_world=200, seed=5)
    worker = WorkerProcess(settings, tmp_path / "worker.log").start()
    try:
        for end in (200, 400):
            sent = lines[:end]
            send_events(settings, lines[end - 200 : end])
            wait_for_everything(settings, expected_processed(replay_lines(sent), sent), 120)
            wait_until_checkpointed(settings)
        wait_until_committed(settings)  # faust-streaming #629 stays out
        send_events(settings, lines[400:])
        worker.kill()
        worker.start()
        clean = replay_lines(lines)
        wait_for_everything(settings, expected_processed(clean, lines), 180)
        assert_same_as_replay(settings, lines, clean)
    finally:
        worker.stop()


def rewind_group(settings: Settings) -> None:
    """Commit offset 0 on every partition of the events topic for the worker's group (stopped):
    its next start is given every event again, as after a kill before its commits."""

    partitions = topic_ends(settings, settings.topics.events)

    async def rewind() -> None:
        consumer = AIOKafkaConsumer(
            bootstrap_servers=settings.bootstrap,
            group_id=settings.app_id,
            enable_auto_commit=False,
        )
        await consumer.start()
        tps = [TopicPartition(settings.topics.events, partition) for partition in partitions]
        consumer.assign(tps)
        try:
            await consumer.commit(dict.fromkeys(tps, 0))
        finally:
            await consumer.stop()

    asyncio.run(rewind())


def test_a_start_given_only_events_it_holds_already_keeps_its_copy_for_the_next_start(
    settings: Settings, tmp_path: Path
) -> None:
    """Events a worker is given again (committed offsets behind its state: a kill between a
    batch's changelog records and its commit) write nothing. A partition that took only those
    was checkpointed and stopped as holding changelog offset -1: the next start replayed its
    whole changelog, the copy kept for nothing."""
    lines = story(worlds=2, events_per_world=200, seed=3)
    worker = WorkerProcess(settings, tmp_path / "worker.log").start()
    try:
        send_events(settings, lines)
        wait_for_everything(settings, expected_processed(replay_lines(lines), lines), 120)
        wait_until_committed(settings)
        worker.stop()
        rewind_group(settings)
        worker.start()
        wait_until_committed(settings)  # every event taken again, recognised, nothing written
        time.sleep(2 * IDLE_SECONDS + 2 * CHECKPOINT_TICK)  # the idle checkpoint
        worker.stop()
        worker.start()
        assert replayed_at_last_start(worker) == 0
        assert_same_as_replay(settings, lines, replay_lines(lines))
    finally:
        worker.stop()


def test_a_copy_recovered_whole_that_no_event_reaches_is_kept_across_a_kill(
    settings: Settings, tmp_path: Path
) -> None:
    """A data dir lost (or a copy thrown away after a crash): the start recovers every
    partition whole. A partition no event reached since was stamped only at a clean stop, so
    each kill after replayed its whole changelog again (a worker crashing in a loop paid it at
    every start). Two worlds on the two partitions; after the recovery, events of one only."""
    lines = story(worlds=2, events_per_world=200, seed=1)
    busy = [line for line in lines if b'"tavern-1-0"' in line]
    quiet = [line for line in lines if line not in busy]
    history, later = [*quiet, *busy[:150]], busy[150:]
    worker = WorkerProcess(settings, tmp_path / "worker.log").start()
    try:
        send_events(settings, history)
        wait_for_everything(settings, expected_processed(replay_lines(history), history), 120)
        worker.stop()
        shutil.rmtree(settings.data_dir)
        worker.start()
        assert replayed_at_last_start(worker) == changelog_records(settings)
        quiet_stamp = f"{STATE_TABLE}-{partition_of(b'tavern-1-1', settings.partitions)}.stamp.json"
        deadline = time.monotonic() + 30
        while not list(settings.data_dir.rglob(quiet_stamp)):  # stamped at a checkpoint tick
            assert time.monotonic() < deadline, "the quiet partition's copy was never stamped"
            time.sleep(CHECKPOINT_TICK)
        before = changelog_records(settings)
        send_events(settings, later)
        wait_for_everything(settings, expected_processed(replay_lines(lines), lines), 120)
        busy_partition = partition_of(b"tavern-1-0", settings.partitions)
        end, deadline = changelog_ends(settings)[busy_partition], time.monotonic() + 60
        while (held := checkpoint_stamps(settings).get(busy_partition)) is None or (
            held.changelog_offset < end - 1
        ):  # the busy partition's idle checkpoint (the quiet one is stamped, not checkpointed)
            assert time.monotonic() < deadline, "the busy partition was never checkpointed"
            time.sleep(CHECKPOINT_TICK)
        worker.kill()
        worker.start()
        assert replayed_at_last_start(worker) <= changelog_records(settings) - before
        assert_same_as_replay(settings, lines, replay_lines(lines))
    finally:
        worker.stop()


def test_a_second_worker_on_the_data_dir_of_a_running_one_stops_and_leaves_its_state(
    settings: Settings, tmp_path: Path
) -> None:
    """A second worker of the app id given the same RUMOURMILL_DATA_DIR (a restart begun before
    the worker it replaces had stopped, two containers on one volume) took the running one's
    dirty markers for a crash's: it removed them and restored checkpoints over its live
    databases. It now waits for the data dir (the running one's stop), then stops, saying why."""
    lines = story(worlds=2, events_per_world=200, seed=13)
    first = WorkerProcess(settings, tmp_path / "first.log").start()
    second = WorkerProcess(
        settings.model_copy(update={"web_port": free_port()}), tmp_path / "second.log"
    )
    try:
        send_events(settings, lines[:200])
        wait_for_everything(
            settings, expected_processed(replay_lines(lines[:200]), lines[:200]), 120
        )
        markers = sorted(settings.data_dir.rglob("*.dirty"))
        assert markers, "the running worker wrote to no partition"
        assert second.spawn().process is not None
        exit_code = second.process.wait(LOCK_WAIT_SECONDS + 60)
        refusal = "give each worker a data dir of its own (RUMOURMILL_DATA_DIR, --data-dir)"
        assert exit_code == 1 and refusal in second.log_tail(), second.log_tail()
        assert sorted(settings.data_dir.rglob("*.dirty")) == markers
        send_events(settings, lines[200:])
        clean = replay_lines(lines)
        wait_for_everything(settings, expected_processed(clean, lines), 120)
        first.stop()
        first.start()
        assert_same_as_replay(settings, lines, clean)
    finally:
        second.kill()
        first.stop()


def answer(url: str) -> tuple[int, Any] | None:
    """(status, JSON body) of a GET, None while nothing answers on its port."""
    try:
        with urllib.request.urlopen(url, timeout=10) as reply:
            return reply.status, orjson.loads(reply.read())
    except urllib.error.HTTPError as refused:
        return refused.code, orjson.loads(refused.read())
    except (urllib.error.URLError, ConnectionError):
        return None


def test_a_world_is_not_read_while_its_state_is_being_recovered(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    """Started on an empty data dir (a new machine), the worker lays its state in from the
    changelog: reads meanwhile answered 404 (a world never seen), then characters who had
    forgotten most of their past; one in its first moments, a 500."""
    settings = unique_settings(kafka_bootstrap, tmp_path / "data", partitions=1)
    events = 3000
    greetings = [
        event("save-1", seq, key="social.greeting", actor=f"npc-v{seq % 50}", target="npc-mara")
        for seq in range(1, events + 1)
    ]
    web = f"http://127.0.0.1:{settings.web_port}"
    read = f"{web}/v2/memory/runtime/npcs/npc-mara?world_instance_id=save-1&timeline_id=main"
    worker = WorkerProcess(settings, tmp_path / "worker.log").start()
    try:
        send_events(settings, greetings)
        wait_for_everything(settings, {("save-1", "main", events)}, 180)
    finally:
        worker.stop()
    shutil.rmtree(settings.data_dir)
    answers: list[tuple[int, Any]] = []
    worker.spawn()
    try:
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline:
            ready = answer(f"{web}/ready")
            got = answer(read)
            if got is not None:
                answers.append(got)
            if ready is not None and ready[0] == 200 and got is not None and got[0] == 200:
                break
            time.sleep(0.01)
    finally:
        worker.stop()
    assert answers and answers[-1][0] == 200, answers[-3:]
    assert {status for status, _ in answers} == {200, 503}, Counter(s for s, _ in answers)
    assert {body["processed_seq"] for status, body in answers if status == 200} == {events}
    assert any("still recovering" in body["detail"] for status, body in answers if status == 503)


def test_the_lag_of_each_partition_is_told_while_its_state_is_being_recovered(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    """Started on an empty data dir with events waiting, the worker lays its state in from the
    changelog for a while: the lag gauge named no partition until that was over (the watch
    began after Faust's first recovery, and the consumer knows its committed offsets only at
    the seek that ends it), and an alert on lag went quiet while the backlog was largest. It
    tells each partition's backlog from the worker's first looks on."""
    settings = unique_settings(kafka_bootstrap, tmp_path / "data")
    history = [
        event(
            f"w{world}",
            seq,
            key="movement.location-entered",
            actor=f"npc-{seq % 50}",
            location=f"loc-{seq % 7}",
            entities={f"npc-{seq % 50}": {"name": f"N{seq}", "kind": "character"}},
        )
        for world in range(4)
        for seq in range(1, 2_501)
    ]
    worker = WorkerProcess(settings, tmp_path / "worker.log").start()
    try:
        send_events(settings, history)
        wait_for_everything(settings, {(f"w{world}", "main", 2_500) for world in range(4)}, 240)
    finally:
        worker.stop()
    shutil.rmtree(settings.data_dir)
    waiting = [event(f"w{world}", seq) for world in range(4, 8) for seq in range(1, 201)]
    backlog = Counter(partition_of(f"w{world}".encode(), 2) for world in range(4, 8))
    send_events(settings, waiting)
    web = f"http://127.0.0.1:{settings.web_port}"
    recovering: list[dict[str, float]] = []
    worker.spawn()
    try:
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline:
            ready = answer(f"{web}/ready")
            if ready is not None and ready[0] == 200:
                break
            if ready is not None and "state recovery" in ready[1].get("waiting_for", []):
                recovering.append(by_partition(scrape(settings), "rumourmill_consumer_lag"))
            time.sleep(0.2)
    finally:
        worker.stop()
    told = [lags for lags in recovering if lags]
    assert told, f"{len(recovering)} scrapes while recovering, none with a lag"
    assert told[-1] == {str(partition): 200.0 * worlds for partition, worlds in backlog.items()}


def test_a_stopping_worker_says_so_on_ready_and_serves_on_for_its_drain(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    """A load balancer asking `/ready` sent reads on to a worker told to stop: it answered
    200 until its web server went, some 20 ms after the signal. With a drain of 5 s, it says
    it is stopping, and answers reads, for those 5 s; then it stops. The image's health check,
    `rumourmill ready`, says so too (a process of its own, started within the drain: 0.6 s
    here, over 1.4 s on a loaded machine, so a drain of 2 s left it too little)."""
    settings = unique_settings(
        kafka_bootstrap, tmp_path / "data", stop_drain_seconds=5.0, partitions=1
    )
    worker = WorkerProcess(settings, tmp_path / "worker.log").start()
    web = f"http://127.0.0.1:{settings.web_port}"
    send_events(settings, [event("save-1", 1, key="social.greeting", target="npc-mara")])
    wait_for_everything(settings, {("save-1", "main", 1)}, 60)
    said: list[tuple[float, tuple[int, Any], tuple[int, Any] | None]] = []
    healthy = run_command(settings, "ready")
    draining: subprocess.CompletedProcess[str] | None = None
    try:
        assert worker.process is not None
        worker.process.send_signal(signal.SIGTERM)
        signalled = time.monotonic()
        deadline = signalled + 30
        while time.monotonic() < deadline and (ready := answer(f"{web}/ready")) is not None:
            read = answer(f"{web}/v2/timelines/main?world_instance_id=save-1")
            said.append((time.monotonic() - signalled, ready, read))
            if ready == (503, {"status": "stopping"}) and draining is None:
                draining = run_command(settings, "ready")
            time.sleep(0.01)
        gone = run_command(settings, "ready")
    finally:
        worker.stop()
    assert (healthy.returncode, orjson.loads(healthy.stdout)["status"]) == (0, "ready")
    assert draining is not None and draining.returncode == 1
    assert 'not ready: 503 {"status":"stopping"}' in draining.stderr, draining.stderr
    assert gone.returncode == 1
    assert f"no worker answers at http://127.0.0.1:{settings.web_port}/ready" in gone.stderr
    stopping = (503, {"status": "stopping"})
    first = next(index for index, (_, ready, _) in enumerate(said) if ready == stopping)
    assert all(ready == stopping for _, ready, _ in said[first:]), said
    served = [at for at, ready, read in said[first:] if read is not None and read[0] == 200]
    assert served and max(served) >= 4, said[-3:]  # reads answered through the drain
    assert worker.process.returncode == 0


def test_told_again_during_its_drain_a_worker_stops_at_once_and_cleanly(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    """mode ignores every signal after the first: a drain of a minute could only be cut short
    by a SIGKILL (its partitions then restored from their checkpoints at the next start)."""
    settings = unique_settings(kafka_bootstrap, tmp_path / "data", stop_drain_seconds=60.0)
    worker = WorkerProcess(settings, tmp_path / "worker.log").start()
    assert worker.process is not None
    worker.process.send_signal(signal.SIGTERM)
    worker.wait_for_log(b"stopping in 60 s")
    worker.process.send_signal(signal.SIGINT)
    assert worker.process.wait(30) == 0
    assert "stopping now: told again" in worker.log_path.read_text()
