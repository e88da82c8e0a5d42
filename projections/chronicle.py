"""The chronicle (seed 000, "Conversation compaction"): a character's story so far, in a size a
prompt can hold.

Per character and timeline, the records (the memories the timeline sees, in story order) each
make a digest: the record's words and story time. Digests roll into a chapter once their text
passes `short_term_tokens`; chapters condense into the condensed chapter (the older story, one
summary that each condensation folds the previous one into) once their text passes
`long_term_tokens`. A digest's or a summary's length is its text's token count, whole; the
digests' or the chapters' together, the sum of theirs (each is a part of the read). Tokens are
counted by whatever `TokenCounter` the caller hands in (the worker's counts with the embedder's
own tokenizer: `streams.tokens`), so this module needs no tokenizer of its own.

Computed at read, never stored. Seed 000 decides it: the chronicler builds its digests from the
records and "earlier summaries are never the authority when records exist", and here the
records always exist (they are never compacted away). So a summary is always made afresh from
the records behind it; nothing new is persisted that snapshot, branch and delete would have to
carry ("any new persisted feature must survive snapshot, restore, branch, archive, and
delete"); a timeline's chronicle is a function of its ancestry's records, so loading a save
forgets the chapters after it; and a replay gives the identical chronicle because it gives the
identical records (the state digest proves those). The cost is a walk over the character's
records at each read.

Records stay the authority: every part of the answer says whether it is a summary, and where
the records behind it are (a chapter's belief ids, the condensed chapter's positions). No other
read ever shows a summary in place of a record. As the runtime read, the chronicle shows what
the character holds, unfaded.

A summary is made by a `Summariser`: given passages (a record's statement, or what an earlier
summary kept), it keeps what matters within a token budget. The rules summariser, the default,
keeps the most important statements (the content as retold: the statement stays, the detail
goes). With a model configured, the model summarises each part as it closes: never at read, but
while the event that closes it is applied (`ask_summaries`), its answer recorded with that
event's judgements and looked up here (`projections.chronicle_summaries`); chapter bounds depend
on the records alone, so the read finds them. Each part says who summarised it.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from projections.catalogue import StoredDeclarations, naming
from projections.chronicle_summaries import (
    MODEL,
    RULES,
    AskedSummaries,
    Part,
    Passage,
    RecordedSummaries,
    Summaries,
    Summariser,
    TokenCounter,
    joined,
)
from projections.judgements import Judging
from projections.memory_store import held_in_order, memory_keys
from projections.runtime_read import NotFound, timeline_view
from projections.state import StateTransaction
from projections.timelines import Ancestry, Segment
from projections.wording import Names, names_in, retell
from schemas import Event
from schemas.memory import Memory
from schemas.policy import ChroniclePolicy


@dataclass(frozen=True, slots=True)
class Digest:
    """One record as the chronicle tells it, word for word: never a summary."""

    belief_id: str
    timeline_id: str
    seq: int
    game_time: str | None
    text: str
    tokens: int
    summary: bool = False


@dataclass(frozen=True, slots=True)
class Chapter:
    """A summary of consecutive records (`records` of them): those whose belief ids it lists,
    from one position to another."""

    text: str
    tokens: int
    from_seq: int
    to_seq: int
    records: int
    belief_ids: tuple[str, ...]
    summarised_by: str
    summary: bool = True


@dataclass(frozen=True, slots=True)
class Condensed:
    """The summary of every record from `from_seq` to `to_seq` (`records` of them, in
    `chapters` chapters) that no chapter or digest tells any more."""

    text: str
    tokens: int
    from_seq: int
    to_seq: int
    records: int
    chapters: int
    summarised_by: str
    summary: bool = True


@dataclass(frozen=True, slots=True)
class ChronicleRead:
    """`GET /v2/memory/runtime/npcs/{npc_id}/chronicle`: the condensed chapter, the chapters,
    then the newest records' digests; `tokens` is the length of all three."""

    world_instance_id: str
    timeline_id: str
    npc_id: str
    processed_seq: int
    summariser: str
    """Who summarises a part the model did not (each part says who summarised it)."""
    records: int
    tokens: int
    condensed: Condensed | None
    chapters: list[Chapter]
    digests: list[Digest]


