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
for) is logged, once a minute at most for each kind.
"""

from __future__ import annotations

import asyncio
import re
import time
from base64 import b64encode
from collections.abc import Callable
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from enum import StrEnum
from types import SimpleNamespace
from typing import Any, TypeVar
from urllib.parse import unquote, urlsplit

import aiohttp
import orjson
from pydantic import BaseModel, ValidationError

from projections.delivery import explain
from streams.logs import logger
from streams.settings import Settings, without_credentials

log = logger("model")

AnswerModel = TypeVar("AnswerModel", bound=BaseModel)

REASON_CHARACTERS = 300
"""A reason quoting the model is cut to this length (it goes on every ack it concerns)."""
TIMED_OUT = "timeout"
"""How the reason of a call that ran out of time begins."""
MALFORMED = "malformed answer"
"""How the reason of an answer that is not the JSON object asked for begins."""
REFUSED = "refused"
"""How the reason of an answer the model refused (or left empty) begins."""
NOT_ASKED = "not asked"
"""How the reason of a call refused while the model rests begins."""
HIDDEN = "(hidden)"
"""What an answer's quote of the credentials sent shows instead (`credentials_sent`)."""
FENCED = re.compile(r"^```(?:json)?(.*)```$", re.DOTALL)
"""A JSON object wrapped in a Markdown code fence, as small local models like to answer (its
inside stripped afterwards: a lazy middle between optional spaces backtracked for a minute over
a fence of 4,000 spaces, holding the event loop)."""
MAX_ANSWER_BYTES = 1 << 20
"""The most of a response body read (after decompression): a judgement's answer is a few
hundred bytes, and a server sending hundreds of megabytes held the event loop for seconds."""
REST_SECONDS = 30.0
"""How long a model rests that ran out of time, or asked to wait without saying how long."""
MAX_REST_SECONDS = 300.0
"""The longest rest a model's `Retry-After` is granted: the rules answer meanwhile."""
DROPPED = (
    aiohttp.ServerDisconnectedError,
    aiohttp.ClientOSError,
    aiohttp.ClientConnectionResetError,
)
"""A connection closed under a call: a server closes a kept-alive connection it found idle
long enough (uvicorn, as vLLM runs it, after 5 s; aiohttp keeps one 15 s), and a call that
takes it up as it does is sent again once, on a new one, else it lost its judgement for good.
A call on a new connection is not: the model may have read it, and worked on it (or billed
it), before it went."""
CLOSED_IDLE_SECONDS = 0.5
"""How soon after it was sent a call on a kept-alive connection is dropped when the server had
closed that connection idle (`DROPPED`): sent again then; dropped later, the server read the
question and worked on it (a model that crashes on it), and it is not."""
REUSED = "reused"
"""The mark a call's `trace_request_ctx` gets when it takes up a kept-alive connection."""
BUSY = frozenset({429, 503})
"""The statuses of a model asking to be left alone for a while."""
WARNING_INTERVAL = 60.0
"""Seconds between two warnings of the same kind (one a call would flood the log)."""


class Outcome(StrEnum):
    """How a call to the model ended, as counted (`rumourmill_model_calls_total`)."""

    ANSWERED = "answered"
    REFUSED = "refused"
    MALFORMED = "malformed"
    HTTP_ERROR = "http_error"
    UNREACHABLE = "unreachable"
    TIMEOUT = "timeout"
    RESTING = "resting"
    BUSY = "busy"
    CANCELLED = "cancelled"


WARNED = frozenset({Outcome.MALFORMED, Outcome.HTTP_ERROR, Outcome.UNREACHABLE})
"""The outcomes an operator must mend, so the log names them (a timeout is logged when the
model is left to rest, a refusal is the model's own say and goes on the ack)."""
Count = Callable[[Outcome], None]
"""Counts one call by how it ended."""


def uncounted(outcome: Outcome) -> None:
    """Counts nothing (a client without metrics: tests, benchmarks, the rebuild)."""


