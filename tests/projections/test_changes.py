"""The change feed (`projections.changes`) by value, over the seed's tavern replayed in-process."""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import duckdb
import orjson
import pytest
from jsonschema import Draft202012Validator
from pydantic import ValidationError

from projections import timelines
from projections.changes import EventChanges, MessageChanges, change_id
from projections.delivery import SourceMessage, world_key
from projections.digest import world_digest
from projections.key_prefixes import OUTBOX, PENDING
from projections.keys import pack
from projections.memory_store import formed_between, load_memory, memory_keys, store_memories
from projections.policy import resolve
from projections.projector import Projector
from projections.relations import record_relations
from projections.runtime_read import runtime_read
from projections.scratch_state import ScratchState
from projections.sequencing import Applied
from projections.state import MemoryState, StateTransaction
from projections.timelines import Ancestry
from schemas import Event
from schemas.changes import CHANGE_MODELS, Change, ChangeRecords
from schemas.memory import Memory
from schemas.policy import Policy
from schemas.records import OutboxRecord
from tests import tavern_lies
from tests.seed import SEED_READ
from tests.tavern import MAIN, PERSISTENT
from tests.tavern import TAVERN_LINES as TAVERN

ROOT = Path(__file__).resolve().parents[2]
POLICY = resolve(None, {"memory": {"spreading": {"enabled": True}}})


def keeping(persistent: dict[str, list[str]]) -> Policy:
    """`POLICY`, keeping these memories for the whole world, across timelines."""
    return resolve(None, {"memory": {"spreading": {"enabled": True}, "persistent": persistent}})


SAILOR = "npc-drunk-sailor"
TOMAS_OF_MARA = ("npc-tomas", "npc-mara")


def feed(changes: bool = True, policy: Policy = POLICY) -> Projector:
    return Projector(policies=lambda tenant, world: policy, changes=changes)


def take(
    projector: Projector, state: MemoryState, lines: Iterable[bytes], first: int = 0
) -> list[Change]:
    """Every line as the next message of one partition; all their changes together."""
    changes: list[Change] = []
    for offset, line in enumerate(lines, start=first):
        intake = projector.receive(state, SourceMessage("events", 0, offset, world_key(line), line))
        changes += decoded(intake.changes)
    return changes


def decoded(records: ChangeRecords) -> list[Change]:
    """The changes as a consumer of the feed reads them."""
    return [orjson.loads(record) for world in records.values() for record in world]


def fields(changes: Iterable[Change], *names: str) -> list[tuple[Any, ...]]:
    return [tuple(change[name] for name in names) for change in changes]


def of_kind(changes: Iterable[Change], kind: str) -> list[Change]:
    return [change for change in changes if change["kind"] == kind]


def test_the_tavern_forms_beliefs_where_the_memories_are_formed() -> None:
    changes = take(feed(), MemoryState(), TAVERN)
    formed = of_kind(changes, "belief-formed")
    assert fields(formed, "timeline_id", "seq", "character_id", "source", "source_entity") == [
        ("main", 2, "npc-mara", "player", "player-1"),
        ("main", 3, "npc-mara", "seen", None),
        ("main", 4, "npc-tomas", "told", "npc-mara"),
        ("main", 4, "npc-tomas", "rumour", "npc-mara"),
        ("main", 5, "npc-tomas", "told", "npc-mara"),
        ("reload", 3, "npc-mara", "seen", None),
        ("reload", 3, "npc-mara", "seen", None),
    ]
    seed_belief = formed[0]
    assert (seed_belief["content"], seed_belief["confidence"], seed_belief["game_time"]) == (
        SEED_READ["beliefs"][0]["content"],
        SEED_READ["beliefs"][0]["confidence"],
        "day 1, 19:41",
    )
    assert seed_belief["story_minutes"] == (24 + 19) * 60 + 41


