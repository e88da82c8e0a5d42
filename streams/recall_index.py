"""The recall index: SQLite FTS5 words and entity cues, and a matrix of embedding vectors per
world, local to a worker. Each world's words are an FTS5 table of their own: bm25 weighs a word
by the world's memories alone, so a recall answers alike on whichever worker holds the world.

It is derived state: everything in it is rebuilt from the projections (the memory log says
what was formed where), so it is kept in memory and never in the changelog; a worker that takes
a world over, or starts again, catches up from position 0. Each search is cut to what one
timeline sees (`projections.recall.SearchScope`): a child never finds its parent's future,
persistent memories are found from every timeline.

Vectors are made apart from the projections (`embed_one_batch`, by the embedding agent's own
task beside ingest, `streams.embedding_agent`; `embed_pending` by a test or a benchmark), keyed
by a hash of the content within the world: a sentence many characters hold is embedded once,
and changed content needs a new vector. The embedding follows the memory log with a mark of
its own (`note_formed`), so it neither builds nor waits for the word index, which the searches
catch up themselves (`catch_up`): a worker's reads a slice at a time beforehand
(`catch_up_in_slices`), letting its event loop go on between slices, as the embedding agent
reads the memory log a slice a step (`note_formed_slice`).
A world's first vectors fix its model and dimension; later vectors of another are refused,
counted and logged, and cues and words go on finding those memories. Once refused, an embedder
is not run again for that world (it would only be refused again): `embed_one_batch` skips it.

A worker keeps only the worlds of the partitions it is assigned: `drop_world` forgets one
whose partition moved to another worker (it catches up from 0 if it ever comes back), and one
the worker deleted, as it takes the deletion in (a search of a world deleted since its last
look starts anew too, `_follow`).
"""

from __future__ import annotations

import asyncio
import hashlib
import sqlite3
from collections.abc import Awaitable, Callable, Collection, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from itertools import chain, count, islice

import numpy as np
import numpy.typing as npt

from projections import timelines
from projections.deletion import deletion_marks
from projections.memory_store import MemoryKeys, formed_between, formed_upto, memory_keys
from projections.recall import MAX_WORDS, SearchScope
from projections.recall_fusion import Search
from projections.state import StateTransaction
from schemas.memory import Memory
from schemas.records import TimelineRecord
from streams.embedding import Embedder, Vectors
from streams.logs import logger

log = logger("recall")

CATCH_UP_SLICE = 500
"""The memories a slice of a catch up takes (`SqliteRecallIndex.catch_up_slice`): 25 ms of the
worker's loop (68 ms at most) in a world of 94,000 memories in RocksDB, on 2 shared cores; a
slice of the embedding's (`note_formed_slice`), 9 ms there."""
MIN_COSINE = 0.3
"""Below this similarity a vector contributes nothing (seed 000, "Recall pipeline")."""
BLOCK_BITS = 32
"""Each character's items take their ids (their rows' in the word table) from a block of its
own, 2^32 wide: a word search asks FTS5 for the searched character's block, which it seeks to in
every word's list of rows, so it walks that character's rows and not its whole world's."""
COMMON_SHARE = 0.5
"""A word in at least this share of all rows is common: bm25 gives it no weight (its idf is
floored), and beside a rarer word of the query it finds no row by itself
(`SqliteRecallIndex.by_words`)."""
BM25_GRID = 10**9
"""Word scores are ranked in billionths (SQLite's `round(X)`, half away from zero, exact where
its `round(X, 9)` goes through decimal text and is not): two rows whose words weigh alike score
alike but for the order FTS5 adds the words in (a last-digit difference), and rank as a tie,
by belief id."""

_TOKENIZE = "unicode61 remove_diacritics 2"
"""How the word tables split and fold text into terms, and a query with them (`temp.asked`, a
scratch table: `SqliteRecallIndex._terms`)."""
_SCHEMA = f"""
CREATE TABLE items(
    id INTEGER PRIMARY KEY,
    tenant TEXT, world TEXT, character TEXT, belief_id TEXT,
    timeline_id TEXT, seq INTEGER, persistent INTEGER, content TEXT, content_hash TEXT,
    importance REAL, UNIQUE(tenant, world, character, belief_id));
CREATE TABLE abouts(item INTEGER, entity TEXT);
CREATE TABLE characters(number INTEGER PRIMARY KEY, tenant TEXT, world TEXT, character TEXT,
    UNIQUE(tenant, world, character));
CREATE INDEX abouts_by_entity ON abouts(entity, item);
CREATE INDEX abouts_by_item ON abouts(item);
CREATE TABLE synced(tenant TEXT, world TEXT, timeline_id TEXT, upto_seq INTEGER,
    PRIMARY KEY(tenant, world, timeline_id));
CREATE TABLE noted(tenant TEXT, world TEXT, timeline_id TEXT, upto_seq INTEGER,
    PRIMARY KEY(tenant, world, timeline_id));
CREATE TABLE world_models(tenant TEXT, world TEXT, model TEXT, dimension INTEGER,
    PRIMARY KEY(tenant, world));
CREATE TEMP TABLE incoming(character TEXT, belief_id TEXT);
CREATE VIRTUAL TABLE temp.asked USING fts5(content, tokenize='{_TOKENIZE}');
CREATE VIRTUAL TABLE temp.asked_terms USING fts5vocab(temp, asked, 'instance');
"""
_WORD_TABLES = (
    f"CREATE VIRTUAL TABLE {{words}} USING fts5(content, tokenize='{_TOKENIZE}')",
    "CREATE VIRTUAL TABLE {words}_rows USING fts5vocab({words}, 'row')",
)
"""A world's word table (FTS5 over its items' content, rowid the item's id) and its vocabulary
(how many rows say each term)."""


