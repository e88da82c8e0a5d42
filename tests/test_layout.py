"""The three floors: `schemas` <- `projections` <- `streams`, nothing of Kafka below, and the
dev tooling (`localbroker`) apart from all three."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
FORBIDDEN = {
    "schemas": {"projections", "streams", "faust", "aiokafka", "aiohttp", "mode", "rocksdict"},
    "projections": {"streams", "faust", "aiokafka", "aiohttp", "mode", "rocksdict"},
    "localbroker": {"schemas", "projections", "streams", "faust", "aiokafka", "mode", "rocksdict"},
}


def imported_roots(path: Path) -> set[str]:
    roots = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            roots.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            roots.add(node.module.split(".")[0])
    return roots


@pytest.mark.parametrize("package", sorted(FORBIDDEN))
def test_lower_floors_import_nothing_from_above_or_from_kafka(package: str) -> None:
    offenders = {
        str(path.relative_to(ROOT)): sorted(imported_roots(path) & FORBIDDEN[package])
        for path in (ROOT / package).rglob("*.py")
    }
    assert {name: found for name, found in offenders.items() if found} == {}
