"""The changelog's changesets: an event's writes packed into one message, split past a limit.

Recovery lays these messages over an empty RocksDB, so what comes out must be exactly what
went in: every key and value byte for byte, deletes as deletes, an empty value as an empty value
and the writes in their order (a later write to the same key wins).
"""

from __future__ import annotations

from itertools import pairwise

from hypothesis import given
from hypothesis import strategies as st

from streams.state import Changes, chunked, decode_changes, encode_changes

WRITES: Changes = [
    (b"memory\x00npc-mara", b'{"content": "the sailor fell"}'),
    (b"outbox\x00\x15", None),
    (b"empty", b""),
    (b"", b"a value under the empty key"),
    (b"\xff\xff\xff\xff", bytes(range(256))),
    (b"memory\x00npc-mara", None),
    (b"empty", b"again"),
]


def test_writes_come_back_in_order_with_deletes_and_empty_values() -> None:
    assert list(decode_changes(encode_changes(WRITES))) == WRITES


def test_an_event_without_writes_is_an_empty_message() -> None:
    assert encode_changes([]) == b""
    assert list(decode_changes(b"")) == []


def test_a_delete_and_an_empty_value_are_told_apart() -> None:
    deleted, emptied = encode_changes([(b"k", None)]), encode_changes([(b"k", b"")])
    assert deleted != emptied
    assert list(decode_changes(deleted)) == [(b"k", None)]
    assert list(decode_changes(emptied)) == [(b"k", b"")]


@given(
    st.lists(st.tuples(st.binary(max_size=40), st.none() | st.binary(max_size=300)), max_size=30)
)
def test_any_writes_round_trip(changes: Changes) -> None:
    assert list(decode_changes(encode_changes(changes))) == changes


def cost(key: bytes, value: bytes | None) -> int:
    """What one write takes in a changeset."""
    return len(encode_changes([(key, value)]))


def test_writes_within_the_limit_stay_in_one_message() -> None:
    limit = len(encode_changes(WRITES))
    assert list(chunked(WRITES, limit)) == [WRITES]


def test_a_write_that_would_pass_the_limit_starts_the_next_message() -> None:
    writes: Changes = [(b"k%d" % number, b"v" * 10) for number in range(5)]
    each = cost(*writes[0])
    runs = list(chunked(writes, 2 * each))  # exactly two fit
    assert runs == [writes[0:2], writes[2:4], writes[4:5]]
    assert all(len(encode_changes(run)) <= 2 * each for run in runs)
    runs = list(chunked(writes, 2 * each - 1))  # one byte short of two
    assert runs == [[write] for write in writes]


def test_a_single_write_over_the_limit_is_still_sent_alone() -> None:
    big = (b"big", b"x" * 1000)
    writes: Changes = [(b"a", b"1"), big, (b"b", None)]
    runs = list(chunked(writes, 100))
    assert runs == [[(b"a", b"1")], [big], [(b"b", None)]]
    assert len(encode_changes(runs[1])) > 100


@given(
    st.lists(st.tuples(st.binary(max_size=20), st.none() | st.binary(max_size=200)), max_size=40),
    st.integers(1, 600),
)
def test_runs_keep_every_write_in_order_and_stay_within_the_limit(
    changes: Changes, limit: int
) -> None:
    runs = list(chunked(changes, limit))
    assert [write for run in runs for write in run] == changes
    assert all(run for run in runs)
    for run, following in pairwise(runs):
        assert len(encode_changes([*run, following[0]])) > limit  # split only when it must
    for run in runs:
        assert len(run) == 1 or len(encode_changes(run)) <= limit
    decoded = [write for run in runs for write in decode_changes(encode_changes(run))]
    assert decoded == changes
