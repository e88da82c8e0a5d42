"""The embedding agent: the worlds the ingest agent's batches name (their acks) get vectors for
what they formed, by the agent's own task and not by the batch, which goes on between each batch
of contents the agent embeds and each slice of a world's history it reads; other worlds, acks
that name no world, and worlds a rebalance moved away get none; an embedder that fails to load
leaves recall to cues and words and stops nothing."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Sequence
from itertools import pairwise

import pytest

from benchmarks.story import encoded, tavern_story
from projections.delivery import SourceMessage
from projections.memory_store import memory_keys
from projections.projector import Projector
from projections.recall import search_scope
from projections.runtime_read import timeline_view
from projections.state import MemoryState, StateTransaction
from schemas import Ack
from schemas.outcomes import Outcome
from streams.embedding import Embedder, Vectors, WordLlamaEmbedder
from streams.embedding_agent import MemoryEmbedding, at_home
from streams.partitioning import partition_of
from streams.recall_index import EMBED_BATCH, SqliteRecallIndex, embed_pending
from streams.replay import replay_lines
from streams.web import HTTPProblem
from tests.projections.test_deletion import deletion
from tests.projections.test_deletion import story as deletion_story
from tests.streams.test_recall_index import STATE, CountingEmbedder

BUSY = replay_lines(encoded(tavern_story(400, seed=3, worlds=("busy",)))).state
"""World "busy", whose memories hold more different contents than one batch embeds."""


class Worker:
    """The recall index and the state reads a worker gives the embedding."""

    def __init__(self, busy: StateTransaction = BUSY) -> None:
        self.recall_index = SqliteRecallIndex()
        self.busy = busy
        """The state of world "busy"."""

    async def read_transaction(self, world_id: str) -> StateTransaction:
        return self.busy if world_id == "busy" else STATE


def ack(world: str | None) -> Ack:
    return Ack(
        tenant_id="default" if world else None,
        world_instance_id=world,
        timeline_id="main" if world else None,
        seq=1 if world else None,
        outcome=Outcome.PROCESSED if world else Outcome.REJECTED,
    )


def has_vectors(index: SqliteRecallIndex, world: str) -> bool:
    """Whether the world holds vectors (its first ones fix its model: another is refused)."""
    return index.refuses("default", world, "another/4", 4)


def embedded_after(embedding: MemoryEmbedding, acks: list[Ack]) -> None:
    async def batch() -> None:
        await embedding.load()
        embedding.note(acks)
        await embedding.embed_noted()

    asyncio.run(batch())


def test_the_agent_embeds_the_worlds_batches_name_without_the_batch_waiting() -> None:
    worker, counting = Worker(), CountingEmbedder(8)
    embedding = MemoryEmbedding(worker, lambda: counting)

    async def ingest_then_wait() -> bool:
        agent = asyncio.ensure_future(embedding.run())
        try:
            embedding.note([ack("save-1")])  # what a batch does: note, and go on
            embedded_at_once = has_vectors(worker.recall_index, "save-1")
            for _ in range(200):
                if has_vectors(worker.recall_index, "save-1"):
                    break
                await asyncio.sleep(0.01)
            return embedded_at_once
        finally:
            agent.cancel()

    assert not asyncio.run(ingest_then_wait())
    assert has_vectors(worker.recall_index, "save-1")
    assert not has_vectors(worker.recall_index, "save-2")


def test_the_worlds_noted_get_their_vectors_each_once() -> None:
    worker, counting = Worker(), CountingEmbedder(8)
    embedding = MemoryEmbedding(worker, lambda: counting)
    embedded_after(embedding, [ack("save-1"), ack(None), ack("save-1")])
    assert worker.recall_index.embedder is counting
    assert has_vectors(worker.recall_index, "save-1")
    assert not has_vectors(worker.recall_index, "save-2")
    first = counting.embedded
    assert first > 0

    asyncio.run(embedding.embed_noted())  # nothing noted since: nothing embedded again
    assert counting.embedded == first
    embedded_after(embedding, [ack("save-2"), ack("save-1")])
    assert has_vectors(worker.recall_index, "save-2")
    assert counting.embedded == 2 * first  # the same story in both: save-1 had all its own


def test_an_embedder_that_fails_to_load_leaves_no_vectors_and_stops_nothing() -> None:
    def broken() -> Embedder:
        raise OSError("no model files")

    worker = Worker()
    embedding = MemoryEmbedding(worker, broken)
    embedded_after(embedding, [ack("save-1")])
    assert worker.recall_index.embedder is None
    assert not has_vectors(worker.recall_index, "save-1")


def test_ingest_goes_on_between_the_batches_of_a_worlds_backlog() -> None:
    worker = Worker()
    taken = 0  # the batches ingest took in so far
    taken_at_each_embedding: list[int] = []

    class Watched(CountingEmbedder):
        def embed(self, texts: Sequence[str]) -> Vectors:
            taken_at_each_embedding.append(taken)
            return super().embed(texts)

    embedding = MemoryEmbedding(worker, lambda: Watched(8))

    async def ingest_while_the_backlog_is_embedded() -> None:
        nonlocal taken
        agent = asyncio.ensure_future(embedding.run())
        try:
            embedding.note([ack("busy")])  # a restart: the world's whole history waits
            deadline = time.monotonic() + 10
            while not has_vectors(worker.recall_index, "busy") or embedding.worlds:
                assert time.monotonic() < deadline, "the backlog was not embedded"
                embedding.note([ack("save-1")])  # a batch taken in, its acks noted
                taken += 1
                await asyncio.sleep(0)
        finally:
            agent.cancel()

    asyncio.run(ingest_while_the_backlog_is_embedded())
    assert len(taken_at_each_embedding) > 2  # save-1, and busy in more than one batch
    # a batch was taken in between any two embedded
    assert taken_at_each_embedding == sorted(set(taken_at_each_embedding))
    assert worker.recall_index.pending("default", "busy", limit=1) == []
    assert has_vectors(worker.recall_index, "save-1")


def test_the_worlds_a_rebalance_moved_away_are_embedded_no_further() -> None:
    worker, counting = Worker(), CountingEmbedder(8)
    embedding = MemoryEmbedding(worker, lambda: counting)

    async def rebalance_while_embedding() -> None:
        await embedding.load()
        embedding.note([ack("busy"), ack("save-1")])
        embedding.keep(lambda world: world != "save-1")  # moved away before the agent ran
        round_of_embedding = asyncio.ensure_future(embedding.embed_noted())
        while not counting.embedded:
            await asyncio.sleep(0)
        embedding.keep(lambda world: False)  # moved away after the first batch of its backlog
        await round_of_embedding

    asyncio.run(rebalance_while_embedding())
    assert counting.embedded == EMBED_BATCH
    assert worker.recall_index.pending("default", "busy", limit=1) != []
    assert not has_vectors(worker.recall_index, "save-1")


class Recording:
    """WordLlama's vectors, and the batches of texts it was given, in order."""

    def __init__(self, embedder: Embedder) -> None:
        self.embedder = embedder
        self.model, self.dimension = embedder.model, embedder.dimension
        self.batches: list[list[str]] = []

    def embed(self, texts: Sequence[str]) -> Vectors:
        self.batches.append(list(texts))
        return self.embedder.embed(texts)

    def noted(self, index: SqliteRecallIndex) -> int:
        """The contents of "busy" the index has queued so far: embedded, or waiting."""
        waiting = index.pending("default", "busy", limit=1 << 20)
        return sum(map(len, self.batches)) + len(waiting)


