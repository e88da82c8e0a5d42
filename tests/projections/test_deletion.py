"""World and tenant deletion (`projections.deletion`), by value, over in-process replays."""

from __future__ import annotations

import base64
import re
from typing import Any

import orjson
import pytest
from pydantic import ValidationError

from projections.deletion import deletion_event, deletion_marks, incarnation
from projections.delivery import SourceMessage
from projections.digest import world_digest
from projections.judgements import event_judgements, judgement_key, position_of, recorded_answer
from projections.key_prefixes import DELETIONS, JUDGEMENTS, OUTBOX, WORLD_PREFIXES
from projections.keys import pack, unpack
from projections.memory_store import persistent_memories_stored
from projections.policy import resolve
from projections.projector import Projector
from projections.runtime_read import NotFound, read_position, runtime_read
from projections.state import MemoryState
from schemas.judgements import RecordedJudgement
from streams.recall_index import SqliteRecallIndex
from streams.replay import messages, replay_lines
from tests.projections.recorded import Recorded
from tests.reads import recall_of
from tests.tavern import TAVERN

POLICY = resolve(
    None,
    {
        "memory": {
            "spreading": {"enabled": True},
            "persistent": {"characters": ["npc-mara"], "kinds": ["impression"]},
        }
    },
)
EMPTY = world_digest(MemoryState(), "default", "save-1")


def story(world: str = "save-1", tenant: str = "default") -> list[bytes]:
    """The tavern story in another world or tenant."""
    return [
        orjson.dumps(orjson.loads(line) | {"world_instance_id": world, "tenant_id": tenant})
        for line in TAVERN.splitlines()
    ]


def deletion(key: str, world: str = "save-1", tenant: str = "default") -> bytes:
    fields: dict[str, Any] = {"tenant_id": tenant, "world_instance_id": world}
    return orjson.dumps(fields | {"timeline_id": "main", "seq": 1, "key": key})


def replay(lines: list[bytes]) -> MemoryState:
    return replay_lines(lines, Projector(policies=lambda tenant, world: POLICY)).state


def keys_of(state: MemoryState, tenant: str, world: str) -> list[bytes]:
    return [key for prefix in WORLD_PREFIXES for key, _ in state.scan(pack(prefix, tenant, world))]


def test_a_deleted_world_leaves_no_key_and_reads_answer_404() -> None:
    before = replay([*story("save-1"), *story("save-2")])
    assert persistent_memories_stored(before, "default", "save-1") > 0
    assert keys_of(before, "default", "save-1")
    state = replay([*story("save-1"), *story("save-2"), deletion("world.deleted")])

    assert keys_of(state, "default", "save-1") == []
    assert persistent_memories_stored(state, "default", "save-1") == 0
    assert world_digest(state, "default", "save-1") == EMPTY
    assert world_digest(state, "default", "save-2") == world_digest(before, "default", "save-2")
    with pytest.raises(NotFound):
        runtime_read(state, "default", "save-1", "main", "npc-mara")
    assert runtime_read(state, "default", "save-2", "main", "npc-mara").beliefs


def test_the_deletion_is_acked_with_what_it_removed_and_an_unknown_world_changes_nothing() -> None:
    state = replay(story())
    projector = Projector(policies=lambda tenant, world: POLICY)
    untouched = [(key, value) for key, value in state.items() if unpack(key)[0] != OUTBOX]
    unknown = projector.receive(
        state, SourceMessage("t", 0, 100, b"nowhere", deletion("world.deleted", "nowhere"))
    )
    assert [(ack.outcome, ack.reason) for ack in unknown.acks] == [
        ("processed", "world 'nowhere' of tenant 'default': nothing to delete")
    ]
    assert [(k, v) for k, v in state.items() if unpack(k)[0] != OUTBOX] == untouched

    deleted = projector.receive(
        state, SourceMessage("t", 0, 101, b"save-1", deletion("world.deleted"))
    )
    assert deleted.acks[0].outcome == "processed"
    assert deleted.acks[0].reason == (
        f"deleted {len(keys_of(replay(story()), 'default', 'save-1'))} records "
        "of world 'save-1' of tenant 'default'"
    )
    assert not deleted.dead_letters


