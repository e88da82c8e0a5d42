"""Minds read back through the projector, in-process: the seed's read, timelines, persistence."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from projections.policy import resolve
from projections.projector import Projector
from projections.runtime_read import NotFound, runtime_read
from streams.replay import replay_lines
from tests.seed import SEED_READ
from tests.tavern import TAVERN_LINES


def tavern(first: int | None = None) -> list[bytes]:
    return TAVERN_LINES[:first]


def without_ids(read: dict[str, Any]) -> dict[str, Any]:
    for part in ("beliefs", "recollections"):
        for memory in read[part]:
            assert len(memory.pop("belief_id")) == 32
    return read


def test_the_seed_example_reads_exactly_as_the_contract_shows() -> None:
    state = replay_lines(tavern(3)).state
    read = runtime_read(state, "default", "save-1", "main", "npc-mara").model_dump(mode="json")
    assert list(read) == list(SEED_READ)
    assert list(read["beliefs"][0]) == ["belief_id", *SEED_READ["beliefs"][0]]
    assert without_ids(read) == SEED_READ


def test_a_reload_from_before_the_fight_forgets_it_and_the_parent_keeps_it() -> None:
    state = replay_lines(tavern()).state
    reload = runtime_read(state, "default", "save-1", "reload", "npc-mara").model_dump(mode="json")
    assert [m["seq"] for m in reload["recollections"]] == [3]
    assert "locket" in reload["recollections"][0]["content"]
    assert all("defeated" not in m["content"] for m in reload["recollections"])
    main = runtime_read(state, "default", "save-1", "main", "npc-mara").model_dump(mode="json")
    assert all("locket" not in m["content"] for m in main["recollections"] + main["beliefs"])
    assert [m["seq"] for m in main["recollections"]] == [3]


def test_a_persistent_character_remembers_across_a_load_and_says_so() -> None:
    policy = resolve(None, {"memory": {"persistent": {"characters": ["npc-mara"]}}})
    state = replay_lines(tavern(), Projector(policies=lambda tenant, world: policy)).state
    reload = runtime_read(state, "default", "save-1", "reload", "npc-mara").model_dump(mode="json")
    fight = [m for m in reload["recollections"] if "defeated" in m["content"]]
    assert len(fight) == 1 and fight[0]["persistent"] is True
    tomas = runtime_read(state, "default", "save-1", "main", "npc-tomas").model_dump(mode="json")
    assert all(not m["persistent"] for m in tomas["beliefs"] + tomas["recollections"])


def test_a_told_belief_diverges_from_the_world_record_when_it_contradicts_it() -> None:
    lies = [
        orjson.dumps(
            {
                "world_instance_id": "save-1",
                "timeline_id": "main",
                "seq": 6,
                "key": "loreweaver.conversation.told",
                "actor": "npc-tomas",
                "target": "npc-mara",
                "payload": {
                    "content": "The sailor got up and walked home",
                    "facts": [
                        {"subject": "npc-drunk-sailor", "attribute": "status", "value": "fine"}
                    ],
                },
            }
        )
    ]
    mara = runtime_read(
        replay_lines([*tavern(5), *lies]).state, "default", "save-1", "main", "npc-mara"
    ).model_dump(mode="json")
    lie = next(m for m in mara["beliefs"] if m["source_entity"] == "npc-tomas")
    assert lie["diverging"] is True and lie["source"] == "told"


def test_reads_are_404_for_an_unseen_timeline_or_a_character_with_no_past() -> None:
    state = replay_lines(tavern(3)).state
    with pytest.raises(NotFound, match="never received events"):
        runtime_read(state, "default", "save-1", "nowhere", "npc-mara")
    with pytest.raises(NotFound, match="nothing is known of 'npc-ghost'"):
        runtime_read(state, "default", "save-1", "main", "npc-ghost")
    with pytest.raises(NotFound):
        runtime_read(state, "other-tenant", "save-1", "main", "npc-mara")


def test_replaying_the_same_stream_into_a_fresh_app_gives_identical_reads() -> None:
    first, second = replay_lines(tavern()), replay_lines(tavern())
    assert first.digests == second.digests
    for timeline, npc in [("main", "npc-mara"), ("main", "npc-tomas"), ("reload", "npc-mara")]:
        assert (
            runtime_read(first.state, "default", "save-1", timeline, npc).to_json()
            == runtime_read(second.state, "default", "save-1", timeline, npc).to_json()
        )
