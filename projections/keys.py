"""Order-preserving keys: tuples of strings and integers packed into bytes.

Every projection lives in one ordered key-value space. Packing keeps tuple order as byte order,
so "the latest version at or before seq N" is one seek, and a tuple's packing is a prefix of
the packing of every longer tuple that starts with it (a prefix scan finds a whole scope).

A string is tagged `_STRING`, its UTF-8 with each NUL escaped (`_ESCAPED_NUL`), then `_END`; an
integer (0 to 2**64 - 1) is tagged `_INTEGER`, then `_INTEGER_BYTES` big-endian. `pack` is C
(`key_packing.c`: the commonest call of the projection core); `unpack` reads keys back.
"""

from __future__ import annotations

from functools import lru_cache

from projections.key_packing import pack

__all__ = ["KeyPart", "pack", "pack_scope", "unpack"]

_STRING = b"\x02"
_INTEGER = b"\x15"
_END = b"\x00"
_ESCAPED_NUL = b"\x00\xff"
_INTEGER_BYTES = 8

KeyPart = str | int


@lru_cache(maxsize=1 << 16)
def pack_scope(*parts: KeyPart) -> bytes:
    """`pack`, remembered: for the scopes events look up again and again (an entity's, a
    place's on a timeline), never for keys with a position in them, which do not recur."""
    return pack(*parts)


def unpack(key: bytes) -> tuple[KeyPart, ...]:
    """The tuple `pack` was given: the inverse, for reading keys back."""
    parts: list[KeyPart] = []
    index = 0
    while index < len(key):
        tag = key[index : index + 1]
        index += 1
        if tag == _INTEGER:
            if index + _INTEGER_BYTES > len(key):
                raise ValueError(f"not a packed key: an integer at {index - 1} is cut short")
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
