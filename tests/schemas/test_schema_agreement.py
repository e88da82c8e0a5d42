"""The JSON Schemas and the pydantic models accept and refuse exactly the same messages.

A producer in another language validates with the exported schema only. So each sample below
is judged twice, by rumourmill's own validation and by the independent `jsonschema` package
(draft 2020-12), against the committed schema files, and both must give the verdict the sample
expects. The refused samples each break one constraint of a valid message. No check rests on
`format`, an annotation in draft 2020-12 that most validators do not check (nor does
`jsonschema` without optional packages): a date-time is a `pattern`. The patterns are judged
again by an ECMA-262 engine (Node.js, where installed), whose regular expressions JSON Schema
names and most validators in other languages use.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Callable
from datetime import date
from functools import cache
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft202012Validator
from pydantic import ValidationError

from schemas import MAX_SEQ, Ack, DeadLetter, Event
from schemas.export import MESSAGE_MODELS, schema_id
from schemas.policy import Policy, merge_policy
from tests.tavern import TAVERN_LINES as TAVERN

ROOT = Path(__file__).resolve().parents[2]
SCHEMA_DIR = ROOT / "schemas" / "json"

LONG_ID = "x" * 129
"""One character over the limit of an id."""

EVENT: dict[str, Any] = {
    "tenant_id": "acme",
    "world_instance_id": "save-1",
    "timeline_id": "reload",
    "seq": 3,
    "key": "combat.enemy-defeated",
    "actor": "player-1",
    "target": "npc-drunk-sailor",
    "witnesses": ["npc-mara"],
    "location": "loc-tavern",
    "players": ["player-1"],
    "payload": {"enemy": "npc-drunk-sailor", "blows": [1, 2.5, None, {"hard": True}]},
    "facts": [{"subject": "npc-drunk-sailor", "attribute": "status", "value": "defeated"}],
    "game_time": "day 1, 21:05",
    "entities": {"player-1": {"name": "Ilse", "kind": "character", "group": "party"}},
    "branch": {"parent_timeline_id": "main", "after_seq": 2},
}
"""An event that sets every field."""

ACK: dict[str, Any] = {
    "tenant_id": "acme",
    "world_instance_id": "save-1",
    "timeline_id": "main",
    "seq": 3,
    "outcome": "processed",
    "reason": None,
    "acknowledged_seq": 3,
    "processed_seq": 3,
}

DEAD_LETTER: dict[str, Any] = {
    "reason": "invalid event: seq: Field required",
    "topic": "rumourmill.events",
    "partition": 0,
    "offset": 17,
    "key_base64": "c2F2ZS0x",
    "value_base64": "e30=",
    "tenant_id": "acme",
    "world_instance_id": "save-1",
}


REAL_TIMES = [
    "2024-05-01T21:05:00Z",
    "2024-05-01T21:05:00.123456789Z",
    "2024-05-01t21:05:00z",
    "2024-05-01T21:05:00+02:00",
    "2024-05-01T21:05:00-00:00",
    "2024-05-01T21:05:00+23:59",
    "2024-02-29T00:00:00Z",
    "2000-02-29T00:00:00Z",
    "0001-01-01T00:00:00+01:00",
    "9999-12-31T23:59:59Z",
]
"""RFC 3339 date-times with an offset."""

NO_REAL_TIMES = {
    "a-weekday": "tuesday",
    "no-offset": "2024-05-01T21:05:00",
    "a-date": "2024-05-01",
    "offset-24-hours": "2024-05-01T21:05:00+24:00",
    "offset-without-colon": "2024-05-01T21:05:00+2400",
    "hour-24": "2024-05-01T24:00:00Z",
    "leap-second": "2016-12-31T23:59:60Z",
    "space-for-t": "2024-05-01 21:05:00Z",
    "no-seconds": "2024-05-01T21:05Z",
    "comma-fraction": "2024-05-01T21:05:00,5Z",
    "basic-format": "20240501T210500Z",
    "unix-seconds-as-text": "1700000000",
    "unix-seconds": 1700000000,
    "february-29-in-2023": "2023-02-29T00:00:00Z",
    "february-29-in-1900": "1900-02-29T00:00:00Z",
    "april-31": "2024-04-31T00:00:00Z",
    "year-0": "0000-01-01T00:00:00Z",
    "trailing-line-break": "2024-05-01T21:05:00Z\n",
}
"""What pydantic's datetime parsing would take, or `format: date-time` lets through unchecked,
and the contract refuses."""

MISSING = object()
"""Stands for a field left out."""


def changed(base: dict[str, Any], path: str, value: Any) -> dict[str, Any]:
    """A deep copy of `base` with the dotted `path` set to `value` (or removed, for MISSING)."""
    document: dict[str, Any] = json.loads(json.dumps(base))
    *parents, last = path.split(".")
    target: Any = document
    for part in parents:
        target = target[int(part)] if isinstance(target, list) else target[part]
    if value is MISSING:
        del target[last]
    elif isinstance(target, list):
        target[int(last)] = value
    else:
        target[last] = value
    return document


def one_change_each(
    base: dict[str, Any], changes: dict[str, tuple[str, Any]]
) -> dict[str, dict[str, Any]]:
    """Sample name -> `base` with that one (path, value) change."""
    return {name: changed(base, path, value) for name, (path, value) in changes.items()}


def nested(path: str, value: Any) -> dict[str, Any]:
    """A partial policy document setting only the dotted `path`."""
    document: Any = value
    for part in reversed(path.split(".")):
        document = {part: document}
    result: dict[str, Any] = document
    return result


MINIMAL_EVENT = {"world_instance_id": "w", "timeline_id": "t", "seq": 1, "key": "k"}


def events_accepted() -> dict[str, Any]:
    return {
        **{f"tavern-{number}": json.loads(line) for number, line in enumerate(TAVERN, 1)},
        "every-field": EVENT,
        "only-required": MINIMAL_EVENT,
        "nulls-where-optional": changed(changed(EVENT, "actor", None), "branch", None),
        "ids-of-128": changed(EVENT, "world_instance_id", "x" * 128),
        "ids-with-dots": changed(
            changed(EVENT, "actor", "..."), "witnesses", [".npc", "npc.", "..a"]
        ),
        "key-of-256": changed(EVENT, "key", "k" * 256),
        "largest-seq": changed(EVENT, "seq", MAX_SEQ),
        "seq-written-3.0": changed(EVENT, "seq", 3.0),
        "branch-from-the-start": changed(EVENT, "branch.after_seq", 0),
        "after-seq-written-2.0": changed(EVENT, "branch.after_seq", 2.0),
        "first-minute": changed(EVENT, "game_time", "day 0, 00:00"),
        "last-minute": changed(EVENT, "game_time", "day 999999, 23:59"),
        "no-witnesses": changed(EVENT, "witnesses", []),
        "fact-value-null": changed(EVENT, "facts.0.value", None),
        "fact-value-object": changed(EVENT, "facts.0.value", {"hp": 0}),
        "payload-numbers-at-64-bit-ends": changed(
            EVENT, "payload", {"most": 2**64 - 1, "least": -(2**63), "deep": [{"f": 0.5}]}
        ),
        "payload-integral-numbers-written-as-floats": changed(
            EVENT, "payload", {"big": 1.5e19, "round": 5.0, "least": -9.223372036854775808e18}
        ),
        "declaration-extra-fields": changed(EVENT, "entities.player-1.title", "the Bold"),
        "declaration-empty": changed(EVENT, "entities.player-1", {}),
        **{f"occurred-at-{moment}": changed(EVENT, "occurred_at", moment) for moment in REAL_TIMES},
        "occurred-at-null": changed(EVENT, "occurred_at", None),
    }


def events_refused() -> dict[str, Any]:
    return {
        "a-list": [],
        "a-string": "event",
        "null": None,
        **one_change_each(
            EVENT,
            {
                "payload-integer-past-64-bits": ("payload", {"gold": 2**64}),
                "payload-deep-integer-below-64-bits": ("payload", {"l": [{"debt": -(2**63) - 1}]}),
                "fact-value-past-64-bits": ("facts.0.value", 2**70),
                "fact-value-number-past-64-bits": ("facts.0.value", 1e300),
                "payload-number-written-as-a-float-past-64-bits": ("payload", {"gold": 1e21}),
                "no-world": ("world_instance_id", MISSING),
                "no-timeline": ("timeline_id", MISSING),
                "no-seq": ("seq", MISSING),
                "no-key": ("key", MISSING),
                "unknown-field": ("witness", ["npc-mara"]),
                "tenant-empty": ("tenant_id", ""),
                "tenant-too-long": ("tenant_id", LONG_ID),
                "tenant-null": ("tenant_id", None),
                "world-number": ("world_instance_id", 1),
                "world-a-dot": ("world_instance_id", "."),
                "timeline-two-dots": ("timeline_id", ".."),
                "witness-a-dot": ("witnesses", ["npc-mara", "."]),
                "entity-id-two-dots": ("entities", {"..": {"name": "Nobody"}}),
                "branch-parent-a-dot": ("branch.parent_timeline_id", "."),
                "timeline-too-long": ("timeline_id", LONG_ID),
                "seq-zero": ("seq", 0),
                "seq-beyond-max": ("seq", MAX_SEQ + 1),
                "seq-fraction": ("seq", 3.5),
                "seq-string": ("seq", "3"),
                "seq-bool": ("seq", True),
                "key-empty": ("key", ""),
                "key-too-long": ("key", "k" * 257),
                "actor-number": ("actor", 7),
                "target-empty": ("target", ""),
                "location-too-long": ("location", LONG_ID),
                "witnesses-a-string": ("witnesses", "npc-mara"),
                "witness-empty": ("witnesses", [""]),
                "players-null": ("players", None),
                "player-number": ("players", [7]),
                "payload-a-list": ("payload", []),
                "facts-an-object": ("facts", {}),
                "fact-without-value": ("facts.0.value", MISSING),
                "fact-unknown-field": ("facts.0.since", "day 1"),
                "fact-attribute-empty": ("facts.0.attribute", ""),
                "fact-subject-too-long": ("facts.0.subject", LONG_ID),
                "game-time-a-weekday": ("game_time", "tuesday"),
                "game-time-hour-24": ("game_time", "day 1, 24:00"),
                "game-time-minute-60": ("game_time", "day 1, 10:60"),
                "game-time-one-digit-hour": ("game_time", "day 1, 9:05"),
                "game-time-seven-digit-day": ("game_time", "day 1234567, 10:00"),
                "game-time-negative-day": ("game_time", "day -1, 10:00"),
                "game-time-arabic-indic-digit": ("game_time", "day \u0661, 10:00"),
                "game-time-capitalised": ("game_time", "Day 1, 10:00"),
                "game-time-leading-space": ("game_time", " day 1, 10:00"),
                "game-time-number": ("game_time", 5),
                "game-time-trailing-line-break": ("game_time", "day 1, 21:05\n"),
                "game-time-line-break-inside": ("game_time", "day 1,\n21:05"),
                **{
                    f"occurred-at-{name}": ("occurred_at", moment)
                    for name, moment in NO_REAL_TIMES.items()
                },
                "entity-id-empty": ("entities", {"": {"name": "Nobody"}}),
                "entity-id-too-long": ("entities", {LONG_ID: {"name": "Nobody"}}),
                "entity-name-empty": ("entities.player-1.name", ""),
                "entity-name-number": ("entities.player-1.name", 7),
                "entity-kind-too-long": ("entities.player-1.kind", "k" * 65),
                "entity-group-empty": ("entities.player-1.group", ""),
                "declaration-a-string": ("entities.player-1", "Ilse"),
                "branch-a-string": ("branch", "main"),
                "branch-without-parent": ("branch.parent_timeline_id", MISSING),
                "branch-without-after-seq": ("branch.after_seq", MISSING),
                "branch-parent-empty": ("branch.parent_timeline_id", ""),
                "branch-negative": ("branch.after_seq", -1),
                "branch-at-max": ("branch.after_seq", MAX_SEQ),
                "branch-fraction": ("branch.after_seq", 2.5),
                "branch-bool": ("branch.after_seq", True),
                "branch-unknown-field": ("branch.at", 2),
            },
        ),
    }


def policies_accepted() -> dict[str, Any]:
    readme_example = {
        "memory": {
            "perception_location_fallback": True,
            "weighing": "rules",
            "persistent": {"characters": ["npc-seer"]},
            "confidence": {"seen": 0.9, "told": 0.8, "player": 0.7},
            "retelling_factor": 0.8,
            "spreading": {"enabled": False, "group_interval_minutes": 240},
        },
        "sequencing": {"max_deferred": 1000},
    }
    return {
        "empty": {},
        "readme-example": readme_example,
        "every-default": Policy().model_dump(mode="json"),
        "one-weight": nested("memory.weights.theft.target.feeling", -1),
        "a-new-entity-kind": nested("memory.entity_patterns.monster", ["orc-*"]),
        "share-written-1": nested("memory.confidence.seen", 1),
        "count-written-10.0": nested("sequencing.max_deferred", 10.0),
        "over-retrieve-written-3.0": nested("memory.recall.over_retrieve", 3.0),
        "never-forgotten-step-written-4.0": nested("memory.retention.never_forgotten_step", 4.0),
        "spreading-on": nested("memory.spreading", {"enabled": True, "distortion": True}),
        "model-weighing": nested("memory", {"weighing": "model", "model": {"deadline_ms": 500}}),
        "lies-not-believable": nested("memory.lies_believable", False),
        "referee-weakens-less": nested("memory.referee.weaken", 0.8),
        "inventions-rejected": nested("memory.invention", "reject"),
    }


def policies_refused() -> dict[str, Any]:
    return {
        name: nested(path, value)
        for name, (path, value) in {
            "model-deadline-zero": ("memory.model.deadline_ms", 0),
            "unknown-weighing": ("memory.weighing", "dice"),
            "lies-believable-a-string": ("memory.lies_believable", "no"),
            "weaken-over-1": ("memory.referee.weaken", 1.5),
            "unknown-invention-action": ("memory.invention", "ignore"),
            "misspelt-section": ("memroy", {}),
            "misspelt-setting": ("memory.spreading.enabld", True),
            "memory-null": ("memory", None),
            "memory-a-list": ("memory", []),
            "npc-a-string": ("memory.npc", "yes"),
            "confidence-over-1": ("memory.confidence.seen", 1.5),
            "confidence-bool": ("memory.confidence.seen", True),
            "feeling-under-minus-1": ("memory.weights.fight.target.feeling", -2),
            "importance-a-string": ("memory.weights.fight.target.importance", "high"),
            "kind-impacts-null": ("memory.weights.theft", None),
            "unknown-event-kind": ("memory.weights.romance", {}),
            "unknown-part": ("memory.weights.theft.bystander", {}),
            "retelling-negative": ("memory.retelling_factor", -0.1),
            "threshold-over-1": ("memory.impression_threshold", 2),
            "unknown-memory-kind": ("memory.persistent.kinds", ["dream"]),
            "persistent-character-empty": ("memory.persistent.characters", [""]),
            "interval-zero": ("memory.spreading.group_interval_minutes", 0),
            "per-meeting-over-limit": ("memory.spreading.per_meeting", 1001),
            "per-meeting-fraction": ("memory.spreading.per_meeting", 2.5),
            "group-field-empty": ("memory.spreading.group_field", ""),
            "pattern-kind-empty": ("memory.entity_patterns", {"": ["x-*"]}),
            "patterns-a-string": ("memory.entity_patterns.character", "npc-*"),
            "pattern-a-number": ("memory.entity_patterns.character", [5]),
            "deferral-over-limit": ("sequencing.max_deferred", 100_001),
            "deferral-bool": ("sequencing.max_deferred", True),
            "deferral-string": ("sequencing.max_deferred", "10"),
        }.items()
    }


REFUSED_JUDGEMENT = {
    "npc_id": "npc-mara",
    "belief_id": "0f" * 16,
    "judgement": "feeling",
    "reason": "the model took longer than 2000 ms",
}


def acks_accepted() -> dict[str, Any]:
    too_broken_to_name = dict.fromkeys(("tenant_id", "world_instance_id", "timeline_id", "seq"))
    return {
        "processed": ACK,
        "rejected-unnamed": {**too_broken_to_name, "outcome": "rejected", "reason": "bad"},
        "positions-left-out": changed(changed(ACK, "acknowledged_seq", MISSING), "reason", "x"),
        "seq-written-3.0": changed(ACK, "seq", 3.0),
        "refused-judgements": changed(ACK, "refused_judgements", [REFUSED_JUDGEMENT]),
    }


def acks_refused() -> dict[str, Any]:
    return one_change_each(
        ACK,
        {
            "refused-judgement-unknown-kind": (
                "refused_judgements",
                [{**REFUSED_JUDGEMENT, "judgement": "mood"}],
            ),
            "refused-judgement-without-reason": (
                "refused_judgements",
                [{key: value for key, value in REFUSED_JUDGEMENT.items() if key != "reason"}],
            ),
            "unknown-outcome": ("outcome", "lost"),
            "no-outcome": ("outcome", MISSING),
            "no-tenant": ("tenant_id", MISSING),
            "negative-position": ("processed_seq", -1),
            "seq-string": ("seq", "3"),
        },
    )


def dead_letters_accepted() -> dict[str, Any]:
    return {
        "named": DEAD_LETTER,
        "no-key-no-identity": changed(
            changed(changed(DEAD_LETTER, "key_base64", None), "tenant_id", MISSING),
            "world_instance_id",
            MISSING,
        ),
    }


def dead_letters_refused() -> dict[str, Any]:
    return one_change_each(
        DEAD_LETTER,
        {
            "negative-partition": ("partition", -1),
            "no-value": ("value_base64", MISSING),
            "tenant-empty": ("tenant_id", ""),
            "unknown-field": ("headers", {}),
        },
    )


def validate_policy_document(text: str) -> None:
    """What `rumourmill policy set` and the worker do: lay the document over the defaults."""
    merge_policy(Policy(), json.loads(text))


PYDANTIC: dict[str, Callable[[str], object]] = {
    "event": Event.model_validate_json,
    "policy": validate_policy_document,
    "ack": Ack.model_validate_json,
    "deadletter": DeadLetter.model_validate_json,
}


@cache
def schema_validator(name: str) -> Draft202012Validator:
    schema = json.loads((SCHEMA_DIR / f"{name}.schema.json").read_text())
    return Draft202012Validator(schema, format_checker=Draft202012Validator.FORMAT_CHECKER)


def verdicts(name: str, text: str) -> tuple[bool, bool]:
    """(pydantic accepts, the JSON Schema accepts) for message type `name`."""
    try:
        PYDANTIC[name](text)
        by_pydantic = True
    except ValidationError:
        by_pydantic = False
    by_schema = schema_validator(name).is_valid(json.loads(text))
    return by_pydantic, by_schema


def samples(by_message: dict[str, dict[str, Any]]) -> list[Any]:
    """pytest parameters (message type, JSON text), one per sample."""
    return [
        pytest.param(name, json.dumps(document), id=f"{name}-{sample}")
        for name, documents in by_message.items()
        for sample, document in documents.items()
    ]


ACCEPTED = {
    "event": events_accepted(),
    "policy": policies_accepted(),
    "ack": acks_accepted(),
    "deadletter": dead_letters_accepted(),
}
REFUSED = {
    "event": events_refused(),
    "policy": policies_refused(),
    "ack": acks_refused(),
    "deadletter": dead_letters_refused(),
}


@pytest.mark.parametrize(("name", "text"), samples(ACCEPTED))
def test_both_accept(name: str, text: str) -> None:
    assert verdicts(name, text) == (True, True)


@pytest.mark.parametrize(("name", "text"), samples(REFUSED))
def test_both_refuse(name: str, text: str) -> None:
    assert verdicts(name, text) == (False, False)


@pytest.mark.parametrize("name", sorted(MESSAGE_MODELS))
def test_each_schema_is_valid_draft_2020_12_with_its_own_id(name: str) -> None:
    schema = schema_validator(name).schema
    Draft202012Validator.check_schema(schema)
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    assert schema["$id"] == schema_id(name)


ANNOTATIONS = {"$schema", "$id", "$defs", "title", "description", "default"}
"""Keywords that describe rather than check."""


def keywords(schema: dict[str, Any]) -> set[str]:
    """Every keyword used in `schema` and the schemas inside it (not property names, not data)."""
    found = set(schema)
    for keyword, value in schema.items():
        if keyword in {"properties", "$defs", "patternProperties"}:
            inner = list(value.values())
        elif keyword in {"anyOf", "allOf", "oneOf", "prefixItems"}:
            inner = value
        elif keyword in {"items", "additionalProperties", "propertyNames", "not"}:
            inner = [value]
        else:
            inner = []
        for subschema in inner:
            if isinstance(subschema, dict):
                found |= keywords(subschema)
    return found


@pytest.mark.parametrize("name", sorted(MESSAGE_MODELS))
def test_no_check_is_lost_as_a_keyword_validators_ignore(name: str) -> None:
    """A constraint pydantic writes under its own name (`ge` for `minimum`) checks nothing."""
    unknown = keywords(schema_validator(name).schema) - set(Draft202012Validator.VALIDATORS)
    assert unknown <= ANNOTATIONS, sorted(unknown - ANNOTATIONS)


def calendar_days() -> list[tuple[int, int, int]]:
    """Every month and day, past the ends too, of years the leap rules tell apart; and February
    29 of every year of the first millennium and of every century's first year (what is leap
    turns on a year's last two digits, and on its first two in a century's first year)."""
    years = (0, 1, 4, 99, 100, 400, 1900, 2000, 2023, 2024, 2100, 9999)
    every_day = [(y, m, d) for y in years for m in range(14) for d in range(33)]
    february_29 = [(y, 2, 29) for y in range(10_000) if y < 1000 or y % 100 == 0]
    return every_day + february_29


def test_every_day_is_a_date_time_exactly_when_the_calendar_has_it() -> None:
    by_schema = Draft202012Validator(schema_validator("event").schema["properties"]["occurred_at"])
    judged_otherwise = []
    for year, month, day in calendar_days():
        try:
            has_it = date(year, month, day) is not None
        except ValueError:
            has_it = False
        moment = f"{year:04}-{month:02}-{day:02}T12:00:00Z"
        try:
            Event.model_validate_json(json.dumps({**MINIMAL_EVENT, "occurred_at": moment}))
            by_pydantic = True
        except ValidationError:
            by_pydantic = False
        if (by_pydantic, by_schema.is_valid(moment)) != (has_it, has_it):
            judged_otherwise.append(moment)
    assert judged_otherwise == []


NODE = shutil.which("node")
ECMA_262_JUDGES = """
const [patterns, texts] = JSON.parse(require("fs").readFileSync(0, "utf8"));
const compiled = patterns.map((pattern) => new RegExp(pattern, "u"));
console.log(JSON.stringify(compiled.map((regex) => texts.map((text) => regex.test(text)))));
"""
"""Compiles each pattern as a validator in JavaScript does (with the `u` flag, as JSON Schema
asks) and tests each text with each: a SyntaxError fails the run."""


def ecma_262_matches(patterns: list[str], texts: list[str]) -> list[list[bool]]:
    """Whether each pattern matches each text, judged by Node.js."""
    assert NODE is not None
    run = subprocess.run(
        [NODE, "-e", ECMA_262_JUDGES],
        input=json.dumps([patterns, texts]),
        capture_output=True,
        text=True,
        check=True,
    )
    matches: list[list[bool]] = json.loads(run.stdout)
    return matches


def patterns_in(schema: Any) -> list[str]:
    """Every `pattern` keyword's regular expression in `schema`, at any depth."""
    if isinstance(schema, list):
        return [pattern for inner in schema for pattern in patterns_in(inner)]
    if not isinstance(schema, dict):
        return []
    own = [schema["pattern"]] if isinstance(schema.get("pattern"), str) else []
    return own + [pattern for inner in schema.values() for pattern in patterns_in(inner)]


