"""Where an event belongs: the partition Kafka's default partitioner gives its key, worked out
by the worker for every message it takes in (`streams.app.home_partition`)."""

from __future__ import annotations

from aiokafka.partitioner import DefaultPartitioner

from streams.app import home_partition
from streams.partitioning import world_partition


def test_a_worlds_home_is_where_kafkas_default_partitioner_puts_its_key() -> None:
    partitions = list(range(12))
    for world in ("save-1", "tavern-0", "w" * 128, "é" * 128):
        key = world.encode()
        assert home_partition(key, 12) == DefaultPartitioner()(key, partitions, partitions)
    assert home_partition(None, 12) is None


def test_a_key_longer_than_any_world_id_is_neither_hashed_nor_kept() -> None:
    """A producer keying each message by something large (its own JSON): every key was hashed
    in pure Python on the event loop (0.1 s for 900 KB) and the last 4,096 kept whole (up to
    4 GB), for messages refused for their key anyway."""
    world_partition.cache_clear()
    for number in range(300):
        assert home_partition(b"%d" % number + b"k" * 100_000, 12) is None
    assert world_partition.cache_info().currsize == 0