def test_a_replay_of_the_whole_log_deletes_again_and_later_events_start_the_world_anew() -> None:
    log = [*story(), deletion("world.deleted")]
    assert world_digest(replay(log), "default", "save-1") == EMPTY
    assert world_digest(replay(log + log), "default", "save-1") == EMPTY
    anew = replay([*log, *story()])
    assert world_digest(anew, "default", "save-1") == world_digest(
        replay(story()), "default", "save-1"
    )
    assert runtime_read(anew, "default", "save-1", "main", "npc-mara").beliefs


def test_a_world_begun_anew_reads_from_another_position_than_before_its_deletion() -> None:
    """A read cached before the deletion is never served for the world begun anew."""
    first = replay(story())
    anew = replay([*story(), deletion("world.deleted"), *story()])
    assert read_position(first, "default", "save-1", "main") != read_position(
        anew, "default", "save-1", "main"
    )


def test_an_empty_world_id_is_refused_not_taken_for_every_world_of_the_tenant() -> None:
    """`*` stands for the world a tenant deletion does not name; a world deletion for `*`
    would delete nothing and be acked as done."""
    with pytest.raises(ValidationError, match="world_instance_id"):
        deletion_event("default", "")
    assert deletion_event("default", None).world_instance_id == "*"


def test_a_deleted_tenant_loses_every_world_and_other_tenants_keep_theirs() -> None:
    worlds = [*story("save-1", "acme"), *story("save-2", "acme"), *story("save-1")]
    before = replay(worlds)
    state = replay([*worlds, deletion("tenant.deleted", "*", "acme")])
    for world in ("save-1", "save-2"):
        assert keys_of(before, "acme", world)
        assert keys_of(state, "acme", world) == []
        with pytest.raises(NotFound):
            runtime_read(state, "acme", world, "main", "npc-mara")
    assert world_digest(state, "default", "save-1") == world_digest(before, "default", "save-1")


def test_the_recall_index_forgets_a_deleted_world_and_finds_what_it_holds_anew() -> None:
    index = SqliteRecallIndex()

    def recalled(state: MemoryState, text: str) -> list[str]:
        return [memory["content"] for memory in recall_of(state, index, text)["memories"]]

    assert any("son" in content for content in recalled(replay(story()), "son"))
    daughter = [line.replace(b"your son", b"your daughter") for line in story()]
    anew = replay([*story(), deletion("world.deleted"), *daughter])
    assert recalled(anew, "son") == []
    assert any("daughter" in content for content in recalled(anew, "daughter"))


MODEL_MODE = resolve(None, {"memory": {"weighing": "model", "spreading": {"enabled": True}}})


@pytest.mark.parametrize("changes", [False, True], ids=["feed off", "feed on"])
def test_a_deletion_names_the_judgements_it_removed_for_the_judgements_topic_once(
    changes: bool,
) -> None:
    """The judgements topic is keyed as the state's judgements are: the deletion's intake names
    the keys of the deleted world's (the model's answers, each to tombstone there), no other
    world's or tenant's; a redelivery of the deletion names none (its tombstones were stored
    before the state that recognises it)."""
    projector = Projector(policies=lambda tenant, world: MODEL_MODE, changes=changes)
    state = MemoryState()
    lines = [*story("save-1"), *story("save-2"), *story("save-1", "acme"), *story("a-2", "acme")]
    for message in messages(lines):
        projector.receive(state, message)

    def judged(tenant: str, *world: str) -> list[bytes]:
        return [key for key, _ in state.scan(pack(JUDGEMENTS, tenant, *world))]

    save_1, save_2, acme = judged("default", "save-1"), judged("default", "save-2"), judged("acme")
    assert save_1 and save_2 and {unpack(key)[2] for key in acme} == {"save-1", "a-2"}
    world = SourceMessage("events", 0, 100, b"save-1", deletion("world.deleted"))
    deleted = projector.receive(state, world)
    assert list(deleted.forgotten_judgements) == save_1
    assert judged("default", "save-1") == []
    assert judged("default", "save-2") == save_2
    again = projector.receive(state, world)
    assert (again.redelivered, again.acks, again.forgotten_judgements) == (True, deleted.acks, ())

    tenant = SourceMessage("events", 0, 101, b"*", deletion("tenant.deleted", "*", "acme"))
    assert list(projector.receive(state, tenant).forgotten_judgements) == acme
    assert judged("default", "save-2") == save_2


