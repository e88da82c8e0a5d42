"""The key-prefix registry: every key state is written under is declared there, and the state
digest covers exactly the key spaces it declares projections."""

from __future__ import annotations

from collections.abc import Sequence

import orjson
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from projections.delivery import OUTBOX_DEPTH, SourceMessage, world_key
from projections.digest import world_digest
from projections.key_prefixes import KEY_SPACES, Role
from projections.keys import pack, unpack
from projections.memories import belief_id
from projections.migrations import upgrade
from projections.policy import resolve
from projections.projector import Projector
from projections.state import MemoryState
from schemas.policy import Policy
from tests.properties.worlds import DrawnChoices, Shape, draw_history
from tests.streams.noisy_story import noisy, story
from tests.tavern import TAVERN
from tests.tavern_lies import LINES

RECALL = orjson.dumps(
    {
        "world_instance_id": "save-1",
        "timeline_id": "main",
        "seq": 6,
        "key": "loreweaver.memory.recalled",
        "actor": "npc-mara",
        "payload": {"belief_ids": [belief_id("default", "save-1", "main", 3, "npc-mara", "event")]},
    }
)
"""A recall of the fight Mara saw (only a memory its actor holds is reinforced)."""
SUMMARY = (
    b'{"world_instance_id":"save-1","timeline_id":"main","seq":7,'
    b'"key":"loreweaver.memory.dialogue-summarised","actor":"npc-mara","target":"player-1",'
    b'"payload":{"scope":"player","summary":"The player promised to find her son."}}'
)
"""A summary of the dialogue scope the tavern's `player-said` line opened."""
PRIVATE = (
    b'{"world_instance_id":"save-1","timeline_id":"main","seq":8,'
    b'"key":"world.entity-declared","entities":{"player-1":{"privacy":"full"}}}'
)
"""The player opts out of having their lines kept (a world-wide privacy)."""
DELETION = b'{"world_instance_id":"save-1","timeline_id":"main","seq":1,"key":"world.deleted"}'
"""A deletion (it counts itself apart, for read caches)."""
RICH_POLICY = resolve(
    None,
    {
        "memory": {
            "spreading": {"enabled": True, "distortion": True},
            "persistent": {"characters": ["npc-mara"], "kinds": ["impression"]},
            "weighing": "model",
        }
    },
)
"""Every projection at work: rumours, group exchanges, persistent memories, model judgements
(made by the rules, no model being configured)."""


class RecordingState(MemoryState):
    """A `MemoryState` that notes the prefix (first key part) of every key written."""

    def __init__(self) -> None:
        super().__init__()
        self.prefixes_written: set[str] = set()

    def put(self, key: bytes, value: bytes) -> None:
        self.prefixes_written.add(str(unpack(key)[0]))
        super().put(key, value)


def prefixes_written(
    lines: list[bytes], policy: Policy, offsets: Sequence[int] | None = None
) -> set[str]:
    state = RecordingState()
    upgrade(state)  # as a start does: stamps the store's format
    projector = Projector(policies=lambda tenant, world: policy)
    for offset, raw in zip(offsets or range(len(lines)), lines, strict=True):
        projector.receive(state, SourceMessage("events", 0, offset, world_key(raw), raw))
    return state.prefixes_written


def test_every_key_written_has_a_declared_prefix_and_every_declared_prefix_is_written() -> None:
    tavern = TAVERN.splitlines()
    written: set[str] = set()
    for lines in (
        [*tavern, RECALL, SUMMARY, PRIVATE, DELETION],
        # the reload before its parent reaches the branch point, then the parent backwards
        [tavern[0], tavern[5], *tavern[4:0:-1]],
        noisy(story(worlds=2, events_per_world=80, seed=3), seed=3),
        LINES,  # a lie, then a line that convinces: a belief held less firmly
    ):
        for policy in (Policy(), RICH_POLICY):
            found = prefixes_written(lines, policy)
            assert found <= set(KEY_SPACES), f"undeclared prefixes: {found - set(KEY_SPACES)}"
            written |= found
    # a message OUTBOX_DEPTH positions past one never delivered (a commit marker) prunes
    written |= prefixes_written(tavern[:2], Policy(), [0, OUTBOX_DEPTH + 1])
    assert written == set(KEY_SPACES)  # nothing declared that nothing writes


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_generated_worlds_write_only_under_declared_prefixes(data: st.DataObject) -> None:
    history = draw_history(DrawnChoices(data), Shape(spreading=0.5))
    found = prefixes_written(history.delivery, history.policy)
    assert found <= set(KEY_SPACES), f"undeclared prefixes: {found - set(KEY_SPACES)}"


def test_the_digest_covers_projection_state_and_leaves_bookkeeping_out() -> None:
    for prefix, role in KEY_SPACES.items():
        state = MemoryState()
        for offset, raw in enumerate(TAVERN.splitlines()):
            Projector().receive(state, SourceMessage("events", 0, offset, b"save-1", raw))
        before = world_digest(state, "default", "save-1")
        state.put(pack(prefix, "default", "save-1", "one-more"), b"1")
        changed = world_digest(state, "default", "save-1") != before
        assert changed is (role is Role.PROJECTION), prefix
