"""The message and record models of rumourmill: the contract every other floor builds on."""

from schemas.events import MAX_SEQ, Branch, EntityDeclaration, Event, Fact, story_minutes
from schemas.outcomes import Ack, DeadLetter, Outcome

__all__ = [
    "MAX_SEQ",
    "Ack",
    "Branch",
    "DeadLetter",
    "EntityDeclaration",
    "Event",
    "Fact",
    "Outcome",
    "story_minutes",
]
