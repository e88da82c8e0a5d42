"""One contract, two state stores: the in-memory `MemoryState` and RocksDB (`RocksTransaction`).

The projector runs on both (replays and tests on the first, the worker on the second) and the
digest proves them equal, so every get, put, delete and scan must answer alike on both. Each
test runs once per store; the RocksDB one is opened the way the worker opens a state partition.
"""

from __future__ import annotations

import asyncio
import re
import tracemalloc
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from contextlib import contextmanager
from pathlib import Path
from typing import cast

import faust
import orjson
import pytest
from faust.exceptions import ImproperlyConfigured
from faust.stores.rocksdb import RocksDBOptions
from faust.stores.rocksdb import Store as RocksDBStore
from rocksdict import Rdict

import streams.state
from benchmarks.story import encoded, tavern_story
from projections.digest import world_digest
from projections.intake import SourceMessage
from projections.key_prefixes import RELATION_HEADS
from projections.keys import pack
from projections.projector import Projector
from projections.runtime_read import runtime_read
from projections.state import MemoryState, StateTransaction
from streams.app import StateTable, partition_db
from streams.changelog import PartitionWrites
from streams.state import (
    LATELY,
    LEVEL0_FILES_TO_COMPACT,
    BatchTransaction,
    HotValues,
    RocksTransaction,
    ScannedSpaces,
    SnapshotTransaction,
    StateOptions,
    recording_transaction,
    state_options,
    without_write_ahead_log,
)
from tests.reads import answer

README = Path(__file__).resolve().parents[2] / "README.md"


def rocks_db(path: Path) -> Rdict:
    """A RocksDB state partition opened with the worker's options."""
    options = StateOptions(**state_options(block_cache_mb=1), use_rocksdict=True)
    return without_write_ahead_log(options.open(path))


def rocks_state(path: Path, hot: HotValues | None = None) -> Iterator[RocksTransaction]:
    """A RocksDB state partition written through like the worker (reading through `hot`
    values, as the worker's transactions of one batch do, when given)."""
    db = rocks_db(path)
    try:
        yield recording_transaction(db, lambda key, value: None, hot)
    finally:
        db.close()


def batch_state(path: Path, scanned: ScannedSpaces) -> Iterator[BatchTransaction]:
    """A RocksDB state partition written like the ingest agent's batches: most writes held
    for the batch's end, the spaces `scanned` lately written through."""
    db = rocks_db(path)
    try:
        yield BatchTransaction(db, PartitionWrites(), HotValues(), scanned)
    finally:
        db.close()


@pytest.fixture(
    params=[
        "memory",
        "rocksdb",
        "rocksdb, reading through known values",
        "rocksdb, writes held for the batch's end",
    ]
)
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[StateTransaction]:
    if request.param == "memory":
        yield MemoryState()
    elif request.param.endswith("batch's end"):
        yield from batch_state(tmp_path / "partition-0", ScannedSpaces())
    else:
        hot = HotValues() if request.param.endswith("known values") else None
        yield from rocks_state(tmp_path / "partition-0", hot)


def filled(store: StateTransaction, keys: list[bytes]) -> StateTransaction:
    """`store` with each key set to a value naming it, written in a scrambled order."""
    for key in sorted(keys, key=lambda key: key[::-1]):
        store.put(key, b"value of " + key)
    return store


def keys(entries: Callable[[], Iterator[tuple[bytes, bytes]]]) -> list[bytes]:
    """The keys a scan yields, each checked against the value stored under it."""
    found = []
    for key, value in entries():
        assert value == b"value of " + key
        found.append(key)
    return found


SCOPE = [b"a", b"b", b"b\x00", b"b\x01", b"b\x01\x00", b"b\x01\x01", b"b\x02", b"b\xfe", b"c"]
"""A scope `b` between neighbours, whose keys are prefixes of one another."""


