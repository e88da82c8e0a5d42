"""Sequencing and intake, in-process: the rules of SPEC section 3 without a broker."""

from __future__ import annotations

from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from projections import timelines
from projections.deletion import deletion_event
from projections.delivery import MOST_NESTED, MOST_REASON_CHARS, SourceMessage, world_key
from projections.key_prefixes import OUTBOX
from projections.keys import pack, unpack
from projections.projector import Projector
from projections.sequencing import ack
from projections.state import MemoryState
from projections.world import ABSENT, fact_value
from schemas import Event
from schemas.outcomes import Outcome
from schemas.policy import Policy, SequencingPolicy
from schemas.records import OutboxRecord


def event(seq: int, timeline: str = "main", **fields: Any) -> bytes:
    return orjson.dumps(
        {"world_instance_id": "w", "timeline_id": timeline, "seq": seq, "key": "k", **fields}
    )


class Feed:
    """Messages into one projector, numbered like offsets of one partition."""

    def __init__(self, projector: Projector | None = None) -> None:
        self.projector = projector or Projector()
        self.state = MemoryState()
        self.offset = 0

    def send(self, raw: bytes, offset: int | None = None) -> list[tuple[Any, ...]]:
        if offset is None:
            offset, self.offset = self.offset, self.offset + 1
        intake = self.projector.receive(self.state, SourceMessage("t", 0, offset, b"w", raw))
        return [(a.timeline_id, a.seq, a.outcome.value, a.processed_seq) for a in intake.acks]

    def timeline(self, timeline_id: str) -> timelines.TimelineRecord:
        record = timelines.load(self.state, "default", "w", timeline_id)
        assert record is not None
        return record


def test_events_of_a_timeline_with_none_yet_wait_for_its_first_saying_so() -> None:
    """A branch's first event refused (its parent had no event yet), its later events were
    acked waiting for "seq 1", which the branch never has: its first event is the one that
    names the parent."""
    projector = Projector()
    state = MemoryState()
    acks = projector.receive(state, SourceMessage("t", 0, 0, b"w", event(4, "reload"))).acks
    assert [ack.reason for ack in acks] == [
        "waiting for seq 1, or, if timeline 'reload' is a branch, its first event (the one naming"
        " its parent)"
    ]


def test_a_gap_defers_later_events_and_filling_it_releases_them_in_order() -> None:
    feed = Feed()
    outcomes = [feed.send(event(seq)) for seq in (1, 2, 4, 5)]
    assert outcomes[2:] == [[("main", 4, "deferred", 2)], [("main", 5, "deferred", 2)]]
    assert feed.send(event(3)) == [
        ("main", 3, "processed", 3),
        ("main", 4, "processed", 4),
        ("main", 5, "processed", 5),
    ]
    record = feed.timeline("main")
    assert (record.acknowledged_seq, record.processed_seq, record.deferred_events) == (5, 5, 0)


def test_duplicates_and_events_already_waiting_take_no_effect() -> None:
    feed = Feed()
    feed.send(event(1))
    feed.send(event(3))
    assert feed.send(event(1)) == [("main", 1, "duplicate", 1)]
    assert feed.send(event(3)) == [("main", 3, "duplicate", 1)]
    assert feed.timeline("main").applied_events == 1


def test_the_deferral_buffer_is_bounded_by_policy() -> None:
    tight = Policy(sequencing=SequencingPolicy(max_deferred=2))
    feed = Feed(Projector(policies=lambda tenant, world: tight))
    feed.send(event(1))
    assert [feed.send(event(seq))[0][2] for seq in (3, 4, 5)] == [
        "deferred",
        "deferred",
        "rejected",
    ]


