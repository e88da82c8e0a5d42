"""`rumourmill rebuild` on a real Apache Kafka broker: every projection folded again from the
events topic into a fresh app id ends on the live worker's digests, and a worker started with
that app id serves them without recovering anything."""

from __future__ import annotations

import asyncio
import random
import re
import signal
import subprocess
import sys
import threading
import time
from base64 import b64decode
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, RecordsToDelete
from rocksdict import Rdict

from projections.deletion import deletion_event
from projections.digest import world_digest
from projections.judgements import NO_MODEL, record_key
from projections.policy import policy_key
from projections.projector import Projector
from schemas.judgements import EventJudgements, RecordedJudgement
from streams.dev import apache_kafka
from streams.judging import Judge, JudgementLog, MemoryTopic
from streams.kafka_clients import kafka_options
from streams.partitioning import partition_of
from streams.publish import send_one
from streams.rebuild import (
    Folder,
    Named,
    RebuildFailed,
    check_judged,
    commit_group,
    events_not_processed_live,
    events_since,
    events_to_fold,
    live_committed,
    named_between,
)
from streams.rebuild import rebuild as rebuild_into
from streams.replay import replay_lines
from streams.settings import Settings
from streams.topics import changelog_topic, ensure_topics
from tests.properties.worlds import SeededChoices, Shape, draw_history
from tests.streams.noisy_story import story
from tests.streams.test_deletion import story as story_of
from tests.streams.test_faults import get_json
from tests.streams.test_restart import replayed_at_last_start
from tests.support import (
    WorkerProcess,
    event,
    read_topic,
    replayed_change_ids,
    send_events,
    settings_env,
    topics_on,
    unique_settings,
)

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]

SHAPE = Shape(max_events=120, least_events=100, spreading=1.0, chatter=2)
"""Generated worlds with rumours spreading among groups, and persistent memories."""


def generated_world(seed: int, world: str) -> tuple[dict[str, Any], list[bytes], str]:
    """A generated world renamed `world`: its policy (persistent memories always), its events."""
    history = draw_history(SeededChoices(random.Random(seed)), SHAPE)
    document = history.policy_document
    document["memory"]["persistent"] = {
        "characters": [name for name in history.ids if name.startswith("npc-")][:2],
        "kinds": ["event", "knowledge"],
    }
    events = [orjson.dumps(event | {"world_instance_id": world}) for event in history.events]
    return document, events, history.tenant


@pytest.fixture
def settings(kafka_bootstrap: str, tmp_path: Path) -> Settings:
    return unique_settings(kafka_bootstrap, tmp_path / "data")


@pytest.fixture
def live(settings: Settings, tmp_path: Path) -> Iterator[WorkerProcess]:
    """A live worker that ingested branched taverns and two generated worlds with policies, the
    second weighing by the model, which the worker has none of: the rules' judgements for want
    of one are recorded (a rebuild without a model URL, as the worker, was refused for them)."""
    persistent: dict[str, list[str]] = {}
    lines = story(worlds=2, events_per_world=150, seed=5)
    asyncio.run(ensure_topics(settings))
    for seed, world in ((3, "gen-a"), (8, "gen-b")):
        document, events, tenant = generated_world(seed, world)
        if world == "gen-b":
            document["memory"]["weighing"] = "model"
        key = policy_key(tenant, world)
        asyncio.run(send_one(settings, settings.topics.policies, key, orjson.dumps(document)))
        persistent[world] = document["memory"]["persistent"]["characters"]
        lines += events
    worker = WorkerProcess(settings, tmp_path / "live.log").start()
    send_events(settings, lines)
    wait_for_acks(settings, lines)
    minds = [
        memory
        for tenant, world in generated_tenants()
        for npc in persistent[world]
        for memory in mind(settings, tenant, world, npc)
    ]
    assert any(memory["persistent"] for memory in minds), "persistent memories were formed"
    assert any(memory["hops"] > 0 for memory in minds), "rumours were passed"
    yield worker
    worker.stop()


def live_digest(settings: Settings, tenant: str, world: str) -> str:
    digest: str = get_json(
        settings, f"/v2/admin/digest?world_instance_id={world}&tenant_id={tenant}"
    )["digest"]
    return digest


