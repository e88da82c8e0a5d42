"""A scripted model: a real chat-completions server on 127.0.0.1 that answers from a script.

It speaks the OpenAI chat-completions protocol on a free port, in a thread of its own (so a
test, a benchmark or a worker in another process can call it), and behaves as it is told:

- `answer`: a JSON answer (`feeling` and `arousal`, a retelling, the referee's `verdict`, the
  `relations` a reply brings in, or a chronicle chapter's `summary`), after `delay`;
- `slow`: the same, only after `delay` seconds (past a client's timeout);
- `error`: HTTP 500;
- `busy`: HTTP 429, asking for a minute's rest (`Retry-After: 60`), as rate-limited hosted APIs do;
- `refuse`: a refusal (`message.refusal`, no content);
- `malformed`: prose instead of the JSON object asked for;
- `hang`: never answers (until the server stops).

It reranks too (`/v1/rerank`, the Cohere and Jina protocol), whatever its behaviour.

Every request is kept (`requests`), so a test can count the calls the model got.
"""

from __future__ import annotations

import asyncio
import re
import threading
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass, field
from typing import Any, Literal

import orjson
from aiohttp import web

Behaviour = Literal["answer", "slow", "error", "busy", "refuse", "malformed", "hang"]

MODEL_FEELING = -0.9
MODEL_AROUSAL = 0.95
"""What the scripted model feels about every memory (no rules row says this)."""
RETOLD_PREFIX = "Word is that"
"""How the scripted model opens every rumour it retells."""
SUMMARY_PREFIX = "Chronicled:"
"""How the scripted model opens every summary; the first word of each line it summarises
follows (then `summary_padding` words more)."""


@dataclass
class ScriptedModel:
    """The server's script and what it was asked; change `behaviour` at any time."""

    behaviour: Behaviour = "answer"
    delay: float = 0.0
    feeling: float = MODEL_FEELING
    """How the model feels about every memory (change it to stand for a sampling model that
    answers the same question otherwise another time)."""
    verdict: str = "unconvinced"
    """What the model rules when it referees (a verdict that does not exist is possible)."""
    convinced_under: float | None = None
    """With a confidence, the model rules `convinced` when the belief it is told of is held
    less firmly (a loosely held belief gives way), else `verdict`."""
    relations: list[str] = field(default_factory=lambda: ["her brother"])
    """The relations the model finds in any reply it checks for inventions."""
    summary_padding: int = 0
    """Words added to every summary (enough of them make it over its budget)."""
    requests: list[dict[str, Any]] = field(default_factory=list)
    rerankings: list[dict[str, Any]] = field(default_factory=list)
    """The rerank requests it got (`/v1/rerank`), apart from the chat completions."""
    port: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def url(self) -> str:
        """The base URL to configure (`RUMOURMILL_MODEL_URL`)."""
        return f"http://127.0.0.1:{self.port}/v1"

    @property
    def calls(self) -> int:
        with self._lock:
            return len(self.requests)

    async def chat_completions(self, request: web.Request) -> web.Response:
        body = await request.json()
        with self._lock:
            self.requests.append(body)
        behaviour, delay = self.behaviour, self.delay
        if behaviour == "hang":
            await asyncio.Event().wait()
        if delay:
            await asyncio.sleep(delay)
        if behaviour == "error":
            return web.Response(status=500, text="internal error")
        if behaviour == "busy":
            return web.Response(status=429, text="rate limited", headers={"Retry-After": "60"})
        if behaviour == "refuse":
            return _completion({"role": "assistant", "content": None, "refusal": "I can't."})
        if behaviour == "malformed":
            return _completion({"role": "assistant", "content": "She feels rather cross."})
        return _completion({"role": "assistant", "content": self.answer(body)})

    async def rerank(self, request: web.Request) -> web.Response:
        """A reranker of the Cohere and Jina protocol that finds the last document it is sent
        the most relevant, and each one before it less (the recall's candidates come best fused
        first: it turns their order round)."""
        body = await request.json()
        with self._lock:
            self.rerankings.append(body)
        count = len(body["documents"])
        scores = [
            {"index": index, "relevance_score": (index + 1) / count} for index in range(count)
        ]
        return web.json_response({"results": scores})

    def answer(self, body: dict[str, Any]) -> str:
        """The JSON answer to a request: a verdict when asked to referee, a retelling when
        asked to retell, else a feeling."""
        instructions, question = (message["content"] for message in body["messages"])
        if "referee" in instructions:
            held = re.search(r"confidence ([0-9.]+)", question)
            limit = self.convinced_under
            under = limit is not None and held is not None and float(held[1]) < limit
            return orjson.dumps({"verdict": "convinced" if under else self.verdict}).decode()
        if '"relations"' in instructions:
            return orjson.dumps({"relations": self.relations}).decode()
        if '"summary"' in instructions:
            told = [line[2:].split()[0] for line in question.splitlines() if line.startswith("- ")]
            summary = " ".join([SUMMARY_PREFIX, *told, *(["more"] * self.summary_padding)])
            return orjson.dumps({"summary": summary}).decode()
        answer: dict[str, Any] = {"feeling": self.feeling, "arousal": MODEL_AROUSAL}
        if "retell" in instructions:
            told = question.splitlines()[0].split(": ", 1)[1]
            answer["content"] = f"{RETOLD_PREFIX} {told}"
        return orjson.dumps(answer).decode()


def _completion(message: dict[str, Any]) -> web.Response:
    return web.json_response(
        {
            "id": "chatcmpl-scripted",
            "object": "chat.completion",
            "model": "scripted",
            "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
        }
    )


@contextmanager
def scripted_model(behaviour: Behaviour = "answer", delay: float = 0.0) -> Iterator[ScriptedModel]:
    """Serve a `ScriptedModel` on a free port of 127.0.0.1 until the block ends."""
    model = ScriptedModel(behaviour, delay)
    loop = asyncio.new_event_loop()
    ready = threading.Event()
    app = web.Application()
    app.router.add_post("/v1/chat/completions", model.chat_completions)
    app.router.add_post("/v1/rerank", model.rerank)
    runner = web.AppRunner(app, shutdown_timeout=0.1, access_log=None)

    async def start() -> None:
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        model.port = runner.addresses[0][1]
        ready.set()

    def serve() -> None:
        asyncio.set_event_loop(loop)
        loop.run_until_complete(start())
        loop.run_forever()
        unanswered = asyncio.all_tasks(loop)  # hanging requests
        for task in unanswered:
            task.cancel()
        loop.run_until_complete(asyncio.gather(*unanswered, return_exceptions=True))
        loop.run_until_complete(runner.cleanup())
        loop.close()

    thread = threading.Thread(target=serve, name="scripted-model", daemon=True)
    thread.start()
    if not ready.wait(10):
        raise RuntimeError("the scripted model did not start")
    try:
        yield model
    finally:
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)


Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


@asynccontextmanager
async def serving(handler: Handler, endpoint: str = "chat/completions") -> AsyncIterator[str]:
    """A server on 127.0.0.1, in the running loop, whose every call to `endpoint` (by default
    chat completions, in shapes `ScriptedModel` never sends) `handler` answers; yields the
    base URL."""
    app = web.Application()
    app.router.add_post(f"/v1/{endpoint}", handler)
    runner = web.AppRunner(app, access_log=None, shutdown_timeout=0.1)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    try:
        yield f"http://127.0.0.1:{runner.addresses[0][1]}/v1"
    finally:
        await runner.cleanup()