class TestStateStore:
    """The `StateTransaction` contract (projections/state.py), on each store."""

    def test_a_key_never_written_reads_none(self, store: StateTransaction) -> None:
        assert store.get(b"missing") is None

    def test_put_then_get_returns_the_value_byte_for_byte(self, store: StateTransaction) -> None:
        value = bytes(range(256))
        store.put(b"k\x00\xff", value)
        store.put(b"empty", b"")
        assert store.get(b"k\x00\xff") == value
        assert store.get(b"empty") == b""
        assert store.get(b"k\x00") is None

    def test_a_value_that_is_not_bytes_is_refused_and_nothing_is_written(
        self, store: StateTransaction
    ) -> None:
        with pytest.raises(TypeError, match="bytes"):
            store.put(b"k", "text")  # type: ignore[arg-type]
        assert store.get(b"k") is None
        assert list(store.scan(b"k")) == []

    def test_a_second_put_replaces_the_first(self, store: StateTransaction) -> None:
        store.put(b"k", b"one")
        store.put(b"k", b"two")
        assert store.get(b"k") == b"two"
        assert list(store.scan(b"k")) == [(b"k", b"two")]

    def test_delete_removes_the_key_from_gets_and_scans(self, store: StateTransaction) -> None:
        filled(store, [b"p1", b"p2", b"p3"])
        store.delete(b"p2")
        assert store.get(b"p2") is None
        assert keys(lambda: store.scan(b"p")) == [b"p1", b"p3"]
        assert keys(lambda: store.scan(b"p", reverse=True)) == [b"p3", b"p1"]

    def test_deleting_a_key_never_written_changes_nothing(self, store: StateTransaction) -> None:
        filled(store, [b"p1"])
        store.delete(b"p0")
        assert keys(lambda: store.scan(b"p")) == [b"p1"]

    def test_a_scan_yields_its_prefix_only_in_key_order(self, store: StateTransaction) -> None:
        filled(store, SCOPE)
        inside = [key for key in sorted(SCOPE) if key.startswith(b"b")]
        assert keys(lambda: store.scan(b"b")) == inside
        assert keys(lambda: store.scan(b"b", reverse=True)) == inside[::-1]

    def test_the_prefix_itself_is_a_key_of_its_scan(self, store: StateTransaction) -> None:
        filled(store, SCOPE)
        assert keys(lambda: store.scan(b"b\x01")) == [b"b\x01", b"b\x01\x00", b"b\x01\x01"]
        assert keys(lambda: store.scan(b"b\x01", reverse=True)) == [
            b"b\x01\x01",
            b"b\x01\x00",
            b"b\x01",
        ]

    def test_an_empty_scope_scans_to_nothing(self, store: StateTransaction) -> None:
        filled(store, SCOPE)
        for prefix in (b"a\x00", b"b\x03", b"bb", b"d", b"\x00"):
            assert list(store.scan(prefix)) == []
            assert list(store.scan(prefix, reverse=True)) == []
            assert list(store.scan(prefix, start=prefix + b"\x01")) == []
            assert list(store.scan(prefix, reverse=True, start=prefix + b"\x01")) == []

    def test_an_empty_prefix_scans_everything(self, store: StateTransaction) -> None:
        filled(store, SCOPE)
        assert keys(lambda: store.scan(b"")) == sorted(SCOPE)

    def test_start_is_an_inclusive_bound_going_forward(self, store: StateTransaction) -> None:
        filled(store, SCOPE)
        assert keys(lambda: store.scan(b"b", start=b"b\x01")) == [
            b"b\x01",
            b"b\x01\x00",
            b"b\x01\x01",
            b"b\x02",
            b"b\xfe",
        ]
        # a start between two keys begins at the next one
        assert keys(lambda: store.scan(b"b", start=b"b\x01\x00\x00")) == [
            b"b\x01\x01",
            b"b\x02",
            b"b\xfe",
        ]

    def test_start_is_an_inclusive_bound_in_reverse(self, store: StateTransaction) -> None:
        filled(store, SCOPE)
        assert keys(lambda: store.scan(b"b", reverse=True, start=b"b\x01")) == [
            b"b\x01",
            b"b\x00",
            b"b",
        ]
        # a start between two keys begins at the one before it; longer keys sort after it
        assert keys(lambda: store.scan(b"b", reverse=True, start=b"b\x01\x00\x00")) == [
            b"b\x01\x00",
            b"b\x01",
            b"b\x00",
            b"b",
        ]

    def test_a_start_at_the_prefix_itself_takes_the_whole_scope_forward(
        self, store: StateTransaction
    ) -> None:
        filled(store, SCOPE)
        assert keys(lambda: store.scan(b"b", start=b"b")) == keys(lambda: store.scan(b"b"))
        assert keys(lambda: store.scan(b"b", reverse=True, start=b"b")) == [b"b"]

    def test_a_start_past_the_scope_in_its_direction_finds_nothing(
        self, store: StateTransaction
    ) -> None:
        filled(store, SCOPE)
        assert list(store.scan(b"b", start=b"c")) == []
        assert list(store.scan(b"b", start=b"b\xff")) == []
        assert list(store.scan(b"b", reverse=True, start=b"a")) == []
        assert list(store.scan(b"b", reverse=True, start=b"a\xff")) == []

    def test_a_start_beyond_the_scope_behind_the_scan_takes_the_whole_scope(
        self, store: StateTransaction
    ) -> None:
        """The bound only cuts: from before the scope going forward (or after it in reverse)
        every key of the scope is still yielded, whatever lies between start and scope."""
        filled(store, SCOPE)
        inside = [key for key in sorted(SCOPE) if key.startswith(b"b")]
        assert keys(lambda: store.scan(b"b", start=b"a")) == inside
        assert keys(lambda: store.scan(b"b", reverse=True, start=b"c")) == inside[::-1]

    def test_keys_with_xff_bytes_inside_the_scope(self, store: StateTransaction) -> None:
        inside = [b"p\x00\xff", b"p\xfe", b"p\xfe\xff", b"p\xfe\xff\xff"]
        filled(store, [b"o\xff", *inside, b"q", b"q\x00"])
        assert keys(lambda: store.scan(b"p")) == inside
        assert keys(lambda: store.scan(b"p", reverse=True)) == inside[::-1]
        assert keys(lambda: store.scan(b"p", start=b"p\xfe\xff")) == inside[2:]
        assert keys(lambda: store.scan(b"p", reverse=True, start=b"p\xfe\xff")) == [
            b"p\xfe\xff",
            b"p\xfe",
            b"p\x00\xff",
        ]
        assert keys(lambda: store.scan(b"o")) == []  # o ff ends the scope of o

    def test_a_stored_value_takes_memory_of_its_own_length(self, store: StateTransaction) -> None:
        """orjson (3.12 on) returns each document in a buffer of 4 KB or more: a store that
        held those would grow a worker by kilobytes per small value it keeps."""
        values = 2_000
        tracemalloc.start()
        try:
            before = tracemalloc.get_traced_memory()[0]
            for number in range(values):
                store.put(b"relation\x00%d" % number, orjson.dumps([number, 1, 0.5]))
            held = tracemalloc.get_traced_memory()[0] - before
        finally:
            tracemalloc.stop()
        assert held / values < 400
        assert store.get(b"relation\x001999") == b"[1999,1,0.5]"


