"""The model: any OpenAI-compatible chat-completions endpoint, asked for JSON answers.

Ollama, vLLM, llama.cpp's server and hosted APIs all speak it: rumourmill posts to
`RUMOURMILL_MODEL_URL/chat/completions` with the model's instructions, the question and
`response_format: json_object`. One client per worker holds one HTTP session; at most
`RUMOURMILL_MODEL_CONCURRENCY` calls are in flight and each gives up after
`RUMOURMILL_MODEL_TIMEOUT_SECONDS`. A read (the reply check) asks through `ask_aside`: reads hold
half the slots at most and never queue for one, so no tenant's reads take the model from the
events of every tenant, whose answers become state.

An answer is the JSON object the model was asked for, validated by its pydantic model. Anything
else is a refusal, returned as the plain reason the ack will carry: the model could not be
reached or timed out, answered an HTTP error, refused, or answered something that is not the
object asked for. The rules then make that judgement.

A model that asks to be left alone (HTTP 429 or 503, for its `Retry-After` or `REST_SECONDS`),
or that ran out of time on every question of an event (`streams.judging`), rests: until then
every call is refused at once, those already waiting for a slot too, so the rules answer without
a wait and the model is not pressed. An answer quoting the key or password sent shows `HIDDEN`.
A call whose kept-alive connection the server closed under it is sent again once (`DROPPED`).
Each call is counted by how it ended (`Outcome`, `rumourmill_model_calls_total`), and what an
operator must mend (an HTTP error, a model out of reach, an answer that is not the object asked
for) is logged, once a minute at most for each kind: the exchange itself, its rests, hidden
credentials and counts are every JSON service's (`streams.json_service`).
"""

from __future__ import annotations

import re
import time
from functools import partial
from typing import Any, TypeVar

import orjson
from pydantic import BaseModel, ValidationError

from projections.delivery import explain
from streams.json_service import (
    MALFORMED,
    NOT_ASKED,
    REFUSED,
    REST_SECONDS,
    Count,
    JsonService,
    Outcome,
    cut,
    uncounted,
)
from streams.logs import logger
from streams.settings import ENDPOINTS, Settings

log = logger("model")

AnswerModel = TypeVar("AnswerModel", bound=BaseModel)

FENCE_OPENING = re.compile(r"```[ \t]*(?:json\w*)?", re.IGNORECASE)
"""The opening of a Markdown code fence around a JSON object, as small local models like to
answer, its language tag however written (`JSON`, ` json` and `jsonc` were refused): the fence
is taken off by its two ends, not by a pattern over the whole answer (a lazy middle between
optional spaces backtracked for a minute over a fence of 4,000 spaces, holding the event
loop)."""


def unfenced(content: str) -> str:
    """The answer inside its code fence, if it is fenced, else as it came."""
    stripped = content.strip()
    opening = FENCE_OPENING.match(stripped)
    if opening is None or len(stripped) < 6 or not stripped.endswith("```"):
        return content
    return stripped[opening.end() : -3].strip()