def test_rumours_passed_name_teller_listener_and_the_belief_the_listener_now_holds() -> None:
    """At a meeting (seq 4) and by the game's `told` (seq 5: the feed left those out, and "who
    passed the most rumours" missed them)."""
    state = MemoryState()
    changes = take(feed(), state, TAVERN)
    passed = of_kind(changes, "rumour-passed")
    assert fields(passed, "seq", "teller_id", "listener_id", "hops") == [
        (4, "npc-mara", "npc-tomas", 1),
        (4, "npc-mara", "npc-tomas", 2),
        (5, "npc-mara", "npc-tomas", 1),
    ]
    keys = memory_keys(state, "default", "save-1")
    for change in passed:
        held = load_memory(state, keys, change["listener_id"], change["belief_id"])
        assert held is not None
        assert (held.content, held.confidence, held.origin) == (
            change["content"],
            change["confidence"],
            change["origin"],
        )


def test_the_last_relation_change_is_what_the_runtime_read_shows() -> None:
    state = MemoryState()
    changes = take(feed(), state, TAVERN[:3])
    last = {
        (change["character_id"], change["entity_id"]): (
            change["feeling"],
            change["memories"],
            change["seq"],
        )
        for change in of_kind(changes, "relation-changed")
    }
    assert {
        entity: value for (character, entity), value in last.items() if character == "npc-mara"
    } == {
        relation["entity_id"]: (relation["feeling"], relation["memories"], relation["last_seq"])
        for relation in SEED_READ["relations"]
    }


def said_to_mara(timeline: str, seq: int, text: str, game_time: str) -> bytes:
    """Ilse speaks to Mara: a memory of hers about Ilse."""
    return orjson.dumps(
        {
            "world_instance_id": "save-1",
            "timeline_id": timeline,
            "seq": seq,
            "key": "loreweaver.conversation.player-said",
            "actor": "player-1",
            "target": "npc-mara",
            "players": ["player-1"],
            "payload": {"text": text},
            "game_time": game_time,
        }
    )


LATER = [
    said_to_mara("main", 6, "Rest now, Mara.", "day 1, 22:00"),
    said_to_mara("reload", 4, "Did the locket please you?", "day 1, 20:30"),
]
"""After the tavern, Ilse speaks to Mara on main, then on the reload past its gift: at the
reload's 4th position, main's 6th is still to come."""


@pytest.mark.parametrize(
    ("policy", "mara_of_ilse_on_the_reload"),
    [
        pytest.param(POLICY, [(3, 0.47, 3), (4, 0.4, 4)], id="ordinary"),
        # the gift's impression persistent, then a memory of the timeline's again
        pytest.param(keeping({"kinds": ["impression"]}), [(3, 0.47, 3), (4, 0.4, 4)], id="mixed"),
        # main's 3rd event persistent too: past the reload's branch point, it counts there;
        # main's 6th does not count at the reload's 4th
        pytest.param(PERSISTENT, [(3, 0.28, 4), (4, 0.26, 5)], id="persistent"),
    ],
)
def test_every_relation_change_is_what_the_read_as_of_its_position_shows(
    policy: Policy, mara_of_ilse_on_the_reload: list[tuple[int, float, int]]
) -> None:
    """Persistent memories too: they belong to no timeline, and a read adds those formed up to
    its position to the relations of every timeline. Each change is read as its event left the
    state: a persistent memory another timeline forms later at the same position moves that
    read too."""
    projector, state = feed(policy=policy), MemoryState()
    moves: list[Change] = []
    for offset, line in enumerate([*TAVERN, *LATER]):
        for change in of_kind(take(projector, state, [line], offset), "relation-changed"):
            moves.append(change)
            read = runtime_read(
                state,
                "default",
                "save-1",
                change["timeline_id"],
                change["character_id"],
                change["seq"],
            )
            relation = {shown.entity_id: shown for shown in read.relations}[change["entity_id"]]
            assert (change["feeling"], change["memories"]) == (relation.feeling, relation.memories)
    assert fields(moves, "timeline_id", "seq", "character_id", "entity_id") == [
        ("main", 2, "npc-mara", "player-1"),
        *[("main", 3, "npc-mara", entity) for entity in ("player-1", "loc-tavern", SAILOR)],
        *[("main", 4, "npc-tomas", e) for e in ("player-1", "loc-tavern", SAILOR, "npc-mara")],
        *[("main", 5, "npc-tomas", entity) for entity in ("npc-mara", "player-1", SAILOR)],
        ("reload", 3, "npc-mara", "player-1"),
        ("reload", 3, "npc-mara", "item-locket"),
        ("main", 6, "npc-mara", "player-1"),
        ("reload", 4, "npc-mara", "player-1"),
    ]
    tomas_of_mara = [c for c in moves if (c["character_id"], c["entity_id"]) == TOMAS_OF_MARA]
    assert fields(tomas_of_mara, "seq", "feeling", "memories") == [(4, -0.1, 2), (5, -0.13, 3)]
    mara_of_ilse = [
        change
        for change in moves
        if (change["timeline_id"], change["character_id"], change["entity_id"])
        == ("reload", "npc-mara", "player-1")
    ]
    assert fields(mara_of_ilse, "seq", "feeling", "memories") == mara_of_ilse_on_the_reload


