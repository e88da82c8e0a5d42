"""The published JSON Schema files must say what the models say."""

from __future__ import annotations

from pathlib import Path

from schemas.export import json_schemas

SCHEMA_DIR = Path(__file__).resolve().parents[2] / "schemas" / "json"


def test_exported_schema_files_match_the_models() -> None:
    expected = json_schemas()
    on_disk = {path.name: path.read_bytes() for path in SCHEMA_DIR.glob("*.schema.json")}
    stale = sorted(name for name in expected if on_disk.get(name) != expected[name])
    assert not stale, f"run `rumourmill schemas export`: {stale} drifted from the models"
    assert set(on_disk) == set(expected)
