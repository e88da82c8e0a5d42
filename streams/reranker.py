"""The reranker (section 9, step 4): any reranking API of the Cohere and Jina protocol.

vLLM, llama.cpp's server, Infinity, Jina and Cohere all serve it: rumourmill posts to
`RUMOURMILL_RERANK_URL/rerank` the recall's query and each candidate's content as the character
holds it, `{"model", "query", "documents", "top_n"}`, and takes from the answer's `results` the
`relevance_score` of each document by its `index`. Recall then weighs that 70% against its
searches' fused score (`projections.recall_choice`).

A recall never waits for the reranker long: at most `RUMOURMILL_RERANK_TIMEOUT_SECONDS`, and not
at all for a slot (`RUMOURMILL_RERANK_CONCURRENCY` in flight, per worker). Without its answer in
time, or with one that does not score every document once, recall answers by the fused ranking
(`searched.reranked` 0), and the log says why, once a minute at most for each kind; every call
is counted by how it ended (`rumourmill_rerank_calls_total`). A reranker that asks to be left
alone, or that answered nothing in time, rests (`REST_SECONDS` for the latter): recalls answer
meanwhile without asking it (`streams.json_service`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from functools import partial
from typing import Any

import orjson

from streams.json_service import (
    MALFORMED,
    NOT_ASKED,
    REST_SECONDS,
    TIMED_OUT,
    Count,
    JsonService,
    Outcome,
    cut,
    uncounted,
)
from streams.settings import ENDPOINTS, Settings


class Reranker(JsonService):
    """Scores a recall's candidates against its query."""

    def __init__(
        self,
        url: str,
        model: str,
        key: str = "",
        timeout_seconds: float = 2.0,
        concurrency: int = 4,
        count: Count = uncounted,
    ) -> None:
        super().__init__(
            url,
            ENDPOINTS["rerank_url"],
            key,
            timeout_seconds,
            concurrency,
            count,
            name="reranker",
            setting="RUMOURMILL_RERANK_URL",
            meanwhile="recall chooses by its searches meanwhile",
        )
        self.model = model

    @classmethod
    def configured(cls, settings: Settings, count: Count = uncounted) -> Reranker | None:
        """The reranker `RUMOURMILL_RERANK_*` describe; None when no reranker URL is set."""
        if not settings.rerank_url:
            return None
        return cls(
            settings.rerank_url,
            settings.rerank_model,
            settings.rerank_key,
            settings.rerank_timeout_seconds,
            settings.rerank_concurrency,
            count,
        )

    async def rerank(self, query: str, documents: Sequence[str]) -> list[float] | str:
        """The reranker's score of each document for `query`, in their order; or why there is
        none. Never waits for a slot: a recall is a read, and answers without the reranker
        rather than queue behind others."""
        if self._slots.locked() and not self.resting:  # resting: `answer` says so
            self.count(Outcome.BUSY)
            return (
                f"{NOT_ASKED}: every one of the RUMOURMILL_RERANK_CONCURRENCY rerankings is in"
                " flight, and a recall never waits for one"
            )
        body = {
            "model": self.model,
            "query": query,
            "documents": documents,
            "top_n": len(documents),
        }
        scores = await self.answer(orjson.dumps(body), partial(scores_in, documents=len(documents)))
        if isinstance(scores, str) and scores.startswith(TIMED_OUT):  # recalls would each wait
            self.rest(REST_SECONDS, "answered nothing in time", scores)
        return scores


def scores_in(body: bytes, documents: int) -> list[float] | str:
    """The score of each of the `documents` a rerank response body gives, in the documents'
    order; or why it gives none: every document must be scored once, with a finite number."""
    try:
        response: Any = orjson.loads(body)
    except orjson.JSONDecodeError:
        return cut(f"{MALFORMED}: not a rerank response: {body.decode(errors='replace')}")
    results = response.get("results") if isinstance(response, dict) else None
    if not isinstance(results, list):
        return cut(f"{MALFORMED}: no list of results: {body.decode(errors='replace')}")
    scores: dict[int, float] = {}
    for result in results:
        index = result.get("index") if isinstance(result, dict) else None
        score = result.get("relevance_score") if isinstance(result, dict) else None
        if type(index) is not int or not 0 <= index < documents or index in scores:
            return cut(f"{MALFORMED}: a result names no document of {documents} once: {result}")
        if (
            not isinstance(score, int | float)
            or isinstance(score, bool)
            or not math.isfinite(score)
        ):
            return cut(f"{MALFORMED}: a result's relevance_score is no number: {result}")
        scores[index] = float(score)
    if len(scores) != documents:
        return f"{MALFORMED}: {len(scores)} of the {documents} documents scored"
    return [scores[index] for index in range(documents)]