@dataclass(frozen=True, slots=True)
class Rolled:
    """A chapter, or the condensed chapter, as the chronicle is told: the records behind it
    (their belief ids are kept for a chapter only), what its summary kept, and who made it."""

    part: Part
    passages: tuple[Passage, ...]
    summarised_by: str
    tokens: int
    """The length of its text, counted whole (not its passages' counts added up)."""
    belief_ids: tuple[str, ...] = ()
    chapters: int = 1

    @property
    def text(self) -> str:
        return joined(self.passages)


def _digest_text(memory: Memory) -> str:
    """A record's digest: its story time, then its words."""
    return f"{memory.game_time}: {memory.content}" if memory.game_time else memory.content


def _statement(memory: Memory, count: TokenCounter, names: Names) -> Passage:
    text = retell(memory.content, names_in(memory, names))
    return Passage(text=text, importance=memory.importance, seq=memory.seq, tokens=count(text))


Told = tuple[Memory, str, int]
"""A record no chapter tells yet: its digest's text and tokens."""


def chronicle_of(
    memories: Iterable[Memory],
    policy: ChroniclePolicy,
    count: TokenCounter,
    summaries: Summaries,
    names: Names,
    summariser: Summariser = RULES,
) -> tuple[Rolled | None, list[Rolled], list[Told]]:
    """The chronicle of records (of one character) in story order: the condensed chapter, the
    chapters, and the records no chapter tells yet. Each part is the model's summary where
    `summaries` has one, else the `summariser`'s; a statement keeps the `names` of what its
    record is about whole (`retell`)."""
    condensed: Rolled | None = None
    chapters: list[Rolled] = []
    pending: list[Told] = []
    pending_tokens = 0
    bounds: Counter[tuple[int, int, int]] = Counter()  # a chapter's first and last seq, records
    for memory in memories:
        text = _digest_text(memory)
        tokens = count(text)
        pending.append((memory, text, tokens))
        pending_tokens += tokens
        if pending_tokens <= policy.short_term_tokens:
            continue
        bound = (pending[0][0].seq, memory.seq, len(pending))
        part = Part("chapter", memory.character_id, memory.timeline_id, *bound, bounds[bound])
        bounds[bound] += 1
        statements = [_statement(held, count, names) for held, _, _ in pending]
        told = _summarised(part, statements, policy.chapter_tokens, count, summaries, summariser)
        belief_ids = tuple(held.belief_id for held, _, _ in pending)
        chapters.append(Rolled(part, *told, belief_ids))
        pending, pending_tokens = [], 0
        if sum(chapter.tokens for chapter in chapters) > policy.long_term_tokens:
            condensed = _condense(condensed, chapters, policy, count, summaries, summariser)
            chapters = []
    return condensed, chapters, pending


def _condense(
    condensed: Rolled | None,
    chapters: list[Rolled],
    policy: ChroniclePolicy,
    count: TokenCounter,
    summaries: Summaries,
    summariser: Summariser,
) -> Rolled:
    """The condensed chapter folded together with the chapters that came after it."""
    earlier = [] if condensed is None else [condensed]
    parts = [*earlier, *chapters]
    last = parts[-1].part
    part = Part(
        "condensed",
        last.npc_id,
        last.timeline_id,
        parts[0].part.from_seq,
        last.to_seq,
        sum(rolled.part.records for rolled in parts),
    )
    passages = [passage for rolled in parts for passage in rolled.passages]
    told = _summarised(part, passages, policy.condensed_tokens, count, summaries, summariser)
    return Rolled(part, *told, chapters=sum(rolled.chapters for rolled in parts))