class ModelClient(JsonService):
    """Asks one chat-completions endpoint for structured answers."""

    def __init__(
        self,
        url: str,
        model: str,
        key: str = "",
        timeout_seconds: float = 10.0,
        concurrency: int = 8,
        count: Count = uncounted,
    ) -> None:
        super().__init__(
            url,
            ENDPOINTS["model_url"],
            key,
            timeout_seconds,
            concurrency,
            count,
            name="model",
            setting="RUMOURMILL_MODEL_URL",
            meanwhile="the rules answer meanwhile",
        )
        self.model = model
        self._impatient: dict[bool, tuple[float, int]] = {False: (0.0, 0), True: (0.0, 0)}
        """For the events' questions (False) and for the reads' (True): until when
        (`time.monotonic`) a caller that waits no longer than how many ms does not ask, the
        model having given no answer within that lately (`out_of_time`)."""
        self.read_slots = max(1, concurrency // 2)
        """The calls reads may have in flight (`ask_aside`): the other slots are the events'."""
        self._reads = 0

    @classmethod
    def configured(cls, settings: Settings, count: Count = uncounted) -> ModelClient | None:
        """The client `RUMOURMILL_MODEL_*` describe; None when no model URL is set."""
        if not settings.model_url:
            return None
        return cls(
            settings.model_url,
            settings.model_name,
            settings.model_key,
            settings.model_timeout_seconds,
            settings.model_concurrency,
            count,
        )

    def out_of_time(self, deadline_ms: int, reason: str, read: bool = False) -> None:
        """Leave the model alone for `REST_SECONDS` for the callers whose deadline is no longer
        than `deadline_ms`: it answered nothing within that (`reason`). One world's short
        deadline does not rest it for the others, nor does a `read` (a reply check) rest it for
        the events, whose questions one tenant's reads must not leave to the rules; an event's
        rests it for the reads too. The client's own timeout, which bounds every call, rests it
        for all (`rest`)."""
        now = time.monotonic()
        for resting in {read, True}:
            until, within = self._impatient[resting]
            within = max(deadline_ms, within if now < until else 0)
            self._impatient[resting] = (now + REST_SECONDS, within)
        log.warning(
            "the model answered nothing in time (%s); %s whose deadline is %d ms or less do not"
            " ask it for %g s, the rules answer meanwhile",
            reason,
            "reply checks" if read else "worlds and reply checks",
            self._impatient[read][1],
            REST_SECONDS,
        )

    def rests_for(self, deadline_ms: int, read: bool = False, calls: int = 1) -> str | None:
        """Why a caller waiting `deadline_ms` (a `read`, or an event) does not ask now
        (`out_of_time`), its `calls` counted `resting` as a rest's are; None if it may."""
        until, within = self._impatient[read]
        if time.monotonic() < until and deadline_ms <= within:
            for _ in range(calls):
                self.count(Outcome.RESTING)
            return (
                f"{NOT_ASKED}: the model gave no answer within {within} ms lately and rests"
                f" {REST_SECONDS:g} s"
            )
        return None

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
        return await self.answer(orjson.dumps(body), partial(answer_in, answer_type=answer_type))

    async def ask_aside(
        self, instructions: str, prompt: str, answer_type: type[AnswerModel]
    ) -> AnswerModel | str:
        """`ask`, for a read: only while fewer than `read_slots` reads ask and a slot is free
        now, else at once why not. Reads come as fast as clients send them, of any tenant;
        queued for the slots with the events' questions, a flood of one tenant's reads pushed
        every tenant's questions past their deadline, to be judged by the rules for good and
        the model rested for all (and a read waited behind every question of the events)."""
        if self._reads >= self.read_slots:
            self.count(Outcome.BUSY)
            return (
                f"{NOT_ASKED}: {self._reads} read(s) are asking the model already, as many as"
                " reads may (half of RUMOURMILL_MODEL_CONCURRENCY, the rest is the events')"
            )
        if self._slots.locked():  # taken: `ask` takes one free now, with no await before it
            self.count(Outcome.BUSY)
            return (
                f"{NOT_ASKED}: every one of the RUMOURMILL_MODEL_CONCURRENCY calls is in flight"
                " (the events' questions), and a read never waits for one"
            )
        self._reads += 1
        try:
            return await self.ask(instructions, prompt, answer_type)
        finally:
            self._reads -= 1


def answer_in(body: bytes, answer_type: type[AnswerModel]) -> AnswerModel | str:
    """The answer a chat-completions response body carries, or why it carries none."""
    chosen = _first_message(body)
    if chosen is None:
        return cut(f"{MALFORMED}: not a chat completion: {body.decode(errors='replace')}")
    choice, message = chosen
    refusal: str | None = message.get("refusal")
    if refusal:
        return cut(f"{REFUSED}: {refusal}")
    if choice.get("finish_reason") == "content_filter":
        return f"{REFUSED}: the answer was filtered"
    content: str | None = message.get("content")
    ended = _ended_early(choice)
    if content is None or not content.strip():
        return cut(f"{REFUSED}: the model gave no answer{ended}")
    try:
        return answer_type.model_validate_json(unfenced(content))
    except ValidationError as error:
        problem = explain(error, MALFORMED).removeprefix(f"{MALFORMED}: ")
        return cut(f"{MALFORMED}{ended}: {problem}")


def _ended_early(choice: dict[str, Any]) -> str:
    """Why the model stopped, when not of itself: an answer cut at its token limit (`length`),
    or tool calls instead of content, is otherwise told as a broken or empty answer."""
    finish_reason = choice.get("finish_reason")
    if not isinstance(finish_reason, str) or finish_reason in ("", "stop"):
        return ""
    return f" (finish_reason {finish_reason})"


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
