"""A state digest: one stable hash over every projection of a world.

Two runs that saw the same stream must agree on it byte for byte, however often they were
killed, restarted or sent duplicates. It covers every key space `projections.key_prefixes`
declares a projection; delivery bookkeeping (the outbox, events still waiting in the deferral
buffer) is not a projection and stays out.
"""

from __future__ import annotations

import hashlib

from projections.key_prefixes import PROJECTION_PREFIXES
from projections.keys import pack
from projections.state import StateTransaction


def world_digest(tx: StateTransaction, tenant_id: str, world_id: str) -> str:
    """The hex digest of every projection entry of one world, in key order."""
    digest = hashlib.blake2b(digest_size=32)
    for prefix in PROJECTION_PREFIXES:
        for key, value in tx.scan(pack(prefix, tenant_id, world_id)):
            digest.update(len(key).to_bytes(4, "big") + key)
            digest.update(len(value).to_bytes(4, "big") + value)
    return digest.hexdigest()
