"""Migrations: state the previous release wrote opens and reads as this release's own, steps
run in order and again without harm, and a store from a newer release is refused."""

from __future__ import annotations

import base64
import gzip
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, cast
from unittest.mock import patch

import orjson
import pytest

from projections import memories, perception, projector, rumour_rules
from projections.delivery import OUTBOX_PART_BYTES, SourceMessage, world_key
from projections.digest import world_digest
from projections.event_keys import DIALOGUE_SUMMARISED, DIALOGUE_TURN_KEYS
from projections.key_prefixes import (
    DIALOGUE_TURNS,
    FACT_RUNS,
    JUDGEMENTS,
    KEY_SPACES,
    MEMORIES,
    NEWS_HEADS,
    ORIGIN_MEMORIES,
    OUTBOX,
    PENDING,
    PERSISTENT_RELATIONS,
    RECALLS,
    WAITED_ON,
    Role,
)
from projections.keys import pack, unpack
from projections.memory_store import MemoryKeys
from projections.migrations import (
    FORMAT_KEY,
    HEADS_OF,
    MIGRATIONS,
    Migration,
    StateFormatError,
    StoredRecord,
    Upgrade,
    current_format,
    stored_format,
    upgrade,
)
from projections.policy import resolve
from projections.projector import Projector
from projections.provenance import provenance
from projections.recall import RecallQuery, recall
from projections.reinforcement import recalls_counted
from projections.relations import SUM_PLACES, persistent_sum
from projections.runtime_read import runtime_read
from projections.state import MemoryState, space_of
from projections.timelines import load as load_timeline
from projections.timelines import save as save_timeline
from projections.wording import retell, spoken_words
from schemas import Event
from schemas.memory import Memory
from schemas.records import OutboxRecord
from streams.recall_index import SqliteRecallIndex
from streams.replay import replay_lines
from streams.state import decode_changes
from tests.projections.recorded import Recorded, laid_in
from tests.projections.test_reinforcement import FIGHT_ID
from tests.streams.noisy_story import CHARACTERS
from tests.streams.test_judgement_parts import crowd
from tests.tavern import TAVERN_LINES

PREVIOUS_RELEASE = Path(__file__).resolve().parents[1] / "fixtures" / "previous_release"
POLICY = resolve(None, orjson.loads((PREVIOUS_RELEASE / "policy.json").read_bytes()))
WORLDS = {"save-1": ("main",), "tavern-12-0": ("main", "reload")}
NPCS = {"save-1": ["npc-mara"], "tavern-12-0": CHARACTERS}


def previous_release_state() -> MemoryState:
    """The fixture: every record the previous release stored, laid into a fresh store."""
    state = MemoryState()
    changes = gzip.decompress((PREVIOUS_RELEASE / "state.changes.gz").read_bytes())
    for key, value in decode_changes(changes):
        assert value is not None
        state.put(key, value)
    return state


def fresh_replay() -> MemoryState:
    """The fixture's events folded by this release, but for what the previous release left out
    of a store for lack of a rule (a rebuild adds it): see `_unkept_by_the_previous_release`."""
    state = MemoryState()
    _fold_fixture_events(state)
    return state


def _fold_fixture_events(state: MemoryState) -> None:
    upgrade(state)
    projector = Projector(policies=lambda tenant, world: POLICY)
    lines = (PREVIOUS_RELEASE / "events.ndjson").read_bytes().splitlines()
    for offset, raw in enumerate(lines):
        projector.receive(state, SourceMessage("events", 0, offset, world_key(raw), raw))
    for key in _unkept_by_the_previous_release(state, lines):
        state.delete(key)


def _unkept_by_the_previous_release(state: MemoryState, lines: list[bytes]) -> list[bytes]:
    """The place-scope turns of dialogue lines said without `location`: the previous release
    kept them in no place scope; this one keeps them where the character was. And where the
    run of a fact said again unchanged began: the previous release kept no runs."""
    unplaced = set()
    for raw in lines:
        event = orjson.loads(raw)
        if event["key"] in DIALOGUE_TURN_KEYS and event.get("location") is None:
            unplaced.add((event["world_instance_id"], event["timeline_id"], event["seq"]))
    turns = [
        key
        for key, _ in state.scan(pack(DIALOGUE_TURNS))
        if (fields := unpack(key))[5] == "place" and (fields[2], fields[3], fields[7]) in unplaced
    ]
    return [*turns, *(key for key, _ in state.scan(pack(FACT_RUNS)))]


