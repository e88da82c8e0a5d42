"""Shared fixtures: one real Apache Kafka broker per test session (or RUMOURMILL_TEST_BROKER)."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from streams.brokers import apache_kafka


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """`make unit` starts no broker: a test that asks for one must be marked integration."""
    unmarked = [
        item.nodeid
        for item in items
        if "kafka_bootstrap" in getattr(item, "fixturenames", ())
        and item.get_closest_marker("integration") is None
    ]
    if unmarked:
        raise pytest.UsageError(
            "these tests use a broker but are not marked integration: " + ", ".join(unmarked)
        )


@pytest.fixture(scope="session")
def kafka_bootstrap() -> Iterator[str]:
    """A real Kafka broker for the whole session: started here, or the one you point us at."""
    given = os.environ.get("RUMOURMILL_TEST_BROKER")
    if given:
        yield given
        return
    with apache_kafka() as broker:
        yield broker.bootstrap
