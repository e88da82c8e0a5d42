"""Keys keep tuple order as byte order, read back as they were packed, in a stable format."""

from __future__ import annotations

import random

import pytest

from projections.keys import KeyPart, pack, unpack

_TEXT = ["", "a", "Z", "\x00", "a\x00b", "é", "日本", "\U0001f600", "\x01", "\xff", "npc-mara"]


def _random_key(rng: random.Random) -> tuple[KeyPart, ...]:
    parts: list[KeyPart] = []
    for _ in range(rng.randint(0, 6)):
        if rng.random() < 0.4:
            parts.append(rng.choice([0, 1, 255, 256, 2**63, 2**64 - 1, rng.randrange(2**64)]))
        else:
            parts.append("".join(rng.choice(_TEXT) for _ in range(rng.randint(0, 3))))
    return tuple(parts)


def _tuple_order(key: tuple[KeyPart, ...]) -> tuple[tuple[int, int | bytes], ...]:
    """How tuples are meant to sort: part by part, a string before an integer of the same
    place (their tags), strings by their UTF-8 (code point order), a shorter tuple first."""
    return tuple((1, part) if isinstance(part, int) else (0, part.encode()) for part in key)


def test_packed_keys_sort_as_their_tuples_and_unpack_to_them() -> None:
    rng = random.Random(7)
    keys = list({_random_key(rng) for _ in range(5000)})
    by_bytes = sorted(keys, key=lambda key: pack(*key))
    assert by_bytes == sorted(keys, key=_tuple_order)
    assert all(unpack(pack(*key)) == key for key in keys)


def test_a_scope_is_a_prefix_of_every_key_in_it() -> None:
    scope = pack("memories", "tenant", "world\x00")
    assert pack("memories", "tenant", "world\x00", "npc-mara", 42).startswith(scope)
    assert not pack("memories", "tenant", "world\x00x").startswith(scope)


def test_the_packed_format_is_the_one_stored_states_hold() -> None:
    """Keys on disk and in changelogs were written in this format: it must never change."""
    assert pack() == b""
    assert pack("a") == b"\x02a\x00"
    assert pack("a\x00b") == b"\x02a\x00\xffb\x00"
    assert pack("é") == b"\x02\xc3\xa9\x00"
    assert pack(1) == b"\x15" + bytes(7) + b"\x01"
    assert pack(2**64 - 1) == b"\x15" + b"\xff" * 8
    assert pack("tavern", 258, "") == b"\x02tavern\x00\x15" + bytes(6) + b"\x01\x02\x02\x00"
    assert pack(True) == pack(1)  # a bool is the integer it is


@pytest.mark.parametrize(
    ("part", "error"),
    [(-1, OverflowError), (2**64, OverflowError), (1.5, TypeError), (b"x", TypeError)],
)
def test_what_cannot_be_a_key_part_is_refused(part: object, error: type[Exception]) -> None:
    with pytest.raises(error):
        pack("scope", part)  # type: ignore[arg-type]


def test_a_string_that_is_not_unicode_text_is_refused() -> None:
    with pytest.raises(UnicodeEncodeError):
        pack("\ud800")


def test_a_key_cut_inside_an_integer_is_refused_not_read_as_a_smaller_number() -> None:
    key = pack("memories", "tenant", 7)
    for cut in range(len(key) - 8, len(key)):
        with pytest.raises(ValueError, match="cut short"):
            unpack(key[:cut])
