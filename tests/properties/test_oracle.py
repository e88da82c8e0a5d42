"""Every runtime read of the production core equals the reference oracle's, on random worlds.

Each test also checks what its worlds reached (the caps of a meeting, of a group exchange and
of the read, group exchanges, long ancestries, distortion), so a generator that stops reaching
a rule fails instead of silently proving less. `RUMOURMILL_SOAK=1` (`make soak`) runs far more
histories, and larger ones.
"""

from __future__ import annotations

import os
import random
from collections import Counter
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from projections.minds import runtime_read
from projections.policy import resolve
from tests.properties.worlds import (
    CROWD,
    DrawnChoices,
    History,
    Run,
    SeededChoices,
    Shape,
    draw_history,
)
from tests.streams.noisy_story import CHARACTERS, PLAYER, noisy, story

SOAK = os.environ.get("RUMOURMILL_SOAK") == "1"
HISTORIES = 20_000 if SOAK else 2_000
CROWDS = 400 if SOAK else 40
SMALL_WORLDS = (
    Shape(max_events=40, max_branches=5, spreading=1 / 3) if SOAK else Shape(spreading=1 / 3)
)
SETTINGS: dict[str, Any] = {
    "deadline": None,
    "database": None,
    "suppress_health_check": [HealthCheck.too_slow, HealthCheck.data_too_large],
}


def compare(history: History, cut: int, figures: Counter[str], reached: Counter[str]) -> Run:
    """Deliver `history` up to `cut`, compare every read, deliver the rest, compare again."""
    run = Run(history)
    run.deliver(upto=cut)
    run.compare_reads("midway")
    run.deliver(start=cut)
    run.compare_reads("final")
    assert run.oracle is not None
    applied = [item for world in run.oracle.worlds.values() for item in world.applied]
    figures["histories"] += 1
    figures["memories"] += sum(len(item.memories) for item in applied)
    figures["rumours"] += sum(item.rumours for item in applied)
    figures["reads"] += run.reads
    figures["messages"] += len(history.delivery)
    reached.update(run.oracle.reached)
    assert not run.problems, "\n".join([*run.problems[:12], history.describe()])
    return run


def report(capsys: pytest.CaptureFixture[str], name: str, figures: Counter[str]) -> None:
    with capsys.disabled():
        print(f"\n[{name}] " + ", ".join(f"{what}: {count}" for what, count in figures.items()))


@pytest.mark.timeout(4 * 3600 if SOAK else 600)
def test_every_read_equals_the_oracle(capsys: pytest.CaptureFixture[str]) -> None:
    figures: Counter[str] = Counter()
    reached: Counter[str] = Counter()

    @settings(max_examples=HISTORIES, **SETTINGS)
    @given(st.data())
    def one_history(data: st.DataObject) -> None:
        history = draw_history(DrawnChoices(data), SMALL_WORLDS)
        cut = data.draw(st.integers(0, len(history.delivery)), label="cut")
        compare(history, cut, figures, reached)

    one_history()
    report(capsys, "oracle, small worlds", figures + reached)
    wanted = ["group exchange", "distortion", "ancestry of 4 timelines"]
    assert not [what for what in wanted if reached[what] == 0], reached


@pytest.mark.timeout(4 * 3600 if SOAK else 600)
def test_crowded_worlds_reach_every_cap_and_equal_the_oracle(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Long histories around one character: the read's 50/20/50 caps, a meeting's 3, a group's
    limit and ancestries of four timelines are all reached, and still every read agrees."""
    figures: Counter[str] = Counter()
    reached: Counter[str] = Counter()

    @settings(max_examples=CROWDS, **SETTINGS)
    @given(st.integers(0, 2**32 - 1))
    def one_crowd(seed: int) -> None:
        rng = random.Random(seed)
        history = draw_history(SeededChoices(rng), CROWD)
        compare(history, rng.randint(0, len(history.delivery)), figures, reached)

    one_crowd()
    report(capsys, "oracle, crowded worlds", figures + reached)
    wanted = [
        "beliefs cap",
        "recollections cap",
        "relations cap",
        "meeting cap",
        "group exchange",
        "group limit",
        "ancestry of 4 timelines",
        "distortion",
    ]
    assert not [what for what in wanted if reached[what] == 0], reached


class DeliveryMachine(RuleBasedStateMachine):
    """One world published step by step; messages delivered, redelivered and held back."""

    def __init__(self) -> None:
        super().__init__()
        self.run: Run | None = None
        self.next = 0

    @rule(data=st.data())
    @precondition(lambda self: self.run is None)
    def draw_world(self, data: st.DataObject) -> None:
        self.run = Run(draw_history(DrawnChoices(data), Shape(max_events=10, spreading=1 / 3)))

    @rule(count=st.integers(1, 3))
    @precondition(lambda self: self.run is not None)
    def deliver_some(self, count: int) -> None:
        assert self.run is not None
        upto = min(len(self.run.history.delivery), self.next + count)
        self.run.deliver(upto=upto, start=self.next)
        self.next = upto

    @rule(back=st.integers(1, 5))
    @precondition(lambda self: self.run is not None and self.next > 0)
    def redeliver_an_earlier_message(self, back: int) -> None:
        """The broker hands an already-processed offset over again (after a crash)."""
        assert self.run is not None
        start = max(0, self.next - back)
        self.run.deliver(upto=start + 1, start=start)

    @invariant()
    def reads_agree(self) -> None:
        if self.run is None:
            return
        self.run.compare_reads(f"after {self.next} messages")
        assert not self.run.problems, "\n".join(
            [*self.run.problems[:12], self.run.history.describe()]
        )


TestDeliveryMachine = pytest.mark.timeout(4 * 3600 if SOAK else 600)(DeliveryMachine.TestCase)
TestDeliveryMachine.settings = settings(
    max_examples=400 if SOAK else 60, stateful_step_count=20, **SETTINGS
)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_a_long_noisy_tavern_story_equals_the_oracle(seed: int) -> None:
    """Hundreds of events per character: the 20/50/50 caps and their ordering are reached."""
    lines = noisy(story(worlds=1, events_per_world=400, seed=seed), seed)
    history = History("default", f"tavern-{seed}-0", {}, resolve(None, None), [], lines)
    history.ids = [*CHARACTERS, PLAYER, "npc-nobody"]
    run = Run(history)
    run.deliver()
    run.compare_reads("final")
    assert not run.problems, "\n".join(run.problems[:12])
    read = runtime_read(run.state, "default", f"tavern-{seed}-0", "reload", "npc-mara")
    assert len(read["recollections"]) == 20  # type: ignore[arg-type]
