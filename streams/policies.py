"""The policies topic as every worker sees it: all documents, kept current, in memory.

Like a Faust global table (every worker holds every entry), but read with a plain consumer:
the topic is small, compacted and has one partition. The agent waits until the reader has
caught up with the topic's end, so policies set before a worker starts are in force for the
first event it applies.
"""

from __future__ import annotations

import asyncio

from aiokafka import AIOKafkaConsumer, TopicPartition


class PolicyFeed:
    """Policy documents by key (see `projections.policy.policy_key`)."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        self.bootstrap = bootstrap
        self.topic = topic
        self.documents: dict[bytes, bytes] = {}
        self.caught_up = asyncio.Event()

    def get(self, key: bytes, /) -> bytes | None:
        return self.documents.get(key)

    async def follow(self) -> None:
        """Read the topic from its start, forever; a tombstone removes a document."""
        consumer = AIOKafkaConsumer(
            bootstrap_servers=self.bootstrap, group_id=None, enable_auto_commit=False
        )
        await consumer.start()
        try:
            partitions = [
                TopicPartition(self.topic, number)
                for number in sorted(consumer.partitions_for_topic(self.topic) or {0})
            ]
            consumer.assign(partitions)
            await consumer.seek_to_beginning(*partitions)
            ends = await consumer.end_offsets(partitions)
            while True:
                batch = await consumer.getmany(timeout_ms=1000)
                for records in batch.values():
                    for record in records:
                        if record.key is None:
                            continue
                        if record.value is None:
                            self.documents.pop(record.key, None)
                        else:
                            self.documents[record.key] = record.value
                if not self.caught_up.is_set():
                    positions = {tp: await consumer.position(tp) for tp in partitions}
                    if all(positions[tp] >= ends[tp] for tp in partitions):
                        self.caught_up.set()
        finally:
            await consumer.stop()
