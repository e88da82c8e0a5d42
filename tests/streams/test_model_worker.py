"""Model mode end to end: a real worker on Apache Kafka asking a scripted chat-completions
server; `rumourmill rebuild`, an in-process replay of the judgements topic's records and a
worker of a fresh app id with the model gone then ask nothing and reach the same digest, for a
world an event seen by 10,000 characters judged too; the chronicle the worker tells in the
model's summaries."""

from __future__ import annotations

import asyncio
import json
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import orjson
import pytest

from projections.chronicle import chronicle_read
from projections.delivery import MOST_REFUSALS_LISTED
from projections.judgements import RecordedAnswers
from projections.policy import policy_key, resolve
from projections.projector import Projector
from schemas.judgements import EventJudgements
from streams.publish import send_one
from streams.replay import replay_lines
from streams.settings import Settings
from streams.tokens import wordllama_tokens
from streams.topics import ensure_topics
from tests.model_server import MODEL_FEELING, RETOLD_PREFIX, SUMMARY_PREFIX, scripted_model
from tests.projections.test_chronicle import lines
from tests.streams.test_judgement_parts import crowd
from tests.streams.test_model_summaries import POLICY as SUMMARISED
from tests.streams.test_model_summaries import SHORT_CHAPTERS
from tests.support import (
    WorkerProcess,
    event,
    read_topic,
    scrape,
    send_events,
    settings_env,
    unique_settings,
)
from tests.tavern import TAVERN_LINES

TAVERN = [
    # the player's line says when it was said: a replay from a file matches the live digest
    line.replace(
        b'"game_time":"day 1, 19:41"',
        b'"game_time":"day 1, 19:41","occurred_at":"2026-01-01T19:41:00Z"',
    )
    for line in TAVERN_LINES
]
POLICY = {
    "memory": {
        "weighing": "model",
        "model": {"deadline_ms": 60_000},  # a loaded test machine is no reason to fall back
        "spreading": {"enabled": True},
    }
}


CROWD = 10_000
"""Characters who see a fight in save-2: their judgements, listed on the ack or kept in one
record, were megabytes, which the worker could not send; it stopped, and again at each restart."""
CROWD_POLICY = {"memory": {"weighing": "model", "model": {"deadline_ms": 500}}}


def get_json(settings: Settings, path: str) -> Any:
    with urllib.request.urlopen(f"http://127.0.0.1:{settings.web_port}{path}", timeout=10) as reply:
        return json.loads(reply.read())


def processed_acks(settings: Settings) -> list[dict[str, Any]]:
    return read_topic(
        settings,
        settings.topics.acks,
        lambda acks: sum(ack["outcome"] == "processed" for ack in acks) >= len(TAVERN),
        timeout=180,
    )


def digest(settings: Settings, world: str = "save-1") -> str:
    found: str = get_json(settings, f"/v2/admin/digest?world_instance_id={world}")["digest"]
    return found