def test_every_change_id_is_unique_and_the_same_on_every_replay() -> None:
    first = [change["change_id"] for change in take(feed(), MemoryState(), TAVERN)]
    again = [change["change_id"] for change in take(feed(), MemoryState(), TAVERN)]
    assert first == again
    assert len(set(first)) == len(first)


def test_a_redelivered_or_republished_event_changes_nothing_again() -> None:
    """The worker sends the state that recognises the redelivery to the changelog only once
    the event's changes are on the feed (`streams.app.Rumourmill.send_changes`): a redelivery
    sends none."""
    projector, state = feed(), MemoryState()
    sent = take(projector, state, TAVERN)
    assert [change for change in sent if change["seq"] == 4]
    redelivered = projector.receive(
        state, SourceMessage("events", 0, 3, world_key(TAVERN[3]), TAVERN[3])
    )
    assert redelivered.redelivered
    assert redelivered.acks
    assert redelivered.changes == {}
    published_again = take(projector, state, TAVERN, first=len(TAVERN))  # a producer's retry
    assert published_again == []


def test_a_redelivery_an_earlier_release_kept_changes_for_sends_them_again() -> None:
    """Releases before this one kept a message's changes in its outbox row: a redelivery of
    such a message still gives them back (the same ids again)."""
    projector, state = feed(), MemoryState()
    sent = take(projector, state, TAVERN[:4])
    at = pack(OUTBOX, "events", 0, 3)
    row = OutboxRecord.from_bytes(state.get(at) or b"")
    assert row.changes == []
    kept = [change for change in sent if change["seq"] == 4]
    state.put(at, OutboxRecord.encode(row.message_digest, row.acks, row.dead_letters, kept))
    redelivered = projector.receive(
        state, SourceMessage("events", 0, 3, world_key(TAVERN[3]), TAVERN[3])
    )
    assert redelivered.redelivered
    assert decoded(redelivered.changes) == kept


def test_a_deletion_takes_the_worlds_changes_an_earlier_release_kept_out_of_the_outbox() -> None:
    """Rows an earlier release kept changes in held the deleted world's words (a player's line
    among them) in the state and its changelog, and a redelivery sent them to the feed again,
    after the world's `world-deleted`: a consumer dropping the world's rows at that change held
    them again. Another world's kept changes stay."""
    projector, state = feed(), MemoryState()
    other = [line.replace(b'"save-1"', b'"save-2"') for line in TAVERN[:4]]
    sent = take(projector, state, [*TAVERN[:4], *other])
    for offset, world in ((1, "save-1"), (5, "save-2")):  # the player's line, seq 2
        at = pack(OUTBOX, "events", 0, offset)
        row = OutboxRecord.from_bytes(state.get(at) or b"")
        kept = [c for c in sent if (c["seq"], c["world_instance_id"]) == (2, world)]
        assert kept
        state.put(at, OutboxRecord.encode(row.message_digest, row.acks, row.dead_letters, kept))
    take(projector, state, [deletion("world.deleted")], first=8)
    assert not [key for key, value in state.items() if b"your son" in value and b"save-1" in value]
    again = [
        projector.receive(state, SourceMessage("events", 0, offset, world_key(line), line))
        for offset, line in ((1, TAVERN[1]), (5, other[1]))
    ]
    assert all(intake.redelivered for intake in again)
    assert [sorted(intake.changes) for intake in again] == [[], ["save-2"]]


