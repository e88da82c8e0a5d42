"""World and tenant deletion on a real Apache Kafka broker, through the command line."""

from __future__ import annotations

import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest

from projections.digest import world_digest
from projections.state import MemoryState
from streams.settings import Settings
from tests.support import WorkerProcess, read_topic, send_events, settings_env, unique_settings

pytestmark = pytest.mark.integration

TAVERN = (Path(__file__).resolve().parents[2] / "examples" / "tavern.ndjson").read_bytes()


@pytest.fixture
def settings(kafka_bootstrap: str, tmp_path: Path) -> Settings:
    return unique_settings(kafka_bootstrap, tmp_path / "data")


@pytest.fixture
def worker(settings: Settings, tmp_path: Path) -> Iterator[WorkerProcess]:
    process = WorkerProcess(settings, tmp_path / "worker.log").start()
    yield process
    process.stop()


def story(world: str, tenant: str = "default") -> list[dict[str, Any]]:
    return [
        orjson.loads(line) | {"world_instance_id": world, "tenant_id": tenant}
        for line in TAVERN.splitlines()
    ]


def status_of(settings: Settings, path: str) -> int:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{settings.web_port}{path}", timeout=10):
            return 200
    except urllib.error.HTTPError as error:
        return error.code


def read(world: str, tenant: str = "default") -> str:
    return (
        f"/v2/memory/runtime/npcs/npc-mara?world_instance_id={world}"
        f"&timeline_id=main&tenant_id={tenant}"
    )


def rumourmill(settings: Settings, *args: str) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "streams", *args],
        env=settings_env(settings),
        check=True,
        capture_output=True,
        text=True,
    )
    return done.stdout


def deletion_acks(settings: Settings, count: int) -> list[dict[str, Any]]:
    def deletions(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return [ack for ack in messages if ack["timeline_id"] == "*"]

    return deletions(
        read_topic(settings, settings.topics.acks, lambda got: len(deletions(got)) >= count)
    )


def test_a_world_and_a_tenant_deleted_from_the_command_line_read_404(
    settings: Settings, worker: WorkerProcess
) -> None:
    worlds = [("save-1", "default"), ("save-2", "default"), ("a-1", "acme"), ("a-2", "acme")]
    events = [item for world, tenant in worlds for item in story(world, tenant)]
    send_events(settings, events)
    read_topic(settings, settings.topics.acks, lambda got: len(got) >= len(events))
    assert {status_of(settings, read(world, tenant)) for world, tenant in worlds} == {200}

    said = rumourmill(settings, "world", "delete", "save-1")
    assert "world.deleted for world 'save-1'" in said
    (ack,) = deletion_acks(settings, 1)
    assert (ack["outcome"], ack["world_instance_id"]) == ("processed", "save-1")
    assert ack["reason"].startswith("deleted ")
    assert status_of(settings, read("save-1")) == 404
    digest = f"http://127.0.0.1:{settings.web_port}/v2/admin/digest?world_instance_id=save-1"
    with urllib.request.urlopen(digest, timeout=10) as reply:
        assert orjson.loads(reply.read())["digest"] == world_digest(
            MemoryState(), "default", "save-1"
        )
    assert status_of(settings, read("save-2")) == 200

    rumourmill(settings, "world", "delete", "never-seen")
    unknown = [ack for ack in deletion_acks(settings, 2) if ack["world_instance_id"] != "save-1"]
    assert [ack["reason"] for ack in unknown] == [
        "world 'never-seen' of tenant 'default': nothing to delete"
    ]

    said = rumourmill(settings, "tenant", "delete", "acme")
    assert f"({settings.partitions}x)" in said
    acks = deletion_acks(settings, 2 + settings.partitions)
    assert sum(ack["tenant_id"] == "acme" for ack in acks) == settings.partitions
    assert status_of(settings, read("a-1", "acme")) == 404
    assert status_of(settings, read("a-2", "acme")) == 404
    assert status_of(settings, read("save-2")) == 200

    anew = story("save-1")  # the world begins anew, from seq 1
    send_events(settings, anew)
    total = len(events) + len(acks) + len(anew)
    acked = read_topic(settings, settings.topics.acks, lambda got: len(got) >= total)
    again = [a for a in acked if a["world_instance_id"] == "save-1" and a["timeline_id"] != "*"]
    assert [a["outcome"] for a in again] == ["processed"] * 2 * len(anew)  # no duplicates
    assert status_of(settings, read("save-1")) == 200
