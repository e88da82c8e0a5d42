"""(f) Recall in-process: quality on a labelled set, latency at 10,000 memories, embedding cost.

One character (the keeper) is told things by 40 villagers, each a sentence "subject event
place" built from fixed phrases ("The miller's son went missing near the river"). Every phrase
has a paraphrase sharing no word with it ("a lad who grinds grain vanished by a stream"), so the
right memory of each query is known:
- paraphrase: the whole sentence in other words (no word shared with its memory);
- words: two phrases as said, the third paraphrased;
- name: "what did NAME say about SUBJECT", the teller's declared name and the subject as said
  (the teller told the keeper about that subject once).
recall@10 is whether `recall` (limit 10) answers the right memory, with only the cue search,
only the word search, only the vector search, or all three fused; the fused ranking alone
(before the choice by importance, retention and recency) is shown beside it.

Latency: `recall` of the keeper holding 10,000 memories, 10,000 different sentences (a fourth
slot says when: "... at dawn"), every vector made, p50/p99, and the runtime read
(`runtime_read`) of the same character in the same run; both in-process over `MemoryState`,
no HTTP. Then the same recalls from an index that also holds four other worlds of as many
memories (a worker holding several saves), and from the keeper's world where four other
characters hold as many (a town), each alternated with the keeper's index alone: what other
worlds on the worker, and other characters of the world, cost a recall.

Embedding cost: the embedding agent embeds the worlds of each batch the worker takes in, on the
worker's event loop between batches, so on the same core as ingest. Measured in-process on the
tavern story: `Projector.receive` for every event alone, then the same with, after every 200
events (an ingest batch), what the worker does for the world (`note_formed`, reading the memory
log since its mark, then `embed_pending` with WordLlama), each part timed by the clock and by
the CPU time of the thread; the word index is not the agent's work (recall catches it up). Each
run with the agent starts from a new embedder, so the words it keeps tokenized are learnt within
the run. Each run ends with a collection of the youngest garbage-collector generation, inside
the clock: the story's memories pile up there between collections, and without it the few
collections the agent's allocations set off would charge it with tracing the core's objects,
which the run without the agent never pays. The ratio of the two rates is the ingest rate the
agent leaves when the core is the bottleneck (a worker also waits on Kafka, so it is a floor for
the worker's ratio). A sentence many characters hold is embedded once.
"""

from __future__ import annotations

import gc
import random
import re
import time
from collections import Counter
from collections.abc import Collection, Iterator, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import orjson

from benchmarks.story import TIMELINE, encoded, game_time, tavern_story
from benchmarks.support import Options, median, percentile, rate, report, run_main
from projections.delivery import SourceMessage
from projections.event_keys import ENTITY_DECLARED, TOLD
from projections.memories import belief_id
from projections.memory_store import MemoryKeys, memory_keys
from projections.projector import Projector
from projections.recall import (
    SEARCH_DEPTH,
    RecallIndex,
    RecallQuery,
    SearchScope,
    named_in,
    recall,
    search_scope,
)
from projections.recall_fusion import Search, fuse, ranks_of
from projections.runtime_read import runtime_read, timeline_view
from projections.state import MemoryState, StateTransaction
from schemas.policy import Policy
from streams.embedding import WordLlamaEmbedder
from streams.recall_index import SqliteRecallIndex, embed_pending
from streams.settings import DEFAULT_BATCH_EVENTS as BATCH_EVENTS

TENANT = "default"
KEEPER = "npc-keeper"
TELLERS = (
    "Aldo",
    "Brenna",
    "Cedric",
    "Dagny",
    "Eamon",
    "Freya",
    "Gorm",
    "Hilde",
    "Ivor",
    "Jorunn",
    "Kester",
    "Liese",
    "Magnus",
    "Nessa",
    "Osric",
    "Petra",
    "Quill",
    "Runa",
    "Sigurd",
    "Tove",
    "Ulric",
    "Vesna",
    "Wendel",
    "Xenia",
    "Yorick",
    "Zora",
    "Anselm",
    "Britt",
    "Corwin",
    "Dalla",
    "Edric",
    "Fenna",
    "Gunnar",
    "Halla",
    "Ingram",
    "Jutta",
    "Kolbein",
    "Linnea",
    "Mattias",
    "Nilla",
)