def test_an_event_applied_again_over_its_own_state_gives_the_same_changes() -> None:
    """A crash between applying an event and saving its positions applies it again."""
    state = MemoryState()
    changes = take(feed(), state, TAVERN[:4])
    again = MessageChanges()
    event = Event.model_validate_json(TAVERN[3])
    record = timelines.load(state, "default", "save-1", "main")
    assert record is not None
    again.around(feed().apply)(state, event, timelines.ancestry(state, record, 3))
    assert [c["change_id"] for c in decoded(again.records)] == [
        c["change_id"] for c in changes if c["seq"] == 4
    ]


def test_persistent_memories_added_to_relations_again_count_once() -> None:
    """An event's writes laid in again (the worker is at-least-once) write each persistent
    memory's entries again: the relations it moved, read and told, stand where they stood."""
    state = MemoryState()
    told = of_kind(take(feed(policy=PERSISTENT), state, TAVERN[:4]), "relation-changed")
    read = runtime_read(state, "default", "save-1", "main", "npc-tomas")
    keys = memory_keys(state, "default", "save-1")
    formed = list(formed_between(state, keys, "main", 3, 4))
    assert formed and all(memory.persistent for memory in formed)
    record = timelines.load(state, "default", "save-1", "main")
    assert record is not None

    def relations_again(
        tx: StateTransaction, at: Event, ancestry: Ancestry, *, changes: EventChanges
    ) -> Applied:
        record_relations(tx, keys, ancestry, formed, changes)
        return Applied()

    again = MessageChanges()
    event = Event.model_validate_json(TAVERN[3])
    again.around(relations_again)(state, event, timelines.ancestry(state, record, 3))
    assert decoded(again.records) == [change for change in told if change["seq"] == 4] != []
    assert runtime_read(state, "default", "save-1", "main", "npc-tomas") == read


@pytest.mark.parametrize("policy", [POLICY, PERSISTENT], ids=["ordinary", "persistent"])
def test_a_message_redelivered_after_a_crash_before_its_state_was_stored_repeats_its_changes(
    policy: Policy,
) -> None:
    """The worker stores a batch's state only once its changes are on the feed
    (`streams.app.Rumourmill.send_changes`): a crash in between loses the state, and the
    message redelivered is applied again over the state without it."""
    projector, state = feed(policy=policy), MemoryState()
    sent: list[Change] = []
    for offset, line in enumerate(TAVERN):
        message = SourceMessage("events", 0, offset, world_key(line), line)
        lost = projector.receive(ScratchState(state), message)  # its state is never stored
        redelivered = projector.receive(state, message)
        assert redelivered.changes == lost.changes
        sent += decoded(redelivered.changes)
    assert {change["kind"] for change in sent} >= {"belief-formed", "rumour-passed"}


def stored_again(*updates: dict[str, Any]) -> tuple[Memory, list[Change]]:
    """Mara's seed belief stored again at seq 5 with each of `updates` in turn, as a rule
    would store it: the belief as held before, and what the feed was told."""
    state = MemoryState()
    take(feed(), state, TAVERN[:3])
    keys = memory_keys(state, "default", "save-1")
    held = load_memory(state, keys, "npc-mara", of_mara_seed_belief(state))
    assert held is not None
    event = Event.model_validate_json(TAVERN[4]).model_copy(update={"seq": 5})

    def store_again(
        tx: StateTransaction, at: Event, ancestry: Ancestry, *, changes: EventChanges
    ) -> Applied:
        for update in updates:
            store_memories(tx, keys, [held.model_copy(update=update)], changes)
        return Applied()

    noted = MessageChanges()
    noted.around(store_again)(state, event, ())
    return held, decoded(noted.records)