def test_keys_that_go_on_from_the_prefix_with_xff_lie_outside_its_scope_in_both_stores(
    tmp_path: Path,
) -> None:
    """The scope of a prefix ends before prefix + ff (no packed part starts with ff)."""
    scope = [b"o", b"p", b"p\xfe", b"p\xff", b"p\xff\x00", b"p\xff\xff", b"q"]
    memory = filled(MemoryState(), scope)
    assert keys(lambda: memory.scan(b"p")) == [b"p", b"p\xfe"]
    for rocks in rocks_state(tmp_path / "partition-0"):
        filled(rocks, scope)
        assert list(rocks.scan(b"p", reverse=True)) == list(memory.scan(b"p", reverse=True))
        assert list(rocks.scan(b"p")) == list(memory.scan(b"p"))


def test_a_snapshot_reads_the_partition_as_it_stood_when_taken_and_never_writes(
    tmp_path: Path,
) -> None:
    """A read made off the event loop (`SnapshotReads`, a digest) reads what a read on the
    loop would have when it was asked: neither a key written nor one deleted since (a scan of
    a rocksdict snapshot saw both)."""
    db = rocks_db(tmp_path / "partition-0")
    try:
        live = filled(recording_transaction(db, lambda key, value: None), SCOPE)
        snapshot = SnapshotTransaction(db)
        live.put(b"b\x03", b"value of b\x03")
        live.delete(b"b\x01")
        as_asked = filled(MemoryState(), SCOPE)
        assert snapshot.get(b"b\x01") == b"value of b\x01"
        assert snapshot.get(b"b\x03") is None
        assert snapshot.get(b"b\x00\x00") is None
        for reverse in (False, True):
            for start in (None, b"b\x01\x00"):
                scanned = snapshot.scan(b"b", reverse=reverse, start=start)
                assert list(scanned) == list(as_asked.scan(b"b", reverse=reverse, start=start))
        with pytest.raises(PermissionError, match="never write"):
            snapshot.put(b"b\x04", b"value")
        with pytest.raises(PermissionError, match="never write"):
            snapshot.delete(b"b")
        assert snapshot.get(b"b") == b"value of b"
        outer = snapshot.scan(b"b")
        next(outer)
        with pytest.raises(RuntimeError, match="one get or scan at a time"):
            snapshot.get(b"a")
        outer.close()
        assert snapshot.get(b"a") == b"value of a"
    finally:
        db.close()


