"""Creating rumourmill's topics with their partition counts before anything uses them, and
refusing topics that exist with another count than the settings give them: the worker's state
changelog too, which Faust creates. The events topic keeps every event (`retention.ms` -1): they
are the only input, and a rebuild or replay of a log retention cut starts mid-history."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType
from aiokafka.errors import (
    KafkaConnectionError,
    KafkaError,
    KafkaTimeoutError,
    TopicAlreadyExistsError,
    for_code,
)

from projections.record_bounds import changelog_message_bytes
from streams.changelog import topic_config
from streams.kafka_clients import kafka_options
from streams.logs import logger
from streams.settings import Settings

log = logger("topics")

KEEP_FOREVER = {"retention.ms": "-1", "retention.bytes": "-1"}
"""The events topic's retention: no event is ever deleted for its age or the log's size."""
RETENTION = tuple(KEEP_FOREVER)
MAX_MESSAGE_BYTES = "max.message.bytes"

STATE_TABLE = "state"
"""The worker's one table (`streams.app`), whose changelog holds all its state."""


def kafka_trouble(bootstrap: str, error: KafkaError) -> str:
    """What went wrong with Kafka, in one line: not reached, or reached and failing."""
    if isinstance(error, KafkaConnectionError | KafkaTimeoutError):
        return f"cannot reach Kafka at {bootstrap}: {error}"
    return f"Kafka at {bootstrap} failed: {error}"


def changelog_topic(settings: Settings) -> str:
    """The state table's changelog topic, as Faust names it: per app id, not topic prefix."""
    return f"{settings.app_id}-{STATE_TABLE}-changelog"


def new_changelog(settings: Settings) -> NewTopic:
    """The state changelog topic, configured as the worker writes it (`streams.changelog`)."""
    return NewTopic(
        changelog_topic(settings),
        settings.partitions,
        settings.replication,
        topic_configs=topic_config(settings.changelog_batch_bytes),
    )


def leader_topic(settings: Settings) -> str:
    """The topic Faust's workers elect their group's leader on, as Faust names it."""
    return f"{settings.app_id}-__assignor-__leader"


class TopicsUnfit(Exception):
    """Topics a worker or command cannot work with, in one line for the operator."""


class TopicsNotCreated(TopicsUnfit):
    """Topics the broker refused to create (a replication factor over its broker count, no
    permission...): a command would then send to a topic that does not exist."""


class ChangelogLimitTooLow(TopicsUnfit):
    """A state changelog whose `max.message.bytes` is under what the changelog batches of
    `RUMOURMILL_CHANGELOG_BATCH_BYTES` need: the broker would refuse the larger batches, and
    the worker stop on each, at every restart."""


class PartitionsDisagree(TopicsUnfit):
    """Topics that exist with another partition count than `RUMOURMILL_PARTITIONS`, in one
    line. A worker places each world on its key's hash modulo the setting: over fewer
    partitions it sends acks and dead letters to partitions the topics lack, and stops; over
    more, it serves the worlds of the wrong partitions, and most reads answer 503."""


def check_partitions(counts: Mapping[str, int], settings: Settings) -> None:
    """Raise `PartitionsDisagree` naming each topic of `counts` (name -> its partitions) whose
    count is not the settings'."""
    wrong = [
        f"{name!r} has {count}" for name, count in counts.items() if count != settings.partitions
    ]
    if wrong:
        raise PartitionsDisagree(
            f"topic {', '.join(wrong)} partition(s), the settings say {settings.partitions} "
            f"({settings.named('partitions')}); every worker and command of a deployment needs "
            "the count its topics have"
        )


async def partition_counts(admin: AIOKafkaAdminClient, topics: Iterable[str]) -> dict[str, int]:
    """How many partitions each of `topics` has, as the broker describes them."""
    described = await admin.describe_topics(list(topics))
    return {item["topic"]: len(item["partitions"]) for item in described}


async def ensure_topics(settings: Settings, *, changelog: bool = False) -> None:
    """Create the events (kept for ever), acks, dead-letter, changes (unless the feed is off)
    and (compacted) judgements and policies topics if missing; raise `PartitionsDisagree`,
    creating nothing, when those of them that exist have another partition count than the
    settings', and `TopicsNotCreated` when the broker refuses to create one.

    `changelog` (a worker's): the state changelog and Faust's leader topics too, created here
    as Faust would (so a broker's refusal reads as any other topic's, not as Faust's traceback
    at start); an existing changelog is checked. One of another count, left by a deployment of
    the app id with another `RUMOURMILL_PARTITIONS`, holds in each partition the state of the worlds
    that count put there: a worker would restore it as the state of other worlds'. One whose
    `max.message.bytes` is under what `RUMOURMILL_CHANGELOG_BATCH_BYTES` needs raises
    `ChangelogLimitTooLow`; an existing events topic with a finite retention is logged as a
    warning."""
    admin = AIOKafkaAdminClient(**kafka_options(settings))
    await admin.start()
    try:
        existing = set(await admin.list_topics())
        wanted = [
            NewTopic(
                settings.topics.events,
                settings.partitions,
                settings.replication,
                topic_configs=KEEP_FOREVER,
            )
        ]
        wanted += [
            NewTopic(name, settings.partitions, settings.replication)
            for name in (settings.topics.acks, settings.topics.deadletter, settings.topics.changes)
            if name
        ]
        wanted.append(
            NewTopic(
                settings.topics.judgements,
                settings.partitions,
                settings.replication,
                topic_configs={"cleanup.policy": "compact"},
            )
        )
        partitioned = [topic.name for topic in wanted if topic.name in existing]
        state_changelog = changelog_topic(settings)
        if changelog and state_changelog in existing:
            partitioned.append(state_changelog)
        if partitioned:
            check_partitions(await partition_counts(admin, partitioned), settings)
        if changelog and state_changelog in existing:
            limit = await topic_settings(admin, state_changelog, [MAX_MESSAGE_BYTES])
            check_changelog_limit(limit, settings)
        if changelog and settings.topics.events in existing:
            retention = await topic_settings(admin, settings.topics.events, RETENTION)
            warning = retention_warning(settings.topics.events, retention)
            if warning is not None:
                log.warning(warning, extra={"topic": settings.topics.events})
        wanted.append(
            NewTopic(
                settings.topics.policies,
                1,
                settings.replication,
                topic_configs={"cleanup.policy": "compact"},
            )
        )
        if changelog:
            wanted += [
                new_changelog(settings),
                NewTopic(leader_topic(settings), 1, settings.replication),
            ]
        await create_topics(admin, [topic for topic in wanted if topic.name not in existing])
    finally:
        await admin.close()


