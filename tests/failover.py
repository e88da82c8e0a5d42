"""Failover, measured from the outside: two workers, one SIGKILLed, how long until the other
takes in and answers for every world again (the test and `benchmarks.failover` share it)."""

from __future__ import annotations

import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

import orjson

from localbroker import free_port
from streams.partitioning import partition_of
from streams.settings import Settings
from tests.support import (
    WorkerProcess,
    by_partition,
    event,
    read_topic,
    scrape,
    send_events,
    unique_settings,
)

WORLDS = 8
SURVIVOR_LOG = "staying.log"
"""The surviving worker's log, in the directory given to `failover_seconds`."""
TIMELINE_READ = "/v2/timelines/main?world_instance_id={world}"


History = Callable[[list[str], int], list[dict[str, Any]]]
"""The events of `rounds` rounds over the worlds, seq 1 to `rounds` of each."""


def bare_history(worlds: list[str], rounds: int) -> list[dict[str, Any]]:
    """Events that form nothing, of a few state writes each: a history quick to take in."""
    return [event(world, seq) for seq in range(1, rounds + 1) for world in worlds]


class Failover(NamedTuple):
    seconds: float
    """From SIGKILLing one of two workers until the survivor acks and answers for every world."""
    standby_waited: float | None
    """How long the survivor's standby copies took to read the changelog to its end after the
    history's last ack, before the kill (None: not waited for)."""


def failover_seconds(
    bootstrap: str,
    base: Path,
    history: int,
    standbys: int,
    timeout: float = 180.0,
    history_of: History = bare_history,
    caught_up: bool = False,
) -> Failover:
    """Seconds from SIGKILLing one of two workers until every world has a new event acked and
    the survivor answers a read showing it. `history` events (`history_of`) are spread over the
    worlds first; with `caught_up`, the kill waits until the survivor's standby copies have
    read the changelog to its end (`rumourmill_standby_lag` 0 in its metrics)."""
    staying_settings = unique_settings(bootstrap, base / "staying", partitions=4, standbys=standbys)
    killed_settings = staying_settings.model_copy(
        update={"data_dir": base / "killed", "web_port": free_port()}
    )
    worlds = [f"world-{number}" for number in range(WORLDS)]
    rounds = max(1, history // WORLDS)
    staying = WorkerProcess(staying_settings, base / SURVIVOR_LOG).start()
    killed = WorkerProcess(killed_settings, base / "killed.log").start()
    try:
        send_events(staying_settings, history_of(worlds, rounds))
        wait_for_processed(staying_settings, worlds, rounds, timeout)
        waited = wait_for_standbys(staying_settings, timeout) if caught_up else None
        assert killed.owned_partitions(), "the worker to kill took no partition"
        killed.kill()
        began = time.monotonic()
        send_events(staying_settings, [event(world, rounds + 1) for world in worlds])
        wait_for_processed(staying_settings, worlds, rounds + 1, timeout)
        for world in worlds:
            wait_for_read(staying_settings, world, rounds + 1, began + timeout)
        return Failover(time.monotonic() - began, waited)
    except TimeoutError as error:  # the logs go with the temporary directory: keep their ends
        error.add_note(
            f"partitions last served: survivor {staying.owned_partitions()}, "
            f"killed worker {killed.owned_partitions()}"
        )
        error.add_note(f"survivor's log:\n{staying.log_tail(200)}")
        error.add_note(f"killed worker's log:\n{killed.log_tail(80)}")
        raise
    finally:
        killed.kill()
        staying.stop()


def wait_for_processed(settings: Settings, worlds: list[str], seq: int, timeout: float) -> None:
    """Until every world has a `processed` ack for `seq`."""
    wanted = {(world, seq) for world in worlds}
    done: set[tuple[object, object]] = set()

    def all_processed(acks: list[dict[str, object]]) -> bool:
        done.update(
            (ack["world_instance_id"], ack["seq"]) for ack in acks if ack["outcome"] == "processed"
        )
        return wanted <= done

    try:
        read_topic(settings, settings.topics.acks, all_processed, timeout)
    except TimeoutError as error:
        missing = sorted(world for world, _ in wanted - done)
        error.add_note(
            f"no ack at seq {seq} for: "
            + ", ".join(
                f"{world} (partition {partition_of(world.encode(), settings.partitions)})"
                for world in missing
            )
        )
        raise


def wait_for_standbys(settings: Settings, timeout: float) -> float:
    """Seconds until the worker's metrics show standby copies, none of them behind the
    changelog."""
    began = time.monotonic()
    behind: dict[str, float] = {}
    while time.monotonic() < began + timeout:
        behind = by_partition(scrape(settings), "rumourmill_standby_lag")
        if behind and not any(behind.values()):
            return time.monotonic() - began
        time.sleep(0.5)
    raise TimeoutError(
        f"standby copies still behind the changelog (records by partition): {behind}"
    )


def wait_for_read(settings: Settings, world: str, seq: int, deadline: float) -> None:
    """Until the worker answers a read of `world`'s main timeline at `seq` or later."""
    url = f"http://127.0.0.1:{settings.web_port}{TIMELINE_READ.format(world=world)}"
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(url, timeout=2) as reply:
                if orjson.loads(reply.read())["processed_seq"] >= seq:
                    return
        except (OSError, urllib.error.HTTPError):
            pass  # not the owner yet (forwarded to the dead worker) or still recovering
        time.sleep(0.1)
    raise TimeoutError(f"{world}: no read at seq {seq}")
