"""Failover: two workers, one SIGKILLed; seconds until the survivor has taken in a new event of
every world and answers reads for them, with and without a standby, at two history sizes of
the tavern story (8 worlds: characters meeting, telling, trading; some 28 state writes an event).

Without a standby the survivor replays the killed worker's whole changelog; with one
(`RUMOURMILL_STANDBYS=1`) it already holds the state and waits only for the session timeout,
once its copies have caught up (`rumourmill_standby_lag` 0; how long after the history's last
ack is printed): killed at the last ack, the copies of a busy worker's changelog are behind,
and the takeover lays in what they had not read yet.

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
from tests.failover import Failover, failover_seconds

FULL_HISTORIES = (2_000, 50_000)
QUICK_HISTORIES = (2_000, 10_000)


Variant = tuple[int, bool]
"""Standby copies (0 or 1), and whether the kill waits for them to catch up."""
VARIANTS: dict[Variant, str] = {
    (1, True): "with a standby caught up",
    (1, False): "with a standby, killed at the last ack",
    (0, False): "without",
}


def run(options: Options, bootstrap: str) -> None:
    histories = QUICK_HISTORIES if options.quick else FULL_HISTORIES
    repeats = 1 if options.quick else max(1, options.repeats // 2)
    rows = []
    for history in histories:
        figures = []
        for variant, label in VARIANTS.items():
            attempts = [timed_failover(bootstrap, history, *variant) for _ in range(repeats)]
            runs = [failover for failover in attempts if failover is not None]
            figure = f"{median([run.seconds for run in runs]):5.1f} s" if runs else "timed out"
            waits = [run.standby_waited for run in runs if run.standby_waited is not None]
            if waits:
                figure += f" (its copies read the changelog's end {median(waits):.1f} s after"
                figure += " the last ack)"
            if 0 < len(runs) < repeats:
                figure += f" ({repeats - len(runs)} of {repeats} timed out)"
            figures.append(f"{label} {figure}")
        rows.append(f"{history:>7,} events of history: " + "; ".join(figures))
    print(
        f"\n== failover after SIGKILL (session timeout {SESSION_TIMEOUT_SECONDS:.0f} s); "
        f"medians of {repeats}"
    )
    print("\n".join(f"  {row}" for row in rows))


def timed_failover(bootstrap: str, history: int, standbys: int, caught_up: bool) -> Failover | None:
    """One failover; None when it timed out, after printing why (the error carries both
    workers' log tails), so that the benchmarks after this one still run."""
    with tempfile.TemporaryDirectory(prefix="rumourmill-bench-") as temp:
        try:
            return failover_seconds(
                bootstrap,
                Path(temp),
                history,
                standbys,
                timeout=600,
                history_of=tavern_history,
                caught_up=caught_up,
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