def _summarised(
    part: Part,
    passages: Sequence[Passage],
    budget_tokens: int,
    count: TokenCounter,
    summaries: Summaries,
    summariser: Summariser,
) -> tuple[tuple[Passage, ...], str, int]:
    """What the summary of a part keeps, who made it, and the length of its text (counted
    whole: `Rolled.tokens`): the model, where it summarised the part (its summary one passage,
    as important as the most important it tells), else the `summariser`."""
    summary = summaries.summary(part, passages, budget_tokens)
    if summary is None:
        told = summariser.summarise(passages, budget_tokens, count)
        return told, summariser.name, count(joined(told))
    importance = max((passage.importance for passage in passages), default=0.0)
    tokens = count(summary)
    return (Passage(summary, importance, part.to_seq, tokens),), MODEL, tokens


def ask_summaries(
    tx: StateTransaction,
    ancestry: Ancestry,
    event: Event,
    formed: Sequence[Memory],
    policy: ChroniclePolicy,
    count: TokenCounter,
    judged: Judging,
    names: Names,
) -> None:
    """Ask the model (through `judged`, which records the answers with the event's judgements)
    to summarise each chapter, and the condensed chapter, that the records `event` formed
    close (once they are stored); called with a model configured only. `ancestry` is as it
    stood before the event: the chronicle is made as it reads once the event is applied, its
    `names` as the event declares them (its own declarations are written after it)."""
    keys = memory_keys(tx, event.tenant_id, event.world_instance_id)
    applied = (Segment(event.timeline_id, event.seq), *ancestry[1:])
    asked = AskedSummaries(
        RecordedSummaries(tx, keys.tenant_id, keys.world_id, applied, count),
        judged,
        event.timeline_id,
        event.seq,
        count,
    )
    for character in dict.fromkeys(memory.character_id for memory in formed):
        chronicle_of(held_in_order(tx, keys, applied, character), policy, count, asked, names)


def chronicle_read(
    tx: StateTransaction,
    tenant_id: str,
    world_id: str,
    timeline_id: str,
    npc_id: str,
    policy: ChroniclePolicy,
    count: TokenCounter,
    summariser: Summariser = RULES,
    as_of_seq: int | None = None,
) -> ChronicleRead:
    """The chronicle of a character on a timeline (as of a position); NotFound when they hold
    no record there."""
    record, keys, ancestry = timeline_view(tx, tenant_id, world_id, timeline_id, as_of_seq)
    memories = held_in_order(tx, keys, ancestry, npc_id)
    if not memories:
        raise NotFound(f"{npc_id!r} holds no memory on timeline {timeline_id!r}")
    recorded = RecordedSummaries(tx, tenant_id, world_id, ancestry, count)
    names = naming(StoredDeclarations(tx, tenant_id, world_id, ancestry))
    condensed, chapters, untold = chronicle_of(memories, policy, count, recorded, names, summariser)
    digests = [
        Digest(held.belief_id, held.timeline_id, held.seq, held.game_time, text, tokens)
        for held, text, tokens in untold
    ]
    told = [
        Chapter(
            chapter.text,
            chapter.tokens,
            chapter.part.from_seq,
            chapter.part.to_seq,
            chapter.part.records,
            chapter.belief_ids,
            chapter.summarised_by,
        )
        for chapter in chapters
    ]
    return ChronicleRead(
        world_instance_id=world_id,
        timeline_id=timeline_id,
        npc_id=npc_id,
        processed_seq=record.processed_seq,
        summariser=summariser.name,
        records=len(memories),
        tokens=(0 if condensed is None else condensed.tokens)
        + sum(chapter.tokens for chapter in told)
        + sum(digest.tokens for digest in digests),
        condensed=None
        if condensed is None
        else Condensed(
            condensed.text,
            condensed.tokens,
            condensed.part.from_seq,
            condensed.part.to_seq,
            records=condensed.part.records,
            chapters=condensed.chapters,
            summarised_by=condensed.summarised_by,
        ),
        chapters=told,
        digests=digests,
    )
