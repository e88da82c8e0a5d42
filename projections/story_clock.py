"""The story clock: a timeline's story "now" is the story time of its latest event that has one.

Retention (section 8) measures elapsed story days, not wall time. Each event with a
`game_time` leaves its story minute at its position; "now" on a timeline (or as of a position)
is the latest of those through the ancestry, own timeline first.
"""

from __future__ import annotations

from projections.key_prefixes import STORY_TIMES
from projections.keys import pack
from projections.state import StateTransaction
from projections.timelines import Ancestry
from schemas import Event


def record_story_time(tx: StateTransaction, event: Event) -> None:
    """Keep the story minute of an event that has one."""
    minutes = event.story_minutes
    if minutes is not None:
        tx.put(
            pack(
                STORY_TIMES, event.tenant_id, event.world_instance_id, event.timeline_id, event.seq
            ),
            minutes.to_bytes(8, "big"),
        )


def story_minute_at(
    tx: StateTransaction, tenant_id: str, world_id: str, timeline_id: str, seq: int
) -> int | None:
    """The story minute of the event at a position, if it had one."""
    raw = tx.get(pack(STORY_TIMES, tenant_id, world_id, timeline_id, seq))
    return None if raw is None else int.from_bytes(raw, "big")


def story_now(
    tx: StateTransaction, tenant_id: str, world_id: str, ancestry: Ancestry
) -> int | None:
    """The story minute of the latest event with a story time the ancestry sees; None if none."""
    for segment in ancestry:
        prefix = pack(STORY_TIMES, tenant_id, world_id, segment.timeline_id)
        start = prefix + pack(segment.upto_seq)
        for _, minutes in tx.scan(prefix, reverse=True, start=start):
            return int.from_bytes(minutes, "big")
    return None


def minute_of(tx: StateTransaction, event: Event, ancestry: Ancestry) -> int | None:
    """When `event` happened in the story: its own story time, else the timeline's story "now"
    just before it (a line sent without `game_time` is said as the story stands); None when
    the timeline has no story time yet."""
    if event.story_minutes is not None:
        return event.story_minutes
    return story_now(tx, event.tenant_id, event.world_instance_id, ancestry)