def test_a_deletion_cut_short_at_any_write_and_delivered_again_ends_deleted() -> None:
    """A worker killed mid-deletion restarts with a prefix of the deletion's writes (what its
    changelog got) and is sent the deletion again: the world ends deleted, the deletion counted
    once (as a rebuild, given it once, counts it: the model's answers of the world begun anew
    are kept by that count), and a world begun anew still reads from another position than
    before the deletion."""
    before = replay(story())
    position = read_position(before, "default", "save-1", "main")
    message = SourceMessage("events", 0, 10_000, b"save-1", deletion("world.deleted"))
    projector = Projector(policies=lambda tenant, world: POLICY)
    complete = Recorded(before)
    projector.receive(complete, message)
    assert len(complete.writes) > 10
    for cut in range(len(complete.writes)):
        state = Recorded(before)
        for key, value in complete.writes[:cut]:
            state.put(key, value) if value is not None else state.delete(key)
        projector.receive(state, message)
        assert keys_of(state, "default", "save-1") == [], cut
        assert world_digest(state, "default", "save-1") == EMPTY, cut
        assert deletion_marks(state, "default", "save-1") == b"0/1", cut
        for index, line in enumerate(story()):
            projector.receive(state, SourceMessage("events", 0, 20_000 + index, b"save-1", line))
        assert read_position(state, "default", "save-1", "main") != position, cut


def test_a_worlds_life_is_counted_by_its_own_deletions_whatever_else_the_state_holds() -> None:
    """The life a world's model answers are kept under (`incarnation`): a world begun after its
    tenant was deleted is in its first, however many of the tenant's other worlds that deletion
    removed from the same state (a worker's partition holds several; a rebuild of one world, or
    a replay of every partition, holds others); a world the tenant's deletion removed is in its
    second."""
    tenant_deleted = deletion("tenant.deleted")
    everything = replay([*story("save-1"), tenant_deleted, *story("save-2"), *story("save-1")])
    alone = replay([tenant_deleted, *story("save-2")])
    assert incarnation(everything, "default", "save-2") == ""
    assert incarnation(alone, "default", "save-2") == ""
    assert incarnation(everything, "default", "save-1") == "1"
    assert incarnation(replay([*story("save-1"), deletion("world.deleted")]), "default", "save-1")


def test_a_world_begun_anew_before_its_life_was_kept_reads_the_answers_its_state_holds() -> None:
    """A store of a release before state format 4: a world deleted (counted without the
    deletion's offset) and begun anew, its model answers kept under keys that do not name its
    life. They are still its answers (the deletion removed the deleted life's)."""
    state = MemoryState()
    state.put(pack(DELETIONS, "default", "save-1"), b"1")
    made = RecordedJudgement(
        npc_id="npc-mara", belief_id="part", judgement="summary", answer={"summary": "Kept."}
    )
    legacy = event_judgements(("default", "save-1", "main", 7, ""), [made])
    state.put(judgement_key(position_of(legacy)), legacy.to_bytes())
    position = ("default", "save-1", "main", 7, incarnation(state, "default", "save-1"))
    assert position[4] == "1"
    assert recorded_answer(state, position, ("npc-mara", "part", "summary")) == {"summary": "Kept."}


@pytest.mark.parametrize("key", ["world.deleted", "tenant.deleted"])
def test_a_redelivery_from_before_a_deletion_leaves_the_world_begun_anew_waiting(key: str) -> None:
    """Seq 2 waits, seq 1 releases it, the world is deleted, and begun anew seq 2 waits again.
    A restart takes in again the messages past the committed offset: the one that released
    seq 2 in the deleted world, re-sent from its outbox row, deleted the new world's waiting
    seq 2, and the new world's seq 1 released nothing. It changes nothing of the world now."""
    projector = Projector()
    state = MemoryState()

    def event(seq: int) -> bytes:
        return orjson.dumps(
            {"world_instance_id": "save-1", "timeline_id": "main", "seq": seq, "key": "x"}
        )

    log = [event(2), event(1), deletion(key), event(2)]
    messages = [SourceMessage("events", 0, offset, b"save-1", v) for offset, v in enumerate(log)]
    for message in messages:
        projector.receive(state, message)
    for message in messages[1:]:  # the restart
        assert projector.receive(state, message).redelivered
    begun_anew = SourceMessage("events", 0, len(log), b"save-1", event(1))
    acks = projector.receive(state, begun_anew).acks
    assert [(ack.seq, ack.outcome.value) for ack in acks] == [(1, "processed"), (2, "processed")]


