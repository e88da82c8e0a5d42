"""Creating rumourmill's topics with their partition counts before anything uses them, and
refusing topics that exist with another count than the settings give them: the worker's state
changelog too, which Faust creates."""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Mapping

from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.errors import TopicAlreadyExistsError

from streams.kafka_clients import kafka_options
from streams.settings import Settings

STATE_TABLE = "state"
"""The worker's one table (`streams.app`), whose changelog holds all its state."""


def changelog_topic(settings: Settings) -> str:
    """The state table's changelog topic, as Faust names it: per app id, not topic prefix."""
    return f"{settings.app_id}-{STATE_TABLE}-changelog"


class PartitionsDisagree(Exception):
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
            "(RUMOURMILL_PARTITIONS); every worker and command of a deployment needs the count "
            "its topics have"
        )


async def partition_counts(admin: AIOKafkaAdminClient, topics: Iterable[str]) -> dict[str, int]:
    """How many partitions each of `topics` has, as the broker describes them."""
    described = await admin.describe_topics(list(topics))
    return {item["topic"]: len(item["partitions"]) for item in described}


async def ensure_topics(settings: Settings, *, changelog: bool = False) -> None:
    """Create the events, acks, dead-letter, changes (unless the feed is off) and (compacted)
    judgements and policies topics if missing; raise `PartitionsDisagree`, creating nothing,
    when those of them that exist have another partition count than the settings'.

    `changelog` (a worker's): the state changelog topic too, if it exists (Faust creates it
    with the settings' count otherwise). One of another count, left by a deployment of the app
    id with another `RUMOURMILL_PARTITIONS`, holds in each partition the state of the worlds
    that count put there: a worker would restore it as the state of other worlds'."""
    admin = AIOKafkaAdminClient(**kafka_options(settings))
    await admin.start()
    try:
        existing = set(await admin.list_topics())
        wanted = [
            NewTopic(name, settings.partitions, settings.replication)
            for name in (
                settings.topics.events,
                settings.topics.acks,
                settings.topics.deadletter,
                settings.topics.changes,
            )
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
        if changelog and changelog_topic(settings) in existing:
            partitioned.append(changelog_topic(settings))
        if partitioned:
            check_partitions(await partition_counts(admin, partitioned), settings)
        wanted.append(
            NewTopic(
                settings.topics.policies,
                1,
                settings.replication,
                topic_configs={"cleanup.policy": "compact"},
            )
        )
        missing = [topic for topic in wanted if topic.name not in existing]
        if missing:
            with contextlib.suppress(TopicAlreadyExistsError):  # another worker won the race
                await admin.create_topics(missing)
    finally:
        await admin.close()
