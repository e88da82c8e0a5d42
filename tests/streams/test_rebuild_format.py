"""A rebuild's stores are stamped with this release's state format, as a worker's are."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any, cast

import orjson
from aiokafka.structs import ConsumerRecord
from rocksdict import Rdict

from projections.migrations import FORMAT_KEY, Upgrade, current_format, stored_format, upgrade
from projections.projector import Projector
from streams.judging import Judge, JudgementLog
from streams.rebuild import Folder
from streams.state import RocksTransaction


async def _never(*_: Any) -> Any:
    raise AssertionError("rules mode asks the judgements topic nothing")


def rules_folder(db: Rdict) -> Folder:
    """A rebuild's folder in rules mode, writing every partition into `db`, sending nothing
    before `BATCH_EVENTS` events."""
    return Folder(
        Projector(),
        cast(Any, None),
        "changelog",
        lambda partition: db,
        Judge(None, JudgementLog(_never, _never)),
        1_000_000,
        1,
    )


def test_a_rebuilt_store_is_stamped_and_its_worker_has_nothing_to_migrate(tmp_path: Path) -> None:
    db = Rdict(str(tmp_path / "partition-0"))
    folder = rules_folder(db)
    raw = orjson.dumps(
        {
            "key": "loreweaver.movement.location-entered",
            "world_instance_id": "w",
            "timeline_id": "main",
            "seq": 1,
            "actor": "npc-ada",
            "location": "inn",
        }
    )
    record = ConsumerRecord("events", 0, 0, 0, 0, b"w", raw, None, 1, len(raw), ())
    asyncio.run(folder.take(record))

    sent = folder.writes[0].batches
    assert any(FORMAT_KEY in batch for batch in sent)  # the changelog has it too
    tx = RocksTransaction(db, lambda key, value: None)
    assert stored_format(tx) == current_format()
    # the worker of the fresh app id, on its first start: the store is already current
    assert upgrade(tx) == Upgrade(current_format(), current_format(), 0)
    db.close()
