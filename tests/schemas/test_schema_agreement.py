"""The JSON Schemas and the pydantic models accept and refuse exactly the same messages.

A producer in another language validates with the exported schema only. So each sample below
is judged twice, by rumourmill's own validation and by the independent `jsonschema` package
(draft 2020-12, formats checked), against the committed schema files, and both must give the
verdict the sample expects. The refused samples each break one constraint of a valid message.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from functools import cache
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft202012Validator
from pydantic import ValidationError

from schemas import MAX_SEQ, Ack, DeadLetter, Event
from schemas.export import MESSAGE_MODELS, schema_id
from schemas.policy import Policy, merge_policy

ROOT = Path(__file__).resolve().parents[2]
SCHEMA_DIR = ROOT / "schemas" / "json"
TAVERN = (ROOT / "examples" / "tavern.ndjson").read_text().splitlines()

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


def events_accepted() -> dict[str, Any]:
    minimal = {"world_instance_id": "w", "timeline_id": "t", "seq": 1, "key": "k"}
    return {
        **{f"tavern-{number}": json.loads(line) for number, line in enumerate(TAVERN, 1)},
        "every-field": EVENT,
        "only-required": minimal,
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
            "persistent": {"characters": ["npc-seer"], "kinds": ["knowledge"]},
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
