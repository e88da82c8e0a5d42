"""MemoryState scans as a sorted list of its keys would, whatever the writes, deletes and
interleaved scans (it sorts each key space in only when the space is scanned)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from projections.keys import pack
from projections.state import MemoryState, prefix_end

PARTS = st.one_of(st.sampled_from(["a", "ab", "b", "a\x00"]), st.integers(0, 3))
KEYS = st.one_of(
    st.lists(PARTS, min_size=1, max_size=3).map(lambda parts: pack(*parts)),
    st.binary(min_size=1, max_size=3),
)
PREFIXES = st.one_of(
    st.lists(PARTS, max_size=2).map(lambda parts: pack(*parts)), st.binary(max_size=2)
)
STEPS = st.lists(
    st.tuples(st.sampled_from(["put", "delete", "scan"]), KEYS, PREFIXES, st.booleans()),
    max_size=40,
)


def expected_scan(
    data: dict[bytes, bytes], prefix: bytes, reverse: bool, start: bytes | None
) -> list[tuple[bytes, bytes]]:
    end = prefix_end(prefix)
    found = [(key, data[key]) for key in sorted(data) if prefix <= key < end]
    if start is not None:
        found = [item for item in found if (item[0] <= start if reverse else item[0] >= start)]
    return found[::-1] if reverse else found


@given(steps=STEPS, start=st.one_of(st.none(), KEYS))
def test_memory_state_scans_in_key_order_whenever_it_is_scanned(
    steps: list[tuple[str, bytes, bytes, bool]], start: bytes | None
) -> None:
    state, data = MemoryState(), {}
    for number, (step, key, prefix, reverse) in enumerate(steps):
        if step == "put":
            state.put(key, b"%d" % number)
            data[key] = b"%d" % number
        elif step == "delete":
            state.delete(key)
            data.pop(key, None)
        else:
            assert list(state.scan(prefix, reverse=reverse, start=start)) == expected_scan(
                data, prefix, reverse, start
            )
    assert list(state.items()) == sorted(data.items())
    assert all(state.get(key) == value for key, value in data.items())
