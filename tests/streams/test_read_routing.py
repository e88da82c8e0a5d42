"""A read goes to the worker that serves its world; when that worker cannot answer, the read
says so with a 503 and why, instead of a 500 or another partition's state."""

from __future__ import annotations

import json
import re
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from localbroker import free_port
from streams.partitioning import partition_of
from streams.settings import Settings
from tests.support import WorkerProcess, read_topic, send_events, unique_settings
from tests.tavern import TAVERN_LINES

pytestmark = pytest.mark.integration

PARTITIONS = 2


def read(settings: Settings, world: str) -> tuple[int, Any]:
    """(status, JSON body) of a world's timeline read at the worker `settings` runs."""
    url = f"http://127.0.0.1:{settings.web_port}/v2/timelines/main?world_instance_id={world}"
    try:
        with urllib.request.urlopen(url, timeout=30) as reply:
            return reply.status, json.loads(reply.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


def world_on(partition: int) -> str:
    """A world id the events topic puts on `partition`."""
    return next(
        world
        for number in range(1000)
        if partition_of((world := f"w-{number}").encode(), PARTITIONS) == partition
    )


@contextmanager
def two_workers(first: Settings, second: Settings, base: Path) -> Iterator[list[WorkerProcess]]:
    """Both started, each serving one of the two partitions; both stopped at the end."""
    workers = [WorkerProcess(first, base / "one.log"), WorkerProcess(second, base / "two.log")]
    try:
        for worker in workers:
            worker.start()
        deadline = time.monotonic() + 90
        while sorted(len(worker.owned_partitions()) for worker in workers) != [1, 1]:
            assert time.monotonic() < deadline, [w.log_tail() for w in workers]
            time.sleep(0.2)
        yield workers
    finally:
        for worker in workers:
            worker.stop()


def test_a_worker_sharing_another_ones_address_refuses_the_others_worlds(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    """Two workers advertising one address cannot forward to each other: each refuses a read
    of the other's worlds as unavailable, instead of answering from a copy it does not keep up
    to date (Faust's routing keeps one partition map per address, so which of the two it finds
    is its choice: either way, a 503 with why)."""
    first = unique_settings(kafka_bootstrap, tmp_path / "one", partitions=PARTITIONS)
    twin = first.model_copy(
        update={
            "data_dir": tmp_path / "two",
            "web_port": free_port(),
            "web_url": first.canonical_url,
        }
    )
    with two_workers(first, twin, tmp_path) as workers:
        for settings, worker in zip((first, twin), workers, strict=True):
            [own] = worker.owned_partitions()
            status, body = read(settings, world_on(1 - own))
            assert status == 503, body
            assert "does not serve" in body["detail"] or "no worker is known" in body["detail"]


def test_a_read_whose_owner_is_gone_is_a_503_until_the_group_rebalances(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    """Killed, a worker still owns its partitions until its session times out: a read of its
    worlds forwarded to it meanwhile is refused as unavailable, not failed with a 500, and
    without the address the client could not reach it at (the worker's log has it)."""
    first = unique_settings(kafka_bootstrap, tmp_path / "one", partitions=PARTITIONS)
    second = first.model_copy(update={"data_dir": tmp_path / "two", "web_port": free_port()})
    with two_workers(first, second, tmp_path) as (staying, leaving):
        [gone] = leaving.owned_partitions()
        leaving.kill()
        world = world_on(gone)
        status, body = read(first, world)
        assert status == 503, body
        assert "cannot be reached" in body["detail"]
        assert str(second.web_port) not in body["detail"]
        not_forwarded = f"a read could not be forwarded to 127.0.0.1:{second.web_port}: "
        staying.wait_for_log(not_forwarded.encode())
        [logged] = re.findall(re.escape(not_forwarded) + ".*", staying.log_tail())
        assert f"(world {world!r})" in logged


def reply_check(settings: Settings, body: bytes, *, chunked: bool) -> tuple[int, Any]:
    """(status, JSON body) of Mara's reply check at the worker `settings` runs; `chunked` sends
    the body as `Transfer-Encoding: chunked`, as a client streaming its body does."""
    path = (
        "/v2/memory/runtime/npcs/npc-mara/reply-check?world_instance_id=save-1"
        "&timeline_id=main&after_seq=2"
    )
    data: bytes | Iterator[bytes] = iter([body]) if chunked else body
    request = urllib.request.Request(
        f"http://127.0.0.1:{settings.web_port}{path}",
        data=data,  # type: ignore[arg-type]  # an iterable body is sent chunked
        headers={"Content-Type": "application/json"},
        method="POST",
    )
    try:
        with urllib.request.urlopen(request, timeout=30) as answer:
            return answer.status, json.loads(answer.read())
    except urllib.error.HTTPError as error:
        return error.code, error.read()


def get_and_head(settings: Settings, path: str) -> tuple[bytes, str | None, str | None]:
    """(a GET's body, its Content-Length, a HEAD's Content-Length) at the worker `settings`
    runs."""
    url = f"http://127.0.0.1:{settings.web_port}{path}"
    with urllib.request.urlopen(url, timeout=30) as got:
        body, length = got.read(), got.headers["Content-Length"]
    with urllib.request.urlopen(urllib.request.Request(url, method="HEAD"), timeout=30) as headed:
        return body, length, headed.headers["Content-Length"]


def test_either_worker_answers_as_the_owner_a_reply_check_chunked_or_not_and_a_head(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    """The worker that does not serve the world forwards the POST with its body; the client's
    framing (chunked, or a length) stays on the client's connection: forwarded as it was, the
    owner refused a chunked one (400, Content-Length with Transfer-Encoding). A forwarded HEAD
    says the length a GET sends (it said none: the owner's HEAD has no body to measure)."""
    first = unique_settings(kafka_bootstrap, tmp_path / "one", partitions=PARTITIONS)
    second = first.model_copy(update={"data_dir": tmp_path / "two", "web_port": free_port()})
    with two_workers(first, second, tmp_path):
        send_events(first, TAVERN_LINES)
        read_topic(first, first.topics.acks, lambda acks: len(acks) >= 6, timeout=120)
        body = b'{"text": "Ask Bertram at the harbour."}'
        answers = [
            reply_check(settings, body, chunked=chunked)
            for settings in (first, second)  # one serves save-1, the other forwards to it
            for chunked in (False, True)
        ]
        mara = "/v2/memory/runtime/npcs/npc-mara?world_instance_id=save-1&timeline_id=main"
        heads = [get_and_head(settings, mara) for settings in (first, second)]
    assert heads[0] == heads[1], heads
    body, length, head_length = heads[0]
    assert length == head_length == str(len(body)), heads
    assert [status for status, _ in answers] == [200] * 4, answers
    assert all(found["inventions"] == [{"name": "Bertram", "kind": "name"}] for _, found in answers)