def content_hash(content: str) -> str:
    return hashlib.blake2b(content.encode(), digest_size=16).hexdigest()


class WorldVectors:
    """A world's vectors, a row each, found by content hash. Kept in one matrix, not in SQLite:
    writing a 1 KiB blob into a B-tree cost the embedding agent more than embedding it."""

    def __init__(self, dimension: int) -> None:
        self.rows: dict[str, int] = {}
        self.matrix: Vectors = np.zeros((64, dimension), dtype=np.float32)
        """`rows` rows in use; room for more, doubled when full."""

    def keep(self, hashes: Sequence[str], vectors: Vectors) -> None:
        """Keep each content's vector, in place of one it had."""
        rows = self.rows
        at = [rows.setdefault(digest, len(rows)) for digest in hashes]
        if len(rows) > len(self.matrix):  # zeros, not a resize's copies: pages unused stay free
            size = (max(len(rows), 2 * len(self.matrix)), self.matrix.shape[1])
            grown: Vectors = np.zeros(size, dtype=np.float32)
            grown[: len(self.matrix)] = self.matrix
            self.matrix = grown
        self.matrix[at] = vectors


GATHERED_ROWS = 4096
"""How many of a character's rows are gathered at once: a few megabytes whatever it holds."""


def held_similarity(
    kept: WorldVectors, rows: npt.NDArray[np.intp], query: npt.NDArray[np.float32]
) -> npt.NDArray[np.float32]:
    """The cosine of `query` with the vector at each of `rows` of the world's matrix (unit
    vectors). A character holding most of its world's contents (one keeper, a small town) is
    served by a product over every row in use, then its rows of that: gathering its rows first
    copied them (10,000 rows, 10 MB, 1.1 ms of a 7 ms recall); one holding a few among many
    gathers them, a product over the whole world costing more. Either way each cosine is the
    same dot product, bit for bit. einsum, not BLAS: a threaded product waits for a second core
    that a busy worker may not have, and one thread does 10,000 x 256 in a fraction of a ms."""
    in_use = len(kept.rows)
    if 2 * len(rows) >= in_use:
        every: npt.NDArray[np.float32] = np.einsum("ij,j->i", kept.matrix[:in_use], query)
        return every[rows]
    similarity = np.empty(len(rows), dtype=np.float32)
    for start in range(0, len(rows), GATHERED_ROWS):  # a slice at a time: 100,000 rows of a
        part = rows[start : start + GATHERED_ROWS]  # 384-wide model gathered took 150 MB
        similarity[start : start + len(part)] = np.einsum("ij,j->i", kept.matrix[part], query)
    return similarity


@dataclass
class _CharacterVectors:
    """Where one character's vectors are in its world's matrix, found again when the character
    takes in a memory or a vector is added. Rows, not a copy of them: a thousand characters who
    saw the same 200 events held a copy each of the same 200 vectors (195 MiB for 200 KiB)."""

    items: list[tuple[str, str, int, bool]]
    """belief id, timeline, seq, persistent: one per row, by belief id, so equal cosines rank
    by id whatever order the index took the memories in (a worker caught up at once and one
    caught up event by event answer alike)."""
    rows: npt.NDArray[np.intp]
    """The row of each item's vector in the world's matrix (`WorldVectors.matrix`)."""


@dataclass
class _WordTable:
    """A world's word table (`_WORD_TABLES`), named by a number, never by the world's id, and
    the rows it holds (FTS5's row count, which bm25 reckons with, kept here: counting them
    walks them all)."""

    name: str
    rows: int = 0


