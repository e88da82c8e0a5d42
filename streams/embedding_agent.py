"""The embedding agent: vectors for recall, made from the stream beside the ingest path.

It follows the acks topic (keyed by world like the events, so each worker hears of its own
worlds): for each batch of acks it reads what those worlds formed since it last looked and
embeds the contents that have no vector yet, each once. It does no more than that: the word
and cue searches catch themselves up when a recall needs them. The ingest agent never waits
for it; until a memory has its vector, cues and words still find it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

import orjson

from projections.memory_store import memory_keys
from projections.state import StateTransaction
from streams.embedding import Embedder
from streams.event_batches import event_batches
from streams.logs import logger
from streams.recall_index import SqliteRecallIndex, embed_pending

log = logger("embedding")

BATCH = 500
BATCH_SECONDS = 1.0


class Embeds(Protocol):
    """What the agent needs of a worker."""

    @property
    def recall_index(self) -> SqliteRecallIndex: ...

    def read_transaction(self, world_id: str) -> StateTransaction: ...


def embedding_agent(
    worker: Embeds, embedder: Callable[[], Embedder]
) -> Callable[[Any], Awaitable[None]]:
    """The agent body; `embedder` is made as the agent starts, in a thread, while the worker
    recovers its state: loading a model takes half a second of CPU, which would otherwise
    compete with the ingest agent's first events (acks wait on the channel meanwhile)."""

    async def embed_memories(stream: Any) -> None:
        if worker.recall_index.embedder is None:  # off the loop: start-up goes on
            worker.recall_index.embedder = await asyncio.to_thread(embedder)
            log.info("embedder %s loaded", worker.recall_index.embedder.model)
        async for events in event_batches(stream, BATCH, BATCH_SECONDS):
            try:
                worlds = {named for event in events if (named := _world_of(event.value))}
                embed_worlds_of(worlds)
            finally:  # acked whatever came of it, as Faust's `Stream.take` would have
                for event in events:
                    event.ack()

    def embed_worlds_of(worlds: set[tuple[str, str]]) -> None:
        index = worker.recall_index
        for tenant, world in sorted(worlds):
            tx = worker.read_transaction(world)
            assert index.embedder is not None
            stored = embed_pending(index, index.embedder, tx, memory_keys(tx, tenant, world))
            if stored:
                log.debug("embedded %d memory(ies) of world %r", stored, world)

    return embed_memories


def _world_of(ack: bytes) -> tuple[str, str] | None:
    """The tenant and world an ack names (its JSON, as the worker sends it), if it names both."""
    try:
        fields = orjson.loads(ack)
    except orjson.JSONDecodeError:
        return None
    if isinstance(fields, dict) and fields.get("tenant_id") and fields.get("world_instance_id"):
        return fields["tenant_id"], fields["world_instance_id"]
    return None
