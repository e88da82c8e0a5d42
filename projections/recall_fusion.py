"""Reciprocal-rank fusion of recall's searches (section 9, step 2).

Each search ranks what it found, best first. A memory's fused score is the sum, over the
searches that found it, of the search's weight / (`RANK_OFFSET` + its rank): cues 1, words 1,
vectors 1.5. Only ranks count, so searches with incomparable scores (a cue match, bm25, a
cosine) combine fairly, and a memory several searches agree on rises.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from typing import Literal

Search = Literal["cues", "words", "vectors"]

SEARCH_WEIGHTS: Mapping[Search, float] = {"cues": 1.0, "words": 1.0, "vectors": 1.5}
RANK_OFFSET = 60
"""The usual constant of reciprocal-rank fusion: it keeps one first place from outweighing
agreement further down."""


def fuse(ranks: Ranks) -> list[tuple[str, float]]:
    """Every id any search found (`ranks_of` their rankings), with its fused score, best first
    (ties by id)."""
    found = dict.fromkeys(found for ranked in ranks.values() for found in ranked)
    scores = [(one, fused_score(ranks, one)) for one in found]
    return sorted(scores, key=lambda item: (-item[1], item[0]))


Ranks = Mapping[Search, Mapping[str, int]]
"""Each search's rank (from 1) of each id it found (`ranks_of`)."""


def ranks_of(rankings: Mapping[Search, Sequence[str]]) -> Ranks:
    """The rankings as each id's rank in each search."""
    return {
        search: {found: rank for rank, found in enumerate(ranked, start=1)}
        for search, ranked in rankings.items()
    }


def fused_score(ranks: Ranks, found: str, left_out: Collection[Search] = ()) -> float:
    """The fused score `fuse` gives `found`, the searches `left_out` adding nothing (the ranks
    of the others stay as each search gave them)."""
    score = 0.0
    for search, ranked in ranks.items():
        if search not in left_out and (rank := ranked.get(found)) is not None:
            score += SEARCH_WEIGHTS[search] / (RANK_OFFSET + rank)
    return score


def candidate_count(limit: int, over_retrieve: int, cap: int = 60) -> int:
    """How many fused candidates go on to the choice: over_retrieve x limit, at most `cap`."""
    return min(cap, over_retrieve * limit)
