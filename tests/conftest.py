"""Shared fixtures: one real Apache Kafka broker per test session (or RUMOURMILL_TEST_BROKER)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from streams.dev import apache_kafka
from streams.settings import Settings


@pytest.fixture(scope="session")
def kafka_bootstrap() -> Iterator[str]:
    """A real Kafka broker for the whole session: started here, or the one you point us at."""
    settings = Settings.from_env()
    if settings.test_broker:
        yield ",".join(settings.test_broker)
        return
    with apache_kafka(settings) as broker:
        yield broker.bootstrap
