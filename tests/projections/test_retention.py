"""Retention by value (section 8): what a character still holds of a memory, days of story later."""

from __future__ import annotations

import itertools
import math

import pytest
from pydantic import ValidationError

from projections.retention import (
    NEVER_RECALLED,
    Recalled,
    as_held,
    half_life_days,
    importance_step,
    retention,
    variation,
    vivid_however_recalled,
)
from schemas import story_minutes
from schemas.memory import Memory, MemoryKind
from schemas.policy import Policy, merge_policy
from tests.seed import SEED_RECOLLECTION

POLICY = Policy()
MANY_IDS = [f"belief-{number}" for number in range(300)]
FIXED_VARIATIONS = [
    merge_policy(
        POLICY, {"memory": {"retention": {"variation_low": bound, "variation_high": bound}}}
    )
    for bound in (0.8, 1.2)
]
"""Policies pinning every memory's variation to an end of the default range."""


def remembered(
    belief_id: str = "belief-0",
    kind: MemoryKind = "event",
    importance: float = 0.2,
    day: int = 1,
    content: str = SEED_RECOLLECTION["content"],
) -> Memory:
    """A memory formed at 08:00 on `day` (importance 0.2 is step 1)."""
    game_time = f"day {day}, 08:00"
    return Memory.model_validate(
        SEED_RECOLLECTION
        | {
            "belief_id": belief_id,
            "kind": kind,
            "importance": importance,
            "content": content,
            "game_time": game_time,
            "story_minutes": story_minutes(game_time),
            "character_id": "npc-mara",
            "timeline_id": "main",
            "facts": [],
            "origin": "origin-0",
            "lineage": [],
        }
    )


def on_day(day: int) -> int:
    return story_minutes(f"day {day}, 08:00")


def states(memory: Memory, days: list[int], policy: Policy = POLICY) -> list[str]:
    return [retention(memory, on_day(day), NEVER_RECALLED, policy).state for day in days]


def every_variation() -> list[tuple[str, Policy]]:
    """Many ids under the default range, and one id at each end of the range."""
    return [(belief, POLICY) for belief in MANY_IDS] + [("belief-0", p) for p in FIXED_VARIATIONS]


def test_an_unimportant_event_is_vivid_on_day_5_faded_by_day_9_forgotten_by_day_22() -> None:
    for belief, policy in every_variation():
        memory = remembered(belief, importance=0.2, day=1)
        assert states(memory, [5, 9, 22], policy) == ["vivid", "faded", "forgotten"], belief


@pytest.mark.parametrize("kind", ["knowledge", "impression"])
def test_a_belief_lasts_four_times_longer(kind: MemoryKind) -> None:
    for belief, policy in every_variation():
        memory = remembered(belief, kind=kind, importance=0.2, day=1)
        assert states(memory, [9, 17, 33, 85], policy) == ["vivid", "vivid", "faded", "forgotten"]
        event = remembered(belief, kind="event", importance=0.2, day=1)
        assert half_life_days(memory, 0, policy) == pytest.approx(
            4 * half_life_days(event, 0, policy)
        )


def test_each_importance_step_doubles_the_half_life() -> None:
    halves = [half_life_days(remembered(importance=step / 5), 0, POLICY) for step in range(1, 6)]
    assert [later / earlier for earlier, later in itertools.pairwise(halves)] == (
        pytest.approx([2, 2, 2, 2])
    )
    assert halves[0] == pytest.approx(6 * variation("belief-0", POLICY))
    assert half_life_days(remembered(importance=0.0), 0, POLICY) == halves[0]


@pytest.mark.parametrize(
    ("importance", "step"),
    [
        (0.0, 1),
        (0.2, 1),
        (0.20000000009, 2),
        (0.6, 3),
        (0.6000000000000001, 4),
        (0.8, 4),
        (0.80000000005, 5),
        (1.0, 5),
    ],
)
def test_an_importance_is_stepped_as_written(importance: float, step: int) -> None:
    """`ceil(importance * 5)` in decimal: 0.6 is step 3 (its binary product is a hair over 3),
    and 0.80000000005, just over 0.8, is step 5, which never falls below faded (rounded to 9
    places first, it was step 4, and forgotten)."""
    assert importance_step(importance) == step


