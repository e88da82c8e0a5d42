"""Shared fixtures: one real Apache Kafka broker per test session (or RUMOURMILL_TEST_BROKER)."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
from hypothesis import settings

from streams.dev import apache_kafka
from streams.settings import ENV_PREFIX, Settings
from tests.model_server import ScriptedModel, scripted_model

settings.register_profile("shared-machine", deadline=None)
settings.load_profile("shared-machine")
"""No property test fails for one slow example: on a loaded machine a stall of the process
(a scheduler pause, a garbage collection) took an example past Hypothesis's 200 ms default,
where its examples take some milliseconds (a review paused the process 0.3 s and saw it)."""


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


@pytest.fixture
def clean_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """No `RUMOURMILL_*` variable of the machine running the tests leaks in (modules whose
    settings must be the defaults use it)."""
    for name in list(os.environ):
        if name.upper().startswith(ENV_PREFIX):
            monkeypatch.delenv(name)


@pytest.fixture(scope="session")
def kafka_bootstrap() -> Iterator[str]:
    """A real Kafka broker for the whole session: started here, or the one you point us at."""
    settings = Settings.from_env()
    if settings.test_broker:
        yield ",".join(settings.test_broker)
        return
    with apache_kafka(settings) as broker:
        yield broker.bootstrap


@pytest.fixture
def model_server() -> Iterator[ScriptedModel]:
    """A scripted chat-completions model on 127.0.0.1 (`tests.model_server`), answering at once;
    set its `behaviour` to make it fail."""
    with scripted_model() as model:
        yield model
