"""Seed 001's tavern (`streams/demo/tavern.ndjson`), the story most tests replay, read once: Mara
in The Crooked Lantern, Ilse's promise and fight, Tomas told of it on main, and a reload that
branches from main after seq 2, where Ilse gives Mara a locket instead."""

from __future__ import annotations

from projections.policy import resolve
from streams.dev import DEMO_STORY

TAVERN_FILE = DEMO_STORY
"""The seed as a file, for the commands that read one."""
TAVERN = TAVERN_FILE.read_bytes()
"""The seed's bytes, one event a line."""
TAVERN_LINES = TAVERN.splitlines()
"""Its events, in order: main's seq 1 to 5, then the reload's seq 3."""
MAIN = TAVERN_LINES[:5]
"""The tavern's main timeline: seq 1 to 5."""
PERSISTENT = resolve(
    None,
    {
        "memory": {
            "spreading": {"enabled": True},
            "persistent": {"characters": ["npc-mara", "npc-tomas"]},
        }
    },
)
"""Rumours spread, and Mara and Tomas keep all their memories for the whole world: every
timeline reads them, whichever formed them."""