def test_importance_5_never_falls_below_faded() -> None:
    for importance in (0.81, 1.0):
        memory = remembered(importance=importance, day=1)
        held = retention(memory, on_day(100_000), NEVER_RECALLED, POLICY)
        assert (held.state, held.value) == ("faded", POLICY.memory.retention.forgotten_below)
    step_4 = remembered(importance=0.8, day=1)
    assert retention(step_4, on_day(100_000), NEVER_RECALLED, POLICY).state == "forgotten"


def test_reinforcement_restarts_the_clock_and_lengthens_the_half_life() -> None:
    memory = remembered(importance=0.2, day=1)
    assert retention(memory, on_day(9), NEVER_RECALLED, POLICY).state == "faded"
    recalled_day_8 = Recalled(1, on_day(8))
    assert retention(memory, on_day(9), recalled_day_8, POLICY).state == "vivid"

    unreinforced_after_6_days = retention(memory, on_day(7), NEVER_RECALLED, POLICY).value
    reinforced_after_6_days = retention(memory, on_day(14), recalled_day_8, POLICY).value
    assert reinforced_after_6_days == pytest.approx(unreinforced_after_6_days ** (1 / 1.5))

    twice = Recalled(2, on_day(8))
    assert half_life_days(memory, 2, POLICY) == pytest.approx(
        half_life_days(memory, 0, POLICY) * 1.5**2
    )
    assert retention(memory, on_day(14), twice, POLICY).value == pytest.approx(
        unreinforced_after_6_days ** (1 / 1.5**2)
    )


@pytest.mark.parametrize(
    ("factor", "recalls", "state"),
    [(1.5, 1751, "vivid"), (2.0, 1024, "vivid"), (0.5, 1100, "forgotten")],
    ids=["1.5-past-float-range", "2-past-float-range", "half-underflowing-to-0"],
)
def test_a_memory_recalled_past_what_a_float_holds_is_still_read(
    factor: float, recalls: int, state: str
) -> None:
    """Each recall multiplies the half-life: 1,751 recalls at 1.5 once raised OverflowError,
    and every recall and decision read of that character answered 500 for good."""
    policy = merge_policy(POLICY, {"memory": {"retention": {"reinforcement_factor": factor}}})
    memory = remembered(day=1)
    recalled = Recalled(recalls, on_day(2))
    assert retention(memory, on_day(2), recalled, policy).state == "vivid"  # no time passed
    assert retention(memory, on_day(400), recalled, policy).state == state


def no_names(memory: Memory) -> tuple[str, ...]:
    """No declared names: a retelling takes each name as any words."""
    return ()


def test_flaky_off_gives_exact_recall() -> None:
    exact = merge_policy(POLICY, {"memory": {"flaky": False}})
    memory = remembered(importance=0.0, day=1)
    held = retention(memory, on_day(10_000), NEVER_RECALLED, exact)
    assert (held.value, held.state) == (1.0, "vivid")
    assert as_held(memory, held, no_names) == memory


def test_the_variation_is_stable_and_not_the_same_for_all_records() -> None:
    drawn = [variation(belief, POLICY) for belief in MANY_IDS]
    assert drawn == [variation(belief, Policy()) for belief in MANY_IDS]
    assert all(0.8 <= value <= 1.2 for value in drawn)
    assert len(set(drawn)) == len(MANY_IDS)
    assert min(drawn) < 0.85 and max(drawn) > 1.15
    day_9 = {
        retention(remembered(belief), on_day(9), NEVER_RECALLED, POLICY).value
        for belief in MANY_IDS[:2]
    }
    assert len(day_9) == 2


def test_a_faded_memory_keeps_the_statement_and_loses_the_detail() -> None:
    memory = remembered(importance=0.2, day=1)
    held = retention(memory, on_day(9), NEVER_RECALLED, POLICY)
    faded = as_held(memory, held, no_names)
    assert faded is not None
    assert faded.content == "Ilse enemy defeated at The Crooked Lantern"
    assert faded.confidence == round(memory.confidence * held.value, 2)
    assert as_held(memory, retention(memory, on_day(5), NEVER_RECALLED, POLICY), no_names) == memory
    assert as_held(memory, retention(memory, on_day(22), NEVER_RECALLED, POLICY), no_names) is None


