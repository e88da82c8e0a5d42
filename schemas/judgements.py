"""Model judgements: the answers a model is asked for, and how each judgement is recorded.

A model's answer is JSON validated by these models, strictly: anything else (prose, a field
missing or out of range, a field not asked for) is a refusal and the rules answer instead. Each
judgement an event raised is recorded with the state it produced, and on the judgements topic,
so a replay or a rebuild answers it the same way without asking again.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

import orjson
from pydantic import AfterValidator, Field, StringConstraints
from pydantic_core import PydanticCustomError

from schemas.events import Contract, Identifier, Seq
from schemas.memory import Feeling, Share, Verdict
from schemas.records import Record
from schemas.text import visible

JudgementKind = Literal["feeling", "retelling", "verdict", "summary"]
"""What a model judges: how a memory feels and stirs (`feeling`), how a rumour is retold, the
referee's verdict on a player's line (`verdict`), and a chronicle chapter's `summary`."""

RETOLD_CHARACTERS = 1000
"""A retold rumour's words are at most this long."""
SUMMARY_CHARACTERS = 20_000
"""A chapter's summary is at most this long (its token budget is checked as well)."""


class FeelingAnswer(Contract):
    """How a character feels about what they remember (-1 to 1) and how it stirs them (0 to 1)."""

    feeling: Feeling
    arousal: Share


def _said(text: str) -> str:
    if not visible(text):
        raise PydanticCustomError("blank", "shows nothing (white space, zero-width or control)")
    return text


SAID = AfterValidator(_said)
"""Words a model gives: a blank answer is none."""


class RetellingAnswer(Contract):
    """A rumour as its listener took it in: the words (a detail may shift, blur or grow), and
    how the listener feels about it."""

    content: Annotated[str, StringConstraints(max_length=RETOLD_CHARACTERS), SAID]
    feeling: Feeling
    arousal: Share


class VerdictAnswer(Contract):
    """The referee's verdict: is the character convinced by the player's line?"""

    verdict: Verdict


class SummaryAnswer(Contract):
    """A chapter of a character's chronicle (or the condensed chapter) in a few words."""

    summary: Annotated[str, StringConstraints(max_length=SUMMARY_CHARACTERS), SAID]


Phrase = Annotated[str, StringConstraints(max_length=200)]


class RelationsAnswer(Contract):
    """The relations a reply introduces that its character was not given ("her brother")."""

    relations: Annotated[
        list[Annotated[str, StringConstraints(max_length=200)]], Field(max_length=50)
    ]


Answer = FeelingAnswer | RetellingAnswer | VerdictAnswer | SummaryAnswer
AnswerType = type[FeelingAnswer] | type[RetellingAnswer] | type[VerdictAnswer] | type[SummaryAnswer]

ANSWER_TYPES: dict[JudgementKind, AnswerType] = {
    "feeling": FeelingAnswer,
    "retelling": RetellingAnswer,
    "verdict": VerdictAnswer,
    "summary": SummaryAnswer,
}
"""The answer each kind of judgement asks the model for."""


class RefusedJudgement(Contract):
    """A judgement the model did not make: the rules made it instead, for this reason."""

    npc_id: Identifier
    belief_id: str
    judgement: JudgementKind
    reason: str


class RecordedJudgement(Record):
    """One judgement as it was made: the model's answer, or why the rules made it."""

    npc_id: str
    belief_id: str
    judgement: JudgementKind
    answer: dict[str, Any] | None = None
    reason: str | None = None


class EventJudgements(Record):
    """The judgements one event raised, kept under the event's position (in the state and on
    the compacted judgements topic): all of them, or one part of them (`part`)."""

    tenant_id: Identifier
    world_instance_id: Identifier
    timeline_id: Identifier
    seq: Seq
    judgements: list[RecordedJudgement] = Field(default_factory=list)
    incarnation: str = ""
    """Which life of the world (`projections.deletion.incarnation`): empty until it, or its
    tenant, is deleted; a world begun anew at the same positions has another."""
    part: Annotated[int, Field(ge=0)] = 0
    """Which record of the event's judgements this is: an event perceived by thousands of
    characters raises a judgement each, megabytes in all, kept in records of a bounded size
    (`projections.judgements.judgement_parts`), each under a key of its own. The first is 0."""

    def to_bytes(self) -> bytes:
        """The stored form; without `incarnation` in a world never deleted and without `part`
        in the first record (as a release before either stored it)."""
        unset = {
            name
            for name, first in (("incarnation", ""), ("part", 0))
            if getattr(self, name) == first
        }
        return orjson.dumps(self.model_dump(mode="json", exclude=unset or None))
