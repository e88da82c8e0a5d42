"""The embedding agent: vectors for recall, made beside the ingest path, never inside it.

The ingest agent notes the worlds each batch it takes in names (`MemoryEmbedding.note`, from
the batch's acks) and goes on; this agent, a task of its own on the worker's loop, embeds what
those worlds formed since they were last looked at: each content that has no vector yet, once,
a step at a time (`embed_one_batch`: a slice of the memory log read, or a batch of contents
embedded), letting ingest go on after each step. No ack waits for it. The recall index lives in
memory, so a restart catches a world up from position 0 at its next event or the next recall
or decision searching it, its whole history waiting for vectors; until a memory has its vector,
cues and words still find it, and the word and cue searches catch themselves up when a recall
needs them. A rebalance that moves a world's partition away forgets it (`keep`).

It used to read the worker's own acks back from Kafka: a second fetch, decode and commit of a
record per event, for a set of worlds the ingest agent already holds.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable, Iterator
from typing import Protocol

from projections.memory_store import memory_keys
from projections.state import StateTransaction
from schemas import Ack
from streams.embedding import Embedder
from streams.logs import logger
from streams.partitioning import world_partition
from streams.recall_index import SqliteRecallIndex, embed_one_batch
from streams.web import HTTPProblem

log = logger("embedding")


class Embeds(Protocol):
    """What the embedding needs of a worker."""

    @property
    def recall_index(self) -> SqliteRecallIndex: ...

    async def read_transaction(self, world_id: str) -> StateTransaction: ...


def at_home(acks: Iterable[Ack], partition: int, partitions: int) -> Iterator[Ack]:
    """The acks, of messages taken from `partition`, that name a world living there: not a
    tenant deletion's, which every partition takes and which names the world `*` (a worker
    not holding the partition of `*` logged, at every deletion of a tenant, that it did not
    serve world `*` and should be given its own `RUMOURMILL_WEB_URL`), nor a misrouted event's."""
    for ack in acks:
        world = ack.world_instance_id
        if world is not None and world_partition(world.encode(), partitions) == partition:
            yield ack


class MemoryEmbedding:
    """The worlds the ingest agent's batches named, and the agent that embeds them (`run`)."""

    def __init__(self, worker: Embeds, embedder: Callable[[], Embedder]) -> None:
        self.worker = worker
        self.make_embedder = embedder
        self.worlds: set[tuple[str, str]] = set()
        """The tenants and worlds noted whose contents may lack vectors: the agent takes one
        out for each batch it embeds, and puts it back while more wait."""
        self.noted = asyncio.Event()
        """Set when a batch names worlds the agent has not embedded since."""
        self.searched: set[tuple[str, str]] = set()
        """The worlds a recall or decision noted since the last rebalance: their events note
        them from then on."""

    async def load(self) -> None:
        """Make the embedder in a thread, as the worker starts: loading a model takes half a
        second of CPU, which recovery can spare and the first events could not. Without one
        (it failed to load, logged), memories get no vectors and cues and words find them."""
        try:
            self.worker.recall_index.embedder = await asyncio.to_thread(self.make_embedder)
        except Exception:
            log.exception("no embedder: memories get no vectors, cues and words still find them")

    async def run(self) -> None:
        """The agent: load the embedder, then embed the noted worlds whenever there are some,
        letting ingest go on between one step and the next."""
        await self.load()
        while True:
            await self.noted.wait()
            self.noted.clear()
            await self.embed_noted()

    def note(self, acks: Iterable[Ack]) -> None:
        """The worlds these acks name (a tenant and a world each), for the agent to embed."""
        self.note_worlds(
            (ack.tenant_id, ack.world_instance_id)
            for ack in acks
            if ack.tenant_id and ack.world_instance_id
        )

    def note_worlds(self, worlds: Iterable[tuple[str, str]]) -> None:
        """These tenants' worlds, for the agent to embed what of them has no vector yet."""
        self.worlds.update(worlds)
        if self.worlds:
            self.noted.set()

    def note_searched(self, tenant: str, world: str) -> None:
        """A world a recall or decision searches, for the agent to embed, the first time since
        the last rebalance: after a start, a world with no new event was never embedded
        again, and its recalls searched no vector. Only the first: each noting costs the agent a
        step (reading the world's timelines), which every read of a busy world repeated."""
        if (tenant, world) not in self.searched:
            self.searched.add((tenant, world))
            self.note_worlds([(tenant, world)])

    def forget(self, tenant: str, world: str) -> None:
        """Forget a deleted world: noted or searched, it would be kept for the worker's life."""
        self.searched.discard((tenant, world))
        self.worlds.discard((tenant, world))

    def keep(self, assigned: Callable[[str], bool]) -> None:
        """Forget the noted worlds no longer `assigned` here (a rebalance moved their partition
        away), also in a round under way: their state is another worker's now, and embedding
        them would reopen it and put them back in the recall index. Every world is noted again
        by its next search: one moved away and back was forgot by the recall index, and one
        kept may have grown on another worker meanwhile (this one out of the group a while)."""
        self.worlds -= {noted for noted in self.worlds if not assigned(noted[1])}
        self.searched.clear()

    async def embed_noted(self) -> None:
        """Embed what the noted worlds formed that has no vector yet, one step at a time (a
        slice of a world's memory log read, or a batch of its contents embedded), letting
        ingest go on after each: a world's whole history, after a start, is read 500 memories
        a step, not at once."""
        if (embedder := self.worker.recall_index.embedder) is None:  # `run` loads it first
            self.worlds.clear()
            return
        while self.worlds:
            tenant, world = self.worlds.pop()
            if await self.embed_step(embedder, tenant, world):
                self.worlds.add((tenant, world))  # so that `keep` can still forget it
            await asyncio.sleep(0)  # ingest goes on between steps

    async def embed_step(self, embedder: Embedder, tenant: str, world: str) -> bool:
        """Take a step of the world's embedding: read a slice of what it formed, or embed a
        batch of what has no vector yet; whether more wait.
        An error is logged and leaves those memories to cues and words, as a world's refused
        model does, until the world's next event or search notes it again."""
        index = self.worker.recall_index
        try:
            tx = await self.worker.read_transaction(world)
            stored, more = embed_one_batch(index, embedder, tx, memory_keys(tx, tenant, world))
        except HTTPProblem as unreadable:  # moved, or recovering
            log.info("embedding of world %r left for now: %s", world, unreadable.detail)
        except Exception:
            log.exception("embedding the memories of world %r failed", world)
        else:
            if stored:
                log.debug("embedded %d memory(ies) of world %r", stored, world)
            return more
        self.searched.discard((tenant, world))  # failed: its next search notes it again
        return False
