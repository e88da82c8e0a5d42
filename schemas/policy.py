"""The policy: one validated document per world that sets how rumourmill treats it.

Policies are written as partial JSON documents and layered: the built-in defaults, then the
tenant's default, then the world's own (`merge_policy`). Every setting is checked on the way
in, and a misspelt key or a value out of range is refused with its location named (for
example `memory.spreading.enabld`), so a typo can never silently fall back to a default.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, Self

import orjson
from pydantic import AfterValidator, Field, StringConstraints, model_validator

from schemas.events import AsInteger, Contract, Identifier
from schemas.memory import EventKind, Feeling, MemoryKind, Share

Part = Literal["actor", "target", "witness"]
"""A character's part in an event: who did it, to whom, or who saw or overheard it."""

WeighedPart = Literal["actor", "target", "witness", "heard"]
"""A part as weighing sees it: a part in the event, or `heard` for whoever learned of it as
news from a character (told, or a rumour), whatever their part in the telling."""

Learned = Literal["seen", "told", "player"]
"""How a character learned something (a rumour is something told, further down a chain)."""


class SequencingPolicy(Contract):
    """How many events a timeline may hold waiting behind a gap before further ones are
    refused (however far ahead of the gap they are)."""

    max_deferred: Annotated[int, Field(ge=0, le=100_000), AsInteger] = 1000


def _unsigned_zero(value: float) -> float:
    """-0.0 as 0.0: JSON may carry it, and a memory given it was stored and read `-0.0`."""
    return value + 0.0


GivenShare = Annotated[Share, AfterValidator(_unsigned_zero)]
"""A share the policy gives memories: an importance, an arousal, a confidence."""
GivenFeeling = Annotated[Feeling, AfterValidator(_unsigned_zero)]
"""A feeling the policy gives memories."""


class Impact(Contract):
    """How an event hits a character: how much it matters, how it feels, how it stirs."""

    importance: GivenShare
    feeling: GivenFeeling
    arousal: GivenShare


class Impacts(Contract):
    """The impact of one kind of event for each part a character can have in it, and on
    whoever hears of it as news."""

    actor: Impact
    target: Impact
    witness: Impact
    heard: Impact

    def for_part(self, part: WeighedPart) -> Impact:
        """The impact on a character in `part`."""
        impact: Impact = getattr(self, part)
        return impact


ImpactValues = tuple[float, float, float]


def _impact(values: ImpactValues) -> Impact:
    importance, feeling, arousal = values
    return Impact(importance=importance, feeling=feeling, arousal=arousal)


def _row(
    actor: ImpactValues, target: ImpactValues, witness: ImpactValues, heard: ImpactValues
) -> Impacts:
    """One line of the weighing table, written as (importance, feeling, arousal) per part."""
    return Impacts(
        actor=_impact(actor),
        target=_impact(target),
        witness=_impact(witness),
        heard=_impact(heard),
    )


class WeighingTable(Contract):
    """Rules weighing: (importance, feeling, arousal) by kind of event and part in it.

    The defaults of the conversation target and the fight witness reproduce the example
    runtime read in the README. News heard of an event (`heard`) weighs less than the sight
    of it, and stirs less.
    """

    #                       actor            target            witness           heard
    theft: Impacts = _row((0.6, 0.2, 0.6), (0.9, -0.8, 0.8), (0.5, -0.4, 0.5), (0.4, -0.3, 0.3))
    fight: Impacts = _row((0.7, -0.2, 0.8), (0.9, -0.8, 0.9), (0.6, -0.3, 0.7), (0.5, -0.2, 0.4))
    threat: Impacts = _row((0.4, -0.2, 0.5), (0.7, -0.6, 0.7), (0.4, -0.3, 0.4), (0.3, -0.2, 0.3))
    help: Impacts = _row((0.5, 0.4, 0.3), (0.8, 0.7, 0.5), (0.4, 0.3, 0.2), (0.3, 0.2, 0.1))
    gift: Impacts = _row((0.4, 0.3, 0.2), (0.7, 0.6, 0.4), (0.3, 0.2, 0.1), (0.3, 0.1, 0.1))
    conversation: Impacts = _row((0.3, 0.1, 0.2), (0.5, 0.2, 0.3), (0.3, 0.0, 0.2), (0.2, 0.0, 0.1))
    movement: Impacts = _row((0.1, 0.0, 0.1), (0.2, 0.0, 0.2), (0.1, 0.0, 0.1), (0.1, 0.0, 0.1))
    generic: Impacts = _row((0.3, 0.0, 0.2), (0.4, 0.0, 0.3), (0.2, 0.0, 0.1), (0.2, 0.0, 0.1))

    def for_kind(self, kind: EventKind) -> Impacts:
        """The line of `kind`."""
        row: Impacts = getattr(self, kind)
        return row


