"""`RUMOURMILL_MODEL_*` and `RUMOURMILL_RERANK_*`, set in the environment as an operator sets
them, reach real servers on 127.0.0.1 as the README says: the key as a bearer key, the model's
name in the body, the timeout bounding a call, the concurrency bounding the calls in flight."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from aiohttp import web

from schemas.judgements import FeelingAnswer
from streams.model_client import ModelClient
from streams.reranker import Reranker
from tests.model_server import serving
from tests.streams.test_kafka_clients import settings_of

PAST_THE_TIMEOUT = 6.0
"""The slow server's delay: past the 2 s timeout, which leaves the first call room on a loaded
machine (0.3 s timed out a stalled process)."""
FEELING = {"choices": [{"message": {"content": '{"feeling": 0.5, "arousal": 0.25}'}}]}


class Server:
    """What a server was sent (authorization, body), answering `answer` after `delay`."""

    def __init__(self, answer: dict[str, Any] | None = None) -> None:
        self.answer = answer
        self.delay = 0.0
        self.sent: list[tuple[str | None, dict[str, Any]]] = []

    async def __call__(self, request: web.Request) -> web.Response:
        body = await request.json()
        self.sent.append((request.headers.get("Authorization"), body))
        await asyncio.sleep(self.delay)
        if self.answer is not None:
            return web.json_response(self.answer)
        scores = [{"index": at, "relevance_score": 0.5} for at in range(len(body["documents"]))]
        return web.json_response({"results": scores})


def test_the_rerank_settings_name_the_key_the_model_the_timeout_and_the_rerankings_in_flight(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    server = Server()

    async def run() -> tuple[list[float] | str, list[list[float] | str]]:
        async with serving(server, "rerank") as url:
            settings = settings_of(
                monkeypatch,
                RERANK_URL=url,
                RERANK_MODEL="bge-reranker",
                RERANK_KEY="rk-123",
                RERANK_TIMEOUT_SECONDS="2",
                RERANK_CONCURRENCY="1",
            )
            reranker = Reranker.configured(settings)
            assert reranker is not None
            try:
                first = await reranker.rerank("the sailor", ["a fight", "a locket"])
                server.delay = PAST_THE_TIMEOUT
                both = await asyncio.gather(
                    reranker.rerank("the sailor", ["a fight"]),
                    reranker.rerank("the sailor", ["a locket"]),
                )
                return first, list(both)
            finally:
                await reranker.close()

    first, both = asyncio.run(run())
    assert first == [0.5, 0.5]
    authorization, body = server.sent[0]
    assert (authorization, body["model"]) == ("Bearer rk-123", "bge-reranker")
    assert sorted(both, key=str) == [
        "not asked: every one of the RUMOURMILL_RERANK_CONCURRENCY rerankings is in flight, and"
        " a recall never waits for one",
        "timeout: no answer within 2 s",
    ]


def test_the_model_settings_name_the_key_the_model_the_timeout_and_the_calls_in_flight(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Of `RUMOURMILL_MODEL_CONCURRENCY`'s two calls, one may be a read's (half of them): a
    second read asking meanwhile is told so at once."""
    server = Server(FEELING)

    async def run() -> tuple[FeelingAnswer | str, list[FeelingAnswer | str]]:
        async with serving(server) as url:
            settings = settings_of(
                monkeypatch,
                MODEL_URL=url,
                MODEL_NAME="llama-3.1-8b",
                MODEL_KEY="sk-abc",
                MODEL_TIMEOUT_SECONDS="2",
                MODEL_CONCURRENCY="2",
            )
            model = ModelClient.configured(settings)
            assert model is not None
            try:
                first = await model.ask("instructions", "prompt", FeelingAnswer)
                server.delay = PAST_THE_TIMEOUT
                both = await asyncio.gather(
                    model.ask_aside("instructions", "a reply", FeelingAnswer),
                    model.ask_aside("instructions", "another reply", FeelingAnswer),
                )
                return first, list(both)
            finally:
                await model.close()

    first, both = asyncio.run(run())
    assert first == FeelingAnswer(feeling=0.5, arousal=0.25)
    authorization, body = server.sent[0]
    assert (authorization, body["model"]) == ("Bearer sk-abc", "llama-3.1-8b")
    assert sorted(both, key=str) == [
        "not asked: 1 read(s) are asking the model already, as many as reads may (half of"
        " RUMOURMILL_MODEL_CONCURRENCY, the rest is the events')",
        "timeout: no answer within 2 s",
    ]
