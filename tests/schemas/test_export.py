"""The published JSON Schema files must say what the models say."""

from __future__ import annotations

from pathlib import Path

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