#: (as said, a paraphrase sharing no word) for each slot of a sentence.
SUBJECTS = (
    ("The miller's son", "lad who grinds grain"),
    ("The blacksmith", "man forging iron"),
    ("The old priest", "elderly cleric"),
    ("The ferryman", "boatman"),
    ("The baker", "someone who makes bread"),
    ("The guard captain", "watch commander"),
    ("The herbalist", "healer using remedies"),
    ("The shepherd", "tender of sheep"),
    ("The tax collector", "royal levy man"),
    ("The bard", "wandering minstrel"),
    ("The innkeeper's daughter", "girl whose father runs an alehouse"),
    ("The fisherman", "angler"),
    ("The carpenter", "woodworker"),
    ("The midwife", "woman delivering babies"),
    ("The merchant", "trader"),
    ("The hunter", "trapper of deer"),
)
EVENTS = (
    ("went missing", "vanished"),
    ("was robbed", "lost her purse to thieves"),
    ("fell ill with fever", "caught some sickness"),
    ("got married", "wed"),
    ("started a fight", "threw punches"),
    ("found gold", "discovered treasure"),
    ("owes money", "has debts"),
    ("broke a leg", "fractured one limb"),
    ("saw a ghost", "glimpsed some spirit"),
    ("sold a horse", "traded away one mare"),
    ("was arrested", "got jailed"),
    ("left town", "departed for good"),
)
PLACES = (
    ("near the river", "beside some stream"),
    ("at the market", "amid bazaar stalls"),
    ("in the forest", "among woods"),
    ("on the northern road", "along highways going north"),
    ("at the harbour", "beside docks"),
    ("in the chapel", "inside some shrine"),
    ("at the tavern", "inside an inn"),
    ("on the farm", "among fields"),
    ("up the mountain", "atop some peak"),
    ("by the old well", "beside one cistern"),
)
TIMES = (
    ("at dawn", "when morning broke"),
    ("last winter", "during cold months past"),
    ("yesterday", "one day ago"),
    ("before the harvest", "ahead of reaping season"),
    ("during the storm", "amid gales"),
    ("on midsummer night", "while solstice festivities ran"),
)
"""A fourth slot for the latency keeper, whose 10,000 memories must all be different sentences
(16 x 12 x 10 = 1,920 sentences of three slots; 11,520 of four)."""
SEARCHES: tuple[Search, ...] = ("cues", "words", "vectors")

FULL_MEMORIES, QUICK_MEMORIES = 1_500, 600
QUERIES_PER_KIND, QUICK_QUERIES_PER_KIND = 100, 40
LATENCY_MEMORIES = 10_000
KEEPER_SEED = 11
"""What the keeper is told is drawn from this seed (`Keeper.build`; a crowded world tells it
the same again)."""
OTHERS = 4
"""Other worlds beside the keeper's in the index, then other characters beside the keeper in
its world, when the latency is read again: a word search walks only the keeper's rows (each
world's words are a table of their own, each character's rows a block of their own)."""
FULL_READS, QUICK_READS = 500, 150
FULL_INGEST, QUICK_INGEST = 20_000, 5_000
LATENCY_GOAL_MS = 10.0
INGEST_GOAL = 0.9
POLICY = Policy()
WORD = re.compile(r"\w+")
"""A word of a labelled query or of what the keeper was told (the sentences are English)."""
"""Resolved once, as a worker resolves a world's policy once (not per read)."""


@dataclass(frozen=True)
class Told:
    """One memory of the keeper: who told it, and which phrases it is made of."""

    seq: int
    teller: int
    subject: int
    event: int
    place: int
    time: int | None

    def content(self) -> str:
        said = f"{SUBJECTS[self.subject][0]} {EVENTS[self.event][0]} {PLACES[self.place][0]}"
        return said if self.time is None else f"{said} {TIMES[self.time][0]}"

    def belief(self, world: str) -> str:
        return belief_id(TENANT, world, TIMELINE, self.seq, KEEPER, "knowledge")


@dataclass(frozen=True)
class Labelled:
    kind: str
    text: str
    right: str
    """The belief id of the memory the query is after."""


def teller_id(number: int) -> str:
    return f"npc-teller-{number:02d}"


