"""Standby replicas: a SIGKILLed worker's worlds move to the survivor within the session
timeout and a few seconds, whatever the history (it kept their state warm)."""

from __future__ import annotations

from pathlib import Path

import pytest

from streams.app import SESSION_TIMEOUT_SECONDS
from tests.failover import failover_seconds

pytestmark = pytest.mark.integration

FAILOVER_LIMIT_SECONDS = SESSION_TIMEOUT_SECONDS + 6.0


@pytest.mark.parametrize("history", [200, 2_000])
def test_a_standby_takes_over_a_killed_workers_worlds_in_seconds(
    kafka_bootstrap: str, tmp_path: Path, history: int
) -> None:
    seconds = failover_seconds(kafka_bootstrap, tmp_path, history, standbys=1)
    assert seconds <= FAILOVER_LIMIT_SECONDS, f"failover took {seconds:.1f}s at {history} events"
