"""A reference oracle: a deliberately naive, obviously-correct model of rumourmill's memory.

Written from SPEC.md, seed 001 and the README's rules, not from `projections/minds.py`,
`projections/sequencing.py`, `projections/timelines.py` or `projections/versions.py` (those are
what it checks). It keeps the whole list of events and every memory each event formed; a read
on a timeline is one fold over the events of its ancestry (its own, then each ancestor's up to
its branch point) in position order, with no index and no cache.

Only the rulebook is borrowed from the production core, as pure helpers: wording
(`event_content`, `retell`), weighing (`event_kind`, `weigh`), ids (`belief_id`, `origin_of`),
the catalogue's classification (`classify`, `display_name`) and the schema models. Who is where,
who perceives, which memories exist, "already knows", persistence, relations, caps, ordering,
diverging, the positions and the 404s are all kept here.

Choices the spec leaves open, taken as the production rules document them:
- a conversation (`told`, `player-said`) is heard by its target and named witnesses only, never
  by bystanders at the location and never by the speaker (`projections/perception.py`);
- declarations go to the world's catalogue in the order events are applied (world-wide, not
  per timeline), and persistent memories join the world-wide scope in that order too.

Rumours (`memory.spreading.enabled`) borrow the rulebook of `projections.rumours` (`meetings`,
`group_interval`, `groups`, `passed_at_meeting`, `passed_in_group`, `retold`) and keep the
state here, naively, from the same fold as everything else:
- a teller's news is its memories but impressions visible just before the event, newest
  first (by position, then by belief id, highest first, as README says), at most what may
  pass; what a listener knows is every origin among its memories visible before the
  event, plus what it has been told during the event;
- the group exchange comes first, once per game-time interval on a timeline's ancestry: the
  last exchange is the newest event of the ancestry that recorded one; members are the
  characters of the world's catalogue as applied before the event;
- then the meetings, in order, each pair (a, b): a tells b, then b tells a.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from pydantic import ValidationError

from projections.catalogue import classify, display_name
from projections.memories import belief_id, origin_of
from projections.policy import DEFAULT_POLICY
from projections.rumour_rules import (
    group_interval,
    groups,
    meetings,
    passed_at_meeting,
    passed_in_group,
    retold,
)
from projections.weighing import event_kind, weigh
from projections.wording import event_content, retell
from schemas import EntityDeclaration, Event, Fact
from schemas.memory import Memory, Teller
from schemas.policy import Policy

MOVEMENT = {
    "loreweaver.movement.location-entered",
    "loreweaver.movement.character-entered-location",
}
TOLD = "loreweaver.conversation.told"
PLAYER_SAID = "loreweaver.conversation.player-said"
CONVERSATION = {TOLD, PLAYER_SAID}
DECLARED = "world.entity-declared"
MET = "loreweaver.social.characters-met"
"""A meeting: with spreading on it passes news on; it is not news itself (no memory)."""
MAX_EVENT_BYTES = 256 * 1024
READ_FIELDS = (
    "belief_id",
    "kind",
    "content",
    "about",
    "source",
    "source_entity",
    "hops",
    "confidence",
    "importance",
    "feeling",
    "arousal",
    "diverging",
    "uncertain",
    "seq",
    "game_time",
    "persistent",
)


class OracleNotFound(Exception):
    """The read is a 404."""


@dataclass
class OMemory:
    """One memory as the oracle keeps it."""

    character: str
    timeline: str
    seq: int
    kind: str
    belief_id: str
    content: str
    about: list[str]
    source: str
    source_entity: str | None
    hops: int
    confidence: float
    importance: float
    feeling: float
    arousal: float
    uncertain: bool
    game_time: str | None
    persistent: bool
    facts: list[Fact]
    origin: str
    lineage: list[Teller]

    @property
    def tellers(self) -> list[str]:
        return [step.entity_id for step in self.lineage]

    def as_memory(self) -> Memory:
        """The production model of this memory, for the rulebook's helpers."""
        return Memory.model_construct(
            belief_id=self.belief_id,
            kind=self.kind,
            content=self.content,
            about=list(self.about),
            source=self.source,
            source_entity=self.source_entity,
            hops=self.hops,
            confidence=self.confidence,
            importance=self.importance,
            feeling=self.feeling,
            arousal=self.arousal,
            diverging=False,
            uncertain=self.uncertain,
            seq=self.seq,
            game_time=self.game_time,
            persistent=self.persistent,
            character_id=self.character,
            timeline_id=self.timeline,
            facts=list(self.facts),
            origin=self.origin,
            lineage=list(self.lineage),
            story_minutes=None,
        )

    @classmethod
    def of(cls, memory: Memory) -> OMemory:
        return cls(
            character=memory.character_id,
            timeline=memory.timeline_id,
            seq=memory.seq,
            kind=memory.kind,
            belief_id=memory.belief_id,
            content=memory.content,
            about=list(memory.about),
            source=memory.source,
            source_entity=memory.source_entity,
            hops=memory.hops,
            confidence=memory.confidence,
            importance=memory.importance,
            feeling=memory.feeling,
            arousal=memory.arousal,
            uncertain=memory.uncertain,
            game_time=memory.game_time,
            persistent=memory.persistent,
            facts=list(memory.facts),
            origin=memory.origin,
            lineage=list(memory.lineage),
        )

    def read(self, diverging: bool) -> dict[str, Any]:
        shown = {name: getattr(self, name) for name in READ_FIELDS if name != "diverging"}
        shown["about"] = list(self.about)
        shown["diverging"] = diverging
        return {name: shown[name] for name in READ_FIELDS}


