"""Model judgements as the projections see them: plain answers, asked for first, and the rules
whenever there is none.

In model mode (`memory.weighing: "model"`) an event raises questions: each memory it forms asks
how the character feels about it (`feeling`: feeling and arousal; the rest stays rules), and
each rumour it spreads asks how the listener retells it (`retelling`: the words, a detail of
which may shift, blur or grow, with the listener's feeling and arousal). With a model
configured, in either mode, the referee asks for its `verdict`, and a chronicle chapter the
event's records close asks for its `summary` (`projections.chronicle_summaries`). A question is
known by its position, character, belief (or chapter) and kind, all deterministic, so the same
stream raises the same questions. A position names the world's life too (its `incarnation`): a
world deleted and begun anew has its positions again, and its own answers at them.

The projections never call a model. They take an `AnswerSource`: plain data answering each
question, or saying why it cannot (the reason). The shell learns which questions an event
raises by applying it to scratch state with a `QuestionCollector`, asks the model, then applies
it for real with the answers. Every judgement made, answered or not, is recorded with the state
it produced (the `judgement` key space, in the digest) and returned for the ack; a replay given
the same records (`RecordedAnswers`) forms the same state without asking anything.

An event's judgements are kept in records of at most `MOST_PART_BYTES` (`judgement_parts`), in
the state and on the judgements topic alike, each under a key of its own: an event perceived by
thousands of characters raises a judgement each, megabytes in all, and a record that large is
one no producer sends, so the worker stopped on it, and again at every restart.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple, Protocol, cast

import orjson
from pydantic import ValidationError

from projections.deletion import incarnation
from projections.delivery import bounded_reason, in_parts
from projections.key_prefixes import JUDGEMENTS
from projections.keys import pack, unpack
from projections.numbers import decimal, hundredths
from projections.referee import Case, Judge
from projections.state import StateTransaction
from projections.wording import Names, named_on_one_line, quoted
from schemas import Event
from schemas.events import Fact
from schemas.judgements import (
    ANSWER_TYPES,
    Answer,
    AnswerType,
    EventJudgements,
    FeelingAnswer,
    JudgementKind,
    RecordedJudgement,
    RefusedJudgement,
    RetellingAnswer,
    SummaryAnswer,
    VerdictAnswer,
)
from schemas.memory import Memory, Verdict
from schemas.policy import Policy

Position = tuple[str, str, str, int, str]
"""(tenant, world, timeline, seq, incarnation): where an event stands, and its judgements with
it (`projections.deletion.incarnation`: empty in a world never deleted)."""
QuestionKey = tuple[str, str, JudgementKind]
"""(character, belief, kind): one question among an event's."""

Unfit = Callable[[str], str | None]
"""Why an answer's text cannot stand (too long, say), or None when it can."""

NO_MODEL = "no model is configured"
NOT_RECORDED = "no answer was recorded for it"

MOST_PART_BYTES = 14_000
"""The most one record of an event's judgements holds, unless a single judgement is larger (only
a chapter's summary can be): with its key (1,600 bytes at most) and Kafka's overheads, a part
fits the smallest record batch the state changelog may be given (16 KiB,
`RUMOURMILL_CHANGELOG_BATCH_BYTES`), and any message the judgements topic takes. A constant, not
a setting: where the parts fall is state, in the digest, so a rebuild must agree on it."""

