"""A JSON service over HTTP asked by the worker: the model (`streams.model_client`) and the
reranker (`streams.reranker`), each a client of this.

One client holds one HTTP session; at most its concurrency of calls are in flight and each gives
up after its timeout. What it answers is parsed by the caller's `Parse`; anything else is a
refusal, returned as the plain reason the caller passes on (an ack, a log line): the service
could not be reached or timed out, answered an HTTP error, or answered something that is not
what was asked for.

A service that asks to be left alone (HTTP 429 or 503, for its `Retry-After` or `REST_SECONDS`)
rests: until then every call is refused at once, so the caller's fallback answers without a
wait and the service is not pressed. An answer quoting the key or password sent shows `HIDDEN`.
A call whose kept-alive connection the server closed under it is sent again once (`DROPPED`).
Each call is counted by how it ended (`Outcome`), and what an operator must mend (an HTTP error,
a service out of reach, an answer that is not what was asked for) is logged, once a minute at
most for each kind.
"""

from __future__ import annotations

import asyncio
import re
import time
from base64 import b64encode
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from enum import StrEnum
from types import SimpleNamespace
from typing import TypeVar
from urllib.parse import unquote, urlsplit

import aiohttp
from mode import Service

from streams.logs import logger
from streams.settings import without_credentials

Answer = TypeVar("Answer")
Parse = Callable[[bytes], "Answer | str"]
"""What a service's answer says, from the body of its 200; or why it says nothing usable (a
reason beginning `REFUSED` is the service's own refusal, any other a malformed answer)."""

REASON_CHARACTERS = 300
"""A reason quoting the service is cut to this length (it goes on every ack it concerns)."""
TIMED_OUT = "timeout"
"""How the reason of a call that ran out of time begins."""
MALFORMED = "malformed answer"
"""How the reason of an answer that is not what was asked for begins."""
REFUSED = "refused"
"""How the reason of an answer the service refused (or left empty) begins."""
NOT_ASKED = "not asked"
"""How the reason of a call refused while the service rests begins."""
HIDDEN = "(hidden)"
"""What an answer's quote of the credentials sent shows instead (`credentials_sent`)."""
MAX_ANSWER_BYTES = 1 << 20
"""The most of a response body read (after decompression): a judgement's answer is a few
hundred bytes, a reranking's a few thousand, and a server sending hundreds of megabytes held
the event loop for seconds."""
REST_SECONDS = 30.0
"""How long a service rests that ran out of time, or asked to wait without saying how long."""
MAX_REST_SECONDS = 300.0
"""The longest rest a service's `Retry-After` is granted: its fallback answers meanwhile."""
DROPPED = (
    aiohttp.ServerDisconnectedError,
    aiohttp.ClientOSError,
    aiohttp.ClientConnectionResetError,
)
"""A connection closed under a call: a server closes a kept-alive connection it found idle
long enough (uvicorn, as vLLM runs it, after 5 s; aiohttp keeps one 15 s), and a call that
takes it up as it does is sent again once, on a new one, else it lost its judgement for good.
A call on a new connection is not: the service may have read it, and worked on it (or billed
it), before it went."""
CLOSED_IDLE_SECONDS = 0.5
"""How soon after it was sent a call on a kept-alive connection is dropped when the server had
closed that connection idle (`DROPPED`): sent again then; dropped later, the server read the
question and worked on it (a service that crashes on it), and it is not."""
REUSED = "reused"
"""The mark a call's `trace_request_ctx` gets when it takes up a kept-alive connection."""
BUSY = frozenset({429, 503})
"""The statuses of a service asking to be left alone for a while."""
WARNING_INTERVAL = 60.0
"""Seconds between two warnings of the same kind (one a call would flood the log)."""


class Outcome(StrEnum):
    """How a call ended, as counted (`rumourmill_model_calls_total`,
    `rumourmill_rerank_calls_total`)."""

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
service is left to rest, a refusal is the service's own say)."""
Count = Callable[[Outcome], None]
"""Counts one call by how it ended."""


def uncounted(outcome: Outcome) -> None:
    """Counts nothing (a client without metrics: tests, benchmarks, the rebuild)."""