def test_a_memory_stored_again_less_surely_is_a_weakened_belief() -> None:
    """Whatever rule stores it (the referee does): read off the stored versions alone."""
    weaker = {"confidence": 0.35}
    held, changes = stored_again(weaker, weaker)  # the second no lower
    assert changes == [
        {
            "change_id": change_id(
                "default", "save-1", "main", 5, "belief-weakened", "npc-mara", held.belief_id
            ),
            "kind": "belief-weakened",
            "tenant_id": "default",
            "world_instance_id": "save-1",
            "timeline_id": "main",
            "seq": 5,
            "game_time": "day 1, 21:40",
            "story_minutes": (24 + 21) * 60 + 40,
            "life": 0,
            "character_id": "npc-mara",
            "belief_id": held.belief_id,
            "confidence_before": 0.7,
            "confidence": 0.35,
        }
    ]


def of_mara_seed_belief(state: MemoryState) -> str:
    read = runtime_read(state, "default", "save-1", "main", "npc-mara")
    return read.beliefs[0].belief_id


def deletion(key: str, world: str = "save-1", tenant: str = "default") -> bytes:
    return orjson.dumps(
        {"tenant_id": tenant, "world_instance_id": world, "timeline_id": "*", "seq": 1, "key": key}
    )


def in_world(world: str, tenant: str = "default") -> list[bytes]:
    return [
        orjson.dumps(orjson.loads(line) | {"world_instance_id": world, "tenant_id": tenant})
        for line in TAVERN
    ]


def test_deleting_a_world_is_one_change_numbered_by_deletion_and_nothing_for_an_unknown_one() -> (
    None
):
    projector, state = feed(), MemoryState()
    lines = [
        *in_world("save-1"),
        *in_world("save-2"),
        deletion("world.deleted"),
        deletion("world.deleted"),  # nothing left to delete
        *in_world("save-1"),
        deletion("world.deleted"),
        deletion("tenant.deleted", "*"),
    ]
    deleted = of_kind(take(projector, state, lines), "world-deleted")
    assert fields(deleted, "world_instance_id", "scope", "deletion") == [
        ("save-1", "world", 1),
        ("save-1", "world", 2),
        ("save-2", "tenant", 1),
    ]
    assert len({change["change_id"] for change in deleted}) == 3


def test_the_feed_changes_no_state_and_off_works_out_nothing() -> None:
    on, off = MemoryState(), MemoryState()
    assert take(feed(changes=False), off, TAVERN) == []
    assert take(feed(), on, TAVERN)
    assert world_digest(on, "default", "save-1") == world_digest(off, "default", "save-1")


@pytest.mark.parametrize("kind", ["tavern", "deletions"])
def test_every_change_is_valid_by_its_committed_json_schema(kind: str) -> None:
    lines = TAVERN if kind == "tavern" else [*TAVERN, deletion("world.deleted")]
    changes = take(feed(), MemoryState(), lines)
    assert changes
    for change in changes:
        schema = json.loads(
            (ROOT / "schemas" / "json" / f"change-{change['kind']}.schema.json").read_text()
        )
        message = orjson.loads(orjson.dumps(change))
        assert list(Draft202012Validator(schema).iter_errors(message)) == []
        assert CHANGE_MODELS[change["kind"]].model_validate(message).model_dump() == change