FEELING_INSTRUCTIONS = (
    "You judge how a character in a game feels about one of their memories. Answer with one "
    'JSON object and nothing else: {"feeling": a number from -1 (hostile, hurt) to 1 (warm, '
    'glad), "arousal": a number from 0 (calm) to 1 (stirred up)}.'
)
RETELLING_INSTRUCTIONS = (
    "You retell a rumour the way a character in a game heard it from another. Keep what it "
    "says; a detail may shift, blur or grow, as gossip does. Answer with one JSON object and "
    'nothing else: {"content": the rumour as the listener now tells it, one sentence, '
    '"feeling": how the listener feels about it, from -1 to 1, "arousal": how it stirs them, '
    "from 0 to 1}."
)
VERDICT_INSTRUCTIONS = (
    "You referee a conversation in a game: a player tells a character something that touches "
    "a belief the character is unsure of, or wrong about. Judge whether the character is now "
    "convinced (believes the player), doubting (unsure) or unconvinced (does not believe it). "
    'Answer with one JSON object and nothing else: {"verdict": "convinced" | "doubting" | '
    '"unconvinced"}.'
)
SUMMARY_INSTRUCTIONS = (
    "You keep the chronicle of a character in a game: the story so far, in a size a prompt can "
    "hold. Summarise what they remember, oldest first, keeping what matters most to them and "
    "inventing nothing. Answer with one JSON object and nothing else: "
    '{"summary": the summary, within the length you are given}.'
)
INSTRUCTIONS: dict[JudgementKind, str] = {
    "feeling": FEELING_INSTRUCTIONS,
    "retelling": RETELLING_INSTRUCTIONS,
    "verdict": VERDICT_INSTRUCTIONS,
    "summary": SUMMARY_INSTRUCTIONS,
}
AGREEMENT_WORDS = {
    "agrees": "what the player claims agrees with what truly happened",
    "contradicts": "what the player claims is false",
    "unknown": "nobody knows whether what the player claims is true",
}


@dataclass(frozen=True, slots=True)
class Question:
    """One judgement asked of the model, with what it is told (`prompt`) beyond its
    instructions (`INSTRUCTIONS[judgement]`)."""

    position: Position
    npc_id: str
    belief_id: str
    judgement: JudgementKind
    prompt: str
    speaks_of: tuple[QuestionKey, ...] = ()
    """What else its answer is awaited as, while it is asked: a verdict, as what its line
    speaks of (`spoken_of`), which a later line of the message speaking of it waits for."""

    @property
    def key(self) -> QuestionKey:
        return (self.npc_id, self.belief_id, self.judgement)

    @property
    def instructions(self) -> str:
        return INSTRUCTIONS[self.judgement]

    @property
    def answer_type(self) -> AnswerType:
        return ANSWER_TYPES[self.judgement]


class AnswerSource(Protocol):
    """Answers to an event's questions, as plain data."""

    @property
    def model_configured(self) -> bool:
        """Whether a model stands behind the answers: the referee then asks in either
        weighing mode (without one, its rules verdicts are no fallback to report)."""

    def answer(self, question: Question) -> Answer | str:
        """The model's answer to `question`, or why there is none (the rules answer then)."""

    def summaries_at(self, position: Position) -> bool:
        """Whether the event at `position` may have chronicle summaries to answer: only then
        does applying it walk its characters' records for the chapters it closes."""

    def recorded_parts(self, position: Position) -> int:
        """How many records hold the answers recorded for `position` (on the judgements topic):
        the state keeps the event's judgements in as many at least (`ModelJudging.record`)."""

    def waits(
        self, question: QuestionKey, made_of: Iterable[Awaited], at: Position | None = None
    ) -> bool:
        """Whether `question` must wait for the answers it is made of (`made_of`): one of them
        is awaited (noted in the scratch pass that finds them, the rules' words standing in for
        it), and so is `question` then, to be asked in a later round. Given the position of the
        event asking (`at`), only what an event applied before it awaits counts: what the event
        itself asked is no part of it."""


@dataclass(frozen=True, slots=True)
class Unanswered:
    """Answers nothing, for one reason (no model configured)."""

    reason: str = NO_MODEL
    model_configured: bool = False

    def answer(self, question: Question) -> str:
        return self.reason

    def waits(
        self, question: QuestionKey, made_of: Iterable[Awaited], at: Position | None = None
    ) -> bool:
        return False

    def summaries_at(self, position: Position) -> bool:
        return False  # without a model the rules summarise, at read

    def recorded_parts(self, position: Position) -> int:
        return 0


WITHOUT_MODEL = Unanswered()
"""Where no model answers: each judgement is the rules', and each is reported refused."""


Awaited = tuple[str, str | None, JudgementKind]
"""A question, or (a belief None) any question of that judgement of that character's: what
another is made of. A retelling is made of the model's retelling of what its teller heard (in
a message filling a gap, the teller may have heard it at an event the message applies too:
asked at once, the listener's retelling quoted the rules' words, which the teller never
held); a chronicle part of its character's (`projections.chronicle_summaries.MADE_OF`)."""


