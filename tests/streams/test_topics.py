"""Rumourmill's topics on a real Apache Kafka broker: made as the settings say (the events
topic keeping every event), or the worker and the commands stop in one line saying why not."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from pathlib import Path

import orjson
import pytest
from aiokafka.admin import AIOKafkaAdminClient
from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType

from streams.changelog import topic_config
from streams.rebuild import events_to_fold
from streams.settings import Settings
from streams.topics import changelog_topic, ensure_topics, leader_topic
from tests.support import (
    WorkerProcess,
    create_topic,
    event,
    run_command,
    stopped_saying,
    topics_on,
    unique_settings,
)

pytestmark = pytest.mark.integration

WEEK_MS = 7 * 86_400_000


@pytest.fixture
def settings(kafka_bootstrap: str, tmp_path: Path) -> Settings:
    return unique_settings(kafka_bootstrap, tmp_path / "data", log_format="json")


def configs_of(settings: Settings, topic: str, names: Iterable[str]) -> dict[str, str]:
    """The broker's values of `topic`'s configs `names`."""

    async def described() -> dict[str, str]:
        admin = AIOKafkaAdminClient(bootstrap_servers=settings.bootstrap)
        await admin.start()
        try:
            [response] = await admin.describe_configs(
                [ConfigResource(ConfigResourceType.TOPIC, topic, dict.fromkeys(names))]
            )
        finally:
            await admin.close()
        entries = response.to_object()["resources"][0]["config_entries"]
        return {entry["config_names"]: entry["config_value"] for entry in entries}

    return asyncio.run(described())


def test_the_events_topic_is_made_to_keep_every_event(settings: Settings) -> None:
    """The events are the only input, every projection rebuilt from them: a stock broker's
    retention (7 days) would delete them, and a rebuild would start mid-history."""
    asyncio.run(ensure_topics(settings))
    assert configs_of(settings, settings.topics.events, ["retention.ms", "retention.bytes"]) == {
        "retention.ms": "-1",
        "retention.bytes": "-1",
    }
    acks = configs_of(settings, settings.topics.acks, ["retention.ms"])
    assert acks == {"retention.ms": str(WEEK_MS)}  # the others keep the broker's


def test_an_events_topic_that_deletes_events_is_warned_of_by_a_worker_and_a_rebuild(
    settings: Settings, tmp_path: Path
) -> None:
    """A studio may keep a week of events on purpose: the worker runs, but its log says, once,
    what that costs; a rebuild says it too."""
    create_topic(
        settings, settings.topics.events, settings.partitions, {"retention.ms": str(WEEK_MS)}
    )
    worker = WorkerProcess(settings, tmp_path / "worker.log").start()
    worker.stop()
    warnings = [
        record
        for record in map(orjson.loads, worker.log_path.read_bytes().splitlines())
        if "keeps events for at most" in record["message"]
    ]
    expected = (
        f"the events topic {settings.topics.events!r} keeps events for at most 7 day(s) "
        f"(retention.ms={WEEK_MS}): once Kafka deletes the first, `rumourmill rebuild` and any "
        "replay of the whole topic start mid-history and make other state than the workers "
        "hold; set its retention.ms and retention.bytes to -1 to keep every event"
    )
    assert [(record["level"], record["message"]) for record in warnings] == [("warning", expected)]
    told: list[str] = []
    asyncio.run(events_to_fold(settings, None, told.append))
    assert told == [expected]


def test_topics_the_broker_will_not_create_stop_a_publish_and_a_worker_saying_why(
    settings: Settings, tmp_path: Path
) -> None:
    """RUMOURMILL_REPLICATION=3 with one broker: the broker refuses every topic, and says so in
    its answer rather than raising; a publish went on to send to a topic that did not exist."""
    replicated = settings.model_copy(update={"replication": 3})
    story = tmp_path / "story.ndjson"
    story.write_bytes(orjson.dumps(event("w", 1)) + b"\n")
    published = run_command(replicated, "publish", str(story))
    assert published.returncode == 1, published.stdout
    line = published.stderr.splitlines()[-1]
    topics = settings.topics
    named = (topics.events, topics.acks, topics.deadletter, topics.changes, topics.judgements)
    refused = f"Error: the broker refused to create topic {', '.join(map(repr, named))}, "
    assert line.startswith(f"{refused}{topics.policies!r}: "), line
    assert "replication factor of 3 cannot be reached because only 1 broker(s)" in line
    assert line.endswith("; nothing published")
    worker = run_command(replicated, "worker")
    assert worker.returncode == 1
    faust_own = f"{changelog_topic(settings)!r}, {leader_topic(settings)!r}"
    assert stopped_saying(worker) == line.removesuffix("; nothing published").replace(
        f"{topics.policies!r}: ", f"{topics.policies!r}, {faust_own}: "
    )
    assert settings.topics.events not in topics_on(settings)


def test_a_worker_whose_own_topics_the_broker_will_not_create_stops_saying_why(
    settings: Settings, tmp_path: Path
) -> None:
    """The topics a publish made are there; the state changelog and Faust's leader topic are
    made when a worker first starts: refused, Faust stopped the worker with a traceback that
    named neither the topics nor the setting."""
    story = tmp_path / "story.ndjson"
    story.write_bytes(orjson.dumps(event("w", 1)) + b"\n")
    assert run_command(settings, "publish", str(story)).returncode == 0
    worker = run_command(settings.model_copy(update={"replication": 3}), "worker")
    assert worker.returncode == 1
    line = stopped_saying(worker)
    named = f"{changelog_topic(settings)!r}, {leader_topic(settings)!r}"
    assert line.startswith(f"Error: the broker refused to create topic {named}: "), line
    assert "replication factor of 3 cannot be reached because only 1 broker(s)" in line
    assert "Traceback" not in worker.stderr


@pytest.mark.parametrize(("batch_bytes", "needed"), [(1_000_000, 1_000_000), (150_000, 215_536)])
def test_a_changelog_made_for_smaller_batches_stops_a_worker_naming_the_setting(
    settings: Settings, batch_bytes: int, needed: int
) -> None:
    """The changelog was made while RUMOURMILL_CHANGELOG_BATCH_BYTES was 100000, and the setting
    raised since: the broker would refuse the larger batches, or a record alone up to 64 KiB
    over a batch (raised by less than that, the setting passed), and the worker stop on each at
    every restart. It stops before it starts, saying how to raise the topic's limit."""
    create_topic(settings, changelog_topic(settings), settings.partitions, topic_config(100_000))
    raised = settings.model_copy(
        update={"changelog_batch_bytes": batch_bytes, "max_event_bytes": 64 * 1024}
    )
    worker = run_command(raised, "worker")
    assert worker.returncode == 1
    topic = changelog_topic(settings)
    assert stopped_saying(worker) == (
        f"Error: the state changelog {topic!r} takes messages of at most 165536 bytes "
        f"(max.message.bytes), under the {needed} that RUMOURMILL_CHANGELOG_BATCH_BYTES="
        f"{batch_bytes} needs: raise it with `kafka-configs.sh --bootstrap-server "
        f"{settings.bootstrap} --alter --entity-type topics --entity-name {topic} --add-config "
        f"max.message.bytes={batch_bytes + 65536}`, or lower the setting"
    )
