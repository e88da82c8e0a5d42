"""HTTP views: each request is served by the worker that owns the world it names.

The views depend only on `WorldReads` (who may read which tenant, how ready the worker is,
a read-only transaction on a world's state, and the call that forwards a request to the
world's owner); the worker's `Rumourmill` provides it, and a test can serve the same views
over a state held in memory. Keys and parameters are checked before routing, so a bad
request gets a 401 or a 400 with a plain `detail` from whichever worker it reached, never a
500. Reads call no model and never write.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, Protocol, TypeVar, cast
from urllib.parse import unquote_to_bytes

import orjson
from aiohttp import web
from aiohttp.typedefs import Handler
from aiohttp.web import (
    HTTPException,
    RequestKey,
    RequestPayloadError,
    StreamResponse,
    middleware,
)
from aiohttp.web import Request as AiohttpRequest
from faust.types import AppT
from faust.web import Request, Response, View, Web
from faust.web.base import BlueprintManager

from projections import timelines
from projections.branch_diff import branch_diff
from projections.chronicle import chronicle_read
from projections.decision import decision
from projections.dialogue import dialogue_read
from projections.digest import world_digest
from projections.invention import (
    RELATIONS_INSTRUCTIONS,
    CheckedReply,
    reply_check,
    with_relations,
)
from projections.provenance import provenance
from projections.recall import DEFAULT_LIMIT, MAX_LIMIT, Recalling, RecallQuery, recall
from projections.rumour_map import RumourMap, rumour_map
from projections.runtime_read import (
    BadRead,
    NotFound,
    read_position,
    runtime_read,
    timeline_never_seen,
)
from projections.state import StateTransaction
from schemas.events import MAX_ID_LENGTH
from schemas.judgements import RelationsAnswer
from schemas.memory import DecisionRead, ReadModel
from schemas.policy import Policy
from streams.logs import logger
from streams.metrics import CONTENT_TYPE, Metrics
from streams.model_client import ModelClient
from streams.read_cache import ReadCache
from streams.recall_index import SqliteRecallIndex, catch_up_in_slices
from streams.reranker import Reranker
from streams.rumour_picture import DRAWING_SECONDS, DrawingUnavailable, rumour_svg
from streams.tokens import wordllama_tokens

MAX_REQUEST_LINE_BYTES = 64 * 1024
"""The longest request line served: a recall's `q` of 1,000 characters is 12 KB percent-encoded
at most (aiohttp's default, 8,190 bytes, refused one in Chinese, in plain text)."""
IDLE_CONNECTION_SECONDS = 75.0
"""How long a connection may sit without a whole request (before its first, or between two):
aiohttp's own bound is an hour, so a client that sent half its headers held a connection that
long, and a thousand such held every file descriptor of a worker. As long as nginx's: longer
than the 15 s a client such as aiohttp keeps an idle connection, so it closes first."""
WEB_APPLICATION_OPTIONS = {
    "handler_args": {
        "max_line_size": MAX_REQUEST_LINE_BYTES,
        "keepalive_timeout": IDLE_CONNECTION_SECONDS,
    }
}
"""The worker's aiohttp application options (Faust's `web_application_options`)."""
BODY_SECONDS = 10.0
"""How long a posted body may take to arrive (a reply check's: 256 KB at most)."""
DEFAULT_TENANT = "default"
Read = TypeVar("Read")

log = logger("web")


@dataclass(frozen=True)
class Readiness:
    """Whether a worker serves yet: what it still waits for, and its partition assignments."""

    waiting_for: tuple[str, ...]
    rebalances: int
    stopping: bool = False
    """Whether the worker has begun to stop (it serves on until its web server stops)."""


class WorldReads(Protocol):
    """What the views need of a worker."""

    @property
    def tenants_by_api_key(self) -> Mapping[str, str]:
        """Bearer key -> the tenant it reads; empty: no keys, any tenant may be named."""
        ...

    def readiness(self) -> Readiness: ...

    async def read_transaction(self, world_id: str) -> StateTransaction:
        """Read-only access to the state that holds `world_id`, to be read before the next
        await."""
        ...

    async def read_aside(self, world_id: str, read: Callable[[StateTransaction], Read]) -> Read:
        """`read` of the state that holds `world_id` as `read_transaction` would give it now,
        made without holding the event loop where the state allows (RocksDB: over a snapshot,
        on another thread), for a read long enough to hold up every tenant's events."""
        ...

    async def owner_answer(
        self, world_id: str, web: Web, request: Request, wait_seconds: float
    ) -> Response | None:
        """The answer of the worker that owns `world_id`, waited for at most `wait_seconds`,
        or None when this worker owns it."""
        ...

    def policy_of(self, tenant_id: str, world_id: str) -> Policy:
        """The world's policy as it stands."""
        ...

    @property
    def recall_index(self) -> SqliteRecallIndex:
        """The worker's local recall index (words, cues, vectors)."""
        ...

    def searching(self, tenant_id: str, world_id: str) -> None:
        """A recall or decision searches the world: what of it has no vector yet is to be
        embedded (the index lives in memory: after a start, a world no event names since)."""
        ...

    @property
    def read_cache(self) -> ReadCache:
        """The worker's encoded runtime reads (`streams.read_cache`)."""
        ...

    @property
    def metrics(self) -> Metrics:
        """The worker's metrics, which the reads add their latency to."""
        ...

    @property
    def model(self) -> ModelClient | None:
        """The model the invention check asks about relations; None when none is configured."""
        ...

    @property
    def reranker(self) -> Reranker | None:
        """Recall's reranker (section 9, step 4); None when none is configured."""
        ...


FORWARD_MARGIN_SECONDS = 30.0
"""How long a read forwarded to its world's owner waits for the answer beyond what the read
itself may wait for (a model, a reranker, pictures drawn before it: `WorldRead.waits_seconds`)
before it is a 503: an owner frozen (a paused container, a stopped process) takes the
connection and answers nothing, and the read waited aiohttp's 5 minutes, holding one of the
100 connections every forward shares, long after the group had given the world to another
worker. A read of a large world made aside (a digest) takes seconds."""


RETRY_SECONDS = 5
"""The `Retry-After` of a 503 that passes by itself, once a rebalance or a recovery does (a
failover takes some 10 to 15 s): a client was told to ask again, and not when."""


class HTTPProblem(Exception):
    """An answer other than 200, with a plain `detail`; one that passes by itself (a 503 of a
    rebalance, a recovery, pictures waiting) says when to ask again (`retry_after`)."""

    def __init__(self, status: int, detail: str, retry_after: int | None = None) -> None:
        super().__init__(detail)
        self.status = status
        self.detail = detail
        self.retry_after = retry_after


def check_utf8(request: Request) -> None:
    """Refuse a URL whose percent-escapes are not UTF-8. The router would take an id with
    `%FF` in its path literally, and the query parser would turn it into U+FFFD: either way a
    read of some other id, a 404 (or another id's answer) where the client erred in encoding."""
    try:
        unquote_to_bytes(cast(Any, request).raw_path).decode()  # an aiohttp request
    except UnicodeError as bad:  # encoding fails too: a raw byte aiohttp's Python parser let in
        raise HTTPProblem(
            400, f"the URL is not UTF-8 once its %-escapes are decoded: {bad}"
        ) from None


def check_identifier(name: str, value: str) -> str:
    if not 1 <= len(value) <= MAX_ID_LENGTH:
        raise HTTPProblem(400, f"{name!r} must be 1 to {MAX_ID_LENGTH} characters")
    return value


def query_identifier(request: Request, name: str, *, default: str | None = None) -> str:
    """One query parameter, given once, 1 to 128 characters."""
    if default is not None and not cast(Any, request.query).getall(name, []):  # a MultiDict
        return default
    return check_identifier(name, query_text(request, name))


def query_text(request: Request, name: str, *, default: str | None = None) -> str:
    """One query parameter given once, of any length (the read checks it)."""
    values: list[str] = cast(Any, request.query).getall(name, [])
    if not values:
        if default is not None:
            return default
        raise HTTPProblem(400, f"query parameter {name!r} is required")
    if len(values) > 1:
        raise HTTPProblem(400, f"query parameter {name!r} must be given once")
    return values[0]


def query_position(request: Request, name: str) -> int | None:
    """An optional stream position: a positive integer, given at most once."""
    raw = query_identifier(request, name, default="")
    if not raw:
        return None
    if not raw.isascii() or not raw.isdigit() or int(raw) < 1:
        raise HTTPProblem(400, f"query parameter {name!r} must be a positive integer")
    return int(raw)


def tenant_of(request: Request, tenants_by_key: Mapping[str, str]) -> str:
    """The tenant a request may read: its API key's, or the named one without keys. With keys,
    a request without a valid one is a 401 whatever its parameters say (a client re-authenticates
    on a 401, and a 400 told it nothing of its key)."""
    if not tenants_by_key:
        return query_identifier(request, "tenant_id", default="") or DEFAULT_TENANT
    scheme, _, key = request.headers.get("Authorization", "").partition(" ")
    tenant = tenants_by_key.get(key.strip()) if scheme.lower() == "bearer" else None
    if tenant is None:
        raise HTTPProblem(401, "a valid bearer API key is required")
    asked = query_identifier(request, "tenant_id", default="")
    if asked and asked != tenant:
        raise HTTPProblem(403, f"this API key does not read tenant {asked!r}")
    return tenant


@dataclass(frozen=True)
class Encoded:
    """An answer already encoded as JSON."""

    json: bytes


@dataclass(frozen=True)
class ReadScope:
    """Who asks about which world, as a read receives it."""

    tenant_id: str
    world_id: str
    tx: StateTransaction
    policy: Policy
    """The world's policy, looked up on the event loop: a read made aside (on another thread)
    must not, as the policies are cached and swept there."""


class ReadsView(View):
    """A view over a worker's `WorldReads` (Faust builds views from its app and web alone)."""

    def __init__(self, app: AppT, web: Web, reads: WorldReads, endpoint: str = "") -> None:
        self.reads = reads
        self.endpoint = endpoint
        """The route template it serves (the label of its read latency)."""
        super().__init__(app, web)

    def answer(self, found: ReadModel | Encoded | object, status: int = 200) -> Response:
        """The JSON of a read model (its own encoding), already encoded, or of plain data."""
        if isinstance(found, Encoded):
            body = found.json
        elif isinstance(found, ReadModel):
            body = found.to_json()
        else:
            body = orjson.dumps(found)
        return self.bytes(body, content_type="application/json", status=status)


class Health(ReadsView):
    """The process answers HTTP."""

    async def get(self, request: Request) -> Response:
        return self.answer({"status": "ok"})


class Ready(ReadsView):
    """200 once the worker serves (state recovered, policies caught up), 503 before, and
    once it begins to stop."""

    async def get(self, request: Request) -> Response:
        readiness = self.reads.readiness()
        if readiness.stopping:  # a load balancer sends it no more reads
            return self.answer({"status": "stopping"}, 503)
        if readiness.waiting_for:  # passes: a client told when may ask again then
            waiting = {"status": "starting", "waiting_for": readiness.waiting_for}
            starting = self.answer(waiting, 503)
            starting.headers["Retry-After"] = str(RETRY_SECONDS)
            return starting
        return self.answer({"status": "ready", "rebalances": readiness.rebalances})


class PrometheusMetrics(ReadsView):
    """The worker's metrics in the Prometheus text format (`streams.metrics`)."""

    async def get(self, request: Request) -> Response:
        return self.bytes(self.reads.metrics.exposition(), headers={"Content-Type": CONTENT_TYPE})


FORWARD_MARK = "X-Rumourmill-Forwarded"
"""The header of a request one worker forwarded to another (`streams.forwarding`): the worker it
reaches answers it, or says the group is rebalancing, and never forwards it again. Two workers
whose partition maps disagreed for a moment sent a read back and forth, a connection and a
task each hop, until they agreed. It lets nothing past: a client that sends it only loses the
forward (and its read's timing), and the key is checked before it is looked at, on each worker
the request reaches."""
AS_OF = frozenset({"world_instance_id", "timeline_id", "as_of_seq"})
"""The query parameters of a read of one timeline as of a position."""


class WorldRead(ReadsView):
    """A read of one world: authenticated, validated, then served here or by its owner."""

    takes: ClassVar[frozenset[str]] = AS_OF
    """The query parameters the read takes, `tenant_id` aside: another is a 400 naming it (a
    misspelt `as_of` read the present, a `tenant` the default tenant's world of that id)."""

    without_as_of: ClassVar[str | None] = None
    """Why the read takes no `as_of_seq`, for the 400 that refuses it (ignored, the client
    asking for the past would get the present); None for a read made as of a position."""
    aside: ClassVar[bool] = False
    """Whether `read` is made off the event loop (`WorldReads.read_aside`): one that takes
    seconds in a large world, and touches nothing but its scope's state."""
    searches: ClassVar[bool] = False
    """Whether `read` searches the recall index: it is caught up with the world beforehand, a
    slice at a time (`catch_up_in_slices`), so the read that finds it far behind waits for it
    without holding the event loop."""

    def waits_seconds(self) -> float:
        """The longest the read may wait for something besides the state (a model, a
        reranker, pictures drawn before it): a forward to its owner waits that much longer."""
        return 0.0

    async def get(self, request: Request, **params: str) -> Response:
        started = time.perf_counter()
        try:
            return await self.answer_read(request, params)
        finally:
            if FORWARD_MARK not in request.headers:  # timed once: where the client asked
                self.reads.metrics.reads.labels(endpoint=self.endpoint).observe(
                    time.perf_counter() - started
                )

    async def answer_read(self, request: Request, params: Mapping[str, str]) -> Response:
        """The answer, or a plain `detail` with the status of what went wrong."""
        try:
            check_utf8(request)
            tenant = tenant_of(request, self.reads.tenants_by_api_key)
            world = self.world_of(request, params)
            for name, value in params.items():
                check_identifier(name, value)
            if self.without_as_of is not None and "as_of_seq" in request.query:
                raise HTTPProblem(
                    400,
                    f"query parameter 'as_of_seq' is not taken by this read: {self.without_as_of}",
                )
            unknown = sorted(set(request.query) - self.takes - {"tenant_id"})
            if unknown:
                taken = ", ".join(sorted(self.takes | {"tenant_id"}))
                raise HTTPProblem(
                    400,
                    f"query parameter {unknown[0]!r} is not taken by this read (it takes {taken})",
                )
            await self.receive(request)
            waits = FORWARD_MARGIN_SECONDS + self.waits_seconds()
            forwarded = await self.reads.owner_answer(world, self.web, request, waits)
            if forwarded is not None:
                return forwarded
            try:
                return self.answer(
                    await self.finish(await self.found(request, tenant, world, params))
                )
            except NotFound as missing:
                raise HTTPProblem(404, str(missing)) from None
            except BadRead as bad:
                raise HTTPProblem(400, str(bad)) from None
        except HTTPProblem as problem:
            response = self.answer({"detail": problem.detail}, problem.status)
            if problem.status == 401:  # RFC 9110: a 401 names the scheme it wants
                response.headers["WWW-Authenticate"] = 'Bearer realm="rumourmill"'
            if problem.retry_after is not None:
                response.headers["Retry-After"] = str(problem.retry_after)
            return response

    async def receive(self, request: Request) -> None:
        """Take in what the request posted, once its key, tenant and parameters are checked;
        by default nothing."""

    async def found(
        self, request: Request, tenant: str, world: str, params: Mapping[str, str]
    ) -> object:
        """What `read` finds: on the event loop, or aside from it (`aside`)."""
        if self.searches:
            reads = self.reads
            await catch_up_in_slices(reads.recall_index, reads.read_transaction, tenant, world)
            if reads.recall_index.knows(tenant, world):  # not any id a client names
                reads.searching(tenant, world)
        policy = self.reads.policy_of(tenant, world)
        if self.aside:
            return await self.reads.read_aside(
                world, lambda tx: self.read(request, ReadScope(tenant, world, tx, policy), params)
            )
        scope = ReadScope(tenant, world, await self.reads.read_transaction(world), policy)
        return self.read(request, scope, params)

    def world_of(self, request: Request, params: Mapping[str, str]) -> str:
        """The world asked about: the `world_instance_id` query parameter."""
        return query_identifier(request, "world_instance_id")

    def read(self, request: Request, scope: ReadScope, params: Mapping[str, str]) -> object:
        """The JSON answer; raises `NotFound` (a 404) when there is nothing to show."""
        raise NotImplementedError

    async def finish(self, found: object) -> object:
        """The answer made from what `read` found, for work that need not hold the event loop
        (and must not read state: that is `read`'s); as it is by default."""
        return found


class RuntimeRead(WorldRead):
    """One character's mind on one timeline (the Memory contract's runtime read).

    Games poll minds far more often than they change: each answer is encoded once and served
    again until an event moves what it was computed from (`streams.read_cache`).
    """

    def read(self, request: Request, scope: ReadScope, params: Mapping[str, str]) -> object:
        timeline_id = query_identifier(request, "timeline_id")
        tenant, world, npc = scope.tenant_id, scope.world_id, params["npc_id"]
        as_of_seq = query_position(request, "as_of_seq")
        asked = (tenant, world, timeline_id, npc, as_of_seq)
        position = read_position(scope.tx, tenant, world, timeline_id)
        cache = self.reads.read_cache
        body = cache.get(asked, position)
        if body is None:
            body = runtime_read(scope.tx, tenant, world, timeline_id, npc, as_of_seq).to_json()
            cache.put(asked, position, body)
        return Encoded(body)


class Recall(WorldRead):
    """What a character recalls for a query (section 9): searched on the worker's state, then,
    with a reranker configured, its candidates scored by it without holding the event loop."""

    takes = AS_OF | {"q", "cues", "limit"}
    searches = True

    def waits_seconds(self) -> float:
        """The reranker's time, twice (a call is sent again when its connection drops)."""
        reranker = self.reads.reranker
        return 0.0 if reranker is None else 2 * reranker.timeout_seconds

    async def finish(self, found: object) -> object:
        """The recall chosen, with the reranker's scores when it gives them in time (else by
        the fused ranking alone: `streams.reranker` logs and counts why)."""
        recalling = cast(Recalling, found)
        reranker = self.reads.reranker
        if reranker is None or not recalling.candidates:
            return recalling.read()
        scores = await reranker.rerank(recalling.text, recalling.documents())
        return recalling.read(None if isinstance(scores, str) else scores)

    def read(self, request: Request, scope: ReadScope, params: Mapping[str, str]) -> object:
        timeline_id = query_identifier(request, "timeline_id")
        text = query_text(request, "q")
        cues = query_text(request, "cues", default="")
        limit = query_text(request, "limit", default=str(DEFAULT_LIMIT))
        significant = limit.lstrip("0")  # `007` is 7, as `as_of_seq=007` is; a long one is no int
        if not limit.isascii() or not limit.isdigit() or len(significant) > len(str(MAX_LIMIT)):
            raise HTTPProblem(400, f"'limit' must be from 1 to {MAX_LIMIT}")
        return recall(
            scope.tx,
            self.reads.recall_index,
            scope.tenant_id,
            scope.world_id,
            timeline_id,
            params["npc_id"],
            RecallQuery(
                text,
                tuple(cues.split(",")) if cues else (),
                int(significant or "0"),  # past 4,300 digits `int` refuses even zeros
            ),
            scope.policy,
            query_position(request, "as_of_seq"),
        )


def wall_clock_ms() -> int:
    """Real time now, against which dialogue expires (the seed's cache is real time)."""
    return int(time.time() * 1000)


class Decision(WorldRead):
    """What a decision model may be given when a character answers an event (section 10),
    with the player scope's recent turns judged for expiry against the wall clock."""

    without_as_of = "it reads as of 'after_seq', the event answered"
    takes = frozenset({"world_instance_id", "timeline_id", "after_seq", "player_id"})
    searches = True

    def read(self, request: Request, scope: ReadScope, params: Mapping[str, str]) -> object:
        timeline_id = query_identifier(request, "timeline_id")
        after_seq = query_position(request, "after_seq")
        if after_seq is None:
            raise HTTPProblem(400, "query parameter 'after_seq' is required")
        player_id = query_identifier(request, "player_id", default="")
        return decision(
            scope.tx,
            self.reads.recall_index,
            scope.tenant_id,
            scope.world_id,
            timeline_id,
            params["npc_id"],
            after_seq,
            player_id or None,
            scope.policy,
            wall_clock_ms(),
        )


REPLY = RequestKey("rumourmill.reply", bytes)
"""Where a reply check keeps its posted body on the request (aiohttp's per-request data)."""
MAX_REPLY_BODY_BYTES = 256 * 1024


class ReplyCheck(Decision):
    """The invention check of a character's reply to an event (section 12): `POST` with
    `{"text": REPLY}` and the decision's parameters; the world's owner answers."""

    async def post(self, request: Request, **params: str) -> Response:
        return await self.get(request, **params)

    def waits_seconds(self) -> float:
        """The model's time, twice (a call is sent again when its connection drops)."""
        model = self.reads.model
        return 0.0 if model is None else 2 * model.timeout_seconds

    async def receive(self, request: Request) -> None:
        """The posted reply, read only once the key lets the request in: read first, a client
        without a key had the worker take in up to 1 MB for each of its 401s (and wait for a
        body that never came to the end)."""
        if request.method != "POST":
            return  # a GET is told to post (`reply_text`)
        try:
            async with asyncio.timeout(BODY_SECONDS):  # a body trickling in held it for ever
                body = await cast(Any, request).read()  # kept by aiohttp for a forward
        except RequestPayloadError as unreadable:  # a body its Content-Encoding does not decode
            reason = " ".join(str(unreadable).split())  # one plain line
            raise HTTPProblem(400, f"the body cannot be read: {reason}") from None
        except TimeoutError:
            raise HTTPProblem(408, f"the body took over {BODY_SECONDS:g} s to arrive") from None
        cast(Any, request)[REPLY] = body

    async def finish(self, found: object) -> object:
        """With a model configured and the world weighing by it, the model adds the relations
        the reply brings in; without its answer in time, the rules' check stands. A model that
        answered nothing within the deadline lately (an event's or a check's) is not asked
        meanwhile: a hanging model held every check the whole deadline, asking it again
        (`ModelClient.out_of_time`)."""
        checked = cast(CheckedReply, found)
        model = self.reads.model
        if model is None or not checked.model_joins:
            return checked.found
        answer: RelationsAnswer | str | None = model.rests_for(checked.deadline_ms, read=True)
        if answer is None:
            try:
                answer = await asyncio.wait_for(
                    model.ask_aside(RELATIONS_INSTRUCTIONS, checked.prompt, RelationsAnswer),
                    checked.deadline_ms / 1000,
                )
            except TimeoutError:
                answer = f"deadline: no answer within {checked.deadline_ms} ms"
                model.out_of_time(checked.deadline_ms, answer, read=True)
        if not isinstance(answer, RelationsAnswer):
            log.info("reply check by the rules alone: %s", answer)
            return checked.found
        return with_relations(checked, answer.relations)

    def read(self, request: Request, scope: ReadScope, params: Mapping[str, str]) -> object:
        text = reply_text(cast(Any, request).get(REPLY))
        context = cast(DecisionRead, super().read(request, scope, params))
        return reply_check(
            scope.tx,
            scope.tenant_id,
            scope.world_id,
            query_identifier(request, "timeline_id"),
            params["npc_id"],
            cast(int, query_position(request, "after_seq")),
            context,
            text,
            scope.policy,
        )


def reply_text(body: bytes | None) -> str:
    """The reply a check was posted: a JSON object's `text` string."""
    if body is None:
        raise HTTPProblem(400, 'post the reply as a JSON body {"text": REPLY}')
    if len(body) > MAX_REPLY_BODY_BYTES:
        raise HTTPProblem(400, f"the body is over {MAX_REPLY_BODY_BYTES} bytes")
    try:
        posted = orjson.loads(body)
    except orjson.JSONDecodeError:
        raise HTTPProblem(400, 'the body must be JSON: {"text": REPLY}') from None
    text = posted.get("text") if isinstance(posted, dict) else None
    if not isinstance(text, str):
        raise HTTPProblem(400, "'text' must be a string")
    if len(posted) > 1:
        unknown = ", ".join(sorted(repr(key) for key in posted if key != "text"))
        raise HTTPProblem(400, f'the body is {{"text": REPLY}} and nothing else, not {unknown}')
    return text


class Dialogue(WorldRead):
    """What was just said: a character's player scope and place scope (section 13). Expiry is
    judged against the wall clock (turns keep their real time)."""

    takes = AS_OF | {"player_id", "location"}

    def read(self, request: Request, scope: ReadScope, params: Mapping[str, str]) -> object:
        timeline_id = query_identifier(request, "timeline_id")
        player_id = query_identifier(request, "player_id")
        location = query_identifier(request, "location", default="")
        return dialogue_read(
            scope.tx,
            scope.tenant_id,
            scope.world_id,
            timeline_id,
            params["npc_id"],
            player_id,
            location or None,
            wall_clock_ms(),
            scope.policy.memory.dialogue,
            query_position(request, "as_of_seq"),
        )


class Chronicle(WorldRead):
    """A character's story so far (section 14), made from its records as it is read; token
    counts by the embedder's own tokenizer. Off the event loop: it walks every record of the
    character (90 ms at 8,000 records, held from every tenant's events on the loop)."""

    aside = True

    def read(self, request: Request, scope: ReadScope, params: Mapping[str, str]) -> object:
        return chronicle_read(
            scope.tx,
            scope.tenant_id,
            scope.world_id,
            query_identifier(request, "timeline_id"),
            params["npc_id"],
            scope.policy.memory.chronicle,
            wordllama_tokens(),
            as_of_seq=query_position(request, "as_of_seq"),
        )


class Provenance(WorldRead):
    """Where a memory came from: the original event and every teller, in order."""

    def read(self, request: Request, scope: ReadScope, params: Mapping[str, str]) -> object:
        timeline_id = query_identifier(request, "timeline_id")
        return provenance(
            scope.tx,
            scope.tenant_id,
            scope.world_id,
            timeline_id,
            params["npc_id"],
            params["belief_id"],
            query_position(request, "as_of_seq"),
        )


class BranchDiffRead(WorldRead):
    """What a character holds on one timeline and not on another, both ways (section 15)."""

    takes = AS_OF | {"other_timeline_id"}

    def read(self, request: Request, scope: ReadScope, params: Mapping[str, str]) -> object:
        return branch_diff(
            scope.tx,
            scope.tenant_id,
            scope.world_id,
            params["npc_id"],
            query_identifier(request, "timeline_id"),
            query_identifier(request, "other_timeline_id"),
            query_position(request, "as_of_seq"),
        )


ANSWERS_NOW = "it answers as the state stands now"


class Timeline(WorldRead):
    """Positions and branch point of one timeline: its `processed_seq` what it has reached, as
    acks and reads tell it (a branch waiting for its branch point has not reached it)."""

    without_as_of = ANSWERS_NOW
    takes = frozenset({"world_instance_id"})

    def read(self, request: Request, scope: ReadScope, params: Mapping[str, str]) -> object:
        timeline_id = params["timeline_id"]
        record = timelines.load(scope.tx, scope.tenant_id, scope.world_id, timeline_id)
        if record is None:
            raise timeline_never_seen(scope.tenant_id, scope.world_id, timeline_id)
        reached = timelines.reached_seq(scope.tx, record)
        return record.model_dump(mode="json") | {"processed_seq": reached}


class Digest(WorldRead):
    """The state digest of one world: equal digests, equal projections. It reads every key of
    the world (2 to 2.5 s in a world of 175,000 memories), off the event loop."""

    without_as_of = ANSWERS_NOW
    takes = frozenset({"world_instance_id"})
    aside = True

    def read(self, request: Request, scope: ReadScope, params: Mapping[str, str]) -> object:
        return {
            "tenant_id": scope.tenant_id,
            "world_instance_id": scope.world_id,
            "digest": world_digest(scope.tx, scope.tenant_id, scope.world_id),
        }


@dataclass(frozen=True)
class Picture:
    """An answer that is an SVG picture."""

    svg: bytes


MOST_PICTURES_WAITING = 4
"""Rumour picture requests that may wait for the one being drawn (`RumourPicture`)."""


class RumourPicture(WorldRead):
    """Who told whom a rumour, in story time, as an SVG picture (`streams.rumour_picture`);
    the world is named in the path, the timeline by an optional `timeline_id`."""

    takes = frozenset({"timeline_id", "as_of_seq"})

    def waits_seconds(self) -> float:
        """Every picture waiting before it drawn, and its own."""
        return (MOST_PICTURES_WAITING + 1) * DRAWING_SECONDS

    def __init__(self, app: AppT, web: Web, reads: WorldReads, endpoint: str = "") -> None:
        super().__init__(app, web, reads, endpoint)
        self.drawing = asyncio.Lock()
        """Held while a picture is drawn: one at a time per worker. Each request for a large
        rumour ran a `dot` of its own, as many at once as were asked for, so one tenant's
        requests could take every core from the events of all tenants."""
        self.waiting = 0
        """Requests waiting for `drawing`: at most `MOST_PICTURES_WAITING`."""

    def world_of(self, request: Request, params: Mapping[str, str]) -> str:
        return params["world"]

    def read(self, request: Request, scope: ReadScope, params: Mapping[str, str]) -> object:
        timeline_id = query_identifier(request, "timeline_id", default="")
        return rumour_map(
            scope.tx,
            scope.tenant_id,
            scope.world_id,
            params["belief_id"],
            scope.policy,
            timeline_id or None,
            query_position(request, "as_of_seq"),
        )

    async def found(
        self, request: Request, tenant: str, world: str, params: Mapping[str, str]
    ) -> object:
        """The rumour's map read, and drawn by Graphviz in a process of its own, once no other
        picture is being read or drawn: events go on being projected meanwhile. A request
        finding `MOST_PICTURES_WAITING` waiting already is a 503 at once, before any read: each
        waited for every picture ahead of it (up to `DRAWING_SECONDS` each), however many were
        sent, and each read its map first (0.1 s of the event loop for 3,000 holders)."""
        if self.drawing.locked() and self.waiting >= MOST_PICTURES_WAITING:
            raise HTTPProblem(
                503,
                f"{self.waiting} pictures wait to be drawn on this worker already; "
                "ask again once they are",
                RETRY_SECONDS,
            )
        self.waiting += 1
        try:
            await self.drawing.acquire()
        finally:
            self.waiting -= 1
        try:
            rumour = cast(RumourMap, await super().found(request, tenant, world, params))
            return Picture(await rumour_svg(rumour))
        except DrawingUnavailable as missing:
            raise HTTPProblem(503, str(missing)) from None
        finally:
            self.drawing.release()

    def answer(self, found: ReadModel | Encoded | object, status: int = 200) -> Response:
        if isinstance(found, Picture):
            return self.bytes(found.svg, content_type="image/svg+xml", status=status)
        return super().answer(found, status)


ROUTES: dict[str, type[ReadsView]] = {
    "/health": Health,
    "/ready": Ready,
    "/v2/memory/runtime/npcs/{npc_id}": RuntimeRead,
    "/v2/memory/runtime/npcs/{npc_id}/beliefs/{belief_id}/provenance": Provenance,
    "/v2/memory/runtime/npcs/{npc_id}/recall": Recall,
    "/v2/memory/runtime/npcs/{npc_id}/decision": Decision,
    "/v2/memory/runtime/npcs/{npc_id}/dialogue": Dialogue,
    "/v2/memory/runtime/npcs/{npc_id}/chronicle": Chronicle,
    "/v2/memory/runtime/npcs/{npc_id}/reply-check": ReplyCheck,
    "/v2/memory/runtime/npcs/{npc_id}/diff": BranchDiffRead,
    "/v2/timelines/{timeline_id}": Timeline,
    "/v2/admin/digest": Digest,
    "/v2/memory/worlds/{world}/rumours/{belief_id}.svg": RumourPicture,
    "/metrics": PrometheusMetrics,
}


@middleware
async def json_refusals(request: AiohttpRequest, handler: Handler) -> StreamResponse:
    """aiohttp's own refusals (no such route, a method the route does not answer, a body over
    its size limit) as every other answer of ours is: JSON with a plain `detail`, the `Allow`
    header of a 405 kept. A view that fails unexpectedly is a 500 saying only that: aiohttp's
    own 500 was plain text and, the loop in debug mode, held the traceback (the worker's files,
    the error's text); the traceback goes to the log, with the path but not the query."""
    try:
        response = await handler(request)
    except HTTPException as refusal:
        if refusal.status < 400:
            raise
        if refusal.status == 404:
            detail = f"no route {request.path!r}"
        elif refusal.status == 405:
            detail = f"{request.method} is not answered here; {refusal.headers['Allow']} is"
        else:
            detail = refusal.text or refusal.reason
        headers = {name: value for name, value in refusal.headers.items() if name == "Allow"}
        response = web.json_response(
            {"detail": detail}, status=refusal.status, headers=headers, dumps=_json_text
        )
    except Exception:
        log.exception("%s %s failed", request.method, request.path)
        detail = "the request failed on the worker; its log says why"
        response = web.json_response({"detail": detail}, status=500, dumps=_json_text)
    _closing_after_an_unread_body(request, response)
    return response


def _closing_after_an_unread_body(request: AiohttpRequest, response: StreamResponse) -> None:
    """A compressed body the view left unread (or read and refused), or one that stopped
    coming (a 408): the connection closes after the answer. aiohttp reads such a body after
    answering, for at most 10 s; one its `Content-Encoding` does not decode then cut the
    connection the client, told nothing, sent its next request on (and logged a traceback:
    `streams.logs.UnparsedRequests` makes it a line), and after a 408 it took the client's
    next request for the rest of the body, and answered nothing."""
    unread = not request.content.is_eof()
    if unread and ("Content-Encoding" in request.headers or response.status == 408):
        response.force_close()


def _json_text(document: object) -> str:
    return orjson.dumps(document).decode()


def register_views(app: AppT, reads: WorldReads) -> None:
    """Serve every route on `app`'s web server, each view built over `reads`, and nothing
    else: Faust's own views (`/`, `/router/`, `/table/...`) answered without a key, and
    `/table/state/KEY/` gave any state key's value, of every tenant. Its blueprints are
    dropped, not switched off by setting: Faust lets an `APP_WEB_*` variable override one."""
    app.web.blueprints = BlueprintManager()
    cast(Any, app.web).web_app.middlewares.append(json_refusals)
    for path, view_class in ROUTES.items():
        app.web.route(path, view_class(app, app.web, reads, path))