@pytest.mark.parametrize(
    ("kind", "broken"),
    [
        ("belief-formed", {"change_id": "not-hex"}),
        ("belief-formed", {"kind": "belief-weakened"}),
        ("belief-formed", {"seq": 0}),
        ("belief-formed", {"confidence": 1.5}),
        ("belief-formed", {"unknown": 1}),
        ("belief-formed", {"belief_id": "not-an-id"}),
        ("belief-formed", {"game_time": "whenever"}),
        ("belief-formed", {"life": -1}),
        ("rumour-passed", {"hops": 0}),
        ("rumour-passed", {"origin": ""}),
    ],
)
def test_a_broken_change_is_refused_by_its_schema_and_its_model_alike(
    kind: str, broken: dict[str, Any]
) -> None:
    """Each schema is as strict as the feed's documentation: a rumour is passed at least one
    telling from whoever saw it, ids are 32 hex characters, story time reads `day D, HH:MM`."""
    changed = of_kind(take(feed(), MemoryState(), TAVERN), kind)[0]
    message = changed | broken
    schema = json.loads((ROOT / "schemas" / "json" / f"change-{kind}.schema.json").read_text())
    assert list(Draft202012Validator(schema).iter_errors(changed)) == []
    assert list(Draft202012Validator(schema).iter_errors(message))
    with pytest.raises(ValidationError):
        CHANGE_MODELS[kind].model_validate(message)


def test_the_referee_weakening_a_belief_is_a_weakened_belief_as_the_reads_show_it() -> None:
    """Seed 001's lie: Rook tells Mara the sailor lives, Ilse convinces her otherwise."""
    state = MemoryState()
    changes = take(feed(), state, tavern_lies.LINES)
    weakened = of_kind(changes, "belief-weakened")
    assert fields(weakened, "seq", "character_id") == [(7, "npc-mara")]
    belief = weakened[0]["belief_id"]
    told = [c for c in of_kind(changes, "belief-formed") if c["belief_id"] == belief]
    assert fields(told, "seq", "content") == [
        (6, "The sailor is alive and drinking at the harbour")
    ]

    def held_at(seq: int) -> float:
        read = runtime_read(state, "default", "save-1", "main", "npc-mara", seq)
        return {b.belief_id: b.confidence for b in read.beliefs}[belief]

    assert (weakened[0]["confidence_before"], weakened[0]["confidence"]) == (held_at(6), held_at(7))
    assert held_at(7) < held_at(6)


def test_a_world_begun_anew_after_its_deletion_repeats_no_change_id_of_the_deleted_one() -> None:
    """A consumer deduplicates by change id: the same story told again after a deletion is
    other changes, of the world's next life."""
    projector, state = feed(), MemoryState()
    before = take(projector, state, TAVERN)
    take(projector, state, [deletion("world.deleted")], first=len(TAVERN))
    after = take(projector, state, TAVERN, first=len(TAVERN) + 1)
    assert fields(after, "kind", "seq") == fields(before, "kind", "seq")
    assert not {change["change_id"] for change in before} & {c["change_id"] for c in after}


def readme_sql(opening: str) -> str:
    """The README's SQL example that starts with `opening`, as a reader would copy it."""
    readme = (ROOT / "README.md").read_text()
    start = readme.index("```sql\n" + opening) + len("```sql\n")
    return readme[start : readme.index("```", start)]


def test_a_consumer_loading_the_feed_in_bulk_keeps_only_the_worlds_last_life(
    tmp_path: Path,
) -> None:
    """A world deleted and begun anew forms its memories under the same belief ids again, and
    its changes were alike in every field but the opaque `change_id`: a consumer loading the
    feed into DuckDB (not in the feed's order) counted the deleted life's beliefs too. Every
    change names its world's life; the README's query keeps the last one, another world's
    rows left whole."""
    projector, state = feed(), MemoryState()
    lives: list[list[Change]] = []
    for life in range(3):
        if life:
            lives.append(take(projector, state, [deletion("world.deleted")], first=4 * life - 1))
        lives.append(take(projector, state, TAVERN[:3], first=4 * life))
    first, first_end, second, second_end, last = lives
    other = take(feed(), MemoryState(), [line.replace(b'"save-1"', b'"save-2"') for line in TAVERN])
    assert [{change["life"] for change in life} for life in (first, second, last)] == [
        {0},
        {1},
        {2},
    ]
    assert [change["deletion"] for change in [*first_end, *second_end]] == [1, 2]
    shuffled = [*reversed(last), *other, *second_end, *second, *first_end, *first]
    assert kept_by_readme_query(tmp_path, shuffled) == sorted(
        change["change_id"] for change in [*last, *other]
    )