def fresh_replay_as_upgraded() -> MemoryState:
    """`fresh_replay`, with what the previous release alone kept, which a store it wrote keeps
    until rebuilt (README, "Upgrading"): what its upgrade holds."""
    fresh, old = MemoryState(), previous_release_state()
    with _previous_release_rules():
        _fold_fixture_events(fresh)
    for key in _kept_by_the_previous_release_alone(old):  # counted as format 15 counts them
        fresh.put(key, cast(bytes, old.get(key)))
    recalls_counted(fresh)
    for key, _ in fresh.scan(pack(DIALOGUE_TURNS)):  # each counted every line since a summary
        fresh.put(key, cast(bytes, old.get(key)))
    return fresh


@contextmanager
def _previous_release_rules() -> Iterator[None]:
    """The previous release's rules where a store it wrote keeps what they made until rebuilt:
    a dialogue summary formed memories (its character's, and those of everyone at its place),
    a player's line was passed on bare, not in the player's name, a `told` naming a memory its
    teller did not hold and saying nothing formed one all the same (a conversation without
    words as text, or without a listener, was acked with no note, and every claim of no fact
    and no words was one news), an eyewitness kept
    every value of a fact its event set twice, a recall's ack named no id it ignored, and a
    memory of an event without `game_time` had no story time."""

    def passed_bare(memory: Memory, name_of: Callable[[str], str]) -> str:
        return retell(memory.content)

    def words_or_none(event: Event) -> str:
        return " ".join((spoken_words(event) or "").split()).casefold()

    remembered = perception.BOOKKEEPING_KEYS - {DIALOGUE_SUMMARISED}
    with (
        patch.object(perception, "BOOKKEEPING_KEYS", remembered),
        patch.object(rumour_rules, "passed_on", passed_bare),
        patch.object(memories, "passed_on", passed_bare),
        patch.object(projector, "told_nothing", lambda event, context: None),
        patch.object(projector, "unheard_words", lambda event: None),
        patch.object(memories, "_claimed_words", words_or_none),
        patch.object(memories, "facts_as_recorded", list),
        patch.object(projector, "record_recalls", unnoted(projector.record_recalls)),
        patch.object(projector, "dated", lambda formed, minute: formed),
    ):
        yield


def unnoted(record_recalls: Callable[..., str | None]) -> Callable[..., None]:
    """`record_recalls` as the previous release's: its recalls' acks said nothing of the ids
    that reinforced nothing (their acks are kept in a store's outbox)."""

    def recorded(*args: Any) -> None:
        record_recalls(*args)

    return recorded


def _kept_by_the_previous_release_alone(state: MemoryState) -> list[bytes]:
    """The recalls of memories their actor did not hold (the fixture's recall names `b`): the
    previous release kept them, and a recall now counts only for what its actor held before
    it; a store keeps them until rebuilt (README, "Upgrading")."""
    unheld = []
    for key, _ in state.scan(pack(RECALLS)):
        _, tenant, world, _, actor, belief, _ = map(str, unpack(key))
        if state.get(MemoryKeys(tenant, world).memory(actor, belief)) is None:
            unheld.append(key)
    return unheld


def reads(state: MemoryState) -> list[bytes]:
    """Every runtime read, a recall and the provenance of every memory, as clients get them."""
    answers = []
    index = SqliteRecallIndex()
    for world, timelines in WORLDS.items():
        for timeline in timelines:
            for npc in NPCS[world]:
                mind = runtime_read(state, "default", world, timeline, npc)
                answers.append(mind.to_json())
                query = RecallQuery("tavern", (), 10)
                found = recall(state, index, "default", world, timeline, npc, query, POLICY).read()
                answers.append(found.to_json())
                for belief in [*mind.beliefs, *mind.recollections]:
                    answers.append(
                        provenance(
                            state, "default", world, timeline, npc, belief.belief_id
                        ).to_json()
                    )
    return answers


