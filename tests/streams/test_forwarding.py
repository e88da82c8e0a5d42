"""A read forwarded between two real HTTP servers on loopback, each serving the worker's views
and forwarding as a worker does (`streams.forwarding`), each with a partition map of its own:
so the maps can disagree, as two workers' do for a moment during a rebalance."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any, cast

import aiohttp
import faust
import orjson
import pytest
from aiohttp import web as aiohttp_web
from aiohttp.test_utils import TestServer
from faust.web import Request, Response, Web
from faust.web.drivers.aiohttp import Web as AiohttpWeb
from prometheus_client.parser import text_string_to_metric_families
from yarl import URL

from localbroker import free_port
from streams import forwarding
from streams.metrics import Metrics
from streams.web import (
    FORWARD_MARGIN_SECONDS,
    FORWARD_MARK,
    WEB_APPLICATION_OPTIONS,
    HTTPProblem,
    register_views,
)
from tests.streams.test_web import READ, STATE, MemoryReads

WORKERS = ("one", "two")
PATIENCE_SECONDS = 10.0
"""How long a test waits for an answer: a loopback forward takes milliseconds."""
ACME = {"Authorization": "Bearer key-acme"}


@dataclass
class MappedReads(MemoryReads):
    """`WorldReads` over an in-memory state whose partition map gives every world to the
    worker at `owner_at`, forwarding to it as a worker does."""

    here: URL = field(kw_only=True)
    owner_at: URL = field(kw_only=True)
    client: aiohttp.ClientSession = field(kw_only=True)

    async def owner_answer(
        self, world_id: str, web: Web, request: Request, wait_seconds: float
    ) -> Response | None:
        self.worlds_asked.append(world_id)
        assert wait_seconds == FORWARD_MARGIN_SECONDS  # a runtime read waits for nothing else
        return await forwarding.owner_answer(
            world_id,
            self.owner_at,
            self.here,
            self.client,
            web,
            request,
            wait_seconds=wait_seconds,
        )


def views_of(reads: MemoryReads) -> aiohttp_web.Application:
    app = faust.App(
        "forwarding-test", autodiscover=False, web_application_options=WEB_APPLICATION_OPTIONS
    )
    register_views(app, reads)
    return cast(AiohttpWeb, app.web).web_app


def ask(
    owners: Mapping[str, str],
    keys: Mapping[str, Mapping[str, str]],
    *requests: tuple[str, dict[str, str]] | tuple[str, dict[str, str], bytes],
    host: str = "127.0.0.1",
    stopping: bool = False,
    metrics: Mapping[str, Metrics] | None = None,
    challenges: list[str | None] | None = None,
    retry_after: list[str | None] | None = None,
) -> tuple[list[tuple[int, Any]], dict[str, list[str]]]:
    """Each (worker, headers[, body]) read of Mara answered, with two workers up on `host`
    whose maps give every world to `owners[worker]`, holding `keys[worker]`: (status, JSON
    body) each, and the worlds each worker was asked to find the owner of. `stopping`: the
    workers' HTTP client is closed, as Faust closes it when a worker stops; `metrics`: each
    worker's; `challenges` is given each answer's `WWW-Authenticate`, `retry_after` its
    `Retry-After`."""

    async def run() -> tuple[list[tuple[int, Any]], dict[str, list[str]]]:
        ports = {name: free_port() for name in WORKERS}
        authority = f"[{host}]" if ":" in host else host
        urls = {name: URL(f"http://{authority}:{port}") for name, port in ports.items()}
        async with aiohttp.ClientSession() as between, aiohttp.ClientSession() as client:
            reads = {
                name: MappedReads(
                    STATE,
                    tenants_by_api_key=keys[name],
                    here=urls[name],
                    owner_at=urls[owners[name]],
                    client=between,
                    metrics=Metrics() if metrics is None else metrics[name],
                )
                for name in WORKERS
            }
            servers = [
                TestServer(views_of(reads[name]), host=host, port=ports[name]) for name in WORKERS
            ]
            for server in servers:
                await server.start_server()
            if stopping:
                await between.close()
            try:
                answers = []
                for worker, headers, *body in requests:
                    url = f"{urls[worker]}{READ}"
                    try:
                        async with asyncio.timeout(PATIENCE_SECONDS):
                            sent = client.get(url, headers=headers, data=next(iter(body), None))
                            async with sent as reply:
                                assert reply.content_type == "application/json"
                                answers.append((reply.status, orjson.loads(await reply.read())))
                                if challenges is not None:
                                    challenges.append(reply.headers.get("WWW-Authenticate"))
                                if retry_after is not None:
                                    retry_after.append(reply.headers.get("Retry-After"))
                    except TimeoutError:
                        hops = {name: len(reads[name].worlds_asked) for name in WORKERS}
                        pytest.fail(f"no answer in {PATIENCE_SECONDS} s; reads per worker: {hops}")
                return answers, {name: reads[name].worlds_asked for name in WORKERS}
            finally:
                for server in servers:
                    await server.close()

    return asyncio.run(run())


def test_workers_whose_maps_disagree_forward_a_read_once_and_answer_503() -> None:
    """Each takes the other for the owner: the read goes from one to two, and two, asked by a
    worker, does not send it back (it went back and forth, a connection and a task held each
    hop, until the maps agreed). The client is told why, in JSON, and no worker's address."""
    owners = {"one": "two", "two": "one"}
    keys = {name: {"key-acme": "default"} for name in WORKERS}
    [(status, body)], asked = ask(owners, keys, ("one", ACME))
    assert status == 503, body
    assert body == {
        "detail": "the workers do not yet agree which of them serves world 'save-1': the group"
        " is rebalancing; ask again once it has"
    }
    assert asked == {"one": ["save-1"], "two": ["save-1"]}