def test_without_story_time_nothing_fades() -> None:
    timeless = remembered().model_copy(update={"game_time": None, "story_minutes": None})
    assert retention(timeless, on_day(1000), NEVER_RECALLED, POLICY).state == "vivid"
    assert retention(remembered(), None, NEVER_RECALLED, POLICY).state == "vivid"


@pytest.mark.parametrize(
    "retention_overlay",
    [
        {"variation_low": 1.3},
        {"forgotten_below": 0.6},
        {"half_life_days": 0},
        {"never_forgotten_step": 6},
    ],
)
def test_a_retention_setting_out_of_order_or_range_is_refused(
    retention_overlay: dict[str, float],
) -> None:
    with pytest.raises(ValidationError) as refused:
        merge_policy(POLICY, {"memory": {"retention": retention_overlay}})
    assert all(error["loc"][:2] == ("memory", "retention") for error in refused.value.errors())


def test_a_memory_vivid_on_its_own_clock_is_vivid_however_recalled() -> None:
    """Tellers skip looking up recalls of news vivid on its own clock: with recalls that hold
    a memory longer (`reinforcement_factor` 1 or more) every recall leaves it vivid; with a
    factor under 1 a recall can make it fade sooner, so it must be looked up."""
    memory = remembered()
    shortening = merge_policy(POLICY, {"memory": {"retention": {"reinforcement_factor": 0.1}}})
    assert vivid_however_recalled(memory, on_day(3), POLICY)
    assert retention(memory, on_day(3), Recalled(5, on_day(2)), POLICY).state == "vivid"
    assert not vivid_however_recalled(memory, on_day(3), shortening)
    assert retention(memory, on_day(3), Recalled(5, on_day(1)), shortening).state != "vivid"
    assert not vivid_however_recalled(memory, on_day(12), POLICY)  # faded on its own clock
    untimed = remembered().model_copy(update={"story_minutes": None})
    assert vivid_however_recalled(untimed, on_day(90), shortening)  # no clock: nothing fades


@pytest.mark.parametrize(
    "rules",
    [
        {},
        {"step_factor": 0.5, "belief_factor": 0.25, "half_life_days": 0.5},
        {"vivid_from": 0.95, "variation_low": 0.1, "variation_high": 3.0},
        {"vivid_from": 1.0},
        {"vivid_from": 0.0, "forgotten_below": 0.0},
    ],
)
def test_a_teller_finds_vivid_exactly_what_retention_finds_vivid(rules: dict[str, float]) -> None:
    """Tellers take news younger than the shortest vivid span any memory can have as vivid
    without working its retention out: never a memory `retention` finds faded. Checked minute
    by minute around where each memory stops being vivid, the variation pinned at its lowest
    too (the shortest span is that of some memory then)."""
    low = rules.get("variation_low", 0.8)
    pinned = {**rules, "variation_low": low, "variation_high": low}
    for retention_rules in (rules, pinned):
        policy = merge_policy(POLICY, {"memory": {"retention": retention_rules}})
        vivid_from = policy.memory.retention.vivid_from
        for belief, kind, importance in itertools.product(
            MANY_IDS[:20], ["event", "knowledge"], [0.0, 0.4, 0.6, 1.0]
        ):
            memory = remembered(belief, kind, importance)
            span = half_life_days(memory, 0, policy) * 24 * 60
            ends = span * math.log2(1 / vivid_from) if vivid_from else 0.0
            for minutes in range(max(0, int(ends) - 20), int(ends) + 20):
                now = on_day(1) + minutes
                vivid = retention(memory, now, NEVER_RECALLED, policy).state == "vivid"
                assert vivid_however_recalled(memory, now, policy) == vivid, (belief, minutes)


def test_a_memory_at_retention_exactly_half_is_vivid() -> None:
    """SPEC 8: vivid at retention >= 0.5 (a step-1 memory, its variation 1, six days on)."""
    fixed = merge_policy(
        POLICY, {"memory": {"retention": {"variation_low": 1.0, "variation_high": 1.0}}}
    )
    held = retention(remembered(importance=0.2, day=1), on_day(7), NEVER_RECALLED, fixed)
    assert (held.value, held.state) == (0.5, "vivid")
