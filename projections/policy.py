"""Which policy governs a world: the world's own, over the tenant's default, over built-in.

Policies are set as partial JSON documents, one per world and one per tenant (the default of
its worlds). The policy in force is the built-in defaults with the tenant document laid over
them, then the world document.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

import orjson

from schemas.policy import Policy, merge_policy

PolicyLookup = Callable[[str, str], Policy]
"""The policy in force for `(tenant_id, world_instance_id)`."""

DEFAULT_POLICY = Policy()


def default_policies(tenant_id: str, world_id: str) -> Policy:
    """The built-in defaults, for every world."""
    return DEFAULT_POLICY


def policy_key(tenant_id: str, world_id: str | None) -> bytes:
    """The key a policy document is kept under; `world_id` None for the tenant default."""
    return orjson.dumps([tenant_id, world_id])


def resolve(
    tenant_document: dict[str, Any] | None, world_document: dict[str, Any] | None
) -> Policy:
    """Built-in defaults, then the tenant's document, then the world's, validated.

    Documents are checked on their way in (`rumourmill policy set`, and the worker's policy
    feed, which refuses an invalid one and keeps the last valid): an invalid one here is a
    bug and raises pydantic's `ValidationError`.
    """
    policy = DEFAULT_POLICY
    for document in (tenant_document, world_document):
        if document:
            policy = merge_policy(policy, document)
    return policy


class PolicyDocuments(Protocol):
    """Where policy documents are kept, by `policy_key` (a global table, or a dict)."""

    def get(self, key: bytes, /) -> bytes | None: ...


class PolicyBook:
    """Looks policies up in their documents, resolving each distinct pair of documents once."""

    def __init__(self, documents: PolicyDocuments) -> None:
        self._documents = documents
        self._resolved: dict[tuple[bytes | None, bytes | None], Policy] = {}

    def __call__(self, tenant_id: str, world_id: str) -> Policy:
        tenant_raw = self._documents.get(policy_key(tenant_id, None))
        world_raw = self._documents.get(policy_key(tenant_id, world_id))
        cached = self._resolved.get((tenant_raw, world_raw))
        if cached is None:
            cached = resolve(_document(tenant_raw), _document(world_raw))
            self._resolved[(tenant_raw, world_raw)] = cached
        return cached


def _document(raw: bytes | None) -> dict[str, Any] | None:
    if raw is None:
        return None
    document = orjson.loads(raw)
    return document if isinstance(document, dict) else None
