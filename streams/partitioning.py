"""Which partition a key is on: as Kafka's default partitioner puts it, so the worker finds a
world's events, acks and change records where producers put them."""

from __future__ import annotations

from functools import lru_cache

from aiokafka.partitioner import murmur2


def partition_of(key: bytes, partitions: int) -> int:
    """The partition Kafka's default partitioner gives `key` (murmur2, as producers use)."""
    hashed: int = murmur2(key)
    return (hashed & 0x7FFFFFFF) % partitions


world_partition = lru_cache(maxsize=1 << 12)(partition_of)
"""`partition_of` for the worlds of this worker, worked out once each (for every event taken
in, every ack sent)."""
