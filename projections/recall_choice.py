"""Recall's choice (section 9, step 5): the memories worth answering, chronologically.

Each candidate is scored by relevance (its fused score over the best one's), importance,
retention (section 8) and recency (1 / (1 + story days since it happened)), weighted by the
policy's `memory.recall.weights`. Forgotten memories are never candidates
(`projections.recall.held_candidates`), so never chosen. The best `limit` are
presented in story order (story time, then position), as a character tells what happened.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from projections.retention import MINUTES_PER_DAY, Retention
from schemas.memory import Memory
from schemas.policy import Policy


@dataclass(frozen=True, slots=True)
class Candidate:
    """A memory the searches found, as the character holds it now (not forgotten)."""

    memory: Memory
    """Retold when faded (`projections.retention.as_held`)."""
    retention: Retention
    fused: float


@dataclass(frozen=True, slots=True)
class Chosen:
    memory: Memory
    retention: float
    score: float


def recency(memory: Memory, now: int | None) -> float:
    """1 for what just happened, falling with story days; 1 without story time."""
    if memory.story_minutes is None or now is None:
        return 1.0
    return 1.0 / (1.0 + max(0, now - memory.story_minutes) / MINUTES_PER_DAY)


def choose(
    candidates: Sequence[Candidate], now: int | None, limit: int, policy: Policy
) -> list[Chosen]:
    """The best `limit` candidates, in story order."""
    weights = policy.memory.recall.weights
    best = max((candidate.fused for candidate in candidates), default=0.0) or 1.0
    scored = [
        Chosen(
            candidate.memory,
            candidate.retention.value,
            round(
                weights.relevance * candidate.fused / best
                + weights.importance * candidate.memory.importance
                + weights.retention * candidate.retention.value
                + weights.recency * recency(candidate.memory, now),
                6,
            ),
        )
        for candidate in candidates
    ]
    scored.sort(key=best_first)
    return sorted(scored[:limit], key=story_order)


def best_first(chosen: Chosen) -> tuple[float, str]:
    """Highest score first; equal scores by belief id, so every worker chooses alike."""
    return -chosen.score, chosen.memory.belief_id


def story_order(chosen: Chosen) -> tuple[int, int, str]:
    """Story time, then position (memories without story time first, by position)."""
    memory = chosen.memory
    minutes = -1 if memory.story_minutes is None else memory.story_minutes
    return minutes, memory.seq, memory.belief_id