@pytest.mark.parametrize(
    ("waiting", "awaited"),
    [
        ((event(3), event(4)), "seq 2"),
        (
            (event(3, "b", branch={"parent_timeline_id": "main", "after_seq": 2}), event(4, "b")),
            "parent timeline 'main' to reach seq 2",
        ),
    ],
)
def test_a_full_deferral_buffer_says_what_its_events_wait_for(
    waiting: tuple[bytes, bytes], awaited: str
) -> None:
    """A branch's events wait for its parent to reach the branch point: the refusal said they
    waited for seq 3, one of those waiting, and an operator looked for a seq already sent."""
    tight = Policy(sequencing=SequencingPolicy(max_deferred=2))
    projector, state = Projector(policies=lambda tenant, world: tight), MemoryState()
    refused = event(5, orjson.loads(waiting[1])["timeline_id"])
    lines = [event(1), *waiting, refused]
    for offset, line in enumerate(lines):
        intake = projector.receive(state, SourceMessage("t", 0, offset, b"w", line))
    [letter] = intake.dead_letters
    assert letter.reason == (
        f"deferral buffer full: 2 events already wait for {awaited} (sequencing.max_deferred = 2)"
    )


def test_a_branch_sees_its_parent_up_to_the_branch_point_only() -> None:
    feed = Feed()
    for seq in (1, 2, 3):
        feed.send(event(seq, facts=[{"subject": "door", "attribute": "open", "value": seq}]))
    branch = {"parent_timeline_id": "main", "after_seq": 2}
    assert feed.send(event(3, "alt", branch=branch)) == [("alt", 3, "processed", 3)]
    alt = feed.timeline("alt")
    seen = fact_value(
        feed.state, "default", "w", timelines.ancestry(feed.state, alt), "door", "open"
    )
    assert seen == 2
    main = feed.timeline("main")
    assert (
        fact_value(feed.state, "default", "w", timelines.ancestry(feed.state, main), "door", "open")
        == 3
    )
    assert (
        fact_value(feed.state, "default", "w", timelines.ancestry(feed.state, main), "door", "shut")
        is ABSENT
    )


def test_a_branch_waits_for_its_parent_to_reach_the_branch_point() -> None:
    """While it waits, its acks say it has processed only what its parent has, as its reads
    do (they said the branch point, which a read as of it refused)."""
    feed = Feed()
    feed.send(event(1))
    branch = {"parent_timeline_id": "main", "after_seq": 2}
    assert feed.send(event(3, "alt", branch=branch)) == [("alt", 3, "deferred", 1)]
    assert feed.send(event(3, "alt", branch=branch)) == [("alt", 3, "duplicate", 1)]
    assert timelines.reached_seq(feed.state, feed.timeline("alt")) == 1
    assert feed.send(event(2)) == [("main", 2, "processed", 2), ("alt", 3, "processed", 3)]


def test_a_branch_of_a_timeline_that_becomes_a_branch_later_waits_on_the_history_it_inherits() -> (
    None
):
    """C branches from B after 2 while B is only a deferred event; then B branches from A
    after 5. C's point is A's seq 2: C waited for B's release instead (A reaching 5), or for
    ever if A never did."""
    feed = Feed()
    feed.send(event(1, "A"))
    feed.send(event(7, "B"))
    assert feed.send(event(3, "C", branch={"parent_timeline_id": "B", "after_seq": 2})) == [
        ("C", 3, "deferred", 0)
    ]
    feed.send(event(6, "B", branch={"parent_timeline_id": "A", "after_seq": 5}))
    assert feed.send(event(2, "A")) == [("A", 2, "processed", 2), ("C", 3, "processed", 3)]
    assert feed.send(event(3, "A")) == [("A", 3, "processed", 3)]


def test_a_branch_placed_waiting_releases_the_branches_whose_point_its_parent_made() -> None:
    """t2 waits on t1 for seq 1; t1 then becomes a branch of main after 4, and waits for main's
    seq 4: t2's point, main's seq 1, was made long before, yet t2 waited with t1."""
    feed = Feed()
    for seq in (1, 2, 3):
        feed.send(event(seq))
    feed.send(event(6, "t1"))
    feed.send(event(2, "t2", branch={"parent_timeline_id": "t1", "after_seq": 1}))
    assert feed.send(event(5, "t1", branch={"parent_timeline_id": "main", "after_seq": 4})) == [
        ("t1", 5, "deferred", 3),  # as far as main has come
        ("t2", 2, "processed", 2),
    ]
    assert feed.send(event(3, "t2")) == [("t2", 3, "processed", 3)]