def found_by_meaning(index: SqliteRecallIndex, busy: StateTransaction) -> list[list[str] | None]:
    _, keys, ancestry = timeline_view(busy, "default", "busy", "main")
    index.catch_up(busy, keys)
    asked = "drink shared at The Drowned Rat"
    return [
        index.by_meaning(search_scope(keys, ancestry, character), asked, 20)
        for character in ("npc-000", "npc-001", "npc-002")
    ]


def test_a_worlds_history_is_read_a_slice_at_a_time_the_loop_going_on_between() -> None:
    """A restart's first event of a world sends the agent through its whole memory log: read at
    once, it held the worker's loop, and every tenant's events and reads, 1.7 s in a world of
    94,000 memories. Read a slice at a time, it gives the vectors a reading at once gives."""
    busy = replay_lines(encoded(tavern_story(2_000, seed=3, worlds=("busy",)))).state
    wordllama = WordLlamaEmbedder()
    worker, sliced = Worker(busy), Recording(wordllama)
    embedding = MemoryEmbedding(worker, lambda: sliced)
    noted_at_each_turn: list[int] = []  # what another task on the loop sees at each of its turns

    async def catch_up_while_the_loop_goes_on() -> None:
        await embedding.load()
        embedding.note([ack("busy")])
        catching_up = asyncio.ensure_future(embedding.embed_noted())
        while not catching_up.done():
            noted_at_each_turn.append(sliced.noted(worker.recall_index))
            await asyncio.sleep(0)
        await catching_up

    asyncio.run(catch_up_while_the_loop_goes_on())
    whole = Recording(wordllama)
    at_once = SqliteRecallIndex(whole)
    keys = memory_keys(busy, "default", "busy")
    at_once.note_formed(busy, keys)
    embed_pending(at_once, whole, busy, keys)

    contents = whole.noted(at_once)
    assert sliced.noted(worker.recall_index) == contents > EMBED_BATCH
    most_in_one_turn = max(b - a for a, b in pairwise([0, *noted_at_each_turn]))
    assert most_in_one_turn < contents / 4  # the log was read in several steps
    assert sliced.batches == whole.batches  # the same texts, in the same batches
    assert worker.recall_index.pending("default", "busy", limit=1) == []
    found = found_by_meaning(at_once, busy)
    assert found_by_meaning(worker.recall_index, busy) == found and any(found)