@pytest.mark.integration
def test_a_worker_in_model_mode_asks_once_and_a_rebuild_without_the_model_agrees(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    with scripted_model() as model:
        settings = unique_settings(
            kafka_bootstrap,
            tmp_path / "live",
            model_url=model.url,
            model_name="scripted",
            rerank_url=model.url,
            rerank_model="scripted-reranker",
        )
        asyncio.run(ensure_topics(settings))
        for world, document in (("save-1", POLICY), ("save-2", CROWD_POLICY)):
            key = policy_key("default", world)
            value = json.dumps(document).encode()
            asyncio.run(send_one(settings, settings.topics.policies, key, value))
        worker = WorkerProcess(settings, tmp_path / "live.log").start()
        try:
            send_events(settings, TAVERN)
            acks = processed_acks(settings)
            assert [ack for ack in acks if "refused_judgements" in ack] == []
            mara = get_json(
                settings,
                "/v2/memory/runtime/npcs/npc-mara?world_instance_id=save-1&timeline_id=main",
            )
            assert {belief["feeling"] for belief in mara["beliefs"]} == {MODEL_FEELING}
            tomas = get_json(
                settings,
                "/v2/memory/runtime/npcs/npc-tomas?world_instance_id=save-1&timeline_id=main",
            )
            assert any(b["content"].startswith(RETOLD_PREFIX) for b in tomas["beliefs"])
            live_digest = digest(settings)
            assert model.calls == 6  # one per memory formed (4), one per memory retold (2)
            samples = scrape(settings)
            answered = ("rumourmill_model_calls_total", (("outcome", "answered"),))
            assert samples[answered] == 6
            # recall asks the reranker, which turns the searches' order round
            recalled = get_json(
                settings,
                "/v2/memory/runtime/npcs/npc-mara/recall?world_instance_id=save-1"
                "&timeline_id=main&q=the+sailor+and+the+son&limit=1",
            )
            [reranking] = model.rerankings
            assert recalled["searched"]["reranked"] == len(reranking["documents"]) >= 2
            assert [m["content"] for m in recalled["memories"]] == reranking["documents"][-1:]
            assert reranking["model"] == "scripted-reranker"
            samples = scrape(settings)
            assert samples[("rumourmill_rerank_calls_total", (("outcome", "answered"),))] == 1
            # a crowd sees a fight, the model hangs: the rules make 10,000 judgements, the ack
            # lists the first 100 and counts the rest, the topic keeps them all in parts
            model.behaviour = "hang"
            send_events(settings, [crowd(CROWD, "save-2")])
            [crowded] = [
                ack
                for ack in read_topic(
                    settings,
                    settings.topics.acks,
                    lambda acks: any(ack["world_instance_id"] == "save-2" for ack in acks),
                    timeout=180,
                )
                if ack["world_instance_id"] == "save-2"
            ]
            assert crowded["outcome"] == "processed"
            assert len(crowded["refused_judgements"]) == MOST_REFUSALS_LISTED
            assert crowded["more_refused_judgements"] == CROWD - MOST_REFUSALS_LISTED
            assert crowded["refused_judgements"][0]["reason"].startswith("deadline")
            crowd_digest, asked = digest(settings, "save-2"), model.calls
            # without the model's URL a rebuild would leave those answers unread: refused
            unconfigured = {
                name: value
                for name, value in settings_env(settings).items()
                if name != "RUMOURMILL_MODEL_URL"
            }
            refused = subprocess.run(
                [sys.executable, "-m", "streams", "rebuild", "--into", f"{settings.app_id}-r"],
                env=unconfigured,
                cwd=tmp_path,
                capture_output=True,
                text=True,
                check=False,
                timeout=300,
            )
            assert refused.returncode == 1
            assert f"the live worker judged with a model ('{settings.topics.judgements}'" in (
                refused.stderr
            )
            # `rumourmill rebuild` reads the answers back: the model is not asked again
            rebuilt = subprocess.run(
                [sys.executable, "-m", "streams", "rebuild", "--into", f"{settings.app_id}-r"],
                env=settings_env(settings),
                cwd=tmp_path,
                capture_output=True,
                text=True,
                check=False,
                timeout=300,
            )
            assert rebuilt.returncode == 0, rebuilt.stderr
            assert f"world default/save-1: {live_digest} same as live" in rebuilt.stdout
            assert f"world default/save-2: {crowd_digest} same as live" in rebuilt.stdout
            assert model.calls == asked
        finally:
            worker.stop()

    # the judgements topic holds every answer: an in-process replay needs no model
    recorded = [
        EventJudgements.model_validate(item)
        for item in read_topic(
            settings,
            settings.topics.judgements,
            lambda got: sum(item["world_instance_id"] == "save-1" for item in got) >= 5,
            timeout=60,
        )
    ]
    policy = resolve(None, POLICY)
    replayed = replay_lines(
        TAVERN, Projector(lambda tenant, world: policy, answers=RecordedAnswers(recorded))
    )
    assert replayed.digests[("default", "save-1")] == live_digest

    # a rebuild into a fresh app id, the model server gone: answers read back, nothing asked
    rebuild = Settings(
        **{
            **settings.model_dump(),
            "app_id": f"{settings.app_id}-rebuild",
            "data_dir": tmp_path / "rebuild",
            "web_port": unique_settings(kafka_bootstrap, tmp_path).web_port,
        }
    )
    worker = WorkerProcess(rebuild, tmp_path / "rebuild.log").start()
    try:
        both = read_topic(
            rebuild,
            rebuild.topics.acks,
            lambda acks: (
                sum(ack["outcome"] == "processed" for ack in acks) >= 2 * (len(TAVERN) + 1)
            ),
            timeout=180,
        )
        refusals = [ack for ack in both if "refused_judgements" in ack]
        assert [ack["world_instance_id"] for ack in refusals] == ["save-2", "save-2"]
        assert refusals[0] == refusals[1]  # the rules' judgements read back, as recorded
        assert digest(rebuild) == live_digest
        assert digest(rebuild, "save-2") == crowd_digest
    finally:
        worker.stop()


@pytest.mark.integration
def test_a_worker_with_a_model_tells_the_chronicle_in_the_models_summaries(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    talk = lines(40)
    with scripted_model() as model:
        settings = unique_settings(
            kafka_bootstrap, tmp_path / "live", model_url=model.url, model_name="scripted"
        )
        asyncio.run(ensure_topics(settings))
        document = json.dumps(SHORT_CHAPTERS).encode()
        asyncio.run(
            send_one(settings, settings.topics.policies, policy_key("default", "w"), document)
        )
        worker = WorkerProcess(settings, tmp_path / "live.log").start()
        try:
            send_events(settings, talk)
            acks = read_topic(
                settings,
                settings.topics.acks,
                lambda acks: sum(ack["outcome"] == "processed" for ack in acks) >= len(talk),
                timeout=180,
            )
            assert [ack for ack in acks if "refused_judgements" in ack] == []
            told = get_json(
                settings,
                "/v2/memory/runtime/npcs/npc-mara/chronicle?world_instance_id=w&timeline_id=main",
            )
        finally:
            worker.stop()
    parts = [told["condensed"], *told["chapters"]]
    assert told["condensed"] is not None and told["chapters"]
    assert all(part["summarised_by"] == "model" for part in parts)
    assert all(part["text"].startswith(SUMMARY_PREFIX) for part in parts)
    # the worker's token counts agree with the read's: the same chronicle as a replay of its
    # recorded judgements (the model gone)
    recorded = [
        EventJudgements.model_validate(item)
        for item in read_topic(
            settings, settings.topics.judgements, lambda got: len(got) >= 5, timeout=60
        )
    ]
    replayed = replay_lines(
        talk,
        Projector(
            lambda tenant, world: SUMMARISED,
            answers=RecordedAnswers(recorded),
            count=wordllama_tokens(),
        ),
    )
    read = chronicle_read(
        replayed.state,
        "default",
        "w",
        "main",
        "npc-mara",
        SUMMARISED.memory.chronicle,
        wordllama_tokens(),
    )
    assert orjson.loads(orjson.dumps(read)) == told


@contextmanager
def waiting_on_a_hanging_model(
    kafka_bootstrap: str, tmp_path: Path, partitions: int
) -> Iterator[tuple[Settings, WorkerProcess]]:
    """A worker whose model hangs and whose save-1 gives it a minute, the tavern sent and the
    model asked: its first event waits for the model. Stopped at the end."""
    with scripted_model("hang") as model:
        settings = unique_settings(
            kafka_bootstrap,
            tmp_path / "data",
            partitions=partitions,
            model_url=model.url,
            model_name="scripted",
            model_timeout_seconds=60.0,
        )
        asyncio.run(ensure_topics(settings))
        key = policy_key("default", "save-1")
        asyncio.run(send_one(settings, settings.topics.policies, key, json.dumps(POLICY).encode()))
        worker = WorkerProcess(settings, tmp_path / "worker.log").start()
        try:
            send_events(settings, TAVERN)
            deadline = time.monotonic() + 60
            while model.calls == 0 and time.monotonic() < deadline:
                time.sleep(0.1)
            assert model.calls > 0
            yield settings, worker
        finally:
            worker.stop()


@pytest.mark.integration
def test_a_worker_stopped_while_the_model_hangs_stops_cleanly_within_its_bound(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    """A world giving the model a minute, the model hanging: a SIGTERM waited for the minute,
    the worker gave up on its clean stop at 15 s, blaming Kafka, and exited 1. It waits five
    seconds more for the model, acks the event with the rules' judgements (each refusal saying
    the stop cut it) and stops cleanly."""
    with waiting_on_a_hanging_model(kafka_bootstrap, tmp_path, partitions=2) as (settings, worker):
        assert worker.process is not None
        worker.process.send_signal(signal.SIGTERM)
        told = time.monotonic()
        exit_code = worker.process.wait(30)
        took = time.monotonic() - told
    log = worker.log_path.read_text()
    assert exit_code == 0 and "did not stop within" not in log, worker.log_tail()
    assert took < 12
    acks = read_topic(settings, settings.topics.acks, lambda got: len(got) >= 1)
    reasons = {item["reason"] for ack in acks for item in ack.get("refused_judgements", [])}
    assert reasons == {"stop: the worker stopped, no answer within 5 s of it"}


@pytest.mark.integration
def test_the_lag_of_a_partition_waiting_on_the_model_grows_as_events_come(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    """While its events wait for the model the partition is paused, and the gauge, read off
    the consumer's last fetch, stood still however many events came meanwhile. It follows the
    log end Kafka gives every 5 s."""
    with waiting_on_a_hanging_model(kafka_bootstrap, tmp_path, partitions=1) as (settings, _):
        later = [orjson.dumps(event("w-later", seq)) for seq in range(1, 5_501)]
        send_events(settings, later[:5_000])  # past the stream's buffer: paused
        time.sleep(3)
        send_events(settings, later[5_000:])
        lags: list[float] = []
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and (not lags or lags[-1] < len(later)):
            samples = scrape(settings)
            lags.append(samples.get(("rumourmill_consumer_lag", (("partition", "0"),)), -1))
            time.sleep(0.5)
    assert lags[-1] >= len(later), lags  # nothing of them is taken in: the first event waits