class ConfidencePolicy(Contract):
    """How sure a character is of what it learned, by how it learned it."""

    seen: GivenShare = 0.9
    told: GivenShare = 0.8
    """Told by a character whose own belief is unknown; a known belief is retold instead."""
    player: GivenShare = 0.7

    def of(self, learned: Learned) -> float:
        """The confidence of something learned that way."""
        confidence: float = getattr(self, learned)
        return confidence


class PersistencePolicy(Contract):
    """Memories kept for the whole world, visible from every timeline of it: every memory of a
    character in `characters`, and every memory of a kind in `kinds` whoever holds it (either
    list keeps a memory: `kinds` alone makes that kind persistent for every character)."""

    characters: list[Identifier] = []  # pydantic copies a default per instance; the schema shows it
    kinds: list[MemoryKind] = []


class SpreadingPolicy(Contract):
    """Whether and how characters pass memories on by themselves when they meet: each other
    setting here rules that spreading alone (`distortion` too: what a `told` event passes is
    never distorted), so none takes effect while `enabled` is false."""

    enabled: bool = False
    group_field: Annotated[str, StringConstraints(min_length=1, max_length=64)] = "group"
    group_interval_minutes: Annotated[int, Field(ge=1, le=1_000_000), AsInteger] = 240
    """The length of a group's game-time interval, in story minutes: each group exchanges once
    per interval (intervals are counted from day 0, 00:00)."""
    group_exchange_limit: Annotated[int, Field(ge=0, le=1000), AsInteger] = 3
    per_meeting: Annotated[int, Field(ge=0, le=1000), AsInteger] = 3
    distortion: bool = False


Factor = Annotated[float, Field(gt=0.0, le=1000.0)]
"""A positive multiplier or length."""


class RetentionPolicy(Contract):
    """How memories fade with story time: retention = 0.5 ^ (elapsed days / half-life).
    variation_low must not exceed variation_high;
    forgotten_below must not exceed vivid_from."""

    half_life_days: Factor = 6.0
    """The half-life of an unimportant event (importance step 1), in story days."""
    step_factor: Factor = 2.0
    """Each importance step above 1 multiplies the half-life by this."""
    belief_factor: Factor = 4.0
    """Beliefs (kinds `knowledge` and `impression`) last this many times longer."""
    variation_low: Factor = 0.8
    """Each memory's half-life is multiplied by a value in [low, high] drawn from its id."""
    variation_high: Factor = 1.2
    """The top of that range."""
    reinforcement_factor: Factor = 1.5
    """Each recall restarts a memory's clock and multiplies its half-life by this."""
    vivid_from: Share = 0.5
    """A memory is vivid at this retention or above, faded below it."""
    forgotten_below: Share = 0.15
    """A memory is forgotten below this retention."""
    never_forgotten_step: Annotated[int, Field(ge=1, le=5), AsInteger] | None = 5
    """From this importance step on a memory never falls below faded; null: any may be lost."""

    @model_validator(mode="after")
    def _ranges_are_ordered(self) -> Self:
        if self.variation_low > self.variation_high:
            raise ValueError("variation_low must not exceed variation_high")
        if self.forgotten_below > self.vivid_from:
            raise ValueError("forgotten_below must not exceed vivid_from")
        return self


Weight = Annotated[float, Field(ge=0.0, le=100.0)]


