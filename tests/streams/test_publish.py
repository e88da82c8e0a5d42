"""`rumourmill publish` checks every line before anything is sent."""

from __future__ import annotations

import asyncio
import os
import pty
import select
import subprocess
import sys
import time
from pathlib import Path

import orjson
import pytest
from aiokafka import AIOKafkaConsumer, TopicPartition

from projections.deletion import deletion_event
from streams.publish import parse_line, read_lines
from streams.settings import Settings
from tests.support import settings_env, unique_settings


def test_invalid_lines_are_reported_by_number_and_nothing_is_sent(tmp_path: Path) -> None:
    """Lines over RUMOURMILL_MAX_EVENT_BYTES too: the worker would dead-letter them (and one
    over the producer's limit would stop the publish halfway)."""
    story = tmp_path / "story.ndjson"
    oversized = '{"world_instance_id": "w", "timeline_id": "main", "seq": 2, "key": "k", '
    oversized += '"payload": {"text": "' + "y" * 20_000 + '"}}'
    story.write_text(
        '{"world_instance_id": "w", "timeline_id": "main", "seq": 1, "key": "k"}\n'
        "\n"
        '{"world_instance_id": "w", "timeline_id": "main", "seq": 0, "key": "k"}\n'
        "not json\n" + oversized + "\n"
    )
    result = subprocess.run(
        [sys.executable, "-m", "streams", "publish", str(story), "--broker", "127.0.0.1:9"],
        capture_output=True,
        text=True,
        env={**os.environ, "RUMOURMILL_MAX_EVENT_BYTES": "16384"},
    )
    assert result.returncode != 0
    assert (
        f"{story}:3: invalid event: seq: Input should be greater than or equal to 1"
        in result.stderr
    )
    assert f"{story}:4: not valid JSON" in result.stderr
    assert (
        f"{story}:5: message is {len(oversized)} bytes, over the limit of 16384"
        " (RUMOURMILL_MAX_EVENT_BYTES)" in result.stderr
    )
    assert "3 invalid line(s); nothing sent" in result.stderr


def test_raw_lines_are_kept_as_they_are_and_keyed_by_world_when_they_name_one(
    tmp_path: Path,
) -> None:
    story = tmp_path / "story.ndjson"
    story.write_bytes(
        b'{"world_instance_id": "w", "timeline_id": "main", "seq": 1, "key": "k"}\nnot json\n'
    )
    with story.open("rb") as handle:
        lines = list(read_lines(handle, raw=True))
    assert [(line.number, line.key, line.problem) for line in lines] == [
        (1, b"w", None),
        (2, None, None),
    ]
    assert lines[1].raw == b"not json"


def test_a_raw_line_over_the_producers_request_limit_is_reported_by_number_and_nothing_is_sent(
    tmp_path: Path,
) -> None:
    """`--raw` sends lines unchecked, but Kafka's producer refuses a record over its request
    limit (1 MiB): met while sending, the lines before it were sent already. Refused here
    before Kafka is asked (nothing listens on its address)."""
    story = tmp_path / "story.ndjson"
    story.write_bytes(
        b'{"world_instance_id": "w", "timeline_id": "main", "seq": 1, "key": "k"}\n'
        b'{"x": "' + b"y" * 1_200_000 + b'"}\nnot json\n'
    )
    result = subprocess.run(
        [sys.executable, "-m", "streams", "publish", "--raw", str(story)],
        capture_output=True,
        text=True,
        env={**os.environ, "RUMOURMILL_BROKER": "127.0.0.1:9"},
    )
    assert result.returncode == 1
    assert [line for line in result.stderr.splitlines() if line != "validating"] == [
        f"{story}:2: message is 1200097 bytes as a Kafka record, over the producer's request "
        "limit of 1048576",
        "Error: 1 invalid line(s); nothing sent",
    ]


