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
from projections.versions import Headed, read_headed_through
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
    raw = _occupants_stored(tx, tenant_id, world_id, ancestry, place)
    return set() if raw is None else set(orjson.loads(raw))


def reported(
    tx: StateTransaction, tenant_id: str, world_id: str, ancestry: Ancestry, entity_id: str
) -> bool:
    """Whether the timeline's whereabouts ever named `entity_id`: a character reported
    somewhere, or a place someone was reported at (left empty since, or not)."""
    return (
        location_of(tx, tenant_id, world_id, ancestry, entity_id) is not None
        or _occupants_stored(tx, tenant_id, world_id, ancestry, entity_id) is not None
    )


def _occupants_stored(
    tx: StateTransaction, tenant_id: str, world_id: str, ancestry: Ancestry, place: str
) -> bytes | None:
    return read_headed_through(
        tx,
        ancestry,
        lambda timeline: pack_scope(OCCUPANTS, tenant_id, world_id, timeline, place),
        lambda timeline: pack_scope(OCCUPANT_HEADS, tenant_id, world_id, timeline, place),
    )


def unmoved(event: Event) -> str | None:
    """The ack's note for a movement event that moves nobody (no actor, or no location: where
    characters are, and whom they meet, were not learned, and nothing said so)."""
    if event.key not in MOVEMENT_KEYS or (event.actor is not None and event.location is not None):
        return None
    return "movement not recorded: it needs actor (who moves) and location (where to)"


def movement(
    tx: StateTransaction, event: Event, ancestry: Ancestry, present: set[str] | None = None
) -> list[Headed]:
    """What a movement event writes, as of its position (nothing for another event): its actor
    at its location, and the occupants of the place the actor left and of the location. Worked
    out before the event writes anything: a crowd's list grows with every arrival, and an event
    that would make it too large for a record is refused whole (`projections.record_bounds`).
    `present`: the occupants of that location as this event read them already, if it did."""
    if event.key not in MOVEMENT_KEYS or event.actor is None or event.location is None:
        return []
    tenant, world, timeline = event.tenant_id, event.world_instance_id, event.timeline_id
    mover = event.actor
    previous = location_of(tx, tenant, world, ancestry, mover)
    writes = [
        Headed(
            pack_scope(LOCATIONS, tenant, world, timeline, mover),
            pack_scope(LOCATION_HEADS, tenant, world, timeline, mover),
            orjson.dumps(event.location),
            f"the location of {mover!r}",
        )
    ]
    if previous is not None and previous != event.location:
        left = occupants_of(tx, tenant, world, ancestry, previous) - {mover}
        writes.append(_occupants(event, previous, left))
    if present is None:
        present = occupants_of(tx, tenant, world, ancestry, event.location)
    writes.append(_occupants(event, event.location, present | {mover}))
    return writes


def _occupants(event: Event, place: str, occupants: set[str]) -> Headed:
    """The occupants of `place` as of the event's position on its timeline."""
    tenant, world, timeline = event.tenant_id, event.world_instance_id, event.timeline_id
    return Headed(
        pack_scope(OCCUPANTS, tenant, world, timeline, place),
        pack_scope(OCCUPANT_HEADS, tenant, world, timeline, place),
        orjson.dumps(sorted(occupants)),
        f"the list of who is at {place!r} ({len(occupants)} ids)",
    )
