"""The change feed's record builder (`projections/change_records.c`): byte for byte what orjson
writes for the whole change, its id what `changes.change_id` gives, whatever the values hold."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from projections.change_records import record
from projections.changes import change_id
from projections.keys import pack

VALUES = st.one_of(
    st.text(),
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**63) - 2, max_value=2**64 + 2),  # past 64 bits, orjson refuses
    st.floats(),  # NaN and infinities too: orjson writes null for them
    st.sampled_from([0.0, -0.0, 0.1, 1e-5, 1.5e-7, 1e16, 0.30000000000000004]),
)


def expected(where: dict[str, Any], kind: str, one: str, other: str, own: dict[str, Any]) -> bytes:
    """The change as `orjson.dumps` writes it whole."""
    at = (where["tenant_id"], where["world_instance_id"], where["timeline_id"], where["seq"])
    return orjson.dumps(
        {"change_id": change_id(*at, kind, one, other), "kind": kind, **where, **own}
    )


def built(where: dict[str, Any], kind: str, one: str, other: str, own: dict[str, Any]) -> bytes:
    """The same change from the builder, as `changes.EventChanges` calls it."""
    prefix = pack("change", where["tenant_id"], where["world_instance_id"], where["timeline_id"])
    position = (prefix + pack(where["seq"]), orjson.dumps(where)[1:-1] + b",")
    names = tuple(orjson.dumps(name) + b":" for name in own)
    shape = (b'","kind":' + orjson.dumps(kind) + b",", pack(kind), names)
    return record(position, shape, one, other, tuple(own.values()))


WHERES = st.fixed_dictionaries(
    {
        "tenant_id": st.text(min_size=1),
        "world_instance_id": st.text(min_size=1),
        "timeline_id": st.text(min_size=1),
        "seq": st.integers(min_value=0, max_value=2**63 - 1),
        "game_time": st.text(),
        "story_minutes": st.none() | st.integers(min_value=0, max_value=2**40),
    }
)


@given(
    where=WHERES,
    kind=st.sampled_from(["belief-formed", "relation-changed", "rumour-passed"]),
    one=st.text(),
    other=st.text(),
    own=st.dictionaries(st.text(), VALUES, min_size=1, max_size=12),
)
def test_a_record_is_what_orjson_writes_for_the_whole_change(
    where: dict[str, Any], kind: str, one: str, other: str, own: dict[str, Any]
) -> None:
    own = {name: value for name, value in own.items() if name not in {"change_id", "kind", *where}}
    if not own:
        return
    try:
        whole = expected(where, kind, one, other, own)
    except orjson.JSONEncodeError:
        with pytest.raises(orjson.JSONEncodeError):
            built(where, kind, one, other, own)
    else:
        assert built(where, kind, one, other, own) == whole


def test_encoded_fields_are_spliced_in_as_they_are() -> None:
    position = (pack("change", "default", "save-1", "main") + pack(7), b'"seq":7,')
    shape = (b'","kind":"relation-changed",', pack("relation-changed"), (b'"entity_id":', b""))
    made = record(position, shape, "npc-mara", "npc-tom", ("npc-tom", b'"feeling":0.5'))
    assert orjson.loads(made) == {
        "change_id": change_id(
            "default", "save-1", "main", 7, "relation-changed", "npc-mara", "npc-tom"
        ),
        "kind": "relation-changed",
        "seq": 7,
        "entity_id": "npc-tom",
        "feeling": 0.5,
    }


def test_zero_keeps_its_sign_after_the_other_zero_was_encoded() -> None:
    position = (pack("change", "t", "w", "main") + pack(1), b"")
    shape = (b'","kind":"belief-weakened",', pack("belief-weakened"), (b'"confidence":',))
    assert record(position, shape, "a", "b", (0.0,)).endswith(b'"confidence":0.0}')
    assert record(position, shape, "a", "b", (-0.0,)).endswith(b'"confidence":-0.0}')


class Share(float):
    """A float of another type: orjson refuses it, remembered plain or not."""


def test_a_float_of_another_type_is_refused_as_orjson_refuses_it() -> None:
    position = (pack("change", "t", "w", "main") + pack(1), b"")
    shape = (b'","kind":"belief-weakened",', pack("belief-weakened"), (b'"confidence":',))
    assert record(position, shape, "a", "b", (0.25,)).endswith(b'"confidence":0.25}')
    with pytest.raises(orjson.JSONEncodeError):
        orjson.dumps(Share(0.25))
    with pytest.raises(orjson.JSONEncodeError):
        record(position, shape, "a", "b", (Share(0.25),))


@pytest.mark.parametrize(
    ("values", "error"),
    [
        (("\ud800",), UnicodeEncodeError),  # a lone surrogate: orjson refuses it too
        ([1.0], TypeError),
        ((object(),), TypeError),
        ((1, 2), TypeError),
    ],
)
def test_what_cannot_be_a_field_is_refused(values: Any, error: type[Exception]) -> None:
    position = (pack("change", "t", "w", "main") + pack(1), b"")
    shape = (b'","kind":"belief-weakened",', pack("belief-weakened"), (b'"confidence":',))
    with pytest.raises(error):
        record(position, shape, "a", "b", values)


def test_the_floats_it_remembers_take_the_memory_of_their_encodings_alone() -> None:
    """Confidences and feelings recur, so the builder remembers each float's encoding (65,536
    at most). It kept orjson's own result, a buffer of 4 KB or more for a few bytes: 20,000
    floats of tuned policies held 80 MB, and a worker up to 270 MB, never freed."""
    measure = """
import gc
from projections.change_records import record
from projections.keys import pack

def resident_kib() -> int:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * 4
position = (pack("change", "t", "w", "main") + pack(1), b'"seq":1,')
shape = (b'","kind":"belief-weakened",', pack("belief-weakened"), (b'"confidence":',))
gc.collect()
before = resident_kib()
for n in range(20_000):
    record(position, shape, "npc-a", "belief-1", (n * 0.37 + 0.01,))
gc.collect()
print(resident_kib() - before)
"""
    done = subprocess.run(
        [sys.executable, "-c", measure], capture_output=True, text=True, check=True, timeout=60
    )
    assert int(done.stdout) < 20_000, f"{done.stdout.strip()} KiB for 20,000 floats"