def test_a_forwarded_read_is_timed_once_by_the_worker_the_client_asked() -> None:
    """The owner timed it too: a dashboard summing `rumourmill_read_seconds` over the workers
    counted each forwarded read twice, the hop's latency in one of them."""
    metrics = {name: Metrics() for name in WORKERS}
    keys = {name: {"key-acme": "default"} for name in WORKERS}
    answers, _ = ask(
        {"one": "two", "two": "two"}, keys, ("one", ACME), ("two", ACME), metrics=metrics
    )
    assert [status for status, _ in answers] == [200, 200]
    assert {name: reads_timed(metrics[name]) for name in WORKERS} == {"one": 1, "two": 1}


def reads_timed(metrics: Metrics) -> float:
    """How many reads the worker's `rumourmill_read_seconds` counts, by its exposition."""
    exposed = text_string_to_metric_families(metrics.exposition().decode())
    [family] = [one for one in exposed if one.name == "rumourmill_read_seconds"]
    return sum(sample.value for sample in family.samples if sample.name.endswith("_count"))


def test_a_worker_stopping_answers_a_read_it_would_forward_503() -> None:
    """Faust closes a stopping worker's HTTP client before its web server: a read to forward
    meanwhile was a 500 (`Session is closed`), a rolling restart's reads among them."""
    owners = {"one": "two", "two": "two"}
    keys = {name: {"key-acme": "default"} for name in WORKERS}
    retry_after: list[str | None] = []
    [(status, body)], _ = ask(owners, keys, ("one", ACME), stopping=True, retry_after=retry_after)
    assert retry_after == ["5"]  # a 503 says when to ask again
    assert (status, body) == (
        503,
        {
            "detail": "this worker is stopping and forwards no more; ask again (another worker"
            " serves)"
        },
    )


def test_the_forward_mark_lets_a_client_past_nothing() -> None:
    """A client sending the mark itself is still asked for its key first, and only loses the
    forward; the owner answers a marked read as any other. A forwarded read carries the
    client's key, and the owner checks it again."""
    marked = {FORWARD_MARK: "1"}
    owners = {"one": "two", "two": "two"}
    keys = {"one": {"key-acme": "default", "key-old": "default"}, "two": {"key-acme": "default"}}
    challenges: list[str | None] = []
    answers, asked = ask(
        owners,
        keys,
        ("one", marked),
        ("one", {**marked, **ACME}),
        ("two", {**marked, **ACME}),
        ("one", {"Authorization": "Bearer key-old"}),
        ("one", ACME),
        challenges=challenges,
    )
    assert [status for status, _ in answers] == [401, 503, 200, 401, 200], answers
    # the owner's 401 says its scheme as the client's worker's own does (it was lost forwarded)
    assert challenges[0] == challenges[3] == 'Bearer realm="rumourmill"'
    assert "the group is rebalancing" in answers[1][1]["detail"]
    assert answers[2][1]["npc_id"] == "npc-mara"
    assert answers[4] == answers[2]
    assert asked == {"one": ["save-1"] * 3, "two": ["save-1"] * 2}


def test_a_read_forwarded_with_a_body_it_ignores_is_answered_as_without() -> None:
    """A read ignores a body: the forward read it, and one its `Content-Encoding` did not
    decode made a 500 (its traceback in the log) where the owner itself answered 200."""
    owners = {"one": "two", "two": "two"}
    keys = {name: {"key-acme": "default"} for name in WORKERS}
    garbled = {**ACME, "Content-Encoding": "gzip"}
    answers, _ = ask(owners, keys, ("one", ACME), ("one", garbled, b"not gzip"))
    assert answers[1] == answers[0] and answers[0][0] == 200