def test_state_of_the_previous_release_reads_as_this_release_replaying_its_events() -> None:
    old, fresh = previous_release_state(), fresh_replay_as_upgraded()
    assert stored_format(old) is None
    headed = sum(1 for space in MIGRATIONS[0].spaces for _ in old.scan(pack(space)))
    assert headed > 0  # its movements and branches: format 2 heads and marks them
    assert list(old.scan(pack(PERSISTENT_RELATIONS))) == []
    pairs = persistent_heads(fresh)
    assert pairs  # persistent memories: format 8 sums what they add to each relation
    memories = sum(1 for _ in old.scan(pack(MEMORIES)))
    assert list(old.scan(pack(ORIGIN_MEMORIES))) == []  # format 13 finds them by origin
    recalls = sum(1 for _ in old.scan(pack(RECALLS)))
    assert recalls  # format 15 counts each with those before it
    done = upgrade(old)
    assert done == Upgrade(1, current_format(), headed + len(pairs) + memories + recalls)
    assert persistent_heads(old) == pairs
    assert stored_format(old) == current_format()
    for world in WORLDS:
        assert world_digest(old, "default", world) == world_digest(fresh, "default", world)
    old_reads = reads(old)
    assert len(old_reads) > 100
    assert any(b'"source":"rumour"' in answer for answer in old_reads)  # rumours read back
    assert old_reads == reads(fresh)
    # the news heads this release keeps as news spreads: the upgraded store has none (its
    # tellers seek the news index)
    assert list(old.scan(pack(NEWS_HEADS))) == []
    assert list(fresh.scan(pack(NEWS_HEADS)))
    assert without_shortcuts(old) == without_shortcuts(fresh)  # bookkeeping (the outbox) too


def persistent_heads(state: MemoryState) -> dict[bytes, tuple[float, int, int]]:
    """Each pair's persistent relation head: its memories' feelings summed (to the decimals a
    read reads them to: added in another order, they may differ past them), how many, the last
    seq."""
    heads = {}
    for key, raw in state.scan(pack(PERSISTENT_RELATIONS)):
        total, count, last = persistent_sum(raw)
        heads[key] = (round(total, SUM_PLACES), count, last)
    return heads


def without_shortcuts(state: MemoryState) -> list[tuple[bytes, bytes]]:
    """Every record but those of shortcut spaces, which a store of an earlier release lacks."""
    shortcuts = {pack(prefix) for prefix, role in KEY_SPACES.items() if role is Role.SHORTCUT}
    return [(key, value) for key, value in state.items() if space_of(key) not in shortcuts]


def format_1_of(state: MemoryState) -> MemoryState:
    """The store the release before format 2 wrote for the same events: the same records but
    the heads and marks format 2 added, the news heads of this release, and no format key."""
    added = {pack(space) for space in (*HEADS_OF.values(), WAITED_ON, NEWS_HEADS)}
    old = MemoryState()
    for key, value in state.items():
        if key != FORMAT_KEY and space_of(key) not in added:
            old.put(key, value)
    return old


def test_a_branch_waiting_in_a_store_of_format_1_is_released_after_the_upgrade() -> None:
    def feed(state: MemoryState, offset: int, raw: bytes) -> list[tuple[str, int, str]]:
        acks = Projector().receive(state, SourceMessage("t", 0, offset, b"w", raw)).acks
        return [(ack.timeline_id, ack.seq, ack.outcome.value) for ack in acks]

    def event(seq: int, timeline: str = "main", **fields: object) -> bytes:
        document = {"world_instance_id": "w", "timeline_id": timeline, "seq": seq, **fields}
        return orjson.dumps({"key": "loreweaver.movement.location-entered", **document})

    branch = {"parent_timeline_id": "main", "after_seq": 2}
    moved = {"actor": "npc-ada", "location": "inn"}
    state = MemoryState()
    upgrade(state)
    assert feed(state, 0, event(1, **moved)) == [("main", 1, "processed")]
    assert feed(state, 1, event(3, "alt", branch=branch, **moved)) == [("alt", 3, "deferred")]
    old = format_1_of(state)
    assert list(old.scan(pack(WAITED_ON))) == []
    upgrade(old)
    assert list(old.items()) == list(state.items())
    for store in (state, old):
        assert feed(store, 2, event(2, **moved)) == [
            ("main", 2, "processed"),
            ("alt", 3, "processed"),
        ]
    assert list(old.items()) == list(state.items())


class RecordingState(MemoryState):
    """Counts the writes made to it."""

    def __init__(self) -> None:
        super().__init__()
        self.writes = 0

    def put(self, key: bytes, value: bytes) -> None:
        self.writes += 1
        super().put(key, value)

    def delete(self, key: bytes) -> None:
        self.writes += 1
        super().delete(key)


def test_a_store_of_this_release_is_left_as_it_is() -> None:
    state = RecordingState()
    state.put(pack("timeline", "default", "w", "main"), b"{}")
    upgrade(state)  # takes format 1 to this release's, once
    state.writes = 0
    assert upgrade(state) == Upgrade(current_format(), current_format(), 0)
    assert state.writes == 0


