"""Where characters are, per timeline, learned from the two movement events.

Both directions are kept as versions, each timeline's newest also as a head: a character's
location, and each place's occupants (so perception by location is one point lookup, not a
scan of every character).
"""

from __future__ import annotations

import orjson

from projections.event_keys import MOVEMENT_KEYS
from projections.key_prefixes import LOCATION_HEADS, LOCATIONS, OCCUPANT_HEADS, OCCUPANTS
from projections.keys import pack_scope
from projections.state import StateTransaction
from projections.timelines import Ancestry
from projections.versions import read_headed_through, write_headed
from schemas import Event


def location_of(
    tx: StateTransaction, tenant_id: str, world_id: str, ancestry: Ancestry, character: str
) -> str | None:
    """Where `character` was last reported on the timeline, or None if never."""
    raw = read_headed_through(
        tx,
        ancestry,
        lambda timeline: pack_scope(LOCATIONS, tenant_id, world_id, timeline, character),
        lambda timeline: pack_scope(LOCATION_HEADS, tenant_id, world_id, timeline, character),
    )
    return None if raw is None else str(orjson.loads(raw))


def place_of(
    tx: StateTransaction,
    tenant_id: str,
    world_id: str,
    ancestry: Ancestry,
    character: str,
    stated: str | None,
) -> str | None:
    """Where something with `character` happens: the `stated` location, else where the
    character was last reported on the timeline (an event or read need not say it)."""
    return stated or location_of(tx, tenant_id, world_id, ancestry, character)


def occupants_of(
    tx: StateTransaction, tenant_id: str, world_id: str, ancestry: Ancestry, place: str
) -> set[str]:
    """The characters known to be at `place` on the timeline."""
    raw = read_headed_through(
        tx,
        ancestry,
        lambda timeline: pack_scope(OCCUPANTS, tenant_id, world_id, timeline, place),
        lambda timeline: pack_scope(OCCUPANT_HEADS, tenant_id, world_id, timeline, place),
    )
    return set() if raw is None else set(orjson.loads(raw))


def record_movement(
    tx: StateTransaction, event: Event, ancestry: Ancestry, present: set[str] | None = None
) -> None:
    """A movement event moves its actor to its location, as of the event's position.
    `present`: the occupants of that location as this event read them already, if it did."""
    if event.key not in MOVEMENT_KEYS or event.actor is None or event.location is None:
        return
    tenant, world, timeline = event.tenant_id, event.world_instance_id, event.timeline_id
    mover = event.actor
    previous = location_of(tx, tenant, world, ancestry, mover)
    write_headed(
        tx,
        pack_scope(LOCATIONS, tenant, world, timeline, mover),
        pack_scope(LOCATION_HEADS, tenant, world, timeline, mover),
        event.seq,
        orjson.dumps(event.location),
    )
    if previous is not None and previous != event.location:
        left = occupants_of(tx, tenant, world, ancestry, previous) - {mover}
        _write_occupants(tx, event, previous, left)
    if present is None:
        present = occupants_of(tx, tenant, world, ancestry, event.location)
    _write_occupants(tx, event, event.location, present | {mover})


def _write_occupants(tx: StateTransaction, event: Event, place: str, occupants: set[str]) -> None:
    """The occupants of `place` as of the event's position on its timeline."""
    tenant, world, timeline = event.tenant_id, event.world_instance_id, event.timeline_id
    write_headed(
        tx,
        pack_scope(OCCUPANTS, tenant, world, timeline, place),
        pack_scope(OCCUPANT_HEADS, tenant, world, timeline, place),
        event.seq,
        orjson.dumps(sorted(occupants)),
    )