def told_story(world: str, memories: int, seed: int, timed: bool) -> tuple[list[bytes], list[Told]]:
    """The declarations, then `memories` different sentences told to the keeper, each by one
    teller (`timed`: of four slots, the last saying when)."""
    rng = random.Random(seed)
    times: list[int | None] = list(range(len(TIMES))) if timed else [None]
    combos = [
        (s, e, p, t)
        for s in range(len(SUBJECTS))
        for e in range(len(EVENTS))
        for p in range(len(PLACES))
        for t in times
    ]
    picks = [(rng.randrange(len(TELLERS)), combo) for combo in rng.sample(combos, memories)]
    entities: dict[str, Any] = {KEEPER: {"name": "Mara", "kind": "character"}}
    entities |= {
        teller_id(n): {"name": name, "kind": "character"} for n, name in enumerate(TELLERS)
    }
    lines = [_line(world, 1, ENTITY_DECLARED, {"entities": entities})]
    told = []
    for seq, (teller, (subject, event, place, when)) in enumerate(picks, start=2):
        one = Told(seq, teller, subject, event, place, when)
        told.append(one)
        payload = {"content": one.content()}
        fields = {"actor": teller_id(teller), "target": KEEPER, "payload": payload}
        lines.append(_line(world, seq, TOLD, fields))
    return lines, told


def _line(world: str, seq: int, key: str, fields: dict[str, Any]) -> bytes:
    event = {
        "world_instance_id": world,
        "timeline_id": TIMELINE,
        "seq": seq,
        "key": key,
        "game_time": game_time(seq),
        **fields,
    }
    return orjson.dumps(event)


def labelled_queries(told: Sequence[Told], world: str, per_kind: int, seed: int) -> list[Labelled]:
    """`per_kind` queries of each kind, each with the memory it is after."""
    rng = random.Random(seed)
    queries = []
    for one in rng.sample(list(told), per_kind):
        text = f"{SUBJECTS[one.subject][1]} {EVENTS[one.event][1]} {PLACES[one.place][1]}"
        assert not set(WORD.findall(text.lower())) & set(WORD.findall(one.content().lower())), text
        queries.append(Labelled("paraphrase", text, one.belief(world)))
    for one in rng.sample(list(told), per_kind):
        slots = [SUBJECTS[one.subject], EVENTS[one.event], PLACES[one.place]]
        other = rng.randrange(3)
        text = " ".join(pair[1] if n == other else pair[0] for n, pair in enumerate(slots))
        queries.append(Labelled("words", text.lower(), one.belief(world)))
    by_teller_subject = Counter((one.teller, one.subject) for one in told)
    once = [one for one in told if by_teller_subject[(one.teller, one.subject)] == 1]
    for one in rng.sample(once, min(per_kind, len(once))):
        subject = SUBJECTS[one.subject][0].lower()
        text = f"what did {TELLERS[one.teller]} say about {subject}"
        queries.append(Labelled("name", text, one.belief(world)))
    return queries


@dataclass
class OnlySearches:
    """A recall index that runs only some of its searches (the others find nothing)."""

    index: SqliteRecallIndex
    kept: Collection[Search]

    def catch_up(self, tx: StateTransaction, keys: MemoryKeys) -> None:
        self.index.catch_up(tx, keys)

    def holds_any(self, scope: SearchScope) -> bool:
        return self.index.holds_any(scope)

    def mentions(self, tenant_id: str, world_id: str, entity_id: str) -> bool:
        return self.index.mentions(tenant_id, world_id, entity_id)

    def by_cues(self, scope: SearchScope, cues: Collection[str], limit: int) -> list[str]:
        return self.index.by_cues(scope, cues, limit) if "cues" in self.kept else []

    def most_important_about(
        self, scope: SearchScope, entities: Collection[str], limit: int
    ) -> list[str]:
        """As the index answers it: a decision's search, not one of recall's."""
        return self.index.most_important_about(scope, entities, limit)

    def by_words(self, scope: SearchScope, text: str, limit: int) -> list[str]:
        return self.index.by_words(scope, text, limit) if "words" in self.kept else []

    def by_meaning(self, scope: SearchScope, text: str, limit: int) -> list[str] | None:
        return self.index.by_meaning(scope, text, limit) if "vectors" in self.kept else None

    def finds(
        self, scope: SearchScope, text: str, contents: Sequence[str]
    ) -> list[Collection[Search]]:
        found = self.index.finds(scope, text, contents)
        return [[search for search in searches if search in self.kept] for searches in found]


