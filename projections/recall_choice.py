"""Recall's choice (section 9, steps 4 and 5): the memories worth answering, chronologically.

Each candidate is scored by relevance (its fused score over the best one's; with a reranker's
scores, 70% the reranker's relevance and 30% that), importance, retention (section 8) and
recency (1 / (1 + story days since it happened)), weighted by the policy's
`memory.recall.weights`. Forgotten memories are never candidates
(`projections.recall.held_candidates`), so never chosen. The best `limit` are
presented in story order (story time, then position), as a character tells what happened.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from projections.retention import MINUTES_PER_DAY, Retention
from schemas.memory import Memory
from schemas.policy import Policy

RERANKER_SHARE = 0.7
"""What a reranker's relevance weighs in a reranked candidate's relevance (step 4)."""


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


def reranked_relevance(scores: Sequence[float]) -> list[float]:
    """A reranker's scores as relevances from 0 to 1: as given when all are in that range (a
    cross-encoder's probability, as Cohere, Jina and vLLM answer), else each through the
    logistic function (raw logits, as llama.cpp's server answers). Logits that all happen to
    fall between 0 and 1 are taken as probabilities: the answer says not which they are."""
    if all(0.0 <= score <= 1.0 for score in scores):
        return list(scores)
    return [0.5 * (1.0 + math.tanh(score / 2)) for score in scores]  # 1 / (1 + e^-x), no overflow


def relevances(candidates: Sequence[Candidate], reranked: Sequence[float] | None) -> list[float]:
    """Each candidate's relevance: its fused score over the best one's (step 2), or with a
    reranker's scores (step 4, one per candidate) `RERANKER_SHARE` of the reranker's relevance
    and the rest the fused one."""
    best = max((candidate.fused for candidate in candidates), default=0.0) or 1.0
    fused = [candidate.fused / best for candidate in candidates]
    if reranked is None:
        return fused
    if len(reranked) != len(candidates):
        raise ValueError(f"{len(reranked)} reranker scores for {len(candidates)} candidates")
    return [
        RERANKER_SHARE * score + (1 - RERANKER_SHARE) * relevance
        for score, relevance in zip(reranked_relevance(reranked), fused, strict=True)
    ]


def choose(
    candidates: Sequence[Candidate],
    now: int | None,
    limit: int,
    policy: Policy,
    reranked: Sequence[float] | None = None,
) -> list[Chosen]:
    """The best `limit` candidates, in story order; `reranked`: a reranker's score of each."""
    weights = policy.memory.recall.weights
    scored = [
        Chosen(
            candidate.memory,
            candidate.retention.value,
            round(
                weights.relevance * relevance
                + weights.importance * candidate.memory.importance
                + weights.retention * candidate.retention.value
                + weights.recency * recency(candidate.memory, now),
                6,
            ),
        )
        for candidate, relevance in zip(candidates, relevances(candidates, reranked), strict=True)
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
