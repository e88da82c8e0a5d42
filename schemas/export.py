"""JSON Schema documents for every message type, so game servers in any language can validate.

Each document is draft 2020-12 with a stable `$id` and carries every check rumourmill makes
on that message, so a message a schema validator accepts is never refused for its shape.
"""

from __future__ import annotations

from typing import Any

import orjson
from pydantic import BaseModel

from schemas.changes import CHANGE_MODELS
from schemas.events import Event
from schemas.judgements import EventJudgements
from schemas.outcomes import Ack, DeadLetter
from schemas.policy import Policy

JSON_SCHEMA_DIALECT = "https://json-schema.org/draft/2020-12/schema"

MESSAGE_MODELS: dict[str, type[BaseModel]] = {
    "event": Event,
    "ack": Ack,
    "deadletter": DeadLetter,
    "policy": Policy,
    "judgements": EventJudgements,
    **{f"change-{kind}": model for kind, model in CHANGE_MODELS.items()},
}

PARTIAL_DOCUMENTS = frozenset({"policy"})
"""Messages written as partial documents laid over defaults: no setting is required."""


def schema_id(name: str) -> str:
    """The stable `$id` of a message type's schema."""
    return f"urn:rumourmill:schema:{name}"


def json_schema(name: str) -> dict[str, Any]:
    """The JSON Schema of the message type `name` (a key of `MESSAGE_MODELS`)."""
    schema: dict[str, Any] = MESSAGE_MODELS[name].model_json_schema(mode="validation")
    if name in PARTIAL_DOCUMENTS:
        for model_schema in (schema, *schema.get("$defs", {}).values()):
            model_schema.pop("required", None)
    return {"$schema": JSON_SCHEMA_DIALECT, "$id": schema_id(name), **schema}


def json_schemas() -> dict[str, bytes]:
    """File name -> the JSON Schema document of each message model, pretty and stable."""
    return {
        f"{name}.schema.json": orjson.dumps(
            json_schema(name), option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS
        )
        + b"\n"
        for name in MESSAGE_MODELS
    }