@dataclass
class SqliteRecallIndex:
    """A `projections.recall.RecallIndex` over an in-memory SQLite database."""

    embedder: Embedder | None = None
    refused_vectors: int = 0
    """Vectors refused for another model or dimension than their world's."""
    refused_models: set[tuple[str, str, str, int]] = field(default_factory=set)
    """(tenant, world, model, dimension) refused once: not embedded for again."""
    _db: sqlite3.Connection = field(init=False)
    _world_vectors: dict[tuple[str, str], WorldVectors] = field(default_factory=dict)
    _vectors: dict[tuple[str, str], dict[str, _CharacterVectors]] = field(default_factory=dict)
    """Per world, each character's matrix, built as a search needs it (`_character_vectors`):
    a world's are dropped together without a walk over every other world's."""
    _deletions: dict[tuple[str, str], bytes] = field(default_factory=dict)
    """Each world's deletion marks when last caught up: a world deleted since starts anew."""
    _followed: dict[tuple[str, str, str], dict[bytes, bytes]] = field(default_factory=dict)
    """Per watermarks table and world, each timeline record (by key) as stored when that follow
    last took all it held: one unchanged since is not decoded nor looked up again (a recall
    in a world of 5,000 saves read all 5,000, 51 ms)."""
    _queued: dict[tuple[str, str], set[str]] = field(default_factory=dict)
    """The hashes of each world's contents queued for embedding so far (embedded since, or
    waiting): one seen again is not queued again, and every vector's content was queued first.
    Hashes, not the contents: those stayed held, whole, long after their vectors were made."""
    _unembedded: dict[tuple[str, str], dict[str, str]] = field(default_factory=dict)
    """Each world's contents waiting for a vector, oldest first: content hash, content."""
    _word_tables: dict[tuple[str, str], _WordTable] = field(default_factory=dict)
    """Each world's word table (`_WORD_TABLES`)."""
    _tables_made: Iterator[int] = field(default_factory=count)

    def __post_init__(self) -> None:
        self._db = sqlite3.connect(":memory:", isolation_level=None, check_same_thread=False)
        self._db.executescript(_SCHEMA)

    # -- catching up ---------------------------------------------------------------------------

    def catch_up(self, tx: StateTransaction, keys: MemoryKeys) -> None:
        """Take the memories formed since the last search of the world into the word and cue
        searches (and the rows the vectors are found through)."""
        self._follow(tx, keys, "synced", self._take)

    def catch_up_slice(self, tx: StateTransaction, keys: MemoryKeys) -> bool:
        """Take a slice of what `catch_up` takes, about `CATCH_UP_SLICE` memories, in the order
        `catch_up` would: whether more may wait. A search after slices answers as after one
        catch up, and a world's history (seconds after a start) is taken in tens of
        milliseconds at a time (`catch_up_in_slices`)."""
        return self._follow(tx, keys, "synced", self._take, CATCH_UP_SLICE)

    def note_formed(self, tx: StateTransaction, keys: MemoryKeys) -> None:
        """Queue for embedding the contents formed since the last look that have no vector
        yet, each once: the embedding's own catch up, which reads the memory log and
        leaves the word index to the searches that need it."""
        self._follow(tx, keys, "noted", self._queue)

    def note_formed_slice(self, tx: StateTransaction, keys: MemoryKeys) -> bool:
        """Queue a slice of what `note_formed` queues, about `CATCH_UP_SLICE` memories, in the
        order it would: whether more may wait. The embedding agent reads a world's history (1.7 s
        of a world of 94,000 memories at once) a slice a step (`embed_one_batch`)."""
        return self._follow(tx, keys, "noted", self._queue, CATCH_UP_SLICE)

    def _follow(
        self,
        tx: StateTransaction,
        keys: MemoryKeys,
        watermarks: str,
        take: Callable[[MemoryKeys, Iterator[Memory]], None],
        most: int | None = None,
    ) -> bool:
        """Hand `take` what each timeline of the world formed past its mark in `watermarks`
        (a world deleted since the last look starts anew); with `most`, only about that many
        memories (`formed_upto`): whether more may wait."""
        world = (keys.tenant_id, keys.world_id)
        stored = timelines.stored_of_world(tx, keys.tenant_id, keys.world_id)
        if not stored and world not in self._deletions:
            return False  # nothing there, nor known: no mark kept (a read of any id kept one)
        marks = deletion_marks(tx, *world)
        if self._deletions.setdefault(world, marks) != marks:
            self._forget_world(*world)
            self._deletions[world] = marks
        followed = self._followed.setdefault((watermarks, *world), {})
        moved = [(key, raw) for key, raw in stored if followed.get(key) != raw]
        if not moved:
            return False
        done_upto = dict(
            self._db.execute(
                f"SELECT timeline_id, upto_seq FROM {watermarks} WHERE tenant = ? AND world = ?",
                world,
            ).fetchall()
        )
        for key, raw in moved:
            record = TimelineRecord.from_bytes(raw)
            done = int(done_upto.get(record.timeline_id, 0))
            if record.processed_seq <= done:
                followed[key] = raw
                continue
            upto = record.processed_seq
            if most is None:
                memories = formed_between(tx, keys, record.timeline_id, done, upto)
            else:
                taken, upto = formed_upto(tx, keys, record.timeline_id, done, upto, most)
                memories, most = iter(taken), most - len(taken)
            self._db.execute("BEGIN")
            take(keys, memories)
            self._db.execute(
                f"INSERT OR REPLACE INTO {watermarks} VALUES (?, ?, ?, ?)",
                (*world, record.timeline_id, upto),
            )
            self._db.execute("COMMIT")
            if upto == record.processed_seq:
                followed[key] = raw
            if most is not None and most <= 0:
                return True
        return False

    def _forget_world(self, tenant_id: str, world_id: str) -> None:
        """Drop everything of a world: deleted (`projections.deletion`), or no longer this
        worker's."""
        items = "SELECT id FROM items WHERE tenant = ? AND world = ?"
        tables = ("items", "characters", "synced", "noted", "world_models")
        self._db.execute("BEGIN")
        for statement in (
            f"DELETE FROM abouts WHERE item IN ({items})",
            *(f"DELETE FROM {table} WHERE tenant = ? AND world = ?" for table in tables),
        ):
            self._db.execute(statement, (tenant_id, world_id))
        words = self._word_tables.pop((tenant_id, world_id), None)
        if words is not None:
            self._db.execute(f"DROP TABLE {words.name}_rows")
            self._db.execute(f"DROP TABLE {words.name}")
        self._db.execute("COMMIT")
        self._drop_character_vectors(tenant_id, world_id)
        self._world_vectors.pop((tenant_id, world_id), None)
        self._queued.pop((tenant_id, world_id), None)
        self._unembedded.pop((tenant_id, world_id), None)
        self._deletions.pop((tenant_id, world_id), None)
        for watermarks in ("synced", "noted"):
            self._followed.pop((watermarks, tenant_id, world_id), None)

    def _queue(self, keys: MemoryKeys, memories: Iterator[Memory]) -> None:
        """Queue each content not queued before (most memories of an event share theirs),
        remembered by its hash: its words are kept only while it waits for its vector."""
        world = (keys.tenant_id, keys.world_id)
        queued = self._queued.setdefault(world, set())
        contents = dict.fromkeys(memory.content for memory in memories)
        hashed = {content_hash(content): content for content in contents}
        fresh = {digest: content for digest, content in hashed.items() if digest not in queued}
        self._unembedded.setdefault(world, {}).update(fresh)
        queued.update(fresh)

    def _take(self, keys: MemoryKeys, memories: Iterable[Memory]) -> None:
        """Index the memories formed since the last catch up: a new item for each memory not
        held yet or held with other content, in one statement per table (a catch up after a
        busy batch takes in thousands)."""
        world = (keys.tenant_id, keys.world_id)
        batch = {(m.character_id, m.belief_id): m for m in memories}  # the last of each
        held = self._held(world, list(batch))
        words = self._words_of(world)
        items: list[tuple[object, ...]] = []
        abouts: list[tuple[int, str]] = []
        next_items: dict[str, int] = {}
        for memory in batch.values():
            digest = content_hash(memory.content)
            known = held.get((memory.character_id, memory.belief_id))
            if known is not None:
                if known[1] == digest:
                    continue
                self._forget(known[0], words.name)
                words.rows -= 1
            next_item = next_items.get(memory.character_id)
            if next_item is None:
                next_item = self._next_in_block(world, memory.character_id)
            next_items[memory.character_id] = next_item + 1
            items.append(
                (
                    next_item,
                    *world,
                    memory.character_id,
                    memory.belief_id,
                    memory.timeline_id,
                    memory.seq,
                    int(memory.persistent),
                    memory.content,
                    digest,
                    memory.importance,
                )
            )
            abouts += [(next_item, entity) for entity in memory.about]
            # a content embedded for another memory brings no new vector to drop it otherwise
            self._vectors.get(world, {}).pop(memory.character_id, None)
        self._db.executemany("INSERT INTO items VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", items)
        self._db.executemany("INSERT INTO abouts VALUES (?, ?)", abouts)
        self._db.executemany(
            f"INSERT INTO {words.name}(rowid, content) VALUES (?, ?)",
            [(row[0], row[8]) for row in items],
        )
        words.rows += len(items)

    def _block(self, tenant_id: str, world_id: str, character: str) -> tuple[int, int] | None:
        """The first and last id of the character's block, or None before its first item."""
        row = self._db.execute(
            "SELECT number FROM characters WHERE tenant = ? AND world = ? AND character = ?",
            (tenant_id, world_id, character),
        ).fetchone()
        return None if row is None else _block_ids(int(row[0]))

    def _next_in_block(self, world: tuple[str, str], character: str) -> int:
        """The id of the character's next item: past the last in its block, given one first."""
        block = self._block(*world, character)
        if block is None:
            number = self._db.execute(
                "INSERT INTO characters(tenant, world, character) VALUES (?, ?, ?)",
                (*world, character),
            ).lastrowid
            assert number is not None  # an insert into a rowid table always has one
            return _block_ids(int(number))[0]
        last = self._db.execute("SELECT MAX(id) FROM items WHERE id BETWEEN ? AND ?", block)
        held = last.fetchone()[0]
        return block[0] if held is None else int(held) + 1

    def _words_of(self, world: tuple[str, str]) -> _WordTable:
        """The world's word table, made with its first items: bm25 weighs a word by how many of
        the world's memories say it, whatever other worlds the worker holds (a rebalance moves
        worlds between workers), and a search walks only the rows of its own world."""
        words = self._word_tables.get(world)
        if words is None:
            words = self._word_tables[world] = _WordTable(f"words_{next(self._tables_made)}")
            for statement in _WORD_TABLES:
                self._db.execute(statement.format(words=words.name))
        return words

    def _held(
        self, world: tuple[str, str], memories: Sequence[tuple[str, str]]
    ) -> dict[tuple[str, str], tuple[int, str]]:
        """Item and content hash of each (character, belief id) the index holds already: one
        join over a scratch table, not a look-up per memory (CROSS JOIN: the scratch rows
        lead, each found through the unique index of items)."""
        self._db.executemany("INSERT INTO incoming VALUES (?, ?)", memories)
        rows = self._db.execute(
            "SELECT n.character, n.belief_id, i.id, i.content_hash FROM incoming n CROSS "
            "JOIN items i ON i.tenant = ? AND i.world = ? AND i.character = n.character "
            "AND i.belief_id = n.belief_id",
            world,
        ).fetchall()
        self._db.execute("DELETE FROM incoming")
        return {(str(r[0]), str(r[1])): (int(r[2]), str(r[3])) for r in rows}

    def _forget(self, item: int, words: str) -> None:
        """Drop an item whose content changed (its words go with it, from the world's table
        `words`; its new content waits for a vector of its own, and its character's matrix goes
        as the new item is taken in)."""
        for statement in (
            "DELETE FROM items WHERE id = ?",
            "DELETE FROM abouts WHERE item = ?",
            f"DELETE FROM {words} WHERE rowid = ?",
        ):
            self._db.execute(statement, (item,))

    # -- searching -----------------------------------------------------------------------------

    def _visible(self, scope: SearchScope) -> tuple[str, list[object]]:
        """The SQL condition (on items `i`) of what the scope sees, and its parameters."""
        parts = ["(i.persistent = 1 AND i.seq <= ?)"]
        parameters: list[object] = [scope.persistent_upto]
        for segment in scope.ancestry:
            parts.append("(i.persistent = 0 AND i.timeline_id = ? AND i.seq <= ?)")
            parameters += [segment.timeline_id, segment.upto_seq]
        return (
            f"i.tenant = ? AND i.world = ? AND i.character = ? AND {_either(parts)}",
            [scope.tenant_id, scope.world_id, scope.character, *parameters],
        )

    def holds_any(self, scope: SearchScope) -> bool:
        visible, parameters = self._visible(scope)
        row = self._db.execute(f"SELECT 1 FROM items i WHERE {visible} LIMIT 1", parameters)
        return row.fetchone() is not None

    def mentions(self, tenant_id: str, world_id: str, entity_id: str) -> bool:
        row = self._db.execute(
            "SELECT 1 FROM abouts a JOIN items i ON i.id = a.item "
            "WHERE a.entity = ? AND i.tenant = ? AND i.world = ? LIMIT 1",
            (entity_id, tenant_id, world_id),
        )
        return row.fetchone() is not None

    def by_cues(self, scope: SearchScope, cues: Collection[str], limit: int) -> list[str]:
        return self._about(scope, cues, "COUNT(*)", limit)

    def most_important_about(
        self, scope: SearchScope, entities: Collection[str], limit: int
    ) -> list[str]:
        return self._about(scope, entities, "i.importance", limit)

    def _about(
        self, scope: SearchScope, entities: Collection[str], first: str, limit: int
    ) -> list[str]:
        """Belief ids in scope about any of `entities`, highest `first` (an SQL expression of
        the item and its matched entities) first, then newest, then by id."""
        if not entities:
            return []
        visible, parameters = self._visible(scope)
        marks = ", ".join("?" for _ in entities)
        rows = self._db.execute(
            f"SELECT i.belief_id FROM abouts a JOIN items i ON i.id = a.item "
            f"WHERE a.entity IN ({marks}) AND {visible} "
            f"GROUP BY i.id ORDER BY {first} DESC, i.seq DESC, i.belief_id LIMIT ?",
            [*entities, *parameters, limit],
        )
        return [str(row[0]) for row in rows]

    def by_words(self, scope: SearchScope, text: str, limit: int) -> list[str]:
        """FTS5 over content, best bm25 first, for the terms of `text` (`_terms`): the first
        `limit` rows of `_words_found`."""
        return [belief for belief, _ in self._words_found(scope, text, limit)[0]]

    def _words_found(
        self, scope: SearchScope, text: str, limit: int
    ) -> tuple[list[tuple[str, int]], frozenset[str]]:
        """The first `limit` rows the word search finds for `text` (belief id and score), and
        the terms that found them.

        A word in half the world's rows or more (`COMMON_SHARE`: "the", "at") tells nothing of
        what a row is about, and finds nothing by itself when a rarer word of the query finds
        some of the character's rows: those are found, scored by every word (rows tied on the
        rarer words are ranked by the common ones). Found by its filler words alone, a memory
        took a candidate's place, and its importance chose it over the memories the query was
        about (fusion keeps ranks, not scores: "rain at the well" recalled a theft at the
        inn). When no rarer word finds any (the query's rarer words are other characters'), or
        the query says none, every word finds the rows that say it. The rows that say a common
        word too, and those that do not, are two matches whose expressions each hold every
        word once (their scores are the whole query's): matching walks every row of the
        character (its block, `BLOCK_BITS`) that says a word, and a common word makes most of
        that work."""
        world_words = self._word_tables.get((scope.tenant_id, scope.world_id))
        if world_words is None:
            return [], frozenset()
        block = self._block(scope.tenant_id, scope.world_id, scope.character)
        held = self._terms(world_words, text)
        if not held or block is None:
            return [], frozenset()
        table, total, words = world_words.name, world_words.rows, list(held)
        common = {word for word, rows in held.items() if rows >= total * COMMON_SHARE}
        rare = [word for word in words if word not in common]
        if rare and common:
            said = [word for word in words if word in common]  # in order, as often as asked
            rare_words, common_words = _any_of(rare), _any_of(said)
            matches = [f"{rare_words} AND {common_words}", f"{rare_words} NOT {common_words}"]
            found = self._ranked(scope, table, block, matches, limit)
            if found:
                return found, frozenset(rare)
        return self._ranked(scope, table, block, [_any_of(words)], limit), frozenset(words)

    def _terms(self, table: _WordTable, text: str) -> dict[str, int]:
        """The terms of `text` that rows of the world's word `table` say, each once, in the order
        said, with how many rows say it: split and folded by the table's own tokenizer (its
        case folding, which is not Python's, and its diacritics), so a query's terms are the
        content's. A term no row says matches nothing and adds to no score, so it is left out;
        past `MAX_WORDS`, the rarest are kept (fewest rows, then first said): each term costs a
        look-up here, so a text's cost grows with its distinct words, which a recall's 1,000
        characters and a decision's event size bound."""
        self._db.execute("DELETE FROM asked")  # the last query's, or one a failure left
        self._db.execute("INSERT INTO asked(content) VALUES (?)", (text,))
        found = self._db.execute(
            "SELECT a.term, r.doc FROM (SELECT term, MIN(offset) AS said FROM asked_terms "
            f"GROUP BY term) a CROSS JOIN {table.name}_rows r ON r.term = a.term ORDER BY a.said"
        ).fetchall()
        terms = [(str(term), int(rows)) for term, rows in found]
        rarest = sorted(range(len(terms)), key=lambda at: (terms[at][1], at))[:MAX_WORDS]
        return dict(terms[at] for at in sorted(rarest))

    def _ranked(
        self,
        scope: SearchScope,
        table: str,
        block: tuple[int, int],
        expressions: Sequence[str],
        limit: int,
    ) -> list[tuple[str, int]]:
        """The first `limit` rows the scope sees that match any of the (disjoint) match
        `expressions` in the world's word `table`, among the rows of the character's `block`:
        belief id and bm25 score (in `BM25_GRID`ths), best (lowest) first, then by belief id."""
        visible, parameters = self._visible(scope)
        parameters = [*block, *parameters]
        select = (
            f"SELECT i.belief_id AS belief_id, round(bm25({table}) * {BM25_GRID}) AS score "
            f"FROM {table} "
            f"JOIN items i ON i.id = {table}.rowid WHERE {table} MATCH ? "
            f"AND {table}.rowid BETWEEN ? AND ? AND {visible}"
        )
        rows = self._db.execute(
            " UNION ALL ".join(select for _ in expressions) + " ORDER BY score, belief_id LIMIT ?",
            [*chain.from_iterable((expression, *parameters) for expression in expressions), limit],
        )
        return [(str(row[0]), int(row[1])) for row in rows]

    def by_meaning(self, scope: SearchScope, text: str, limit: int) -> list[str] | None:
        model = self.world_model(scope.tenant_id, scope.world_id)
        embedder = self.embedder
        if embedder is None or model != (embedder.model, embedder.dimension):
            return None
        held = self._character_vectors(scope)
        if held is None:
            return []
        similarity = held_similarity(
            self._world_vectors[(scope.tenant_id, scope.world_id)],
            held.rows,
            embedder.embed([text])[0],
        )
        found: list[str] = []
        for row in best_first(similarity, MIN_COSINE, depth=4 * limit):
            belief_id, timeline_id, seq, persistent = held.items[row]
            if scope.sees(timeline_id, seq, persistent):
                found.append(belief_id)
                if len(found) == limit:
                    break
        return found

    def finds(
        self, scope: SearchScope, text: str, contents: Sequence[str]
    ) -> list[Collection[Search]]:
        _, finding = self._words_found(scope, text, 1)
        said = self._tokens(contents)
        found: list[list[Search]] = [
            [] if terms.isdisjoint(finding) else ["words"] for terms in said
        ]
        embedder, model = self.embedder, self.world_model(scope.tenant_id, scope.world_id)
        if embedder is not None and model == (embedder.model, embedder.dimension):
            vectors = embedder.embed([text, *contents])
            near_each = np.einsum("ij,j->i", vectors[1:], vectors[0])
            for searches, near in zip(found, near_each, strict=True):
                if near >= MIN_COSINE:
                    searches.append("vectors")
        return list(found)

    def _tokens(self, texts: Sequence[str]) -> list[set[str]]:
        """The terms of each of `texts` as the word tables split and fold them (`_terms`): a
        content said them, were it a row."""
        self._db.execute("DELETE FROM asked")
        self._db.executemany(
            "INSERT INTO asked(rowid, content) VALUES (?, ?)", enumerate(texts, start=1)
        )
        terms: list[set[str]] = [set() for _ in texts]
        for row, term in self._db.execute("SELECT DISTINCT doc, term FROM asked_terms"):
            terms[int(row) - 1].add(str(term))
        return terms

    def _character_vectors(self, scope: SearchScope) -> _CharacterVectors | None:
        world = (scope.tenant_id, scope.world_id)
        held = self._vectors.get(world, {}).get(scope.character)
        kept = self._world_vectors.get(world)
        if held is None and kept is not None:
            rows = self._db.execute(
                "SELECT belief_id, timeline_id, seq, persistent, content_hash FROM items "
                "WHERE tenant = ? AND world = ? AND character = ? ORDER BY belief_id",
                (*world, scope.character),
            ).fetchall()
            found = [(row, kept.rows[row[4]]) for row in rows if row[4] in kept.rows]
            if not found:
                return None
            held = _CharacterVectors(
                [(str(r[0]), str(r[1]), int(r[2]), bool(r[3])) for r, _ in found],
                np.array([at for _, at in found], dtype=np.intp),
            )
            self._vectors.setdefault(world, {})[scope.character] = held
        return held

    # -- vectors -------------------------------------------------------------------------------

    def world_model(self, tenant_id: str, world_id: str) -> tuple[str, int] | None:
        """The model and dimension the world's first vectors fixed, or None before any."""
        row = self._db.execute(
            "SELECT model, dimension FROM world_models WHERE tenant = ? AND world = ?",
            (tenant_id, world_id),
        ).fetchone()
        return None if row is None else (str(row[0]), int(row[1]))

    def pending(self, tenant_id: str, world_id: str, limit: int) -> list[tuple[str, str]]:
        """Contents held in the world that have no vector yet, oldest first, each once (the
        same sentence held by many characters is embedded once): content hash, content."""
        return list(islice(self._unembedded.get((tenant_id, world_id), {}).items(), limit))

    def store_vectors(
        self,
        tenant_id: str,
        world_id: str,
        model: str,
        hashes: Sequence[str],
        vectors: Vectors,
    ) -> bool:
        """Keep the vectors of contents (by content hash); False (counted, logged) when the
        world's first vectors fixed another model or dimension."""
        if len(hashes) != len(vectors):
            raise ValueError(f"{len(hashes)} content hash(es) for {len(vectors)} vector(s)")
        dimension = int(vectors.shape[1])
        fixed = self.world_model(tenant_id, world_id)
        if fixed is None:
            self._db.execute(
                "INSERT INTO world_models VALUES (?, ?, ?, ?)",
                (tenant_id, world_id, model, dimension),
            )
        elif fixed != (model, dimension):
            self.refuse(tenant_id, world_id, model, dimension, len(hashes))
            return False
        kept = self._world_vectors.get((tenant_id, world_id))
        if kept is None:
            kept = self._world_vectors[(tenant_id, world_id)] = WorldVectors(dimension)
        kept.keep(hashes, vectors)
        waiting = self._unembedded.get((tenant_id, world_id), {})
        for digest in hashes:
            waiting.pop(digest, None)
        self._drop_character_vectors(tenant_id, world_id)
        return True

    def _drop_character_vectors(self, tenant_id: str, world_id: str) -> None:
        """Drop the world's character matrices (`_character_vectors` builds them again)."""
        self._vectors.pop((tenant_id, world_id), None)

    def refuse(self, tenant_id: str, world_id: str, model: str, dimension: int, count: int) -> None:
        """Count and log `count` vectors of `model`/`dimension` refused for the world, and
        remember it so that the embedder is not run for the world again."""
        self.refused_vectors += count
        self.refused_models.add((tenant_id, world_id, model, dimension))
        log.warning(
            "refused %d vector(s) of %s/%d for world %r: its vectors are %s; not embedding "
            "for it again",
            count,
            model,
            dimension,
            world_id,
            "/".join(map(str, self.world_model(tenant_id, world_id) or ())),
            extra={"world_instance_id": world_id, "tenant_id": tenant_id},
        )

    def refuses(self, tenant_id: str, world_id: str, model: str, dimension: int) -> bool:
        """Whether the world's vectors are of another model or dimension than these."""
        fixed = self.world_model(tenant_id, world_id)
        return fixed is not None and fixed != (model, dimension)

    def worlds(self) -> Iterator[tuple[str, str]]:
        """Every world the index holds anything of: rows, or marks of a world it followed (one
        whose timelines applied nothing yet, its events waiting, is known by those alone)."""
        rows = self._db.execute(
            "SELECT tenant, world FROM items UNION SELECT tenant, world FROM synced "
            "UNION SELECT tenant, world FROM noted"
        ).fetchall()
        yield from dict.fromkeys([*((str(row[0]), str(row[1])) for row in rows), *self._deletions])

    def knows(self, tenant_id: str, world_id: str) -> bool:
        """Whether a catch up found the world holding anything (and it was not dropped since)."""
        return (tenant_id, world_id) in self._deletions

    def drop_world(self, tenant_id: str, world_id: str) -> None:
        """Forget everything of a world (deleted, or its partition moved to another worker)."""
        self._forget_world(tenant_id, world_id)
        self.refused_models = {r for r in self.refused_models if r[:2] != (tenant_id, world_id)}