def spoken_of(case: Case) -> list[QuestionKey]:
    """What the verdict on a line is awaited as: each belief of the listener's the line speaks
    of (`Case.touched`), which the verdict may weaken, so that a later line speaking of one of
    them, by whatever entity or claim, waits for it (`verdict_made_of`). The line's own memory
    is its question's key."""
    return [(case.character_id, belief, "verdict") for belief in case.touched]


def verdict_made_of(case: Case) -> list[Awaited]:
    """What the referee's question of a line is made of, at the events before it in a message
    filling a gap: the verdicts on the listener's lines that spoke of a belief it speaks of (a
    belief weakened or held; an earlier line's own memory, believed or not), the listener's
    retellings (news as the model retold it: its words, and its feeling, which moves the
    listener's feeling toward the player) and feelings (toward the player). Asked at once, the
    line was judged against the belief as the rules' stand-in for an earlier line's verdict left
    it, a state that never was: the listener believed a lie only because the lines came out of
    order. A line speaking of nothing an earlier one spoke of is asked with it."""
    listener = case.character_id
    return [*spoken_of(case), (listener, None, "retelling"), (listener, None, "feeling")]


@dataclass(slots=True)
class QuestionCollector:
    """Notes every question asked that `known` does not answer, and answers those it does: the
    scratch pass that finds them (answers may raise more: a chapter closes on a rumour's words
    as the model retold them, the condensed chapter on a chapter's summary). What it noted
    is awaited: a question made of an awaited answer waits for it (`waits`)."""

    questions: list[Question] = field(default_factory=list)
    model_configured: bool = True
    known: RecordedAnswers | None = None
    waited: bool = False
    """Whether a question waited for answers it is made of (`waits`): asked in a later round."""
    _awaited: dict[Awaited, set[Position | None]] = field(default_factory=dict)
    """Each question noted or waiting, as (character, belief, judgement) and (character, None,
    judgement): where it was (None: not said)."""

    def answer(self, question: Question) -> Answer | str:
        if self.known is not None and self.known.holds(question):
            return self.known.answer(question)
        self.questions.append(question)
        for awaited in (question.key, *question.speaks_of):
            self._await(awaited, question.position)
        return "not asked yet"

    def waits(
        self, question: QuestionKey, made_of: Iterable[Awaited], at: Position | None = None
    ) -> bool:
        if not any(self._awaited_before(made, at) for made in made_of):
            return False
        self._await(question, at)  # what is made of it waits in turn (news told on and on)
        self.waited = True
        return True

    def _awaited_before(self, made: Awaited, at: Position | None) -> bool:
        """Whether `made` is awaited: at an event other than `at` (the one asking), if given."""
        where = self._awaited.get(made)
        return where is not None and (at is None or bool(where - {at}))

    def _await(self, question: QuestionKey, at: Position | None) -> None:
        npc_id, _, judgement = question
        for awaited in (question, (npc_id, None, judgement)):
            self._awaited.setdefault(awaited, set()).add(at)

    def summaries_at(self, position: Position) -> bool:
        return self.model_configured  # the scratch pass is where they are found

    def recorded_parts(self, position: Position) -> int:
        return 0  # what the scratch pass stores is thrown away


