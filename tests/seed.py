"""The Memory contract's example read (seed 001, "The runtime read"), ids aside."""

from __future__ import annotations

from typing import Any

SEED_BELIEF: dict[str, Any] = {
    "kind": "knowledge",
    "content": "I will find your son. Where was he last seen?",
    "about": ["player-1", "npc-mara"],
    "source": "player",
    "source_entity": "player-1",
    "hops": 1,
    "confidence": 0.7,
    "importance": 0.5,
    "feeling": 0.2,
    "arousal": 0.3,
    "diverging": False,
    "uncertain": True,
    "seq": 2,
    "game_time": "day 1, 19:41",
    "persistent": False,
}
SEED_RECOLLECTION: dict[str, Any] = {
    "kind": "event",
    "content": "Ilse enemy defeated at The Crooked Lantern (enemy: npc-drunk-sailor)",
    "about": ["player-1", "loc-tavern", "npc-drunk-sailor"],
    "source": "seen",
    "source_entity": None,
    "hops": 0,
    "confidence": 0.9,
    "importance": 0.6,
    "feeling": -0.3,
    "arousal": 0.7,
    "diverging": False,
    "uncertain": False,
    "seq": 3,
    "game_time": "day 1, 21:05",
    "persistent": False,
}

SEED_READ: dict[str, Any] = {
    "world_instance_id": "save-1",
    "timeline_id": "main",
    "npc_id": "npc-mara",
    "acknowledged_seq": 3,
    "processed_seq": 3,
    "location": "loc-tavern",
    "beliefs": [SEED_BELIEF],
    "relations": [
        {"entity_id": "player-1", "feeling": -0.05, "memories": 2, "last_seq": 3},
        {"entity_id": "loc-tavern", "feeling": -0.3, "memories": 1, "last_seq": 3},
        {"entity_id": "npc-drunk-sailor", "feeling": -0.3, "memories": 1, "last_seq": 3},
    ],
    "recollections": [SEED_RECOLLECTION],
}
