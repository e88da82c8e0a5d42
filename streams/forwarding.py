"""A read sent on to the worker that owns its world, and the owner's answer brought back.

Which worker owns a world is the worker's partition map (`Rumourmill.owner_answer`); this is
what is done with the owner once it is known, apart from Faust, over a real HTTP client, so a
test can forward between servers of its own.
"""

from __future__ import annotations

from typing import Any, cast

import aiohttp
from faust.web import Request, Response, Web
from yarl import URL

from streams.logs import logger
from streams.web import FORWARD_MARK, RETRY_SECONDS, HTTPProblem

FORWARDED_HEADERS = ("Authorization", "Content-Type")
"""What a request forwarded to a world's owner carries of the client's headers: the rest (its
framing, `Transfer-Encoding: chunked` or `Content-Length`, its host) describe the client's
connection, not the one to the owner, which would refuse the request over them."""
ANSWERED_HEADERS = ("WWW-Authenticate", "Allow", "Retry-After")
"""What the client is given of the owner's answer's headers beside its body and type: a 401's
challenge (lost, a key the owner refused got a 401 saying no scheme), a 405's methods, when
to ask again."""

log = logger("forwarding")
STOPPING = "this worker is stopping and forwards no more; ask again (another worker serves)"
"""The 503 of a read to forward once the worker's HTTP client is closed (it was a 500)."""


async def owner_answer(
    world_id: str,
    owner: URL | None,
    here: URL,
    client: aiohttp.ClientSession,
    web: Web,
    request: Request,
    *,
    wait_seconds: float,
) -> Response | None:
    """The answer of `owner` (None: no worker is known to own `world_id`), forwarded from the
    worker at `here` and waited for at most `wait_seconds`; None when that is this one. Its
    failures are 503s that name no address."""
    if owner is None:
        raise HTTPProblem(
            503,
            f"no worker is known to serve world {world_id!r} yet; ask again once the group has"
            " rebalanced",
            RETRY_SECONDS,
        )
    if _address(owner) == _address(here):
        return None
    if FORWARD_MARK in request.headers:
        raise HTTPProblem(
            503,
            f"the workers do not yet agree which of them serves world {world_id!r}: the group"
            " is rebalancing; ask again once it has",
            RETRY_SECONDS,
        )
    if client.closed:  # Faust closes it as the worker stops, before its web server
        raise HTTPProblem(503, STOPPING, RETRY_SECONDS)
    try:
        return await _forward(owner, client, web, request, wait_seconds)
    except (RuntimeError, TimeoutError, aiohttp.ClientError) as error:
        if client.closed:  # under the forward: "Session is closed", "Connector is closed."
            raise HTTPProblem(503, STOPPING, RETRY_SECONDS) from None
        if isinstance(error, RuntimeError):
            raise  # not a closed client: a bug, the 500 it is
        # the error names the owner's address: for the log, not for a client
        at = f"{owner.host}:{owner.port}".replace("%", "%%")  # a kind of its own per owner
        if isinstance(error, TimeoutError):
            log.warning(
                f"a read forwarded to {at} had no answer within %g s (world %r)",
                wait_seconds,
                world_id,
            )
            raise HTTPProblem(
                503,
                f"the worker that serves world {world_id!r} did not answer within"
                f" {wait_seconds:g} s; ask again (if it is frozen, once the group has rebalanced)",
                RETRY_SECONDS,
            ) from None
        log.warning(f"a read could not be forwarded to {at}: %s (world %r)", error, world_id)
        raise HTTPProblem(
            503,
            f"the worker that serves world {world_id!r} cannot be reached; ask again once"
            " the group has rebalanced",
            RETRY_SECONDS,
        ) from None


def _address(url: URL) -> tuple[str, int]:
    """Where a worker is reached, as Faust's router compares them (no port: 80)."""
    return url.host or "", url.port or 80


async def _forward(
    owner: URL, client: aiohttp.ClientSession, web: Web, request: Request, wait_seconds: float
) -> Response:
    """Faust's `route_req`, but for what it drops: a POST's body (the reply check goes to
    the owner with its reply), the owner's bytes as they are (not decoded and encoded
    again) and, answering a HEAD, the length of what a GET would send. A read's body, which
    no read looks at, is not sent (nor read: one that does not decode made a 500). The owner's
    URL is the request's target (its path and query as sent) at the owner's address: the one
    `request.url` makes from the client's `Host` made a 500 where that is empty or no address."""
    target = request.rel_url
    routed = URL.build(
        scheme=owner.scheme or "http",
        authority=owner.raw_authority,  # an IPv6 host keeps its brackets (`[::1]:6066`)
        path=target.raw_path,
        query_string=target.raw_query_string,
        encoded=True,
    )
    posted = request.method == "POST"  # read by the view already (`ReplyCheck.receive`)
    body = await cast(Any, request).read() if posted else b""
    async with client.request(
        method=request.method,
        headers=_forwarded_headers(request),
        url=routed,
        data=body or None,
        timeout=aiohttp.ClientTimeout(total=wait_seconds),
    ) as response:
        answer: Response = web.bytes(
            await response.read(), content_type=response.content_type, status=response.status
        )
        if request.method == "HEAD" and "Content-Length" in response.headers:
            answer.headers["Content-Length"] = response.headers["Content-Length"]
        for name in ANSWERED_HEADERS:
            if name in response.headers:
                answer.headers[name] = response.headers[name]
        return answer


def _forwarded_headers(request: Request) -> dict[str, str]:
    kept = {name: request.headers[name] for name in FORWARDED_HEADERS if name in request.headers}
    return {**kept, FORWARD_MARK: "1"}
