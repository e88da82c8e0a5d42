"""Failover: two workers, one SIGKILLed; seconds until the survivor has taken in a new event of
every world and answers reads for them, with and without a standby, at two history sizes of
the tavern story (8 worlds: characters meeting, telling, trading; some 28 state writes an event).

Without a standby the survivor replays the killed worker's whole changelog; with one
(`RUMOURMILL_STANDBYS=1`) it already holds the state and waits only for the session timeout.

    python -m benchmarks.failover [--quick] [--repeats N]
"""

from __future__ import annotations

import sys
import tempfile
import traceback
from pathlib import Path
from typing import Any

from benchmarks.story import tavern_story
from benchmarks.support import Options, median, run_main
from streams.app import SESSION_TIMEOUT_SECONDS
from tests.failover import failover_seconds

FULL_HISTORIES = (2_000, 50_000)
QUICK_HISTORIES = (2_000, 10_000)


def run(options: Options, bootstrap: str) -> None:
    histories = QUICK_HISTORIES if options.quick else FULL_HISTORIES
    repeats = 1 if options.quick else max(1, options.repeats // 2)
    rows = []
    for history in histories:
        figures = {}
        for standbys in (0, 1):
            attempts = [timed_failover(bootstrap, history, standbys) for _ in range(repeats)]
            runs = [seconds for seconds in attempts if seconds is not None]
            figures[standbys] = f"{median(runs):5.1f} s" if runs else "timed out"
            if 0 < len(runs) < repeats:
                figures[standbys] += f" ({repeats - len(runs)} of {repeats} timed out)"
        rows.append(
            f"{history:>7,} events of history: {figures[1]} with a standby, {figures[0]} without"
        )
    print(
        f"\n== failover after SIGKILL (session timeout {SESSION_TIMEOUT_SECONDS:.0f} s); "
        f"medians of {repeats}"
    )
    print("\n".join(f"  {row}" for row in rows))


def timed_failover(bootstrap: str, history: int, standbys: int) -> float | None:
    """One failover's seconds; None when it timed out, after printing why (the error carries
    both workers' log tails), so that the benchmarks after this one still run."""
    with tempfile.TemporaryDirectory(prefix="rumourmill-bench-") as temp:
        try:
            return failover_seconds(
                bootstrap, Path(temp), history, standbys, timeout=600, history_of=tavern_history
            )
        except TimeoutError as error:
            print(f"  failover at {history:,} events, {standbys} standby(s), timed out:")
            traceback.print_exception(error, file=sys.stdout)
            return None


def tavern_history(worlds: list[str], rounds: int) -> list[dict[str, Any]]:
    """`rounds` events of the tavern story in each world, seq 1 to `rounds`."""
    return tavern_story(rounds * len(worlds), seed=13, worlds=worlds)


if __name__ == "__main__":
    run_main(__doc__ or "", on_kafka=run)
