"""`rumourmill rebuild`'s progress bar: its rate and time left are the fold's so far."""

from __future__ import annotations

import io

from rich.console import Console
from rich.progress import Progress

from streams.rebuild import EventRate, TimeLeft


def test_the_rate_is_the_events_folded_since_the_fold_began_however_they_come() -> None:
    """Found by a reviewer: the rate was rich's speed between its last samples, and the fold
    advances the bar once per partition per fetch, thousands of events microseconds after the
    other partition's: a fold of 750 events/s was shown at 7,975,330."""
    clock = [100.0]
    bar = Progress(get_time=lambda: clock[0], console=Console(file=io.StringIO()))
    task = bar.add_task("rebuild", total=10_000)
    clock[0] = 102.0
    bar.advance(task, 2_000)  # one partition's fetch
    clock[0] += 1e-6
    bar.advance(task, 2_000)  # the other's, at once
    [folding] = bar.tasks
    assert EventRate().render(folding).plain == "2,000 events/s"
    assert TimeLeft().render(folding).plain == "0:00:03"  # 6,000 events left
    empty = bar.add_task("nothing yet", total=None)
    assert (
        EventRate().render(bar.tasks[empty]).plain,
        TimeLeft().render(bar.tasks[empty]).plain,
    ) == (
        "",
        "-:--:--",
    )
