"""The model client against real HTTP servers on 127.0.0.1 that misbehave as models and their
proxies do: a model asking to wait, an endless answer, a redirect, a broken encoding; what the
operator sees of it in the log and in `GET /metrics`' counts."""

from __future__ import annotations

import asyncio
import base64
import gzip
import logging
import time
import tracemalloc
import zlib
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime
from typing import TypeVar

import pytest
from aiohttp import web

from schemas.judgements import FeelingAnswer
from streams import json_service
from streams.json_service import (
    MAX_ANSWER_BYTES,
    MAX_REST_SECONDS,
    REST_SECONDS,
    ClosedAtStop,
    credentials_sent,
    quoted_anyhow,
    rest_asked,
)
from streams.metrics import Metrics
from streams.model_client import ModelClient
from tests.model_server import Handler, serving
from tests.support import samples_of

ANSWER = b'{"choices": [{"message": {"content": "{\\"feeling\\": 0.5, \\"arousal\\": 0.25}"}}]}'
Result = TypeVar("Result")


def asking(
    handler: Handler, use: Callable[[ModelClient], Awaitable[Result]], **options: float
) -> Result:
    """`use` run with a client of a server whose every call `handler` answers."""

    async def run() -> Result:
        async with serving(handler) as url:
            client = ModelClient(url, "m", **options)  # type: ignore[arg-type]
            try:
                return await use(client)
            finally:
                await client.close()

    return asyncio.run(run())


def ask(client: ModelClient) -> Awaitable[FeelingAnswer | str]:
    return client.ask("instructions", "prompt", FeelingAnswer)


def test_a_model_asking_to_wait_is_left_alone_as_long_as_it_asked_then_asked_again() -> None:
    calls: list[float] = []

    async def busy_once(request: web.Request) -> web.Response:
        calls.append(time.monotonic())
        if len(calls) == 1:
            return web.Response(status=429, text="slow down", headers={"Retry-After": "1"})
        return web.Response(body=ANSWER, content_type="application/json")

    async def use(client: ModelClient) -> list[FeelingAnswer | str]:
        refused, resting = await ask(client), await ask(client)
        await asyncio.sleep(1.1)
        return [refused, resting, await ask(client)]

    refused, resting, answered = asking(busy_once, use)
    assert refused == "HTTP 429 from the model: slow down"
    assert resting == "not asked: the model asked to wait (HTTP 429) and rests 1 s"
    assert answered == FeelingAnswer(feeling=0.5, arousal=0.25)
    assert len(calls) == 2  # the call while it rested never reached it


def test_a_model_failing_otherwise_is_asked_at_every_call() -> None:
    calls: list[float] = []

    async def failing(request: web.Request) -> web.Response:
        calls.append(time.monotonic())
        return web.Response(status=500, text="internal error")

    async def use(client: ModelClient) -> list[FeelingAnswer | str]:
        return [await ask(client) for _ in range(3)]

    assert asking(failing, use) == ["HTTP 500 from the model: internal error"] * 3
    assert len(calls) == 3


def test_retry_after_is_read_in_seconds_or_as_a_date_within_bounds() -> None:
    in_90_seconds = format_datetime(datetime.now(UTC) + timedelta(seconds=90), usegmt=True)
    assert 88 <= rest_asked(in_90_seconds) <= 90
    assert rest_asked("12") == 12
    assert rest_asked("1.5") == 1.5  # not the 30 s of a Retry-After it could not read
    assert rest_asked("0") == 0
    assert rest_asked("86400") == MAX_REST_SECONDS  # a day of rules only: not granted
    past = format_datetime(datetime.now(UTC) - timedelta(hours=1), usegmt=True)
    assert rest_asked(past) == 0
    assert rest_asked(None) == rest_asked("soon") == rest_asked("-5") == REST_SECONDS


