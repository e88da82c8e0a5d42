"""A waiting event refused as the message that fills its gap releases it: its declaration would
make a state record too large. The releasing message's outbox row then keeps the refused event's
dead letter whole, its bytes (a character's diary, which opens `SECRET`) included."""

from __future__ import annotations

import orjson

RECORD_BYTES = 16_384
"""The least `RUMOURMILL_CHANGELOG_BATCH_BYTES`: a state record of some 82 KB at most."""
SECRET = b"PLAYER-SECRET"


def declaring(seq: int, **fields: str) -> bytes:
    mara = {"name": "Mara", "kind": "character", **fields}
    event = {"world_instance_id": "save-1", "timeline_id": "main", "seq": seq}
    return orjson.dumps(event | {"key": "world.entity-declared", "entities": {"npc-mara": mara}})


LINES = [
    declaring(1, bio="b" * 45_000),
    declaring(3, diary=SECRET.decode() + " " + "x" * 45_000),  # waits, with the bio too large
    declaring(2, mood="calm"),  # releases it: refused
]
