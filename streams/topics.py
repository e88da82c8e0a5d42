"""Creating rumourmill's topics with their partition counts before anything uses them."""

from __future__ import annotations

from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.errors import TopicAlreadyExistsError

from streams.settings import (
    ACKS_TOPIC,
    DEADLETTER_TOPIC,
    EVENTS_TOPIC,
    POLICIES_TOPIC,
    Settings,
)


async def ensure_topics(settings: Settings) -> None:
    """Create the events, acks, dead-letter and (compacted) policies topics if missing."""
    admin = AIOKafkaAdminClient(bootstrap_servers=settings.broker)
    await admin.start()
    try:
        existing = set(await admin.list_topics())
        wanted = [
            NewTopic(name, settings.partitions, settings.replication)
            for name in (EVENTS_TOPIC, ACKS_TOPIC, DEADLETTER_TOPIC)
        ]
        wanted.append(
            NewTopic(POLICIES_TOPIC, 1, settings.replication,
                     topic_configs={"cleanup.policy": "compact"})
        )
        missing = [topic for topic in wanted if topic.name not in existing]
        if missing:
            try:
                await admin.create_topics(missing)
            except TopicAlreadyExistsError:
                pass
    finally:
        await admin.close()