class ModelClient:
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
        self.endpoint = f"{url.rstrip('/')}/chat/completions"
        self.model = model
        self.timeout_seconds = timeout_seconds
        self.count = count
        self.resting_until = 0.0
        """Until when (`time.monotonic`) every call is refused at once."""
        self._rest_reason = ""
        self._impatient: dict[bool, tuple[float, int]] = {False: (0.0, 0), True: (0.0, 0)}
        """For the events' questions (False) and for the reads' (True): until when
        (`time.monotonic`) a caller that waits no longer than how many ms does not ask, the
        model having given no answer within that lately (`out_of_time`)."""
        self._headers = {"Authorization": f"Bearer {key}"} if key else {}
        self._secrets = quoted_anyhow(credentials_sent(url, key))
        self._slots = asyncio.Semaphore(concurrency)
        self.read_slots = max(1, concurrency // 2)
        """The calls reads may have in flight (`ask_aside`): the other slots are the events'."""
        self._reads = 0
        self._session: aiohttp.ClientSession | None = None
        self._warned: dict[Outcome, tuple[float, int]] = {}
        """Per kind: when it was last warned of, and how many calls ended so since."""

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

    def rest(self, seconds: float, why: str, detail: str) -> None:
        """Refuse every call for `seconds` (a rest already longer stands), saying the model
        `why`; the log says it once, with the `detail` of the call that began it."""
        until = time.monotonic() + seconds
        if seconds <= 0 or until <= self.resting_until:
            return
        begins = not self.resting  # the calls in flight with the one that began it: no warning
        self.resting_until = until
        self._rest_reason = f"{NOT_ASKED}: the model {why} and rests {seconds:g} s"
        if begins:
            log.warning(
                "the model %s (%s); resting it %g s, the rules answer meanwhile",
                why,
                detail,
                seconds,
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

    def rests_for(self, deadline_ms: int, read: bool = False) -> str | None:
        """Why a caller waiting `deadline_ms` (a `read`, or an event) does not ask now
        (`out_of_time`); None if it may."""
        until, within = self._impatient[read]
        if time.monotonic() < until and deadline_ms <= within:
            return (
                f"{NOT_ASKED}: the model gave no answer within {within} ms lately and rests"
                f" {REST_SECONDS:g} s"
            )
        return None

    async def ask(
        self, instructions: str, prompt: str, answer_type: type[AnswerModel]
    ) -> AnswerModel | str:
        """The model's answer to `prompt`, validated as `answer_type`; or why there is none."""
        if self.resting:
            self.count(Outcome.RESTING)
            return self._rest_reason
        try:
            outcome, answer = await self._call(instructions, prompt, answer_type)
        except asyncio.CancelledError:  # the event's deadline, or the worker stopping
            self.count(Outcome.CANCELLED)
            raise
        self.count(outcome)
        if outcome in WARNED:
            self._warn(outcome, str(answer))
        return answer

    @property
    def resting(self) -> bool:
        """Whether every call is refused at once now (`rest`)."""
        return time.monotonic() < self.resting_until

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

    async def _call(
        self, instructions: str, prompt: str, answer_type: type[AnswerModel]
    ) -> tuple[Outcome, AnswerModel | str]:
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
            if self.resting:  # it asked to wait while this call waited for its slot
                return Outcome.RESTING, self._rest_reason
            try:
                async with asyncio.timeout(self.timeout_seconds):
                    taken: dict[str, bool] = {}
                    sent = time.monotonic()
                    try:
                        exchanged = await self._exchange(orjson.dumps(body), taken)
                    except DROPPED:
                        if not taken.get(REUSED) or time.monotonic() - sent > CLOSED_IDLE_SECONDS:
                            raise  # the model may have the question already
                        exchanged = await self._exchange(orjson.dumps(body), {})
            except TimeoutError:
                return Outcome.TIMEOUT, f"{TIMED_OUT}: no answer within {self.timeout_seconds:g} s"
            except aiohttp.TooManyRedirects as error:
                return Outcome.HTTP_ERROR, self._redirected_too_often(error)
            except aiohttp.ClientResponseError as error:  # not HTTP: another service's port...
                reason = f"{MALFORMED}: not a readable HTTP response: {error.message}"
                return Outcome.MALFORMED, self._quoted(reason)
            except aiohttp.ClientPayloadError as error:  # a body cut short, an encoding broken
                reason = f"{MALFORMED}: the body cannot be read: {error}"
                return Outcome.MALFORMED, self._quoted(reason)
            except (aiohttp.ClientError, ValueError) as error:  # ValueError: a host IDNA refuses
                reason = f"the model could not be reached: {error or type(error).__name__}"
                return Outcome.UNREACHABLE, self._quoted(reason)
        if isinstance(exchanged, str):
            return Outcome.HTTP_ERROR, exchanged
        status, text, retry_after = exchanged
        if status != 200:  # a busy model's wait is kept however long the body it sent
            reason = self._quoted(f"HTTP {status} from the model: {text.decode(errors='replace')}")
            if status in BUSY:
                self.rest(rest_asked(retry_after), f"asked to wait (HTTP {status})", reason)
            return Outcome.HTTP_ERROR, reason
        if len(text) > MAX_ANSWER_BYTES:
            return Outcome.MALFORMED, f"{MALFORMED}: over {MAX_ANSWER_BYTES:,} bytes"
        answer = answer_in(text, answer_type)
        if isinstance(answer, str):  # why, which may quote the body (not a chat completion...)
            answer = answer_in(self._hidden(text), answer_type)
        if isinstance(answer, str):
            return (Outcome.REFUSED if answer.startswith(REFUSED) else Outcome.MALFORMED), answer
        return Outcome.ANSWERED, answer

    async def _exchange(
        self, body: bytes, taken: dict[str, bool]
    ) -> tuple[int, bytes, str | None] | str:
        """One POST of `body`: the answer's status, body and `Retry-After`; or why a redirect
        leaves it without one. `taken` learns whether it went on a kept-alive connection
        (`REUSED`)."""
        post = self._open().post(
            self.endpoint, data=body, headers=self._headers, trace_request_ctx=taken
        )
        async with post as response:
            if response.method != "POST":
                return self._redirected(response)
            return response.status, await _read(response), response.headers.get("Retry-After")

    def _redirected(self, response: aiohttp.ClientResponse) -> str:
        """Why a POST redirected into another method has no answer (aiohttp, as browsers do,
        follows a 301, 302 or 303 with a GET, which a model's endpoint refuses)."""
        first = response.history[0] if response.history else response
        endpoint, target = (without_credentials(str(url)) for url in (self.endpoint, response.url))
        return _cut(
            f"HTTP {first.status} from the model: {endpoint} redirects to {target}, "
            "and a redirected POST is sent as a GET: set RUMOURMILL_MODEL_URL to where it leads"
        )

    def _redirected_too_often(self, error: aiohttp.TooManyRedirects) -> str:
        """Why a redirect loop has no answer (aiohttp's own message says only `0, message=''`
        and a URL)."""
        first = error.history[0].status if error.history else error.status
        return _cut(
            f"HTTP {first} from the model: {without_credentials(self.endpoint)} redirects "
            f"{len(error.history)} times without an answer: set RUMOURMILL_MODEL_URL to the "
            "endpoint itself"
        )

    def _quoted(self, reason: str) -> str:
        """`reason`, which may quote what the server sent (a body, a header, a status line),
        with the credentials sent hidden, then cut (`_hidden`)."""
        return _cut(self._hidden(reason.encode()).decode(errors="replace"))

    def _hidden(self, body: bytes) -> bytes:
        """`body` with the credentials sent hidden, for a reason to quote: some servers quote
        the `Authorization` header in their 401, and a reason goes on acks, a topic and the log
        (hidden before the reason is cut, so no part of a secret is left either)."""
        if self._secrets is None:
            return body
        return self._secrets.sub(HIDDEN.encode(), body)

    def _warn(self, outcome: Outcome, reason: str) -> None:
        """Log `reason`, unless a call of the same kind was logged less than
        `WARNING_INTERVAL` ago: then only count it, for the next warning to say."""
        now = time.monotonic()
        last, since = self._warned.get(outcome, (-WARNING_INTERVAL, 0))
        if now - last < WARNING_INTERVAL:
            self._warned[outcome] = (last, since + 1)
            return
        more = f" ({since} more of this kind since the last warning)" if since else ""
        log.warning("the model gave no answer: %s%s", reason, more)
        self._warned[outcome] = (now, 0)

    def _open(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            self._session = aiohttp.ClientSession(
                headers={"Content-Type": "application/json"},
                timeout=aiohttp.ClientTimeout(total=None),  # `ask` bounds each call itself
                trace_configs=[_reuse_noted()],
            )
        return self._session

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()


def _reuse_noted() -> aiohttp.TraceConfig:
    """Notes in a call's `trace_request_ctx` that it took up a kept-alive connection (`REUSED`):
    only such a call is sent again when its connection drops (`DROPPED`)."""

    async def reused(
        session: aiohttp.ClientSession,
        context: SimpleNamespace,
        params: aiohttp.TraceConnectionReuseconnParams,
    ) -> None:
        context.trace_request_ctx[REUSED] = True

    trace = aiohttp.TraceConfig()
    trace.on_connection_reuseconn.append(reused)
    return trace


async def _read(response: aiohttp.ClientResponse) -> bytes:
    """The response's body, decompressed; only its first `MAX_ANSWER_BYTES` and one more when it
    is longer (the caller refuses it: the rest is never read)."""
    body = bytearray()
    while chunk := await response.content.read(MAX_ANSWER_BYTES + 1 - len(body)):
        body += chunk
        if len(body) > MAX_ANSWER_BYTES:
            break
    return bytes(body)


def credentials_sent(url: str, key: str) -> tuple[bytes, ...]:
    """What the model is sent of the key and of the URL's user and password: the key, the
    password (or, with none, the user: a token given as the user alone; a user beside a password
    is an account's name, as often an ordinary word as not), and the basic-auth token they make."""
    sent = [key]
    parts = urlsplit(url)
    if parts.username is not None or parts.password is not None:
        user, password = unquote(parts.username or ""), unquote(parts.password or "")
        token = b64encode(f"{user}:{password}".encode("latin-1", "replace")).decode()
        sent += [password or user, token]
    return tuple({secret.encode(): None for secret in sent if secret})


JSON_SHORT_ESCAPES = {
    '"': '\\"',
    "\\": "\\\\",
    "/": "\\/",
    "\b": "\\b",
    "\f": "\\f",
    "\n": "\\n",
    "\r": "\\r",
    "\t": "\\t",
}
"""The characters of a secret a JSON encoder may write as a backslash and one more character."""


def quoted_anyhow(secrets: tuple[bytes, ...]) -> re.Pattern[bytes] | None:
    """`secrets` as a quote of them may write them: as sent, or with any character escaped as
    JSON allows (`\\u002B` for `+`, as .NET's encoder writes it; `\\/` for `/`, as PHP's
    does), longest first, so none is left in part; None when nothing is sent."""
    if not secrets:
        return None
    ordered = sorted(secrets, key=len, reverse=True)
    return re.compile(b"|".join(b"".join(map(_escaped_anyhow, s.decode())) for s in ordered))


def _escaped_anyhow(character: str) -> bytes:
    """A pattern of `character` as written, or as JSON may escape it (hex of either case)."""
    utf16 = character.encode("utf-16-be")  # a surrogate pair beyond the first plane
    units = [int.from_bytes(utf16[at : at + 2], "big") for at in range(0, len(utf16), 2)]
    choices = [re.escape(character.encode()), b"".join(rb"\\u(?i:%04x)" % unit for unit in units)]
    if character in JSON_SHORT_ESCAPES:
        choices.append(re.escape(JSON_SHORT_ESCAPES[character].encode()))
    return b"(?:" + b"|".join(choices) + b")"


def rest_asked(retry_after: str | None) -> float:
    """The seconds a busy model asked to be left alone for: its `Retry-After`, in seconds or as
    an HTTP date, within 0 and `MAX_REST_SECONDS`; `REST_SECONDS` when it said nothing readable."""
    text = (retry_after or "").strip()
    if re.fullmatch(r"[0-9]+(\.[0-9]+)?", text):  # whole seconds, or (some APIs) decimals
        seconds = float(text)
    else:
        try:
            when = parsedate_to_datetime(text)
        except (TypeError, ValueError):
            return REST_SECONDS
        if when.tzinfo is None:
            when = when.replace(tzinfo=UTC)
        seconds = (when - datetime.now(UTC)).total_seconds()
    return min(max(seconds, 0.0), MAX_REST_SECONDS)


def answer_in(body: bytes, answer_type: type[AnswerModel]) -> AnswerModel | str:
    """The answer a chat-completions response body carries, or why it carries none."""
    chosen = _first_message(body)
    if chosen is None:
        return _cut(f"{MALFORMED}: not a chat completion: {body.decode(errors='replace')}")
    choice, message = chosen
    refusal: str | None = message.get("refusal")
    if refusal:
        return _cut(f"{REFUSED}: {refusal}")
    if choice.get("finish_reason") == "content_filter":
        return f"{REFUSED}: the answer was filtered"
    content: str | None = message.get("content")
    ended = _ended_early(choice)
    if content is None or not content.strip():
        return _cut(f"{REFUSED}: the model gave no answer{ended}")
    fenced = FENCED.match(content.strip())
    try:
        return answer_type.model_validate_json(fenced.group(1).strip() if fenced else content)
    except ValidationError as error:
        problem = explain(error, MALFORMED).removeprefix(f"{MALFORMED}: ")
        return _cut(f"{MALFORMED}{ended}: {problem}")


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


def _cut(reason: str) -> str:
    one_line = " ".join(reason.split())
    if len(one_line) <= REASON_CHARACTERS:
        return one_line
    return one_line[: REASON_CHARACTERS - 1] + "…"
