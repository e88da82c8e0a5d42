"""Changesets, the changelog messages of the releases before per-key records: an event's writes
packed into one message.

Recovery still lays such messages over RocksDB (an upgraded worker reads its old changelog), so
what comes out must be exactly what went in: every key and value byte for byte, deletes as
deletes, an empty value as an empty value and the writes in their order.
"""

from __future__ import annotations

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
