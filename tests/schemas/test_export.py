"""The published JSON Schema files must say what the models say."""

from __future__ import annotations

import re
from pathlib import Path

import orjson

from schemas.changes import CHANGE_MODELS
from schemas.export import json_schemas

SCHEMA_DIR = Path(__file__).resolve().parents[2] / "schemas" / "json"


def test_exported_schema_files_match_the_models() -> None:
    expected = json_schemas()
    on_disk = {path.name: path.read_bytes() for path in SCHEMA_DIR.glob("*.schema.json")}
    stale = sorted(name for name in expected if on_disk.get(name) != expected[name])
    assert not stale, f"run `rumourmill schemas export`: {stale} drifted from the models"
    assert set(on_disk) == set(expected)


def test_every_field_of_the_change_feed_says_what_it_means() -> None:
    """An analytics consumer reads the change schemas, not our source: a field with a type and
    a title alone leaves them guessing what `origin` or `hops` counts."""
    undescribed = {
        (kind, name)
        for kind, model in CHANGE_MODELS.items()
        for name, field in model.model_json_schema()["properties"].items()
        if name != "kind" and not field.get("description")
    }
    assert not undescribed


INTERNAL = re.compile(r"section \d|\bseed \d|`projections\.|`streams\.|\b(?:None|True|False)\b")
"""What a published description must not say: the spec's sections, the seeds it was written
from and our modules are ours, and JSON says null, true and false."""


def test_no_published_description_speaks_of_our_internals() -> None:
    """A field's docstring is its published description: one written as a code comment told
    producers of our modules, the spec's sections and Python's None."""
    said = [
        (name, description)
        for name, schema in json_schemas().items()
        for description in _descriptions(orjson.loads(schema))
        if INTERNAL.search(description)
    ]
    assert not said


def _descriptions(schema: object) -> list[str]:
    if isinstance(schema, dict):
        own = [schema["description"]] if isinstance(schema.get("description"), str) else []
        return own + [found for value in schema.values() for found in _descriptions(value)]
    if isinstance(schema, list):
        return [found for value in schema for found in _descriptions(value)]
    return []