def _either(conditions: list[str]) -> str:
    """SQL conditions joined by OR, in order, as a balanced tree: SQLite refuses an expression
    over 1,000 levels deep, and a flat chain is as deep as it is long (a save loaded from a
    chain of 993 saves failed every recall and decision); its planner splits nested ORs as it
    splits a chain."""
    if len(conditions) == 1:
        return conditions[0]
    middle = len(conditions) // 2
    return f"({_either(conditions[:middle])} OR {_either(conditions[middle:])})"


def _block_ids(number: int) -> tuple[int, int]:
    """The first and last item id of the block of the character numbered `number`."""
    first = number << BLOCK_BITS
    return first, first + (1 << BLOCK_BITS) - 1


def _any_of(words: Sequence[str]) -> str:
    """An FTS5 match expression for rows that say any of the words, each quoted, so nothing a
    player typed is read as FTS5 syntax."""
    return "(" + " OR ".join('"' + word.replace('"', '""') + '"' for word in words) + ")"


def best_first(similarity: Vectors, least: float, depth: int) -> Iterator[int]:
    """Rows from the most similar down to `least`, ties in row order (a stable sort's order).

    The first `depth` come from a partition, not a sort of every row; the rest, only if asked
    for (when the scope leaves too many of the first out), from a sort of what is left."""
    above = np.flatnonzero(similarity >= least)
    scores = similarity[above]
    if len(above) > depth:
        kth = np.partition(-scores, depth - 1)[depth - 1]
        first = np.flatnonzero(-scores <= kth)  # every tie of the depth-th, so the cut is exact
    else:
        first = np.arange(len(above))
    order = first[np.lexsort((above[first], -scores[first]))]
    yield from (int(row) for row in above[order])
    if len(first) < len(above):
        rest = np.setdiff1d(np.arange(len(above)), first, assume_unique=True)
        yield from (int(row) for row in above[rest[np.lexsort((above[rest], -scores[rest]))]])


