"""Seed 001's tavern, extended with a lie and the player's answer to it (section 11).

Mara saw Ilse defeat the drunk sailor (seq 3: the world record says `defeated`). Rook, a liar,
tells her the sailor is alive (seq 6): she believes it, uncertain and diverging. Ilse then
says the sailor is dead, she beat him (seq 7), claiming what the record says.
"""

from __future__ import annotations

from typing import Any

import orjson

from tests.tavern import MAIN

SAILOR = "npc-drunk-sailor"
SAID = "loreweaver.conversation.player-said"


def line(seq: int, key: str, timeline: str = "main", **fields: Any) -> bytes:
    event = {"world_instance_id": "save-1", "timeline_id": timeline, "seq": seq, "key": key}
    return orjson.dumps(event | fields)


def status(value: str, subject: str = SAILOR) -> dict[str, str]:
    return {"subject": subject, "attribute": "status", "value": value}


def lie(seq: int = 6) -> bytes:
    """Rook tells Mara the sailor is alive."""
    return line(
        seq,
        "loreweaver.conversation.told",
        actor="npc-rook",
        target="npc-mara",
        payload={
            "content": "The sailor is alive and drinking at the harbour",
            "about": [SAILOR],
            "facts": [status("alive")],
        },
        game_time="day 1, 21:50",
        entities={"npc-rook": {"name": "Rook", "kind": "character"}},
    )


def ilse_says(text: str, facts: list[dict[str, str]], seq: int = 7, **fields: Any) -> bytes:
    """Ilse's line to Mara, claiming `facts`."""
    return line(
        seq,
        SAID,
        actor="player-1",
        target="npc-mara",
        players=["player-1"],
        payload={"text": text, "facts": facts},
        **{"game_time": "day 1, 22:00"} | fields,
    )


DEAD = "The sailor is dead, I beat him"
TRUTH = ilse_says(DEAD, [status("defeated")])
"""What the record says: the line agrees with it."""
FLED = "The sailor fled to the harbour"
A_LIE = ilse_says(FLED, [status("fled")])
"""What the record does not say: the line contradicts it."""
LINES = [*MAIN, lie(), TRUTH]