class RecordedAnswers:
    """Answers as recorded (by the shell, after asking the model; or by an earlier run): the
    records of each position, every part of them; of a part given twice (the topic before
    compaction), the later answers stand."""

    def __init__(
        self,
        records: Iterable[EventJudgements],
        missing: str = NOT_RECORDED,
        model_configured: bool = True,
    ) -> None:
        self._made: dict[Position, dict[QuestionKey, RecordedJudgement]] = {}
        self._parts: dict[Position, int] = {}
        for record in records:
            position = position_of(record)
            self._made.setdefault(position, {}).update(
                ((made.npc_id, made.belief_id, made.judgement), made) for made in record.judgements
            )
            self._parts[position] = max(self._parts.get(position, 0), record.part + 1)
        self._missing = missing
        self._model_configured = model_configured

    @property
    def model_configured(self) -> bool:
        """Whether a model answered these (or was asked and could not); not when a worker
        without one recorded the rules' refusals of model mode."""
        return self._model_configured

    def summaries_at(self, position: Position) -> bool:
        """Only where one was recorded: a part the scratch pass did not see closing is the
        rules' (and the walk over the records is spared to every other event)."""
        made = self._made.get(position, {})
        return self._model_configured and any(kind == "summary" for _, _, kind in made)

    def recorded_parts(self, position: Position) -> int:
        return self._parts.get(position, 0)

    def waits(
        self, question: QuestionKey, made_of: Iterable[Awaited], at: Position | None = None
    ) -> bool:
        return False  # what was not recorded is the rules' for good

    @property
    def positions(self) -> list[Position]:
        """The positions it holds answers for."""
        return list(self._made)

    def holds(self, question: Question) -> bool:
        """Whether a judgement was recorded for `question` (answered or not)."""
        return question.key in self._made.get(question.position, {})

    def answer(self, question: Question) -> Answer | str:
        made = self._made.get(question.position, {}).get(question.key)
        if made is None:
            return self._missing
        if made.answer is None:
            return made.reason or self._missing
        try:
            return question.answer_type.model_validate(made.answer)
        except ValidationError:
            return self._missing  # recorded by a release that asked for another shape


class Questions(NamedTuple):
    """What a scratch pass found to ask of the model (`Projector.questions`)."""

    asked: list[Question]
    waited: bool
    """Whether some question waited for answers it is made of: the next pass asks it."""


def position_of(record: EventJudgements) -> Position:
    return (
        record.tenant_id,
        record.world_instance_id,
        record.timeline_id,
        record.seq,
        record.incarnation,
    )


def event_position(tx: StateTransaction, event: Event) -> Position:
    """Where `event` stands, in the world's life as the state has it."""
    tenant, world = event.tenant_id, event.world_instance_id
    return (tenant, world, event.timeline_id, event.seq, incarnation(tx, tenant, world))


def answered(question: Question, outcome: Answer | str) -> RecordedJudgement:
    """How a question was judged, as recorded: the answer, or why the rules made it."""
    if isinstance(outcome, str):
        return RecordedJudgement(
            npc_id=question.npc_id,
            belief_id=question.belief_id,
            judgement=question.judgement,
            reason=outcome,
        )
    return RecordedJudgement(
        npc_id=question.npc_id,
        belief_id=question.belief_id,
        judgement=question.judgement,
        answer=outcome.model_dump(mode="json"),
    )


def event_judgements(
    position: Position, made: Iterable[RecordedJudgement], part: int = 0
) -> EventJudgements:
    tenant, world, timeline, seq, life = position
    return EventJudgements(
        tenant_id=tenant,
        world_instance_id=world,
        timeline_id=timeline,
        seq=seq,
        incarnation=life,
        judgements=list(made),
        part=part,
    )


PART_FIELD_BYTES = len(b',"part":') + 20
"""What a part's number adds to its record, at most (20 digits): the same for every part, so
where a part ends depends on the judgements alone."""


def judgement_parts(
    position: Position, made: Sequence[RecordedJudgement], at_least: int = 1
) -> list[EventJudgements]:
    """The records that keep an event's judgements `made`, in order: each at most
    `MOST_PART_BYTES` (one judgement at least), then empty ones up to `at_least` records. The
    same judgements make the same parts, and more judgements after them leave the parts before
    the last as they were (a record stored again as the event's questions are answered)."""
    empty = len(event_judgements(position, []).to_bytes()) + PART_FIELD_BYTES
    parts = in_parts(made, _stored_bytes, MOST_PART_BYTES - empty)
    parts += [[] for _ in range(len(parts), at_least)]
    return [event_judgements(position, part, index) for index, part in enumerate(parts)]


def _stored_bytes(judgement: RecordedJudgement) -> int:
    """What a judgement adds to the record of its part: its JSON, and a comma."""
    return len(orjson.dumps(judgement.model_dump(mode="json"))) + 1