def test_an_empty_store_is_stamped_current_without_a_step() -> None:
    state = MemoryState()
    assert upgrade(state, CHAIN) == Upgrade(3, 3, 0)
    assert list(state.items()) == [(FORMAT_KEY, b"3")]


# A chain of three formats over a key space "count": format 1 stores a number, format 2 wraps
# it as {"count": n}, format 3 moves each record to a key that ends in "v3" and adds the double.
def _wrapped(key: bytes, value: bytes) -> list[StoredRecord]:
    document = orjson.loads(value)
    return [(key, value if isinstance(document, dict) else orjson.dumps({"count": document}))]


def _moved(key: bytes, value: bytes) -> list[StoredRecord]:
    if unpack(key)[-1] == "v3":
        return [(key, value)]
    count = orjson.loads(value)["count"]  # a format-1 record here would fail: order matters
    return [(key + pack("v3"), orjson.dumps({"count": count, "double": count * 2}))]


CHAIN = (
    Migration(2, "counts wrapped in a document", ("count",), _wrapped),
    Migration(3, "counts moved under v3, with their double", ("count",), _moved),
)


def counted(*counts: int) -> MemoryState:
    state = MemoryState()
    for number, count in enumerate(counts):
        state.put(pack("count", "default", "w", f"thing-{number}"), b"%d" % count)
    state.put(pack("timeline", "default", "w", "main"), b"{}")  # a space no step names
    return state


def format_3(*counts: int) -> list[tuple[bytes, bytes]]:
    return sorted(
        [
            *(
                (
                    pack("count", "default", "w", f"thing-{number}", "v3"),
                    orjson.dumps({"count": count, "double": count * 2}),
                )
                for number, count in enumerate(counts)
            ),
            (pack("timeline", "default", "w", "main"), b"{}"),
            (FORMAT_KEY, b"3"),
        ]
    )


def test_a_chain_of_migrations_runs_in_order_from_the_stored_format() -> None:
    state = counted(4, 7)
    assert upgrade(state, CHAIN) == Upgrade(1, 3, 4)
    assert list(state.items()) == format_3(4, 7)

    halfway = counted(4, 7)
    upgrade(halfway, CHAIN[:1])
    assert stored_format(halfway) == 2
    assert upgrade(halfway, CHAIN) == Upgrade(2, 3, 2)  # only the step after format 2
    assert list(halfway.items()) == format_3(4, 7)


def test_steps_interrupted_before_their_stamp_run_again_to_the_same_state() -> None:
    state = counted(4, 7)
    upgrade(state, CHAIN)
    state.put(FORMAT_KEY, b"1")  # every record rewritten, no step stamped: a crash
    assert upgrade(state, CHAIN) == Upgrade(1, 3, 0)
    assert list(state.items()) == format_3(4, 7)


def test_steps_out_of_order_are_refused() -> None:
    with pytest.raises(ValueError, match="must be to format 2"):
        upgrade(counted(1), CHAIN[::-1])


def test_state_of_a_newer_release_is_refused_and_left_untouched() -> None:
    newer = current_format() + 1
    state = counted(4)
    state.put(FORMAT_KEY, b"%d" % newer)
    before = list(state.items())
    with pytest.raises(StateFormatError, match=rf"in format {newer}.*reads formats up to 3"):
        upgrade(state, CHAIN)
    with pytest.raises(StateFormatError, match=rf"in format {newer}.*up to {current_format()}"):
        upgrade(state)
    assert list(state.items()) == before


def test_dead_letters_kept_with_their_bytes_lose_them_and_are_still_resent_whole() -> None:
    """Format 5: an outbox row of a release before keeps a rejected message's bytes in its dead
    letter; upgraded, it keeps none, and a redelivery re-sends the very dead letter sent first,
    a message over the size limit with the bytes it was cut to."""
    projector = Projector(max_event_bytes=64)
    messages = [
        SourceMessage("events", 0, 0, b"save-1", b"not json"),
        SourceMessage("events", 0, 1, b"save-1", b'{"world_instance_id": "save-1"' + b" " * 99),
    ]
    state = MemoryState()
    upgrade(state)
    first = [projector.receive(state, message).dead_letters for message in messages]
    assert [letter.value_bytes for [letter] in first] == [None, 129]
    for message, [letter] in zip(messages, first, strict=True):  # as format 4 kept them
        key = pack(OUTBOX, "events", 0, message.offset)
        row = OutboxRecord.from_bytes(state.get(key) or b"")
        state.put(
            key, OutboxRecord.encode(row.message_digest, row.acks, [letter.model_dump(mode="json")])
        )
    state.put(FORMAT_KEY, b"4")

    assert upgrade(state) == Upgrade(4, current_format(), 2)
    assert all(b"_base64" not in row for _, row in state.scan(pack(OUTBOX)))
    again = [projector.receive(state, message) for message in messages]
    assert [intake.redelivered for intake in again] == [True, True]
    assert [intake.dead_letters for intake in again] == first


