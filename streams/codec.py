"""One orjson codec for every topic rumourmill writes.

Registered with Faust under the name `orjson`. Pydantic models are written as their JSON
form; bytes pass through untouched, so an event can be re-published exactly as received.
"""

from __future__ import annotations

from typing import Any

import orjson
from faust.serializers import codecs
from pydantic import BaseModel

CODEC_NAME = "orjson"


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