class Judging(Protocol):
    """What memory formation and rumour spreading ask about what they form."""

    def feeling(self, memory: Memory) -> Memory:
        """`memory` with the feeling and arousal judged for it."""

    def retelling(self, rumour: Memory, told: Memory, teller: str, words: str) -> Memory:
        """`rumour` (the rules' retelling of `told` by `teller`, in the `words` the rules pass
        it on in, before any distortion) as judged for its listener."""

    def referee(self, rules: Judge) -> Judge:
        """The referee's judge: the model's verdict, the `rules` judge its fallback."""

    def unchallenged(self, character: str, line_id: str, touched: Sequence[str]) -> None:
        """A player's line to `character` challenged none of the `touched` beliefs it speaks of:
        in a message filling a gap, while a verdict on an earlier line speaking of one of them
        is awaited (the rules' stand-in for it may be why), the line waits, to be looked at
        again in a later round, and what it speaks of waits in turn (a later line speaking of
        its memory was asked of it unjudged)."""

    def summary(self, npc_id: str, chapter: str, told: str, unfit: Unfit) -> str | None:
        """The model's summary of a chronicle `chapter` of `npc_id`'s (what it covers: `told`),
        or None: the rules summarise it then. `unfit` says why an answer cannot stand. Asked
        only where the answers may hold summaries (`summaries_due`)."""

    def waits(self, question: QuestionKey, made_of: Iterable[Awaited]) -> bool:
        """Whether `question` waits for the model's answers it is made of (`made_of`), awaited
        at the event: the rules' answer stands in for it until they are in, and it is asked
        then (`AnswerSource.waits`)."""

    def summaries_due(self) -> bool:
        """Whether the answers may hold chronicle summaries for the event
        (`AnswerSource.summaries_at` its position): only then does applying it walk its
        characters' records for the chapters it closes."""

    def record(self, tx: StateTransaction) -> list[RefusedJudgement]:
        """Store the event's judgements with its state; returns those the rules made."""


class RulesJudging:
    """Rules mode: the rules' answers stand as they are."""

    def feeling(self, memory: Memory) -> Memory:
        return memory

    def retelling(self, rumour: Memory, told: Memory, teller: str, words: str) -> Memory:
        return rumour

    def referee(self, rules: Judge) -> Judge:
        return rules

    def unchallenged(self, character: str, line_id: str, touched: Sequence[str]) -> None:
        return None

    def summary(self, npc_id: str, chapter: str, told: str, unfit: Unfit) -> None:
        return None

    def waits(self, question: QuestionKey, made_of: Iterable[Awaited]) -> bool:
        return False

    def summaries_due(self) -> bool:
        return False  # no model stands behind the answers: the rules summarise, at read

    def record(self, tx: StateTransaction) -> list[RefusedJudgement]:
        return []  # nothing was judged: the rules are the policy, not a fallback


RULES = RulesJudging()


