"""Rumour spreading: the rumour rules driven from storage, event by event.

News moves when characters meet, or when a group's game-time interval turns. A teller tells
its news as it holds it at the event (section 8): not what it forgot, and faded news less sure.
A listener who forgot news can be told it again (`projections.knowing`).

The rules of who meets and what passes are in `projections.rumour_rules`; this module feeds them
from state as it stood before the event, so applying an event twice spreads the same news.
Within one event, news reaches a listener once: what the event itself gave a listener (a
`told`), and what they were told at this meeting, counts as known for the rest of it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import NamedTuple

import orjson

from projections.catalogue import CHARACTER, Catalogue, StoredDeclarations
from projections.judgements import RULES, Judging
from projections.key_prefixes import GROUP_EXCHANGE_HEADS, GROUP_EXCHANGES
from projections.keys import pack_scope
from projections.knowing import held_at, holds_news_of
from projections.memory_store import (
    PERSISTENT_SCOPE,
    LearnedScopes,
    MemoryKeys,
    first_learned_in,
    learned_scopes,
    load_memory,
    newest_news,
)
from projections.rumour_rules import (
    DEEPEST_LOOK,
    Retelling,
    group_exchange,
    group_interval,
    groups,
    is_news,
    meetings,
    passed_at_meeting,
    retelling,
    retold_alike,
    retold_from,
    rumour_id_at,
)
from projections.state import StateTransaction
from projections.story_clock import story_minute_at
from projections.timelines import Ancestry
from projections.versions import headed_version_through, write_headed
from schemas import Event
from schemas.memory import Memory
from schemas.policy import Policy


@dataclass
class Spreading:
    """The news one event spreads, and who has heard what during it."""

    tx: StateTransaction
    keys: MemoryKeys
    ancestry: Ancestry
    event: Event
    policy: Policy
    catalogue: Catalogue
    judged: Judging
    now: int | None
    """The story minute characters hold their news at (None: nothing fades)."""
    heard: list[Memory] = field(default_factory=list)
    known: dict[tuple[str, str], bool] = field(default_factory=dict)
    forgotten: set[tuple[str, str]] = field(default_factory=set)
    """(character, origin): news the character learned before and holds no more."""
    minds: dict[tuple[str, int, int], list[Memory]] = field(default_factory=dict)
    learned: dict[str, LearnedScopes] = field(default_factory=dict)
    retellings: dict[tuple[str, str], tuple[Retelling, Memory]] = field(default_factory=dict)
    """(teller, belief id) -> the teller's retelling of the memory, and the first rumour made
    of it at the event (the others are made alike: `retold_alike`)."""

    def knows(self, character: str, origin: str) -> bool:
        """Whether `character` holds the news, told at this event included (read once: several
        tellers offer the same news to the same listener); news it forgot it knows no more."""
        pair = (character, origin)
        found = self.known.get(pair)
        if found is None:
            learned = self.learned.get(character)
            if learned is None:
                learned = self.learned[character] = learned_scopes(
                    self.keys, self.ancestry, character
                )
            first = first_learned_in(self.tx, learned, origin)
            found = first is not None and (
                self.holds_heard(character, origin, *first)
                or holds_news_of(
                    self.tx, self.keys, self.ancestry, character, origin, self.now, self.policy
                )
            )
            if first is not None and not found:
                self.forgotten.add(pair)
            self.known[pair] = found
        return found

    def holds_heard(self, character: str, origin: str, scope: str, seq: int) -> bool:
        """Whether `character` still holds the rumour it heard the news by at `seq` of the
        timeline `scope` (where it learned the news first), if it learned it so: one point read
        (news reaches most who know it as a rumour), where finding its memories of the news
        scans them (`knowing.holds_news_of`, asked when this says no)."""
        if scope == PERSISTENT_SCOPE:
            return False  # a persistent rumour keeps the position of its own timeline
        event = self.event
        heard = load_memory(
            self.tx,
            self.keys,
            character,
            rumour_id_at(event.tenant_id, event.world_instance_id, scope, seq, character, origin),
        )
        return heard is not None and is_news(heard) and self.held(heard) is not None

    def mind(self, character: str, count: int, within: int) -> list[Memory]:
        """A teller's newest `count` pieces of news it still holds, as it holds them, looked for
        among its newest `within`, as they stood before the event (read once per event).

        The character knows what it holds (`knows`: held is held however sure), so met again as
        a listener it is not asked again: at a meeting each is both, and asking whether a
        listener still holds news it learned scans the memories of the news."""
        key = (character, count, within)
        found = self.minds.get(key)
        if found is None:
            found = self.minds[key] = newest_news(
                self.tx, self.keys, self.ancestry, character, count, self.held, within
            )
            known = self.known
            for memory in found:
                known[(character, memory.origin)] = True
        return found

    def newest_of(self, members: list[str], depth: int) -> dict[str, list[Memory]]:
        """What each group member still holds of its newest `depth` pieces of news."""
        return {member: self.mind(member, depth, depth) for member in members}

    def held(self, memory: Memory) -> Memory | None:
        """`memory` as its character holds it at the event (`knowing.held_at`)."""
        return held_at(self.tx, self.keys, self.ancestry, memory, self.now, self.policy)

    def tell(self, memory: Memory, teller: str, listener: str) -> None:
        made = self.retellings.get((teller, memory.belief_id))
        if made is None:  # once per teller's memory: a group exchange tells it to dozens
            told = retelling(memory, teller, self.policy, self.catalogue.name_of)
            rumour = retold_from(told, listener, self.event, self.policy, self.catalogue)
            self.retellings[(teller, memory.belief_id)] = (told, rumour)
        else:
            told, first = made
            rumour = retold_alike(told, first, listener, self.event, self.policy, self.catalogue)
        self.heard.append(self.judged.retelling(rumour, memory, teller, told.content))
        self.known[(listener, memory.origin)] = True


class Spread(NamedTuple):
    """The rumours an event spreads, and the news it found forgotten: a rumour of it brings
    back news its listener learned before (the position they first learned it at stays)."""

    rumours: list[Memory]
    forgotten: set[tuple[str, str]]
    """(character, origin): news the character learned before the event and holds no more."""


def spread(
    tx: StateTransaction,
    keys: MemoryKeys,
    ancestry: Ancestry,
    event: Event,
    policy: Policy,
    catalogue: Catalogue,
    present: set[str],
    formed: Sequence[Memory],
    now: int | None,
    judged: Judging = RULES,
) -> Spread:
    """The rumours `event` spreads on its timeline (none unless `memory.spreading.enabled`),
    each retelling `judged` (in model mode, by the model), its characters holding their news
    at story minute `now` (`knowing.minute_held_at`, worked out once for the event); nobody is
    passed news the event `formed` a memory of for them."""
    spreading = policy.memory.spreading
    if not spreading.enabled:
        return Spread([], set())
    known_at_event = {(memory.character_id, memory.origin): True for memory in formed}
    news = Spreading(
        tx, keys, ancestry, event, policy, catalogue, judged, now, known=known_at_event
    )
    if event.story_minutes is not None:
        _exchange_in_groups(news, event.story_minutes)
    for one, other in meetings(event, present, catalogue.kind_of, policy):
        for teller, listener in ((one, other), (other, one)):
            told = passed_at_meeting(
                news.mind(teller, spreading.per_meeting, DEEPEST_LOOK * spreading.per_meeting),
                listener,
                partial(news.knows, listener),
                policy,
            )
            for memory in told:
                news.tell(memory, teller, listener)
    return Spread(news.heard, news.forgotten)


def _exchange_in_groups(news: Spreading, minutes: int) -> None:
    """Once per game-time interval and timeline, each group shares its newest news: at the
    first event of an interval later than the last exchange's, both counted in the interval's
    length now (the last exchange's is kept as a position, whose story minute tells its
    interval: counted in the length then, an interval made longer stopped exchanges for as many
    more intervals)."""
    interval = group_interval(minutes, news.policy)
    tenant, world = news.event.tenant_id, news.event.world_instance_id
    last = headed_version_through(
        news.tx,
        news.ancestry,
        lambda timeline: pack_scope(GROUP_EXCHANGES, tenant, world, timeline),
        lambda timeline: pack_scope(GROUP_EXCHANGE_HEADS, tenant, world, timeline),
    )
    if last is not None:
        last_minutes = story_minute_at(news.tx, tenant, world, last[0], last[1])
        if last_minutes is not None and group_interval(last_minutes, news.policy) >= interval:
            return
    timeline = news.event.timeline_id
    write_headed(
        news.tx,
        pack_scope(GROUP_EXCHANGES, tenant, world, timeline),
        pack_scope(GROUP_EXCHANGE_HEADS, tenant, world, timeline),
        news.event.seq,
        orjson.dumps(interval),  # kept as ever: the rule reads the position (`story_minute_at`)
    )
    declared = StoredDeclarations(news.tx, tenant, world, news.ancestry).declared()
    kinds = Catalogue(declared, news.event, news.policy)  # the event's, without reading again
    characters = {
        entity: declaration
        for entity, declaration in declared.items()
        if kinds.kind_of(entity) == CHARACTER
    }
    for members in groups(characters, news.policy).values():
        if len(members) < 2:
            continue
        offered = partial(news.newest_of, members)
        for teller, listener, memory in group_exchange(offered, news.knows, news.policy):
            news.tell(memory, teller, listener)
