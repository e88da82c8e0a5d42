"""Recall with a reranker (section 9, step 4): a real rerank server on 127.0.0.1, speaking the
Cohere and Jina protocol as vLLM and llama.cpp's server do, asked by the worker's recall view."""

from __future__ import annotations

import asyncio
import logging
import math
from collections.abc import Callable
from typing import Any

import orjson
import pytest
from aiohttp import web

from projections.recall_choice import reranked_relevance
from schemas.policy import Policy
from streams.metrics import Metrics
from streams.reranker import Reranker, scores_in
from streams.show import recall_table
from tests.model_server import serving
from tests.streams.test_web import STATE, MemoryReads, served_client
from tests.support import samples_of

RECALL = (
    "/v2/memory/runtime/npcs/npc-mara/recall?world_instance_id=save-1&timeline_id=main"
    "&q=the+sailor+and+the+son&limit={limit}"
)
RELEVANCE_ONLY = Policy.model_validate(
    {"memory": {"recall": {"weights": {"importance": 0, "retention": 0, "recency": 0}}}}
)
"""Recall's choice by relevance alone: a score is the relevance itself."""
Scores = Callable[[list[str]], list[Any]]
"""What the rerank server answers for the documents it is sent (`relevance_score`s)."""


def about_the_fight(documents: list[str]) -> list[Any]:
    """A reranker that finds a memory of the sailor's defeat relevant, and nothing else."""
    return [1.0 if "defeated" in document else 0.0 for document in documents]