@dataclass
class Keeper:
    """The keeper's world folded into a state, with an index holding every vector."""

    world: str
    state: MemoryState
    index: SqliteRecallIndex
    told: list[Told]
    built_s: float
    embedded_s: float

    @classmethod
    def build(cls, world: str, memories: int, embedder: WordLlamaEmbedder, timed: bool) -> Keeper:
        lines, told = told_story(world, memories, seed=KEEPER_SEED, timed=timed)
        return cls.of_story(world, lines, told, embedder)

    @classmethod
    def of_story(
        cls, world: str, lines: list[bytes], told: list[Told], embedder: WordLlamaEmbedder
    ) -> Keeper:
        """The world of `lines` folded, indexed and embedded; `told` what the keeper was told."""
        state, built = folded(world, lines)
        index = SqliteRecallIndex(embedder)
        began = time.perf_counter()
        keys = memory_keys(state, TENANT, world)
        index.catch_up(state, keys)
        embed_pending(index, embedder, state, keys)
        return cls(world, state, index, told, built, time.perf_counter() - began)

    def recall(self, index: RecallIndex, text: str) -> list[str]:
        found = recall(
            self.state, index, TENANT, self.world, TIMELINE, KEEPER, RecallQuery(text), POLICY
        ).read()
        return [memory.belief_id for memory in found.memories]

    def fused_ranking(self, text: str, limit: int) -> list[str]:
        """The first `limit` of the fused ranking, before the choice."""
        _, keys, ancestry = timeline_view(self.state, TENANT, self.world, TIMELINE, None)
        scope = search_scope(keys, ancestry, KEEPER)
        names = {teller_id(n): name for n, name in enumerate(TELLERS)}
        cues = named_in(text, names)
        rankings: dict[Search, list[str]] = {
            "cues": self.index.by_cues(scope, cues, SEARCH_DEPTH) if cues else [],
            "words": self.index.by_words(scope, text, SEARCH_DEPTH),
            "vectors": self.index.by_meaning(scope, text, SEARCH_DEPTH) or [],
        }
        return [found for found, _ in fuse(ranks_of(rankings))[:limit]]


def folded(world: str, lines: list[bytes]) -> tuple[MemoryState, float]:
    """The world of `lines` folded into a fresh state, and the seconds it took."""
    projector, state = Projector(), MemoryState()
    began = time.perf_counter()
    for offset, raw in enumerate(lines):
        projector.receive(state, SourceMessage("bench", 0, offset, world.encode(), raw))
    return state, time.perf_counter() - began


def beside_other_worlds(keeper: Keeper, embedder: WordLlamaEmbedder, worlds: int) -> Keeper:
    """The keeper's world in an index that also holds `worlds` other worlds of as many memories
    (sentences drawn from other seeds), as the index of a worker holding several saves does."""
    index = SqliteRecallIndex(embedder)
    for number in range(worlds):
        other = f"recall-other-{number}"
        lines, _ = told_story(other, len(keeper.told), seed=100 + number, timed=True)
        state, _ = folded(other, lines)
        index.catch_up(state, memory_keys(state, TENANT, other))
    keys = memory_keys(keeper.state, TENANT, keeper.world)
    index.catch_up(keeper.state, keys)
    embed_pending(index, embedder, keeper.state, keys)
    return replace(keeper, index=index)


def among_other_characters(keeper: Keeper, embedder: WordLlamaEmbedder, characters: int) -> Keeper:
    """The keeper's world, where `characters` more characters were then each told as many
    sentences (drawn from other seeds, so mostly the keeper's own again, as in a town where
    news goes round), at the keeper's last story minute (the keeper's memories age no further)."""
    lines, told = told_story(keeper.world, len(keeper.told), seed=KEEPER_SEED, timed=True)
    last = orjson.loads(lines[-1])
    listeners = [f"npc-listener-{number}" for number in range(characters)]
    entities = {
        one: {"name": f"Listener {n}", "kind": "character"} for n, one in enumerate(listeners)
    }
    lines.append(_line(keeper.world, last["seq"] + 1, ENTITY_DECLARED, {"entities": entities}))
    for number, listener in enumerate(listeners):
        more, _ = told_story(keeper.world, len(keeper.told), seed=200 + number, timed=True)
        for raw in more[1:]:
            event = orjson.loads(raw)
            event |= {"seq": len(lines) + 1, "target": listener, "game_time": last["game_time"]}
            lines.append(orjson.dumps(event))
    return Keeper.of_story(keeper.world, lines, told, embedder)


