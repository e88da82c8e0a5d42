"""The chronicle (seed 000, "Conversation compaction"): a character's story so far, in a size a
prompt can hold.

Per character and timeline, the records (the memories the timeline sees, in story order) each
make a digest: the record's words and story time. Digests roll into a chapter once their text
passes `short_term_tokens`; chapters condense into the condensed chapter (the older story, one
summary that each condensation folds the previous one into) once their text passes
`long_term_tokens`. A text's length is the sum of its parts' token counts, by whatever
`TokenCounter` the caller hands in (the worker's counts with the embedder's own tokenizer:
`streams.tokens`), so this module needs no tokenizer of its own.

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
goes). A model summariser (section 12) must not be called at read: its summaries would be
judgements recorded while the stream is processed, keyed by the records a chapter covers
(chapter bounds depend on the records alone), and looked up here.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Protocol

from projections.memory_store import held_in_order
from projections.runtime_read import NotFound, timeline_view
from projections.state import StateTransaction
from projections.wording import retell
from schemas.memory import Memory
from schemas.policy import ChroniclePolicy

TokenCounter = Callable[[str], int]
"""How many tokens a text is."""


@dataclass(frozen=True, slots=True)
class Passage:
    """One statement a summary may keep: its words, how much it matters, where in the story."""

    text: str
    importance: float
    seq: int
    tokens: int


class Summariser(Protocol):
    """Makes summaries: what matters of some passages, within a token budget."""

    @property
    def name(self) -> str:
        """Who made the summaries (shown in the answer)."""

    def summarise(self, passages: Sequence[Passage], budget_tokens: int) -> tuple[Passage, ...]:
        """What a summary of `passages` (in story order) keeps, at most `budget_tokens` long,
        in story order."""


class RulesSummariser:
    """The most important statements (then the newest) that fit the budget, each once, in story
    order."""

    @property
    def name(self) -> str:
        return "rules"

    def summarise(self, passages: Sequence[Passage], budget_tokens: int) -> tuple[Passage, ...]:
        kept: dict[str, Passage] = {}
        used = 0
        for passage in sorted(passages, key=lambda p: (-p.importance, -p.seq)):
            if passage.text not in kept and used + passage.tokens <= budget_tokens:
                kept[passage.text] = passage
                used += passage.tokens
        return tuple(sorted(kept.values(), key=lambda p: p.seq))


RULES = RulesSummariser()


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
    records: int
    tokens: int
    condensed: Condensed | None
    chapters: list[Chapter]
    digests: list[Digest]


@dataclass(frozen=True, slots=True)
class Rolled:
    """A chapter, or the condensed chapter, as the chronicle is told: what its summary kept,
    and the records behind it (their belief ids are kept for a chapter only)."""

    passages: tuple[Passage, ...]
    from_seq: int
    to_seq: int
    records: int
    belief_ids: tuple[str, ...] = ()
    chapters: int = 1

    @property
    def tokens(self) -> int:
        return sum(passage.tokens for passage in self.passages)

    @property
    def text(self) -> str:
        return "\n".join(passage.text for passage in self.passages)


def _digest_text(memory: Memory) -> str:
    """A record's digest: its story time, then its words."""
    return f"{memory.game_time}: {memory.content}" if memory.game_time else memory.content


def _statement(memory: Memory, count: TokenCounter) -> Passage:
    text = retell(memory.content)
    return Passage(text=text, importance=memory.importance, seq=memory.seq, tokens=count(text))


def chronicle_of(
    memories: Iterable[Memory],
    policy: ChroniclePolicy,
    count: TokenCounter,
    summariser: Summariser = RULES,
) -> tuple[Rolled | None, list[Rolled], list[Digest]]:
    """The chronicle of records in story order: the condensed chapter, the chapters, and the
    digests of the records no chapter tells yet."""
    condensed: Rolled | None = None
    chapters: list[Rolled] = []
    pending: list[tuple[Memory, str, int]] = []
    pending_tokens = 0
    for memory in memories:
        text = _digest_text(memory)
        tokens = count(text)
        pending.append((memory, text, tokens))
        pending_tokens += tokens
        if pending_tokens <= policy.short_term_tokens:
            continue
        statements = [_statement(held, count) for held, _, _ in pending]
        chapters.append(
            Rolled(
                summariser.summarise(statements, policy.chapter_tokens),
                from_seq=pending[0][0].seq,
                to_seq=memory.seq,
                records=len(pending),
                belief_ids=tuple(held.belief_id for held, _, _ in pending),
            )
        )
        pending, pending_tokens = [], 0
        if sum(chapter.tokens for chapter in chapters) > policy.long_term_tokens:
            condensed = _condense(condensed, chapters, policy, summariser)
            chapters = []
    digests = [
        Digest(held.belief_id, held.timeline_id, held.seq, held.game_time, text, tokens)
        for held, text, tokens in pending
    ]
    return condensed, chapters, digests


def _condense(
    condensed: Rolled | None,
    chapters: list[Rolled],
    policy: ChroniclePolicy,
    summariser: Summariser,
) -> Rolled:
    """The condensed chapter folded together with the chapters that came after it."""
    earlier = [] if condensed is None else [condensed]
    parts = [*earlier, *chapters]
    passages = [passage for part in parts for passage in part.passages]
    return Rolled(
        summariser.summarise(passages, policy.condensed_tokens),
        from_seq=parts[0].from_seq,
        to_seq=parts[-1].to_seq,
        records=sum(part.records for part in parts),
        chapters=sum(part.chapters for part in parts),
    )


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
    condensed, chapters, digests = chronicle_of(memories, policy, count, summariser)
    told = [
        Chapter(
            chapter.text,
            chapter.tokens,
            chapter.from_seq,
            chapter.to_seq,
            chapter.records,
            chapter.belief_ids,
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
            condensed.from_seq,
            condensed.to_seq,
            records=condensed.records,
            chapters=condensed.chapters,
        ),
        chapters=told,
        digests=digests,
    )
