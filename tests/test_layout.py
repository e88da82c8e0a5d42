"""The three floors: `schemas` <- `projections` <- `streams`, nothing of Kafka below, and the
dev tooling (`localbroker`) apart from all three; what they import from elsewhere declared."""

from __future__ import annotations

import ast
import re
import sys
import tomllib
from importlib.metadata import packages_distributions
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


PRODUCT = ("schemas", "projections", "streams", "localbroker")


def test_every_package_the_product_imports_is_a_declared_dependency() -> None:
    """An install takes the declared dependencies at their lower bounds: a package imported only
    because another declared one brings it today (`yarl`, `mode`, `pydantic_core`) is one
    release of theirs from an ImportError."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    declared = {
        re.split(r"[<>=!~\[; ]", requirement, maxsplit=1)[0].lower().replace("_", "-")
        for requirement in project["dependencies"]
    }
    distributions = packages_distributions()
    undeclared = {
        f"{root} ({', '.join(distributions[root])})"
        for package in PRODUCT
        for path in (ROOT / package).rglob("*.py")
        for root in imported_roots(path)
        if root not in sys.stdlib_module_names and root not in PRODUCT and root != "__future__"
        if not {name.lower().replace("_", "-") for name in distributions.get(root, [])} & declared
    }
    assert undeclared == set()
