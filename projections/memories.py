"""Memory formation: what each character who perceived an event takes away from it (seed 001).

- Whoever perceives an event remembers it as an `event` memory, seen first hand.
- A player's line (`player-said`) becomes `knowledge` for the listener: the player is the
  source, one hop away, and the listener is not sure of it.
- News told by a character (`told`) becomes `knowledge` too, one hop further than the teller
  had it and a little less sure (`memory.retelling_factor`); `told` while the teller had it
  first hand, a `rumour` beyond. It is weighed by what it tells of, as heard
  (`projections.weighing`), not as the conversation that carried it.
- The same news is recognised by its origin: the teller's memory's, when the `told` names one
  (`belief_id`; an impression names the memory it was formed beside: a feeling is no news);
  else the event that made every fact it claims what the world record says;
  else the claim itself (`claim_origin`: its facts and whom it is about). Nobody takes in news
  about something they saw or already know, and have not forgotten (`projections.knowing`).
- A `told` without `belief_id` passes on the teller's memory of that origin, if it holds one
  (`knowing.news_passed_on`: not forgotten; the fewest hops, then the surest, then the newest),
  exactly as a `told` naming it would: the listener holds it one hop further than the teller,
  as sure as a retelling of the teller's, through the teller's chain. The news is the same by
  its origin when the listener is asked whether it knows it, so it is the same for how far it
  travelled and how sure it is: otherwise news the teller had third-hand would reach the
  listener as if the teller had seen it. A teller who holds none (a lie, its own words, news it
  forgot) tells it as news of its own: one hop, the `told` confidence, nobody before it.
- News passes through at most `MAX_HOPS` tellers: a `told` of news the teller holds that far
  from its start forms nothing for the listener (as news spreading passes, `worth_telling`).
  Each hop adds its teller to the memory's chain and the listener to whom it is about, so the
  news would otherwise grow, hop by hop, past what one state record may hold.
- The target of someone else's act forms an `impression` of them when the act moved them
  enough (`memory.impression_threshold`); news of someone else's act moves no one that way.

Everything here is a function of the event, the policy and what the context looks up, so the
same stream forms the same memories, with the same ids, every time.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from functools import lru_cache
from typing import NamedTuple, Protocol

import orjson
from pydantic import JsonValue, ValidationError

from projections.catalogue import UNKNOWN
from projections.delivery import MOST_QUOTED_CHARS
from projections.event_keys import CONVERSATION_KEYS, PLAYER_SAID, TOLD
from projections.judgements import RULES, Judging
from projections.keys import pack
from projections.perception import Perception
from projections.weighing import Weights, event_kind, news_kind, told_of, weigh
from projections.wording import SPOKEN_FIELDS, cut, event_content, passed_on, spoken_words
from projections.world import canonical_json, facts_as_recorded
from schemas import Event, Fact
from schemas.events import MAX_ID_LENGTH, story_minutes
from schemas.memory import EventKind, Memory, MemoryKind, Source, Teller, Verdict
from schemas.policy import Policy
from schemas.trusted import trusted

_SORTED = orjson.OPT_SORT_KEYS

MAX_HOPS = 32
"""The farthest news travels: a memory this many hops from the news's start is passed on no
further (by a `told` or a meeting). Each hop adds a teller to its chain (`lineage`) and the
listener to whom it is about, some 300 bytes with the longest ids: without a bound, a rumour
passed round a town for years grew past the largest state record (81,819 bytes at the least
`RUMOURMILL_CHANGELOG_BATCH_BYTES`), and the worker stopped at every restart. At 32 hops such
a memory stays near 11 KB; at the default retelling factor news that far is held with
no confidence left (0.8 ** 32 rounds to 0.00)."""
MOST_ABOUT = 64
"""The most entities a memory is about, the first named first (actor, target, place, then the
payload's ids in order): each moves a relation of every perceiver, a version and a head, and
a loot list of 2,000 items opened before 1,000 characters wrote 4 million of them, 300 MB, in
10 s while its partition waited."""
MOST_FACTS = 64
"""The most facts a memory keeps (the first, as the world record keeps them): each perceiver
holds a copy, and 4,000 facts seen by a crowd of 3,000 made 554 MB of memories. The world
record keeps every fact an event makes true."""


class MemoryContext(Protocol):
    """What forming memories looks up, as the world stood just before the event."""

    def kind_of(self, entity_id: str) -> str:
        """The kind of an id in this event (`Catalogue.kind_of`)."""

    def name_of(self, entity_id: str) -> str:
        """What a character calls an id (`Catalogue.name_of`)."""

    def teller_belief(self, teller: str, belief_id: str) -> Memory | None:
        """The teller's own memory `belief_id` on this timeline as it holds it at the event
        (faded, retold and less sure), or None if they hold none or have forgotten it."""

    def knows(self, character: str, origin: str) -> bool:
        """Whether the character holds news of this origin at the event (not forgotten)."""

    def teller_news(self, teller: str, origin: str) -> Memory | None:
        """The teller's memory of news of this origin it passes on when it names none, as it
        holds it at the event (`knowing.news_passed_on`); None if it holds none."""

    def fact_origin(self, fact: Fact) -> str | None:
        """The origin of the event that made the world record hold `fact` as it stands; None if
        the record holds another value, or none."""


def belief_id(
    tenant_id: str, world_id: str, timeline_id: str, seq: int, character_id: str, kind: MemoryKind
) -> str:
    """The id of the `kind` memory a character formed at a position: 32 hex characters."""
    key = _position("belief", tenant_id, world_id, timeline_id, seq) + pack(character_id, kind)
    return hashlib.blake2b(key, digest_size=16).hexdigest()


def origin_at(tenant_id: str, world_id: str, timeline_id: str, seq: int) -> str:
    """The origin of what the event at a position shows (or a player's line claims)."""
    key = _position("origin", tenant_id, world_id, timeline_id, seq)
    return hashlib.blake2b(key, digest_size=16).hexdigest()


@lru_cache(maxsize=64)
def _position(space: str, tenant_id: str, world_id: str, timeline_id: str, seq: int) -> bytes:
    """The packed start of an id made at a position: packed once for the few ids an event
    makes there (the same bytes as packing the whole id at once)."""
    return pack(space, tenant_id, world_id, timeline_id, seq)


def origin_of(event: Event) -> str:
    """The origin of what `event` shows (or, for a player's line, claims)."""
    return origin_at(event.tenant_id, event.world_instance_id, event.timeline_id, event.seq)


def claim_origin(event: Event, facts: list[Fact], about: list[str]) -> str:
    """The origin of news told with no known memory behind it: the claim itself.

    The same facts about the same entities are the same news, whoever tells it, wherever, in
    whatever words (values compared as the world record compares them: `100` is `100.0`). News
    that claims no fact is told apart by its words as well (whitespace and case aside), so two
    different stories about the same people stay two.
    """
    claim = {
        "facts": sorted(
            {
                (
                    fact.subject,
                    fact.attribute,
                    orjson.dumps(canonical_json(fact.value), option=_SORTED).decode(),
                )
                for fact in facts
            }
        ),
        "about": sorted(set(about)),
        "words": None if facts else _claimed_words(event),
    }
    key = pack("claim", event.tenant_id, event.world_instance_id) + orjson.dumps(
        claim, option=_SORTED
    )
    return hashlib.blake2b(key, digest_size=16).hexdigest()


def _claimed_words(event: Event) -> str:
    """What tells a claim of no fact apart: its words (whitespace and case aside); without
    words as text, what it sent in their place, or its whole payload (every such claim was one
    news, and a listener told one took in none of the others)."""
    words = spoken_words(event)
    if words is not None:
        return " ".join(words.split()).casefold()
    field = SPOKEN_FIELDS.get(event.key, "")
    claimed = {key: value for key, value in event.payload.items() if key not in _CLAIM_FIELDS}
    sent = event.payload.get(field, claimed)  # `about` and `facts` are the claim's own, as sets
    return orjson.dumps(canonical_json(sent), option=_SORTED).decode()


_CLAIM_FIELDS = frozenset({"about", "facts"})
"""The payload's fields a claim holds apart from its words (`claim_origin`)."""


def form_memories(
    event: Event,
    perceptions: list[Perception],
    context: MemoryContext,
    policy: Policy,
    judged: Judging = RULES,
) -> list[Memory]:
    """The memories `event` forms for the characters who perceived it, in perception order.

    Each memory's feeling and arousal are `judged` (in model mode, by the model); an impression
    follows the feeling so judged."""
    formed = []
    sight: _Sight | None = None
    passed: _Passed | None = None
    for perception in perceptions:
        if event.key in CONVERSATION_KEYS:
            passed = passed or _passed_on(event, context)
            memory = _heard(event, perception, passed, context, policy)
        else:
            sight = sight or _sight(event, context)
            memory = _seen(event, perception, sight, policy)
        if memory is None:
            continue
        memory = judged.feeling(memory)
        formed.append(memory)
        impression = _impression(event, perception, memory, context, policy)
        if impression is not None:
            formed.append(impression)
    return formed


class _Sight(NamedTuple):
    """What every eyewitness of an event takes from it alike: worked out once per event."""

    kind: EventKind
    content: str
    about: list[str]
    origin: str
    facts: list[Fact]
    """The event's facts as the record keeps them: what they saw is so, never diverging."""


def _sight(event: Event, context: MemoryContext) -> _Sight:
    payload_ids = [
        entity for entity in _ids_in(event.payload.values()) if context.kind_of(entity) != UNKNOWN
    ]
    return _Sight(
        kind=event_kind(event.key),
        content=event_content(event, context.name_of),
        about=_unique([event.actor, event.target, event.location, *payload_ids]),
        origin=origin_of(event),
        facts=facts_as_recorded(event.facts),
    )


def _seen(event: Event, perception: Perception, sight: _Sight, policy: Policy) -> Memory:
    """What a character perceived with their own eyes."""
    return memory_at(
        event,
        perception.character_id,
        "event",
        policy,
        weigh(sight.kind, perception.part, "seen", policy),
        tells_of=sight.kind,
        content=sight.content,
        about=list(sight.about),
        source="seen",
        source_entity=None,
        hops=0,
        uncertain=False,
        facts=list(sight.facts),
        origin=sight.origin,
        lineage=[],
    )


class _Passed(NamedTuple):
    """The news a conversation passes on, alike for every listener: worked out once per event."""

    teller_belief: Memory | None
    """The teller's memory of it, when one stands behind it."""
    origin: str
    also: str | None = None
    """The news's other origin, when its facts were made true by one event: the claim's own
    (`claim_origin`) beside that event's, either of which a listener who knows it holds (told
    the claim before the record held it, or saw what made it true)."""


def _passed_on(event: Event, context: MemoryContext) -> _Passed:
    """What a conversation passes on: a player's line, news of its own; a `told`, the teller's
    memory it names (`_teller_belief`), else the news its claim is of (`_made_true_by`), through
    the teller's memory of that news when it names none (`MemoryContext.teller_news`): of the
    event that made it true, else of the claim (as the teller learned it before)."""
    if event.key == PLAYER_SAID:
        return _Passed(None, origin_of(event))
    teller_belief = _teller_belief(event, context)
    if teller_belief is not None:
        return _Passed(teller_belief, teller_belief.origin)
    facts = _claimed_facts(event, None)
    claim = claim_origin(event, facts, _heard_about(event, None))
    made = _made_true_by(facts, context)
    origin, also = (claim, None) if made is None else (made, claim)
    if event.actor is None or isinstance(event.payload.get("belief_id"), str):
        return _Passed(None, origin, also)  # no teller, or a named memory it does not hold
    told = context.teller_news(event.actor, origin)
    if told is None and also is not None:
        learned_before = context.teller_news(event.actor, also)  # the claim, before it was so
        if learned_before is not None:  # whoever saw what made it true knows it too
            return _Passed(learned_before, also, origin)
    return _Passed(told, origin, also)


def came_through(memory: Memory, character: str) -> bool:
    """Whether the news `memory` holds came through `character`: told by them, or by anyone
    they told it to (its lineage). Told back to them, it is their own story: none they take in
    (at a meeting, or a `told`)."""
    return character in tellers_of(memory)


def tellers_of(memory: Memory) -> list[str]:
    """Everyone the news `memory` holds came through (`came_through`)."""
    told_by = [] if memory.source_entity is None else [memory.source_entity]
    return [*told_by, *(step.entity_id for step in memory.lineage)]


def _heard(
    event: Event,
    perception: Perception,
    passed: _Passed,
    context: MemoryContext,
    policy: Policy,
) -> Memory | None:
    """What a listener (or a named witness) took from a conversation; None if known already,
    travelled `MAX_HOPS` already, or come through the listener (their own story told back).

    A player's line is a conversation with its listener, weighed as one; news told by a
    character is weighed by what it tells of, as heard.
    """
    speaker, teller_belief = event.actor, passed.teller_belief
    content = _heard_content(event, teller_belief, context)
    facts = _claimed_facts(event, teller_belief)
    kind = news_kind(content, facts) if teller_belief is None else told_of(teller_belief)
    source: Source
    if event.key == PLAYER_SAID:
        source = "player"
        weights = weigh("conversation", perception.part, "player", policy)
    elif teller_belief is None:
        source = "told"
        weights = weigh(kind, "heard", "told", policy)
    else:
        source = "rumour" if teller_belief.hops > 0 else "told"
        weights = weigh(kind, "heard", "told", policy, teller_belief.confidence)
    listener = perception.character_id
    if context.knows(listener, passed.origin) or (
        passed.also is not None and context.knows(listener, passed.also)
    ):
        return None
    if teller_belief is not None and teller_belief.hops >= MAX_HOPS:
        return None  # travelled as far as news goes
    if teller_belief is not None and came_through(teller_belief, perception.character_id):
        return None  # their own story back: they told it, as at a meeting (`worth_telling`)

    hops = 1 if teller_belief is None else teller_belief.hops + 1
    earlier_tellers = [] if teller_belief is None else teller_belief.lineage
    this_teller = (
        []
        if speaker is None
        else [Teller(entity_id=speaker, hops=hops, confidence=weights.confidence)]
    )
    return memory_at(
        event,
        perception.character_id,
        "knowledge",
        policy,
        weights,
        tells_of=kind,
        source=source,
        source_entity=speaker,
        hops=hops,
        lineage=[*earlier_tellers, *this_teller],
        origin=passed.origin,
        content=content,
        about=_unique([speaker, event.target, *_heard_about(event, teller_belief)]),
        facts=facts,
        uncertain=True,
    )


def _impression(
    event: Event,
    perception: Perception,
    memory: Memory,
    context: MemoryContext,
    policy: Policy,
) -> Memory | None:
    """How the target of someone else's act feels about them, if it moved them enough."""
    actor = event.actor
    if perception.part != "target" or actor is None or actor == perception.character_id:
        return None
    if memory.source in ("told", "rumour"):  # the teller did nothing to the listener
        return None
    if memory.feeling == 0 or abs(memory.feeling) < policy.memory.impression_threshold:
        return None
    how = "warmly" if memory.feeling > 0 else "badly"
    return trusted(  # `model_copy`, without its copying of what is replaced anyway
        Memory,
        memory.__dict__
        | {
            "belief_id": belief_id(
                event.tenant_id,
                event.world_instance_id,
                event.timeline_id,
                event.seq,
                perception.character_id,
                "impression",
            ),
            "kind": "impression",
            "content": f"I feel {how} about {context.name_of(actor)}",
            "about": [actor],
            "facts": [],
            "persistent": is_persistent(perception.character_id, "impression", policy),
        },
    )


def memory_at(
    event: Event,
    character_id: str,
    kind: MemoryKind,
    policy: Policy,
    weights: Weights,
    *,
    tells_of: EventKind,
    content: str,
    about: list[str],
    source: Source,
    source_entity: str | None,
    hops: int,
    uncertain: bool,
    facts: list[Fact],
    origin: str,
    lineage: list[Teller],
    belief: str | None = None,
    verdict: Verdict | None = None,
) -> Memory:
    """A memory formed at `event`'s position, with what every memory takes from it. Its id is
    `belief` if given (a rumour's, `rumour_rules.rumour_id`), else the one `character_id` forms
    of `kind` there (`belief_id`). The fields must be valid (a validated event and policy);
    what it is about and its facts are kept to the first `MOST_ABOUT` and `MOST_FACTS`."""
    if belief is None:
        belief = belief_id(
            event.tenant_id,
            event.world_instance_id,
            event.timeline_id,
            event.seq,
            character_id,
            kind,
        )
    return trusted(  # of valid fields, in declaration order: not checked again
        Memory,
        {
            "belief_id": belief,
            "kind": kind,
            "content": content,
            "about": about if len(about) <= MOST_ABOUT else about[:MOST_ABOUT],
            "source": source,
            "source_entity": source_entity,
            "hops": hops,
            "confidence": weights.confidence,
            "importance": weights.importance,
            "feeling": weights.feeling,
            "arousal": weights.arousal,
            "diverging": False,
            "uncertain": uncertain,
            "seq": event.seq,
            "game_time": event.game_time,
            "persistent": is_persistent(character_id, kind, policy),
            "character_id": character_id,
            "timeline_id": event.timeline_id,
            "facts": facts if len(facts) <= MOST_FACTS else facts[:MOST_FACTS],
            "origin": origin,
            "lineage": lineage,
            "story_minutes": None if event.game_time is None else story_minutes(event.game_time),
            "event_kind": tells_of,
            "verdict": verdict,
        },
    )


def dated(memories: list[Memory], minute: int | None) -> list[Memory]:
    """Memories formed at an event without `game_time`, dated by the story minute it happened
    at (`story_clock.minute_of`): undated, such a memory never faded and came first in recall,
    on a timeline whose clock ran on. Those dated by their event's story time stay as formed."""
    if minute is None:
        return memories
    return [
        memory
        if memory.story_minutes is not None
        else trusted(Memory, memory.__dict__ | {"story_minutes": minute})
        for memory in memories
    ]


def _teller_belief(event: Event, context: MemoryContext) -> Memory | None:
    """The teller's own news the `told` event names in `belief_id`, if they hold it.

    An impression is no news (the teller's own feeling, in their own first person): naming one
    names the memory of what happened that it was formed beside (same position, same origin),
    if the teller still holds it, else no known belief.
    """
    teller, named = event.actor, event.payload.get("belief_id")
    if teller is None or not isinstance(named, str):
        return None
    belief = context.teller_belief(teller, named)
    if belief is None or belief.kind != "impression":
        return belief
    for kind in _IMPRESSED_BY:
        beside = belief_id(
            event.tenant_id, event.world_instance_id, belief.timeline_id, belief.seq, teller, kind
        )
        news = context.teller_belief(teller, beside)
        if news is not None:
            return news
    return None


_IMPRESSED_BY: tuple[MemoryKind, ...] = ("event", "knowledge")
"""The kinds of memory an impression is formed beside: what its holder saw done to them, or
what a player said to them."""


def _made_true_by(facts: list[Fact], context: MemoryContext) -> str | None:
    """The origin of the one event that made every fact news claims what the world record
    says, if one did: news told with no known memory behind it is news of that event (whoever
    saw it knows it already), else of the claim itself (`claim_origin`)."""
    made = {context.fact_origin(fact) for fact in facts}
    return made.pop() if len(made) == 1 else None


def _heard_content(event: Event, teller_belief: Memory | None, context: MemoryContext) -> str:
    """The words said; when the game gave none, the teller's belief as it passes it on."""
    if teller_belief is not None and spoken_words(event) is None:
        return passed_on(teller_belief, context.name_of)
    return event_content(event, context.name_of)


def _heard_about(event: Event, teller_belief: Memory | None) -> list[str]:
    """Whom the news is about: the payload's `about`, else what the teller's belief was about."""
    if "about" in event.payload:
        return _ids_in([event.payload["about"]])
    return [] if teller_belief is None else teller_belief.about


def _claimed_facts(event: Event, teller_belief: Memory | None) -> list[Fact]:
    """What the news claims: the payload's `facts`, else what the teller's belief asserts.

    A claim that does not read as a fact is left out: it cannot be compared with the record.
    """
    claims = event.payload.get("facts")
    if claims is None:
        return [] if teller_belief is None else list(teller_belief.facts)
    return _read_claims(claims)[0]


def _read_claims(claims: object) -> tuple[list[Fact], list[int]]:
    """The claims of a `payload.facts` that read as facts, and the numbers (from 1) of those
    that do not; none of either when it is no list."""
    facts, unread = [], []
    for number, claim in enumerate(claims if isinstance(claims, list) else [], 1):
        try:
            facts.append(Fact.model_validate(claim))
        except ValidationError:
            unread.append(number)
    return facts, unread


def told_nothing(event: Event, context: MemoryContext) -> str | None:
    """The ack's note for a `told` that passes nothing, heard by nobody: it names a
    memory its teller does not hold (never held, forgotten, or held on another timeline: a
    save loaded since the game kept the id), and says no words and claims no fact. Its
    listener held "Mara told Tomas (belief_id: ...)", the id taken for the news; None for
    any other event."""
    named = event.payload.get("belief_id")
    if event.key != TOLD or not isinstance(named, str) or spoken_words(event) is not None:
        return None
    if _claimed_facts(event, None) or _teller_belief(event, context) is not None:
        return None
    return (
        f"told names memory {cut(named, MOST_QUOTED_CHARS)!r}, which"
        f" {event.actor or 'no teller'!r} does not hold, "
        "and says no words: nothing passed on"
    )


def unread_claims(event: Event) -> str | None:
    """The ack's note for the claims of a conversation's `payload.facts` that do not read as
    facts (left out: `_claimed_facts`); None if every one does. A claim with a typo ("attr")
    was dropped without a word, and its line never diverged from the record."""
    claims = event.payload.get("facts")
    if event.key not in CONVERSATION_KEYS or claims is None:
        return None
    if not isinstance(claims, list):
        return "payload.facts is not a list of claimed facts: no claim taken"
    unread = _read_claims(claims)[1]
    if not unread:
        return None
    return (
        f"claimed facts {', '.join(map(str, unread))} of {len(claims)} do not read as a fact "
        "(subject, attribute and value): left out"
    )


def unheard_words(event: Event) -> str | None:
    """The ack's note for a `told` whose words are not text (a localisation object, a list),
    or that names nobody to hear it (no target, no witnesses): it was acked with no word, its
    listener keeping the event described, or nobody anything. None for any other event (a
    player's line has the dialogue's notes: `dialogue.turn_of`)."""
    if event.key != TOLD:
        return None
    if event.target is None and not event.witnesses:
        return f"{event.key} names no listener (no target, no witnesses): nobody heard it"
    said = event.payload.get("content")
    if said is not None and not isinstance(said, str):
        return "payload.content is not text: its listener keeps the event described, not words said"
    return None


def is_persistent(character_id: str, kind: MemoryKind, policy: Policy) -> bool:
    """Whether the policy keeps this memory for the whole world, across timelines."""
    persistent = policy.memory.persistent
    return character_id in persistent.characters or kind in persistent.kinds


def _ids_in(values: Iterable[JsonValue]) -> list[str]:
    """The strings among `values` (and inside lists among them) that could be entity ids."""
    found: list[str] = []
    for value in values:
        candidates = value if isinstance(value, list) else [value]
        found += [
            item for item in candidates if isinstance(item, str) and 0 < len(item) <= MAX_ID_LENGTH
        ]
    return found


def _unique(entities: Iterable[str | None]) -> list[str]:
    """The entities in first-seen order, each once, without the blanks."""
    return list(dict.fromkeys(entity for entity in entities if entity is not None))