def test_a_branch_registered_twice_is_released_once() -> None:
    """t2 branches from t1 after 2 and waits; t1 then branches from main after 2, and t2's event
    comes again, registering it with main too: filling main's gap acked t2's events twice."""
    feed = Feed()
    feed.send(event(1))
    feed.send(event(4, "t1"))
    feed.send(event(3, "t2", branch={"parent_timeline_id": "t1", "after_seq": 2}))
    feed.send(event(3, "t1", branch={"parent_timeline_id": "main", "after_seq": 2}))
    feed.send(event(3, "t2", branch={"parent_timeline_id": "t1", "after_seq": 2}))
    feed.send(event(4, "t2"))
    assert feed.send(event(2)) == [
        ("main", 2, "processed", 2),
        ("t1", 3, "processed", 3),
        ("t1", 4, "processed", 4),
        ("t2", 3, "processed", 3),
        ("t2", 4, "processed", 4),
    ]


def test_a_branch_of_a_waiting_branch_waits_only_for_the_history_it_sees() -> None:
    feed = Feed()
    feed.send(event(1))
    waiting = {"parent_timeline_id": "main", "after_seq": 3}
    assert feed.send(event(4, "alt", branch=waiting)) == [("alt", 4, "deferred", 1)]
    # a branch of alt at seq 0 sees nothing of alt or main: nothing to wait for
    at_start = {"parent_timeline_id": "alt", "after_seq": 0}
    assert feed.send(event(1, "fresh", branch=at_start)) == [("fresh", 1, "processed", 1)]
    # a branch of alt at seq 2 sees main up to 2: it waits for main, not for alt
    early = {"parent_timeline_id": "alt", "after_seq": 2}
    assert feed.send(event(3, "early", branch=early)) == [("early", 3, "deferred", 1)]
    assert feed.send(event(2)) == [("main", 2, "processed", 2), ("early", 3, "processed", 3)]
    assert feed.send(event(3)) == [("main", 3, "processed", 3), ("alt", 4, "processed", 4)]


def test_an_event_at_a_position_a_branch_inherits_is_a_duplicate_also_if_it_came_first() -> None:
    """alt's seq 2 comes before alt's first event, which branches from main after seq 2: it
    waited for seq 1, a gap no event of alt fills once alt is a branch. It is acked as it would
    be coming after, and leaves the buffer (it waited there for ever, holding a place)."""
    inherited = (
        "seq 2 is at or before the branch point: timeline 'alt' inherits it from 'main' "
        "(after seq 2)"
    )
    tight = Policy(sequencing=SequencingPolicy(max_deferred=1))
    feed = Feed(Projector(policies=lambda tenant, world: tight))
    feed.send(event(1))
    assert feed.send(event(2, "alt")) == [("alt", 2, "deferred", 0)]
    branch = {"parent_timeline_id": "main", "after_seq": 2}
    assert feed.send(event(3, "alt", branch=branch)) == [
        ("alt", 3, "deferred", 1),
        ("alt", 2, "duplicate", 1),
    ]
    assert feed.send(event(2)) == [("main", 2, "processed", 2), ("alt", 3, "processed", 3)]
    assert feed.send(event(5, "alt")) == [("alt", 5, "deferred", 3)]  # the buffer's one place
    assert feed.timeline("alt").deferred_events == 1
    intake = feed.projector.receive(feed.state, SourceMessage("t", 0, 99, b"w", event(2, "alt")))
    assert [(ack.outcome.value, ack.reason) for ack in intake.acks] == [("duplicate", inherited)]


