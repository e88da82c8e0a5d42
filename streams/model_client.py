"""The model: any OpenAI-compatible chat-completions endpoint, asked for JSON answers.

Ollama, vLLM, llama.cpp's server and hosted APIs all speak it: rumourmill posts to
`RUMOURMILL_MODEL_URL/chat/completions` with the model's instructions, the question and
`response_format: json_object`. One client per worker holds one HTTP session; at most
`RUMOURMILL_MODEL_CONCURRENCY` calls are in flight and each gives up after
`RUMOURMILL_MODEL_TIMEOUT_SECONDS`.

An answer is the JSON object the model was asked for, validated by its pydantic model. Anything
else is a refusal, returned as the plain reason the ack will carry: the model could not be
reached or timed out, answered an HTTP error, refused, or answered something that is not the
object asked for. The rules then make that judgement.
"""

from __future__ import annotations

import asyncio
import re
from typing import Any, TypeVar

import aiohttp
import orjson
from pydantic import BaseModel, ValidationError

from projections.intake import explain
from streams.settings import Settings

AnswerModel = TypeVar("AnswerModel", bound=BaseModel)

REASON_CHARACTERS = 300
"""A reason quoting the model is cut to this length (it goes on every ack it concerns)."""
TIMED_OUT = "timeout"
"""How the reason of a call that ran out of time begins."""
MALFORMED = "malformed answer"
"""How the reason of an answer that is not the JSON object asked for begins."""
FENCED = re.compile(r"^```(?:json)?(.*)```$", re.DOTALL)
"""A JSON object wrapped in a Markdown code fence, as small local models like to answer (its
inside stripped afterwards: a lazy middle between optional spaces backtracked for a minute over
a fence of 4,000 spaces, holding the event loop)."""


class ModelClient:
    """Asks one chat-completions endpoint for structured answers."""

    def __init__(
        self,
        url: str,
        model: str,
        key: str = "",
        timeout_seconds: float = 10.0,
        concurrency: int = 8,
    ) -> None:
        self.endpoint = f"{url.rstrip('/')}/chat/completions"
        self.model = model
        self.timeout_seconds = timeout_seconds
        self._headers = {"Authorization": f"Bearer {key}"} if key else {}
        self._slots = asyncio.Semaphore(concurrency)
        self._session: aiohttp.ClientSession | None = None

    @classmethod
    def configured(cls, settings: Settings) -> ModelClient | None:
        """The client `RUMOURMILL_MODEL_*` describe; None when no model URL is set."""
        if not settings.model_url:
            return None
        return cls(
            settings.model_url,
            settings.model_name,
            settings.model_key,
            settings.model_timeout_seconds,
            settings.model_concurrency,
        )

    async def ask(
        self, instructions: str, prompt: str, answer_type: type[AnswerModel]
    ) -> AnswerModel | str:
        """The model's answer to `prompt`, validated as `answer_type`; or why there is none."""
        body = {
            "model": self.model,
            "messages": [
                {"role": "system", "content": instructions},
                {"role": "user", "content": prompt},
            ],
            "temperature": 0,
            "response_format": {"type": "json_object"},
        }
        async with self._slots:
            try:
                async with asyncio.timeout(self.timeout_seconds):
                    async with self._open().post(
                        self.endpoint, data=orjson.dumps(body), headers=self._headers
                    ) as response:
                        status, text = response.status, await response.read()
            except TimeoutError:
                return f"{TIMED_OUT}: no answer within {self.timeout_seconds:g} s"
            except (aiohttp.ClientError, ValueError) as error:  # ValueError: a host IDNA refuses
                return _cut(f"the model could not be reached: {error or type(error).__name__}")
        if status != 200:
            return _cut(f"HTTP {status} from the model: {text.decode(errors='replace')}")
        return answer_in(text, answer_type)

    def _open(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            self._session = aiohttp.ClientSession(
                headers={"Content-Type": "application/json"},
                timeout=aiohttp.ClientTimeout(total=None),  # `ask` bounds each call itself
            )
        return self._session

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()


def answer_in(body: bytes, answer_type: type[AnswerModel]) -> AnswerModel | str:
    """The answer a chat-completions response body carries, or why it carries none."""
    chosen = _first_message(body)
    if chosen is None:
        return _cut(f"{MALFORMED}: not a chat completion: {body.decode(errors='replace')}")
    choice, message = chosen
    refusal: str | None = message.get("refusal")
    if refusal:
        return _cut(f"refused: {refusal}")
    if choice.get("finish_reason") == "content_filter":
        return "refused: the answer was filtered"
    content: str | None = message.get("content")
    if content is None or not content.strip():
        return "refused: the model gave no answer"
    fenced = FENCED.match(content.strip())
    try:
        return answer_type.model_validate_json(fenced.group(1).strip() if fenced else content)
    except ValidationError as error:
        problem = explain(error, MALFORMED)
        return _cut(problem if problem.startswith(MALFORMED) else f"{MALFORMED}: {problem}")


def _first_message(body: bytes) -> tuple[dict[str, Any], dict[str, Any]] | None:
    """A chat completion's first choice and its message, whose content and refusal are text or
    null; None for any other body: a server may send anything (prose, a message that is null or
    a string, a refusal nested too deep to print...), and none of it may raise past `answer_in`."""
    try:
        response = orjson.loads(body)
    except orjson.JSONDecodeError:
        return None
    choices = response.get("choices") if isinstance(response, dict) else None
    choice = choices[0] if isinstance(choices, list) and choices else None
    if not isinstance(choice, dict):
        return None
    message = choice.get("message")
    if not isinstance(message, dict) or not all(
        isinstance(message.get(part), str | None) for part in ("content", "refusal")
    ):
        return None
    return choice, message


def _cut(reason: str) -> str:
    one_line = " ".join(reason.split())
    if len(one_line) <= REASON_CHARACTERS:
        return one_line
    return one_line[: REASON_CHARACTERS - 1] + "…"
