"""A read model as a client receives it: the JSON the HTTP view serves, decoded."""

from __future__ import annotations

from typing import Any

import orjson

from projections.recall import RecallQuery, recall
from projections.state import MemoryState
from schemas.memory import ReadModel
from schemas.policy import Policy
from streams.recall_index import SqliteRecallIndex


def answer(read: ReadModel) -> Any:
    """The decoded JSON body of a read, as the runtime read and provenance views serve it."""
    return orjson.loads(read.to_json())


def recall_of(
    state: MemoryState,
    index: SqliteRecallIndex,
    text: str,
    *,
    npc: str = "npc-mara",
    timeline: str = "main",
    cues: tuple[str, ...] = (),
    limit: int = 10,
    policy: Policy | None = None,
    as_of_seq: int | None = None,
) -> Any:
    """The decoded recall answer of `npc` in the tavern's world (`default`, `save-1`)."""
    found = recall(
        state,
        index,
        "default",
        "save-1",
        timeline,
        npc,
        RecallQuery(text, cues, limit),
        policy or Policy(),
        as_of_seq,
    ).read()
    return answer(found)