def assert_every_crash_upgrades_again_to(upgraded: MemoryState, earlier: MemoryState) -> None:
    """An upgrade of `earlier` killed after any prefix of its writes (as the worker sends them:
    in the order of their last write), then run again, leaves `upgraded`, the store a whole
    upgrade leaves."""
    whole = Recorded(earlier)
    upgrade(whole)
    writes = whole.last_writes()
    for cut in range(len(writes)):
        crashed = laid_in(earlier, writes[:cut])
        upgrade(crashed)
        assert list(crashed.items()) == list(upgraded.items()), cut


def judgements_kept_whole(event: bytes) -> tuple[MemoryState, MemoryState]:
    """A store of this release holding `event`'s model judgements, and the same store as format
    5 kept it: the judgements in one record, under the first part's key."""
    projector = Projector(lambda tenant, world: resolve(None, {"memory": {"weighing": "model"}}))
    state = MemoryState()
    upgrade(state)
    projector.receive(state, SourceMessage("events", 0, 0, b"save-1", event))
    [(first_key, first), *more] = parts = list(state.scan(pack(JUDGEMENTS)))
    whole = [made for _, value in parts for made in orjson.loads(value)["judgements"]]
    earlier = MemoryState()
    for key, value in state.items():
        earlier.put(key, value)
    for key, _ in more:
        earlier.delete(key)
    earlier.put(first_key, orjson.dumps(orjson.loads(first) | {"judgements": whole}))
    earlier.put(FORMAT_KEY, b"5")
    return state, earlier


def test_an_events_judgements_kept_whole_are_split_into_the_parts_this_release_keeps() -> None:
    """Format 6: a release before kept an event's judgements in one record (a thousand of them
    here, 138 KB; 10,000 made one of 1.4 MB, which no producer sends); upgraded, the store holds
    them in the parts this release writes, and reads and digests as this release's own."""
    state, earlier = judgements_kept_whole(crowd(1_000))
    assert len(list(state.scan(pack(JUDGEMENTS)))) == 10

    memories = sum(1 for _ in earlier.scan(pack(MEMORIES)))  # format 13 indexes them again
    assert upgrade(earlier) == Upgrade(5, current_format(), 1 + memories)
    assert list(earlier.items()) == list(state.items())
    assert upgrade(earlier) == Upgrade(current_format(), current_format(), 0)


def test_judgements_split_by_an_upgrade_a_crash_cut_short_are_all_kept_when_it_runs_again() -> None:
    """Format 6 run again after a crash that kept any prefix of the upgrade's writes (as the
    worker sends them) ends as run once: the first part was written first, and a crash keeping
    it alone left it looking split already, two thirds of the event's 250 judgements gone."""
    state, earlier = judgements_kept_whole(crowd(250))
    assert len(list(state.scan(pack(JUDGEMENTS)))) == 3
    assert_every_crash_upgrades_again_to(state, earlier)


def test_judgements_just_under_a_parts_size_kept_whole_are_split_as_this_release_splits() -> None:
    """A record of 13,972 bytes, under `MOST_PART_BYTES` but over what this release gives a part
    (it leaves room for the part's number), was kept whole by the upgrade where a replay splits
    it: the world's digest differed from a rebuild's."""
    names = [f"npc-{number}" for number in range(101)]
    names[-1] += "x" * 48  # the last witness's name lands the whole record at 13,972 bytes
    event = orjson.loads(crowd(0)) | {"witnesses": names}
    state, earlier = judgements_kept_whole(orjson.dumps(event))
    [(_, kept_whole)] = list(earlier.scan(pack(JUDGEMENTS)))
    assert len(kept_whole) == 13_972
    assert len(list(state.scan(pack(JUDGEMENTS)))) == 2

    upgrade(earlier)
    assert list(earlier.items()) == list(state.items())
    assert world_digest(earlier, "default", "save-1") == world_digest(state, "default", "save-1")