class ModelJudging:
    """The model's judgements for one event: each asks the answer source first and keeps the
    rules' answer when it has none; `record` keeps every judgement made with the state.

    Feelings and retellings are the model's in model mode only (`weighs`); verdicts whenever a
    model is configured.
    """

    def __init__(
        self, position: Position, answers: AnswerSource, names: Names, weighs: bool
    ) -> None:
        self._position = position
        self._answers = answers
        self._names = names
        self._weighs = weighs
        self._made: list[RecordedJudgement] = []

    def _named(self, entity: str) -> str:
        return named_on_one_line(self._names, entity)

    def feeling(self, memory: Memory) -> Memory:
        said = f"Memory ({memory.kind}, {_LEARNED[memory.source]}): {quoted(memory.content)}"
        return self._weighed(
            memory, "feeling", f"Character: {self._named(memory.character_id)}\n{said}"
        )

    def retelling(self, rumour: Memory, told: Memory, teller: str, words: str) -> Memory:
        """The model is told the teller's memory in the words it was taken in (a player's line
        in the player's name: bare, the teller said it) and the rules' plain retelling, not
        their distortion: the model's words are the retelling then, and claim the teller's
        facts (the rules' grown number stayed beside words that kept it as it was)."""
        made_of: list[Awaited] = [(teller, told.belief_id, "retelling")]  # as retold to them
        if self._weighs and self._answers.waits(
            (rumour.character_id, rumour.belief_id, "retelling"), made_of
        ):
            return rumour  # asked once the teller's words are in
        listener = self._named(rumour.character_id)
        content = quoted(told.content)
        if told.source == "player" and told.source_entity is not None:
            content = f"{self._named(told.source_entity)} said: {content}"
        telling = f"{self._named(teller)} tells {listener}: {content}"
        question = f"{telling}\nRetold plainly: {quoted(words)}"
        return self._weighed(rumour, "retelling", question, told.facts)

    def _weighed(
        self, memory: Memory, judgement: JudgementKind, told: str, facts: list[Fact] | None = None
    ) -> Memory:
        """`memory` as the model judged it (feeling and arousal, and a retelling's words, which
        claim `facts`) in model mode, or as the rules made it (outside model mode, or without
        an answer)."""
        if not self._weighs:
            return memory
        prompt = f"{told}\nBy the rules: feeling {memory.feeling}, arousal {memory.arousal}."
        outcome = self._ask(memory.character_id, memory.belief_id, judgement, prompt)
        if isinstance(outcome, RetellingAnswer):
            retold = {"content": outcome.content, "facts": memory.facts if facts is None else facts}
            return memory.model_copy(update=retold | _weights(outcome))
        if isinstance(outcome, FeelingAnswer):
            return memory.model_copy(update=_weights(outcome))
        return memory

    def referee(self, rules: Judge) -> Judge:
        if not self._answers.model_configured:
            return rules  # without a model the rules referee is the norm, not a fallback

        def judge(case: Case, policy: Policy) -> Verdict:
            asked: QuestionKey = (case.character_id, case.line_id, "verdict")
            if self._line_waits(asked, verdict_made_of(case), spoken_of(case)):
                return rules(case, policy)  # asked once what the line is judged against is in
            listener, player = self._named(case.character_id), self._named(case.player_id)
            prompt = (
                f"{listener} believes ({_held(case.belief)}): {quoted(case.belief.content)}\n"
                f"{player} says to {listener}: {quoted(case.words)}\n"
                f"Truly: {AGREEMENT_WORDS[case.agreement]}.\n"
                f"How {listener} feels toward {player}, from -1 to 1: {case.feeling}."
            )
            outcome = self._ask(*asked, prompt, speaks_of=tuple(spoken_of(case)))
            return outcome.verdict if isinstance(outcome, VerdictAnswer) else rules(case, policy)

        return judge

    def unchallenged(self, character: str, line_id: str, touched: Sequence[str]) -> None:
        if self._answers.model_configured:
            spoken: list[QuestionKey] = [(character, belief, "verdict") for belief in touched]
            self._line_waits((character, line_id, "verdict"), spoken, spoken)

    def _line_waits(
        self, line: QuestionKey, made_of: Sequence[Awaited], spoken: Sequence[QuestionKey]
    ) -> bool:
        """Whether the verdict on a line waits for what an earlier event of the message awaits
        (`made_of`); waiting, what the line speaks of (`spoken`) waits in turn, for a later line
        speaking of it."""
        if not self._answers.waits(line, made_of, self._position):
            return False
        for belief in spoken:
            self._answers.waits(belief, [line])
        return True

    def summary(self, npc_id: str, chapter: str, told: str, unfit: Unfit) -> str | None:
        prompt = f"Character: {self._named(npc_id)}\n{told}"
        outcome = self._ask(
            npc_id,
            chapter,
            "summary",
            prompt,
            lambda answer: unfit(answer.summary) if isinstance(answer, SummaryAnswer) else None,
        )
        return outcome.summary if isinstance(outcome, SummaryAnswer) else None

    def _ask(
        self,
        npc_id: str,
        belief_id: str,
        judgement: JudgementKind,
        prompt: str,
        unfit: Callable[[Answer], str | None] = lambda answer: None,
        speaks_of: tuple[QuestionKey, ...] = (),
    ) -> Answer | str:
        """The answer to a question (or why there is none: also when it is `unfit`)."""
        question = Question(self._position, npc_id, belief_id, judgement, prompt, speaks_of)
        outcome = self._answers.answer(question)
        if not isinstance(outcome, str):
            outcome = unfit(outcome) or outcome
        self._made.append(answered(question, outcome))
        return outcome

    def waits(self, question: QuestionKey, made_of: Iterable[Awaited]) -> bool:
        return self._answers.waits(question, made_of)

    def summaries_due(self) -> bool:
        return self._answers.summaries_at(self._position)

    def record(self, tx: StateTransaction) -> list[RefusedJudgement]:
        """Store the event's judgements under its position, in parts, as many at least as the
        judgements topic holds for it (its answers may take more room than the judgements made
        of them: a summary over its budget is kept as the reason it was not used): a deletion
        tombstones there the keys the state holds, every part. Returns those the rules made."""
        if not self._made:
            return []
        recorded = self._answers.recorded_parts(self._position)
        for part in judgement_parts(self._position, self._made, recorded):
            tx.put(judgement_key(self._position, part.part), part.to_bytes())
        return [
            RefusedJudgement(
                npc_id=made.npc_id,
                belief_id=made.belief_id,
                judgement=made.judgement,
                reason=bounded_reason(made.reason or NOT_RECORDED),
            )
            for made in self._made
            if made.answer is None
        ]