def wait_for_acks(settings: Settings, lines: list[bytes], timeout: float = 240) -> None:
    """Until every event got its last ack: processed, or rejected."""
    wanted = {
        (e["world_instance_id"], e["timeline_id"], e["seq"]) for e in map(orjson.loads, lines)
    }

    def finished(acks: list[dict[str, Any]]) -> bool:
        done = {
            (a["world_instance_id"], a["timeline_id"], a["seq"])
            for a in acks
            if a["outcome"] in ("processed", "rejected")
        }
        return done >= wanted

    read_topic(settings, settings.topics.acks, finished, timeout)


def mind(settings: Settings, tenant: str, world: str, npc: str) -> list[dict[str, Any]]:
    """A character's beliefs and recollections on the main timeline."""
    read = get_json(
        settings,
        f"/v2/memory/runtime/npcs/{npc}?world_instance_id={world}&timeline_id=main"
        f"&tenant_id={tenant}",
    )
    memories: list[dict[str, Any]] = read["beliefs"] + read["recollections"]
    return memories


def rebuild(settings: Settings, *args: str) -> subprocess.CompletedProcess[str]:
    """`rumourmill rebuild ARGS` run in the live worker's data dir's parent."""
    return subprocess.run(
        [sys.executable, "-m", "streams", "rebuild", *args],
        env=settings_env(settings),
        cwd=settings.data_dir.parent,
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
    )