@pytest.mark.integration
def test_a_tenants_deletion_in_a_file_goes_to_every_partition_after_what_came_before(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    """Found by a reviewer: keyed by its world `*`, it reached one partition, and only the
    tenant's worlds there were deleted (a replay of the file deleted them all)."""
    settings = unique_settings(kafka_bootstrap, tmp_path / "data", partitions=4)
    worlds = [f"w{number}" for number in range(8)]
    events = [
        {
            "world_instance_id": world,
            "tenant_id": "acme",
            "timeline_id": "main",
            "seq": 1,
            "key": "k",
        }
        for world in worlds
    ]
    gone = deletion_event("acme", None).model_dump(mode="json", exclude_defaults=True)
    story = tmp_path / "story.ndjson"
    story.write_bytes(b"\n".join(orjson.dumps(line) for line in [*events, gone]) + b"\n")
    result = subprocess.run(
        [sys.executable, "-m", "streams", "publish", str(story)],
        capture_output=True,
        text=True,
        env=settings_env(settings),
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("published 9 event(s)")
    assert "(12 messages: a tenant's deletion goes to every partition)" in result.stdout
    by_partition = asyncio.run(keys_by_partition(settings, settings.topics.events))
    assert sorted(by_partition) == [0, 1, 2, 3]
    for partition, keys in by_partition.items():
        assert keys[-1] == b"*" and b"*" not in keys[:-1], partition
    assert sorted(key for keys in by_partition.values() for key in keys[:-1]) == [
        world.encode() for world in worlds
    ]


async def keys_by_partition(settings: Settings, topic: str) -> dict[int, list[bytes | None]]:
    """Each partition's message keys, in order."""
    consumer = AIOKafkaConsumer(bootstrap_servers=settings.bootstrap, group_id=None)
    await consumer.start()
    try:
        partitions = [TopicPartition(topic, number) for number in range(settings.partitions)]
        ends = await consumer.end_offsets(partitions)
        consumer.assign(partitions)
        await consumer.seek_to_beginning(*partitions)
        keys: dict[int, list[bytes | None]] = {tp.partition: [] for tp in partitions}
        while sum(len(found) for found in keys.values()) < sum(ends.values()):
            for tp, records in (await consumer.getmany(timeout_ms=1000)).items():
                keys[tp.partition] += [record.key for record in records]
        return keys
    finally:
        await consumer.stop()


def test_the_bar_shows_while_the_lines_are_checked_and_a_pipe_is_read_once(
    tmp_path: Path,
) -> None:
    """On a terminal: every line was checked before the bar showed (a large file showed
    nothing for as long as checking took). A named pipe stands for `publish <(generate)`: the
    bar is up while its first lines wait for the rest, and every line is checked (the last,
    invalid, is reported by number)."""
    event = b'{"world_instance_id": "w", "timeline_id": "main", "seq": 1, "key": "k"}\n'
    story = tmp_path / "story.ndjson"
    os.mkfifo(story)
    controller, terminal = pty.openpty()
    process = subprocess.Popen(
        [sys.executable, "-m", "streams", "publish", str(story), "--broker", "127.0.0.1:9"],
        stdout=subprocess.DEVNULL,
        stderr=terminal,
    )
    os.close(terminal)
    shown = b""
    with story.open("wb") as writer:
        writer.write(event * 100)
        writer.flush()
        deadline = time.monotonic() + 60
        while b"validating" not in shown and time.monotonic() < deadline:
            shown += _read_terminal(controller)
        assert b"validating" in shown, shown
        writer.write(event * 100 + b"not json\n")
    assert process.wait(timeout=60) == 1
    while chunk := _read_terminal(controller):  # what it wrote last waits in the terminal
        shown += chunk
    os.close(controller)
    assert f"{story}:201: not valid JSON".encode() in shown, shown[-500:]
    assert b"1 invalid line(s); nothing sent" in shown


def _read_terminal(controller: int) -> bytes:
    """What the child wrote to its terminal next (waiting at most a second); empty once it
    closed it."""
    if not select.select([controller], [], [], 1)[0]:
        return b""
    try:
        return os.read(controller, 65536)
    except OSError:  # Linux: EIO once no process holds the terminal open
        return b""


@pytest.mark.parametrize("constant", [b"NaN", b"-Infinity"])
def test_a_nan_is_refused_in_the_words_the_worker_uses(constant: bytes) -> None:
    """`publish` said `payload.gold.float: Input should be less than 18446744073709552000`,
    the worker and the README that NaN is no JSON number."""
    line = b'{"world_instance_id":"w","timeline_id":"main","seq":1,"key":"k","payload":{"v":%s}}'
    assert parse_line(1, line % constant).problem == (
        f"not valid JSON: {constant.decode()} is no JSON number (RFC 8259): send null or a string"
    )


@pytest.mark.parametrize("raw", [False, True])
def test_a_worlds_deletion_goes_to_its_worlds_partition_a_tenants_to_every_one(raw: bool) -> None:
    """A world lives on one partition, whose worker deletes it; a copy of its deletion on the
    others would be dead-lettered there (an event on a partition other than its key's)."""
    world, tenant = (
        orjson.dumps(deletion_event("acme", world).model_dump(mode="json", exclude_defaults=True))
        for world in ("w1", None)
    )
    assert parse_line(1, world, raw=raw).every_partition is False
    assert parse_line(2, tenant, raw=raw).every_partition is True


def test_a_field_given_twice_is_refused_before_anything_is_sent() -> None:
    """The worker keeps the last copy of a field given twice (as JSON parsers do): a line
    naming its witnesses twice lost the first list without a word."""
    line = b'{"world_instance_id":"w","timeline_id":"main","seq":1,"key":"k",%s}'
    twice = line % b'"witnesses":["npc-a"],"payload":{"v":1},"witnesses":[]'
    nested = line % b'"payload":{"v":1,"v":2}'
    assert parse_line(1, twice).problem == "'witnesses' is given twice in one object: give it once"
    assert parse_line(2, nested).problem == "'v' is given twice in one object: give it once"
    assert parse_line(3, line % b'"payload":{"v":1}').problem is None
