"""Scratch state reads as its base would after its own writes, and never writes the base."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from projections.scratch_state import ScratchState
from projections.state import MemoryState

KEYS = st.binary(min_size=1, max_size=3)
WRITES = st.lists(st.tuples(KEYS, st.one_of(st.none(), st.binary(max_size=2))), max_size=20)


@given(
    base=st.dictionaries(KEYS, st.binary(max_size=2), max_size=20), writes=WRITES, data=st.data()
)
def test_scratch_state_reads_like_the_base_written_to_and_leaves_the_base_alone(
    base: dict[bytes, bytes], writes: list[tuple[bytes, bytes | None]], data: st.DataObject
) -> None:
    original, expected = MemoryState(), MemoryState()
    for key, value in base.items():
        original.put(key, value)
        expected.put(key, value)
    scratch = ScratchState(original)
    for key, value in writes:
        for state in (scratch, expected):
            if value is None:
                state.delete(key)
            else:
                state.put(key, value)
    prefix = data.draw(st.binary(max_size=1))
    start = data.draw(st.one_of(st.none(), KEYS))
    for reverse in (False, True):
        assert list(scratch.scan(prefix, reverse=reverse, start=start)) == list(
            expected.scan(prefix, reverse=reverse, start=start)
        )
    assert all(scratch.get(key) == expected.get(key) for key, _ in writes)
    assert dict(original.items()) == base
