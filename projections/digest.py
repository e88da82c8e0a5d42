"""A state digest: one stable hash over every projection of a world.

Two runs that saw the same stream must agree on it byte for byte, however often they were
killed, restarted or sent duplicates. Delivery bookkeeping (the outbox, events still waiting
in the deferral buffer) is not a projection and stays out.
"""

from __future__ import annotations

import hashlib

from projections import catalogue, minds, spreading, timelines, whereabouts, world
from projections.keys import pack
from projections.state import StateTransaction

PROJECTION_KINDS: tuple[str, ...] = (
    timelines.TIMELINES,
    world.FACTS,
    catalogue.ENTITIES,
    whereabouts.LOCATIONS,
    whereabouts.OCCUPANTS,
    minds.MEMORIES,
    minds.RECOLLECTIONS,
    minds.BELIEF_RANKS,
    minds.ORIGINS,
    minds.RELATIONS,
    minds.RELATION_HEADS,
    minds.NEWS,
    minds.ORIGIN_EVENTS,
    minds.PERSISTENT_WORLDS,
    spreading.GROUP_EXCHANGES,
)
"""Key spaces holding a world's projections; each key starts (kind, tenant, world)."""


def world_digest(tx: StateTransaction, tenant_id: str, world_id: str) -> str:
    """The hex digest of every projection entry of one world, in key order."""
    digest = hashlib.blake2b(digest_size=32)
    for kind in PROJECTION_KINDS:
        for key, value in tx.scan(pack(kind, tenant_id, world_id)):
            digest.update(len(key).to_bytes(4, "big") + key)
            digest.update(len(value).to_bytes(4, "big") + value)
    return digest.hexdigest()
