"""Rumour rules: how news travels from character to character by itself (SPEC 5, seed 001).

With `memory.spreading.enabled` (off by default), characters pass memories on when they meet:

- **Meetings.** A character entering a place meets every character already there; the game's
  `loreweaver.social.characters-met` makes everyone it names meet everyone else it names (at
  most `MOST_MET` names: a larger one is no meeting, and its ack says why); and
  once per game-time interval (`spreading.group_interval_minutes`) each group exchanges news
  (a character's group is the `group` it was declared with, one name, or what the field
  `spreading.group_field` names holds: a declaration's own field may hold a list of names).
- **What a character can tell.** Its news as it holds it at the event (section 8, at the
  event's story time, else the timeline's story "now"): what it has forgotten it cannot tell,
  and faded news it tells as it holds it, retold and as sure as its confidence x retention
  (`projections.retention`). Forgotten news takes no place among its newest: it looks deeper,
  at most `DEEPEST_LOOK` times as deep as the news it would pass.
- **What passes at a meeting.** Each of the two offers the other its newest news, at most
  `spreading.per_meeting` (3) pieces; the listener takes in those worth telling them. Old news
  stops travelling once a character has fresher news to tell: the freshest gossip spreads.
- **What passes in a group.** At most `spreading.group_exchange_limit` pieces of news per group
  and interval, the newest that some member lacks; each comes from the member who has it
  freshest (fewest hops, then newest) and reaches every member who lacks it. The group looks
  at each member's newest news, as many pieces as the limit, and deeper (twice as many, and so
  on) while those hold fewer pieces some member lacks, at most `DEEPEST_LOOK` times the limit
  (`group_exchange`): older news one member lacks travels once what is newer is shared.
- **News** (`is_news`): every memory but an impression (a feeling is not news).
- **Worth telling** (`worth_telling`): only news, never what the listener already knows,
  saw included (the same original event or claim, whatever the words; known while held, not
  forgotten: `projections.knowing`), never news that came from the listener, never news about
  the listener alone, nor news already `MAX_HOPS` from its start (`projections.memories`).
- **How the listener keeps it** (`retold`): as `knowledge`, one hop further, `told` when the
  teller saw it and `rumour` when the teller had it from others, the teller's confidence times
  `memory.retelling_factor`, the statement without its detail (quoted words, parenthesised
  details), unsure, weighed as a `told` is: by what it tells of, as heard
  (`projections.weighing`). With `spreading.distortion` a detail may shift
  (`projections.distortion`).

Everything here is a function of the stream, so the same stream spreads the same rumours.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass
from functools import lru_cache
from itertools import combinations, islice
from typing import Any

from projections.catalogue import CHARACTER, KindOf
from projections.distortion import Catalogued, distort, distortion_seed
from projections.event_keys import CHARACTERS_MET, MOVEMENT_KEYS
from projections.keys import pack
from projections.memories import MAX_HOPS, came_through, is_persistent, memory_at, tellers_of
from projections.weighing import Weights, told_of, weigh
from projections.wording import passed_on
from schemas import EntityDeclaration, Event
from schemas.memory import EventKind, Memory, Teller
from schemas.policy import Policy
from schemas.trusted import trusted

MET_FIELD = "characters"
"""The payload field of `characters-met` that may name more characters who met."""
MOST_MET = 32
"""The most ids one `characters-met` may name (its actor and target among them): everyone it
names meets everyone else, so N names form up to `per_meeting` x N (N - 1) rumours in one
event (500 names in 5 KB formed 750,000 memories, 26 s and 3 GB). A larger one is no meeting
(`crowd_note`). 32 names form at most 2,976 at the default `per_meeting` of 3; a policy
raising it raises that bound with it (992,000 at its most, 1,000)."""

Meeting = tuple[str, str]
"""Two characters who meet, the smaller id first."""
Delivery = tuple[str, str, Memory]
"""(teller, listener, the teller's memory) of one group exchange."""

DEEPEST_LOOK = 16
"""How many times as deep as the news it would pass a character looks for it: a teller for
news it has not forgotten, a group for pieces some member lacks. A bound, so that a character
who forgot most of a long life, or a group that shares all it knows, costs a few reads at a
meeting rather than its whole past (a recall looks as deep for memories not forgotten)."""


def meetings(
    event: Event, occupants_before: Collection[str], kind_of: KindOf, policy: Policy
) -> list[Meeting]:
    """The pairs of characters who meet at `event`, each pair once, in order.

    `occupants_before` are the characters known at the event's location before it. A character
    who was already there arrives nowhere new and meets nobody. Only characters meet: players
    and things never do.
    """
    if not policy.memory.spreading.enabled:
        return []
    if event.key in MOVEMENT_KEYS:
        mover = event.actor
        if mover is None or event.location is None or mover in occupants_before:
            return []
        if kind_of(mover) != CHARACTER:
            return []
        present = {other for other in occupants_before if kind_of(other) == CHARACTER}
        return sorted(_pair(mover, other) for other in present)
    if event.key == CHARACTERS_MET:
        named = met_names(event)
        if len(named) > MOST_MET:
            return []
        return list(combinations(sorted(who for who in named if kind_of(who) == CHARACTER), 2))
    return []


def met_names(event: Event) -> set[str]:
    """The ids a `characters-met` names: its actor, target and `payload.characters`."""
    named = event.payload.get(MET_FIELD)
    extra = [item for item in named if isinstance(item, str)] if isinstance(named, list) else []
    return {who for who in (event.actor, event.target, *extra) if who is not None}


def crowd_note(event: Event, policy: Policy) -> str | None:
    """Why a `characters-met` of more than `MOST_MET` names, spreading on, was no meeting."""
    if event.key != CHARACTERS_MET or not policy.memory.spreading.enabled:
        return None
    named = len(met_names(event))
    if named <= MOST_MET:
        return None
    return (
        f"no meeting recorded: a characters-met names at most {MOST_MET} ids "
        f"(everyone meets everyone), this one {named}"
    )


def group_interval(story_minutes: int, policy: Policy) -> int:
    """The game-time interval a moment falls in: a group exchanges news once per interval."""
    return story_minutes // policy.memory.spreading.group_interval_minutes


def groups(members: Mapping[str, EntityDeclaration | None], policy: Policy) -> dict[str, list[str]]:
    """Group name -> its characters, by id, read off their declarations.

    The group is the declaration's `spreading.group_field` (`group` unless the policy names
    another field). `group` holds one name (the event contract refuses a list there); a field
    of the game's own may hold a name or a list of names, which puts the character in each.
    Undeclared: in no group.
    """
    field = policy.memory.spreading.group_field
    found: dict[str, set[str]] = {}
    for character, declared in members.items():
        for group in _group_names(None if declared is None else _field_of(declared, field)):
            found.setdefault(group, set()).add(character)
    return {group: sorted(found[group]) for group in sorted(found)}


def _field_of(declared: EntityDeclaration, field: str) -> object:
    """A declaration's field: one of its own, or the game's (an extra field), never a method
    of the model (a game's field called `copy` or `schema` read as one, and grouped nobody)."""
    if field in EntityDeclaration.model_fields:
        return getattr(declared, field)
    return (declared.model_extra or {}).get(field)


def is_news(memory: Memory) -> bool:
    """Whether a memory is something a character could tell: anything but an impression."""
    return memory.kind != "impression"


def worth_telling(memory: Memory, listener: str) -> bool:
    """Whether `memory` is news a character would pass to `listener` (before asking whether
    the listener knows it already).

    News not yet `MAX_HOPS` from its start, not the listener's own memory, not news that came
    through the listener, and not news about the listener alone (nobody gossips to you about
    you).
    """
    if not is_news(memory) or memory.hops >= MAX_HOPS:
        return False
    if memory.character_id == listener or came_through(memory, listener):
        return False
    about = memory.about
    return not about or about.count(listener) < len(about)


def passed_at_meeting(
    teller_memories_newest_first: Iterable[Memory],
    listener: str,
    listener_knows: Callable[[str], bool],
    policy: Policy,
) -> list[Memory]:
    """What a teller passes to `listener` at a meeting: of the teller's newest news, at most
    `spreading.per_meeting` pieces, those worth telling that the listener does not know
    (`listener_knows(origin)`). Two memories of the same news pass once.
    """
    news = (memory for memory in teller_memories_newest_first if is_news(memory))
    offered = list(islice(news, policy.memory.spreading.per_meeting))
    passed: list[Memory] = []
    origins: set[str] = set()
    for memory in offered:
        if memory.origin in origins or not worth_telling(memory, listener):
            continue
        if listener_knows(memory.origin):
            continue
        origins.add(memory.origin)
        passed.append(memory)
    return passed


def passed_in_group(
    members_newest_first: Mapping[str, Iterable[Memory]],
    knows: Callable[[str, str], bool],
    policy: Policy,
) -> list[Delivery]:
    """The deliveries of one group exchange, newest news first, then by listener.

    At most `spreading.group_exchange_limit` pieces of news, the newest (by the latest position
    any member learned it at) that some member lacks (`knows(member, origin)` is false). Each
    is told by the member holding the freshest copy: fewest hops, then newest, then smallest id;
    to nobody any copy the group holds came through (the news is their own story: told it
    back only when a copy that did not come through them was the freshest, they were told it
    or not by which of two unrelated tellings came last).
    """
    limit = policy.memory.spreading.group_exchange_limit
    members = sorted(members_newest_first)
    copies: dict[str, list[tuple[str, Memory]]] = {}
    latest: dict[str, int] = {}  # the latest position any member learned each news at
    for member in members:
        for memory in members_newest_first[member]:
            if is_news(memory):
                origin, seq = memory.origin, memory.seq
                gathered = copies.get(origin)
                if gathered is None:
                    copies[origin], latest[origin] = [(member, memory)], seq
                else:
                    gathered.append((member, memory))
                    latest[origin] = max(latest[origin], seq)

    newest_first = sorted(copies, key=lambda origin: (-latest[origin], origin))
    deliveries: list[Delivery] = []
    passed = 0
    for origin in newest_first:
        if passed == limit:
            break
        gathered = copies[origin]
        teller, freshest = min(gathered, key=lambda copy: (copy[1].hops, -copy[1].seq, copy[0]))
        holders = {member for member, _ in gathered}
        holders.update(through for _, copy in gathered for through in tellers_of(copy))
        listeners = [
            member
            for member in members
            if member not in holders
            and worth_telling(freshest, member)
            and not knows(member, origin)
        ]
        if listeners:
            passed += 1
            deliveries.extend((teller, listener, freshest) for listener in listeners)
    return deliveries


def group_exchange(
    offered: Callable[[int], Mapping[str, Iterable[Memory]]],
    knows: Callable[[str, str], bool],
    policy: Policy,
) -> list[Delivery]:
    """The deliveries of one group exchange (`passed_in_group`) over each member's newest news,
    `offered(depth)` pieces of it: `group_exchange_limit` pieces, and when those hold fewer
    than the limit that some member lacks, twice as many, and so on, up to `DEEPEST_LOOK` times
    the limit. Old news one member lacks travels once the group shares what is newer."""
    limit = policy.memory.spreading.group_exchange_limit
    deliveries: list[Delivery] = []
    depth = limit
    while depth:
        deliveries = passed_in_group(offered(depth), knows, policy)
        if depth == DEEPEST_LOOK * limit or len({m.origin for _, _, m in deliveries}) == limit:
            break
        depth = min(2 * depth, DEEPEST_LOOK * limit)
    return deliveries


@dataclass(frozen=True, slots=True)
class Retelling:
    """What every listener of one teller's memory takes in alike, worked out once: a group
    exchange passes one memory to dozens of listeners at once."""

    memory: Memory
    teller: str
    hops: int
    """The listener's: one more than the teller's memory."""
    tells_of: EventKind
    weights: Weights
    content: str
    lineage: list[Teller]
    """Shared by the rumours made of it (frozen, as their `about` and `facts` are)."""


def retelling(
    memory: Memory, teller: str, policy: Policy, name_of: Callable[[str], str]
) -> Retelling:
    """The part of `retold` that does not depend on the listener or the event (made once for
    all of them: the words are worked out once per memory and teller)."""
    kind = told_of(memory)
    weights = weigh(kind, "heard", "told", policy, memory.confidence)
    hops = memory.hops + 1
    step = _step(teller, hops, weights.confidence)
    content = passed_on(memory, name_of)
    return Retelling(memory, teller, hops, kind, weights, content, [*memory.lineage, step])


def retold(
    memory: Memory, teller: str, listener: str, at: Event, policy: Policy, catalogue: Catalogued
) -> Memory:
    """The memory `listener` forms when `teller` passes `memory` on at the event `at` (the rule
    for one listener; spreading makes the `retelling` once for all of them, `retold_from`).

    Kept as `knowledge`, unsure, one hop further, `told` if the teller saw it and `rumour` if
    not, as sure as the teller times `memory.retelling_factor`, in fewer words (`retell`).
    The same news (`origin`), about the same, claiming the same facts unless distorted.
    Importance, feeling and arousal are the listener's own: what the news tells of, as heard
    (as a `told` event weighs it), whatever the teller felt. The lineage adds the teller, with
    the hops and confidence the news arrived with (as a `told` event's lineage does).
    """
    told = retelling(memory, teller, policy, catalogue.name_of)
    return retold_from(told, listener, at, policy, catalogue)


def retold_from(
    told: Retelling, listener: str, at: Event, policy: Policy, catalogue: Catalogued
) -> Memory:
    """`retold`, given the teller's `retelling` of the memory (made once for its listeners)."""
    memory = told.memory
    content, facts = told.content, memory.facts  # frozen: shared, not copied
    if policy.memory.spreading.distortion:
        seed = distortion_seed(memory.origin, listener, at.timeline_id, at.seq)
        content, facts = distort(content, list(facts), memory.about, seed, catalogue)
    return memory_at(
        at,
        listener,
        "knowledge",
        policy,
        told.weights,
        belief=rumour_id(at, listener, memory.origin),
        tells_of=told.tells_of,
        content=content,
        about=memory.about,  # frozen: shared, as the teller's facts are
        source="told" if memory.hops == 0 else "rumour",
        source_entity=told.teller,
        hops=told.hops,
        uncertain=True,
        facts=facts,
        origin=memory.origin,
        lineage=told.lineage,
        verdict=memory.verdict,  # travels as it is, as the origin does
    )


def retold_alike(
    told: Retelling, first: Memory, listener: str, at: Event, policy: Policy, catalogue: Catalogued
) -> Memory:
    """`retold_from` for another listener of the retelling `first` was made of at the same
    event: undistorted, each listener's rumour is `first`'s but for its id, its character and
    whether the policy keeps it for the whole world, so it is made from `first`'s fields (a
    group exchange tells one memory to dozens of listeners)."""
    if policy.memory.spreading.distortion:  # each listener hears its own words
        return retold_from(told, listener, at, policy, catalogue)
    return trusted(  # the same fields, in the same order: the same bytes stored
        Memory,
        {
            **first.__dict__,
            "belief_id": rumour_id(at, listener, first.origin),
            "persistent": is_persistent(listener, "knowledge", policy),
            "character_id": listener,
        },
    )


def rumour_id(at: Event, listener: str, origin: str) -> str:
    """The id of the rumour `listener` heard at `at`: 32 hex characters, one per piece of news
    (several can reach one listener at one meeting), never a `belief_id` of a formed memory.
    """
    return rumour_id_at(
        at.tenant_id, at.world_instance_id, at.timeline_id, at.seq, listener, origin
    )


def rumour_id_at(
    tenant_id: str, world_id: str, timeline_id: str, seq: int, listener: str, origin: str
) -> str:
    """`rumour_id` of a position: what a listener heard there is found by it again."""
    key = _rumour_position(tenant_id, world_id, timeline_id, seq) + pack(listener, origin)
    return hashlib.blake2b(key, digest_size=16).hexdigest()


@lru_cache(maxsize=1 << 14)
def _step(teller: str, hops: int, confidence: float) -> Teller:
    """A step of a lineage, made once and shared (frozen): the same teller passes news on
    again and again, at the same few hops and confidences."""
    return trusted(Teller, {"entity_id": teller, "hops": hops, "confidence": confidence})


@lru_cache(maxsize=64)
def _rumour_position(tenant_id: str, world_id: str, timeline_id: str, seq: int) -> bytes:
    """The packed start of the rumour ids made at a position: packed once for the rumours an
    event spreads (a packing is a prefix of a longer one's)."""
    return pack("rumour", tenant_id, world_id, timeline_id, seq)


def _pair(one: str, other: str) -> Meeting:
    return (one, other) if one < other else (other, one)


def _group_names(value: Any) -> list[str]:
    """The group names a declared value gives: a name, or (in a field of the game's own, as
    `group` holds only one) a list of names."""
    candidates = value if isinstance(value, list) else [value]
    return [name for name in candidates if isinstance(name, str) and name]