def test_an_id_that_extends_another_by_a_nul_stays_apart_in_both_stores(
    store: StateTransaction,
) -> None:
    """Ids may hold any character. Packed, `npc-a` is a byte prefix of `npc-a\\x00b` (a NUL is
    escaped as 00 ff), so a prefix scan of one also meets the other's keys, unless the store
    stops before prefix + ff: otherwise Mara's read fails and the world's digest
    takes in another world."""

    def send(offset: int, world: str, seq: int, actor: str) -> None:
        raw = orjson.dumps(
            {
                "world_instance_id": world,
                "timeline_id": "main",
                "seq": seq,
                "key": "story.happened",
                "actor": actor,
                "target": "npc-x",
            }
        )
        Projector().receive(store, SourceMessage("events", 0, offset, world.encode(), raw))

    send(0, "w", 1, "npc-a")
    send(1, "w", 2, "npc-a\x00b")
    digest = world_digest(store, "default", "w")
    send(2, "w\x00v", 1, "npc-a")
    assert world_digest(store, "default", "w") == digest
    read = answer(runtime_read(store, "default", "w", "main", "npc-a"))
    assert read["relations"] == [
        {"entity_id": "npc-x", "feeling": 0.0, "memories": 1, "last_seq": 1}
    ]


def test_a_story_folded_in_batches_as_the_ingest_agent_writes_them_ends_as_memory_does(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The worker takes a batch's events in one transaction, reading through the values
    earlier batches read or wrote (in generations, here a new one every batch or two) and
    laying its held writes in at the batch's end, with the key spaces earlier batches scanned
    written through; the state ends as the in-memory fold's."""
    monkeypatch.setattr(streams.state, "HOT_KEYS", 500)
    story = encoded(tavern_story(300, seed=4, worlds=("w",), characters=8, places=3))
    projector = Projector(changes=True)
    memory = MemoryState()
    db = rocks_db(tmp_path / "partition-0")
    scanned = ScannedSpaces()
    hot = HotValues()
    tx = BatchTransaction(db, PartitionWrites(), hot, scanned)
    try:
        for offset, raw in enumerate(story):
            if offset % 50 == 0:  # a new batch
                tx.lay_in()
                tx = BatchTransaction(db, PartitionWrites(), hot.next_batch(), scanned)
            message = SourceMessage("events", 0, offset, b"w", raw)
            expected = projector.receive(memory, message)
            assert projector.receive(tx, message) == expected
        assert scanned.lately(), "the fold scans some key spaces, which later batches write through"
        tx.lay_in()
        stored = RocksTransaction(db, lambda key, value: None)
        assert world_digest(stored, "default", "w") == world_digest(memory, "default", "w")
    finally:
        db.close()


class _CountedReads:
    """A partition's database, fed batch after batch as the ingest agent feeds it (through its
    kept values, the spaces scanned lately written through), that lists the keys read from it;
    the rest passes straight on."""

    def __init__(self, db: Rdict) -> None:
        self.db = db
        self.read: list[bytes] = []
        self.hot = HotValues()
        self.scanned = ScannedSpaces()

    def get(self, key: bytes) -> bytes | None:
        self.read.append(key)
        value: bytes | None = self.db.get(key)
        return value

    def __getattr__(self, name: str) -> object:
        return getattr(self.db, name)

    def batch(self) -> BatchTransaction:
        """The next batch's transaction."""
        return BatchTransaction(
            cast(Rdict, self), PartitionWrites(), self.hot.next_batch(), self.scanned
        )


@contextmanager
def counted_reads(path: Path) -> Iterator[_CountedReads]:
    """A partition at `path` that lists its reads (`_CountedReads`), closed at the end."""
    db = _CountedReads(rocks_db(path))
    try:
        yield db
    finally:
        db.db.close()


def test_batches_keep_heads_and_the_values_they_read_and_let_go_of_those_only_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A head, and a key each generation reads, are never read from the database again; one
    written and not read since is let go with the generation before last, and is read from the
    database."""
    monkeypatch.setattr(streams.state, "HOT_KEYS", 2)
    head = pack(RELATION_HEADS, "default", "w", "main", "npc-a") + pack("npc-b")

    with counted_reads(tmp_path / "partition-0") as db:
        batch, hot = db.batch, db.hot
        first = batch()
        first.put(head, b"[0.5,1,1]")
        first.put(b"read\x00a", b"1")
        for n in (1, 2, 3):
            first.put(b"log\x00%d" % n, b"%d" % n)
        first.lay_in()
        second = batch()  # the first batch's values are now the generation before
        assert second.get(b"read\x00a") == b"1"
        second.put(b"log\x004", b"4")
        second.put(b"log\x005", b"5")
        second.lay_in()
        third = batch()  # the first batch's generation is let go
        assert third.get(b"read\x00a") == b"1"
        assert db.read == []
        assert third.get(b"log\x004") == b"4"
        assert third.get(b"log\x001") == b"1"
        assert db.read == [b"log\x001"]
        third.delete(b"log\x004")
        assert third.get(b"log\x004") is None
        for n in range(6, 12):
            third.put(b"log\x00%d" % n, b"%d" % n)
        third.lay_in()
        for _ in range(3):
            batch().lay_in()
        assert batch().get(head) == b"[0.5,1,1]"
        assert db.read == [b"log\x001"], "the head was kept through every generation"
        hot.forget()
        assert batch().get(head) == b"[0.5,1,1]"
        assert db.read == [b"log\x001", head]


def test_kept_values_follow_deletes_and_are_let_go_past_their_bounds_or_when_forgotten(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A head deleted (as a world's deletion does) reads as absent however many generations
    pass; heads have generations of their own, which let go of heads not read for two; a
    generation a batch filled past `KEPT_GENERATION` times its size is let go at once; `forget`
    drops every value under a transaction still open, which then reads what the database
    holds."""
    monkeypatch.setattr(streams.state, "HOT_KEYS", 2)
    monkeypatch.setattr(streams.state, "HEAD_KEYS", 1)
    heads = [
        pack(RELATION_HEADS, "default", "w", "main", "npc-a") + pack(f"npc-{n}") for n in "bcde"
    ]

    with counted_reads(tmp_path / "partition-0") as db:
        batch, hot = db.batch, db.hot
        first = batch()
        for head in heads[:2]:
            first.put(head, b"[0.5,1,1]")
        first.lay_in()
        second = batch()  # the first batch's heads are now the generation before
        second.delete(heads[0])
        for n in range(20):  # past KEPT_GENERATION x HOT_KEYS: let go, not kept
            second.put(b"log\x00%d" % n, b"%d" % n)
        second.lay_in()
        third = batch()
        assert third.get(heads[0]) is None
        assert third.get(heads[1]) == b"[0.5,1,1]"
        assert third.get(b"log\x000") == b"0"
        assert db.read == [b"log\x000"], "heads kept; the overfull generation let go"
        third.lay_in()
        fourth = batch()  # the heads the third batch read are the generation before
        for head in heads[2:]:
            fourth.put(head, b"[0.1,1,9]")
        fourth.lay_in()
        fifth = batch()  # the third batch's heads, not read since, are let go
        assert fifth.get(heads[1]) == b"[0.5,1,1]"
        assert fifth.get(heads[2]) == b"[0.1,1,9]"
        assert db.read == [b"log\x000", heads[1]]
        db.db.put(heads[2], b"[1.0,2,7]")  # written by something other than the agent
        hot.forget()
        assert fifth.get(heads[2]) == b"[1.0,2,7]"


def test_held_writes_wait_for_the_batch_end_and_scanned_spaces_are_written_through(
    tmp_path: Path,
) -> None:
    """Writes wait in the batch (the database has none until they are laid in) unless their key
    space is one ingest scans; a scan of a space learns it, laying in what was held first."""
    scanned = ScannedSpaces()
    db = rocks_db(tmp_path / "partition-0")
    try:
        tx = BatchTransaction(db, PartitionWrites(), HotValues(), scanned)
        tx.put(b"held\x00one", b"1")
        tx.put(b"seen\x00one", b"1")
        assert tx.get(b"held\x00one") == b"1"
        assert db.get(b"held\x00one") is None
        assert list(tx.scan(b"seen\x00")) == [(b"seen\x00one", b"1")]
        assert db.get(b"held\x00one") == b"1", "laid in before the scan"
        tx.put(b"seen\x00two", b"2")
        tx.delete(b"seen\x00one")
        tx.put(b"held\x00two", b"2")
        assert db.get(b"seen\x00two") == b"2", "a scanned space is written through"
        assert db.get(b"seen\x00one") is None
        assert db.get(b"held\x00two") is None
        assert tx.holding
        tx.lay_in()
        assert not tx.holding
        assert db.get(b"held\x00two") == b"2"
        assert scanned.lately() == {b"seen\x00"}, "the next transaction writes it through"
    finally:
        db.close()


def test_a_batchs_event_writes_keep_each_key_once_in_the_order_of_its_last_write(
    tmp_path: Path,
) -> None:
    """The changelog sends an event's writes in the order of their last write (a split event's
    parts each leave a state its redelivery completes); a value that is not bytes is refused
    before anything is written."""
    db = rocks_db(tmp_path / "partition-0")
    try:
        writes = PartitionWrites()
        tx = BatchTransaction(db, writes, HotValues(), ScannedSpaces())
        tx.put(b"a\x00one", b"1")
        tx.put(b"b\x00two", b"2")
        tx.put(b"a\x00one", b"3")
        assert list(writes.event.items()) == [(b"b\x00two", b"2"), (b"a\x00one", b"3")]
        with pytest.raises(TypeError, match="a state value is bytes, not str"):
            tx.put(b"c\x00three", "4")  # type: ignore[arg-type]
        assert tx.get(b"c\x00three") is None
        assert list(writes.event) == [b"b\x00two", b"a\x00one"]
    finally:
        db.close()


def test_a_space_another_batch_learned_meanwhile_is_laid_in_before_this_one_scans_it(
    tmp_path: Path,
) -> None:
    """Two partitions' transactions share what ingest scans: one that held writes of a space
    before the other learned it still lays them in before it scans that space itself."""
    scanned = ScannedSpaces()
    dbs = [rocks_db(tmp_path / f"partition-{n}") for n in range(2)]
    try:
        first, second = (
            BatchTransaction(db, PartitionWrites(), HotValues(), scanned) for db in dbs
        )
        first.put(b"space\x00a", b"held by the first")
        assert list(second.scan(b"space\x00")) == []
        assert list(first.scan(b"space\x00")) == [(b"space\x00a", b"held by the first")]
    finally:
        for db in dbs:
            db.close()


def test_a_space_scanned_once_is_held_again_once_it_is_no_longer_scanned() -> None:
    """A world's deletion scans every space once: those are written through for a while, then
    held again, while a space scanned by every batch stays written through."""
    scanned = ScannedSpaces()
    scanned.lately()
    scanned.scanned(b"swept\x00")
    for _ in range(LATELY - 1):
        scanned.lately()
        scanned.scanned(b"every batch\x00")
    assert scanned.lately() == {b"swept\x00", b"every batch\x00"}
    scanned.scanned(b"every batch\x00")
    assert scanned.lately() == {b"every batch\x00"}


def test_a_partition_created_with_other_options_reopens_with_the_workers(tmp_path: Path) -> None:
    """A restart that keeps the local state runs on the options asked for now (block cache,
    memtable filter, level-0 compaction), not those the directory was created with (Faust's
    defaults here)."""
    path = tmp_path / "partition-0"
    created = RocksDBOptions(**state_options(block_cache_mb=1), use_rocksdict=True).open(path)
    created[b"kept"] = b"across the restart"
    created.close()

    reopened = StateOptions(**state_options(block_cache_mb=4), use_rocksdict=True).open(path)
    assert reopened[b"kept"] == b"across the restart"
    reopened.close()
    opened_with = (path / "LOG").read_text()  # each open starts the log anew
    assert f"capacity : {4 * 1024 * 1024}" in opened_with
    assert "Options.memtable_whole_key_filtering: 1" in opened_with
    assert f"Options.level0_file_num_compaction_trigger: {LEVEL0_FILES_TO_COMPACT}" in opened_with


def test_the_readme_says_how_much_memory_a_partitions_rocksdb_may_hold(tmp_path: Path) -> None:
    """Besides the block cache, RocksDB writes into write buffers of the same size, and keeps
    up to `max_write_buffer_number` of them while the full ones are flushed (Faust's 3): the
    README's "block cache (and write buffer)" told a quarter of it."""
    path = tmp_path / "partition-0"
    StateOptions(**state_options(block_cache_mb=1), use_rocksdict=True).open(path).close()
    opened_with = (path / "LOG").read_text()
    assert f"Options.write_buffer_size: {1024 * 1024}" in opened_with
    buffers = re.search(r"Options\.max_write_buffer_number: (\d+)", opened_with)
    assert buffers is not None
    [row] = [
        line for line in README.read_text().splitlines() if "`RUMOURMILL_BLOCK_CACHE_MB`" in line
    ]
    assert f"up to {1 + int(buffers[1])} times this per partition" in row


def test_a_partition_opened_read_only_reads_and_refuses_writes(tmp_path: Path) -> None:
    path = tmp_path / "partition-0"
    options = StateOptions(**state_options(block_cache_mb=1), use_rocksdict=True)
    written = options.open(path)
    written[b"kept"] = b"for the reader"
    written.close()
    reader = options.open(path, read_only=True)
    try:
        assert reader[b"kept"] == b"for the reader"
        with pytest.raises(Exception, match="read only"):
            reader[b"other"] = b"refused"
    finally:
        reader.close()


def test_a_state_table_asking_for_python_rocksdb_is_refused_naming_the_driver(
    tmp_path: Path,
) -> None:
    """The worker writes, checkpoints and reopens its partitions through rocksdict: a table
    asking for Faust's other driver fails where it is made, saying which setting is wrong."""
    app = faust.App("refusal", store="rocksdb://", datadir=str(tmp_path), autodiscover=False)
    table = StateTable(app, name="state", options={"driver": "python-rocksdb"})
    with pytest.raises(ImproperlyConfigured, match=r"driver 'python-rocksdb'.*needs rocksdict"):
        table.data  # noqa: B018  # Faust makes the store when the table's data is first asked for
    default = StateTable(app, name="state", options=state_options(block_cache_mb=1))
    assert isinstance(cast(RocksDBStore, default.data).rocksdb_options, StateOptions)


def test_a_batchs_held_writes_are_in_once_laid_and_readers_wait_while_they_are_laid(
    tmp_path: Path,
) -> None:
    """The ingest agent hands a batch's held writes to the state writes' thread and waits for
    them before the batch ends, told how long laying them took; a reader waits while they are
    being laid (never seeing them half in), and the batch's own wait raises what laying them
    raised."""
    app = faust.App("laying", store="rocksdb://", datadir=str(tmp_path), autodiscover=False)
    table = StateTable(app, name="state", options=state_options(block_cache_mb=1))
    db = partition_db(table, 0)

    async def scenario() -> None:
        tx = BatchTransaction(db, PartitionWrites(), HotValues(), ScannedSpaces())
        tx.put(b"space\x00key", b"value")
        took: list[float] = []
        table.lay_in(0, tx, took.append)
        await table.laid(0)
        assert db.get(b"space\x00key") == b"value"
        assert table.laying == {}
        assert len(took) == 1 and took[0] > 0, "the time it took is told (for /metrics)"
        table.lay_in(0, tx, took.append)  # nothing held now
        assert table.laying == {}
        assert len(took) == 1

        being_laid: Future[None] = Future()
        table.laying[0] = being_laid
        reader = asyncio.ensure_future(table.settled(0))
        await asyncio.sleep(0.05)
        assert not reader.done(), "a reader waits while a batch is being laid in"
        being_laid.set_result(None)
        await asyncio.wait_for(reader, 1)

        failed: Future[None] = Future()
        failed.set_exception(OSError("no space left on device"))
        table.laying[0] = failed
        await asyncio.wait_for(table.settled(0), 1)  # a reader is not the one to fail
        with pytest.raises(OSError, match="no space left"):
            await table.laid(0)
        assert table.laying == {}

    try:
        asyncio.run(scenario())
    finally:
        db.close()


def test_kept_values_are_bounded_by_their_bytes_as_well_as_by_how_many(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A memory copies its event's facts: kept by count alone, a partition of events of 16 KB
    kept 114 MB of values beside RocksDB, and events of 256 KB (the default bound) far more. A
    generation over its bytes is let go before the next batch, however few values it holds;
    one under them is kept as the one before."""
    monkeypatch.setattr(streams.state, "HOT_BYTES", 10_000)
    with counted_reads(tmp_path / "partition-0") as db:
        batch = db.batch
        first = batch()
        for n in range(3):  # 9,000 bytes: kept
            first.put(b"memory\x00%d" % n, b"m" * 3_000)
        first.lay_in()
        second = batch()
        assert second.get(b"memory\x000") == b"m" * 3_000
        for n in range(3, 6):  # 18,000 bytes now: let go
            second.put(b"memory\x00%d" % n, b"m" * 3_000)
        second.lay_in()
        third = batch()
        assert third.get(b"memory\x005") == b"m" * 3_000
        assert db.read == [b"memory\x005"], "the first batch's values kept, the second's let go"