class JsonService:
    """Posts JSON to one endpoint and parses what it answers."""

    def __init__(
        self,
        url: str,
        endpoint: str,
        key: str,
        timeout_seconds: float,
        concurrency: int,
        count: Count,
        name: str,
        setting: str,
        meanwhile: str,
    ) -> None:
        """`url` is the value of the variable `setting` (a redirect's reason names it),
        `endpoint` the path under it posted to, `name` what reasons and the log call the
        service (its logger's name too), and `meanwhile` what answers while it rests."""
        self.url = url
        self.endpoint = f"{url.rstrip('/')}/{endpoint}"
        self.timeout_seconds = timeout_seconds
        self.count = count
        self.name = name
        self.meanwhile = meanwhile
        self.setting = setting
        self.log = logger(name)
        self.resting_until = 0.0
        """Until when (`time.monotonic`) every call is refused at once."""
        self._rest_reason = ""
        self._headers = {"Authorization": f"Bearer {key}"} if key else {}
        self._secrets = quoted_anyhow(credentials_sent(url, key))
        self._slots = asyncio.Semaphore(concurrency)
        self._session: aiohttp.ClientSession | None = None
        self._warned: dict[Outcome, tuple[float, int]] = {}
        """Per kind: when it was last warned of, and how many calls ended so since."""

    def rest(self, seconds: float, why: str, detail: str) -> None:
        """Refuse every call for `seconds` (a rest already longer stands), saying the service
        `why`; the log says it once, with the `detail` of the call that began it."""
        until = time.monotonic() + seconds
        if seconds <= 0 or until <= self.resting_until:
            return
        begins = not self.resting  # the calls in flight with the one that began it: no warning
        self.resting_until = until
        self._rest_reason = f"{NOT_ASKED}: the {self.name} {why} and rests {seconds:g} s"
        if begins:
            self.log.warning(
                "the %s %s (%s); resting it %g s, %s",
                self.name,
                why,
                detail,
                seconds,
                self.meanwhile,
            )

    @property
    def resting(self) -> bool:
        """Whether every call is refused at once now (`rest`)."""
        return time.monotonic() < self.resting_until

    async def answer(self, body: bytes, parse: Parse[Answer]) -> Answer | str:
        """What the service answers to `body`, parsed; or why there is no answer."""
        if self.resting:
            self.count(Outcome.RESTING)
            return self._rest_reason
        try:
            outcome, answer = await self._call(body, parse)
        except asyncio.CancelledError:  # the caller's deadline, or the worker stopping
            self.count(Outcome.CANCELLED)
            raise
        self.count(outcome)
        if outcome in WARNED:
            self._warn(outcome, str(answer))
        return answer

    async def _call(self, body: bytes, parse: Parse[Answer]) -> tuple[Outcome, Answer | str]:
        async with self._slots:
            if self.resting:  # it asked to wait while this call waited for its slot
                return Outcome.RESTING, self._rest_reason
            try:
                async with asyncio.timeout(self.timeout_seconds):
                    taken: dict[str, bool] = {}
                    sent = time.monotonic()
                    try:
                        exchanged = await self._exchange(body, taken)
                    except DROPPED:
                        if not taken.get(REUSED) or time.monotonic() - sent > CLOSED_IDLE_SECONDS:
                            raise  # the service may have the question already
                        exchanged = await self._exchange(body, {})
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
                reason = f"the {self.name} could not be reached: {error or type(error).__name__}"
                return Outcome.UNREACHABLE, self._quoted(reason)
        if isinstance(exchanged, str):
            return Outcome.HTTP_ERROR, exchanged
        status, text, retry_after = exchanged
        if status != 200:  # a busy service's wait is kept however long the body it sent
            reason = f"HTTP {status} from the {self.name}: {text.decode(errors='replace')}"
            reason = self._quoted(reason)
            if status in BUSY:
                self.rest(rest_asked(retry_after), f"asked to wait (HTTP {status})", reason)
            return Outcome.HTTP_ERROR, reason
        if len(text) > MAX_ANSWER_BYTES:
            return Outcome.MALFORMED, f"{MALFORMED}: over {MAX_ANSWER_BYTES:,} bytes"
        answer = parse(text)
        if isinstance(answer, str):  # why, which may quote the body
            answer = parse(self._hidden(text))
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
        follows a 301, 302 or 303 with a GET, which the endpoint refuses)."""
        first = response.history[0] if response.history else response
        endpoint, target = (without_credentials(str(url)) for url in (self.endpoint, response.url))
        return cut(
            f"HTTP {first.status} from the {self.name}: {endpoint} redirects to {target}, "
            f"and a redirected POST is sent as a GET: set {self.setting} to where it leads"
        )

    def _redirected_too_often(self, error: aiohttp.TooManyRedirects) -> str:
        """Why a redirect loop has no answer (aiohttp's own message says only `0, message=''`
        and a URL)."""
        first = error.history[0].status if error.history else error.status
        return cut(
            f"HTTP {first} from the {self.name}: {without_credentials(self.endpoint)} redirects "
            f"{len(error.history)} times without an answer: set {self.setting} to the "
            "endpoint itself"
        )

    def _quoted(self, reason: str) -> str:
        """`reason`, which may quote what the server sent (a body, a header, a status line),
        with the credentials sent hidden, then cut (`_hidden`)."""
        return cut(self._hidden(reason.encode()).decode(errors="replace"))

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
        self.log.warning("the %s gave no answer: %s%s", self.name, reason, more)
        self._warned[outcome] = (now, 0)

    def _open(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            self._session = aiohttp.ClientSession(
                headers={"Content-Type": "application/json"},
                timeout=aiohttp.ClientTimeout(total=None),  # `_call` bounds each call itself
                trace_configs=[_reuse_noted()],
            )
        return self._session

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()


class ClosedAtStop(Service):
    """Closes the services' HTTP sessions when the worker stops: their kept-alive connections
    are let go then, not left to the process's end (or, in a process that goes on, to aiohttp's
    `Unclosed client session` at collection)."""

    def __init__(self, services: Sequence[JsonService]) -> None:
        super().__init__()
        self.services = services

    async def on_stop(self) -> None:
        for service in self.services:
            await service.close()


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
    """What a service is sent of the key and of the URL's user and password: the key, the
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
    """The seconds a busy service asked to be left alone for: its `Retry-After`, in seconds or as
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


def cut(reason: str) -> str:
    one_line = " ".join(reason.split())
    if len(one_line) <= REASON_CHARACTERS:
        return one_line
    return one_line[: REASON_CHARACTERS - 1] + "…"
