"""Changesets, the changelog messages of the releases before per-key records: an event's writes
packed into one message.

Recovery still lays such messages over RocksDB (an upgraded worker reads its old changelog), so
what comes out must be exactly what went in: every key and value byte for byte, deletes as
deletes, an empty value as an empty value and the writes in their order.
"""

from __future__ import annotations

from itertools import accumulate

import pytest
from hypothesis import given
from hypothesis import strategies as st

from streams.state import Changes, decode_changes, encode_changes

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


@given(
    st.lists(st.tuples(st.binary(max_size=40), st.none() | st.binary(max_size=300)), min_size=1),
    st.data(),
)
def test_a_changeset_cut_short_is_refused_not_laid_in_as_other_keys(
    changes: Changes, data: st.DataObject
) -> None:
    """Recovery lays an earlier release's changesets into the store: bytes cut short (a copy
    that lost its end, or a per-key record whose headers a tool dropped) became keys and
    values no event wrote, without a word."""
    whole = encode_changes(changes)
    cut = data.draw(st.integers(1, len(whole) - 1))
    ends = set(accumulate(4 + len(key) + 4 + len(value or b"") for key, value in changes))
    if cut in ends:  # a whole changeset of fewer writes
        return
    with pytest.raises(ValueError, match="not a changeset"):
        list(decode_changes(whole[:cut]))
    with pytest.raises(ValueError, match="not a changeset"):
        list(decode_changes(b'{"confidence":0.9}'))