def test_a_branch_placed_by_an_event_already_waiting_releases_it_at_the_branch_point() -> None:
    """alt's seq 3 came first without its branch, then again with it while main was short of
    the branch point: a duplicate, but the branch it names is kept, and main reaching seq 2
    releases alt's seq 3 (it waited for ever, for an alt seq 1 no one sends)."""
    feed = Feed()
    feed.send(event(1))
    assert feed.send(event(3, "alt")) == [("alt", 3, "deferred", 0)]
    branch = {"parent_timeline_id": "main", "after_seq": 2}
    assert feed.send(event(3, "alt", branch=branch)) == [("alt", 3, "duplicate", 1)]
    assert feed.send(event(2)) == [("main", 2, "processed", 2), ("alt", 3, "processed", 3)]
    assert feed.timeline("alt").deferred_events == 0


@pytest.mark.parametrize(
    ("raw", "reason"),
    [
        (
            event(3, "alt", branch={"parent_timeline_id": "nowhere", "after_seq": 2}),
            "unknown branch parent 'nowhere': it has no event yet (publish this event again once"
            " it has one)",
        ),
        (
            event(4, "alt", branch={"parent_timeline_id": "main", "after_seq": 2}),
            "the first event of a branch after seq 2 must have seq 3, not 4",
        ),
        (
            event(3, "main", branch={"parent_timeline_id": "main", "after_seq": 2}),
            "timeline 'main' already exists as a root timeline; it cannot branch again",
        ),
    ],
)
def test_impossible_branches_are_rejected_and_dead_lettered(raw: bytes, reason: str) -> None:
    feed = Feed()
    feed.send(event(1))
    intake = feed.projector.receive(feed.state, SourceMessage("t", 0, 99, b"w", raw))
    assert intake.acks[0].outcome.value == "rejected"
    assert intake.acks[0].reason == reason
    assert [letter.reason for letter in intake.dead_letters] == [reason]


def test_a_redelivered_message_resends_its_acks_and_applies_nothing() -> None:
    feed = Feed()
    first = feed.send(event(1), offset=0)
    assert feed.send(event(1), offset=0) == first == [("main", 1, "processed", 1)]
    intake = feed.projector.receive(feed.state, SourceMessage("t", 0, 0, b"w", event(1)))
    assert intake.redelivered
    assert feed.timeline("main").applied_events == 1


@pytest.mark.parametrize(
    ("key", "reason"),
    [
        (
            b"save-2",
            "message key 'save-2' is not the event's world_instance_id 'w': "
            "an event must be keyed by its world",
        ),
        (None, "message has no key: an event must be keyed by its world_instance_id 'w'"),
    ],
)
def test_an_event_not_keyed_by_its_world_is_rejected_and_dead_lettered(
    key: bytes | None, reason: str
) -> None:
    """Kafka puts a message on the partition of its key: an event keyed otherwise lands where
    the reads of its world never look, so it is refused whole, and applies nothing."""
    feed = Feed()
    intake = feed.projector.receive(feed.state, SourceMessage("t", 0, 0, key, event(1)))
    [refused] = intake.acks
    assert (refused.world_instance_id, refused.seq, refused.outcome.value) == ("w", 1, "rejected")
    assert refused.reason == reason
    [letter] = intake.dead_letters
    assert (letter.reason, letter.offset, letter.world_instance_id) == (reason, 0, "w")
    assert timelines.load(feed.state, "default", "w", "main") is None
    assert feed.send(event(1), offset=1) == [("main", 1, "processed", 1)]  # keyed right


