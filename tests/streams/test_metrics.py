"""`GET /metrics`: what a worker counts, scraped over HTTP and parsed as Prometheus reads it."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time
import urllib.request
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

import orjson
import pytest
from aiokafka import TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, RecordsToDelete

from projections.delivery import SourceMessage, world_key
from projections.policy import resolve
from projections.projector import Projector
from projections.state import MemoryState
from schemas.memory import Memory
from streams.metrics import Metrics
from streams.replay import replay_lines
from streams.topics import ensure_topics
from tests.support import (
    WorkerProcess,
    by_partition,
    event,
    read_topic,
    samples_of,
    scrape,
    send_events,
    settings_env,
    unique_settings,
)
from tests.tavern import TAVERN_LINES

SPREADING = {"memory": {"spreading": {"enabled": True}}}


def test_memories_and_rumours_formed_are_counted_as_the_projector_forms_them() -> None:
    metrics = Metrics()
    policy = resolve(None, SPREADING)
    formed: list[tuple[Sequence[Memory], Sequence[Memory]]] = []

    def observe(memories: Sequence[Memory], rumours: Sequence[Memory]) -> None:
        formed.append((memories, rumours))
        metrics.formed(memories, rumours)

    replay_lines(
        TAVERN_LINES,
        Projector(policies=lambda tenant, world: policy, on_formed=observe),
    )
    samples = samples_of(metrics.exposition().decode())
    rumours = sum(len(passed) for _, passed in formed)
    assert rumours > 0
    assert samples[("rumourmill_rumours_passed_total", ())] == rumours
    assert samples[("rumourmill_memories_formed_total", ())] == sum(len(m) for m, _ in formed)
    assert {memory.source for _, passed in formed for memory in passed} <= {"told", "rumour"}


@pytest.mark.parametrize("weighing", ["model", "rules"])
def test_the_pass_that_finds_model_questions_counts_nothing_formed(weighing: str) -> None:
    """With a model configured, the worker takes each event into scratch state first to find
    the judgements it would ask for, and throws that away: only the event taken in for good
    forms memories and rumours, and only those are counted (a world weighing by the rules asks
    nothing, and its scratch pass counted all it formed a second time)."""
    policy = resolve(None, SPREADING | {"memory": {**SPREADING["memory"], "weighing": weighing}})
    counted: list[int] = []

    def count(memories: Sequence[Memory], rumours: Sequence[Memory]) -> None:
        counted.append(len(memories) + len(rumours))

    projector = Projector(policies=lambda tenant, world: policy, on_formed=count)
    state = MemoryState()
    asked = 0
    for offset, line in enumerate(TAVERN_LINES):
        message = SourceMessage("events", 0, offset, world_key(line), line)
        asked += len(projector.questions(state, message, model_configured=True).asked)
        projector.receive(state, message)
    alone: list[int] = []
    replay_lines(
        TAVERN_LINES,
        Projector(
            policies=lambda tenant, world: policy,
            on_formed=lambda m, r: alone.append(len(m) + len(r)),
        ),
    )
    assert (asked > 0) is (weighing == "model"), "the scratch passes formed memories to ask about"
    assert sum(counted) == sum(alone) > 0


@pytest.mark.integration
def test_a_worker_scrape_matches_its_acks_dead_letters_and_what_it_formed(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    settings = unique_settings(kafka_bootstrap, tmp_path / "data")
    (tmp_path / "policy.json").write_bytes(orjson.dumps(SPREADING))
    subprocess.run(
        [sys.executable, "-m", "streams", "policy", "set", str(tmp_path / "policy.json")],
        env=settings_env(settings),
        check=True,
        capture_output=True,
    )
    expected = Counter[str]()
    replay_lines(
        TAVERN_LINES,
        Projector(
            policies=lambda tenant, world: resolve(SPREADING, None),
            on_formed=lambda memories, rumours: expected.update(
                memories=len(memories), rumours=len(rumours)
            ),
        ),
    )
    worker = WorkerProcess(settings, tmp_path / "worker.log").start()
    try:
        sent = [
            *TAVERN_LINES,
            *TAVERN_LINES[:2],  # duplicates
            orjson.dumps(event("w-other", 3)),  # deferred behind a gap
            b"not json",  # rejected and dead-lettered
        ]
        send_events(settings, sent)
        acks = read_topic(settings, settings.topics.acks, lambda got: len(got) >= len(sent))
        letters = read_topic(settings, settings.topics.deadletter, lambda got: len(got) >= 1)
        read_path = "/v2/memory/runtime/npcs/npc-mara?world_instance_id=save-1&timeline_id=main"
        web = f"http://127.0.0.1:{settings.web_port}"
        with urllib.request.urlopen(web + read_path, timeout=10) as reply:
            assert reply.status == 200

        deadline = time.monotonic() + 30
        while True:  # committed offsets reach the highwater once the worker commits
            samples = scrape(settings)
            lags = by_partition(samples, "rumourmill_consumer_lag")
            if (lags and not any(lags.values())) or time.monotonic() > deadline:
                break
            time.sleep(0.5)
    finally:
        worker.stop()

    assert set(lags) == {str(p) for p in range(settings.partitions)}
    assert not any(lags.values()), lags
    outcomes = Counter(ack["outcome"] for ack in acks)
    assert set(outcomes) == {"processed", "duplicate", "deferred", "rejected"}
    for outcome in ("processed", "deferred", "duplicate", "rejected"):
        key = ("rumourmill_events_total", (("outcome", outcome),))
        assert samples[key] == outcomes[outcome], outcome
    assert samples[("rumourmill_dead_letters_total", ())] == len(letters) == 1
    assert samples[("rumourmill_memories_formed_total", ())] == expected["memories"] > 0
    assert samples[("rumourmill_rumours_passed_total", ())] == expected["rumours"] > 0
    assert samples[("rumourmill_processing_seconds_count", ())] == len(sent)
    assert samples[("rumourmill_batch_events_sum", ())] == len(sent)
    read = ("endpoint", "/v2/memory/runtime/npcs/{npc_id}")
    assert samples[("rumourmill_read_seconds_count", (read,))] == 1


@pytest.mark.integration
@pytest.mark.parametrize("most", [1, 5])
def test_a_backlog_is_taken_in_batches_of_at_most_batch_events(
    kafka_bootstrap: str, tmp_path: Path, most: int
) -> None:
    settings = unique_settings(kafka_bootstrap, tmp_path / "data", partitions=1, batch_events=most)
    backlog = [orjson.dumps(event("w-backlog", seq)) for seq in range(1, 41)]
    send_events(settings, backlog)  # all wait before the worker starts
    worker = WorkerProcess(settings, tmp_path / "worker.log").start()
    try:
        read_topic(settings, settings.topics.acks, lambda got: len(got) >= len(backlog))
        deadline = time.monotonic() + 10
        while True:  # the last batch's acks go out while its writes are still being laid in
            samples = scrape(settings)
            batches = samples[("rumourmill_batch_events_count", ())]
            laid = samples.get(("rumourmill_lay_in_seconds_count", ()))
            if laid == batches or time.monotonic() > deadline:
                break
            time.sleep(0.1)
    finally:
        worker.stop()

    def taken(le: str) -> float:
        return samples[("rumourmill_batch_events_bucket", (("le", le),))]

    batches = samples[("rumourmill_batch_events_count", ())]
    assert samples[("rumourmill_batch_events_sum", ())] == len(backlog)
    assert samples[("rumourmill_lay_in_seconds_count", ())] == batches  # each wrote state
    assert samples[("rumourmill_lay_in_seconds_sum", ())] > 0
    assert batches >= len(backlog) / most
    assert taken(f"{most}.0") == batches  # none over the bound (1 and 5 are bucket bounds)
    if most > 1:
        assert batches < len(backlog)  # the waiting events were taken several at once


@pytest.mark.integration
def test_a_partition_whose_events_retention_removed_lags_nothing_before_any_commit(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    """A partition of which every event was removed (retention, `delete_records`) before the
    worker committed anything has nothing to take in: it lags 0, not its whole history, from
    its first report on (before the worker looked its first offset up, it reports none)."""
    settings = unique_settings(kafka_bootstrap, tmp_path / "data", partitions=1)
    asyncio.run(ensure_topics(settings))
    send_events(settings, [orjson.dumps(event("w-gone", seq)) for seq in range(1, 11)])
    events = TopicPartition(settings.topics.events, 0)

    async def remove_every_event() -> None:
        admin = AIOKafkaAdminClient(bootstrap_servers=settings.bootstrap)
        await admin.start()
        try:
            await admin.delete_records({events: RecordsToDelete(before_offset=10)})
        finally:
            await admin.close()

    asyncio.run(remove_every_event())
    worker = WorkerProcess(settings, tmp_path / "worker.log").start()
    try:
        deadline = time.monotonic() + 60
        lags: list[float] = []
        while time.monotonic() < deadline:
            samples = scrape(settings)
            lags.append(samples.get(("rumourmill_consumer_lag", (("partition", "0"),)), -1.0))
            if lags[-1] == 0 and len(lags) > 20:  # the progress watch looked (every 5 s)
                break
            time.sleep(0.5)
    finally:
        worker.stop()
    assert lags[-1] == 0 and set(lags) <= {-1.0, 0.0}, lags


def test_a_slow_event_and_a_slow_read_fall_in_buckets_of_their_own() -> None:
    """An event waits for the model up to its world's deadline, a recall for its reranker up to
    2 s: past the last bucket (2.5 s, 1 s), every slow one was counted in +Inf alone."""
    metrics = Metrics()
    metrics.processing.observe(4.0)
    metrics.reads.labels(endpoint="/v2/memory/runtime/npcs/{npc_id}/recall").observe(1.9)
    samples = samples_of(metrics.exposition().decode())
    assert samples[("rumourmill_processing_seconds_bucket", (("le", "5.0"),))] == 1
    assert samples[("rumourmill_processing_seconds_bucket", (("le", "2.5"),))] == 0
    recall = (("endpoint", "/v2/memory/runtime/npcs/{npc_id}/recall"), ("le", "2.5"))
    assert samples[("rumourmill_read_seconds_bucket", recall)] == 1
