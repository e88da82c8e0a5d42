"""Failover: two workers, one SIGKILLed; seconds until the survivor has taken in a new event of
every world and answers reads for them, with and without a standby, at two history sizes.

Without a standby the survivor replays the killed worker's whole changelog; with one
(`RUMOURMILL_STANDBYS=1`) it already holds the state and waits only for the session timeout.

    python -m benchmarks.failover [--quick] [--repeats N]
"""

from __future__ import annotations

import tempfile
from pathlib import Path

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
        seconds = {}
        for standbys in (0, 1):
            runs = []
            for _ in range(repeats):
                with tempfile.TemporaryDirectory(prefix="rumourmill-bench-") as temp:
                    runs.append(
                        failover_seconds(bootstrap, Path(temp), history, standbys, timeout=600)
                    )
            seconds[standbys] = median(runs)
        rows.append(
            f"{history:>7,} events of history: {seconds[1]:5.1f} s with a standby, "
            f"{seconds[0]:5.1f} s without"
        )
    print(
        f"\n== failover after SIGKILL (session timeout {SESSION_TIMEOUT_SECONDS:.0f} s); "
        f"medians of {repeats}"
    )
    print("\n".join(f"  {row}" for row in rows))


if __name__ == "__main__":
    run_main(__doc__ or "", on_kafka=run)
