"""Which worlds a rebuild folds and compares: a world may be called `*`, as a tenant's deletion
names the world it does not name."""

from __future__ import annotations

import asyncio
from pathlib import Path

import orjson
from aiokafka.structs import ConsumerRecord
from rocksdict import Rdict

from projections.deletion import deletion_event
from streams.rebuild import wanted
from tests.streams.test_rebuild_format import rules_folder

STAR_WORLD = orjson.dumps(
    {
        "tenant_id": "acme",
        "world_instance_id": "*",
        "timeline_id": "main",
        "seq": 1,
        "key": "loreweaver.movement.location-entered",
        "actor": "npc-ada",
        "location": "loc-inn",
    }
)
OTHER_TENANT_DELETED = deletion_event("other", None).model_dump_json().encode()


def record(offset: int, value: bytes) -> ConsumerRecord[bytes, bytes]:
    return ConsumerRecord("events", 0, offset, 0, 0, b"*", value, None, 1, len(value), ())


def test_a_world_called_star_is_compared_and_a_tenants_deletion_is_no_world(
    tmp_path: Path,
) -> None:
    """The acks of a world called `*` were taken for a tenant's deletion's: a rebuild left the
    world out of its comparison and said every world it rebuilt was the same (exit 0)."""
    db = Rdict(str(tmp_path / "partition-0"))
    folder = rules_folder(db)
    for offset, value in enumerate((STAR_WORLD, OTHER_TENANT_DELETED)):
        asyncio.run(folder.take(record(offset, value)))
    db.close()
    assert folder.worlds == {("acme", "*")}


def test_a_rebuild_of_one_world_folds_tenant_deletions_but_not_a_world_called_star() -> None:
    assert wanted(record(0, OTHER_TENANT_DELETED), "save-1")
    assert not wanted(record(0, STAR_WORLD), "save-1")
    assert wanted(record(0, STAR_WORLD), "*")
    assert wanted(record(0, STAR_WORLD), None)
