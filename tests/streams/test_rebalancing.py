"""Workers joining and leaving while events flow strand no event (faust-streaming #629)."""

from __future__ import annotations

import contextlib
import threading
import time
from itertools import pairwise
from pathlib import Path
from typing import Any

import pytest

from localbroker import free_port
from streams.partitioning import partition_of
from streams.settings import Settings
from tests.streams.test_restart import answer, replayed_at_last_start
from tests.support import WorkerProcess, event, read_topic, send_events, unique_settings

pytestmark = pytest.mark.integration

TRIALS = 3
"""Without the fix, most trials strand events; three make a pass by luck unlikely."""
WORLDS = 24
ROUNDS = 60
ROUND_SECONDS = 0.25
SECOND_WORKER_SECONDS = 8.0
"""How long the second worker takes part before it leaves (events keep flowing meanwhile)."""


def test_a_worker_joining_and_leaving_strands_no_event(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    stranded = {
        trial: missing
        for trial in range(TRIALS)
        if (missing := join_and_leave_while_publishing(kafka_bootstrap, tmp_path / f"t{trial}"))
    }
    assert not stranded, {
        trial: f"{len(missing)} events never processed, e.g. {sorted(missing)[:3]}"
        for trial, missing in stranded.items()
    }


def join_and_leave_while_publishing(bootstrap: str, base: Path) -> set[tuple[str, int]]:
    """The (world, seq) pairs never processed, when a second worker joins and leaves.

    The first events of every partition arrive while the group rebalances, so no partition has
    had an offset committed yet: the case Faust alone leaves unfetched.
    """
    base.mkdir(parents=True)
    first = unique_settings(bootstrap, base / "one", partitions=4)
    second = first.model_copy(update={"data_dir": base / "two", "web_port": free_port()})
    worlds = [f"{base.name}-world-{number}" for number in range(WORLDS)]
    expected = {(world, seq) for seq in range(1, ROUNDS + 1) for world in worlds}
    staying = WorkerProcess(first, base / "one.log").start()
    joining = WorkerProcess(second, base / "two.log")
    try:
        joining.spawn()
        joining.wait_for_log(b"[^Worker]: Starting")
        time.sleep(0.3)  # publish the first events just before it joins the group
        publisher = threading.Thread(target=publish_rounds, args=(first, worlds))
        publisher.start()
        time.sleep(SECOND_WORKER_SECONDS)
        joining.stop()
        publisher.join()

        processed: set[tuple[str, int]] = set()

        def all_processed(acks: list[dict[str, Any]]) -> bool:
            processed.update(
                (ack["world_instance_id"], ack["seq"])
                for ack in acks
                if ack["outcome"] == "processed"
            )
            return expected <= processed

        with contextlib.suppress(TimeoutError):
            read_topic(first, first.topics.acks, all_processed, timeout=60)
    finally:
        joining.stop()
        staying.stop()
    return expected - processed


def publish_rounds(settings: Settings, worlds: list[str]) -> None:
    for seq in range(1, ROUNDS + 1):
        send_events(settings, [event(world, seq) for world in worlds])
        time.sleep(ROUND_SECONDS)


def test_a_partition_kept_through_a_rebalance_replays_nothing_and_its_reads_never_go_back(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    """A serves both partitions under steady events (no checkpoint yet: they come every 30 s);
    B joins and takes one. The partition A kept was laid in again from its last checkpoint
    (from the changelog's start here), over its newer state: A's reads of it went back
    thousands of positions for tens of seconds, its events waiting meanwhile."""
    first = unique_settings(kafka_bootstrap, tmp_path / "a", partitions=2)
    second = first.model_copy(update={"data_dir": tmp_path / "b", "web_port": free_port()})
    worlds = {partition_of(f"w{number}".encode(), 2): f"w{number}" for number in range(8)}
    assert len(worlds) == 2
    sent = dict.fromkeys(worlds.values(), 0)
    flowing = threading.Event()
    flowing.set()

    def publish() -> None:
        while flowing.is_set():
            greetings = []
            for world in worlds.values():
                for _ in range(40):
                    sent[world] += 1
                    greetings.append(
                        event(world, sent[world], key="social.greeting", target="npc-mara")
                        | {"actor": f"npc-v{sent[world] % 30}"}
                    )
            send_events(first, greetings)
            time.sleep(0.1)

    staying = WorkerProcess(first, tmp_path / "a.log").start()
    joining = WorkerProcess(second, tmp_path / "b.log")
    publisher = threading.Thread(target=publish)
    seen: dict[str, list[int]] = {world: [] for world in worlds.values()}
    try:
        publisher.start()
        time.sleep(10)
        joining.spawn()
        web = f"http://127.0.0.1:{first.web_port}/v2/timelines/main?world_instance_id="
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            for world in worlds.values():
                read = answer(web + world)
                if read is not None and read[0] == 200:
                    seen[world].append(read[1]["processed_seq"])
            if joining.owned_partitions():  # then 5 s more
                deadline = min(deadline, time.monotonic() + 5)
            time.sleep(0.01)
    finally:
        flowing.clear()
        publisher.join()
        joining.stop()
        staying.stop()
    [kept] = staying.owned_partitions()
    assert joining.owned_partitions() == [1 - kept]
    went_back = [
        (earlier, later)
        for positions in seen.values()
        for earlier, later in pairwise(positions)
        if later < earlier
    ]
    assert not went_back, went_back[:5]
    assert len(seen[worlds[kept]]) > 10
    assert replayed_at_last_start(staying) == 0  # the kept partition laid in nothing again
