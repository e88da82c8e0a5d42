"""Every runtime read of the production core equals the reference oracle's, on random worlds.

`RUMOURMILL_SOAK=1` (`make soak`) runs far more histories, and larger ones.
"""

from __future__ import annotations

import os

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from projections.policy import resolve
from projections.runtime_read import runtime_read
from tests.properties.worlds import History, Run, draw_history
from tests.streams.noisy_story import CHARACTERS, PLAYER, noisy, story

SOAK = os.environ.get("RUMOURMILL_SOAK") == "1"
HISTORIES = 20_000 if SOAK else 2_000
MAX_EVENTS = 40 if SOAK else 14
SPREADING = 1 / 3
"""The share of histories with rumours spreading (`memory.spreading.enabled`)."""

FIGURES = {
    "histories": 0,
    "spreading": 0,
    "rumours": 0,
    "reads": 0,
    "messages": 0,
    "machine steps": 0,
    "memories": 0,
}


@pytest.mark.timeout(4 * 3600 if SOAK else 600)
@settings(
    max_examples=HISTORIES,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(st.data())
def test_every_read_equals_the_oracle(data: st.DataObject) -> None:
    history = draw_history(data, max_events=MAX_EVENTS, spreading=SPREADING)
    run = Run(history)
    cut = data.draw(st.integers(0, len(history.delivery)), label="cut")
    run.deliver(upto=cut)
    run.compare_reads("midway")
    run.deliver(start=cut)
    run.compare_reads("final")
    FIGURES["histories"] += 1
    assert run.oracle is not None
    applied = [item for world in run.oracle.worlds.values() for item in world.applied]
    FIGURES["memories"] += sum(len(item.memories) for item in applied)
    if history.policy.memory.spreading.enabled:
        FIGURES["spreading"] += 1
        FIGURES["rumours"] += sum(item.rumours for item in applied)
    FIGURES["reads"] += run.reads
    FIGURES["messages"] += len(history.delivery)
    assert not run.problems, "\n".join([*run.problems[:12], history.describe()])


class DeliveryMachine(RuleBasedStateMachine):
    """One world published step by step; messages delivered, redelivered and held back."""

    def __init__(self) -> None:
        super().__init__()
        self.run: Run | None = None
        self.next = 0

    @rule(data=st.data())
    @precondition(lambda self: self.run is None)
    def draw_world(self, data: st.DataObject) -> None:
        self.run = Run(draw_history(data, max_events=10, spreading=SPREADING))

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
        FIGURES["machine steps"] += 1
        self.run.compare_reads(f"after {self.next} messages")
        assert not self.run.problems, "\n".join(
            [*self.run.problems[:12], self.run.history.describe()]
        )


TestDeliveryMachine = pytest.mark.timeout(4 * 3600 if SOAK else 600)(DeliveryMachine.TestCase)
TestDeliveryMachine.settings = settings(
    max_examples=400 if SOAK else 60,
    stateful_step_count=20,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
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
    read = runtime_read(run.state, "default", f"tavern-{seed}-0", "reload", "npc-mara").model_dump(
        mode="json"
    )
    assert len(read["recollections"]) == 20  # type: ignore[arg-type]
    FIGURES["histories"] += 1
    FIGURES["reads"] += run.reads


def test_zz_report(capsys: pytest.CaptureFixture[str]) -> None:
    with capsys.disabled():
        print(
            f"\n[oracle] histories compared: {FIGURES['histories']} "
            f"(spreading on: {FIGURES['spreading']}, rumours spread: {FIGURES['rumours']}), "
            f"reads compared: "
            f"{FIGURES['reads']}, memories formed: {FIGURES['memories']}, "
            f"messages delivered: {FIGURES['messages']}, "
            f"delivery-machine checks: {FIGURES['machine steps']}"
        )