def test_a_deletion_counted_without_its_offset_is_later_than_every_message_before_it() -> None:
    """A store of a release before state format 4 counted a deletion without its offset: a
    message from before it, taken in again after the upgrade, changes nothing of the world
    begun anew (taken for a later one, it deleted the new world's waiting seq 2, and the new
    seq 1 released nothing)."""
    projector, state = Projector(), MemoryState()

    def event(seq: int) -> bytes:
        return orjson.dumps(
            {"world_instance_id": "w", "timeline_id": "main", "seq": seq, "key": "x"}
        )

    old = [event(2), event(1), deletion("world.deleted", "w")]
    messages = [SourceMessage("events", 0, offset, b"w", line) for offset, line in enumerate(old)]
    for message in messages:
        projector.receive(state, message)
    state.put(pack(DELETIONS, "default", "w"), b"1")  # as the release before kept it
    projector.receive(state, SourceMessage("events", 0, 3, b"w", event(2)))  # waits
    assert projector.receive(state, messages[1]).redelivered
    acks = projector.receive(state, SourceMessage("events", 0, 4, b"w", event(1))).acks
    assert [(ack.seq, ack.outcome.value) for ack in acks] == [(1, "processed"), (2, "processed")]


def test_a_deletion_takes_the_worlds_refused_waiting_event_out_of_the_outbox() -> None:
    """A waiting event refused as a later message released it is kept whole in that message's
    outbox row (a redelivery finds it gone from the buffer): its bytes, a character's diary here,
    stayed in the state and its changelog after the world's deletion, and a redelivery of the
    message sent them to the dead-letter topic again. The row's acks stay, as the README says."""

    def declaring(seq: int, **fields: str) -> bytes:
        mara = {"name": "Mara", "kind": "character", **fields}
        event = {"world_instance_id": "save-1", "timeline_id": "main", "seq": seq}
        return orjson.dumps(
            event | {"key": "world.entity-declared", "entities": {"npc-mara": mara}}
        )

    secret = b"PLAYER-SECRET"
    lines = [
        declaring(1, bio="b" * 45_000),
        declaring(3, diary=secret.decode() + " " + "x" * 45_000),  # waits: with the bio, too large
        declaring(2, mood="calm"),  # releases it: refused
    ]
    projector = Projector(record_bytes=16_384)  # the least setting: a record of some 82 KB
    messages = [
        SourceMessage("events", 0, offset, b"save-1", line) for offset, line in enumerate(lines)
    ]
    state = MemoryState()
    released = [projector.receive(state, message) for message in messages][2]
    [letter] = released.dead_letters
    assert "waited for an earlier seq" in letter.reason
    assert secret in base64.b64decode(letter.value_base64)
    other = replay(story("other-world"))
    for key, value in other.items():
        state.put(key, value)
    projector.receive(state, SourceMessage("events", 0, 3, b"save-1", deletion("world.deleted")))
    encoded = re.compile(rb"[A-Za-z0-9+/]{64,}={0,2}")  # a dead letter's value_base64
    holding = [
        unpack(key)
        for key, value in state.items()
        if any(secret in base64.b64decode(run) for run in encoded.findall(value))
    ]
    assert holding == []
    again = projector.receive(state, messages[2])
    assert again.redelivered and again.dead_letters == []
    assert [(ack.seq, ack.outcome.value) for ack in again.acks] == [
        (2, "processed"),
        (3, "rejected"),
    ]
    assert keys_of(state, "default", "save-1") == []
    assert world_digest(state, "default", "other-world") == world_digest(
        other, "default", "other-world"
    )
