"""Who summarises the chronicle's chapters: the rules by default, the model when one is
configured (section 14, with the judgements of section 12).

A chapter, or the condensed chapter, is known by the records behind it (`Part`): whose they
are, the first and last positions and how many, all from the records alone. The chapter closes
at the event that formed its last record; with a model configured that event asks the model for
its summary (`AskedSummaries`, over the event's `Judging`), and the answer is recorded with the
event's judgements, under the event's position, like every judgement: a replay or a rebuild
answers it from the record and never calls the model again. The chronicle, computed at read,
looks each part's summary up there (`RecordedSummaries`) and makes the rules' summary where
none was recorded (no model, a refusal, a malformed or over-long answer, or a part whose records
changed since). Either way it is a summary, and says whose; the records behind it stay the
authority.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Literal, Protocol

from pydantic import ValidationError

from projections.deletion import incarnation
from projections.judgements import Judging, recorded_answer
from projections.state import StateTransaction
from projections.timelines import Ancestry, sees
from projections.wording import one_line
from schemas.judgements import JudgementKind, SummaryAnswer

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

    def summarise(
        self, passages: Sequence[Passage], budget_tokens: int, count: TokenCounter
    ) -> tuple[Passage, ...]:
        """What a summary of `passages` (in story order) keeps, in story order: its text
        (`joined`) at most `budget_tokens` long, as `count` counts."""


class RulesSummariser:
    """The most important statement first, then the next most important (then the newest) that
    fit the budget, each once, in story order. When the most important does not fit, its
    opening words that do, cut with an ellipsis, take its place: a part is never summarised
    without it, nor as nothing."""

    @property
    def name(self) -> str:
        return "rules"

    def summarise(
        self, passages: Sequence[Passage], budget_tokens: int, count: TokenCounter
    ) -> tuple[Passage, ...]:
        ranked = sorted(passages, key=lambda p: (-p.importance, -p.seq))
        if not ranked:
            return ()
        first: Passage | None = ranked[0]
        if ranked[0].tokens > budget_tokens:
            first = _opening(ranked[0], budget_tokens, count)
        if first is None:
            return ()
        kept = {first.text: first}
        used = first.tokens
        for passage in ranked[1:]:
            if passage.text not in kept and used + passage.tokens <= budget_tokens:
                kept[passage.text] = passage
                used += passage.tokens
        # the parts' counts add up to less than their text joined (a line break is a token, and
        # a word after one can split otherwise): the least important go until the text, in
        # story order as it is told, fits
        added = list(kept.values())
        while len(added) > 1 and count(joined(_in_story_order(added))) > budget_tokens:
            added.pop()
        return _in_story_order(added)


def _in_story_order(passages: Iterable[Passage]) -> tuple[Passage, ...]:
    return tuple(sorted(passages, key=lambda passage: passage.seq))


def joined(passages: Iterable[Passage]) -> str:
    """The text of a summary: its passages, a line each."""
    return "\n".join(passage.text for passage in passages)


CUT = " …"
"""Ends a statement cut to fit a budget."""


def _opening(passage: Passage, budget_tokens: int, count: TokenCounter) -> Passage | None:
    """The most words of `passage` from its start that fit `budget_tokens` with `CUT` after
    them; the most characters when not one word does (a language written without spaces);
    None when not one character does."""
    text = _longest_start(passage.text.split(), " ", budget_tokens, count)
    if text is None:
        text = _longest_start(list(passage.text.strip()), "", budget_tokens, count)
    if text is None:
        return None
    return Passage(text, passage.importance, passage.seq, count(text))


def _longest_start(
    units: Sequence[str], joiner: str, budget_tokens: int, count: TokenCounter
) -> str | None:
    """The longest start of `units`, joined, that fits `budget_tokens` with `CUT` after it
    (found by halving: counting tokens is the cost); None when not one unit does."""
    fits, over = 0, len(units)
    while over - fits > 1:
        middle = (fits + over) // 2
        if count(joiner.join(units[:middle]) + CUT) <= budget_tokens:
            fits = middle
        else:
            over = middle
    return None if fits == 0 else joiner.join(units[:fits]).rstrip() + CUT


RULES = RulesSummariser()
MODEL = "model"
"""Who made a summary the model made (`summarised_by`)."""


PartKind = Literal["chapter", "condensed"]


@dataclass(frozen=True, slots=True)
class Part:
    """A chapter or the condensed chapter, by the records behind it: whose they are, how many,
    and the positions of the first and the last (where the event that closed it stands)."""

    kind: PartKind
    npc_id: str
    timeline_id: str
    from_seq: int
    to_seq: int
    records: int
    alike_before: int = 0
    """How many parts of the same bounds and size closed before it: an event whose records
    are many closes two chapters of its records alone, of as many records each."""

    @property
    def name(self) -> str:
        """How its summary is known among the judgements of the event that closed it: a name
        two of its parts shared got one answer for both (the last asked), the other's records
        summarised by the model in the one's name."""
        name = f"{self.kind} {self.from_seq}-{self.to_seq} ({self.records} records)"
        return f"{name} #{self.alike_before + 1}" if self.alike_before else name


