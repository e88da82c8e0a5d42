"""Creating rumourmill's topics with their partition counts before anything uses them."""

from __future__ import annotations

import contextlib

from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.errors import TopicAlreadyExistsError

from streams.settings import Settings


async def ensure_topics(settings: Settings) -> None:
    """Create the events, acks, dead-letter, changes (unless the feed is off) and (compacted)
    judgements and policies topics if missing."""
    admin = AIOKafkaAdminClient(bootstrap_servers=settings.bootstrap)
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
