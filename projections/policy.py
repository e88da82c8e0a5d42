"""Which policy governs a world: the world's own, over the tenant's default, over built-in.

Policies are set as partial JSON documents, one per world and one per tenant (the default of
its worlds). The policy in force is the built-in defaults with the tenant document laid over
them, then the world document.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

import orjson
from pydantic import ValidationError

from schemas.events import MAX_ID_LENGTH
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


def is_policy_key(key: bytes) -> bool:
    """Whether `key` is one `policy_key` makes: ["TENANT", "WORLD"] or ["TENANT", null], each
    id of 1 to 128 characters. A document under any other key governs nothing."""
    try:
        parts = orjson.loads(key)
    except orjson.JSONDecodeError:
        return False
    if not isinstance(parts, list) or len(parts) != 2:
        return False
    tenant, world = parts
    return _an_id(tenant) and (world is None or _an_id(world)) and key == policy_key(tenant, world)


def _an_id(value: object) -> bool:
    return isinstance(value, str) and 1 <= len(value) <= MAX_ID_LENGTH


def resolve(
    tenant_document: dict[str, Any] | None, world_document: dict[str, Any] | None
) -> Policy:
    """Built-in defaults, then the tenant's document, then the world's, validated.

    Documents are checked on their way in (`rumourmill policy set`, and the worker's policy
    feed, which refuses an invalid one and keeps the last valid), each over the defaults alone:
    two valid documents may still break a rule between fields together (a world's
    `convinced_from` under its tenant's `doubting_from`). That raises pydantic's
    `ValidationError` here; `PolicyBook` then keeps the tenant's policy in force.
    """
    policy = DEFAULT_POLICY
    for document in (tenant_document, world_document):
        if document:
            policy = merge_policy(policy, document)
    return policy


class PolicyDocuments(Protocol):
    """Where policy documents are kept, by `policy_key` (a global table, or a dict)."""

    def get(self, key: bytes, /) -> bytes | None: ...


PolicyConflict = Callable[[str, str, ValidationError], None]
"""Told `(tenant_id, world_instance_id, why)` when a world's document cannot lie over its
tenant's."""


DocumentPair = tuple[bytes | None, bytes | None]
"""A world's policy documents as stored: its tenant's, its own."""
SWEEP_FLOOR = 64
"""`PolicyBook` looks for replaced documents once it holds more pairs than this (and twice
what its last look kept)."""


@dataclass(frozen=True, slots=True)
class _Resolved:
    """The policy a pair of documents gives, why the world's could not lie over its tenant's
    (None: it could), and the world (tenant, world id) the pair was first read for."""

    policy: Policy
    conflict: ValidationError | None
    world: tuple[str, str]


class PolicyBook:
    """Looks policies up in their documents, resolving each distinct pair of documents once.

    A world whose document conflicts with its tenant's (`resolve`) is governed by the tenant's
    policy until either changes, and `conflicting` is told once for each world so governed (the
    same pair of documents may govern several): one bad pair of documents must not stop every
    event of the world, nor its reads. Pairs whose documents were since replaced are let go
    (`_sweep`): a worker of a long life held every document ever set (3,000 of one world's
    held 76 MB).
    """

    def __init__(
        self, documents: PolicyDocuments, conflicting: PolicyConflict | None = None
    ) -> None:
        self._documents = documents
        self._conflicting = conflicting
        self._resolved: dict[DocumentPair, _Resolved] = {}
        self._sweep_above = SWEEP_FLOOR
        self._told: dict[tuple[str, str], DocumentPair] = {}
        """The documents each world in conflict was told of."""

    def __call__(self, tenant_id: str, world_id: str) -> Policy:
        documents = self._documents_of(tenant_id, world_id)
        found = self._resolved.get(documents)
        if found is None:
            found = self._resolve(documents, (tenant_id, world_id))
        if found.conflict is not None:
            self._tell(tenant_id, world_id, documents, found.conflict)
        return found.policy

    def _documents_of(self, tenant_id: str, world_id: str) -> DocumentPair:
        get = self._documents.get
        return get(policy_key(tenant_id, None)), get(policy_key(tenant_id, world_id))

    def _resolve(self, documents: DocumentPair, world: tuple[str, str]) -> _Resolved:
        tenant_document = _document(documents[0])
        try:
            found = _Resolved(resolve(tenant_document, _document(documents[1])), None, world)
        except ValidationError as conflict:
            found = _Resolved(resolve(tenant_document, None), conflict, world)
        self._resolved[documents] = found
        if len(self._resolved) > self._sweep_above:
            self._sweep()
        return found

    def _sweep(self) -> None:
        """Let go of the pairs the world they were read for no longer has. One still in force
        for other worlds (a tenant's document, for its worlds without their own) is resolved
        again at its next use: correct, and rare. So for the worlds told of a conflict."""
        self._resolved = {
            documents: found
            for documents, found in self._resolved.items()
            if self._documents_of(*found.world) == documents
        }
        self._sweep_above = max(SWEEP_FLOOR, 2 * len(self._resolved))
        self._told = {
            world: documents
            for world, documents in self._told.items()
            if self._documents_of(*world) == documents
        }

    def _tell(
        self, tenant_id: str, world_id: str, documents: DocumentPair, conflict: ValidationError
    ) -> None:
        """`conflicting` told of this world, once while these documents are in force."""
        if self._conflicting is not None and self._told.get((tenant_id, world_id)) != documents:
            self._told[(tenant_id, world_id)] = documents
            self._conflicting(tenant_id, world_id, conflict)


def _document(raw: bytes | None) -> dict[str, Any] | None:
    if raw is None:
        return None
    document = orjson.loads(raw)
    return document if isinstance(document, dict) else None