async def catch_up_in_slices(
    index: SqliteRecallIndex,
    read_transaction: Callable[[str], Awaitable[StateTransaction]],
    tenant_id: str,
    world_id: str,
) -> None:
    """Catch the index up with the world a slice at a time (`catch_up_slice`), each over a
    fresh read transaction, the event loop free between slices: a read that finds the index
    far behind (the first after a start: 11 to 17 s of a world of 175,000 memories at once)
    waits without holding the events and reads of every tenant on the worker."""
    while True:
        tx = await read_transaction(world_id)
        if not index.catch_up_slice(tx, memory_keys(tx, tenant_id, world_id)):
            return
        await asyncio.sleep(0)  # a read transaction at hand does not let the loop go on


EMBED_BATCH = 256


def embed_one_batch(
    index: SqliteRecallIndex, embedder: Embedder, tx: StateTransaction, keys: MemoryKeys
) -> tuple[int, bool]:
    """Give at most `EMBED_BATCH` of the contents formed in the world that lack one a vector of
    `embedder`, each content once, oldest first: how many were stored, and whether more wait.
    None is stored when the world's vectors are of another model or dimension: refused once,
    counted and logged, then skipped without running the embedder.

    One step at a time, so that the embedding agent lets ingest go on between them: a world
    caught up from position 0 (after a restart) has its whole history waiting. A step reads a
    slice of the memory log (`note_formed_slice`), and embeds only once a whole batch is noted
    or the log is read to its end (or stores nothing, and more waits): the batches, and what is
    refused, are those of a world whose log was read at once."""
    tenant_id, world_id = keys.tenant_id, keys.world_id
    model, dimension = embedder.model, embedder.dimension
    if (tenant_id, world_id, model, dimension) in index.refused_models:
        return 0, False
    more_formed = index.note_formed_slice(tx, keys)
    waiting = index.pending(tenant_id, world_id, EMBED_BATCH)
    if more_formed and len(waiting) < EMBED_BATCH:
        return 0, True
    if index.refuses(tenant_id, world_id, model, dimension):
        index.refuse(tenant_id, world_id, model, dimension, len(waiting))
        return 0, False
    if not waiting:
        return 0, False
    vectors = embedder.embed([content for _, content in waiting])
    hashes = [digest for digest, _ in waiting]
    if not index.store_vectors(tenant_id, world_id, model, hashes, vectors):
        return 0, False
    return len(waiting), more_formed or bool(index.pending(tenant_id, world_id, 1))


def embed_pending(
    index: SqliteRecallIndex, embedder: Embedder, tx: StateTransaction, keys: MemoryKeys
) -> int:
    """Every batch `embed_one_batch` finds waiting in the world, in one go: how many contents
    were stored."""
    stored, more = embed_one_batch(index, embedder, tx, keys)
    while more:
        made, more = embed_one_batch(index, embedder, tx, keys)
        stored += made
    return stored