def _weights(answer: FeelingAnswer | RetellingAnswer) -> dict[str, float]:
    """The feeling and arousal an answer gives, in hundredths as the rules' are."""
    return {
        "feeling": hundredths(decimal(answer.feeling)),
        "arousal": hundredths(decimal(answer.arousal)),
    }


def judgement_key(position: Position, part: int = 0) -> bytes:
    """Where a part of a position's judgements is kept: the first, of a world never deleted, as
    a release before incarnations kept them; the first of another, as one before parts did."""
    tenant, world, timeline, seq, life = position
    if part:
        return pack(JUDGEMENTS, tenant, world, timeline, seq, life, part)
    if not life:
        return pack(JUDGEMENTS, tenant, world, timeline, seq)
    return pack(JUDGEMENTS, tenant, world, timeline, seq, life)


def record_key(record: EventJudgements) -> bytes:
    """The key `record` is kept under (in the state and on the judgements topic)."""
    return judgement_key(position_of(record), record.part)


def position_of_key(key: bytes) -> Position:
    """The position a `judgement_key` names (of any part)."""
    _, tenant, world, timeline, seq, *life_and_part = unpack(key)
    life = str(life_and_part[0]) if life_and_part else ""
    return str(tenant), str(world), str(timeline), int(seq), life


def stored_parts(tx: StateTransaction, position: Position) -> Iterator[bytes]:
    """The stored records of a position's judgements, part by part."""
    part = 0
    while (stored := tx.get(judgement_key(position, part))) is not None:
        yield stored
        part += 1


def recorded_answer(
    tx: StateTransaction, position: Position, key: QuestionKey
) -> dict[str, Any] | None:
    """The answer recorded for a question at a position, if the model gave one. A world begun
    anew before state format 4 holds its answers under keys that do not name its life: a
    deletion removed the deleted life's, so those are this life's."""
    if position[4] and tx.get(judgement_key(position)) is None:
        position = (*position[:4], "")
    for stored in stored_parts(tx, position):
        for made in EventJudgements.from_bytes(stored).judgements:  # as stored: plain dicts
            found = cast(dict[str, Any], made)
            if (found["npc_id"], found["belief_id"], found["judgement"]) == key:
                answer: dict[str, Any] | None = found.get("answer")
                return answer
    return None


def judging(
    tx: StateTransaction, event: Event, weighing: str, answers: AnswerSource, names: Names
) -> Judging:
    """How `event`'s judgements are made: by the rules alone, unless the policy's
    `memory.weighing` is `model` or a model stands behind the answers (the referee's then)."""
    weighs = weighing == "model"
    if not weighs and not answers.model_configured:
        return RULES
    return ModelJudging(event_position(tx, event), answers, names, weighs)


def _held(belief: Memory) -> str:
    """How firmly a belief is held, in words the referee can weigh."""
    wrong = ", and it is not what truly happened" if belief.diverging else ""
    return f"{_LEARNED[belief.source]}, confidence {belief.confidence}{wrong}"


_LEARNED: Mapping[str, str] = {
    "seen": "seen with their own eyes",
    "told": "told by another character",  # who may have seen it, heard it, or lied
    "rumour": "heard as a rumour",
    "player": "said by a player",
}
