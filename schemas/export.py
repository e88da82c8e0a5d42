"""JSON Schema documents for every message type, so game servers in any language can validate."""

from __future__ import annotations

from typing import Any

import orjson
from pydantic import BaseModel

from schemas.events import Event
from schemas.outcomes import Ack, DeadLetter
from schemas.policy import Policy

MESSAGE_MODELS: dict[str, type[BaseModel]] = {
    "event": Event,
    "ack": Ack,
    "deadletter": DeadLetter,
    "policy": Policy,
}


def json_schemas() -> dict[str, bytes]:
    """File name -> the JSON Schema document of each message model, pretty and stable."""
    documents: dict[str, bytes] = {}
    for name, model in MESSAGE_MODELS.items():
        schema: dict[str, Any] = model.model_json_schema(mode="validation")
        documents[f"{name}.schema.json"] = (
            orjson.dumps(schema, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS) + b"\n"
        )
    return documents
