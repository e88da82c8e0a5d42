"""The projector: folds the event stream into every projection, one message at a time.

This is the whole domain pipeline in one place, and the only one: the Faust agent and the
in-process replay both call `Projector.receive` with their own `StateTransaction`.
"""

from __future__ import annotations

from projections import world
from projections.intake import DEFAULT_MAX_EVENT_BYTES, Intake, SourceMessage, receive
from projections.policy import PolicyLookup, default_policies
from projections.state import StateTransaction
from projections.timelines import Ancestry
from schemas import Event


class Projector:
    """Applies messages to projections through whatever state transaction it is given."""

    def __init__(
        self,
        policies: PolicyLookup = default_policies,
        max_event_bytes: int = DEFAULT_MAX_EVENT_BYTES,
    ) -> None:
        self.policies = policies
        self.max_event_bytes = max_event_bytes

    def receive(self, tx: StateTransaction, message: SourceMessage) -> Intake:
        """Take one message in; returns the acks and dead letters to publish."""
        return receive(tx, message, self.apply, self.policies, self.max_event_bytes)

    def apply(self, tx: StateTransaction, event: Event, ancestry: Ancestry) -> None:
        """Apply one in-order event to every projection."""
        world.record_facts(tx, event)