def kept_by_readme_query(tmp_path: Path, changes: list[Change]) -> list[str]:
    """The ids of the changes the README's bulk query keeps of a feed holding `changes`."""
    lines = tmp_path / "changes.ndjson"
    lines.write_bytes(b"\n".join(orjson.dumps(change) for change in changes))
    query = readme_sql("WITH feed AS").replace("'changes.ndjson'", "?").rstrip().rstrip(";")
    kept = duckdb.connect().execute(f"SELECT change->>'change_id' FROM ({query})", [str(lines)])
    return sorted(row[0] for row in kept.fetchall())


def test_who_passed_the_most_rumours_counts_each_worlds_present_life_alone(
    tmp_path: Path,
) -> None:
    """Counted over the whole feed, the README's query added a deleted life's rumours, and
    another tenant's world of the same id's, to what a teller passed in the world now; that
    world's rows are not ended by the other tenant's deletion."""
    projector, state = feed(), MemoryState()
    deleted_life = take(projector, state, TAVERN)
    deleted_life += take(projector, state, [deletion("world.deleted")], first=len(TAVERN))
    present = take(projector, state, TAVERN[:4], first=len(TAVERN) + 1)
    elsewhere = take(feed(), MemoryState(), [in_tenant("acme", line) for line in TAVERN])
    lines = tmp_path / "changes.ndjson"
    shuffled = [*present, *elsewhere, *reversed(deleted_life)]
    lines.write_bytes(b"\n".join(orjson.dumps(change) for change in shuffled))
    query = readme_sql("-- who passed the most rumours").replace("'changes.ndjson'", "?")
    rows = duckdb.connect().execute(query, [str(lines)]).fetchall()
    assert len(of_kind(present, "rumour-passed")) == 2  # seq 4 only: seq 5's told is not in it
    assert rows == [  # acme's save-1 was never deleted: its life 0 counts
        ("acme", "save-1", "npc-mara", 3),
        ("default", "save-1", "npc-mara", 2),
    ]


def in_tenant(tenant: str, line: bytes) -> bytes:
    """The event of `line` in `tenant`'s world of the same id."""
    return orjson.dumps({**orjson.loads(line), "tenant_id": tenant})


def test_the_bulk_query_keeps_a_feed_no_world_was_deleted_in_and_an_earlier_releases_rows(
    tmp_path: Path,
) -> None:
    """DuckDB makes a column only of the fields some line holds: without a `world-deleted`
    change the query found no `deletion` and failed; a change of a release before `life`, read
    as no life at all, was dropped."""
    changes = take(feed(), MemoryState(), TAVERN)
    earlier = [{key: value for key, value in change.items() if key != "life"} for change in changes]
    ids = sorted(change["change_id"] for change in changes)
    assert kept_by_readme_query(tmp_path, changes) == ids
    assert kept_by_readme_query(tmp_path, [*earlier[:5], *changes[5:]]) == ids


def test_a_tenants_deletion_numbers_a_world_alike_on_its_partition_and_in_one_replay() -> None:
    """A tenant's deletion reaches every partition; each counts only the copies that removed
    something there. Numbered by the world's own count, a replay of every partition into one
    state gives the very same `world-deleted` changes as the partitions did."""
    wiped = deletion("tenant.deleted", "*")
    partitions = [[*in_world("a"), wiped, *in_world("a"), wiped], [wiped, *in_world("b"), wiped]]
    live = [
        change
        for lines in partitions
        for change in of_kind(take(feed(), MemoryState(), lines), "world-deleted")
    ]
    replayed = [*in_world("a"), wiped, wiped, *in_world("a"), *in_world("b"), wiped, wiped]
    again = of_kind(take(feed(), MemoryState(), replayed), "world-deleted")
    assert sorted(live, key=str) == sorted(again, key=str)
    assert fields(live, "world_instance_id", "deletion") == [("a", 1), ("a", 2), ("b", 1)]