def crowding(
    keeper: Keeper, crowded: Keeper, texts: Sequence[str], reads: int, repeats: int
) -> list[tuple[str, str]]:
    """The keeper's recall p50 and p99 alone and `crowded`, alternated so both see the same
    machine, and their ratios."""
    latencies(crowded, texts, reads // 5)  # warm-up
    alone: list[Latencies] = []
    beside: list[Latencies] = []
    for _ in range(repeats):
        alone.append(latencies(keeper, texts, reads))
        beside.append(latencies(crowded, texts, reads))

    def cpu_ms(runs: list[Latencies], share: float) -> float:
        return median([percentile(one.recall_cpu, share) * 1e3 for one in runs])

    p50s = (cpu_ms(alone, 0.5), cpu_ms(beside, 0.5))
    p99s = (cpu_ms(alone, 0.99), cpu_ms(beside, 0.99))
    return [
        ("recall p50 alone / beside them", f"{p50s[0]:.2f} / {p50s[1]:.2f} ms"),
        ("recall p99 alone / beside them", f"{p99s[0]:.2f} / {p99s[1]:.2f} ms"),
        ("ratio beside/alone, p50 / p99", f"{p50s[1] / p50s[0]:.2f} / {p99s[1] / p99s[0]:.2f}"),
    ]


def quality(keeper: Keeper, queries: Sequence[Labelled]) -> dict[str, dict[str, float]]:
    """recall@10 by search mode and query kind (and "all")."""
    modes: dict[str, RecallIndex] = {
        **{search: OnlySearches(keeper.index, (search,)) for search in SEARCHES},
        "fused": keeper.index,
    }
    hits: dict[str, Counter[str]] = {mode: Counter() for mode in [*modes, "fusion ranking"]}
    asked: Counter[str] = Counter()
    for query in queries:
        asked[query.kind] += 1
        for mode, index in modes.items():
            if query.right in keeper.recall(index, query.text):
                hits[mode][query.kind] += 1
        if query.right in keeper.fused_ranking(query.text, 10):
            hits["fusion ranking"][query.kind] += 1
    total = sum(asked.values())
    return {
        mode: {
            **{kind: counted[kind] / asked[kind] for kind in asked},
            "all": sum(counted.values()) / total,
        }
        for mode, counted in hits.items()
    }


@dataclass
class Latencies:
    """Seconds per recall and per runtime read: wall clock, and CPU time of the reading thread
    (what the read itself costs, whatever else the machine runs)."""

    recall: list[float] = field(default_factory=list)
    runtime: list[float] = field(default_factory=list)
    recall_cpu: list[float] = field(default_factory=list)
    runtime_cpu: list[float] = field(default_factory=list)


def latencies(keeper: Keeper, texts: Sequence[str], reads: int) -> Latencies:
    """`reads` recalls (cycling through `texts`) and runtime reads, interleaved so both see the
    same machine."""
    timed = Latencies()
    for number in range(reads):
        began, cpu = time.perf_counter(), time.thread_time()
        keeper.recall(keeper.index, texts[number % len(texts)])
        timed.recall.append(time.perf_counter() - began)
        timed.recall_cpu.append(time.thread_time() - cpu)
        began, cpu = time.perf_counter(), time.thread_time()
        runtime_read(keeper.state, TENANT, keeper.world, TIMELINE, KEEPER)
        timed.runtime.append(time.perf_counter() - began)
        timed.runtime_cpu.append(time.thread_time() - cpu)
    return timed


@dataclass
class Ingested:
    """Seconds to fold a story, and of them the agent's: reading what was formed, embedding."""

    total: float
    cpu: float = 0.0
    """CPU time of the process (every thread: the tokenizer's too), whatever else runs."""
    reading: float = 0.0
    embed: float = 0.0
    reading_cpu: float = 0.0
    embed_cpu: float = 0.0
    """The agent's parts again, in CPU time of the thread (the tokenizer's own threads run only
    for words not seen before)."""
    agent_collecting: float = 0.0
    """CPU time of the garbage collections that started within the agent's work (they trace
    every young object, the core's too)."""
    collecting: float = 0.0
    """CPU time of every garbage collection of the run."""
    embedded: int = 0
    """How many different sentences were embedded."""


@dataclass
class CollectionClock:
    """The CPU time the garbage collector spends, told by `gc.callbacks`."""

    spent: float = 0.0
    began: float = 0.0

    def __call__(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            self.began = time.thread_time()
        else:
            self.spent += time.thread_time() - self.began


def ingest(lines: list[bytes], world: str, with_agent: bool) -> Ingested:
    """Fold `lines`; `with_agent`, also do the agent's work after every `BATCH_EVENTS` events (read
    what the memory log holds since, embed the sentences without a vector) with an embedder
    made before the clock starts."""
    projector, state = Projector(), MemoryState()
    embedder = WordLlamaEmbedder() if with_agent else None
    index = SqliteRecallIndex(embedder)
    key = world.encode()
    figures = Ingested(0.0)
    collections = CollectionClock()
    gc.callbacks.append(collections)
    began, cpu = time.perf_counter(), time.process_time()
    for offset, raw in enumerate(lines):
        projector.receive(state, SourceMessage("bench", 0, offset, key, raw))
        if embedder is not None and ((offset + 1) % BATCH_EVENTS == 0 or offset + 1 == len(lines)):
            agent_began, agent_cpu = time.perf_counter(), time.thread_time()
            collected_before = collections.spent
            keys = memory_keys(state, TENANT, world)
            index.note_formed(state, keys)
            read, read_cpu = time.perf_counter(), time.thread_time()
            figures.embedded += embed_pending(index, embedder, state, keys)
            figures.reading += read - agent_began
            figures.reading_cpu += read_cpu - agent_cpu
            figures.embed += time.perf_counter() - read
            figures.embed_cpu += time.thread_time() - read_cpu
            figures.agent_collecting += collections.spent - collected_before
    gc.collect(0)  # the young objects the run leaves, traced in both runs alike
    figures.total = time.perf_counter() - began
    figures.cpu = time.process_time() - cpu
    gc.callbacks.remove(collections)
    figures.collecting = collections.spent
    return figures


def _rows_of(figures: dict[str, dict[str, float]]) -> Iterator[tuple[str, str]]:
    kinds = [kind for kind in figures["fused"] if kind != "all"]
    for mode, by_kind in figures.items():
        detail = "  ".join(f"{kind} {by_kind[kind]:.2f}" for kind in kinds)
        yield f"recall@10, {mode}", f"{by_kind['all']:.3f}  ({detail})"


def run(options: Options) -> None:
    embedder = WordLlamaEmbedder()
    memories = QUICK_MEMORIES if options.quick else FULL_MEMORIES
    per_kind = QUICK_QUERIES_PER_KIND if options.quick else QUERIES_PER_KIND
    labelled = Keeper.build("recall-quality", memories, embedder, timed=False)
    queries = labelled_queries(labelled.told, labelled.world, per_kind, seed=13)
    figures = quality(labelled, queries)
    best_single = max(SEARCHES, key=lambda search: figures[search]["all"])
    fused = figures["fused"]["all"]
    report(
        f"(f) recall quality: {len(labelled.told):,} memories, {len(queries)} labelled queries",
        [
            *_rows_of(figures),
            (
                f"fused vs best single ({best_single})",
                f"{fused - figures[best_single]['all']:+.3f}",
            ),
            (
                "goal: fused beats the best single search",
                "met" if fused > figures[best_single]["all"] else "NOT met",
            ),
        ],
    )

    big = Keeper.build("recall-latency", LATENCY_MEMORIES, embedder, timed=True)
    texts = [query.text for query in labelled_queries(big.told, big.world, 50, seed=17)]
    reads = QUICK_READS if options.quick else FULL_READS
    latencies(big, texts, reads // 5)  # warm-up
    samples = [latencies(big, texts, reads) for _ in range(options.repeats)]

    def ms(part: str, share: float) -> float:
        return median([percentile(getattr(one, part), share) * 1e3 for one in samples])

    rows = [("different sentences among them", f"{len({one.content() for one in big.told}):,}")]
    for clock, suffix in (("wall clock", ""), ("CPU time of the thread", "_cpu")):
        recall_p50, recall_p99 = ms(f"recall{suffix}", 0.5), ms(f"recall{suffix}", 0.99)
        read_p50, read_p99 = ms(f"runtime{suffix}", 0.5), ms(f"runtime{suffix}", 0.99)
        rows += [
            (f"{clock}: recall p50", f"{recall_p50:.2f} ms"),
            (f"{clock}: recall p99 (goal <= {LATENCY_GOAL_MS:.0f} ms)", f"{recall_p99:.2f} ms"),
            (f"{clock}: runtime_read p50 / p99", f"{read_p50:.2f} / {read_p99:.2f} ms"),
            (
                f"{clock}: ratio recall/runtime_read p50 / p99",
                f"{recall_p50 / read_p50:.2f} / {recall_p99 / read_p99:.2f}",
            ),
        ]
    report(
        f"(f) recall latency in-process: {len(big.told):,} memories of one character, "
        f"{reads} recalls x {options.repeats}, median",
        [
            *rows,
            ("folding the 10,000 told events (untimed above)", f"{big.built_s:.1f} s"),
            ("indexing and embedding them (untimed above)", f"{big.embedded_s:.1f} s"),
        ],
    )

    crowdings = (
        (beside_other_worlds, "other worlds in the same index (saves)"),
        (among_other_characters, "other characters of the same world"),
    )
    for crowd, beside_what in crowdings:
        crowded = crowd(big, embedder, OTHERS)
        report(
            f"(f) recall with {OTHERS} {beside_what}, {len(big.told):,} memories each, CPU "
            f"time of the thread, median of {options.repeats}",
            crowding(big, crowded, texts, reads, options.repeats),
        )
        del crowded  # its memories would weigh on every collection of the runs below

    count = QUICK_INGEST if options.quick else FULL_INGEST
    world = "tavern-0"
    lines = encoded(tavern_story(count, seed=3, worlds=(world,)))
    ingest(lines[: count // 10], world, with_agent=True)  # warm-up
    without: list[Ingested] = []
    beside: list[Ingested] = []
    for _ in range(options.repeats):
        without.append(ingest(lines, world, with_agent=False))
        beside.append(ingest(lines, world, with_agent=True))

    def events_per_s(runs: list[Ingested], part: str) -> float:
        return median([rate(count, getattr(one, part)) for one in runs])

    def us_per_event(runs: list[Ingested], part: str) -> float:
        return median([getattr(one, part) / count * 1e6 for one in runs])

    rows = []
    for clock, part in (("wall clock", "total"), ("CPU time", "cpu")):
        alone, with_agent = events_per_s(without, part), events_per_s(beside, part)
        rows += [
            (f"{clock}: Projector.receive alone", f"{alone:,.0f} events/s"),
            (
                f"{clock}: with the agent's work every {BATCH_EVENTS} events",
                f"{with_agent:,.0f} events/s",
            ),
            (f"{clock}: ratio with/without (goal >= {INGEST_GOAL})", f"{with_agent / alone:.3f}"),
        ]
    for clock, suffix in (("wall clock", ""), ("CPU time", "_cpu")):
        reading, embed = (
            us_per_event(beside, f"reading{suffix}"),
            us_per_event(beside, f"embed{suffix}"),
        )
        rows += [
            (f"{clock}: agent, reading the memory log, per event", f"{reading:,.1f} us"),
            (f"{clock}: agent, embedding, per event", f"{embed:,.1f} us"),
            (f"{clock}: agent, all its work, per event", f"{reading + embed:,.1f} us"),
        ]
    rows += [
        (
            "CPU time: agent, of which garbage collections it set off, per event",
            f"{us_per_event(beside, 'agent_collecting'):,.1f} us",
        ),
        (
            "CPU time: garbage collection, whole run alone / with the agent, per event",
            f"{us_per_event(without, 'collecting'):,.1f} / "
            f"{us_per_event(beside, 'collecting'):,.1f} us",
        ),
    ]
    report(
        f"(f) ingest with the embedding agent on the same core: {count:,} tavern events, "
        f"median of {options.repeats}",
        [*rows, ("different sentences embedded", f"{beside[0].embedded:,}")],
    )


if __name__ == "__main__":
    run_main(__doc__ or "", in_process=run)