def recall_reranked(
    scores: Scores | web.Response,
    limit: int = 1,
    delay: float = 0.0,
    concurrency: int = 4,
    metrics: Metrics | None = None,
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The recall view's answer with a reranker whose server answers `scores` of the documents
    it is sent (or the response given), after `delay`; and the requests it got."""
    asked: list[dict[str, Any]] = []

    async def rerank(request: web.Request) -> web.Response:
        body = await request.json()
        asked.append(body)
        await asyncio.sleep(delay)
        if isinstance(scores, web.Response):
            return scores
        results = [
            {"index": index, "relevance_score": score}
            for index, score in enumerate(scores(body["documents"]))
        ]
        return web.json_response({"results": results[::-1]})  # any order: by index

    async def run() -> dict[str, Any]:
        async with serving(rerank, "rerank") as url:
            count = (metrics or Metrics()).rerank_call
            reranker = Reranker(url, "bge-reranker", "", 0.5, concurrency, count)
            client = served_client(MemoryReads(STATE, policy=RELEVANCE_ONLY, reranker=reranker))
            await client.start_server()
            try:
                reply = await client.get(RECALL.format(limit=limit))
                assert reply.status == 200
                answer: dict[str, Any] = await reply.json()
                return answer
            finally:
                await client.close()
                await reranker.close()

    return asyncio.run(run()), asked


def recall_alone(limit: int) -> dict[str, Any]:
    """The recall view's answer without a reranker."""

    async def run() -> dict[str, Any]:
        client = served_client(MemoryReads(STATE, policy=RELEVANCE_ONLY))
        await client.start_server()
        try:
            answer: dict[str, Any] = await (await client.get(RECALL.format(limit=limit))).json()
            return answer
        finally:
            await client.close()

    return asyncio.run(run())


def test_the_reranker_scores_every_candidate_and_weighs_seventy_parts_to_the_searches_thirty() -> (
    None
):
    """Mara's searches put the player's promise to find her son first for "the sailor and the
    son"; a reranker finding only the sailor's defeat relevant makes that the memory recalled."""
    alone = recall_alone(limit=2)
    fused = {memory["seq"]: memory["score"] for memory in alone["memories"]}  # relevance alone
    assert fused[2] == 1.0 > fused[3]  # the promise first by the searches
    assert [m["seq"] for m in recall_alone(limit=1)["memories"]] == [2]
    answer, asked = recall_reranked(about_the_fight)
    [fight] = answer["memories"]
    assert fight["seq"] == 3
    assert fight["score"] == round(0.7 * 1.0 + 0.3 * fused[3], 6)
    assert answer["searched"] == {**alone["searched"], "reranked": 2}
    assert recall_table(answer).startswith("searched: 0 by cues, 2 by words, 0 by vectors; 2 rer")
    assert recall_table(alone).startswith("searched: 0 by cues, 2 by words, 0 by vectors\n")
    contents = {memory["seq"]: memory["content"] for memory in alone["memories"]}
    assert asked == [
        {
            "model": "bge-reranker",
            "query": "the sailor and the son",
            "documents": [contents[2], contents[3]],  # the candidates, best fused first
            "top_n": 2,
        }
    ]


def test_raw_logits_are_relevances_through_the_logistic_function() -> None:
    """llama.cpp's server answers a cross-encoder's logits, not probabilities."""
    fused = {memory["seq"]: memory["score"] for memory in recall_alone(limit=2)["memories"]}
    answer, _ = recall_reranked(lambda documents: [3 if "defeated" in d else -4 for d in documents])
    [fight] = answer["memories"]
    assert fight["score"] == round(0.7 / (1 + math.exp(-3)) + 0.3 * fused[3], 6)
    assert reranked_relevance([0.0, 0.25, 1]) == [0.0, 0.25, 1]
    assert reranked_relevance([-1000.0, 0.0, 1000.0]) == [0.0, 0.5, 1.0]


@pytest.mark.parametrize(
    ("scores", "delay", "outcome", "logged"),
    [
        (web.Response(status=500, text="down"), 0.0, "http_error", "gave no answer: HTTP 500"),
        (about_the_fight, 2.0, "timeout", "answered nothing in time (timeout: no answer within"),
        (lambda documents: [0.5], 0.0, "malformed", "gave no answer: malformed answer: 1 of"),
        (lambda documents: [0.5, "hi"], 0.0, "malformed", "gave no answer: malformed answer: a"),
        (web.Response(text="ranked!"), 0.0, "malformed", "gave no answer: malformed answer: not"),
    ],
)
def test_without_the_rerankers_answer_recall_chooses_by_its_searches_and_says_why(
    caplog: pytest.LogCaptureFixture,
    scores: Scores | web.Response,
    delay: float,
    outcome: str,
    logged: str,
) -> None:
    metrics = Metrics()
    with caplog.at_level(logging.WARNING, logger="rumourmill.reranker"):
        answer, asked = recall_reranked(scores, delay=delay, metrics=metrics)
    assert answer == recall_alone(limit=1)
    assert len(asked) == 1
    [warning] = [record.getMessage() for record in caplog.records]
    assert warning.startswith(f"the reranker {logged}")
    samples = samples_of(metrics.exposition().decode())
    assert samples[("rumourmill_rerank_calls_total", (("outcome", outcome),))] == 1
    assert samples[("rumourmill_model_calls_total", (("outcome", outcome),))] == 0


def test_a_recall_finding_every_reranking_in_flight_answers_without_waiting() -> None:
    metrics = Metrics()
    answer, asked = recall_reranked(about_the_fight, concurrency=0, metrics=metrics)
    assert answer == recall_alone(limit=1) and asked == []
    samples = samples_of(metrics.exposition().decode())
    assert samples[("rumourmill_rerank_calls_total", (("outcome", "busy"),))] == 1


@pytest.mark.parametrize(
    ("body", "why"),
    [
        ({"results": [{"index": 0, "relevance_score": 0.5}]}, "1 of the 2 documents scored"),
        (
            {"results": [{"index": 0, "relevance_score": 0.5}] * 2},
            "names no document of 2 once",
        ),
        ({"results": [{"index": 2, "relevance_score": 0.5}]}, "names no document of 2 once"),
        ({"results": [{"index": True, "relevance_score": 0.5}]}, "names no document of 2 once"),
        ({"results": [{"index": 0, "relevance_score": True}]}, "relevance_score is no number"),
        ({"results": [{"index": 0, "relevance_score": None}]}, "relevance_score is no number"),
        ({"data": []}, "no list of results"),
        ([1, 2], "no list of results"),
    ],
)
def test_a_rerank_answer_must_score_every_document_once(body: Any, why: str) -> None:
    reason = scores_in(orjson.dumps(body), documents=2)
    assert isinstance(reason, str) and reason.startswith("malformed answer: ") and why in reason
    answered = {
        "results": [{"index": 1, "relevance_score": 2}, {"index": 0, "relevance_score": -1}]
    }
    assert scores_in(orjson.dumps(answered), documents=2) == [-1.0, 2.0]


def test_a_resting_reranker_is_counted_resting_with_every_slot_taken_too() -> None:
    """Found by a reviewer: counted `busy`, as though it had been asked for too much."""
    metrics = Metrics()
    reranker = Reranker("http://127.0.0.1:9/v1", "bge-reranker", "", 1.0, 0, metrics.rerank_call)
    reranker.rest(30, "asked to wait (HTTP 429)", "HTTP 429 from the reranker")
    why = asyncio.run(reranker.rerank("the son", ["I will find your son."]))
    assert why == "not asked: the reranker asked to wait (HTTP 429) and rests 30 s"
    samples = samples_of(metrics.exposition().decode())
    counted = {
        labels[0][1]: value
        for (name, labels), value in samples.items()
        if name == "rumourmill_rerank_calls_total" and value
    }
    assert counted == {"resting": 1}