needs_node = pytest.mark.skipif(NODE is None, reason="no Node.js to judge ECMA-262 patterns")


@needs_node
def test_every_pattern_is_an_ecma_262_regular_expression() -> None:
    patterns = [
        pattern for name in MESSAGE_MODELS for pattern in patterns_in(schema_validator(name).schema)
    ]
    assert len(ecma_262_matches(patterns, [])) == len(patterns)


@needs_node
@pytest.mark.parametrize(
    ("field", "accepted", "refused"),
    [
        (
            "occurred_at",
            REAL_TIMES,
            [text for text in NO_REAL_TIMES.values() if isinstance(text, str)],
        ),
        (
            "game_time",
            ["day 0, 00:00", "day 1, 21:05", "day 999999, 23:59"],
            ["day 1, 21:05\n", "day 1, 21:05\r\n", "day 1,\n21:05", "\nday 1, 21:05", "tuesday"],
        ),
    ],
)
def test_an_ecma_262_engine_judges_the_strings_of_a_pattern_as_pydantic_does(
    field: str, accepted: list[str], refused: list[str]
) -> None:
    """JSON Schema's patterns are ECMA-262's: `$` is the end of the text, where Python's also
    matches before a final line break (the schema refuses line breaks with `not` for that)."""
    [string_schema, _] = schema_validator("event").schema["properties"][field]["anyOf"]
    pattern, refused_inside = string_schema["pattern"], string_schema["not"]["pattern"]
    texts = [*accepted, *refused]
    matches, refusals = ecma_262_matches([pattern, refused_inside], texts)
    by_ecma = [match and not refusal for match, refusal in zip(matches, refusals, strict=True)]
    by_pydantic = [verdicts("event", json.dumps({**EVENT, field: text}))[0] for text in texts]
    assert by_ecma == by_pydantic == [True] * len(accepted) + [False] * len(refused)
