"""The runtime read over HTTP from real workers on Apache Kafka."""

from __future__ import annotations

import asyncio
import json
import re
import socket
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import quote, unquote

import orjson
import pytest

from localbroker import free_port
from projections.policy import policy_key, resolve
from projections.projector import Projector
from projections.runtime_read import runtime_read
from projections.timelines import timeline_key
from streams.publish import send_one
from streams.replay import replay_lines
from streams.settings import Settings
from tests.support import WorkerProcess, read_topic, send_events, settings_env, unique_settings
from tests.tavern import TAVERN_LINES as TAVERN

pytestmark = pytest.mark.integration

READ = "/v2/memory/runtime/npcs/{npc}?world_instance_id={world}&timeline_id={timeline}"


def get(port: int, path: str, key: str | None = None) -> tuple[int, Any]:
    request = urllib.request.Request(f"http://127.0.0.1:{port}{path}")
    if key is not None:
        request.add_header("Authorization", f"Bearer {key}")
    try:
        with urllib.request.urlopen(request, timeout=10) as reply:
            return reply.status, json.loads(reply.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


def rumourmill(*args: str) -> str:
    """Run a `rumourmill` command; its standard output."""
    return subprocess.run(
        [sys.executable, "-m", "streams", *args], capture_output=True, text=True, check=True
    ).stdout


def wait_for_acks(settings: Settings, count: int) -> None:
    read_topic(settings, settings.topics.acks, lambda got: len(got) >= count, timeout=120)


@pytest.fixture
def tavern_worker(kafka_bootstrap: str, tmp_path: Path) -> Iterator[WorkerProcess]:
    settings = unique_settings(
        kafka_bootstrap, tmp_path / "data", api_keys="key-acme:default,key-other:other"
    )
    worker = WorkerProcess(settings, tmp_path / "worker.log").start()
    send_events(settings, TAVERN)
    wait_for_acks(settings, len(TAVERN))
    yield worker
    worker.stop()


def test_the_read_serves_what_the_projector_computes(tavern_worker: WorkerProcess) -> None:
    port = tavern_worker.settings.web_port
    expected = replay_lines(TAVERN).state
    for timeline, npc in [("main", "npc-mara"), ("main", "npc-tomas"), ("reload", "npc-mara")]:
        status, body = get(
            port, READ.format(npc=npc, world="save-1", timeline=timeline), "key-acme"
        )
        assert status == 200
        assert body == orjson.loads(
            runtime_read(expected, "default", "save-1", timeline, npc).to_json()
        )
    status, body = get(
        port, READ.format(npc="npc-mara", world="save-1", timeline="main"), "key-acme"
    )
    assert [m["seq"] for m in body["recollections"]] == [3]
    assert body["relations"][0] == {
        "entity_id": "player-1",
        "feeling": -0.05,
        "memories": 2,
        "last_seq": 3,
    }


def test_a_line_sent_without_its_time_is_a_turn_of_the_time_kafka_stamped_it(
    tavern_worker: WorkerProcess,
) -> None:
    """The tavern's player line (seq 2) has no `occurred_at`: its turn has its Kafka record's
    time, which the publish just stamped (a turn without one never expires)."""
    dialogue = READ.format(npc="npc-mara", world="save-1", timeline="main").replace(
        "npc-mara?", "npc-mara/dialogue?player_id=player-1&"
    )
    status, body = get(tavern_worker.settings.web_port, dialogue, "key-acme")
    assert status == 200
    [turn] = body["player"]["turns"]
    assert b"occurred_at" not in TAVERN[turn["seq"] - 1]
    stamped = datetime.fromisoformat(turn["occurred_at"])
    assert timedelta(0) <= datetime.now(UTC) - stamped < timedelta(minutes=10)


@pytest.mark.parametrize(
    ("path", "status", "detail"),
    [
        (
            "/v2/memory/runtime/npcs/npc-mara?timeline_id=main",
            400,
            "'world_instance_id' is required",
        ),
        (
            "/v2/memory/runtime/npcs/npc-mara?world_instance_id=save-1",
            400,
            "'timeline_id' is required",
        ),
        (
            READ.format(npc="npc-mara", world="save-1", timeline="main") + "&timeline_id=main",
            400,
            "'timeline_id' must be given once",
        ),
        (READ.format(npc="npc-mara", world="w" * 129, timeline="main"), 400, "1 to 128 characters"),
        (READ.format(npc="n" * 129, world="save-1", timeline="main"), 400, "1 to 128 characters"),
        (
            READ.format(npc="npc-mara", world="save-1", timeline="nowhere"),
            404,
            "never received events",
        ),
        (READ.format(npc="npc-ghost", world="save-1", timeline="main"), 404, "nothing is known"),
    ],
)
def test_bad_reads_get_a_plain_detail(
    tavern_worker: WorkerProcess, path: str, status: int, detail: str
) -> None:
    got_status, body = get(tavern_worker.settings.web_port, path, "key-acme")
    assert got_status == status
    assert detail in body["detail"]


def test_api_keys_are_required_and_see_only_their_tenant(tavern_worker: WorkerProcess) -> None:
    port = tavern_worker.settings.web_port
    path = READ.format(npc="npc-mara", world="save-1", timeline="main")
    assert get(port, path)[0] == 401
    assert get(port, path, "not-a-key")[0] == 401
    assert get(port, path, "key-other")[0] == 404
    assert get(port, path + "&tenant_id=default", "key-other")[0] == 403
    assert get(port, path, "key-acme")[0] == 200


def test_only_the_documented_routes_are_served_and_only_probes_need_no_key(
    tavern_worker: WorkerProcess,
) -> None:
    """Faust's own views were served beside ours, without a key: `/table/state/KEY/` gave any
    state key's value, of every tenant (here `default`'s timeline record, to nobody), `/router/`
    the addresses of the workers and their partitions."""
    port = tavern_worker.settings.web_port
    state_key = quote(timeline_key("default", "save-1", "main"), safe="")
    for path in ["/", "/table/", "/table/state/", f"/table/state/{state_key}/", "/router/"]:
        assert get(port, path) == (404, {"detail": f"no route {unquote(path)!r}"}), path
    for probe in ["/health", "/ready", "/metrics"]:  # for probes and Prometheus: no tenant's
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{probe}", timeout=10) as reply:
            assert reply.status == 200, probe


@pytest.mark.parametrize(
    "header",
    [
        b"Authorization: Bearer key-acme\x01",  # a control character after the key
        b"Authorization : Bearer key-acme",  # a space before the colon
        b"Authorization: Bearer key-acme" + b"=" * 9000,  # over aiohttp's 8 KB a header
    ],
)
def test_a_request_aiohttp_cannot_parse_is_refused_without_its_key_reaching_the_log(
    tavern_worker: WorkerProcess, header: bytes
) -> None:
    """aiohttp logged each such request at ERROR with a traceback and the line it could not
    parse: a careless client's valid API key, in the worker's log."""
    port = tavern_worker.settings.web_port
    with socket.create_connection(("127.0.0.1", port), timeout=10) as client:
        client.sendall(b"GET /health HTTP/1.1\r\nHost: mill\r\n" + header + b"\r\n\r\n")
        assert client.recv(1024).split(b"\r\n")[0].endswith(b" 400 Bad Request")
    tavern_worker.wait_for_log(b"refused a request it could not parse from 127.0.0.1")
    log = tavern_worker.log_path.read_bytes()
    assert b"key-acme" not in log
    assert b"Traceback" not in log


def test_two_workers_answer_for_each_others_worlds(kafka_bootstrap: str, tmp_path: Path) -> None:
    first = unique_settings(kafka_bootstrap, tmp_path / "one", partitions=4)
    second = first.model_copy(update={"data_dir": tmp_path / "two", "web_port": free_port()})
    worlds = [f"world-{number}" for number in range(8)]
    stream = [
        line.replace(b'"save-1"', f'"{world}"'.encode()) for world in worlds for line in TAVERN
    ]
    expected = replay_lines(stream).state
    workers = [
        WorkerProcess(first, tmp_path / "one.log").start(),
        WorkerProcess(second, tmp_path / "two.log").start(),
    ]
    try:
        send_events(first, stream)
        wait_for_acks(first, len(stream))
        for world in worlds:
            want = orjson.loads(
                runtime_read(expected, "default", world, "main", "npc-mara").to_json()
            )
            for worker in workers:
                path = READ.format(npc="npc-mara", world=world, timeline="main")
                assert get(worker.settings.web_port, path) == (200, want), (
                    world,
                    worker.settings.web_port,
                )
    finally:
        for worker in workers:
            worker.stop()


def test_a_policy_set_from_the_command_line_makes_a_character_persistent(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    settings = unique_settings(kafka_bootstrap, tmp_path / "data")
    document = {"memory": {"persistent": {"characters": ["npc-mara"]}}}
    (tmp_path / "policy.json").write_bytes(orjson.dumps(document))
    env = settings_env(settings)
    subprocess.run(
        [
            sys.executable,
            "-m",
            "streams",
            "policy",
            "set",
            str(tmp_path / "policy.json"),
            "--world",
            "save-1",
        ],
        env=env,
        check=True,
    )
    (tmp_path / "bad.json").write_bytes(b'{"memory": {"spreading": {"enabld": true}}}')
    refused = subprocess.run(
        [
            sys.executable,
            "-m",
            "streams",
            "policy",
            "set",
            str(tmp_path / "bad.json"),
            "--world",
            "save-1",
        ],
        env=env,
        capture_output=True,
        text=True,
    )
    assert refused.returncode != 0 and "memory.spreading.enabld" in refused.stderr
    # a producer that bypasses the command: the worker refuses it and keeps the last valid one
    invalid = b'{"memory": {"persistent": {"characters": "npc-mara"}}}'
    key = policy_key("default", "save-1")
    asyncio.run(send_one(settings, settings.topics.policies, key, invalid))

    worker = WorkerProcess(settings, tmp_path / "worker.log").start()
    try:
        refusal = 'refused the policy under ["default","save-1"]: invalid policy: memory.persistent'
        assert refusal in worker.log_path.read_text()
        send_events(settings, TAVERN)
        wait_for_acks(settings, len(TAVERN))
        status, body = get(
            settings.web_port, READ.format(npc="npc-mara", world="save-1", timeline="reload")
        )
        assert status == 200
        policy = resolve(None, document)
        expected = replay_lines(TAVERN, Projector(policies=lambda tenant, world: policy)).state
        assert body == orjson.loads(
            runtime_read(expected, "default", "save-1", "reload", "npc-mara").to_json()
        )
        assert any(m["persistent"] and "defeated" in m["content"] for m in body["recollections"])
    finally:
        worker.stop()


def test_the_npc_command_prints_the_read_as_tables(tavern_worker: WorkerProcess) -> None:
    url = f"http://127.0.0.1:{tavern_worker.settings.web_port}"
    shown = rumourmill(
        "npc", "npc-mara", "--world", "save-1", "--url", url, "--api-key", "key-acme"
    )
    assert shown.startswith("npc-mara on save-1/main: at loc-tavern")
    assert "I will find your son" in shown
    assert re.search(r"^player-1 +-0\.05 +2 +3$", shown, re.MULTILINE)


def test_the_chronicle_command_prints_the_records_of_a_worker(
    tavern_worker: WorkerProcess,
) -> None:
    url = f"http://127.0.0.1:{tavern_worker.settings.web_port}"
    shown = rumourmill(
        "chronicle", "npc-mara", "--world", "save-1", "--url", url, "--api-key", "key-acme"
    )
    assert shown.startswith("npc-mara on save-1/main: 2 records told in")
    assert "day 1, 19:41: I will find your son. Where was he last seen?" in shown
    with pytest.raises(subprocess.CalledProcessError) as refused:
        rumourmill(
            "chronicle", "npc-ghost", "--world", "save-1", "--url", url, "--api-key", "key-acme"
        )
    assert "404: 'npc-ghost' holds no memory on timeline 'main'" in refused.value.stderr


def test_provenance_names_where_news_started_and_who_passed_it(
    tavern_worker: WorkerProcess,
) -> None:
    port = tavern_worker.settings.web_port
    _, tomas = get(port, READ.format(npc="npc-tomas", world="save-1", timeline="main"), "key-acme")
    belief_id = tomas["beliefs"][0]["belief_id"]
    path = (
        f"/v2/memory/runtime/npcs/npc-tomas/beliefs/{belief_id}/provenance"
        "?world_instance_id=save-1&timeline_id=main"
    )
    status, found = get(port, path, "key-acme")
    assert status == 200
    assert found["origin"]["key"] == "loreweaver.conversation.told"
    assert [(link["entity_id"], link.get("told_by")) for link in found["chain"]] == [
        ("npc-mara", None),
        ("npc-tomas", "npc-mara"),
    ]
    missing = path.replace(belief_id, "0" * 32)
    assert get(port, missing, "key-acme")[0] == 404
    url = f"http://127.0.0.1:{port}"
    shown = rumourmill(
        "provenance",
        "npc-tomas",
        belief_id,
        "--world",
        "save-1",
        "--url",
        url,
        "--api-key",
        "key-acme",
    )
    assert "origin: main#5 loreweaver.conversation.told by npc-mara" in shown
    assert "-> npc-tomas, told by npc-mara (hops 1, confidence 0.8)" in shown
