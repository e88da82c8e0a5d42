"""The policy: defaults that reproduce seed 001, layering, and refusing what is wrong."""

from __future__ import annotations

import math
from typing import Any

import pytest
from pydantic import ValidationError

from projections.catalogue import classify
from projections.policy import resolve
from schemas.export import json_schemas
from schemas.policy import Policy, merge_policy

BUILT_IN = Policy()


def refusal(overlay: dict[str, object]) -> str:
    """The locations pydantic names when `overlay` is refused."""
    with pytest.raises(ValidationError) as refused:
        merge_policy(BUILT_IN, overlay)
    return " | ".join(
        ".".join(str(part) for part in error["loc"]) for error in refused.value.errors()
    )


def test_defaults_reproduce_the_seed_example() -> None:
    memory = BUILT_IN.memory
    said_to_me = memory.weights.conversation.target
    fight_i_saw = memory.weights.fight.witness
    assert (said_to_me.importance, said_to_me.feeling, said_to_me.arousal) == (0.5, 0.2, 0.3)
    assert (fight_i_saw.importance, fight_i_saw.feeling, fight_i_saw.arousal) == (0.6, -0.3, 0.7)
    assert (memory.confidence.seen, memory.confidence.player) == (0.9, 0.7)
    assert memory.impression_threshold > abs(said_to_me.feeling)
    assert memory.impression_threshold > abs(fight_i_saw.feeling)


def test_defaults_switch_memory_on_and_spreading_off() -> None:
    memory = BUILT_IN.memory
    assert memory.world and memory.npc and memory.perception_location_fallback
    assert memory.weighing == "rules"
    assert memory.entity_patterns == {
        "character": ["npc-*"],
        "place": ["loc-*"],
        "item": ["item-*"],
    }
    assert not memory.spreading.enabled
    assert memory.spreading.per_meeting == 3
    assert memory.persistent.characters == []


def test_a_partial_document_changes_only_what_it_names() -> None:
    policy = merge_policy(BUILT_IN, {"memory": {"weights": {"theft": {"target": {"feeling": -1}}}}})
    theft_on_me = policy.memory.weights.theft.target
    assert theft_on_me.feeling == -1
    assert theft_on_me.importance == BUILT_IN.memory.weights.theft.target.importance
    assert policy.memory.weights.fight == BUILT_IN.memory.weights.fight
    assert policy.sequencing == BUILT_IN.sequencing


def test_world_settings_lie_over_the_tenant_default() -> None:
    tenant = merge_policy(
        BUILT_IN,
        {"memory": {"persistent": {"characters": ["npc-seer"]}, "spreading": {"enabled": True}}},
    )
    world = merge_policy(tenant, {"memory": {"persistent": {"kinds": ["knowledge"]}}})
    assert world.memory.persistent.characters == ["npc-seer"]
    assert world.memory.persistent.kinds == ["knowledge"]
    assert world.memory.spreading.enabled


def test_a_list_replaces_the_list_below_it() -> None:
    policy = merge_policy(BUILT_IN, {"memory": {"entity_patterns": {"character": ["guard-*"]}}})
    assert policy.memory.entity_patterns["character"] == ["guard-*"]
    assert policy.memory.entity_patterns["place"] == ["loc-*"]


def test_entity_patterns_are_tried_in_the_documents_order() -> None:
    """ "The first kind that matches wins": the document's order was lost under the defaults',
    so a place named `*-inn` matched `*` as a character first."""
    overlay = {"memory": {"entity_patterns": {"place": ["*-inn"], "character": ["*"]}}}
    policy = merge_policy(Policy(), overlay)
    assert list(policy.memory.entity_patterns) == ["place", "character", "item"]
    assert classify("rusty-inn", [], {}, policy) == "place"
    assert classify("guard-1", [], {}, policy) == "character"


def test_merging_leaves_the_base_as_it_was() -> None:
    merge_policy(BUILT_IN, {"memory": {"npc": False}})
    assert BUILT_IN.memory.npc


def test_model_weighing_is_a_setting_with_a_deadline() -> None:
    policy = merge_policy(
        BUILT_IN, {"memory": {"weighing": "model", "model": {"deadline_ms": 250}}}
    )
    assert policy.memory.weighing == "model"
    assert policy.memory.model.deadline_ms == 250
    assert refusal({"memory": {"model": {"deadline_ms": 0}}}) == "memory.model.deadline_ms"


