"""Shared fixtures: one real Apache Kafka broker per test session (or RUMOURMILL_TEST_BROKER)."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from streams.brokers import apache_kafka


@pytest.fixture(scope="session")
def kafka_bootstrap() -> Iterator[str]:
    """A real Kafka broker for the whole session: started here, or the one you point us at."""
    given = os.environ.get("RUMOURMILL_TEST_BROKER")
    if given:
        yield given
        return
    with apache_kafka() as broker:
        yield broker.bootstrap