def joined_during_the_pause(settings: Settings, *args: str) -> subprocess.CompletedProcess[str]:
    """`rebuild(settings, *args)`, a consumer joining the workers' group once the rebuild warned
    of the events it owes and before its pause ends (a worker started meanwhile), leaving it
    once the rebuild ended."""
    process = subprocess.Popen(
        [sys.executable, "-m", "streams", "rebuild", *args],
        env=settings_env(settings),
        cwd=settings.data_dir.parent,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert process.stderr is not None
    warning = process.stderr.readline()
    assert "uncommitted" in warning, warning

    async def member_until_done() -> tuple[str, str]:
        consumer = AIOKafkaConsumer(
            settings.topics.events,
            bootstrap_servers=settings.bootstrap,
            group_id=settings.app_id,
            enable_auto_commit=False,  # the offsets the workers committed stay theirs
        )
        await consumer.start()
        try:
            await consumer.getmany(timeout_ms=1000)  # in the group once it is assigned
            return await asyncio.to_thread(process.communicate, timeout=120)
        finally:
            await consumer.stop()

    out, err = asyncio.run(member_until_done())
    return subprocess.CompletedProcess(process.args, process.returncode, out, warning + err)


def printed_worlds(stdout: str) -> dict[str, str]:
    """`world TENANT/WORLD: verdict` lines of the rebuild's output."""
    return dict(re.findall(r"^world (\S+): (.*)$", stdout, re.MULTILINE))


def test_a_rebuild_ends_on_the_live_digests_and_a_worker_of_its_app_id_serves_them(
    settings: Settings, live: WorkerProcess, tmp_path: Path
) -> None:
    fresh = settings.model_copy(
        update={"app_id": settings.app_id + "-rebuilt", "data_dir": tmp_path / "rebuilt"}
    )
    assert asyncio.run(messages_in(settings, settings.topics.judgements))  # gen-b's, no model's
    done = rebuild(settings, "--into", fresh.app_id, "--into-data-dir", str(fresh.data_dir))
    assert done.returncode == 0, done.stderr
    verdicts = printed_worlds(done.stdout)
    assert set(verdicts) == {
        "default/tavern-5-0",
        "default/tavern-5-1",
        *(f"{tenant}/{world}" for tenant, world in generated_tenants()),
    }
    assert all(verdict.endswith(" same as live") for verdict in verdicts.values()), verdicts
    assert f"RUMOURMILL_APP_ID={fresh.app_id}" in done.stdout
    # the progress bar, and no library's log (WordLlama's import set up one of INFO records)
    printed = done.stderr.splitlines()
    assert printed and all(line.startswith("rebuilding ") for line in printed), done.stderr

    live.stop()
    acks_before = asyncio.run(messages_in(settings, settings.topics.acks))
    switched = WorkerProcess(fresh, tmp_path / "switched.log").start()
    try:
        assert replayed_at_last_start(switched) == 0  # the rebuilt copies were kept as they are
        log = switched.log_path.read_text()
        assert "upgraded from format" not in log  # the rebuild stamped its stores: nothing to do
        for world in verdicts:
            tenant, world_id = world.split("/")
            assert live_digest(fresh, tenant, world_id) == verdicts[world].split()[0]
        later = [orjson.dumps(event) for event in story_of("after-switch")]
        send_events(fresh, later)
        wait_for_acks(fresh, later)
        # the new consumer group went on after the rebuilt events: none of them was taken again
        assert asyncio.run(messages_in(settings, settings.topics.acks)) == acks_before + len(later)
    finally:
        switched.stop()


async def messages_in(settings: Settings, topic: str) -> int:
    """How many messages `topic` holds (its end offsets, summed)."""
    consumer = AIOKafkaConsumer(bootstrap_servers=settings.bootstrap, group_id=None)
    await consumer.start()
    try:
        partitions = [TopicPartition(topic, number) for number in range(settings.partitions)]
        return sum((await consumer.end_offsets(partitions)).values())
    finally:
        await consumer.stop()


def generated_tenants() -> list[tuple[str, str]]:
    return [
        (generated_world(seed, world)[2], world) for seed, world in ((3, "gen-a"), (8, "gen-b"))
    ]


def test_a_rebuild_beside_stopped_workers_sends_what_the_events_they_never_took_produced(
    settings: Settings, tmp_path: Path
) -> None:
    """The live worker stopped with events still to take (its changelog past recovering, say):
    a worker switched to the rebuild's app id goes on after the events rebuilt, so the rebuild
    itself sends their acks, dead letters and change records, and those of no event the live
    worker had committed, saying so before the fold."""
    asyncio.run(ensure_topics(settings))
    taken = [orjson.dumps(line) for line in story_of("taken-live")]
    fresh = settings.model_copy(
        update={"app_id": settings.app_id + "-rebuilt", "data_dir": tmp_path / "rebuilt"}
    )
    into = ("--into", fresh.app_id, "--into-data-dir", str(fresh.data_dir))
    worker = WorkerProcess(settings, tmp_path / "live.log").start()
    try:
        send_events(settings, taken)
        wait_for_acks(settings, taken)
        running = rebuild(settings, "--workers-stopped", *into)
    finally:
        worker.stop()
    assert running.returncode == 1  # the flag taken on trust sent acks the workers sent too
    assert "--workers-stopped, but 1 worker(s) of app id" in running.stderr
    committed = asyncio.run(live_committed(settings, range(settings.partitions)))
    never_taken = [orjson.dumps(line) for line in story_of("never-taken")]
    invalid = orjson.dumps(event("never-taken", 99, key="story.happened") | {"seq": "ninety"})
    send_events(settings, [*never_taken, invalid])
    ends = asyncio.run(events_to_fold(settings, None))
    owed = sum(end - max(first, committed[partition]) for partition, (first, end) in ends.items())
    assert owed == len(never_taken) + 1  # the live worker committed all it took as it stopped

    joined = joined_during_the_pause(settings, "--workers-stopped", *into)
    assert joined.returncode == 1, joined.stderr  # the worker started meanwhile sends its own
    assert "--workers-stopped, but 1 worker(s) of app id" in joined.stderr
    assert changelog_topic(fresh) not in topics_on(settings)  # refused before it made any

    done = rebuild(settings, "--workers-stopped", *into)
    assert done.returncode == 0, done.stderr
    assert f"change records of {owed} event(s) the stopped workers had not committed" in done.stdout
    warned = f"warning: the stopped workers of {settings.app_id!r} left {owed} event(s)"
    assert done.stderr.startswith(warned), done.stderr
    verdicts = printed_worlds(done.stdout)
    assert set(verdicts) == {"default/taken-live", "default/never-taken"}
    assert all(verdict.endswith(" not compared") for verdict in verdicts.values()), verdicts
    wait_for_acks(settings, never_taken)  # with no worker running
    read_topic(
        settings,
        settings.topics.deadletter,
        lambda letters: any(b64decode(letter["value_base64"]) == invalid for letter in letters),
    )
    expected = replayed_change_ids(never_taken, Projector(changes=True))
    assert expected
    read_topic(
        settings,
        settings.topics.changes,
        lambda records: expected <= {record["change_id"] for record in records},
    )
    acks = read_topic(settings, settings.topics.acks, lambda acks: True, timeout=5)
    acked_live = [ack for ack in acks if ack["world_instance_id"] == "taken-live"]
    assert len(acked_live) == len(taken)  # none sent again


def test_world_rebuilds_one_world_and_bad_targets_are_refused(
    settings: Settings, live: WorkerProcess, tmp_path: Path
) -> None:
    one = settings.app_id + "-one"
    done = rebuild(settings, "--world", "tavern-5-1", "--into", one, "--into-data-dir", "one")
    assert done.returncode == 0, done.stderr
    [(world, verdict)] = printed_worlds(done.stdout).items()
    assert (world, verdict.split()[0]) == (
        "default/tavern-5-1",
        live_digest(settings, "default", "tavern-5-1"),
    )
    assert "holds world 'tavern-5-1' only" in done.stdout

    again = rebuild(settings, "--world", "tavern-5-0", "--into", one, "--into-data-dir", "two")
    assert again.returncode == 1
    assert again.stderr.strip().endswith(
        f"app id {one!r} already has state in '{one}-state-changelog'"
    )
    crowded = rebuild(settings, "--into", settings.app_id + "-two", "--into-data-dir", "one")
    assert crowded.returncode == 1
    assert crowded.stderr.strip().endswith("the data dir one is not empty; name a fresh one")

    missing = rebuild(settings, "--topic-prefix", "nothing-here")
    assert missing.returncode == 1
    assert missing.stderr.strip().splitlines() == [
        f"Error: rebuild: topic 'nothing-here.events' does not exist on {settings.bootstrap}"
    ]
    unreachable = rebuild(settings, "--url", "http://127.0.0.1:9")
    assert unreachable.returncode == 1
    assert "Traceback" not in unreachable.stderr
    assert unreachable.stderr.startswith("Error: rebuild: the live worker at http://127.0.0.1:9")


def test_a_rebuild_compared_with_one_tenants_key_says_which_worlds_it_could_not_compare(
    settings: Settings, tmp_path: Path
) -> None:
    """A live worker with API keys and two tenants: a key reads its own tenant only, so the
    other tenant's worlds are named as not compared (exit 3), after the rebuild's summary,
    rather than the whole comparison (and the summary) given up for the first of them."""
    keyed = settings.model_copy(update={"api_keys": {"key-a": "default", "key-b": "other"}})
    asyncio.run(ensure_topics(keyed))
    lines = [orjson.dumps(event("mine", 1)), orjson.dumps(event("theirs", 1, tenant_id="other"))]
    worker = WorkerProcess(keyed, tmp_path / "live.log").start()
    try:
        send_events(keyed, lines)
        wait_for_acks(keyed, lines)
        done = rebuild(keyed, "--api-key", "key-a", "--into-data-dir", str(tmp_path / "rebuilt"))
    finally:
        worker.stop()
    assert done.returncode == 3, done.stderr
    verdicts = printed_worlds(done.stdout)
    assert verdicts["default/mine"].endswith(" same as live")
    assert verdicts["other/theirs"].endswith(
        " not compared (403: this API key does not read tenant 'other')"
    )
    assert "to switch: stop every worker" in done.stdout
    assert done.stderr.splitlines()[-1] == (
        "Error: 1 of 2 world(s) not compared: the API key does not read their tenants; compare "
        "each with the digest `rumourmill digest --world W --api-key KEY` prints, KEY one of "
        "its tenant"
    )


def test_a_rebuild_that_loses_its_broker_partway_stops_with_the_reason(tmp_path: Path) -> None:
    """The broker gone while the rebuild folds: the rebuild stops, saying how far it got and
    what the fresh app id now holds, rather than a traceback; gone before the events are all
    fetched, it stops once none came for a while, rather than with a progress bar that never
    moves (the consumer fetches nothing from a broker gone, and raises nothing)."""
    with apache_kafka(Settings.from_env()) as broker:
        live = unique_settings(broker.bootstrap, tmp_path / "live", partitions=4)
        asyncio.run(ensure_topics(live))
        lines = story(worlds=4, events_per_world=2000, seed=9)
        send_events(live, lines)
        target = live.model_copy(
            update={"app_id": f"{live.app_id}-rebuilt", "data_dir": tmp_path / "rebuilt"}
        )

        async def fold_after_the_broker_is_gone() -> None:
            spans = await events_to_fold(live, None)
            consumer = AIOKafkaConsumer(bootstrap_servers=live.bootstrap)
            await consumer.start()
            broker.stop()
            topic = MemoryTopic()
            producer = AIOKafkaProducer(bootstrap_servers=live.bootstrap)  # the fold sends nothing
            folder = Folder(
                Projector(),
                producer,
                changelog_topic(target),
                lambda partition: Rdict(str(tmp_path / f"fold-{partition}")),
                Judge(None, JudgementLog(topic.read, topic.send)),
                target.changelog_batch_bytes,
                live.partitions,
            )
            try:
                await folder.fold(consumer, live.topics.events, spans, None, lambda _: None, 3)
            finally:
                await consumer.stop()
                await producer.stop()  # never started, but closed: no warning when it goes

        with pytest.raises(RebuildFailed, match=r"^no events for 3 s, partitions \[.+\] short"):
            asyncio.run(fold_after_the_broker_is_gone())
        broker.restart()  # a new broker on the same port: stop() took the old one's data
        asyncio.run(ensure_topics(live))
        send_events(live, lines)
        folded: list[int] = []

        def broker_lost_at_the_first_events(done: int) -> None:
            if not folded:
                broker.stop()
            folded.append(done)

        with pytest.raises(RebuildFailed) as failed:
            asyncio.run(
                rebuild_into(live, target, advance=broker_lost_at_the_first_events, stall_seconds=5)
            )
    reason = str(failed.value)
    assert reason.startswith(f"Kafka at {live.bootstrap} failed: ")
    assert f"app id {target.app_id!r} holds part of a rebuild" in reason
    assert f"{target.app_id}-state-changelog" in reason and str(target.data_dir) in reason
    assert 0 < sum(folded) <= len(lines)


def test_a_kafka_failing_before_the_fold_stops_the_rebuild_in_one_line(
    settings: Settings, tmp_path: Path
) -> None:
    """The events topic found, then Kafka unreachable for the checks of the fresh app id: the
    rebuild stops with the one line the command prints, not a traceback."""
    asyncio.run(ensure_topics(settings))
    target = settings.model_copy(
        update={
            "app_id": f"{settings.app_id}-rebuilt",
            "data_dir": tmp_path / "rebuilt",
            "broker": ("127.0.0.1:1",),
        }
    )
    with pytest.raises(RebuildFailed, match=r"^cannot reach Kafka at 127\.0\.0\.1:1: "):
        asyncio.run(rebuild_into(settings, target))


def test_a_rebuild_of_a_world_the_events_never_name_stops_and_leaves_no_changelog(
    settings: Settings, tmp_path: Path
) -> None:
    """`--world` misspelt: the rebuild stops saying nothing was rebuilt (the command exits 1),
    and deletes the changelog topic it made for the fresh app id, and the data dir it made
    (a tenant's deletion, which every world's rebuild folds, opened the partition there:
    trying again into it was refused)."""
    asyncio.run(ensure_topics(settings))
    send_events(settings, [event("tavern", 1)])
    gone = deletion_event("acme", None).model_dump(mode="json", exclude_defaults=True)
    asyncio.run(
        send_one(settings, settings.topics.events, b"*", orjson.dumps(gone), every_partition=True)
    )
    target = settings.model_copy(
        update={"app_id": f"{settings.app_id}-typo", "data_dir": tmp_path / "new" / "typo"}
    )
    with pytest.raises(RebuildFailed) as failed:
        asyncio.run(rebuild_into(settings, target, "taverm"))
    assert str(failed.value) == (
        f"the events topic {settings.topics.events!r} holds no event of world 'taverm': "
        "nothing rebuilt"
    )
    deadline = time.monotonic() + 30
    while changelog_topic(target) in topics_on(settings) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert changelog_topic(target) not in topics_on(settings)
    assert not (tmp_path / "new").exists()  # nor the directories made to hold it


def test_a_rebuild_of_events_a_transactional_producer_wrote_ends_on_their_digest(
    settings: Settings, tmp_path: Path
) -> None:
    """A game backend writing its events exactly once (a transactional producer) ends each
    partition with a commit marker, which takes the last offset and is never given to a
    consumer: the rebuild waited for it until it stalled, and failed at every try. It ends as
    soon as its consumer's position reaches each end, its progress told of every offset."""
    asyncio.run(ensure_topics(settings))
    events = [event("save-1", seq) for seq in (1, 2, 3)]

    async def send_in_a_transaction() -> None:
        producer = AIOKafkaProducer(**kafka_options(settings), transactional_id="game-backend")
        await producer.start()
        try:
            async with producer.transaction():
                for value in events:
                    await producer.send(settings.topics.events, orjson.dumps(value), key=b"save-1")
        finally:
            await producer.stop()

    asyncio.run(send_in_a_transaction())
    target = settings.model_copy(
        update={"app_id": f"{settings.app_id}-txn", "data_dir": tmp_path / "txn"}
    )
    totals: list[int] = []
    advanced: list[int] = []
    rebuilt = asyncio.run(
        rebuild_into(
            settings, target, on_total=totals.append, advance=advanced.append, stall_seconds=20
        )
    )
    assert rebuilt.events == len(events)
    assert totals == [len(events) + 1] and sum(advanced) == totals[0]  # the marker: one offset
    replayed = replay_lines([orjson.dumps(value) for value in events])
    digest = world_digest(replayed.state, "default", "save-1")
    assert rebuilt.digests == {("default", "save-1"): digest}


def test_events_retention_removes_while_a_rebuild_reads_stop_it_saying_so(
    settings: Settings, tmp_path: Path
) -> None:
    """The rebuild looked up each partition's first and last offsets; retention then removed
    the first events before they were read. Its consumer jumped past them to the end (aiokafka's
    default), and the fold, done once its position reached the end, ended without them."""
    settings = settings.model_copy(update={"partitions": 1})
    asyncio.run(ensure_topics(settings))
    send_events(settings, [event("save-1", seq) for seq in range(1, 6)])
    events = TopicPartition(settings.topics.events, 0)

    async def remove_the_first_three() -> None:
        admin = AIOKafkaAdminClient(**kafka_options(settings))
        await admin.start()
        try:
            await admin.delete_records({events: RecordsToDelete(before_offset=3)})
        finally:
            await admin.close()

    def retention_runs(total: int) -> None:  # called once the offsets are looked up
        removing = threading.Thread(target=asyncio.run, args=(remove_the_first_three(),))
        removing.start()
        removing.join()

    target = settings.model_copy(
        update={"app_id": f"{settings.app_id}-late", "data_dir": tmp_path / "late"}
    )
    with pytest.raises(RebuildFailed) as failed:
        asyncio.run(rebuild_into(settings, target, on_total=retention_runs, stall_seconds=20))
    assert "retention removed events the rebuild had still to read" in str(failed.value)


def test_the_events_a_rebuild_did_not_fold_and_the_live_workers_may_hold_name_their_worlds(
    settings: Settings,
) -> None:
    """The worlds the comparison does not compare when their digests differ
    (`tests/streams/test_rebuild_compare.py`): those events published since the rebuild took
    the topic's ends name (a tenant's deletion, sent to each partition, names its tenant's
    once), and those it folded that the live workers have not committed yet."""
    asyncio.run(ensure_topics(settings))
    send_events(settings, story_of("early"))
    folded = asyncio.run(events_to_fold(settings, None))
    gone = deletion_event("acme", None).model_dump(mode="json", exclude_defaults=True)
    send_events(settings, [*story_of("late"), *story_of("late", "acme")])
    asyncio.run(
        send_one(settings, settings.topics.events, b"*", orjson.dumps(gone), every_partition=True)
    )
    since = asyncio.run(events_since(settings, folded))
    told = len(story_of("late"))
    assert since.worlds == {("default", "late"): told, ("acme", "late"): told}
    assert since.tenants == {"acme"}
    assert since.events_of(("acme", "early")) == 1 and since.events_of(("default", "early")) == 0
    warned: list[str] = []
    # a group that committed nothing is no live workers': nothing is taken for unprocessed
    assert (
        asyncio.run(
            events_not_processed_live(settings, folded, committed(settings, folded), warned.append)
        )
        == Named()
    )
    assert warned and "has committed nothing on the events topic" in warned[0]
    [(partition, (first, end))] = [(p, span) for p, span in folded.items() if span[1] > span[0]]
    asyncio.run(commit_group(settings, settings.app_id, {partition: (first, first + 2)}))
    waiting = asyncio.run(
        events_not_processed_live(settings, folded, committed(settings, folded), warned.append)
    )
    assert (waiting.worlds, waiting.tenants) == ({("default", "early"): end - first - 2}, set())
    asyncio.run(commit_group(settings, settings.app_id, folded))  # the live workers took them all
    assert (
        asyncio.run(
            events_not_processed_live(settings, folded, committed(settings, folded), warned.append)
        )
        == Named()
    )
    assert len(warned) == 1


def committed(settings: Settings, folded: dict[int, tuple[int, int]]) -> dict[int, int]:
    """The live workers' committed offsets, as the comparison reads them before the digests."""
    return asyncio.run(live_committed(settings, folded))


def test_reading_for_the_comparison_stops_when_no_event_comes(settings: Settings) -> None:
    """Found by a reviewer: with the broker gone aiokafka gives nothing, and the comparison
    waited for ever, silently. Here, a range whose end is past the topic's (no event comes)."""
    asyncio.run(ensure_topics(settings))
    with pytest.raises(RebuildFailed, match=r"no events for 1 s reading partitions \[0\]"):
        asyncio.run(named_between(settings, {0: (0, 5)}, stall_seconds=1.0))


def test_ctrl_c_during_the_fold_says_what_is_left_in_one_line_and_nothing_more(
    settings: Settings, tmp_path: Path
) -> None:
    """Interrupted while changelog sends were in flight: the message and exit 130 were right,
    but the sends the stopping producer failed could print `Future exception was never
    retrieved` with their tracebacks."""
    lines = story(worlds=4, events_per_world=3000, seed=13)
    asyncio.run(ensure_topics(settings))
    send_events(settings, lines)
    stopped = settings.model_copy(update={"app_id": settings.app_id + "-stopped"})
    changelog = changelog_topic(stopped)

    def folding() -> bool:
        """Whether the rebuild sends changelog records yet."""
        return (
            changelog in topics_on(settings) and asyncio.run(messages_in(settings, changelog)) > 0
        )

    worker = WorkerProcess(settings, tmp_path / "live.log").start()  # the live one it checks
    process = subprocess.Popen(
        [sys.executable, "-m", "streams", "rebuild", "--into", stopped.app_id],
        env=settings_env(settings) | {"COLUMNS": "100"},
        cwd=tmp_path,
        stderr=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and not folding():
            time.sleep(0.2)
        process.send_signal(signal.SIGINT)
        _, stderr = process.communicate(timeout=120)
    finally:
        if process.poll() is None:
            process.kill()
        worker.stop()
    assert process.returncode == 130, stderr
    said = [line for line in stderr.splitlines() if not line.startswith("rebuilding ")]
    assert len(said) == 1 and said[0].startswith("rebuild: interrupted; app id "), stderr


def test_a_rebuild_without_a_model_is_refused_for_the_answers_of_a_model_it_folds(
    settings: Settings,
) -> None:
    """Answers a model gave `judged` refuse a rebuild without a model URL of every world, or of
    `judged`; a rebuild of `ruled` alone, whose judgements are the rules' for want of a model,
    goes on (every rebuild was refused while the topic held any record, of any world)."""
    asyncio.run(ensure_topics(settings))
    feeling = {"npc_id": "npc-a", "belief_id": "b", "judgement": "feeling"}
    records = [
        EventJudgements(
            world_instance_id=world,
            tenant_id="default",
            timeline_id="main",
            seq=1,
            judgements=[RecordedJudgement.model_validate(feeling | made)],
        )
        for world, made in (
            ("judged", {"answer": {"feeling": 0.5, "arousal": 0.2}}),
            ("ruled", {"reason": NO_MODEL}),
        )
    ]

    async def publish() -> None:
        producer = AIOKafkaProducer(**kafka_options(settings))
        await producer.start()
        try:
            for record in records:
                partition = partition_of(record.world_instance_id.encode(), settings.partitions)
                await producer.send_and_wait(
                    settings.topics.judgements,
                    record.to_bytes(),
                    key=record_key(record),
                    partition=partition,
                )
        finally:
            await producer.stop()

    asyncio.run(publish())
    target = settings.model_copy(update={"app_id": settings.app_id + "-rebuilt"})
    asyncio.run(check_judged(target, settings, "ruled", 10.0))
    for world in (None, "judged"):
        with pytest.raises(RebuildFailed, match="the live worker judged with a model"):
            asyncio.run(check_judged(target, settings, world, 10.0))
