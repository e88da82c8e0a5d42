"""Standby replicas: a SIGKILLed worker's worlds move to the survivor within the session
timeout and a few seconds, whatever the history (it kept their state warm)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from streams.app import SESSION_TIMEOUT_SECONDS
from tests.failover import SURVIVOR_LOG, failover_seconds

pytestmark = pytest.mark.integration

FAILOVER_LIMIT_SECONDS = SESSION_TIMEOUT_SECONDS + 6.0
RECOVERED = re.compile(r"state recovered: (\d+) record\(s\) laid")


@pytest.mark.parametrize(("history", "caught_up"), [(200, False), (2_000, True)])
def test_a_standby_takes_over_a_killed_workers_worlds_in_seconds(
    kafka_bootstrap: str, tmp_path: Path, history: int, caught_up: bool
) -> None:
    """The survivor's copies of the killed worker's partitions were kept up to date: taking
    them over lays (and its log tells) a few changelog records at most, not their history. The
    log told the records its standby copies had taken since its last recovery, as if the
    takeover had replayed them (all the killed worker's changelog, with a standby or without).
    Killed right after the history's last ack, or once the survivor's metrics say its copies
    have read the changelog to its end (`rumourmill_standby_lag`)."""
    seconds, _ = failover_seconds(
        kafka_bootstrap, tmp_path, history, standbys=1, caught_up=caught_up
    )
    assert seconds <= FAILOVER_LIMIT_SECONDS, f"failover took {seconds:.1f}s at {history} events"
    log = (tmp_path / SURVIVOR_LOG).read_text(errors="replace")
    taken_over = int(RECOVERED.findall(log)[-1])
    assert taken_over <= history // 10, f"the takeover laid {taken_over} changelog records"
