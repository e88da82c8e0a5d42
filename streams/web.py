"""HTTP views: each request is served by the worker that owns the world it names.

Keys and parameters are checked before routing, so a bad request gets a 401 or a 400 with a
plain `detail` from whichever worker it reached, never a 500. Reads call no model and never
write.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

from faust.exceptions import SameNode
from faust.web import Request, Response, View

from projections import timelines
from projections.digest import world_digest
from projections.provenance import provenance
from projections.runtime_read import NotFound, runtime_read
from projections.state import StateTransaction
from schemas.memory import ReadModel

if TYPE_CHECKING:
    from streams.app import Rumourmill

IDENTIFIER_LIMIT = 128
DEFAULT_TENANT = "default"


class HTTPProblem(Exception):
    """An answer other than 200, with a plain `detail`."""

    def __init__(self, status: int, detail: str) -> None:
        super().__init__(detail)
        self.status = status
        self.detail = detail


def check_identifier(name: str, value: str) -> str:
    if not 1 <= len(value) <= IDENTIFIER_LIMIT:
        raise HTTPProblem(400, f"{name!r} must be 1 to {IDENTIFIER_LIMIT} characters")
    return value


def query_identifier(request: Request, name: str, *, default: str | None = None) -> str:
    """One query parameter, given once, 1 to 128 characters."""
    values: list[str] = cast(Any, request.query).getall(name, [])  # a MultiDict
    if not values:
        if default is not None:
            return default
        raise HTTPProblem(400, f"query parameter {name!r} is required")
    if len(values) > 1:
        raise HTTPProblem(400, f"query parameter {name!r} must be given once")
    return check_identifier(name, values[0])


@dataclass(frozen=True)
class ReadScope:
    """Who asks about which world, as a handler receives it."""

    tenant_id: str
    world_id: str
    tx: StateTransaction


Handler = Callable[..., Awaitable[Response]]


def answer(view: View, read: Callable[..., ReadModel], scope: ReadScope, *args: str) -> Response:
    """The JSON of a read of the world in `scope`; a read with nothing to show is a 404."""
    try:
        found = read(scope.tx, scope.tenant_id, scope.world_id, *args)
    except NotFound as missing:
        raise HTTPProblem(404, str(missing)) from None
    return view.bytes(found.to_json(), content_type="application/json")


def register_views(mill: Rumourmill) -> None:
    """Attach the HTTP views to the app."""
    app = mill.app
    tenants_by_key = mill.settings.tenants_by_api_key

    def tenant_of(request: Request) -> str:
        """The tenant a request may read: its API key's, or the named one without keys."""
        asked = query_identifier(request, "tenant_id", default="")
        if not tenants_by_key:
            return asked or DEFAULT_TENANT
        scheme, _, key = request.headers.get("Authorization", "").partition(" ")
        tenant = tenants_by_key.get(key.strip()) if scheme.lower() == "bearer" else None
        if tenant is None:
            raise HTTPProblem(401, "a valid bearer API key is required")
        if asked and asked != tenant:
            raise HTTPProblem(403, f"this API key does not read tenant {asked!r}")
        return tenant

    def world_read(handler: Handler) -> Handler:
        """Authenticate, validate, then serve here or forward to the world's owner."""

        async def serve(view: View, request: Request, **params: str) -> Response:
            try:
                tenant = tenant_of(request)
                world = query_identifier(request, "world_instance_id")
                for name, value in params.items():
                    check_identifier(name, value)
                try:
                    return await app.router.route_req(mill.state.name, world, view.web, request)
                except SameNode:
                    scope = ReadScope(tenant, world, mill.read_transaction(world))
                    return await handler(view, request, scope, **params)
            except HTTPProblem as problem:
                return view.json({"detail": problem.detail}, status=problem.status)

        return serve

    @app.page("/health")
    class Health(View):
        async def get(self, request: Request) -> Response:
            return self.json({"status": "ok"})

    @app.page("/v2/memory/runtime/npcs/{npc_id}")
    class RuntimeRead(View):
        """One character's mind on one timeline (the Memory contract's runtime read)."""

        @world_read
        async def get(self, request: Request, scope: ReadScope, npc_id: str) -> Response:
            timeline_id = query_identifier(request, "timeline_id")
            return answer(self, runtime_read, scope, timeline_id, npc_id)

    @app.page("/v2/memory/runtime/npcs/{npc_id}/beliefs/{belief_id}/provenance")
    class Provenance(View):
        """Where a memory came from: the original event and every teller, in order."""

        @world_read
        async def get(
            self, request: Request, scope: ReadScope, npc_id: str, belief_id: str
        ) -> Response:
            timeline_id = query_identifier(request, "timeline_id")
            return answer(self, provenance, scope, timeline_id, npc_id, belief_id)

    @app.page("/v2/timelines/{timeline_id}")
    class Timeline(View):
        """Positions and branch point of one timeline."""

        @world_read
        async def get(self, request: Request, scope: ReadScope, timeline_id: str) -> Response:
            record = timelines.load(scope.tx, scope.tenant_id, scope.world_id, timeline_id)
            if record is None:
                raise HTTPProblem(404, f"timeline {timeline_id!r} has never received events")
            return self.json(record.model_dump(mode="json"))

    @app.page("/v2/admin/digest")
    class Digest(View):
        """The state digest of one world: equal digests, equal projections."""

        @world_read
        async def get(self, request: Request, scope: ReadScope) -> Response:
            digest = world_digest(scope.tx, scope.tenant_id, scope.world_id)
            return self.json(
                {
                    "tenant_id": scope.tenant_id,
                    "world_instance_id": scope.world_id,
                    "digest": digest,
                }
            )