def test_an_event_on_a_partition_other_than_its_keys_is_rejected_and_dead_lettered() -> None:
    """A producer whose partitioner is not Kafka's default (librdkafka's is CRC32) keys the event
    by its world and puts it on another partition: it was acked `processed`, then no read of
    its world saw it and its world's deletion found nothing to delete. A tenant's deletion goes
    to every partition and is taken on each."""
    feed = Feed()
    off_home = SourceMessage("events", 3, 0, b"w", event(1), home_partition=1)
    intake = feed.projector.receive(feed.state, off_home)
    [refused] = intake.acks
    assert (refused.seq, refused.outcome.value) == (1, "rejected")
    assert refused.reason is not None and refused.reason.startswith(
        "message is on partition 3 of events, and its key belongs on partition 1,"
    )
    assert "partitioner=murmur2_random" in refused.reason
    assert [letter.reason for letter in intake.dead_letters] == [refused.reason]
    assert timelines.load(feed.state, "default", "w", "main") is None
    home = SourceMessage("events", 1, 1, b"w", event(1), home_partition=1)
    assert [ack.outcome.value for ack in feed.projector.receive(feed.state, home).acks] == [
        "processed"
    ]
    everywhere = deletion_event("default", None).model_dump_json().encode()
    tenant_gone = SourceMessage("events", 3, 2, b"*", everywhere, home_partition=0)
    assert [ack.outcome.value for ack in feed.projector.receive(feed.state, tenant_gone).acks] == [
        "processed"
    ]


@pytest.mark.parametrize(
    ("key", "raw", "seq"),
    [
        (b"w", b'{"world_instance_id": "w", "timeline_id": "main", "seq": 3.0}', 3),
        (
            b"save-2",
            b'{"world_instance_id": "w", "timeline_id": "main", "seq": 3.0, "key": "k"}',
            3,
        ),
        (b"w", b'{"world_instance_id": "w", "timeline_id": "main", "seq": 3e0}', 3),
        (b"w", b'{"world_instance_id": "w", "timeline_id": "main", "seq": 3.5}', None),
        (b"w", b'{"world_instance_id": "w", "timeline_id": "main", "seq": true}', None),
        (b"w", b'{"world_instance_id": "w", "timeline_id": "main", "seq": "3"}', None),
        (b"w", b'{"world_instance_id": "w", "timeline_id": "main", "seq": 0.0}', None),
        (b"w", b'{"world_instance_id": "w", "timeline_id": "main", "seq": 1e300}', None),
    ],
)
def test_a_refused_event_is_acked_with_its_seq_as_the_contract_reads_it(
    key: bytes, raw: bytes, seq: int | None
) -> None:
    """The contract takes `3.0` for the seq 3: a refused event (invalid, or keyed by another
    world) written so is acked with seq 3, not null, so that its producer can match the ack.
    What the contract takes for no seq is acked null."""
    feed = Feed()
    [refused] = feed.projector.receive(feed.state, SourceMessage("t", 0, 0, key, raw)).acks
    assert (refused.timeline_id, refused.seq, refused.outcome.value) == ("main", seq, "rejected")


@pytest.mark.parametrize("constant", ["NaN", "Infinity", "-Infinity"])
@pytest.mark.parametrize("where", [b'"payload":{"v":%s}', b'"entities":{"npc-a":{"hp":%s}}'])
def test_an_event_holding_nan_is_refused_saying_so_and_acked_naming_it(
    constant: str, where: bytes
) -> None:
    """The event parser reads NaN and refused it as out of range ("Input should be less than
    18446744073709552000"), and the ack and dead letter named no world, timeline or seq. In a
    declaration's own field, it was taken, and kept as null."""
    raw = b'{"world_instance_id":"w","timeline_id":"main","seq":7,"key":"k",' + where + b"}"
    feed = Feed()
    taken = feed.projector.receive(
        feed.state, SourceMessage("t", 0, 0, b"w", raw % constant.encode())
    )
    [refused], [letter] = taken.acks, taken.dead_letters
    assert (refused.world_instance_id, refused.timeline_id, refused.seq) == ("w", "main", 7)
    assert letter.world_instance_id == "w"
    assert letter.reason == (
        f"not valid JSON: {constant} is no JSON number (RFC 8259): send null or a string"
    )


