"""The referee (section 11): a player's line against what its listener is unsure of, or wrong
about.

When it runs: a `player-said` line to a character challenges a belief of that character (a
`knowledge` or `impression` memory among the 800 most important it holds, looked for among
them, not among the fifty a runtime read shows) that is `uncertain` or `diverging`:
- by claimed facts: the belief asserts a fact of the same subject and attribute, or
- by `about`: the belief is about an entity the line names (its payload `about`, the subjects
  of its claimed facts), the player and the listener aside (every line is about them);
- a belief the line confirms (every fact of it the line speaks of, the line claims alike) is
  not challenged.
Beliefs are weighed as the character holds them at the line (section 8: faded, retold and
less sure, confidence x retention; forgotten, not at all): the firmest challenged belief, so
held, is the one judged, once, while the event is processed.

The rules verdict (`rules_verdict`) weighs the line's pull: how loosely the belief is held
(1 - confidence), the listener's feeling toward the player (its relation, to 2 decimals, listed
in a read or not) x `trust_weight`, and `truth_weight` for claimed facts that agree with the
world record (taken off when any contradicts it). `memory.lies_believable: false` turns
`convinced` into `doubting` when the claim contradicts the record (`believable`), whoever
judged.

What a verdict does (`apply_verdict`): the line's memory keeps the verdict; `convinced`: believed
(not uncertain, its facts asserted), and every challenged belief held `weaken` times as firmly
(its stored confidence: fading goes on from there),
as a version at the line's position (`memory_store.revise_confidence`); `doubting`: kept
uncertain at `weaken` times the line's confidence; `unconvinced`: kept as said, confidence 0, the
old belief untouched.

Claimed facts about an entity nobody declared (and no id pattern classifies) are weighed as any
other: the world record may hold it, and a belief may be about it.

Everything here is plain data in, plain data out: a model's verdict can stand in for
`rules_verdict` (`Judge`), with the rules as its fallback.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any, Literal, Protocol

from projections.event_keys import PLAYER_SAID
from projections.numbers import decimal, hundredths
from projections.world import ABSENT, same_json
from schemas import Event, Fact
from schemas.memory import Memory, Verdict
from schemas.policy import Policy, RefereePolicy

Agreement = Literal["agrees", "contradicts", "unknown"]
"""How a line's claimed facts stand to the world record: all it speaks of agree, any
contradicts, or the record says nothing of them (or the line claims nothing)."""

JUDGED_KINDS = ("knowledge", "impression")
"""The kinds of memory a character holds to be so (the read's `beliefs`)."""


class RefereeContext(Protocol):
    """What the referee looks up, as the world stood just before the line."""

    def held_beliefs(self, character: str, touches: Callable[[Memory], bool]) -> list[HeldBelief]:
        """The beliefs the character holds that `touches` picks (most important first, but
        those it has forgotten at the line), each with `diverging` judged against the world
        record."""

    def feeling_toward(self, character: str, entity_id: str) -> float:
        """The character's feeling toward an entity, as its relation shows it (0 if none),
        the read's cap of 50 relations aside."""

    def recorded(self, fact: Fact) -> Any:
        """The world record's value of the fact's subject and attribute, or `ABSENT`."""

    def unchallenged(self, character: str, line_id: str, touched: Sequence[str]) -> None:
        """A line the character heard challenges nothing of what it speaks of (the `touched`
        beliefs, held): told so, judging may yet ask it (`Judging.unchallenged`)."""


@dataclass(frozen=True, slots=True)
class HeldBelief:
    """A belief as its character holds it at the line, and as stored."""

    stored: Memory
    """What a `convinced` verdict weakens: fading goes on from its confidence."""
    held: Memory
    """As held at the line (`projections.retention.as_held`): what a judge weighs."""


@dataclass(frozen=True, slots=True)
class Case:
    """One line before the referee: what any judge (rules or model) weighs."""

    character_id: str
    player_id: str
    line_id: str
    """The belief id of the line's memory (the one the verdict is kept with)."""
    words: str
    """The line's memory content: what was said."""
    claimed: tuple[Fact, ...]
    """The claimed facts the referee weighs: all the line claims."""
    belief: Memory
    """The firmest belief the line challenges, as held at the line: the one judged."""
    challenged: tuple[Memory, ...]
    """Every belief the line challenges, as stored (the judged one first): what `convinced`
    weakens."""
    feeling: float
    agreement: Agreement
    touched: tuple[str, ...] = ()
    """The belief ids of what the line speaks of that the listener holds (`touched_by`),
    challenged or not: what an earlier line's verdict may have changed."""


Judge = Callable[[Case, Policy], Verdict]
"""Gives a verdict on a case; `rules_judge` is the default and every other judge's fallback."""


@dataclass(frozen=True, slots=True)
class Judgement:
    """What the referee made of one event: the memories as they are to be stored, and the
    beliefs held less firmly (with their new confidence)."""

    memories: list[Memory]
    weakened: list[Memory]


def rules_verdict(
    confidence: float, feeling: float, agreement: Agreement, referee: RefereePolicy
) -> Verdict:
    """The rules verdict on a line challenging a belief held with `confidence`, said by a
    player the listener feels `feeling` toward."""
    truth = {"agrees": 1, "contradicts": -1, "unknown": 0}[agreement]
    pull = (
        Decimal(1)
        - decimal(confidence)
        + decimal(referee.trust_weight) * decimal(feeling)
        + decimal(referee.truth_weight) * truth
    )
    if pull >= decimal(referee.convinced_from):
        return "convinced"
    if pull >= decimal(referee.doubting_from):
        return "doubting"
    return "unconvinced"


def rules_judge(case: Case, policy: Policy) -> Verdict:
    """The rules verdict on a case (`rules_verdict` over its plain data)."""
    return rules_verdict(
        case.belief.confidence, case.feeling, case.agreement, policy.memory.referee
    )


def believable(verdict: Verdict, agreement: Agreement, lies_believable: bool) -> Verdict:
    """The verdict as the policy lets it stand: a believed lie is doubted unless lies are
    believable."""
    if verdict == "convinced" and agreement == "contradicts" and not lies_believable:
        return "doubting"
    return verdict


def agreement_of(claimed: Sequence[Fact], recorded: Sequence[Any]) -> Agreement:
    """How claimed facts stand to the record's values of them (`ABSENT` where it has none)."""
    said = [
        same_json(value, fact.value)
        for fact, value in zip(claimed, recorded, strict=True)
        if value is not ABSENT
    ]
    if not all(said):
        return "contradicts"
    return "agrees" if said else "unknown"


def challenged_beliefs(
    beliefs: Sequence[HeldBelief], claimed: Sequence[Fact], named: Sequence[str]
) -> list[HeldBelief]:
    """The uncertain or diverging beliefs a line claiming `claimed`, naming `named`, challenges,
    firmest as held first (then newest, then by id)."""
    said = {(fact.subject, fact.attribute): fact.value for fact in claimed}
    touches = touched_by(claimed, named)
    challenged = []
    for belief in beliefs:
        held = belief.held
        if held.kind not in JUDGED_KINDS or not (held.uncertain or held.diverging):
            continue
        spoken_of = [fact for fact in held.facts if (fact.subject, fact.attribute) in said]
        if spoken_of and all(
            same_json(fact.value, said[(fact.subject, fact.attribute)]) for fact in spoken_of
        ):
            continue  # confirmed, not challenged
        if touches(held):
            challenged.append(belief)
    return sorted(
        challenged,
        key=lambda belief: (-belief.held.confidence, -belief.held.seq, belief.held.belief_id),
    )


def touched_by(claimed: Sequence[Fact], named: Collection[str]) -> Callable[[Memory], bool]:
    """Whether a line claiming `claimed`, naming `named`, speaks of a belief: a fact of the
    same subject and attribute, or an entity it is about, whatever the belief is held as (what
    the referee looks for, and of which `challenged_beliefs` keeps the unsure ones)."""
    said = {(fact.subject, fact.attribute) for fact in claimed}
    spoken_of = set(named)

    def touches(belief: Memory) -> bool:
        return not spoken_of.isdisjoint(belief.about) or any(
            (fact.subject, fact.attribute) in said for fact in belief.facts
        )

    return touches


def referee_case(event: Event, line: Memory, context: RefereeContext) -> Case | None:
    """The case the line's memory `line` puts to the referee; None when it challenges nothing
    (or is not a player's line to the character who holds it)."""
    player, listener = event.actor, event.target
    if not is_line(event, line) or player is None or listener is None:
        return None
    claimed = list(line.facts)  # of any entity: one never declared may be in the record
    named = [
        entity
        for entity in (*line.about, *(fact.subject for fact in claimed))
        if entity not in (player, listener)
    ]
    if not named and not claimed:
        return None  # most lines: nothing to challenge, no lookups
    held = context.held_beliefs(listener, touched_by(claimed, named))
    touched = tuple(belief.stored.belief_id for belief in held)
    challenged = challenged_beliefs(held, claimed, named)
    if not challenged:
        context.unchallenged(listener, line.belief_id, touched)
        return None
    return Case(
        character_id=listener,
        player_id=player,
        line_id=line.belief_id,
        words=line.content,
        claimed=tuple(claimed),
        belief=challenged[0].held,
        challenged=tuple(belief.stored for belief in challenged),
        feeling=context.feeling_toward(listener, player),
        agreement=agreement_of(claimed, [context.recorded(fact) for fact in claimed]),
        touched=touched,
    )


def apply_verdict(line: Memory, case: Case, verdict: Verdict, policy: Policy) -> Judgement:
    """The line's memory as the verdict leaves it, and the beliefs it weakens."""
    weaken = decimal(policy.memory.referee.weaken)
    weakened: list[Memory] = []
    if verdict == "convinced":
        kept = line.model_copy(update={"verdict": verdict, "uncertain": False})
        weakened = [
            belief.model_copy(
                update={"confidence": hundredths(decimal(belief.confidence) * weaken)}
            )
            for belief in case.challenged
        ]
    elif verdict == "doubting":
        confidence = hundredths(decimal(line.confidence) * weaken)
        kept = line.model_copy(update={"verdict": verdict, "confidence": confidence})
    else:
        kept = line.model_copy(update={"verdict": verdict, "confidence": 0.0})
    return Judgement([kept], weakened)


def judge_line(
    event: Event,
    memories: list[Memory],
    context: RefereeContext,
    policy: Policy,
    judge: Judge = rules_judge,
) -> Judgement:
    """The memories an event formed as the referee leaves them (unchanged unless the event is
    a player's line challenging a belief of its listener), with what it weakened."""
    if event.key != PLAYER_SAID:
        return Judgement(memories, [])
    kept: list[Memory] = []
    weakened: list[Memory] = []
    for memory in memories:
        case = referee_case(event, memory, context)
        if case is None:
            kept.append(memory)
            continue
        verdict = believable(judge(case, policy), case.agreement, policy.memory.lies_believable)
        judged = apply_verdict(memory, case, verdict, policy)
        kept += judged.memories
        weakened += judged.weakened
    return Judgement(kept, weakened)


def is_line(event: Event, memory: Memory) -> bool:
    """Whether `memory` is what a player's line left its listener (the referee's subject)."""
    return (
        event.key == PLAYER_SAID
        and event.actor is not None
        and memory.kind == "knowledge"
        and memory.character_id == event.target
    )