WAITING_LINE = {
    "world_instance_id": "save-1",
    "timeline_id": "main",
    "seq": 2,
    "key": "loreweaver.conversation.player-said",
    "actor": "p1",
    "target": "npc-mara",
    "players": ["p1"],
    "payload": {"text": "the door is open"},
}
"""A dialogue line sent before seq 1: it waits for it."""


def waiting(line: dict[str, Any], timestamp_ms: int | None = None) -> tuple[MemoryState, bytes]:
    """A store of this release in which `line` waits for seq 1, and its pending key."""
    state = MemoryState()
    upgrade(state)
    message = SourceMessage("events", 0, 0, b"save-1", orjson.dumps(line), timestamp_ms)
    assert [ack.outcome.value for ack in Projector().receive(state, message).acks] == ["deferred"]
    [(key, _)] = list(state.scan(pack(PENDING)))
    return state, key


def released(state: MemoryState) -> list[tuple[int | None, str]]:
    """The acks of seq 1 arriving: it, and the line that waited for it."""
    first = orjson.dumps(WAITING_LINE | {"seq": 1, "key": "x"})
    acks = Projector().receive(state, SourceMessage("events", 0, 1, b"save-1", first)).acks
    return [(ack.seq, ack.outcome.value) for ack in acks]


def test_a_waiting_line_whose_null_facts_were_dropped_is_applied_after_the_upgrade() -> None:
    """Format 9: a release before stored a dialogue line that waited for an earlier seq without
    its facts' null values, and stopped when the gap filled (the line no longer read as an
    event), at every start. Upgraded, the line is applied when the gap fills (a fact of a value
    other than null kept it)."""
    facts = [
        {"subject": "door", "attribute": "open", "value": True},
        {"subject": "door", "attribute": "state", "value": None},
    ]
    state, key = waiting(WAITING_LINE | {"facts": facts}, 1_700_000_000_000)
    as_dropped = orjson.loads(state.get(key) or b"")
    as_dropped["facts"] = [facts[0], {"subject": "door", "attribute": "state"}]
    state.put(key, orjson.dumps(as_dropped))
    state.put(FORMAT_KEY, b"8")

    assert upgrade(state) == Upgrade(8, current_format(), 1)
    assert released(state) == [(1, "processed"), (2, "processed")]


def test_a_waiting_event_with_times_in_forms_no_longer_taken_is_applied_after_the_upgrade() -> None:
    """Format 10: a release before took any date-time pydantic reads and a story time with a
    final line break; an event so written, waiting for an earlier seq, no longer reads as an
    event. Upgraded, it waits with the same moment in RFC 3339, and is applied when the gap
    fills."""
    line = WAITING_LINE | {"game_time": "day 1, 21:05", "occurred_at": "2024-05-01T21:05:00Z"}
    state, key = waiting(line)
    as_once_taken = line | {"occurred_at": "2024-05-01 23:05+02:00", "game_time": "day 1, 21:05\n"}
    state.put(key, orjson.dumps(as_once_taken))
    state.put(FORMAT_KEY, b"9")

    assert upgrade(state) == Upgrade(9, current_format(), 1)
    [(_, stored)] = list(state.scan(pack(PENDING)))
    assert orjson.loads(stored) == line | {"occurred_at": "2024-05-01T23:05:00+02:00"}
    assert released(state) == [(1, "processed"), (2, "processed")]


def test_a_waiting_event_naming_an_id_no_longer_taken_is_dead_lettered_when_its_gap_fills() -> None:
    """A release before took `.` and `..` as ids: a line naming one that waits for an earlier
    seq no longer reads as an event, and the worker stopped on it when the gap filled, at every
    start. It is refused then: acked `rejected`, dead-lettered with the bytes it waited as (at
    the position of the message that filled the gap), a redelivery of that message sends the
    same dead letter, and its seq is open to an event that reads."""
    state, key = waiting(WAITING_LINE)
    as_once_taken = orjson.dumps(WAITING_LINE | {"target": ".."})
    state.put(key, as_once_taken)
    first = orjson.dumps(WAITING_LINE | {"seq": 1, "key": "x"})
    message = SourceMessage("events", 0, 1, b"save-1", first)

    intake = Projector().receive(state, message)
    assert [(ack.seq, ack.outcome.value, ack.processed_seq) for ack in intake.acks] == [
        (1, "processed", 1),
        (2, "rejected", 1),
    ]
    [letter] = intake.dead_letters
    assert base64.b64decode(letter.value_base64) == as_once_taken
    assert (letter.topic, letter.partition, letter.offset) == ("events", 0, 1)
    assert letter.reason == intake.acks[1].reason
    assert "target: '.' and '..' are no ids" in letter.reason
    assert list(state.scan(pack(PENDING))) == []
    assert Projector().receive(state, message).dead_letters == [letter]
    line = SourceMessage("events", 0, 2, b"save-1", orjson.dumps(WAITING_LINE))
    assert [ack.outcome.value for ack in Projector().receive(state, line).acks] == ["processed"]