def test_an_endless_answer_is_refused_after_its_first_megabyte_not_read_to_the_timeout() -> None:
    sent: list[int] = []

    async def endless(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": "application/json"})
        await response.prepare(request)
        chunk = b" " * 65536
        try:
            while True:
                await response.write(chunk)
                sent.append(len(chunk))
        except ConnectionError:  # the client stopped reading and closed the connection
            return response

    async def use(client: ModelClient) -> tuple[FeelingAnswer | str, float]:
        started = time.monotonic()
        return await ask(client), time.monotonic() - started

    refusal, took = asking(endless, use, timeout_seconds=30)
    assert refusal == f"malformed answer: over {MAX_ANSWER_BYTES:,} bytes"
    assert took < 10  # not the 30 s timeout


def test_a_compressed_answer_is_bounded_as_it_is_inflated_not_after() -> None:
    """A gzip body of 200 KB that inflates to 200 MB: aiohttp before 3.13.3 inflated each read
    whole (CVE-2025-69223), so the megabyte bound came after the memory was taken."""
    squeeze = zlib.compressobj(wbits=31)  # gzip
    zeros = bytes(1 << 20)
    bomb = b"".join(squeeze.compress(zeros) for _ in range(200)) + squeeze.flush()

    async def inflating(request: web.Request) -> web.Response:
        headers = {"Content-Type": "application/json", "Content-Encoding": "gzip"}
        return web.Response(body=bomb, headers=headers)

    tracemalloc.start()
    try:
        refusal = asking(inflating, ask)
        _, most_held = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert refusal == f"malformed answer: over {MAX_ANSWER_BYTES:,} bytes"
    assert most_held < 32 << 20


def test_a_redirect_that_turns_the_post_into_a_get_says_where_to_point_the_model() -> None:
    async def moved(request: web.Request) -> web.Response:
        raise web.HTTPMovedPermanently("/v2/chat/completions")

    async def use(client: ModelClient) -> tuple[str, FeelingAnswer | str]:
        return client.endpoint, await ask(client)

    endpoint, refusal = asking(moved, use)
    new = endpoint.replace("/v1/", "/v2/")
    assert refusal == (
        f"HTTP 301 from the model: {endpoint} redirects to {new}, and a redirected POST is sent "
        "as a GET: set RUMOURMILL_MODEL_URL to where it leads"
    )


def test_a_redirect_to_another_host_takes_no_key_along() -> None:
    """A 307 keeps the POST: the host it leads to gets the question, not the model's key."""
    seen: list[str | None] = []

    async def elsewhere(request: web.Request) -> web.Response:
        seen.append(request.headers.get("Authorization"))
        return web.Response(body=ANSWER, content_type="application/json")

    async def run() -> FeelingAnswer | str:
        async with serving(elsewhere) as other:
            target = other.replace("127.0.0.1", "localhost") + "/chat/completions"

            async def moved(request: web.Request) -> web.Response:
                raise web.HTTPTemporaryRedirect(target)

            async with serving(moved) as url:
                client = ModelClient(url, "m", "sk-secret")
                try:
                    return await ask(client)
                finally:
                    await client.close()

    assert asyncio.run(run()) == FeelingAnswer(feeling=0.5, arousal=0.25)
    assert seen == [None]


def test_a_redirect_loop_says_so() -> None:
    """aiohttp gives up after 10 redirects with `0, message='', url=...`, which the reason
    quoted as the model being out of reach."""

    async def loop(request: web.Request) -> web.Response:
        raise web.HTTPTemporaryRedirect(str(request.url))

    async def use(client: ModelClient) -> tuple[str, FeelingAnswer | str]:
        return client.endpoint, await ask(client)

    endpoint, refusal = asking(loop, use)
    assert refusal == (
        f"HTTP 307 from the model: {endpoint} redirects 10 times without an answer: set "
        "RUMOURMILL_MODEL_URL to the endpoint itself"
    )


def test_a_user_and_password_in_the_model_url_are_sent_and_never_shown(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """`http://USER:PASSWORD@HOST/v1` reaches a model behind basic auth. A refusal's reason goes
    on the acks, the judgements topic and the log, where a password has no place."""
    sent: list[str | None] = []

    async def moved(request: web.Request) -> web.Response:
        sent.append(request.headers.get("Authorization"))
        raise web.HTTPMovedPermanently("/v2/chat/completions")

    async def run() -> tuple[str, FeelingAnswer | str]:
        async with serving(moved) as url:
            client = ModelClient(url.replace("http://", "http://mill:hunter2@"), "m")
            try:
                return url, await ask(client)
            finally:
                await client.close()

    with caplog.at_level(logging.WARNING, logger="rumourmill.model"):
        url, refusal = asyncio.run(run())
    assert sent == [f"Basic {base64.b64encode(b'mill:hunter2').decode()}"]
    assert refusal == (
        f"HTTP 301 from the model: {url}/chat/completions redirects to "
        f"{url.replace('/v1', '/v2')}/chat/completions, and a redirected POST is sent as a GET: "
        "set RUMOURMILL_MODEL_URL to where it leads"
    )
    [warning] = caplog.records
    assert refusal in warning.getMessage() and "hunter2" not in warning.getMessage()


def test_an_answer_whose_encoding_is_broken_is_malformed_not_unreachable() -> None:
    async def broken_gzip(request: web.Request) -> web.Response:
        return web.Response(
            body=b"not gzip at all",
            headers={"Content-Type": "application/json", "Content-Encoding": "gzip"},
        )

    refusal = asking(broken_gzip, ask)
    assert isinstance(refusal, str)
    assert refusal.startswith("malformed answer: the body cannot be read: ")


def test_failures_are_logged_once_a_minute_a_kind_and_every_call_is_counted(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(json_service, "WARNING_INTERVAL", 2.0)
    metrics = Metrics()
    status = [500]

    async def answering(request: web.Request) -> web.Response:
        if status[0] != 200:
            return web.Response(status=status[0], text="down")
        return web.Response(body=ANSWER, content_type="application/json")

    async def use(client: ModelClient) -> None:
        client.count = metrics.model_call
        for _ in range(4):
            await ask(client)
        await asyncio.sleep(2.1)
        await ask(client)  # a warning again, saying how many it left out
        status[0] = 200
        await ask(client)
        status[0] = 503  # a rest of REST_SECONDS: the next call is not asked
        await ask(client)
        await ask(client)

    with caplog.at_level(logging.WARNING, logger="rumourmill.model"):
        asking(answering, use)
    assert [record.getMessage() for record in caplog.records] == [
        "the model gave no answer: HTTP 500 from the model: down",
        "the model gave no answer: HTTP 500 from the model: down (3 more of this kind since the "
        "last warning)",
        f"the model asked to wait (HTTP 503) (HTTP 503 from the model: down); resting it "
        f"{REST_SECONDS:g} s, the rules answer meanwhile",
    ]
    samples = samples_of(metrics.exposition().decode())
    counted = {
        labels[0][1]: value
        for (name, labels), value in samples.items()
        if name == "rumourmill_model_calls_total"
    }
    assert counted == {
        "answered": 1,
        "http_error": 6,
        "resting": 1,
        "busy": 0,
        "refused": 0,
        "malformed": 0,
        "unreachable": 0,
        "timeout": 0,
        "cancelled": 0,
    }


def test_a_model_that_never_answers_holds_no_more_connections_than_the_calls_allowed() -> None:
    """Twelve calls, three at a time, to a model that never answers: each call's connection
    closes with its timeout, so the model never holds more than three."""
    connections: list[asyncio.BaseTransport] = []
    most_open = 0

    def open_now() -> int:
        return sum(not transport.is_closing() for transport in connections)

    async def never_answers(request: web.Request) -> web.Response:
        assert request.transport is not None
        connections.append(request.transport)
        await asyncio.Event().wait()
        raise AssertionError("never answered")

    async def use(client: ModelClient) -> list[FeelingAnswer | str]:
        nonlocal most_open
        calls = asyncio.gather(*(ask(client) for _ in range(12)))
        while not calls.done():
            most_open = max(most_open, open_now())
            await asyncio.sleep(0.02)
        await asyncio.sleep(0.1)
        return await calls

    answers = asking(never_answers, use, concurrency=3, timeout_seconds=0.3)
    assert answers == ["timeout: no answer within 0.3 s"] * 12
    assert len(connections) == 12
    assert most_open == 3
    assert open_now() == 0


def test_a_read_never_waits_for_a_slot_the_events_questions_hold() -> None:
    """Both slots held by events' questions the model leaves hanging: a read (the reply check)
    is told at once that the model is busy, and counted so; it waited in line behind them,
    until their timeout."""
    hanging = asyncio.Event()
    metrics = Metrics()

    async def never_answers(request: web.Request) -> web.Response:
        hanging.set()
        await asyncio.Event().wait()
        raise AssertionError("never answered")

    async def use(client: ModelClient) -> FeelingAnswer | str:
        client.count = metrics.model_call
        events = [asyncio.ensure_future(ask(client)) for _ in range(2)]
        await asyncio.wait_for(hanging.wait(), 10)
        await asyncio.sleep(0.1)  # both calls hold their slots
        try:
            return await asyncio.wait_for(
                client.ask_aside("instructions", "prompt", FeelingAnswer), 5
            )
        finally:
            for event in events:
                event.cancel()
            await asyncio.gather(*events, return_exceptions=True)

    answer = asking(never_answers, use, concurrency=2, timeout_seconds=60)
    assert isinstance(answer, str) and "a read never waits for one" in answer
    samples = samples_of(metrics.exposition().decode())
    assert samples[("rumourmill_model_calls_total", (("outcome", "busy"),))] == 1


def test_calls_waiting_for_a_slot_are_not_sent_once_the_model_asked_to_wait(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Twelve questions, two slots: the two in flight are told 429. The ten waiting for a slot
    went out one after the other all the same, each told 429 again: a rate-limited hosted API
    pressed as hard as ever (and one rest warning a call)."""
    calls: list[float] = []

    async def rate_limited(request: web.Request) -> web.Response:
        calls.append(time.monotonic())
        await asyncio.sleep(0.1)  # both slots taken, the other calls waiting
        return web.Response(status=429, text="rate limit", headers={"Retry-After": "60"})

    async def use(client: ModelClient) -> list[FeelingAnswer | str]:
        return list(await asyncio.gather(*(ask(client) for _ in range(12))))

    with caplog.at_level(logging.WARNING, logger="rumourmill.model"):
        answers = asking(rate_limited, use, concurrency=2)
    assert len(calls) == 2
    rests = [record.getMessage() for record in caplog.records if "resting" in record.getMessage()]
    assert rests == [
        "the model asked to wait (HTTP 429) (HTTP 429 from the model: rate limit); resting it "
        "60 s, the rules answer meanwhile"
    ]
    assert answers[:2] == ["HTTP 429 from the model: rate limit"] * 2
    assert answers[2:] == ["not asked: the model asked to wait (HTTP 429) and rests 60 s"] * 10


QUOTINGS: dict[str, Callable[[str], str]] = {
    "as-sent": lambda sent: sent,
    "solidus-escaped": lambda sent: sent.replace("/", "\\/"),  # PHP's JSON encoder
    "unicode-escaped": lambda sent: sent.replace("+", "\\u002B").replace("=", "\\u003d"),
}
"""How a server quotes the `Authorization` header it was sent, by name."""


@pytest.mark.parametrize(
    ("key", "credentials", "quoting"),
    [
        ("sk-proj-" + "k3y" * 40, "", "as-sent"),
        ("", "mill:hunter2-" + "p4ss" * 20, "as-sent"),
        ("", "gw-token-" + "t0k" * 20, "as-sent"),
        ("sk-proj-Ab/cD+ef/" + "k3y" * 40, "", "solidus-escaped"),
        ("", "mill:s3cr3t%3F%3E" + "p4ss" * 20, "solidus-escaped"),
        ("sk-proj-Ab/cD+ef/" + "k3y" * 40, "", "unicode-escaped"),
        ("", "mill:s3cr3t~~" + "p4ss" * 20, "unicode-escaped"),
    ],
    ids=[
        "bearer-key",
        "password-in-url",
        "user-alone",
        "solidus-escaped-key",
        "solidus-escaped-basic",
        "unicode-escaped-key",
        "unicode-escaped-basic",
    ],
)
def test_a_server_quoting_the_credentials_sent_has_them_hidden_in_every_reason(
    key: str, credentials: str, quoting: str, caplog: pytest.LogCaptureFixture
) -> None:
    """Some servers and proxies quote the `Authorization` header they were sent in an error;
    a reason quoting it goes on acks, the judgements topic and the log, cut to 300 characters
    (these bodies say enough first that a cut falls inside the secret). A token given as the
    URL's user alone is sent as basic auth with no password, and a JSON encoder may escape a
    character of it: PHP's writes a `/` as `\\/`, .NET's a `+` as `\\u002B` (a key, a
    basic-auth token, hold them)."""
    sent: list[str] = []
    padding = "x" * 200
    quote = QUOTINGS[quoting]

    async def quoting_server(request: web.Request) -> web.Response:
        sent.append(request.headers["Authorization"])
        quoted = quote(sent[-1])
        if len(sent) == 1:
            return web.Response(status=401, text=f"{padding} bad credentials: {quoted}")
        return web.Response(body=f"{padding} not allowed: {quoted}".encode())

    async def run() -> list[FeelingAnswer | str]:
        async with serving(quoting_server) as url:
            client = ModelClient(url.replace("http://", f"http://{credentials}@"), "m", key)
            try:
                return [await ask(client), await ask(client)]
            finally:
                await client.close()

    with caplog.at_level(logging.WARNING, logger="rumourmill.model"):
        unauthorised, unreadable = asyncio.run(run())
    scheme, token = sent[0].split()
    assert quote(token) != token if quoting != "as-sent" else True
    shown = [str(unauthorised), str(unreadable), *(r.getMessage() for r in caplog.records)]
    assert not [text for text in shown if quote(token)[:12] in text]
    assert not [text for text in shown if token[:12] in text]
    assert unauthorised == f"HTTP 401 from the model: {padding} bad credentials: {scheme} (hidden)"
    assert unreadable == (
        f"malformed answer: not a chat completion: {padding} not allowed: {scheme} (hidden)"
    )


async def tool_calls(request: web.Request) -> web.Response:
    message = {"content": None, "tool_calls": [{"id": "1", "type": "function"}]}
    return web.json_response({"choices": [{"message": message, "finish_reason": "tool_calls"}]})


async def cut_at_token_limit(request: web.Request) -> web.Response:
    message = {"content": '{"feeling": 0.5, "aro'}
    return web.json_response({"choices": [{"message": message, "finish_reason": "length"}]})


async def no_choices(request: web.Request) -> web.Response:
    return web.json_response({"choices": []})


async def streamed(request: web.Request) -> web.Response:
    body = b'data: {"choices": [{"delta": {"content": "{}"}}]}\n\ndata: [DONE]\n\n'
    return web.Response(body=body, content_type="text/event-stream")


async def text_plain(request: web.Request) -> web.Response:
    return web.Response(body=ANSWER, content_type="text/plain")


async def gzipped(request: web.Request) -> web.Response:
    body = gzip.compress(ANSWER)
    return web.Response(body=body, headers={"Content-Encoding": "gzip"})


async def reset_mid_body(request: web.Request) -> web.StreamResponse:
    response = web.StreamResponse(headers={"Content-Length": str(len(ANSWER))})
    await response.prepare(request)
    await response.write(ANSWER[:20])
    assert request.transport is not None
    request.transport.close()
    return response


async def trickling(request: web.Request) -> web.StreamResponse:
    """A byte every 50 ms, for 30 s: each read gets something, the answer never comes."""
    response = web.StreamResponse(headers={"Content-Type": "application/json"})
    await response.prepare(request)
    for _ in range(600):
        await response.write(b" ")
        await asyncio.sleep(0.05)
    return response


@pytest.mark.parametrize(
    ("handler", "expected"),
    [
        (tool_calls, "refused: the model gave no answer (finish_reason tool_calls)"),
        (
            cut_at_token_limit,
            "malformed answer (finish_reason length): not valid JSON: EOF while parsing a string "
            "at line 1 column 21",
        ),
        (no_choices, 'malformed answer: not a chat completion: {"choices": []}'),
        (
            streamed,
            'malformed answer: not a chat completion: data: {"choices": [{"delta": {"content": '
            '"{}"}}]} data: [DONE]',
        ),
        (text_plain, FeelingAnswer(feeling=0.5, arousal=0.25)),
        (gzipped, FeelingAnswer(feeling=0.5, arousal=0.25)),
        (reset_mid_body, "malformed answer: the body cannot be read: Response payload is not"),
        (trickling, "timeout: no answer within 0.5 s"),
    ],
    ids=lambda value: getattr(value, "__name__", "expected"),
)
def test_what_real_servers_answer_is_an_answer_or_a_reason_saying_what_happened(
    handler: Handler, expected: FeelingAnswer | str
) -> None:
    async def use(client: ModelClient) -> tuple[FeelingAnswer | str, float]:
        started = time.monotonic()
        return await ask(client), time.monotonic() - started

    answer, took = asking(handler, use, timeout_seconds=0.5)
    if isinstance(expected, str):
        assert isinstance(answer, str) and answer.startswith(expected)
    else:
        assert answer == expected
    assert took < 2  # a trickle of bytes does not stretch the timeout


async def asked_over_a_socket(
    serve: Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]], calls: int
) -> list[FeelingAnswer | str]:
    """`calls` questions, one after the other, of a model that `serve` plays byte by byte on a
    socket of its own (what no HTTP server library lets a test do: close mid-exchange, speak
    another protocol)."""
    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    client = ModelClient(f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}/v1", "m")
    try:
        return [await ask(client) for _ in range(calls)]
    finally:
        await client.close()
        server.close()


async def question_read(reader: asyncio.StreamReader) -> int:
    """Read one POST off `reader`, its head and body: the body's length."""
    head = await reader.readuntil(b"\r\n\r\n")
    length = next(
        int(line.split(b":")[1])
        for line in head.lower().splitlines()
        if line.startswith(b"content-length:")
    )
    await reader.readexactly(length)
    return length


async def answered(writer: asyncio.StreamWriter) -> None:
    """Answer the question read off a socket with `ANSWER`, keeping the connection alive."""
    writer.write(
        b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
        b"Content-Length: %d\r\n\r\n%s" % (len(ANSWER), ANSWER)
    )
    await writer.drain()


def test_a_port_that_does_not_speak_http_is_a_malformed_answer_not_an_http_400() -> None:
    """RUMOURMILL_MODEL_URL pointing at another service's port: aiohttp reads its greeting as a
    `400`, which the reason quoted as the model out of reach with an HTTP 400 it never sent."""

    async def greet(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(b"SSH-2.0-OpenSSH_9.6\r\n")
        await writer.drain()
        writer.close()

    [refusal] = asyncio.run(asked_over_a_socket(greet, 1))
    assert isinstance(refusal, str)
    assert refusal.startswith("malformed answer: not a readable HTTP response: ")
    assert "b'SSH-2.0-OpenSSH_9.6'" in refusal  # aiohttp's words around it vary by release


def test_a_kept_alive_connection_the_model_closes_as_it_is_reused_is_not_a_lost_judgement() -> None:
    """A server closes a connection it kept alive once idle long enough (uvicorn, as vLLM runs
    it, after 5 s); a call taking it up just then was told `the model could not be reached:
    Server disconnected`, and its judgement went to the rules for good (it is recorded)."""
    connections: list[int] = []  # the requests each connection carried

    async def closing_the_second(
        reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        connections.append(0)
        try:
            while True:
                await question_read(reader)
                connections[-1] += 1
                if connections[-1] == 2:  # its idle time out as the call came
                    return
                await answered(writer)
        finally:
            writer.close()

    answers = asyncio.run(asked_over_a_socket(closing_the_second, 2))
    assert answers == [FeelingAnswer(feeling=0.5, arousal=0.25)] * 2
    assert connections == [2, 1]  # the second call again, on a connection of its own


def test_a_call_whose_new_connection_the_model_drops_is_not_sent_again() -> None:
    """A model that read the whole question on a new connection, then dropped it without an
    answer (crashed mid-answer, a proxy cut it), was sent it a second time: a model that
    crashes on a question crashed twice, and a paid one billed twice. Only a call that took up
    a kept-alive connection is sent again (above)."""
    questions: list[int] = []

    async def reading_then_dropping(
        reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        questions.append(await question_read(reader))
        writer.close()

    answers = asyncio.run(asked_over_a_socket(reading_then_dropping, 1))
    assert answers == ["the model could not be reached: Server disconnected"]
    assert len(questions) == 1


def test_a_user_beside_a_password_is_an_account_name_and_shows() -> None:
    """Hidden, an account name such as `openai` blanked every mention of the word in a reason
    (`invalid model for (hidden) account`), and a user `a` every letter a; alone, with no
    password, the user is a token and is hidden."""
    hidden = credentials_sent("http://openai:sk-longsecret123@127.0.0.1/v1", "")
    assert b"sk-longsecret123" in hidden and b"openai" not in hidden
    assert b"gw-token-0123" in credentials_sent("http://gw-token-0123@127.0.0.1/v1", "")


@pytest.mark.parametrize(
    "quoted",
    [
        b"pa\tss+w/rd",  # as sent
        b"pa\\tss+w/rd",  # the tab written short, as every JSON encoder writes it
        b"pa\\u0009ss\\u002Bw\\/rd",  # each escaped otherwise, hex of either case
        b"p\\u0061\\tss\\u002bw\\u002Frd",
    ],
)
def test_a_secret_is_hidden_however_json_escapes_its_characters(quoted: bytes) -> None:
    hidden = quoted_anyhow(credentials_sent("http://mill:pa%09ss%2Bw%2Frd@127.0.0.1/v1", ""))
    assert hidden is not None
    assert hidden.sub(b"(hidden)", b"bad password " + quoted + b"!") == b"bad password (hidden)!"


def test_a_kept_alive_call_the_model_drops_after_working_on_it_is_not_sent_again() -> None:
    """A model that read a question on a kept-alive connection, worked on it and crashed was
    sent it again as if the server had closed the connection idle: a question that crashes the
    model crashed it twice (and a paid one billed twice). Only a drop right after sending
    (`CLOSED_IDLE_SECONDS`) is an idle close."""
    questions: list[int] = []

    async def crashing_on_the_second(
        reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        try:
            while True:
                questions.append(await question_read(reader))
                if len(questions) >= 2:  # works on it, then crashes
                    await asyncio.sleep(json_service.CLOSED_IDLE_SECONDS + 0.3)
                    return
                await answered(writer)
        finally:
            writer.close()

    answers = asyncio.run(asked_over_a_socket(crashing_on_the_second, 2))
    assert answers == [
        FeelingAnswer(feeling=0.5, arousal=0.25),
        "the model could not be reached: Server disconnected",
    ]
    assert len(questions) == 2


@pytest.mark.parametrize(
    "unreadable",
    [
        b"HTTP/1.1 401 Unauthorized\r\nTransfer-Encoding: chunked\r\n\r\n%s\r\n",
        b"%s\r\n\r\n",
    ],
    ids=["broken-chunking", "no-status-line"],
)
def test_a_response_that_is_not_http_quoting_the_key_has_it_hidden(unreadable: bytes) -> None:
    """A reason quoting what aiohttp could not parse (a chunk size, a status line) showed the key
    a server echoed there, on the ack, the judgements topic and the log."""
    key = "sk-live-0123456789abcdef"

    async def echoing(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await reader.readuntil(b"\r\n\r\n")
        sent = next(line for line in head.splitlines() if line.startswith(b"Authorization:"))
        writer.write(unreadable % (b'{"error": "invalid key: %s"}' % sent.split(b": ", 1)[1]))
        await writer.drain()
        writer.close()

    async def run() -> FeelingAnswer | str:
        server = await asyncio.start_server(echoing, "127.0.0.1", 0)
        client = ModelClient(f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}", "m", key)
        try:
            return await ask(client)
        finally:
            await client.close()
            server.close()

    reason = asyncio.run(run())
    assert isinstance(reason, str) and reason.startswith("malformed answer: not a readable HTTP")
    assert key[:8] not in reason and "(hidden)" in reason


def test_a_busy_model_sending_a_long_body_is_left_alone_as_long_as_it_asked() -> None:
    """A 429 whose body is over the megabyte an answer may take was a malformed answer: its
    `Retry-After` was not kept, and the busy model was asked again at once."""
    calls: list[float] = []

    async def busy(request: web.Request) -> web.Response:
        calls.append(time.monotonic())
        body = b"x" * (MAX_ANSWER_BYTES + 10)
        return web.Response(status=429, body=body, headers={"Retry-After": "60"})

    async def use(client: ModelClient) -> list[FeelingAnswer | str]:
        return [await ask(client), await ask(client)]

    refused, resting = asking(busy, use)
    assert isinstance(refused, str) and refused.startswith("HTTP 429 from the model: xxx")
    assert resting == "not asked: the model asked to wait (HTTP 429) and rests 60 s"
    assert len(calls) == 1


def test_a_stopping_worker_closes_its_connections_to_the_model() -> None:
    """The model's server sees its kept-alive connection closed when the worker's services
    stop (`ClosedAtStop`), not when the process ends."""
    connections: list[asyncio.BaseTransport] = []

    async def kept_alive(request: web.Request) -> web.Response:
        assert request.transport is not None
        connections.append(request.transport)
        return web.Response(body=ANSWER, content_type="application/json")

    async def run() -> tuple[bool, bool]:
        async with serving(kept_alive) as url:
            client = ModelClient(url, "m")
            closing = ClosedAtStop([client])
            await closing.start()
            assert await ask(client) == FeelingAnswer(feeling=0.5, arousal=0.25)
            await asyncio.sleep(0.1)
            open_while_running = not connections[0].is_closing()
            await closing.stop()
            await asyncio.sleep(0.1)  # the server reads the end of the connection
            return open_while_running, connections[0].is_closing()

    assert asyncio.run(run()) == (True, True)


def test_questions_not_asked_while_the_model_rests_after_a_deadline_are_counted() -> None:
    """A hanging model cut by a world's deadline rests 30 s; the questions of the events
    meanwhile went to the rules counted nowhere (a dashboard saw the calls stop, `resting` 0),
    where a rest the model's own timeout began counted each."""
    metrics = Metrics()

    async def rest() -> str | None:
        client = ModelClient("http://127.0.0.1:1", "m")  # never asked: it rests
        client.count = metrics.model_call
        try:
            client.out_of_time(300, "deadline: no answer within 300 ms")
            return client.rests_for(300, calls=2)
        finally:
            await client.close()

    assert asyncio.run(rest()) is not None
    samples = samples_of(metrics.exposition().decode())
    assert samples[("rumourmill_model_calls_total", (("outcome", "resting"),))] == 2
