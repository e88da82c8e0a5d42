"""Divergence, judged when read: a belief diverges while the world record says otherwise."""

from __future__ import annotations

import orjson
import pytest

from projections import world
from projections.divergence import as_judged
from projections.projector import Projector
from projections.runtime_read import runtime_read
from projections.state import MemoryState
from projections.timelines import Segment
from projections.world import same_json
from schemas import Event
from schemas.policy import Policy, merge_policy
from streams.replay import replay_lines
from tests.projections.test_memories import seed_world


def status_recorded(state: MemoryState, seq: int, status: str) -> None:
    world.record_facts(
        state,
        Event.model_validate_json(
            orjson.dumps(
                {
                    "world_instance_id": "save-1",
                    "timeline_id": "main",
                    "seq": seq,
                    "key": "story.happened",
                    "facts": [
                        {"subject": "npc-drunk-sailor", "attribute": "status", "value": status}
                    ],
                }
            )
        ),
        (Segment("main", seq - 1),),
    )


def test_a_memory_diverges_while_the_record_on_the_readers_timeline_disagrees() -> None:
    fight = seed_world().of("npc-mara")[1]  # Mara saw the sailor defeated (seq 3)
    state = MemoryState()
    status_recorded(state, 3, "defeated")
    status_recorded(state, 5, "fine")

    def shown_diverging(upto_seq: int) -> bool:
        ancestry = (Segment("main", upto_seq),)
        return as_judged(state, "default", "save-1", ancestry, fight).diverging

    assert [shown_diverging(seq) for seq in (3, 4, 5)] == [False, False, True]
    assert fight.diverging is False  # the stored memory is left as it was formed


@pytest.mark.parametrize(
    ("one", "other", "same"),
    [
        (1, 1.0, True),
        ([1, {"a": 2.0}], [1.0, {"a": 2}], True),
        ({"a": 1, "b": 2}, {"b": 2, "a": 1}, True),
        (True, 1, False),
        (False, 0, False),
        ([True], [1], False),
        ("1", 1, False),
        (None, 0, False),
        ([1, 2], [2, 1], False),
        ([1], [1, 2], False),
        ({"a": 1}, {"a": 1, "b": None}, False),
    ],
)
def test_facts_compare_as_json_values(one: object, other: object, same: bool) -> None:
    """A belief that the door is open `1.0` agrees with a record of `1`; `true` is not `1`."""
    assert same_json(one, other) is same
    assert same_json(other, one) is same


def test_what_tomas_is_told_diverges_where_any_fact_it_claims_differs_from_the_record() -> None:
    """SPEC 2: diverging while any fact it claims differs from the record, the last value a
    fact was given in an event counting, as JSON compares: `true` is not `1`, a list of one is
    not the list of two, a fact never recorded disagrees with nothing."""
    declared = {
        "npc-mara": {"name": "Mara", "kind": "character"},
        "npc-tomas": {"name": "Tomas", "kind": "character"},
    }
    recorded = [
        {"subject": "door", "attribute": "open", "value": 1},
        {"subject": "npc-sailor", "attribute": "status", "value": "defeated"},
        {"subject": "chest", "attribute": "items", "value": [1, 2]},
        {"subject": "gate", "attribute": "open", "value": False},
        {"subject": "gate", "attribute": "open", "value": True},  # the last given counts
    ]
    claims = [
        ("the sailor is happy", [("npc-sailor", "mood", "happy")]),
        ("the door is open", [("door", "open", 1.0)]),
        ("the door is true", [("door", "open", True)]),
        (
            "the sailor is beaten, the door shut",
            [("npc-sailor", "status", "defeated"), ("door", "open", 0)],
        ),
        ("the chest holds one thing", [("chest", "items", [1])]),
        ("the gate is shut", [("gate", "open", False)]),
    ]
    lines = [
        {"seq": 1, "key": "world.changed", "facts": recorded, "entities": declared},
        *(
            {"seq": 2 + index, "key": "loreweaver.conversation.told", "actor": "npc-mara"}
            | {
                "target": "npc-tomas",
                "payload": {
                    "content": content,
                    "facts": [
                        {"subject": subject, "attribute": attribute, "value": value}
                        for subject, attribute, value in facts
                    ],
                },
            }
            for index, (content, facts) in enumerate(claims)
        ),
    ]
    state = replay_lines(
        [orjson.dumps({"world_instance_id": "w", "timeline_id": "main"} | line) for line in lines]
    ).state
    beliefs = runtime_read(state, "default", "w", "main", "npc-tomas").beliefs
    assert {belief.content: belief.diverging for belief in beliefs} == {
        "the sailor is happy": False,
        "the door is open": False,
        "the door is true": True,
        "the sailor is beaten, the door shut": True,
        "the chest holds one thing": True,
        "the gate is shut": True,
    }


def test_with_the_world_part_off_no_fact_is_recorded() -> None:
    """README: without `world` no fact is recorded (and no memory judged diverging)."""
    defeated = {
        "world_instance_id": "save-1",
        "timeline_id": "main",
        "seq": 1,
        "key": "quest.done",
        "actor": "npc-bram",
        "facts": [{"subject": "npc-drunk-sailor", "attribute": "status", "value": "defeated"}],
    }
    for part_on in (True, False):
        policy = merge_policy(Policy(), {"memory": {"world": part_on}})
        projector = Projector(policies=lambda tenant, world_id, chosen=policy: chosen)
        state = replay_lines([orjson.dumps(defeated)], projector).state
        ancestry = (Segment("main", 1),)
        recorded = world.fact_value(
            state, "default", "save-1", ancestry, "npc-drunk-sailor", "status"
        )
        assert (recorded == "defeated") is part_on