def inherited_waiting_as_an_earlier_release_left_it() -> tuple[MemoryState, MemoryState]:
    """alt's seq 2 came before alt's first event, which branched from main after seq 2; main is
    at seq 1. A store of this release, and the same store as a release before left it: alt's
    seq 2 still waiting, counted in the deferral buffer, at a position alt inherits."""

    def event(seq: int, timeline: str = "main", **fields: object) -> SourceMessage:
        document = {"world_instance_id": "w", "timeline_id": timeline, "seq": seq, "key": "k"}
        raw = orjson.dumps(document | fields)
        return SourceMessage("events", 0, seq * 10 + len(timeline), b"w", raw)

    state = MemoryState()
    upgrade(state)
    Projector().receive(state, event(1))
    Projector().receive(state, event(2, "alt"))
    [(early_key, early)] = list(state.scan(pack(PENDING)))
    branch = {"parent_timeline_id": "main", "after_seq": 2}
    acks = Projector().receive(state, event(3, "alt", branch=branch)).acks
    assert [(ack.seq, ack.outcome.value) for ack in acks] == [(3, "deferred"), (2, "duplicate")]
    earlier = MemoryState()
    for key, value in state.items():
        earlier.put(key, value)
    earlier.put(early_key, early)
    alt = load_timeline(earlier, "default", "w", "alt")
    assert alt is not None
    save_timeline(earlier, alt.model_copy(update={"deferred_events": alt.deferred_events + 1}))
    earlier.put(FORMAT_KEY, b"10")
    return state, earlier


def test_an_event_waiting_at_a_position_its_branch_inherits_is_acked_by_the_upgrade() -> None:
    """A release before placed a branch without the events that waited on its timeline at
    positions it inherits: they waited for ever, their producer never had their last ack, and
    each held a place in the deferral buffer. Upgraded, the store is this release's, and the
    upgrade gives each event the `duplicate` ack it has now, for the worker to send."""
    state, earlier = inherited_waiting_as_an_earlier_release_left_it()
    done = upgrade(earlier)
    assert (done.from_format, done.to_format) == (10, current_format())
    assert [(ack.timeline_id, ack.seq, ack.outcome.value, ack.reason) for ack in done.acks] == [
        (
            "alt",
            2,
            "duplicate",
            "seq 2 is at or before the branch point: timeline 'alt' inherits it from 'main' "
            "(after seq 2)",
        )
    ]
    assert "1 waiting event(s) acked" in str(done)
    assert list(earlier.items()) == list(state.items())
    assert upgrade(earlier).acks == ()


def test_the_step_settling_inherited_events_run_again_after_a_crash_ends_as_run_once() -> None:
    """Format 11 run again after a crash that kept any prefix of the upgrade's writes (as the
    worker sends them: in the order of their last write) leaves the store a whole upgrade
    leaves: a release before lowered alt's count a second time for the event already taken out
    of the buffer, and counted none waiting while seq 3 still waited."""
    state, earlier = inherited_waiting_as_an_earlier_release_left_it()
    assert_every_crash_upgrades_again_to(state, earlier)