class ChoiceWeights(Contract):
    """How recall chooses among its candidates: score = the sum of each share x its weight."""

    relevance: Weight = 1.0
    """How well the searches found it (fused rank, 0 to 1)."""
    importance: Weight = 0.5
    retention: Weight = 0.5
    """How much of it is still held: its retention, 1 when fresh, less as it fades."""
    recency: Weight = 0.25
    """1 / (1 + story days since it happened)."""


class RecallPolicy(Contract):
    """How recall narrows its searches down to the memories it answers."""

    over_retrieve: Annotated[int, Field(ge=1, le=60), AsInteger] = 3
    """Candidates kept after fusion: this x limit, at most 60."""
    weights: ChoiceWeights = ChoiceWeights()


class DialoguePolicy(Contract):
    """Short-term dialogue: the last lines of each conversation scope, word for word."""

    enabled: bool = True
    """Capture `player-said` and `npc-replied` lines; false: nothing is captured."""
    turns_kept: Annotated[int, Field(ge=1, le=100), AsInteger] = 10
    """Turns a scope shows, the newest."""
    max_line_chars: Annotated[int, Field(ge=16, le=100_000), AsInteger] = 1000
    """A longer line is cut to this many characters (ending in an ellipsis)."""
    expiry_hours: Annotated[float, Field(gt=0, le=10_000)] = 12.0
    """A scope's turns are hidden this long (real time) after its last turn."""
    summarised_expiry_hours: Annotated[float, Field(gt=0, le=10_000)] = 24.0
    """The same, once the scope has a summary, which extends the lifetime: never to less than
    `expiry_hours`."""

    @property
    def summarised_hours(self) -> float:
        """How long a summarised scope lives: a summary never shortens it (a policy of
        `expiry_hours: 36` alone, the summarised default of 24 beside it, made turns vanish 12 h
        early once summarised; refused, it dropped a whole document a release had taken)."""
        return max(self.expiry_hours, self.summarised_expiry_hours)


Tokens = Annotated[int, Field(ge=10, le=1_000_000), AsInteger]
"""A length of text in tokens (of the chronicle's tokenizer)."""


class ChroniclePolicy(Contract):
    """The chronicle: the story so far in a size a prompt
    can hold, made from a character's records when read.
    chapter_tokens must not exceed short_term_tokens;
    condensed_tokens must not exceed long_term_tokens."""

    short_term_tokens: Tokens = 1500
    """The digests (one per record) roll into a chapter once their text passes this."""
    long_term_tokens: Tokens = 2500
    """The chapters condense into the condensed chapter once their text passes this."""
    chapter_tokens: Tokens = 300
    """What a chapter's summary may hold."""
    condensed_tokens: Tokens = 600
    """What the condensed chapter may hold."""

    @model_validator(mode="after")
    def _summaries_are_shorter(self) -> Self:
        if self.chapter_tokens > self.short_term_tokens:
            raise ValueError("chapter_tokens must not exceed short_term_tokens")
        if self.condensed_tokens > self.long_term_tokens:
            raise ValueError("condensed_tokens must not exceed long_term_tokens")
        return self


PatternKind = Annotated[str, StringConstraints(min_length=1, max_length=64)]


class RefereePolicy(Contract):
    """How the rules referee weighs a player's line against a belief it challenges.

    The line's pull = (1 - the belief's confidence) + `trust_weight` x the character's feeling
    toward the player + `truth_weight` when the line's claimed facts agree with the world
    record (minus it when they contradict it). `convinced` from `convinced_from`, `doubting`
    from `doubting_from`, `unconvinced` below.
    doubting_from must not exceed convinced_from.
    """

    weaken: Share = 0.5
    """A convinced character holds the old belief this many times as firmly; a doubting one
    holds the line this many times as firmly as a believed line."""
    trust_weight: Weight = 0.5
    truth_weight: Weight = 0.25
    convinced_from: Annotated[float, Field(ge=-100.0, le=100.0)] = 0.4
    doubting_from: Annotated[float, Field(ge=-100.0, le=100.0)] = 0.1

    @model_validator(mode="after")
    def _thresholds_are_ordered(self) -> Self:
        if self.doubting_from > self.convinced_from:
            raise ValueError("doubting_from must not exceed convinced_from")
        return self


