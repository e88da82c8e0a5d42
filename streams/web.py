"""HTTP views: each request is served by the worker that owns the world it names.

Parameters are checked before routing, so a bad request gets a 400 with a plain `detail`
from whichever worker it reached, never a 500.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, cast

from faust.exceptions import SameNode
from faust.web import Request, Response, View

from projections import timelines
from projections.digest import world_digest

if TYPE_CHECKING:
    from streams.app import Rumourmill

IDENTIFIER_LIMIT = 128


class BadRequest(Exception):
    """A request parameter is missing, repeated or out of range."""


def identifier(request: Request, name: str, *, default: str | None = None) -> str:
    """One query parameter, given once, 1 to 128 characters."""
    values: list[str] = cast(Any, request.query).getall(name, [])  # a MultiDict
    if not values:
        if default is not None:
            return default
        raise BadRequest(f"query parameter {name!r} is required")
    if len(values) > 1:
        raise BadRequest(f"query parameter {name!r} must be given once")
    value = values[0]
    if not 1 <= len(value) <= IDENTIFIER_LIMIT:
        raise BadRequest(f"query parameter {name!r} must be 1 to {IDENTIFIER_LIMIT} characters")
    return value


Handler = Callable[..., Awaitable[Response]]


def register_views(mill: Rumourmill) -> None:
    """Attach the HTTP views to the app."""
    app = mill.app

    def routed_by_world(handler: Handler) -> Callable[..., Awaitable[Response]]:
        """Validate the world parameter, then serve here or forward to its owner."""

        async def serve(view: View, request: Request, **params: Any) -> Response:
            try:
                world = identifier(request, "world_instance_id")
                try:
                    return await app.router.route_req(mill.state.name, world, view.web, request)
                except SameNode:
                    return await handler(view, request, world, **params)
            except BadRequest as error:
                return view.json({"detail": str(error)}, status=400)

        return serve

    @app.page("/health")
    class Health(View):
        async def get(self, request: Request) -> Response:
            return self.json({"status": "ok"})

    @app.page("/v2/timelines/{timeline_id}")
    class Timeline(View):
        """Positions and branch point of one timeline."""

        @routed_by_world
        async def get(self, request: Request, world: str, timeline_id: str) -> Response:
            tenant = identifier(request, "tenant_id", default="default")
            tx = mill.read_transaction(world)
            record = timelines.load(tx, tenant, world, timeline_id)
            if record is None:
                return self.json({"detail": f"timeline {timeline_id!r} never seen"}, status=404)
            return self.json(record.model_dump(mode="json"))

    @app.page("/v2/admin/digest")
    class Digest(View):
        """The state digest of one world: equal digests, equal projections."""

        @routed_by_world
        async def get(self, request: Request, world: str) -> Response:
            tenant = identifier(request, "tenant_id", default="default")
            digest = world_digest(mill.read_transaction(world), tenant, world)
            return self.json({"tenant_id": tenant, "world_instance_id": world, "digest": digest})