@dataclass
class Applied:
    """One applied event and what it formed."""

    event: Event
    memories: list[OMemory]
    rumours: int = 0
    """How many of `memories` are rumours spread at the event (they come last)."""
    exchange: int | None = None
    """The game-time interval of the group exchange this event held, if it held one."""


@dataclass
class OTimeline:
    timeline: str
    parent: str | None = None
    after: int = 0
    attached: bool = False
    received: dict[int, Event] = field(default_factory=dict)
    top: int = 0
    acknowledged: int = 0

    @property
    def processed(self) -> int:
        return max(self.after if self.attached else 0, self.top)

    @property
    def waiting_count(self) -> int:
        return sum(1 for seq in self.received if seq > self.top)


@dataclass
class OWorld:
    timelines: dict[str, OTimeline] = field(default_factory=dict)
    applied: list[Applied] = field(default_factory=list)
    """Every applied event, in the order applied (the world's history as it happened)."""
    declarations: dict[str, dict[str, Any]] = field(default_factory=dict)


def json_equal(a: Any, b: Any) -> bool:
    """JSON equality: `true` is not `1`."""
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(json_equal(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(json_equal(a[k], b[k]) for k in a)
    return bool(a == b)


def _unique(items: Iterable[str | None]) -> list[str]:
    out: list[str] = []
    for item in items:
        if item is not None and item not in out:
            out.append(item)
    return out


def _ids_in(values: Iterable[Any]) -> list[str]:
    found: list[str] = []
    for value in values:
        for item in value if isinstance(value, list) else [value]:
            if isinstance(item, str) and 1 <= len(item) <= 128:
                found.append(item)
    return found


class Oracle:
    """Feed it raw messages in delivery order; ask it for reads."""

    def __init__(self, policy: Policy | None = None) -> None:
        self.policy = policy or DEFAULT_POLICY
        self.worlds: dict[tuple[str, str], OWorld] = {}

    # ---------------------------------------------------------------- sequencing

    def deliver(self, raw: bytes) -> list[tuple[str | None, int | None, str]]:
        """Take one message in: its own outcome first, then every event it released."""
        if len(raw) > MAX_EVENT_BYTES:
            return [(None, None, "rejected")]
        try:
            event = Event.model_validate_json(raw)
        except ValidationError:
            return [(None, None, "rejected")]
        world = self.worlds.setdefault((event.tenant_id, event.world_instance_id), OWorld())
        me = (event.timeline_id, event.seq)
        line = world.timelines.get(event.timeline_id)
        started = line is not None and (line.attached or line.top > 0)
        branch = event.branch
        if line is not None and started:
            if branch is not None and (
                not line.attached
                or branch.parent_timeline_id != line.parent
                or branch.after_seq != line.after
            ):
                return [(*me, "rejected")]
        elif branch is not None:
            if branch.parent_timeline_id not in world.timelines:
                return [(*me, "rejected")]
            if self._descends(world, branch.parent_timeline_id, event.timeline_id):
                return [(*me, "rejected")]
            if event.seq != branch.after_seq + 1:
                return [(*me, "rejected")]
        if line is None:
            line = OTimeline(event.timeline_id)
        known = event.timeline_id in world.timelines
        if known and (event.seq <= line.processed or event.seq in line.received):
            return [(*me, "duplicate")]
        if (
            not self._can_apply(world, line, event.seq, branch)
            and line.waiting_count >= self.policy.sequencing.max_deferred
        ):
            return [(*me, "rejected")]
        # accepted: the timeline now exists, attached if this is its branch event
        world.timelines[event.timeline_id] = line
        if branch is not None and not line.attached:
            line.parent, line.after, line.attached = (
                branch.parent_timeline_id,
                branch.after_seq,
                True,
            )
            line.acknowledged = max(line.acknowledged, branch.after_seq)
        line.acknowledged = max(line.acknowledged, event.seq)
        line.received[event.seq] = event
        first = "processed" if self._can_apply(world, line, event.seq, None) else "deferred"
        released = self._run(world, event.timeline_id)
        assert (first == "processed") == (me in released)
        return [(*me, first), *((t, s, "processed") for t, s in released if (t, s) != me)]

    def _descends(self, world: OWorld, timeline: str, ancestor: str) -> bool:
        current: str | None = timeline
        while current is not None:
            if current == ancestor:
                return True
            line = world.timelines.get(current)
            current = line.parent if line is not None and line.attached else None
        return False

    def _reached(self, world: OWorld, timeline: str, seq: int) -> bool:
        """Whether `timeline` has everything up to `seq` of its visible history applied."""
        if seq == 0:
            return True
        line = world.timelines[timeline]
        if line.attached and seq <= line.after:
            assert line.parent is not None
            return self._reached(world, line.parent, seq)
        return line.top >= seq

    def _can_apply(self, world: OWorld, line: OTimeline, seq: int, branch: Any) -> bool:
        if seq != line.processed + 1 and not (branch is not None and not line.attached):
            return False
        parent, after = (line.parent, line.after) if line.attached else (None, 0)
        if branch is not None and not line.attached:
            parent, after = branch.parent_timeline_id, branch.after_seq
            if seq != after + 1:
                return False
        if parent is not None and line.top <= after:
            return self._reached(world, parent, after)
        return True

    def _run(self, world: OWorld, start: str) -> list[tuple[str, int]]:
        """Apply everything that can be applied, the delivered timeline first."""
        released: list[tuple[str, int]] = []
        progress = True
        while progress:
            progress = False
            order = [start, *self._children_order(world, start)]
            order += sorted(t for t in world.timelines if t not in order)
            for name in order:
                line = world.timelines[name]
                while line.processed + 1 in line.received and self._can_apply(
                    world, line, line.processed + 1, None
                ):
                    event = line.received[line.processed + 1]
                    self._apply(world, event)
                    line.top = event.seq
                    released.append((name, event.seq))
                    progress = True
        return released

    def _children_order(self, world: OWorld, start: str) -> list[str]:
        order: list[str] = []
        frontier = [start]
        while frontier:
            current = frontier.pop(0)
            kids = sorted(
                t for t, line in world.timelines.items() if line.attached and line.parent == current
            )
            for kid in kids:
                if kid not in order and kid != start:
                    order.append(kid)
                    frontier.append(kid)
        return order

    # ---------------------------------------------------------------- ancestry and folds

    def ancestry(self, world: OWorld, timeline: str, upto: int) -> list[tuple[str, int]]:
        segments = [(timeline, upto)]
        line = world.timelines[timeline]
        while line.attached and line.parent is not None:
            segments.append((line.parent, min(line.after, segments[-1][1])))
            line = world.timelines[line.parent]
        return segments

    def history(self, world: OWorld, segments: list[tuple[str, int]]) -> list[Applied]:
        """The applied events a timeline sees, in position order (seqs never overlap)."""
        limits = dict(segments)
        seen = [
            item
            for item in world.applied
            if item.event.timeline_id in limits and item.event.seq <= limits[item.event.timeline_id]
        ]
        return sorted(seen, key=lambda item: item.event.seq)

    def _fold(self, world: OWorld, segments: list[tuple[str, int]]) -> dict[str, Any]:
        """One pass over the visible history: where everyone is, the record, the memories."""
        where: dict[str, str] = {}
        record: dict[tuple[str, str], Any] = {}
        memories: list[OMemory] = []
        for item in self.history(world, segments):
            event = item.event
            if event.key in MOVEMENT and event.actor is not None and event.location is not None:
                where[event.actor] = event.location
            if self.policy.memory.world:
                for fact in event.facts:
                    record[(fact.subject, fact.attribute)] = fact.value
            memories += [memory for memory in item.memories if not memory.persistent]
        memories += [
            memory for item in world.applied for memory in item.memories if memory.persistent
        ]
        return {"where": where, "record": record, "memories": memories}

    # ---------------------------------------------------------------- memory formation

    def _apply(self, world: OWorld, event: Event) -> None:
        policy = self.policy
        segments = self.ancestry(world, event.timeline_id, event.seq - 1)
        before = self._fold(world, segments)
        view = dict(world.declarations)
        for entity, declared in event.entities.items():
            view[entity] = view.get(entity, {}) | declared.model_dump(exclude_none=True)
        declarations = {k: EntityDeclaration.model_validate(v) for k, v in view.items()}

        def kind_of(entity: str) -> str:
            return classify(entity, event.players, declarations, policy)

        def name_of(entity: str) -> str:
            return display_name(entity, declarations)

        formed: list[OMemory] = []
        for character, part in self._perceivers(event, kind_of, before["where"]):
            memory = (
                self._heard(event, character, part, before["memories"], name_of)
                if event.key in CONVERSATION
                else self._seen(event, character, part, kind_of, name_of)
            )
            if memory is None:
                continue
            formed.append(memory)
            actor = event.actor
            if (
                part == "target"
                and actor is not None
                and actor != character
                and memory.feeling != 0
                and abs(memory.feeling) >= policy.memory.impression_threshold
            ):
                how = "warmly" if memory.feeling > 0 else "badly"
                formed.append(
                    OMemory(
                        **{
                            **vars(memory),
                            "kind": "impression",
                            "belief_id": self._id(event, character, "impression"),
                            "content": f"I feel {how} about {name_of(actor)}",
                            "about": [actor],
                            "facts": [],
                            "persistent": self._persistent(character, "impression"),
                        }
                    )
                )
        applied = Applied(event, formed)
        rumours = self._spread(world, event, segments, before, applied, kind_of, name_of)
        applied.rumours = len(rumours)
        formed += rumours
        world.applied.append(applied)
        for entity, declared in event.entities.items():
            world.declarations[entity] = world.declarations.get(entity, {}) | declared.model_dump(
                exclude_none=True
            )

    # ---------------------------------------------------------------- rumours

    def _spread(
        self,
        world: OWorld,
        event: Event,
        segments: list[tuple[str, int]],
        before: dict[str, Any],
        applied: Applied,
        kind_of: Any,
        name_of: Any,
    ) -> list[OMemory]:
        """The rumours `event` spreads, from what everyone knew just before it."""
        policy = self.policy
        spreading = policy.memory.spreading
        if not policy.memory.npc or not spreading.enabled:
            return []
        visible: list[OMemory] = before["memories"]
        heard: list[OMemory] = []
        told: set[tuple[str, str]] = set()

        def mind(character: str, limit: int) -> list[Memory]:
            news = [m for m in visible if m.character == character and m.kind != "impression"]
            news.sort(key=lambda m: (m.seq, m.belief_id), reverse=True)
            return [m.as_memory() for m in news[:limit]]

        def knows(character: str, origin: str) -> bool:
            return (character, origin) in told or any(
                m.character == character and m.origin == origin for m in visible
            )

        def tell(memory: Memory, teller: str, listener: str) -> None:
            heard.append(OMemory.of(retold(memory, teller, listener, event, policy, name_of)))
            told.add((listener, memory.origin))

        minutes = event.story_minutes
        if minutes is not None:
            interval = group_interval(minutes, policy)
            exchanges = [
                item.exchange for item in self.history(world, segments) if item.exchange is not None
            ]
            if not exchanges or exchanges[-1] < interval:
                applied.exchange = interval
                members = {
                    entity: EntityDeclaration.model_validate(declared)
                    for entity, declared in world.declarations.items()
                    if kind_of(entity) == "character"
                }
                limit = spreading.group_exchange_limit
                for group in groups(members, policy).values():
                    if len(group) < 2:
                        continue
                    minds = {member: mind(member, limit) for member in group}
                    for teller, listener, memory in passed_in_group(minds, knows, policy):
                        tell(memory, teller, listener)
        present = (
            set()
            if event.location is None
            else {who for who, place in before["where"].items() if place == event.location}
        )
        for one, other in meetings(event, present, kind_of, policy):
            for teller, listener in ((one, other), (other, one)):
                passed = passed_at_meeting(
                    mind(teller, spreading.per_meeting),
                    listener,
                    lambda origin, listener=listener: knows(listener, origin),
                    policy,
                )
                for memory in passed:
                    tell(memory, teller, listener)
        return heard

    def _perceivers(
        self, event: Event, kind_of: Any, where: dict[str, str]
    ) -> list[tuple[str, str]]:
        memory = self.policy.memory
        if not memory.npc or event.key in (DECLARED, MET):
            return []
        if event.key in MOVEMENT and not memory.remember_movement:
            return []
        conversation = event.key in CONVERSATION
        candidates = [(event.actor, "actor"), (event.target, "target")]
        if event.witnesses is not None:
            candidates += [(w, "witness") for w in sorted(set(event.witnesses))]
        elif (
            not conversation and event.location is not None and memory.perception_location_fallback
        ):
            present = sorted(who for who, place in where.items() if place == event.location)
            candidates += [(who, "witness") for who in present]
        out: list[tuple[str, str]] = []
        taken: set[str] = set()
        for character, part in candidates:
            if character is None or character in taken:
                continue
            if conversation and character == event.actor:
                continue
            if kind_of(character) != "character":
                continue
            taken.add(character)
            out.append((character, part))
        return out

    def _id(self, event: Event, character: str, kind: str) -> str:
        return belief_id(
            event.tenant_id,
            event.world_instance_id,
            event.timeline_id,
            event.seq,
            character,
            kind,  # type: ignore[arg-type]
        )

    def _persistent(self, character: str, kind: str) -> bool:
        persistent = self.policy.memory.persistent
        return character in persistent.characters or kind in persistent.kinds

    def _seen(self, event: Event, character: str, part: str, kind_of: Any, name_of: Any) -> OMemory:
        weights = weigh(event_kind(event.key), part, "seen", self.policy)  # type: ignore[arg-type]
        payload_ids = [i for i in _ids_in(event.payload.values()) if kind_of(i) != "unknown"]
        return OMemory(
            character=character,
            timeline=event.timeline_id,
            seq=event.seq,
            kind="event",
            belief_id=self._id(event, character, "event"),
            content=event_content(event, name_of),
            about=_unique([event.actor, event.target, event.location, *payload_ids]),
            source="seen",
            source_entity=None,
            hops=0,
            confidence=weights.confidence,
            importance=weights.importance,
            feeling=weights.feeling,
            arousal=weights.arousal,
            uncertain=False,
            game_time=event.game_time,
            persistent=self._persistent(character, "event"),
            facts=list(event.facts),
            origin=origin_of(event),
            lineage=[],
        )

    def _heard(
        self,
        event: Event,
        character: str,
        part: str,
        visible: list[OMemory],
        name_of: Any,
    ) -> OMemory | None:
        teller: OMemory | None = None
        if event.key == PLAYER_SAID:
            source = "player"
            weights = weigh("conversation", part, "player", self.policy)  # type: ignore[arg-type]
        else:
            named = event.payload.get("belief_id")
            if event.actor is not None and isinstance(named, str):
                held = [m for m in visible if m.character == event.actor and m.belief_id == named]
                teller = held[0] if held else None
            source = "rumour" if teller is not None and teller.hops > 0 else "told"
            weights = weigh(
                "conversation",
                part,  # type: ignore[arg-type]
                "told",
                self.policy,
                None if teller is None else teller.confidence,
            )
        origin = origin_of(event) if teller is None else teller.origin
        hops = 1 if teller is None else teller.hops + 1
        if any(m.character == character and m.origin == origin for m in visible):
            return None
        spoken_field = "text" if event.key == PLAYER_SAID else "content"
        words = event.payload.get(spoken_field)
        spoken = isinstance(words, str) and bool(words.strip())
        if teller is not None and not spoken:
            content = retell(teller.content)
        else:
            content = event_content(event, name_of)
        if "about" in event.payload:
            about_more = _ids_in([event.payload["about"]])
        else:
            about_more = [] if teller is None else teller.about
        claims = event.payload.get("facts")
        if claims is None:
            facts = [] if teller is None else list(teller.facts)
        else:
            facts = []
            for claim in claims if isinstance(claims, list) else []:
                try:
                    facts.append(Fact.model_validate(claim))
                except ValidationError:
                    continue
        return OMemory(
            character=character,
            timeline=event.timeline_id,
            seq=event.seq,
            kind="knowledge",
            belief_id=self._id(event, character, "knowledge"),
            content=content,
            about=_unique([event.actor, event.target, *about_more]),
            source=source,
            source_entity=event.actor,
            hops=hops,
            confidence=weights.confidence,
            importance=weights.importance,
            feeling=weights.feeling,
            arousal=weights.arousal,
            uncertain=True,
            game_time=event.game_time,
            persistent=self._persistent(character, "knowledge"),
            facts=facts,
            origin=origin,
            lineage=[
                *([] if teller is None else teller.lineage),
                *(
                    []
                    if event.actor is None
                    else [Teller(entity_id=event.actor, hops=hops, confidence=weights.confidence)]
                ),
            ],
        )

    # ---------------------------------------------------------------- the read

    def timeline_ids(self, tenant: str, world_id: str) -> list[str]:
        world = self.worlds.get((tenant, world_id))
        return [] if world is None else sorted(world.timelines)

    def visible_memories(
        self, tenant: str, world_id: str, timeline: str, npc: str
    ) -> list[OMemory]:
        """Every memory of `npc` a read on `timeline` sees now (before caps)."""
        world = self.worlds.get((tenant, world_id))
        if world is None or timeline not in world.timelines:
            return []
        line = world.timelines[timeline]
        folded = self._fold(world, self.ancestry(world, timeline, line.processed))
        return [m for m in folded["memories"] if m.character == npc]

    def read(self, tenant: str, world_id: str, timeline: str, npc: str) -> dict[str, Any]:
        world = self.worlds.get((tenant, world_id))
        if world is None or timeline not in world.timelines:
            raise OracleNotFound(timeline)
        line = world.timelines[timeline]
        folded = self._fold(world, self.ancestry(world, timeline, line.processed))
        mine = [m for m in folded["memories"] if m.character == npc]
        location = folded["where"].get(npc)
        if not mine and location is None:
            raise OracleNotFound(npc)
        record = folded["record"]

        def diverging(memory: OMemory) -> bool:
            return any(
                (f.subject, f.attribute) in record
                and not json_equal(record[(f.subject, f.attribute)], f.value)
                for f in memory.facts
            )

        events = sorted(
            (m for m in mine if m.kind == "event"), key=lambda m: (m.seq, m.belief_id), reverse=True
        )[:20]
        beliefs = sorted(
            (m for m in mine if m.kind != "event"),
            key=lambda m: (-m.importance, -m.seq, m.belief_id),
        )[:50]
        totals: dict[str, list[Any]] = {}
        for memory in mine:
            for entity in _unique([*memory.about, memory.source_entity]):
                if entity == npc:
                    continue
                total = totals.setdefault(entity, [[], 0, 0])
                total[0].append(memory.feeling)
                total[1] += 1
                total[2] = max(total[2], memory.seq)
        ordered = sorted(totals.items(), key=lambda item: (-item[1][1], -item[1][2], item[0]))
        relations = [
            {
                "entity_id": entity,
                "feeling": mean_feeling(feelings),
                "memories": count,
                "last_seq": last,
            }
            for entity, (feelings, count, last) in ordered[:50]
        ]
        return {
            "world_instance_id": world_id,
            "timeline_id": timeline,
            "npc_id": npc,
            "acknowledged_seq": line.acknowledged,
            "processed_seq": line.processed,
            "location": location,
            "beliefs": [m.read(diverging(m)) for m in beliefs],
            "relations": relations,
            "recollections": [m.read(diverging(m)) for m in events],
        }


def mean_feeling(feelings: list[float]) -> Fraction:
    """The exact mean (compared with the read's 2-decimal rounding by `same_feeling`)."""
    return sum((Fraction(str(f)) for f in feelings), Fraction(0)) / len(feelings)


def same_feeling(shown: float, exact: Fraction) -> bool:
    """`shown` is `exact` rounded to 2 decimals (either neighbour when exactly on a half)."""
    scaled = exact * 100
    low = scaled.numerator // scaled.denominator
    candidates = {low, low + 1} if scaled - low == Fraction(1, 2) else {round(scaled)}
    return any(
        abs(Fraction(str(shown)) - Fraction(c, 100)) < Fraction(1, 10**9) for c in candidates
    )


def compare_reads(actual: dict[str, Any], expected: dict[str, Any]) -> list[str]:
    """The differences between a production read and the oracle's, as plain lines."""
    problems: list[str] = []
    if list(actual) != list(expected):
        problems.append(f"keys {list(actual)} != {list(expected)}")
    for name in expected:
        if name == "relations":
            continue
        if actual.get(name) != expected[name]:
            problems.append(f"{name}: production {actual.get(name)!r} != oracle {expected[name]!r}")
    got, want = actual.get("relations", []), expected["relations"]
    plain = [(r["entity_id"], r["memories"], r["last_seq"]) for r in got]
    if plain != [(r["entity_id"], r["memories"], r["last_seq"]) for r in want]:
        problems.append(f"relations: production {got!r} != oracle {want!r}")
    else:
        for shown, expected_relation in zip(got, want, strict=True):
            if not same_feeling(shown["feeling"], expected_relation["feeling"]):
                problems.append(
                    f"relation {shown['entity_id']} feeling {shown['feeling']} != "
                    f"{float(expected_relation['feeling'])}"
                )
    return problems