def test_an_event_after_a_byte_order_mark_is_refused_naming_it() -> None:
    """A file saved as "UTF-8 with BOM" was refused "at line 1 column 1", where nothing shows;
    its ack names the event the JSON after the mark gives."""
    raw = b'\xef\xbb\xbf{"world_instance_id":"w","timeline_id":"main","seq":1,"key":"k"}'
    feed = Feed()
    taken = feed.projector.receive(feed.state, SourceMessage("t", 0, 0, b"w", raw))
    [refused], [letter] = taken.acks, taken.dead_letters
    assert (refused.world_instance_id, refused.seq) == ("w", 1)
    assert (
        letter.reason
        == refused.reason
        == (
            "not valid JSON: it starts with a UTF-8 byte order mark (EF BB BF, which editors save "
            "as 'UTF-8 with BOM'): send the JSON without it"
        )
    )


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        pytest.param(b'"caf\xe9"', "not valid JSON: invalid unicode code point", id="latin-1"),
        pytest.param(b'"a\tb"', "not valid JSON: control character", id="raw-tab"),
        pytest.param(b"9" * 4301, "not read: a number too long to read", id="4301-digits"),
    ],
)
def test_an_event_broken_past_its_identity_is_acked_naming_its_world_timeline_and_seq(
    value: bytes, reason: str
) -> None:
    """A Latin-1 `é` in a line, a raw tab in a string, an integer past the digits Python reads:
    each made the ack and dead letter name no world, timeline or seq, though the message named
    them rightly, and a game server matching acks never learnt the event's outcome."""
    raw = b'{"world_instance_id":"w","timeline_id":"main","seq":7,"key":"k","payload":{"v":%s}}'
    feed = Feed()
    taken = feed.projector.receive(feed.state, SourceMessage("t", 0, 0, b"w", raw % value))
    [refused], [letter] = taken.acks, taken.dead_letters
    assert (refused.world_instance_id, refused.timeline_id, refused.seq) == ("w", "main", 7)
    assert (refused.tenant_id, letter.world_instance_id) == ("default", "w")
    assert letter.reason.startswith(reason)


def test_a_large_event_broken_past_its_identity_is_acked_naming_it_under_a_raised_limit() -> None:
    """With `RUMOURMILL_MAX_EVENT_BYTES` raised, a broken event of 300 KB is no oversized one:
    read leniently up to 256 KB only, its ack named no world, timeline or seq."""
    filler = b"[" + b"0," * 150_000 + b"0]"
    raw = b'{"world_instance_id":"w","timeline_id":"main","seq":7,"key":"k",'
    raw += b'"payload":{"v":"caf\xe9","f":%s}}'
    feed = Feed(Projector(max_event_bytes=700_000))
    [refused] = feed.projector.receive(
        feed.state, SourceMessage("t", 0, 0, b"w", raw % filler)
    ).acks
    assert (refused.world_instance_id, refused.timeline_id, refused.seq) == ("w", "main", 7)
    assert refused.reason is not None and refused.reason.startswith("not valid JSON")


def test_a_small_broken_event_over_a_lowered_limit_is_acked_naming_it_and_keyed_by_it() -> None:
    """Refused for its size, a broken event was read strictly whatever its size, and named
    nothing; `publish --raw` and `replay` key a line by the same read (`world_key`)."""
    raw = b'{"world_instance_id":"w","timeline_id":"main","seq":7,"key":"k","payload":{"v":"\xe9"}}'
    feed = Feed(Projector(max_event_bytes=50))
    [refused] = feed.projector.receive(feed.state, SourceMessage("t", 0, 0, b"w", raw)).acks
    assert (refused.world_instance_id, refused.timeline_id, refused.seq) == ("w", "main", 7)
    assert refused.reason is not None and refused.reason.startswith("message is")
    assert world_key(raw) == b"w"


def test_a_world_id_that_is_not_utf8_is_named_by_no_ack() -> None:
    raw = b'{"world_instance_id":"w\xe9","timeline_id":"main","seq":7,"key":"k"}'
    feed = Feed()
    [refused] = feed.projector.receive(feed.state, SourceMessage("t", 0, 0, b"w", raw)).acks
    assert (refused.world_instance_id, refused.timeline_id, refused.seq) == (None, "main", 7)


