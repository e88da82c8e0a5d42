"""A worker upgrades the state it restores from the changelog before serving, on a real Apache
Kafka broker: the changelog the previous release wrote reads as this release's replay, the
acks an upgrade gives are sent, and a changelog of a newer release stops the worker with a
clear error.
"""

from __future__ import annotations

import asyncio
import gzip
import shutil
import time
from pathlib import Path

import orjson
import pytest
from aiokafka import AIOKafkaProducer
from aiokafka.admin import AIOKafkaAdminClient, NewTopic

from projections.digest import world_digest
from projections.keys import pack
from projections.migrations import FORMAT_KEY, current_format
from projections.runtime_read import runtime_read
from streams.settings import Settings
from streams.state import decode_changes, encode_changes
from streams.topics import changelog_topic
from tests.projections.test_migrations import (
    PREVIOUS_RELEASE,
    WORLDS,
    fresh_replay_as_upgraded,
    inherited_waiting_as_an_earlier_release_left_it,
)
from tests.streams.test_faults import get_json
from tests.support import (
    WorkerProcess,
    event,
    read_topic,
    scrape,
    send_events,
    unique_settings,
)

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]
UPGRADED = f"partition 0: state upgraded from format 1 to {current_format()}"
RETIRED = "partition 0: 1 changeset(s) of an earlier release rewritten as records"


def previous_release_changelog() -> bytes:
    return gzip.decompress((PREVIOUS_RELEASE / "state.changes.gz").read_bytes())


def write_changelog(settings: Settings, changeset: bytes) -> None:
    """The state changelog as a worker of another release left it: one changeset."""

    async def run() -> None:
        admin = AIOKafkaAdminClient(bootstrap_servers=settings.bootstrap)
        await admin.start()
        try:
            await admin.create_topics(
                [
                    NewTopic(
                        changelog_topic(settings),
                        settings.partitions,
                        settings.replication,
                        topic_configs={"cleanup.policy": "compact"},
                    )
                ]
            )
        finally:
            await admin.close()
        producer = AIOKafkaProducer(bootstrap_servers=settings.bootstrap)
        await producer.start()
        try:
            await producer.send_and_wait(
                changelog_topic(settings),
                changeset,
                key=pack("events", 0, 0, 0),
                partition=0,
            )
        finally:
            await producer.stop()

    asyncio.run(run())


@pytest.fixture
def settings(kafka_bootstrap: str, tmp_path: Path) -> Settings:
    return unique_settings(kafka_bootstrap, tmp_path / "data", partitions=1)


def test_a_changelog_of_the_previous_release_is_upgraded_and_reads_as_a_replay(
    settings: Settings, tmp_path: Path
) -> None:
    write_changelog(settings, previous_release_changelog())
    fresh = fresh_replay_as_upgraded()
    worker = WorkerProcess(settings, tmp_path / "worker.log").start()
    try:
        for world in WORLDS:
            answer = get_json(settings, f"/v2/admin/digest?world_instance_id={world}")
            assert answer["digest"] == world_digest(fresh, "default", world)
        mind = get_json(
            settings,
            "/v2/memory/runtime/npcs/npc-ilka?world_instance_id=tavern-12-0&timeline_id=reload",
        )
        expected = runtime_read(fresh, "default", "tavern-12-0", "reload", "npc-ilka")
        assert mind == orjson.loads(expected.to_json())
        worker.stop()
        assert worker.log_path.read_text().count(UPGRADED) == 1
        assert worker.log_path.read_text().count(RETIRED) == 1
        shutil.rmtree(settings.data_dir)  # the next start restores everything from the changelog
        worker.start()
        answer = get_json(settings, "/v2/admin/digest?world_instance_id=save-1")
        assert answer["digest"] == world_digest(fresh, "default", "save-1")
        assert worker.log_path.read_text().count(UPGRADED) == 1  # the stamp came back with it
        assert worker.log_path.read_text().count(RETIRED) == 1  # its delete came back too
    finally:
        worker.stop()


def test_a_changelog_of_a_newer_release_stops_the_worker_with_the_reason(
    settings: Settings, tmp_path: Path
) -> None:
    records = list(decode_changes(previous_release_changelog()))
    write_changelog(settings, encode_changes([*records, (FORMAT_KEY, b"99")]))
    worker = WorkerProcess(settings, tmp_path / "worker.log").spawn()
    try:
        assert worker.process is not None
        deadline = time.monotonic() + 120
        while worker.process.poll() is None and time.monotonic() < deadline:
            time.sleep(0.5)
        assert worker.process.poll() is not None, worker.log_tail()
        assert "the stored state is in format 99" in worker.log_path.read_text(), worker.log_tail()
    finally:
        worker.kill()


def test_an_event_an_earlier_release_left_waiting_for_ever_is_acked_at_the_upgrade(
    settings: Settings, tmp_path: Path
) -> None:
    """A store a release before left with alt's seq 2 waiting at a position alt inherits (it
    came before alt's first event): the worker upgrading it sends that event's `duplicate`
    ack, its last, which its producer never had; and the branch goes on as this release's."""
    _, earlier = inherited_waiting_as_an_earlier_release_left_it()
    write_changelog(settings, encode_changes(list(earlier.items())))
    worker = WorkerProcess(settings, tmp_path / "worker.log").start()
    try:
        acks = read_topic(settings, settings.topics.acks, lambda got: len(got) >= 1)
        assert [(ack["timeline_id"], ack["seq"], ack["outcome"]) for ack in acks] == [
            ("alt", 2, "duplicate")
        ]
        counted = scrape(settings)  # counted as the acks it sent
        assert counted[("rumourmill_events_total", (("outcome", "duplicate"),))] == 1
        send_events(settings, [event("w", 2)])
        acks = read_topic(settings, settings.topics.acks, lambda got: len(got) >= 3)
        assert [(ack["timeline_id"], ack["seq"], ack["outcome"]) for ack in acks[1:]] == [
            ("main", 2, "processed"),
            ("alt", 3, "processed"),
        ]
        worker.stop()
        upgraded = f"state upgraded from format 10 to {current_format()}"
        assert f"{upgraded} (" in worker.log_path.read_text(), worker.log_tail()
        assert "1 waiting event(s) acked)" in worker.log_path.read_text(), worker.log_tail()
    finally:
        worker.stop()


def test_a_changeset_cut_short_stops_the_worker_saying_where_and_what_to_do(
    settings: Settings, tmp_path: Path
) -> None:
    """Its bytes were laid into the store as keys no event wrote; refused, Faust's recovery
    logged a warning and laid the same batch again at every record, for ever."""
    whole = encode_changes([(b"\x02memory\x00k", b'{"confidence":0.9}')])
    write_changelog(settings, whole[:-5])
    worker = WorkerProcess(settings, tmp_path / "worker.log").spawn()
    try:
        assert worker.process is not None
        worker.process.wait(90)
    finally:
        worker.kill()
    logged = worker.log_path.read_text()
    topic = changelog_topic(settings)
    assert f"stopping the worker: changelog {topic}[0] at offset 0: not a changeset" in logged
    assert "`rumourmill rebuild` makes it again from the events topic" in logged
