"""The projector: folds the event stream into every projection, one message at a time.

This is the whole domain pipeline in one place, and the only one: the Faust agent and the
in-process replay both call `Projector.receive` with their own `StateTransaction`. In model
mode the shell first asks `Projector.questions` which judgements a message raises, has them
answered, and hands the answers to `receive` (`projections.judgements`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from projections import whereabouts, world
from projections.catalogue import Catalogue, StoredDeclarations, declared_by
from projections.changes import EventChanges, MessageChanges
from projections.chronicle import ask_summaries
from projections.chronicle_summaries import TokenCounter
from projections.delivery import MOST_RECORD_BYTES, Intake, SourceMessage, identity_of
from projections.dialogue import record_dialogue
from projections.divergence import diverging
from projections.event_log import record_event_at
from projections.intake import DEFAULT_MAX_EVENT_BYTES, receive
from projections.judgements import (
    WITHOUT_MODEL,
    AnswerSource,
    Judging,
    QuestionCollector,
    Questions,
    RecordedAnswers,
    judging,
)
from projections.knowing import held_at, holds_news_of, minute_held_at, news_passed_on
from projections.memories import (
    dated,
    form_memories,
    origin_at,
    told_nothing,
    unheard_words,
    unread_claims,
)
from projections.memory_store import (
    MemoryKeys,
    as_revised,
    ever_learned,
    forget_persistent_stored_at,
    load_memory,
    memory_keys,
    most_important_beliefs,
    record_origin,
    revise_confidence,
    store_memories,
    visible,
)
from projections.perception import perceivers
from projections.policy import PolicyLookup, default_policies
from projections.record_bounds import TooLarge, most_record_bytes
from projections.referee import HeldBelief, judge_line, rules_judge
from projections.reinforcement import record_recalls
from projections.relations import (
    feeling_toward,
    record_relations,
    sum_persistent_relations_without,
)
from projections.rumour_rules import crowd_note
from projections.rumour_spreading import spread
from projections.runtime_read import MAX_BELIEFS
from projections.scratch_state import ScratchState
from projections.sequencing import Applied
from projections.state import StateTransaction
from projections.story_clock import minute_of, record_story_time
from projections.timelines import Ancestry
from schemas import Event, Fact
from schemas.memory import Memory
from schemas.policy import Policy

FormationObserver = Callable[[Sequence[Memory], Sequence[Memory]], None]
"""Told of what each applied event formed: memories perceived or told, then rumours passed."""


def _unobserved(memories: Sequence[Memory], rumours: Sequence[Memory]) -> None:
    """No one counts what was formed (replays, tests)."""


class Projector:
    """Applies messages to projections through whatever state transaction it is given."""

    def __init__(
        self,
        policies: PolicyLookup = default_policies,
        max_event_bytes: int = DEFAULT_MAX_EVENT_BYTES,
        on_formed: FormationObserver = _unobserved,
        answers: AnswerSource = WITHOUT_MODEL,
        count: TokenCounter | None = None,
        changes: bool = False,
        record_bytes: int = MOST_RECORD_BYTES,
    ) -> None:
        self.policies = policies
        self.max_event_bytes = max_event_bytes
        self.record_bytes = record_bytes
        """The most one record the worker sends or stores may be (the shell's
        `RUMOURMILL_CHANGELOG_BATCH_BYTES`): an ack, and the outbox row that keeps a message's
        acks, list the refused judgements that fit in a share of it
        (`projections.delivery.with_refusals_bounded`)."""
        self.most_record_bytes = most_record_bytes(record_bytes)
        """The most one state record may take, key and value: an event that would write a larger
        one is refused whole (`projections.record_bounds`)."""
        self.on_formed = on_formed
        self.answers = answers
        """Model judgements (`projections.judgements`): none by default, so the rules make
        each one (the referee's verdicts, and in model mode feelings and retellings, which the
        acks then list as refused)."""
        self.count = count
        """Token counts for the chronicle's chapters, which the model summarises as they close
        when one is configured (the worker's, replays' and rebuilds' must agree with the
        reads': `streams.tokens`). None: no summary is ever asked."""
        self.changes = changes
        """Whether `receive` also says what each message changed (the change feed)."""

    def receive(
        self,
        tx: StateTransaction,
        message: SourceMessage,
        answers: AnswerSource | None = None,
        changes: bool | None = None,
    ) -> Intake:
        """Take one message in; returns the acks, dead letters (and changes) to publish.
        `answers` are the model judgements its events raise (`questions`), instead of the
        projector's own; `changes` says whether to tell the changes, where it differs from
        the projector's `changes` (a rebuild tells those of some messages only)."""
        telling = self.changes if changes is None else changes
        return self._take(tx, message, answers, telling, self.on_formed)

    def _take(
        self,
        tx: StateTransaction,
        message: SourceMessage,
        answers: AnswerSource | None,
        changes: bool,
        observer: FormationObserver,
    ) -> Intake:
        judged = self.answers if answers is None else answers

        def apply(
            tx: StateTransaction,
            event: Event,
            ancestry: Ancestry,
            changes: EventChanges | None = None,
        ) -> Applied:
            return self.apply(tx, event, ancestry, judged, changes, observer)

        noted = MessageChanges() if changes else None
        taking = apply if noted is None else noted.around(apply)
        return receive(
            tx, message, taking, self.policies, self.max_event_bytes, noted, self.record_bytes
        )

    def questions(
        self,
        tx: StateTransaction,
        message: SourceMessage,
        model_configured: bool,
        known: RecordedAnswers | None = None,
    ) -> Questions:
        """The model judgements taking `message` in would ask for, beyond those `known`
        answers: found by taking it into scratch state over `tx` (with `known`'s answers),
        which is then thrown away. None in rules mode unless a model is configured (the
        referee and the chronicle ask it then)."""
        identity = identity_of(message.value)
        tenant, world_id = identity["tenant_id"], identity["world_instance_id"]
        if tenant is None or world_id is None:
            return Questions([], waited=False)
        if self.policies(tenant, world_id).memory.weighing != "model" and not model_configured:
            return Questions([], waited=False)
        collector = QuestionCollector(model_configured=model_configured, known=known)
        self._take(ScratchState(tx), message, collector, changes=False, observer=_unobserved)
        return Questions(collector.questions, collector.waited)

    def apply(
        self,
        tx: StateTransaction,
        event: Event,
        ancestry: Ancestry,
        answers: AnswerSource | None = None,
        changes: EventChanges | None = None,
        observer: FormationObserver | None = None,
    ) -> Applied:
        """Apply one in-order event to every projection, reading state as it stood before;
        returns why something it asked for was not recorded, and the judgements refused.
        `changes` is told what it changes in minds (the change feed); `observer` (else
        `on_formed`) what it formed: a pass over scratch state, thrown away, tells no one."""
        policy = self.policies(event.tenant_id, event.world_instance_id)
        tenant, world_id = event.tenant_id, event.world_instance_id
        declarations = StoredDeclarations(tx, tenant, world_id, ancestry)
        catalogue = Catalogue(declarations, event, policy)
        source = self.answers if answers is None else answers
        present: set[str] | None = None
        if policy.memory.npc:
            present = (
                whereabouts.occupants_of(tx, tenant, world_id, ancestry, event.location)
                if event.location is not None
                else set()
            )
        growing = [
            *(
                declarations.declaration(entity, declared)
                for entity in event.entities
                if (declared := declared_by(event, entity)) is not None
            ),
            *whereabouts.movement(tx, event, ancestry, present),
        ]
        for value in growing:  # before any write: a refusal keeps none
            if (size := value.largest_record(event.seq)) > self.most_record_bytes:
                raise TooLarge(value.what, size, self.record_bytes)
        judged = judging(tx, event, policy.memory.weighing, source, catalogue.name_of)
        told_note = None
        if present is not None:  # the policy's `memory.npc`
            keys = memory_keys(tx, tenant, world_id)
            forget_persistent_stored_at(
                tx, keys, event.timeline_id, event.seq, sum_persistent_relations_without
            )
            minute = minute_of(tx, event, ancestry)  # memories are held, and dated, as of it
            now = minute_held_at(minute, policy)
            context = _StoredMinds(tx, keys, ancestry, catalogue, event, policy, judged, now)
            told_note = told_nothing(event, context)
            refereed = judge_line(
                event,
                form_memories(
                    event,
                    # a `told` that passes nothing is heard by nobody
                    perceivers(event, catalogue.kind_of, present, policy) if not told_note else [],
                    context,
                    policy,
                    judged,
                ),
                context,
                policy,
                judged.referee(rules_judge),
            )
            memories = refereed.memories
            rumours, forgotten = spread(
                tx, keys, ancestry, event, policy, catalogue, present, memories, now, judged
            )
            if event.game_time is None:
                memories, rumours = dated(memories, minute), dated(rumours, minute)
            formed = [*memories, *rumours]
            if changes is not None:
                changes.passing(rumours)
            spreading = policy.memory.spreading.enabled
            store_memories(tx, context.keys, memories, changes, rumours, spreading, forgotten)
            weakened = refereed.weakened
            revise_confidence(tx, context.keys, event.timeline_id, event.seq, weakened, changes)
            record_relations(tx, context.keys, ancestry, formed, changes)
            if self.count is not None and judged.summaries_due():
                chronicle = policy.memory.chronicle
                ask_summaries(
                    tx, ancestry, event, formed, chronicle, self.count, judged, catalogue.name_of
                )
            for origin in dict.fromkeys(memory.origin for memory in memories):
                record_origin(tx, context.keys, origin, event)
            (self.on_formed if observer is None else observer)(memories, rumours)
        note = record_dialogue(tx, event, ancestry, catalogue, policy.memory.dialogue)
        for value in growing:
            value.write(tx, event.seq)
        record_story_time(tx, event)
        record_event_at(tx, event)
        recall_note = record_recalls(tx, event, ancestry, policy)
        if policy.memory.world:
            world.record_facts(tx, event, ancestry)
        claims, crowd = unread_claims(event), crowd_note(event, policy)
        found_notes = (
            claims,
            told_note,
            unheard_words(event),
            crowd,
            note,
            recall_note,
            whereabouts.unmoved(event),
        )
        notes = [found for found in found_notes if found is not None]
        return Applied("; ".join(notes) if notes else None, tuple(judged.record(tx)))


DEEP_BELIEFS = 16 * MAX_BELIEFS
"""How deep among a character's most important beliefs the referee looks for those a line
touches (`_StoredMinds.held_beliefs`)."""


@dataclass(frozen=True, slots=True)
class _StoredMinds:
    """What memory formation looks up, answered from state as of just before the event."""

    tx: StateTransaction
    keys: MemoryKeys
    ancestry: Ancestry
    catalogue: Catalogue
    event: Event
    policy: Policy
    judged: Judging
    now: int | None
    """The story minute characters hold their memories at (`knowing.minute_held_at`), looked
    up once: an event without `game_time` asked the story's clock at every question."""

    def kind_of(self, entity_id: str) -> str:
        return self.catalogue.kind_of(entity_id)

    def name_of(self, entity_id: str) -> str:
        return self.catalogue.name_of(entity_id)

    def teller_belief(self, teller: str, belief_id: str) -> Memory | None:
        """The named memory as the teller holds it at the event (`knowing.held_at`): faded,
        retold and less sure; forgotten, none, as news it forgot and names none of. An
        impression as stored: naming one names the news it was formed beside."""
        memory = load_memory(self.tx, self.keys, teller, belief_id)
        if memory is None or not visible(memory, self.keys, self.ancestry):
            return None
        memory = as_revised(self.tx, self.keys, self.ancestry, memory)
        if memory.kind == "impression":
            return memory
        return held_at(self.tx, self.keys, self.ancestry, memory, self.now, self.policy)

    def knows(self, character: str, origin: str) -> bool:
        """Whether the character holds news of `origin` at the event (`projections.knowing`):
        what it never learned is one point read per scope."""
        if not ever_learned(self.tx, self.keys, self.ancestry, character, origin):
            return False
        return holds_news_of(
            self.tx, self.keys, self.ancestry, character, origin, self.now, self.policy
        )

    def teller_news(self, teller: str, origin: str) -> Memory | None:
        """The teller's memory of news `origin` it passes on (`knowing.news_passed_on`): news
        it never learned (a lie, its own words) is one point read per scope."""
        if not ever_learned(self.tx, self.keys, self.ancestry, teller, origin):
            return None
        return news_passed_on(
            self.tx, self.keys, self.ancestry, teller, origin, self.now, self.policy
        )

    def held_beliefs(self, character: str, touches: Callable[[Memory], bool]) -> list[HeldBelief]:
        """The beliefs the character holds at the event that `touches` picks, among its
        `DEEP_BELIEFS` most important, as held (faded: retold and less sure), each beside
        itself as stored: a forgotten memory is absent from decisions (section 8), and the
        referee's verdict is one (a belief forgotten for a year was judged, weakened and
        reported weakened). Those it picks, not the fifty most important held: sixty lines of
        small talk pushed a lie still held out of the referee's sight."""
        tenant, world_id = self.keys.tenant_id, self.keys.world_id
        beliefs: list[HeldBelief] = []
        found = most_important_beliefs(self.tx, self.keys, self.ancestry, character, DEEP_BELIEFS)
        for memory in filter(touches, found):
            held = held_at(self.tx, self.keys, self.ancestry, memory, self.now, self.policy)
            if held is None:
                continue
            if diverging(self.tx, tenant, world_id, self.ancestry, memory):
                wrong = {"diverging": True}
                memory, held = memory.model_copy(update=wrong), held.model_copy(update=wrong)
            beliefs.append(HeldBelief(stored=memory, held=held))
        return beliefs

    def feeling_toward(self, character: str, entity_id: str) -> float:
        return feeling_toward(self.tx, self.keys, self.ancestry, character, entity_id)

    def unchallenged(self, character: str, line_id: str, touched: Sequence[str]) -> None:
        self.judged.unchallenged(character, line_id, touched)

    def recorded(self, fact: Fact) -> Any:
        tenant, world_id = self.keys.tenant_id, self.keys.world_id
        return world.fact_value(
            self.tx, tenant, world_id, self.ancestry, fact.subject, fact.attribute
        )

    def fact_origin(self, fact: Fact) -> str | None:
        tenant, world_id = self.keys.tenant_id, self.keys.world_id
        made = world.made_by(self.tx, tenant, world_id, self.ancestry, fact)
        return None if made is None else origin_at(tenant, world_id, *made)
