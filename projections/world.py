"""The world record: what really happened, as the game reports it in `facts`.

The world part is never shown to a character and never returned by a read. It follows the
timeline: a child sees the parent's record up to the branch point. Beliefs are compared with
it to tell whether they are `diverging`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import orjson

from projections.key_prefixes import FACTS
from projections.keys import pack, pack_scope
from projections.state import StateTransaction
from projections.timelines import Ancestry
from projections.versions import read_through, version_through
from schemas import Event, Fact

ABSENT: Any = object()
"""Marks a fact the world record has never set."""


def record_facts(tx: StateTransaction, event: Event) -> None:
    """Write each fact of `event` as a new version at the event's position."""
    tenant, world, timeline = event.tenant_id, event.world_instance_id, event.timeline_id
    for fact in event.facts:
        scope = pack_scope(FACTS, tenant, world, timeline, fact.subject, fact.attribute)
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
    raw = read_through(tx, ancestry, _versions(tenant_id, world_id, subject, attribute))
    return ABSENT if raw is None else orjson.loads(raw)


def made_by(
    tx: StateTransaction, tenant_id: str, world_id: str, ancestry: Ancestry, fact: Fact
) -> tuple[str, int] | None:
    """The position (timeline, seq) of the event that made the record hold `fact` as it stands
    on a timeline; None if the record holds another value, or none."""
    found = version_through(
        tx, ancestry, _versions(tenant_id, world_id, fact.subject, fact.attribute)
    )
    if found is None:
        return None
    segment, seq, raw = found
    return (segment.timeline_id, seq) if same_json(orjson.loads(raw), fact.value) else None


def canonical_json(value: object) -> object:
    """`value` as `same_json` tells values apart: a whole number written as a float is its int
    (`1.0` is `1`), at every depth; what no 64-bit int holds stays as it is."""
    if isinstance(value, float) and value.is_integer() and abs(value) < 2**63:
        return int(value)
    if isinstance(value, list):
        return [canonical_json(item) for item in value]
    if isinstance(value, dict):
        return {key: canonical_json(item) for key, item in value.items()}
    return value


def same_json(one: object, other: object) -> bool:
    """Equal as JSON values: `true` is not `1`, `1` is `1.0`, and key order does not matter."""
    if isinstance(one, bool) or isinstance(other, bool):
        return type(one) is type(other) and one == other
    if isinstance(one, int | float) and isinstance(other, int | float):
        return one == other
    if isinstance(one, list) and isinstance(other, list):
        return len(one) == len(other) and all(map(same_json, one, other))
    if isinstance(one, dict) and isinstance(other, dict):
        return one.keys() == other.keys() and all(same_json(one[k], other[k]) for k in one)
    return type(one) is type(other) and one == other


def _versions(
    tenant_id: str, world_id: str, subject: str, attribute: str
) -> Callable[[str], bytes]:
    """The scope of a fact's versions on each timeline."""
    return lambda timeline: pack_scope(FACTS, tenant_id, world_id, timeline, subject, attribute)
