"""Branch diff (`projections.branch_diff`): what a character holds on one timeline, not another."""

from __future__ import annotations

import orjson
import pytest

from projections.branch_diff import HeldMemory, branch_diff
from projections.policy import resolve
from projections.projector import Projector
from projections.runtime_read import BadRead, NotFound
from streams.replay import replay_lines
from tests.projections.counted_reads import counted_replay
from tests.tavern import TAVERN_LINES as LINES

STATE = replay_lines(LINES).state


def contents(memories: list[HeldMemory]) -> list[str]:
    return [memory.content for memory in memories]


def test_each_timeline_holds_what_it_lived_and_shares_what_came_before_the_branch() -> None:
    diff = branch_diff(STATE, "default", "save-1", "npc-mara", "main", "reload")
    assert contents(diff.only_on_timeline) == [
        "Ilse enemy defeated at The Crooked Lantern (enemy: npc-drunk-sailor)"
    ]
    assert contents(diff.only_on_other) == [
        "player-1 gift given Mara (item: item-locket)",
        "I feel warmly about player-1",
    ]
    assert {m.timeline_id for m in diff.only_on_other} == {"reload"}
    assert diff.held_on_both == 1  # the player's words at seq 2, before the branch
    back = branch_diff(STATE, "default", "save-1", "npc-mara", "reload", "main")
    assert (back.only_on_timeline, back.only_on_other) == (
        diff.only_on_other,
        diff.only_on_timeline,
    )
    same = branch_diff(STATE, "default", "save-1", "npc-mara", "main", "main")
    assert (same.only_on_timeline, same.only_on_other, same.held_on_both) == ([], [], 2)


def test_the_same_words_under_other_belief_ids_differ_by_id_but_not_by_content() -> None:
    relived = orjson.loads(LINES[2]) | {  # main's seq 3 lived again on a branch after seq 2
        "timeline_id": "again",
        "branch": {"parent_timeline_id": "main", "after_seq": 2},
    }
    state = replay_lines([*LINES, orjson.dumps(relived)]).state
    diff = branch_diff(state, "default", "save-1", "npc-mara", "main", "again")
    assert len(diff.only_on_timeline) == len(diff.only_on_other) == 1
    assert diff.only_on_timeline[0].belief_id != diff.only_on_other[0].belief_id
    assert diff.content_only_on_timeline == diff.content_only_on_other == []


def test_persistent_memories_are_held_on_every_timeline() -> None:
    policy = resolve(None, {"memory": {"persistent": {"characters": ["npc-mara"]}}})
    state = replay_lines(LINES, Projector(policies=lambda tenant, world: policy)).state
    diff = branch_diff(state, "default", "save-1", "npc-mara", "main", "reload")
    assert diff.only_on_timeline == diff.only_on_other == []
    assert diff.held_on_both == 4


def test_as_of_a_position_each_timeline_holds_what_it_held_then() -> None:
    before_the_branch = branch_diff(STATE, "default", "save-1", "npc-mara", "main", "reload", 2)
    assert (before_the_branch.only_on_timeline, before_the_branch.only_on_other) == ([], [])
    assert before_the_branch.held_on_both == 1  # the player's words at seq 2
    now = branch_diff(STATE, "default", "save-1", "npc-mara", "main", "reload")
    assert branch_diff(STATE, "default", "save-1", "npc-mara", "main", "reload", 3) == now
    with pytest.raises(BadRead, match=r"as_of_seq 4 is beyond the processed_seq 3 of .*'reload'"):
        branch_diff(STATE, "default", "save-1", "npc-mara", "main", "reload", 4)


def test_unknown_timelines_and_a_character_holding_nothing_are_not_found() -> None:
    with pytest.raises(
        NotFound,
        match=r"timeline 'nowhere' of world 'save-1' \(tenant 'default'\) has never received",
    ):
        branch_diff(STATE, "default", "save-1", "npc-mara", "main", "nowhere")
    with pytest.raises(NotFound, match="timeline 'nowhere'"):
        branch_diff(STATE, "default", "save-1", "npc-mara", "nowhere", "main")
    with pytest.raises(NotFound, match="'npc-nobody' holds no memory"):
        branch_diff(STATE, "default", "save-1", "npc-nobody", "main", "reload")
    # holding nothing on one of them is an answer: Tomas learned of the fight on main alone
    tomas = branch_diff(STATE, "default", "save-1", "npc-tomas", "main", "reload")
    assert (contents(tomas.only_on_timeline), tomas.only_on_other) == (
        ["Ilse beat the drunk sailor senseless"],
        [],
    )


def test_what_one_timeline_holds_alone_is_listed_in_story_order_across_its_ancestry() -> None:
    """README: in story order (position, then timeline): a grandchild's own memory came before
    what its parent gave it at an earlier position."""
    thanks = {
        "world_instance_id": "save-1",
        "timeline_id": "again",
        "seq": 4,
        "key": "loreweaver.conversation.player-said",
        "actor": "player-1",
        "target": "npc-mara",
        "players": ["player-1"],
        "payload": {"text": "Thank you for the ale."},
        "branch": {"parent_timeline_id": "reload", "after_seq": 3},
    }
    state = replay_lines([*LINES, orjson.dumps(thanks)]).state
    diff = branch_diff(state, "default", "save-1", "npc-mara", "again", "main")
    assert [(memory.timeline_id, memory.seq) for memory in diff.only_on_timeline] == [
        ("reload", 3),
        ("reload", 3),
        ("again", 4),
    ]


def _entries_read_beside(saves: int) -> int:
    """The entries a diff of `main` and `save-0` reads in a world of `saves` sibling saves,
    each loaded from seq 2 and living two events Mara witnesses."""
    lines = [*LINES[:2]]
    for save in range(saves):
        for seq in (3, 4):
            fields = {
                "world_instance_id": "save-1",
                "timeline_id": f"save-{save}",
                "seq": seq,
                "key": "social.song-sung",
                "actor": "player-1",
                "witnesses": ["npc-mara"],
            }
            if seq == 3:
                fields["branch"] = {"parent_timeline_id": "main", "after_seq": 2}
            lines.append(orjson.dumps(fields))
    counted = counted_replay(lines)
    branch_diff(counted, "default", "save-1", "npc-mara", "main", "save-0")
    return counted.looked_at


def test_a_diff_reads_the_two_timelines_not_every_save_of_the_world() -> None:
    """A reviewer's find: the diff read every memory the character held in the world, on every
    timeline, to keep those the two saw: 1.1 s beside 3,000 other saves."""
    assert _entries_read_beside(50) == _entries_read_beside(2)