class Recovering(Worker):
    """A worker whose partition of world "busy" is being recovered, until `recovered`."""

    recovered = False

    async def read_transaction(self, world_id: str) -> StateTransaction:
        if not self.recovered:
            raise HTTPProblem(503, f"world {world_id!r} is on partition 0, being recovered")
        return await super().read_transaction(world_id)


def test_a_world_being_recovered_is_left_for_its_next_event_quietly(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Its partition recovering after a rebalance, the read refused: an ERROR with a traceback
    (`embedding the memories ... failed`), for a world whose next event notes it again."""
    worker, counting = Recovering(), CountingEmbedder(8)
    embedding = MemoryEmbedding(worker, lambda: counting)
    with caplog.at_level(logging.INFO, logger="rumourmill.embedding"):
        embedded_after(embedding, [ack("busy")])
    assert counting.embedded == 0 and not embedding.worlds
    assert [(record.levelname, record.exc_info) for record in caplog.records] == [("INFO", None)]
    worker.recovered = True
    embedded_after(embedding, [ack("busy")])  # its next event
    assert counting.embedded > 0


def searched(embedding: MemoryEmbedding, world: str) -> None:
    """What a recall or decision of the world does, then a round of the agent."""

    async def search() -> None:
        await embedding.load()
        embedding.note_searched("default", world)
        await embedding.embed_noted()

    asyncio.run(search())


def test_a_world_searched_is_noted_once_and_again_when_it_could_not_be_read() -> None:
    """A recall or decision notes its world for vectors (after a start, a world no event names
    had none), the first time only: every search costs the agent a step (reviewer: 500 reads,
    500 steps); but one its partition's recovery refused is noted again at its next search."""
    worker, counting = Recovering(), CountingEmbedder(8)
    embedding = MemoryEmbedding(worker, lambda: counting)
    searched(embedding, "busy")  # recovering: left for now
    assert counting.embedded == 0
    worker.recovered = True
    searched(embedding, "busy")
    first = counting.embedded
    assert first > 0 and has_vectors(worker.recall_index, "busy")
    embedding.note_searched("default", "busy")
    assert not embedding.worlds  # noted once: its events note it from now on
    embedding.keep(lambda world: True)  # a rebalance: it may have grown elsewhere meanwhile
    embedding.note_searched("default", "busy")
    assert embedding.worlds == {("default", "busy")}


class Failing(Worker):
    """A worker whose state read fails once with an error of no HTTP kind (a disk's)."""

    failed = False

    async def read_transaction(self, world_id: str) -> StateTransaction:
        if not self.failed:
            self.failed = True
            raise OSError("disk I/O error")
        return await super().read_transaction(world_id)


def test_a_world_searched_whose_embedding_failed_is_noted_again_by_its_next_search() -> None:
    """A reviewer's find: a step failing otherwise than by a refused read left the world among
    those searched, and no later search noted it: no vectors until its next event."""
    worker, counting = Failing(), CountingEmbedder(8)
    embedding = MemoryEmbedding(worker, lambda: counting)
    searched(embedding, "busy")  # fails, logged
    assert counting.embedded == 0
    searched(embedding, "busy")
    assert counting.embedded > 0 and has_vectors(worker.recall_index, "busy")


def test_a_deleted_world_is_forgotten_searched_or_noted() -> None:
    """Found in review: a world searched, then deleted, stayed among those searched (and any
    noted, embedded after its deletion) for the worker's life."""
    embedding = MemoryEmbedding(Worker(), lambda: CountingEmbedder(8))
    embedding.note_searched("default", "save-1")
    embedding.note([ack("save-2")])
    for world in ("save-1", "save-2"):
        embedding.forget("default", world)
    assert not embedding.searched and not embedding.worlds


def test_only_acks_of_worlds_living_on_the_partition_taken_from_are_noted() -> None:
    """A tenant's deletion is taken from every partition and its ack names the world `*`: a
    worker not holding the partition of `*` logged, at every deletion of a tenant, that it did
    not serve world `*` and should be given its own `RUMOURMILL_WEB_URL`."""
    partitions = 12
    home = partition_of(b"save-1", partitions)
    elsewhere = next(p for p in range(partitions) if p != partition_of(b"*", partitions))
    projector, state = Projector(), MemoryState()
    tavern = deletion_story("save-1", "acme")
    for offset, line in enumerate([*tavern, deletion("tenant.deleted", "*", "acme")]):
        at, key = (home, b"save-1") if offset < len(tavern) else (elsewhere, b"*")
        intake = projector.receive(state, SourceMessage("events", at, offset, key, line))
        noted = [(ack.tenant_id, ack.world_instance_id) for ack in intake.acks]
        kept = [(a.tenant_id, a.world_instance_id) for a in at_home(intake.acks, at, partitions)]
        if offset < len(tavern):
            assert kept == noted == [("acme", "save-1")]
        else:  # keyed as `rumourmill tenant delete` sends it: the tenant's worlds go
            assert (intake.acks[0].reason or "").startswith("deleted ")
            assert (noted, kept) == ([("acme", "*")], [])