InventionPolicy = Literal["allow", "flag", "reject"]
"""What a reply that invents a name gets (section 12's invention check)."""


class ModelPolicy(Contract):
    """Model judgements (`weighing: "model"`): how long an event may wait for the model."""

    deadline_ms: Annotated[int, Field(ge=1, le=600_000), AsInteger] = 2000
    """An event's judgements wait at most this long for the model (all asked at once); those
    still unanswered then are made by the rules, so a partition never waits longer."""


class MemoryPolicy(Contract):
    """Who remembers what, how strongly, and how news travels."""

    world: bool = True
    """Keep the world record (the facts events make true); false: no fact is recorded, so no
    memory is judged `diverging` but against facts recorded before it was set."""
    npc: bool = True
    """Keep the characters' memories; false: no memory is formed, no line refereed and no
    rumour spread, while the world record, whereabouts and dialogue are kept."""
    perception_location_fallback: bool = True
    """With no named witnesses, the characters known to be at the location perceive."""
    remember_movement: bool = False
    """Movement only teaches where characters are, unless this is set."""
    weighing: Literal["rules", "model"] = "rules"
    """`rules`: by the `weights` table. `model`: the model judges each memory's feeling and
    arousal and retells rumours (the rest stays rules); the rules answer whatever it cannot."""
    model: ModelPolicy = ModelPolicy()
    entity_patterns: dict[PatternKind, list[str]] = {
        "character": ["npc-*"],
        "place": ["loc-*"],
        "item": ["item-*"],
    }
    """Kind -> fnmatch patterns, for ids never declared; the first kind that matches wins."""
    weights: WeighingTable = WeighingTable()
    confidence: ConfidencePolicy = ConfidencePolicy()
    retelling_factor: Share = 0.8
    """Each retelling multiplies the teller's confidence by this."""
    persistent: PersistencePolicy = PersistencePolicy()
    spreading: SpreadingPolicy = SpreadingPolicy()
    impression_threshold: Share = 0.4
    """The target of an act forms an impression of the actor when |feeling| reaches this."""
    flaky: bool = True
    """Memories fade with story time (`retention`); false: recall is exact, nothing fades."""
    retention: RetentionPolicy = RetentionPolicy()
    recall: RecallPolicy = RecallPolicy()
    dialogue: DialoguePolicy = DialoguePolicy()
    chronicle: ChroniclePolicy = ChroniclePolicy()
    lies_believable: bool = True
    """A convincing lie is believed; false: `convinced` becomes `doubting` when the line's
    claimed facts contradict the world record."""
    referee: RefereePolicy = RefereePolicy()
    invention: InventionPolicy = "flag"
    """What the invention check answers for a reply naming what nobody gave the decision."""


class Policy(Contract):
    """Every setting of a world; the built-in defaults apply where nothing is set.

    A policy document sets any part of it: it is laid over the defaults (and the tenant's
    document) object by object, so no setting is required.
    """

    sequencing: SequencingPolicy = SequencingPolicy()
    memory: MemoryPolicy = MemoryPolicy()


def merge_policy(base: Policy, overlay: dict[str, Any]) -> Policy:
    """`base` with a partial policy document laid over it, validated as a whole.

    Objects merge key by key; any other value (a list included) replaces what was there.
    Raises pydantic's `ValidationError`, naming the location of each problem.
    """
    merged = _deep_merge(base.model_dump(mode="json"), overlay)
    return Policy.model_validate_json(orjson.dumps(merged))


def _deep_merge(base: dict[str, Any], overlay: dict[str, Any]) -> dict[str, Any]:
    # the overlay's keys first, in its order: a map's order may mean something
    # (`entity_patterns`: the first kind that matches wins)
    merged: dict[str, Any] = {key: base.get(key) for key in overlay}
    merged.update((key, value) for key, value in base.items() if key not in overlay)
    for key, value in overlay.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = _deep_merge(merged[key], value)
        else:
            merged[key] = value
    return merged