def test_a_read_forwarded_whatever_its_host_header_is_answered_as_the_owner_answers() -> None:
    """The forward built the owner's URL from the one the client's `Host` makes: an empty
    `Host` (which HTTP/1.1 allows) or one that is no address (`game-api:70000`) made a 500,
    its traceback in the log, where the owner itself answered 200."""
    owners = {"one": "two", "two": "two"}
    keys = {name: {"key-acme": "default"} for name in WORKERS}
    hosts = ("", "game-api:70000", "user@game-api")
    answers, _ = ask(owners, keys, ("two", ACME), *(("one", {**ACME, "Host": h}) for h in hosts))
    assert answers == [answers[0]] * 4 and answers[0][0] == 200


def test_a_read_is_forwarded_between_workers_on_ipv6_addresses() -> None:
    """A worker's URL on IPv6 is `http://[::1]:PORT`: the owner's URL built of its host alone
    lost the brackets, and every forwarded read was a 500."""
    owners = {"one": "two", "two": "two"}
    keys = {name: {"key-acme": "default"} for name in WORKERS}
    answers, asked = ask(owners, keys, ("two", ACME), ("one", ACME), host="::1")
    assert answers[1] == answers[0] and answers[0][0] == 200
    assert asked["one"] == ["save-1"]  # forwarded, not answered where it came in


def test_a_read_being_forwarded_as_the_worker_stops_is_told_so() -> None:
    """The client closing under a forward ("Connector is closed.") was taken for an owner
    that cannot be reached: a WARNING blaming it, and the client told to wait for a rebalance."""

    async def slow(request: aiohttp_web.Request) -> aiohttp_web.Response:
        await asyncio.sleep(2)
        return aiohttp_web.json_response({})

    async def run() -> HTTPProblem:
        owner = aiohttp_web.Application()
        owner.router.add_get("/v2/read", slow)
        server = TestServer(owner, host="127.0.0.1", port=free_port())
        await server.start_server()
        client = aiohttp.ClientSession()
        request = cast(Request, SimpleNamespace(rel_url=URL("/v2/read"), method="GET", headers={}))
        here = URL("http://127.0.0.1:1")
        forwarded = asyncio.ensure_future(
            forwarding.owner_answer(
                "w",
                server.make_url("/"),
                here,
                client,
                cast(Web, None),
                request,
                wait_seconds=PATIENCE_SECONDS,
            )
        )
        await asyncio.sleep(0.3)
        await client.close()  # as Faust closes it when the worker stops
        try:
            await forwarded
        except HTTPProblem as refused:
            return refused
        finally:
            await server.close()
        raise AssertionError("answered")

    refused = asyncio.run(run())
    assert (refused.status, refused.detail) == (503, forwarding.STOPPING)


def test_a_read_forwarded_to_an_owner_that_answers_nothing_is_a_503_once_it_waited_enough() -> None:
    """An owner frozen (a paused container) takes the connection and answers nothing: the read
    waited aiohttp's 5 minutes, long after the group gave the world to another worker."""

    async def frozen(request: aiohttp_web.Request) -> aiohttp_web.Response:
        await asyncio.sleep(60)
        return aiohttp_web.json_response({})

    async def run() -> tuple[HTTPProblem, float]:
        owner = aiohttp_web.Application()
        owner.router.add_get("/v2/read", frozen)
        server = TestServer(owner, host="127.0.0.1", port=free_port())
        await server.start_server()
        request = cast(Request, SimpleNamespace(rel_url=URL("/v2/read"), method="GET", headers={}))
        began = asyncio.get_running_loop().time()
        try:
            async with aiohttp.ClientSession() as client:
                await forwarding.owner_answer(
                    "w",
                    server.make_url("/"),
                    URL("http://127.0.0.1:1"),
                    client,
                    cast(Web, None),
                    request,
                    wait_seconds=0.5,
                )
        except HTTPProblem as refused:
            return refused, asyncio.get_running_loop().time() - began
        finally:
            await server.close()
        raise AssertionError("answered")

    refused, waited = asyncio.run(run())
    assert refused.status == 503
    assert refused.detail == (
        "the worker that serves world 'w' did not answer within 0.5 s; ask again (if it is"
        " frozen, once the group has rebalanced)"
    )
    assert 0.5 <= waited < 5
