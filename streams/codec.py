"""One orjson codec for every topic rumourmill writes.

Registered with Faust under the name `orjson`. Pydantic models are written as their JSON
form; bytes pass through untouched, so an event can be re-published exactly as received.
"""

from __future__ import annotations

import json
from typing import Any

import orjson
from faust.serializers import codecs
from pydantic import BaseModel

CODEC_NAME = "orjson"


class _GivenTwice(Exception):
    """A JSON object gives a key twice (`key_given_twice`)."""


def _each_key_once(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    taken: dict[str, Any] = {}
    for key, value in pairs:
        if key in taken:
            raise _GivenTwice(key)
        taken[key] = value
    return taken


def key_given_twice(document: bytes | str) -> str | None:
    """The first key a JSON object in `document` (valid JSON) gives twice, or None: parsers
    keep the last, and what the first said is gone without a word (two snippets merged by
    hand, a field a game's serialiser writes twice)."""
    try:
        json.loads(document, object_pairs_hook=_each_key_once)
    except _GivenTwice as twice:
        return str(twice.args[0])
    return None


def _default(value: Any) -> Any:
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    raise TypeError(f"cannot write {type(value).__name__} as JSON")


def dumps(value: Any) -> bytes:
    """The JSON bytes of a model, dict or list; bytes are returned as they are."""
    if isinstance(value, bytes):
        return value
    return orjson.dumps(value, default=_default)


class OrjsonCodec(codecs.Codec):
    """Faust codec: orjson both ways."""

    def _dumps(self, obj: Any) -> bytes:
        return dumps(obj)

    def _loads(self, s: bytes) -> Any:
        return orjson.loads(s)


codecs.register(CODEC_NAME, OrjsonCodec())