class Summaries(Protocol):
    """The model's summaries of a chronicle's parts."""

    def summary(self, part: Part, passages: Sequence[Passage], budget_tokens: int) -> str | None:
        """The model's summary of `part` (what the rules would summarise: `passages`, in story
        order), or None: the rules summarise it then."""


@dataclass(frozen=True, slots=True)
class RecordedSummaries:
    """The summaries the model made as the parts closed, as recorded in a world's state, for
    a timeline of `ancestry`: a part's summary is taken only where the timeline holds the
    event that closed it (its own, or an ancestor's before the branch point). Elsewhere its
    last record is a persistent memory of another timeline, and the records before it are
    this timeline's, not those the model summarised: a chapter on `main` showed the summary
    made on a branch, naming what only the branch's characters had heard. A summary longer
    than the part's budget now (`memory.chronicle`'s budgets made smaller since) is the
    rules' too: it was within the budget it was asked for."""

    tx: StateTransaction
    tenant_id: str
    world_id: str
    ancestry: Ancestry
    count: TokenCounter

    def summary(self, part: Part, passages: Sequence[Passage], budget_tokens: int) -> str | None:
        if not sees(self.ancestry, part.timeline_id, part.to_seq):
            return None
        life = incarnation(self.tx, self.tenant_id, self.world_id)
        position = (self.tenant_id, self.world_id, part.timeline_id, part.to_seq, life)
        answer = recorded_answer(self.tx, position, (part.npc_id, part.name, "summary"))
        if answer is None:
            return None
        try:
            summary = SummaryAnswer.model_validate(answer).summary
        except ValidationError:
            return None  # recorded by a release that asked for another shape
        return summary if self.count(summary) <= budget_tokens else None


MADE_OF: dict[PartKind, frozenset[JudgementKind]] = {
    "chapter": frozenset({"feeling", "retelling"}),
    "condensed": frozenset({"feeling", "retelling", "summary"}),
}
"""The model's answers a part's words are made of, by its kind: a chapter's records are worded
by the feelings (an impression's words) and retellings (a rumour's), the condensed chapter's
by those and its chapters' summaries. A part is asked once the answers it is made of are in:
asked at once, it was summarised from the rules' words, which the chronicle never shows (and
a chapter the model's words closed elsewhere was never asked)."""
LEADING = frozenset[JudgementKind]().union(*MADE_OF.values())
"""The judgements whose answers may raise more questions of the same event: the words of an
impression the model's feeling gives, or of a rumour as the model retold it, may close a
chronicle chapter, and a chapter's summary grow the condensed one."""


@dataclass(frozen=True, slots=True)
class AskedSummaries:
    """The summaries while an event is applied: the parts it closes are asked of the model
    (through the event's judging, which records the answers); earlier ones were recorded."""

    recorded: RecordedSummaries
    judged: Judging
    timeline_id: str
    seq: int
    count: TokenCounter

    def summary(self, part: Part, passages: Sequence[Passage], budget_tokens: int) -> str | None:
        if (part.timeline_id, part.to_seq) != (self.timeline_id, self.seq):
            return self.recorded.summary(part, passages, budget_tokens)
        made_of = [(part.npc_id, None, judgement) for judgement in MADE_OF[part.kind]]
        if self.judged.waits((part.npc_id, part.name, "summary"), made_of):
            return None  # the rules' words stand in: asked once the model's are in
        said = "\n".join(f"- {one_line(passage.text)}" for passage in passages)
        told = (
            f"What they remember ({part.records} records, positions {part.from_seq} to "
            f"{part.to_seq}), oldest first:\n{said}\n"
            f"The summary must be at most {budget_tokens} tokens long."
        )

        def unfit(text: str) -> str | None:
            tokens = self.count(text)
            if tokens <= budget_tokens:
                return None
            return f"over budget: {tokens} tokens, the {part.kind}'s budget is {budget_tokens}"

        return self.judged.summary(part.npc_id, part.name, told, unfit)
