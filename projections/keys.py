"""Order-preserving keys: tuples of strings and integers packed into bytes.

Every projection lives in one ordered key-value space. Packing keeps tuple order as byte order,
so "the latest version at or before seq N" is one seek, and a tuple's packing is a prefix of
the packing of every longer tuple that starts with it (a prefix scan finds a whole scope).
"""

from __future__ import annotations

from functools import lru_cache

_STRING = b"\x02"
_INTEGER = b"\x15"
_END = b"\x00"
_ESCAPED_NUL = b"\x00\xff"
_INTEGER_BYTES = 8

KeyPart = str | int


def pack(*parts: KeyPart) -> bytes:
    """Pack strings and non-negative integers (below 2**64) into one sortable key."""
    key = b""
    for part in parts:  # a loop of appends: the cheapest way for the 1 to 6 parts keys have
        if isinstance(part, str):
            key += _packed_string(part)
        else:
            key += _INTEGER + part.to_bytes(_INTEGER_BYTES, "big")
    return key


@lru_cache(maxsize=1 << 16)
def pack_scope(*parts: KeyPart) -> bytes:
    """`pack`, remembered: for the scopes events look up again and again (an entity's, a
    place's on a timeline), never for keys with a position in them, which do not recur."""
    return pack(*parts)


@lru_cache(maxsize=1 << 16)
def _packed_string(part: str) -> bytes:
    """Ids recur on every event (worlds, timelines, characters): pack each once."""
    return _STRING + part.encode("utf-8").replace(_END, _ESCAPED_NUL) + _END


def unpack(key: bytes) -> tuple[KeyPart, ...]:
    """The tuple `pack` was given: the inverse, for reading keys back."""
    parts: list[KeyPart] = []
    index = 0
    while index < len(key):
        tag = key[index : index + 1]
        index += 1
        if tag == _INTEGER:
            parts.append(int.from_bytes(key[index : index + _INTEGER_BYTES], "big"))
            index += _INTEGER_BYTES
            continue
        if tag != _STRING:
            raise ValueError(f"not a packed key: unknown tag {tag!r} at {index - 1}")
        end = key.find(_END, index)
        while end != -1 and key[end : end + 2] == _ESCAPED_NUL:
            end = key.find(_END, end + 2)
        if end == -1:
            raise ValueError(f"not a packed key: a string from {index} never ends")
        parts.append(key[index:end].replace(_ESCAPED_NUL, _END).decode("utf-8"))
        index = end + 1
    return tuple(parts)
