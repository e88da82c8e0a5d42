"""A read model as a client receives it: the JSON the HTTP view serves, decoded."""

from __future__ import annotations

from typing import Any

import orjson

from schemas.memory import ReadModel


def answer(read: ReadModel) -> Any:
    """The decoded JSON body of a read, as the runtime read and provenance views serve it."""
    return orjson.loads(read.to_json())
