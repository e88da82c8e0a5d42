"""The world record: what really happened, as the game reports it in `facts`.

The world part is never shown to a character and never returned by a read. It follows the
timeline: a child sees the parent's record up to the branch point. Beliefs are compared with
it to tell whether they are `diverging`, and news that claims facts is news of the event that
made them what the record says (`made_by`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import orjson

from projections.key_prefixes import FACT_RUNS, FACTS
from projections.keys import pack, pack_scope
from projections.state import StateTransaction
from projections.timelines import Ancestry
from projections.versions import read_through, version_through
from schemas import Event, Fact

ABSENT: Any = object()
"""Marks a fact the world record has never set."""


def facts_as_recorded(facts: list[Fact]) -> list[Fact]:
    """An event's facts as the record keeps them: one value per subject and attribute, the
    last given (an event setting one twice, the old owner then the new, is so at its end)."""
    return list({(fact.subject, fact.attribute): fact for fact in facts}.values())


def record_facts(tx: StateTransaction, event: Event, ancestry: Ancestry) -> None:
    """Write each fact of `event` as a new version at the event's position (`ancestry`: the
    timeline as it stood before it). A version that says again the value the record holds
    also keeps where that value's run began: saying it again made nothing (`made_by`)."""
    tenant, world, timeline = event.tenant_id, event.world_instance_id, event.timeline_id
    for fact in facts_as_recorded(event.facts):
        subject, attribute = fact.subject, fact.attribute
        began = made_by(tx, tenant, world, ancestry, fact)
        position = pack(event.seq)
        scope = pack_scope(FACTS, tenant, world, timeline, subject, attribute)
        tx.put(scope + position, orjson.dumps(fact.value))
        if began is not None:
            tx.put(
                _runs(tenant, world, timeline, subject, attribute) + position, orjson.dumps(began)
            )


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
    on a timeline: the first of the versions in a row that hold its value (one point lookup
    for where the run began, however often it was said again); None if the record holds
    another value, or none. A store of an earlier release kept no runs: there, each version
    begins one."""
    found = version_through(
        tx, ancestry, _versions(tenant_id, world_id, fact.subject, fact.attribute)
    )
    if found is None:
        return None
    segment, seq, raw = found
    if not same_json(orjson.loads(raw), fact.value):
        return None
    timeline = segment.timeline_id
    began = tx.get(_runs(tenant_id, world_id, timeline, fact.subject, fact.attribute) + pack(seq))
    if began is None:
        return timeline, seq
    run_timeline, run_seq = orjson.loads(began)
    return str(run_timeline), int(run_seq)


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


def _runs(tenant_id: str, world_id: str, timeline_id: str, subject: str, attribute: str) -> bytes:
    """The scope of where the runs of a fact's versions said again on a timeline began."""
    return pack_scope(FACT_RUNS, tenant_id, world_id, timeline_id, subject, attribute)
