"""`rumourmill rebuild`'s verdicts once every live digest is in: a world whose digests differ
is said to differ unless the live workers hold other events of it than the rebuild folded
(published since it began, or not processed live yet): then it is not compared, and says why.
What the events topic names is read on Apache Kafka (`tests/streams/test_rebuild.py`)."""

from __future__ import annotations

import click
import pytest

from streams.cli import NOT_ALL_COMPARED, Outside, _print_comparison
from streams.rebuild import Named, NotCompared

SAVE, OTHER = ("default", "save-1"), ("default", "save-2")
REBUILT = {SAVE: "a" * 64, OTHER: "b" * 64}
NOTHING_OUTSIDE = Outside(Named(), Named())


def verdicts(
    live: dict[tuple[str, str], str | Exception], outside: Outside = NOTHING_OUTSIDE
) -> tuple[int, str]:
    """The exit code (0: none) and the reason the comparison ended with."""
    try:
        _print_comparison(REBUILT, live, outside)
    except click.ClickException as failure:
        return failure.exit_code, failure.message
    return 0, ""


def test_a_world_the_live_workers_hold_other_events_of_is_not_compared_but_says_why(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Found by a reviewer: a world a game went on playing while the rebuild ran was reported
    as differing (exit 1), though the rebuilt state was the replay of the events it folded."""
    since = Named(worlds={SAVE: 3})
    code, why = verdicts({SAVE: "c" * 64, OTHER: "b" * 64}, Outside(since, Named()))
    printed = capsys.readouterr().out
    assert code == NOT_ALL_COMPARED
    assert why.startswith("1 of 2 world(s) not compared: the live workers hold other events")
    assert (
        f"{'a' * 64} not compared (3 event(s) of it published since the rebuild began: " in printed
    )
    assert f"world default/save-2: {'b' * 64} same as live" in printed
    waiting = Outside(Named(), Named(worlds={SAVE: 2}))
    assert verdicts({SAVE: "c" * 64, OTHER: "b" * 64}, waiting)[0] == NOT_ALL_COMPARED
    assert "(2 event(s) of it not processed live yet: live " in capsys.readouterr().out
    deleted = Outside(Named(tenants={"default"}), Named())  # the tenant deleted since
    assert verdicts({SAVE: "c" * 64, OTHER: "d" * 64}, deleted)[0] == NOT_ALL_COMPARED


def test_a_world_no_other_event_explains_differs(capsys: pytest.CaptureFixture[str]) -> None:
    """A reviewer found a first mend hiding these as not compared: a policy changed since, a
    bug, or a live worker that lost the world's state (or is another cluster's) differ."""
    others = Outside(Named(worlds={OTHER: 5}, tenants={"acme"}), Named())
    code, why = verdicts({SAVE: "c" * 64, OTHER: "b" * 64}, others)
    assert (code, why) == (1, "1 of 2 world(s) differ from the live worker")
    assert f"{'a' * 64} DIFFERS from live {'c' * 64}" in capsys.readouterr().out
    refused = NotCompared("403: the key reads tenant 'acme' only")
    assert verdicts({SAVE: "a" * 64, OTHER: refused})[0] == NOT_ALL_COMPARED
    assert verdicts({SAVE: "a" * 64, OTHER: "b" * 64}) == (0, "")