def test_an_outbox_row_kept_whole_is_split_into_the_parts_this_release_keeps() -> None:
    """Format 14: a release before kept a message's outbox row whole (here the 32 KB of the acks
    of a message releasing 200 events; 500 made one the changelog of the least batch setting
    refused); upgraded, the store holds it in the parts this release writes, and a redelivery
    re-sends the very acks."""
    state = MemoryState()
    upgrade(state)
    projector = Projector()
    for offset in range(200):
        projector.receive(state, SourceMessage("events", 0, offset, b"w", seq_event(offset + 2)))
    gap = SourceMessage("events", 0, 200, b"w", seq_event(1))
    first = projector.receive(state, gap)
    [(row_key, row), *parts] = list(state.scan(pack(OUTBOX, "events", 0, 200)))
    assert len(parts) == 2
    stored = OutboxRecord.from_bytes(row)
    acks = [
        ack for part in (row, *(value for _, value in parts)) for ack in orjson.loads(part)["acks"]
    ]
    assert len(acks) == len(first.acks) == 201
    earlier = MemoryState()
    for key, value in state.items():
        earlier.put(key, value)
    for key, _ in parts:
        earlier.delete(key)
    earlier.put(row_key, OutboxRecord.encode(stored.message_digest, acks, []))
    earlier.put(FORMAT_KEY, b"10")

    assert upgrade(earlier) == Upgrade(10, current_format(), 1)
    assert list(earlier.items()) == list(state.items())
    earlier.put(FORMAT_KEY, b"10")  # split, not stamped: a crash; the step again splits nothing
    assert upgrade(earlier) == Upgrade(10, current_format(), 0)
    assert list(earlier.items()) == list(state.items())
    again = projector.receive(earlier, gap)
    assert again.redelivered and again.acks == first.acks


def seq_event(seq: int) -> bytes:
    """An event of world `w` at `seq` of its main timeline."""
    return orjson.dumps({"world_instance_id": "w", "timeline_id": "main", "seq": seq, "key": "k"})


def test_an_outbox_row_keeping_changes_is_split_with_them_and_gives_them_back_in_order() -> None:
    """Format 14: releases before this one kept a message's changes in its row too (300 here,
    22 KB): split, a redelivery gives them back, in their order, with the acks."""
    state = MemoryState()
    upgrade(state)
    message = SourceMessage("events", 0, 0, b"w", seq_event(1))
    first = Projector().receive(state, message)
    key = pack(OUTBOX, "events", 0, 0)
    row = OutboxRecord.from_bytes(state.get(key) or b"")
    kept = [
        {"change_id": f"w:{number}", "world_instance_id": "w", "content": "the mill burned"}
        for number in range(300)
    ]
    state.put(key, OutboxRecord.encode(row.message_digest, row.acks, [], kept))
    state.put(FORMAT_KEY, b"10")

    assert upgrade(state) == Upgrade(10, current_format(), 1)
    parts = [value for _, value in state.scan(key)]
    assert len(parts) == 2 and max(map(len, parts)) <= OUTBOX_PART_BYTES
    again = Projector().receive(state, message)
    assert again.redelivered and again.acks == first.acks
    assert again.changes == {"w": [orjson.dumps(change) for change in kept]}


def recalls_kept_alone() -> tuple[MemoryState, MemoryState]:
    """A store of this release holding five recalls of Mara's fight, the third of no story
    time, and the same store as format 14 kept it: each recall's story minute alone."""
    recall = {
        "world_instance_id": "save-1",
        "timeline_id": "main",
        "key": "loreweaver.memory.recalled",
        "actor": "npc-mara",
        "payload": {"belief_ids": [FIGHT_ID]},
    }
    timed = [recall | {"seq": seq, "game_time": f"day {seq}, 12:00"} for seq in (6, 7, 9, 10)]
    lines = [*TAVERN_LINES, *map(orjson.dumps, [*timed[:2], recall | {"seq": 8}, *timed[2:]])]
    state = replay_lines(lines).state
    state.put(FORMAT_KEY, b"%d" % current_format())
    earlier = MemoryState()
    for key, value in state.items():
        earlier.put(key, value)
    for key, value in state.scan(pack(RECALLS)):
        earlier.put(key, value[16:])  # the minute alone, or nothing
    earlier.put(FORMAT_KEY, b"14")
    return state, earlier


def test_recalls_each_kept_alone_are_counted_as_this_release_counts_them() -> None:
    """Format 15: a release before kept each recall's story minute alone, and every read of a
    memory scanned all its recalls; upgraded, each counts those before it on its timeline, as
    this release's do, and reads alike."""
    state, earlier = recalls_kept_alone()
    assert len(list(state.scan(pack(RECALLS)))) == 5
    assert upgrade(earlier) == Upgrade(14, current_format(), 5)
    assert list(earlier.items()) == list(state.items())


def test_recalls_counted_by_an_upgrade_a_crash_cut_short_are_counted_alike_when_it_runs_again() -> (
    None
):
    state, earlier = recalls_kept_alone()
    assert_every_crash_upgrades_again_to(state, earlier)
