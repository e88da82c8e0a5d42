"""The world record: what really happened, as the game reports it in `facts`.

The world part is never shown to a character and never returned by a read. It follows the
timeline: a child sees the parent's record up to the branch point. Beliefs are compared with
it to tell whether they are `diverging`.
"""

from __future__ import annotations

from typing import Any

import orjson

from projections.key_prefixes import FACTS
from projections.keys import pack
from projections.state import StateTransaction
from projections.timelines import Ancestry
from projections.versions import read_through
from schemas import Event

ABSENT: Any = object()
"""Marks a fact the world record has never set."""


def record_facts(tx: StateTransaction, event: Event) -> None:
    """Write each fact of `event` as a new version at the event's position."""
    for fact in event.facts:
        scope = pack(
            FACTS,
            event.tenant_id,
            event.world_instance_id,
            event.timeline_id,
            fact.subject,
            fact.attribute,
        )
        tx.put(scope + pack(event.seq), orjson.dumps(fact.value))


def fact_value(
    tx: StateTransaction,
    tenant_id: str,
    world_id: str,
    ancestry: Ancestry,
    subject: str,
    attribute: str,
) -> Any:
    """The recorded value of `subject.attribute` on a timeline, or `ABSENT` if never set."""
    raw = read_through(
        tx,
        ancestry,
        lambda timeline_id: pack(FACTS, tenant_id, world_id, timeline_id, subject, attribute),
    )
    return ABSENT if raw is None else orjson.loads(raw)