async def create_topics(admin: AIOKafkaAdminClient, topics: list[NewTopic]) -> None:
    """Create `topics`; one another client created meanwhile is left as it is. Raises
    `TopicsNotCreated` naming each the broker refused and its reason: aiokafka reports them in
    the response, and raises nothing."""
    if not topics:
        return
    response = (await admin.create_topics(topics)).to_object()
    refused: dict[str, list[str]] = {}  # the broker's reason -> the topics it gave it for
    for outcome in response["topic_errors"]:
        if outcome["error_code"] not in (0, TopicAlreadyExistsError.errno):
            reason = outcome.get("error_message") or for_code(outcome["error_code"]).__name__
            refused.setdefault(reason, []).append(repr(outcome["topic"]))
    if refused:
        raise TopicsNotCreated(
            "the broker refused to create "
            + "; ".join(f"topic {', '.join(names)}: {reason}" for reason, names in refused.items())
        )


async def topic_settings(
    admin: AIOKafkaAdminClient, topic: str, names: Iterable[str]
) -> dict[str, str]:
    """The values of the configs `names` of `topic`, as the broker describes them (its defaults
    for those the topic does not set). Every config is asked for and `names` kept: Tansu,
    `rumourmill dev`'s broker, closes the connection on a request naming configs."""
    [response] = await admin.describe_configs(
        [ConfigResource(ConfigResourceType.TOPIC, topic, None)]
    )
    entries = response.to_object()["resources"][0]["config_entries"]
    wanted = set(names)
    return {
        entry["config_names"]: entry["config_value"]
        for entry in entries
        if entry["config_names"] in wanted
    }


def retention_warning(topic: str, configs: Mapping[str, str]) -> str | None:
    """What a finite retention of the events topic `topic` (its `retention.ms` and
    `retention.bytes` in `configs`) costs, in one line; None when it keeps every event."""
    limits = []
    milliseconds = int(configs.get("retention.ms", "-1"))
    if milliseconds >= 0:
        limits.append(f"{milliseconds / 86_400_000:g} day(s) (retention.ms={milliseconds})")
    size = int(configs.get("retention.bytes", "-1"))
    if size >= 0:
        limits.append(f"{size} bytes a partition (retention.bytes={size})")
    if not limits:
        return None
    return (
        f"the events topic {topic!r} keeps events for at most {' and '.join(limits)}: once "
        "Kafka deletes the first, `rumourmill rebuild` and any replay of the whole topic start "
        "mid-history and make other state than the workers hold; set its retention.ms and "
        "retention.bytes to -1 to keep every event"
    )


def check_changelog_limit(configs: Mapping[str, str], settings: Settings) -> None:
    """Raise `ChangelogLimitTooLow` when the state changelog's `max.message.bytes` (in
    `configs`) is under what the settings' changelog batches need: a batch is at most
    `RUMOURMILL_CHANGELOG_BATCH_BYTES`, and one record alone may take up to 64 KiB more
    (`projections.record_bounds`; compared with the batch alone, a setting raised by less than
    that since the topic was made passed, and the broker refused such a record, the worker
    stopping on it at every restart). A topic made without the limit a new one gets (the
    broker's default, 1,048,588, by a release before or by Faust) takes the default 1,000,000;
    the fix suggested is what a new topic is made with."""
    limit = int(configs[MAX_MESSAGE_BYTES])
    needed = changelog_message_bytes(settings.changelog_batch_bytes)
    if limit < needed:
        topic = changelog_topic(settings)
        suggested = topic_config(settings.changelog_batch_bytes)[MAX_MESSAGE_BYTES]
        raise ChangelogLimitTooLow(
            f"the state changelog {topic!r} takes messages of at most {limit} bytes "
            f"(max.message.bytes), under the {needed} that RUMOURMILL_CHANGELOG_BATCH_BYTES="
            f"{settings.changelog_batch_bytes} needs: raise it with `kafka-configs.sh "
            f"--bootstrap-server {settings.bootstrap} --alter --entity-type topics "
            f"--entity-name {topic} --add-config {MAX_MESSAGE_BYTES}={suggested}`, or lower the "
            "setting"
        )