def test_a_misspelt_key_is_refused_where_it_is() -> None:
    assert refusal({"memory": {"spreading": {"enabld": True}}}) == "memory.spreading.enabld"
    assert refusal({"memroy": {}}) == "memroy"


@pytest.mark.parametrize(
    ("overlay", "location"),
    [
        ({"memory": {"confidence": {"seen": 1.5}}}, "memory.confidence.seen"),
        (
            {"memory": {"weights": {"fight": {"target": {"feeling": -2}}}}},
            "memory.weights.fight.target.feeling",
        ),
        ({"memory": {"weights": {"romance": {}}}}, "memory.weights.romance"),
        ({"memory": {"retelling_factor": -0.1}}, "memory.retelling_factor"),
        ({"memory": {"impression_threshold": 2}}, "memory.impression_threshold"),
        ({"memory": {"weighing": "dice"}}, "memory.weighing"),
        ({"memory": {"persistent": {"kinds": ["dream"]}}}, "memory.persistent.kinds.0"),
        (
            {"memory": {"spreading": {"group_interval_minutes": 0}}},
            "memory.spreading.group_interval_minutes",
        ),
        ({"memory": {"npc": "yes"}}, "memory.npc"),
        ({"memory": {"dialogue": {"max_line_chars": 5}}}, "memory.dialogue.max_line_chars"),
        (
            {"memory": {"chronicle": {"short_term_tokens": 9}}},
            "memory.chronicle.short_term_tokens",
        ),
        ({"memory": {"chronicle": {"chapter_tokens": 2000}}}, "memory.chronicle"),
        ({"memory": {"chronicle": {"long_term_tokens": 500}}}, "memory.chronicle"),
    ],
)
def test_a_bad_value_is_refused_where_it_is(overlay: dict[str, object], location: str) -> None:
    assert refusal(overlay) == location


def test_the_referees_settings_default_to_believable_lies_and_halved_beliefs() -> None:
    memory = BUILT_IN.memory
    assert memory.lies_believable
    assert memory.referee.weaken == 0.5
    assert memory.invention == "flag"
    strict = merge_policy(BUILT_IN, {"memory": {"lies_believable": False}})
    assert not strict.memory.lies_believable


def test_referee_thresholds_out_of_order_are_refused() -> None:
    crossed = {"memory": {"referee": {"convinced_from": 0.1, "doubting_from": 0.4}}}
    assert refusal(crossed) == "memory.referee"


def test_a_weight_or_a_confidence_of_minus_zero_is_zero() -> None:
    """-0.0 is a float JSON may carry: a memory weighed or made as sure by it was stored and
    read `-0.0`."""
    target = {"importance": -0.0, "feeling": -0.0, "arousal": -0.0}
    document = {"weights": {"gift": {"target": target}}, "confidence": {"seen": -0.0}}
    policy = merge_policy(Policy(), {"memory": document})
    impact = policy.memory.weights.for_kind("gift").for_part("target")
    given = [impact.importance, impact.feeling, impact.arousal, policy.memory.confidence.seen]
    assert [math.copysign(1.0, value) for value in given] == [1.0] * 4


@pytest.mark.parametrize(
    ("document", "rule"),
    [
        ({"retention": {"variation_low": 1.5}}, "variation_low must not exceed variation_high"),
        ({"retention": {"forgotten_below": 0.9}}, "forgotten_below must not exceed vivid_from"),
        ({"chronicle": {"chapter_tokens": 2000}}, "chapter_tokens must not exceed short_term"),
        ({"chronicle": {"condensed_tokens": 3000}}, "condensed_tokens must not exceed long_term"),
        ({"referee": {"doubting_from": 0.5}}, "doubting_from must not exceed convinced_from"),
    ],
)
def test_each_order_between_fields_the_schema_cannot_check_is_named_in_it(
    document: dict[str, Any], rule: str
) -> None:
    """A producer writing policies straight to the topic, trusting the schema, sent documents
    the worker refused, by rules the schema did not name."""
    with pytest.raises(ValidationError, match=rule):
        Policy.model_validate({"memory": document})
    assert rule in json_schemas()["policy.schema.json"].decode()


def test_a_worlds_document_lies_over_its_tenants_whatever_either_says() -> None:
    """`resolve`: the built-in defaults, the tenant's document, then the world's."""
    on, off = ({"memory": {"spreading": {"enabled": enabled}}} for enabled in (True, False))
    assert resolve(off, on).memory.spreading.enabled is True
    assert resolve(on, off).memory.spreading.enabled is False
    assert resolve(on, None).memory.spreading.enabled is True
