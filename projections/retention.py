"""Retention: how much of a memory a character still holds, measured in story time (section 8).

    retention = 0.5 ^ (elapsed story days / half-life)

- The clock runs from the memory's story time, or from its latest reinforcement (a
  `loreweaver.memory.recalled` event naming it), up to the timeline's story "now".
- Half-life: `half_life_days` x `step_factor` ^ (importance step - 1), x `belief_factor` for
  beliefs (kinds `knowledge`, `impression`), x `reinforcement_factor` per reinforcement, x a
  variation in [`variation_low`, `variation_high`] drawn from the `belief_id`, so memories do not
  all fade in step and a replay fades them exactly alike.
- Vivid from `vivid_from`; faded below it, held as retold (the statement stays, the detail goes)
  with confidence x retention; forgotten below `forgotten_below`. From importance step
  `never_forgotten_step` on, a memory never falls below faded.
- With `memory.flaky` off nothing fades: retention is 1.

A memory or a timeline without story time has no clock, so it does not fade. Reads never
write: reinforcement comes only through the stream, and is handed in here as story times.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from decimal import ROUND_CEILING, Decimal
from functools import lru_cache
from typing import Literal

from projections.wording import retell
from schemas.memory import Memory, MemoryKind
from schemas.policy import Policy, RetentionPolicy

IMPORTANCE_STEPS = 5
"""Importance 0..1 is read on a scale of five steps (seed 000's "importance 5")."""

BELIEF_KINDS: frozenset[MemoryKind] = frozenset({"knowledge", "impression"})
MINUTES_PER_DAY = 24 * 60
VARIATION_SALT = b"retention"

State = Literal["vivid", "faded", "forgotten"]


@dataclass(frozen=True, slots=True)
class Retention:
    """How much of a memory is held (0 to 1) and what that makes of it."""

    value: float
    state: State


EXACT = Retention(1.0, "vivid")


@dataclass(frozen=True, slots=True)
class Recalled:
    """The recalls of a memory a read sees that have a story time: how many, and the latest
    story minute among them (`projections.reinforcement`)."""

    times: int = 0
    latest: int | None = None


NEVER_RECALLED = Recalled()


@lru_cache(maxsize=1024)
def importance_step(importance: float) -> int:
    """The step 1..5 of an importance 0..1: `max(1, ceil(importance * 5))`, worked out in
    decimal on the importance as written (`0.6 * 5` is 3.0000000000000004 in binary, and would
    climb a step). Rounding the binary product to 9 places instead put 0.80000000005 on step 4,
    forgotten, where the spec keeps step 5 from falling below faded. Importances come from a
    policy's table or a model's answer: few distinct values."""
    steps = (Decimal(repr(importance)) * IMPORTANCE_STEPS).to_integral_value(ROUND_CEILING)
    return max(1, int(steps))


def variation(belief_id: str, policy: Policy) -> float:
    """The memory's own half-life factor in [low, high]: a stable hash of its id, never random."""
    digest = hashlib.blake2b(belief_id.encode(), digest_size=8, person=VARIATION_SALT).digest()
    share = int.from_bytes(digest, "big") / (2**64 - 1)
    rules = policy.memory.retention
    return rules.variation_low + (rules.variation_high - rules.variation_low) * share


def half_life_days(memory: Memory, reinforcements: int, policy: Policy) -> float:
    """How many story days the memory takes to fall to half, after `reinforcements` recalls."""
    rules = policy.memory.retention
    days = rules.half_life_days * rules.step_factor ** (importance_step(memory.importance) - 1)
    if memory.kind in BELIEF_KINDS:
        days *= rules.belief_factor
    try:
        reinforced = rules.reinforcement_factor**reinforcements
    except OverflowError:  # recalled past what a float holds (1,751 times at 1.5): for ever
        reinforced = math.inf
    return days * reinforced * variation(memory.belief_id, policy)


def retention(memory: Memory, now: int | None, recalled: Recalled, policy: Policy) -> Retention:
    """How much of `memory` its character holds at story minute `now`, `recalled` as a read
    at `now` sees it."""
    if not policy.memory.flaky or memory.story_minutes is None or now is None:
        return EXACT
    rules = policy.memory.retention
    clock_start = memory.story_minutes
    if recalled.latest is not None:
        clock_start = max(clock_start, recalled.latest)
    elapsed_days = max(0, now - clock_start) / MINUTES_PER_DAY
    half_life = half_life_days(memory, recalled.times, policy)
    if elapsed_days == 0:
        value = 1.0
    else:  # a half-life of 0 (a factor under 1, recalled until it underflowed): gone at once
        value = 0.5 ** (elapsed_days / half_life) if half_life > 0 else 0.0
    floor_step = rules.never_forgotten_step
    if floor_step is not None and importance_step(memory.importance) >= floor_step:
        value = max(value, rules.forgotten_below)
    if value >= rules.vivid_from:
        return Retention(value, "vivid")
    return Retention(value, "faded" if value >= rules.forgotten_below else "forgotten")


def vivid_however_recalled(memory: Memory, now: int | None, policy: Policy) -> bool:
    """Whether `memory` is vivid at `now` whatever recalls named it, known without looking them
    up: vivid on its own clock, and each recall only restarts the clock later and (with a
    `reinforcement_factor` of 1 or more) makes the half-life longer. Tellers ask this of every
    piece of news they offer, and most of it is fresh."""
    if not policy.memory.flaky or memory.story_minutes is None or now is None:
        return True  # no clock: nothing fades
    rules = policy.memory.retention
    if rules.reinforcement_factor < 1:
        return False
    if now - memory.story_minutes < _young(rules):
        return True
    return retention(memory, now, NEVER_RECALLED, policy).state == "vivid"


@lru_cache(maxsize=16)
def _young(rules: RetentionPolicy) -> float:
    """How many story minutes every memory stays vivid, whatever its importance, kind and
    variation: the shortest half-life times log2(1 / `vivid_from`), a minute short (float
    rounding never makes a memory vivid here that `retention` finds faded)."""
    if rules.vivid_from == 0:
        return math.inf
    steps = min(rules.step_factor ** (step - 1) for step in range(1, IMPORTANCE_STEPS + 1))
    shortest = rules.half_life_days * steps * min(1.0, rules.belief_factor) * rules.variation_low
    return shortest * math.log2(1 / rules.vivid_from) * MINUTES_PER_DAY - 1


def as_held(
    memory: Memory, held: Retention, names: Callable[[Memory], Iterable[str]]
) -> Memory | None:
    """The memory as its character now holds it: whole when vivid, retold and less sure when
    faded (the statement stays, the detail goes, the declared `names` of what it is about kept
    whole; confidence x retention), None when forgotten."""
    if held.state == "vivid":
        return memory
    if held.state == "forgotten":
        return None
    return memory.model_copy(
        update={
            "content": retell(memory.content, names(memory)),
            "confidence": round(memory.confidence * held.value, 2),
        }
    )