@pytest.mark.parametrize(
    ("inner", "taken"),
    [
        (b"", True),  # 200 levels: payload, and 199 arrays in it
        (b"1", False),  # a number inside the 200th is a 201st
        (b'"x"', False),
    ],
)
def test_the_200th_level_holds_only_empty_arrays_and_objects(inner: bytes, taken: bool) -> None:
    """The README said 200 levels; a value inside the 200th counts as one more."""
    nested = b"[" * (MOST_NESTED - 1) + inner + b"]" * (MOST_NESTED - 1)
    raw = b'{"world_instance_id":"w","timeline_id":"main","seq":1,"key":"k","payload":{"v":%s}}'
    feed = Feed()
    [ack] = feed.projector.receive(feed.state, SourceMessage("t", 0, 0, b"w", raw % nested)).acks
    assert (ack.outcome.value == "processed") is taken


@pytest.mark.parametrize(("depth", "taken"), [(MOST_NESTED - 1, True), (MOST_NESTED, False)])
def test_a_payload_nested_too_deep_is_refused_as_such_not_as_invalid_json(
    depth: int, taken: bool
) -> None:
    """A reviewer's find: JSON nested deeper than the parser reads was refused as "not valid
    JSON", which it is; `payload` itself is one of the levels."""
    nested = b"[" * depth + b"]" * depth
    raw = b'{"world_instance_id":"w","timeline_id":"main","seq":1,"key":"k","payload":{"v":%s}}'
    feed = Feed()
    intake = feed.projector.receive(feed.state, SourceMessage("t", 0, 0, b"w", raw % nested))
    [ack] = intake.acks
    assert (ack.outcome.value == "processed") is taken
    if not taken:
        assert ack.reason is not None
        assert ack.reason.startswith(
            f"not read: arrays and objects nest over {MOST_NESTED} levels deep (recursion limit"
        )


def test_every_acks_reason_is_bounded_a_processed_events_notes_too() -> None:
    """The notes an applied event's ack carries quote what it named: joined, they could run to
    the event's size, past the 1,000 characters every reason keeps to."""
    noted = ack(
        MemoryState(), Event.model_validate_json(event(1)), Outcome.PROCESSED, None, "n" * 5000
    )
    assert noted.reason is not None and len(noted.reason) == MOST_REASON_CHARS
    assert noted.reason.endswith("... (5000 characters in all)")


def test_the_replay_and_the_publisher_key_an_event_by_its_world() -> None:
    assert world_key(event(1)) == b"w"
    assert world_key(b'{"world_instance_id": "save-1", "seq": "broken"}') == b"save-1"
    assert world_key(b"not json") is None


def test_a_redelivery_resends_acks_stored_by_the_release_before() -> None:
    """The release before stored acks with `refused_judgements`, a field acks no longer have:
    a redelivery of such a message re-sends the ack without it, and applies nothing."""
    feed = Feed()
    first = feed.projector.receive(feed.state, SourceMessage("t", 0, 0, b"w", event(1)))
    key = pack(OUTBOX, "t", 0, 0)
    stored = OutboxRecord.from_bytes(feed.state.get(key) or b"")
    older = stored.model_copy(
        update={"acks": [ack | {"refused_judgements": []} for ack in stored.acks]}
    )
    feed.state.put(key, older.to_bytes())
    again = feed.projector.receive(feed.state, SourceMessage("t", 0, 0, b"w", event(1)))
    assert again.redelivered
    assert again.acks == first.acks
    assert feed.timeline("main").applied_events == 1


@settings(max_examples=200, deadline=None)
@given(st.lists(st.one_of(st.text(max_size=8), st.integers(0, 2**64 - 1)), max_size=6))
def test_packed_keys_round_trip_and_sort_like_their_tuples(parts: list[str | int]) -> None:
    assert unpack(pack(*parts)) == tuple(parts)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.text(max_size=4), st.integers(0, 1000)), min_size=2, max_size=10))
def test_packed_key_order_is_tuple_order(items: list[tuple[str, int]]) -> None:
    assert sorted(items, key=lambda item: pack(*item)) == sorted(items)


