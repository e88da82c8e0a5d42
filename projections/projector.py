"""The projector: folds the event stream into every projection, one message at a time.

This is the whole domain pipeline in one place, and the only one: the Faust agent and the
in-process replay both call `Projector.receive` with their own `StateTransaction`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from projections import whereabouts, world
from projections.catalogue import Catalogue, StoredDeclarations
from projections.changes import ChangeWatch
from projections.delivery import Intake, SourceMessage
from projections.dialogue import record_dialogue
from projections.divergence import diverging
from projections.event_log import record_event_at
from projections.intake import DEFAULT_MAX_EVENT_BYTES, receive
from projections.memories import form_memories, origin_at
from projections.memory_store import (
    MemoryKeys,
    as_revised,
    knows,
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
from projections.referee import Judge, judge_line, rules_judge
from projections.reinforcement import record_recalls
from projections.relations import feeling_toward, record_relations
from projections.rumour_spreading import spread
from projections.runtime_read import MAX_BELIEFS
from projections.state import StateTransaction
from projections.story_clock import record_story_time
from projections.timelines import Ancestry
from schemas import Event, Fact
from schemas.memory import Memory

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
        judge: Judge = rules_judge,
        changes: bool = False,
    ) -> None:
        self.policies = policies
        self.max_event_bytes = max_event_bytes
        self.on_formed = on_formed
        self.judge = judge
        """Gives the referee's verdicts (`projections.referee`); the rules by default."""
        self.changes = changes
        """Whether `receive` also says what each message changed (the change feed)."""

    def receive(self, tx: StateTransaction, message: SourceMessage) -> Intake:
        """Take one message in; returns the acks, dead letters (and changes) to publish."""
        if not self.changes:
            return receive(tx, message, self.apply, self.policies, self.max_event_bytes)
        watch = ChangeWatch(tx)
        return receive(
            watch,
            message,
            watch.around(self.apply),
            self.policies,
            self.max_event_bytes,
            watch.noted,
        )

    def apply(self, tx: StateTransaction, event: Event, ancestry: Ancestry) -> str | None:
        """Apply one in-order event to every projection, reading state as it stood before;
        returns why something it asked for was not recorded."""
        policy = self.policies(event.tenant_id, event.world_instance_id)
        tenant, world_id = event.tenant_id, event.world_instance_id
        declarations = StoredDeclarations(tx, tenant, world_id, ancestry)
        catalogue = Catalogue(declarations, event, policy)
        judged_note = None
        if policy.memory.npc:
            present = (
                whereabouts.occupants_of(tx, tenant, world_id, ancestry, event.location)
                if event.location is not None
                else set()
            )
            context = _StoredMinds(tx, memory_keys(tx, tenant, world_id), ancestry, catalogue)
            judged = judge_line(
                event,
                form_memories(
                    event, perceivers(event, catalogue.kind_of, present, policy), context, policy
                ),
                context,
                policy,
                self.judge,
            )
            memories, judged_note = judged.memories, judged.note
            rumours = spread(tx, context.keys, ancestry, event, policy, catalogue, present)
            formed = [*memories, *rumours]
            store_memories(tx, context.keys, formed)
            revise_confidence(tx, context.keys, event.timeline_id, event.seq, judged.weakened)
            record_relations(tx, context.keys, ancestry, formed)
            for origin in dict.fromkeys(memory.origin for memory in memories):
                record_origin(tx, context.keys, origin, event)
            self.on_formed(memories, rumours)
        note = record_dialogue(tx, event, ancestry, catalogue, policy.memory.dialogue)
        for entity_id, declaration in event.entities.items():
            declarations.declare(entity_id, declaration, event.seq)
        whereabouts.record_movement(tx, event, ancestry)
        record_story_time(tx, event)
        record_event_at(tx, event)
        record_recalls(tx, event, ancestry)
        if policy.memory.world:
            world.record_facts(tx, event)
        notes = [found for found in (judged_note, note) if found is not None]
        return "; ".join(notes) if notes else None


@dataclass(frozen=True, slots=True)
class _StoredMinds:
    """What memory formation looks up, answered from state as of just before the event."""

    tx: StateTransaction
    keys: MemoryKeys
    ancestry: Ancestry
    catalogue: Catalogue

    def kind_of(self, entity_id: str) -> str:
        return self.catalogue.kind_of(entity_id)

    def name_of(self, entity_id: str) -> str:
        return self.catalogue.name_of(entity_id)

    def teller_belief(self, teller: str, belief_id: str) -> Memory | None:
        memory = load_memory(self.tx, self.keys, teller, belief_id)
        if memory is None or not visible(memory, self.ancestry):
            return None
        return as_revised(self.tx, self.keys, self.ancestry, memory)

    def knows(self, character: str, origin: str) -> bool:
        return knows(self.tx, self.keys, self.ancestry, character, origin)

    def held_beliefs(self, character: str) -> list[Memory]:
        held = most_important_beliefs(self.tx, self.keys, self.ancestry, character, MAX_BELIEFS)
        tenant, world_id = self.keys.tenant_id, self.keys.world_id
        return [
            memory.model_copy(update={"diverging": True})
            if diverging(self.tx, tenant, world_id, self.ancestry, memory)
            else memory
            for memory in held
        ]

    def feeling_toward(self, character: str, entity_id: str) -> float:
        return feeling_toward(self.tx, self.keys, self.ancestry, character, entity_id)

    def recorded(self, fact: Fact) -> Any:
        tenant, world_id = self.keys.tenant_id, self.keys.world_id
        return world.fact_value(
            self.tx, tenant, world_id, self.ancestry, fact.subject, fact.attribute
        )

    def fact_origin(self, fact: Fact) -> str | None:
        tenant, world_id = self.keys.tenant_id, self.keys.world_id
        made = world.made_by(self.tx, tenant, world_id, self.ancestry, fact)
        return None if made is None else origin_at(tenant, world_id, *made)