def test_a_message_that_fills_a_gap_carries_the_changes_of_every_event_it_releases() -> None:
    """Seq 3 and 2 wait for seq 1; the message of seq 1 applies all three, and the feed gets
    what each of them changed, as if they had come in order."""
    projector, state = feed(), MemoryState()
    assert take(projector, state, [TAVERN[2], TAVERN[1]]) == []  # waiting: nothing changed yet
    released = take(projector, state, [TAVERN[0]], first=2)
    in_order = take(feed(), MemoryState(), TAVERN[:3])
    assert {change["seq"] for change in released} == {2, 3}
    assert released == in_order


def told_to_bren(seq: int, content: str, actor: str | None) -> bytes:
    """A `told` to Bren (a character first declared here), by `actor` or by nobody named."""
    event: dict[str, Any] = {
        "world_instance_id": "save-1",
        "timeline_id": "main",
        "seq": seq,
        "key": "loreweaver.conversation.told",
        "target": "npc-bren",
        "payload": {"content": content, "about": ["player-1", SAILOR]},
        "game_time": "day 1, 22:00",
        "entities": {"npc-bren": {"name": "Bren", "kind": "character"}},
    }
    if actor is not None:
        event["actor"] = actor
    return orjson.dumps(event)


def test_news_told_on_by_whom_heard_it_as_a_rumour_is_a_rumour_passed_and_nobody_passes_none() -> (
    None
):
    """Tomas holds what Ilse did as a rumour (from Mara, seq 4); told on to Bren it is a
    rumour passed, two hops from where it started. A `told` naming no teller passes no rumour:
    a `rumour-passed` needs its teller's id."""
    changes = take(
        feed(),
        MemoryState(),
        [
            *MAIN,
            told_to_bren(6, "Ilse beat the drunk sailor senseless", "npc-tomas"),
            told_to_bren(7, "Someone says the well is poisoned", None),
        ],
    )
    passed = [change for change in of_kind(changes, "rumour-passed") if change["seq"] >= 6]
    assert fields(passed, "seq", "teller_id", "listener_id", "hops") == [
        (6, "npc-tomas", "npc-bren", 2)
    ]
    formed = [change for change in of_kind(changes, "belief-formed") if change["seq"] == 7]
    assert fields(formed, "character_id", "source") == [("npc-bren", "told")]


def test_an_events_changes_come_as_memories_then_relations_then_weakened_beliefs() -> None:
    """The order the module promises, which a consumer reading one event's changes sees: the
    referee's verdict on Ilse's lie (seq 7 of the lying tavern) forms a belief, moves a
    relation and weakens the belief the lie contradicts."""
    state = MemoryState()
    changes = take(feed(), state, tavern_lies.LINES)
    kinds = [change["kind"] for change in changes if change["seq"] == 7]
    assert kinds == ["belief-formed", "relation-changed", "belief-weakened"]


def test_a_belief_the_referee_would_weaken_to_as_sure_as_it_was_is_not_weakened() -> None:
    """With `referee.weaken` 1.0 the verdict keeps the contradicted belief's confidence: held
    as surely as before, it is no weakened belief."""
    policy = resolve(None, {"memory": {"spreading": {"enabled": True}, "referee": {"weaken": 1.0}}})
    changes = take(feed(policy=policy), MemoryState(), tavern_lies.LINES)
    assert of_kind(changes, "belief-weakened") == []


def test_a_memory_stored_again_as_surely_is_no_weakened_belief() -> None:
    """Stored again with another importance, the same confidence: nothing weakened."""
    assert stored_again({"importance": 0.1})[1] == []


def test_with_the_feed_on_a_filled_gap_leaves_nothing_waiting() -> None:
    """The events a message releases leave the deferral buffer, the feed on as off."""
    for changes in (True, False):
        state = MemoryState()
        take(feed(changes), state, [TAVERN[2], TAVERN[1]])
        assert len(list(state.scan(pack(PENDING)))) == 2
        take(feed(changes), state, [TAVERN[0]], first=2)
        assert list(state.scan(pack(PENDING))) == [], changes