def test_a_redelivery_releases_events_left_waiting_by_a_crash() -> None:
    feed = Feed()
    feed.send(event(1))
    feed.send(event(3))  # waits for 2
    # A crash left seq 2 applied but seq 3 still waiting (its release never ran):
    record = feed.timeline("main").model_copy(update={"processed_seq": 2})
    timelines.save(feed.state, record)
    assert feed.send(event(2)) == [("main", 2, "duplicate", 2), ("main", 3, "processed", 3)]


def test_an_event_left_waiting_uncounted_by_a_crash_is_applied_when_the_gap_fills() -> None:
    """A worker killed in the middle of deferring an event (its writes split over changelog
    batches) can keep the event's pending entry without the timeline record that counts it.
    Redelivered, the event is found waiting (a duplicate); filling the gap must apply it too,
    not leave it waiting for ever with the timeline stuck before it."""
    feed = Feed()
    feed.send(event(1))
    feed.send(event(3))  # waits for 2, counted
    counted = feed.timeline("main")
    feed.send(event(4))  # waits for 2 as well; the crash loses its record's save:
    timelines.save(feed.state, counted)
    assert feed.send(event(4)) == [("main", 4, "duplicate", 1)]
    assert feed.send(event(2)) == [
        ("main", 2, "processed", 2),
        ("main", 3, "processed", 3),
        ("main", 4, "processed", 4),
    ]
    assert feed.send(event(5)) == [("main", 5, "processed", 5)]
    record = feed.timeline("main")
    assert (record.processed_seq, record.deferred_events) == (5, 0)


def test_an_event_left_waiting_uncounted_is_counted_again_as_it_comes_again() -> None:
    """Its redelivery, a duplicate, left the record short: the buffer's count (its bound) one
    low, and `acknowledged_seq` behind `processed_seq` for good once the gap filled (the world's
    digest not a clean replay's)."""
    feed = Feed()
    feed.send(event(1))
    feed.send(event(3))
    counted = feed.timeline("main")
    feed.send(event(4))
    timelines.save(feed.state, counted)  # the crash loses the record counting seq 4
    assert feed.send(event(4)) == [("main", 4, "duplicate", 1)]
    record = feed.timeline("main")
    assert (record.acknowledged_seq, record.deferred_events) == (4, 2)
    feed.send(event(2))
    record = feed.timeline("main")
    assert (record.acknowledged_seq, record.processed_seq, record.deferred_events) == (4, 4, 0)


def test_an_event_left_waiting_uncounted_with_none_counted_is_applied_when_the_gap_fills() -> None:
    """As above, with no other event waiting: the record counts none at all."""
    feed = Feed()
    feed.send(event(1))
    before = feed.timeline("main")
    feed.send(event(3))  # the crash loses its record's save:
    timelines.save(feed.state, before)
    assert feed.send(event(3)) == [("main", 3, "deferred", 1)]
    assert feed.send(event(2)) == [("main", 2, "processed", 2), ("main", 3, "processed", 3)]
    assert feed.timeline("main").deferred_events == 0


def test_a_branch_making_its_parent_its_own_ancestor_is_refused_and_the_stream_goes_on() -> None:
    """x waits unstarted, y branches from x, then x's first event branches from y: a cycle.
    Taken, every ancestry of x and y walked for ever (the worker hung)."""
    feed = Feed()
    feed.send(event(1))
    feed.send(event(5, "x"))  # x is known, waiting for its start
    feed.send(event(2, "y", branch={"parent_timeline_id": "x", "after_seq": 1}))
    cycle = feed.projector.receive(
        feed.state,
        SourceMessage(
            "t", 0, 3, b"w", event(2, "x", branch={"parent_timeline_id": "y", "after_seq": 1})
        ),
    )
    [refused] = [ack for ack in cycle.acks if ack.outcome is Outcome.REJECTED]
    assert "would make a cycle" in (refused.reason or "")
    assert feed.send(event(2), offset=4)[0] == ("main", 2, "processed", 2)
