"""Knowing news: what a character still holds of it at an event (sections 4, 5 and 8).

Nobody takes in news they already know. A character knows news while it holds a memory of it
that it has not forgotten at the event (`projections.retention`, its recalls counted); an
impression is none (a feeling formed beside the news is no news). News it learned and forgot
can reach it again, from a `told` or a rumour. Whether it ever learned the news is one point
read per scope (`memory_store.ever_learned`); only then are its memories of it read.

A teller who tells news without naming its memory of it (a `told` without `belief_id`) passes
on the memory of that news it holds (`news_passed_on`), as a `told` naming it would: the news is
known by its origin for "already knows", so it is the same news for how far it travelled.
"""

from __future__ import annotations

from projections.memory_store import MemoryKeys, as_revised, memories_of_origin
from projections.reinforcement import held_now
from projections.retention import vivid_however_recalled
from projections.rumour_rules import is_news
from projections.state import StateTransaction
from projections.timelines import Ancestry
from schemas.memory import Memory
from schemas.policy import Policy


def minute_held_at(minute: int | None, policy: Policy) -> int | None:
    """The story minute characters hold their memories at during an event of story minute
    `minute` (`story_clock.minute_of`: its own story time, else the timeline's story "now"
    just before it); None when nothing fades (`memory.flaky` off, or no story time yet)."""
    return minute if policy.memory.flaky else None


def held_at(
    tx: StateTransaction,
    keys: MemoryKeys,
    ancestry: Ancestry,
    memory: Memory,
    now: int | None,
    policy: Policy,
) -> Memory | None:
    """`memory` as its character holds it at story minute `now`: itself when vivid however it
    was recalled (most news is fresh: its recalls are not looked up then), retold and less sure
    when faded, None when forgotten."""
    if vivid_however_recalled(memory, now, policy):
        return memory
    return held_now(tx, keys, ancestry, memory, now, policy).memory


def holds_news_of(
    tx: StateTransaction,
    keys: MemoryKeys,
    ancestry: Ancestry,
    character: str,
    origin: str,
    now: int | None,
    policy: Policy,
) -> bool:
    """Whether `character` holds news of `origin` at story minute `now`: a memory of it, not an
    impression, that it has not forgotten."""
    return any(
        is_news(memory) and held_at(tx, keys, ancestry, memory, now, policy) is not None
        for memory in memories_of_origin(tx, keys, ancestry, origin, character)
    )


def news_passed_on(
    tx: StateTransaction,
    keys: MemoryKeys,
    ancestry: Ancestry,
    teller: str,
    origin: str,
    now: int | None,
    policy: Policy,
) -> Memory | None:
    """The memory of news `origin` that `teller` passes on when it tells the news without naming
    a memory (a `told` without `belief_id`), as it holds it at story minute `now` (its confidence
    as last revised, faded as retention has it); None when it holds none (news it never learned,
    a lie, or forgot).

    Of the memories it still holds: the fewest hops, then the surest (the listener gets the news
    as close to its start and as sure as the teller can give it), then the newest (position,
    then id: a total order, so a replay passes the same one), as a group exchange picks its
    teller's copy. A teller mostly holds one: a second forms only once the first is forgotten,
    and story time going back can bring the first back (a recall of a forgotten memory cannot).
    """
    held = (
        held_at(tx, keys, ancestry, as_revised(tx, keys, ancestry, memory), now, policy)
        for memory in memories_of_origin(tx, keys, ancestry, origin, teller)
        if is_news(memory)
    )
    return min((memory for memory in held if memory is not None), key=_passed_first, default=None)


def _passed_first(memory: Memory) -> tuple[int, float, int, str]:
    """Sorts the memory a teller passes on first (`news_passed_on`)."""
    return (memory.hops, -memory.confidence, -memory.seq, memory.belief_id)
