"""The command line's mistakes and unreachable places end a command with one line naming what
the person typed, never a traceback (no broker: nothing listens on 127.0.0.1:1)."""

from __future__ import annotations

import asyncio
import errno
import os
import shutil
import signal
import socket
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

import click
import orjson
import pytest
from aiokafka.errors import KafkaConnectionError
from click.testing import CliRunner, Result

from schemas.export import json_schemas
from streams.cli import _check_web_address, main
from streams.rebuild import RebuildFailed, check_fresh
from streams.settings import Settings, unused_settings
from streams.state import disk_trouble, unwritable_because
from tests.tavern import TAVERN_FILE as TAVERN

NOWHERE = "127.0.0.1:1"
UNREACHABLE = f"Error: cannot reach Kafka at {NOWHERE}: KafkaConnectionError: Unable to bootstrap"


def refused(*command: str) -> str:
    """What `rumourmill COMMAND` prints when it stops with a message (exit code 1)."""
    result: Result = CliRunner().invoke(main, list(command))
    assert result.exit_code == 1, result.output
    assert isinstance(result.exception, SystemExit), result.exception
    return result.output


@pytest.mark.parametrize(
    "command",
    [
        ["publish", str(TAVERN)],
        ["policy", "set", "{policy}"],
        ["world", "delete", "w1"],
        ["tenant", "delete", "t1"],
    ],
    ids=["publish", "policy set", "world delete", "tenant delete"],
)
def test_a_publishing_command_says_kafka_cannot_be_reached_and_nothing_was_published(
    command: list[str], tmp_path: Path
) -> None:
    """In one line: in a process of its own, as Python prints a library's log records when
    nothing set up a log (aiokafka logs each broker it cannot connect to)."""
    policy = tmp_path / "policy.json"
    policy.write_text("{}")
    result = subprocess.run(
        [sys.executable, "-m", "streams", *(part.format(policy=policy) for part in command)],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "RUMOURMILL_BROKER": NOWHERE},
    )
    assert result.returncode == 1
    [line] = [line for line in result.stderr.splitlines() if line != "validating"]  # publish's
    assert line.startswith(UNREACHABLE) and line.endswith("; nothing published")


def stopped_worker(
    tmp_path: Path, command: Sequence[str] = ("worker",), **variables: str
) -> subprocess.CompletedProcess[str]:
    """A worker (or another `command`) started on no broker with a data dir of the test's and
    `variables` set, in a process of its own (it sets up the process's logging), once it
    stopped: it must have stopped, exit code 1."""
    result = subprocess.run(
        [sys.executable, "-m", "streams", *command],
        capture_output=True,
        text=True,
        timeout=60,
        env={
            **os.environ,
            "RUMOURMILL_BROKER": NOWHERE,
            "RUMOURMILL_DATA_DIR": str(tmp_path / "data"),
            **variables,
        },
    )
    assert result.returncode == 1
    return result


def test_a_worker_says_kafka_cannot_be_reached_in_one_line(tmp_path: Path) -> None:
    result = stopped_worker(tmp_path)
    assert "Traceback" not in result.stderr
    assert result.stderr.splitlines()[-1].startswith(UNREACHABLE)


@pytest.mark.parametrize(
    ("problem", "variable"),
    [
        ("kafka", "RUMOURMILL_LOG_FORMAT"),
        ("setting", "RUMOURMILL_LOG_FORMAT"),
        ("setting", "rumourmill_log_format"),
    ],
)
def test_a_worker_logging_json_says_why_it_did_not_start_in_json(
    problem: str, variable: str, tmp_path: Path
) -> None:
    """With RUMOURMILL_LOG_FORMAT=json every line of the worker's log is one JSON object, the
    warning of a misspelt variable and the line saying why it stopped too (a log pipeline
    that parses JSON lost them, the one line an operator needs). Settings are read whatever
    the case of their names: written in lower case, the line saying why was plain text."""
    variables = {variable: "json", "RUMOURMILL_BLOCK_CACHE": "32"}
    if problem == "setting":
        variables["RUMOURMILL_PARTITIONS"] = "none"
    result = stopped_worker(tmp_path, **variables)
    lines = [orjson.loads(line) for line in result.stderr.splitlines()]
    assert [line["level"] for line in lines][-1] == "critical"
    warning = next(line for line in lines if line["level"] == "warning")
    assert warning["message"].startswith("RUMOURMILL_BLOCK_CACHE is not a setting")
    if problem == "kafka":
        assert lines[-1]["message"].startswith(UNREACHABLE.removeprefix("Error: "))
    else:
        assert lines[-1]["message"].startswith("bad setting:\nRUMOURMILL_PARTITIONS")


@pytest.mark.parametrize(
    "url", ["http://127.0.0.1:18778/rumourmill", "https://127.0.0.1:18778", "http://127.0.0.1"]
)
def test_a_worker_refuses_a_url_of_its_own_the_others_would_not_use(
    url: str, tmp_path: Path
) -> None:
    """The other workers forward reads to a worker's host and port over plain HTTP, at the path
    asked: a path or https in its RUMOURMILL_WEB_URL would be taken, and never used; without a
    port they forwarded to port 80, and every read they forwarded failed (503)."""
    result = stopped_worker(tmp_path, RUMOURMILL_WEB_URL=url)
    assert result.stderr.splitlines() == [
        "Error: bad setting:",
        f"RUMOURMILL_WEB_URL={url!r}: a worker's is http://HOST:PORT, with its port and without"
        " a path: the other workers forward reads to its host and port over plain HTTP",
    ]


@pytest.mark.parametrize("host", ["no-such-host.invalid", "192.0.2.99"])
def test_a_worker_on_a_web_host_it_cannot_listen_on_says_so_before_kafka(
    host: str, tmp_path: Path
) -> None:
    """A name no resolver knows, an address of another machine (TEST-NET-1): it failed binding
    its web server after making Kafka's topics, a traceback naming no setting."""
    result = stopped_worker(tmp_path, RUMOURMILL_WEB_HOST=host)
    [said] = result.stderr.splitlines()
    assert said.startswith(f"Error: RUMOURMILL_WEB_HOST={host!r}: no address to listen on")


@pytest.mark.parametrize("command", [["worker"], ["dev"]])
@pytest.mark.parametrize("typed", ["RUMOURMILL_WEB_PORT", "--web-port"])
def test_a_web_port_something_else_listens_on_stops_the_worker_and_make_run_at_once(
    command: list[str], typed: str, tmp_path: Path
) -> None:
    """Found by a reviewer: `make run` beside another worker (or docker compose) said its own
    worker was ready when the other answered /ready, published to a broker nothing read and
    printed no ack, serving nothing; a worker failed the bind after Kafka's topics. The port
    is named as it was given (a `--web-port` typed was named as the variable)."""
    with socket.create_server(("127.0.0.1", 0)) as taken:
        port = taken.getsockname()[1]
        if typed == "--web-port":
            result = stopped_worker(tmp_path, [*command, typed, str(port)])
        else:
            result = stopped_worker(tmp_path, command, RUMOURMILL_WEB_PORT=str(port))
    said = result.stderr.splitlines()[-1]  # `dev` checked its story first ("validating")
    assert said.startswith(f"Error: {typed}={port}: in use on 127.0.0.1 (another")
    assert result.stdout == ""  # no broker started, nothing published


def test_a_world_deletion_for_no_world_is_refused() -> None:
    output = refused("world", "delete", "", "--broker", NOWHERE)
    assert output.startswith("Error: bad deletion: world_instance_id")
    assert output.endswith("; nothing published\n")
    assert "cannot reach Kafka" not in output  # refused before Kafka is asked


def test_a_world_called_star_can_be_deleted() -> None:
    """`*` is an id like any other for a world (a tenant's deletion gives it for the world it
    does not name, its key tells it apart): the deletion of that world goes on to Kafka."""
    output = refused("world", "delete", "*", "--tenant", "acme", "--broker", NOWHERE)
    assert "cannot reach Kafka" in output


def test_a_rebuild_of_the_data_dir_dot_goes_on_to_its_checks(tmp_path: Path) -> None:
    """`.` has no name to name the fresh data dir after: the directory it stands for has."""
    with CliRunner().isolated_filesystem(temp_dir=tmp_path):
        output = refused("rebuild", "--data-dir", ".", "--url", f"http://{NOWHERE}")
    assert output.startswith(f"Error: rebuild: the live worker at http://{NOWHERE}: cannot reach")


def test_a_rebuild_beside_the_root_directory_asks_for_a_data_dir() -> None:
    output = refused("rebuild", "--data-dir", "/", "--url", f"http://{NOWHERE}")
    assert output == (
        "Error: rebuild: the data dir / has no directory beside it; name one with --into-data-dir\n"
    )


def test_schemas_exported_into_a_path_under_a_file_name_it(tmp_path: Path) -> None:
    (tmp_path / "a-file").write_text("")
    out = tmp_path / "a-file" / "sub"
    assert refused("schemas", "export", "--out", str(out)) == (
        f"Error: cannot write {out}: Not a directory\n"
    )


def test_schemas_are_exported_under_the_directory_it_runs_in(tmp_path: Path) -> None:
    """The default was the package's own directory, in an install wherever the command ran."""
    with CliRunner().isolated_filesystem(temp_dir=tmp_path) as here:
        result = CliRunner().invoke(main, ["schemas", "export"])
        written = sorted(path.name for path in (Path(here) / "schemas" / "json").iterdir())
    assert result.exit_code == 0, result.output
    assert "event.schema.json" in written


def test_schemas_exported_to_a_reader_that_goes_are_all_written(tmp_path: Path) -> None:
    """Found by a reviewer: a reader of the names that went (`| head -1`) stopped the export
    after its first file, said to be a directory that could not be written."""
    reading, writing = os.pipe()
    os.close(reading)  # the reader has gone before the first name is printed
    result = subprocess.run(
        [sys.executable, "-m", "streams", "schemas", "export", "--out", str(tmp_path)],
        stdout=writing,
        stderr=subprocess.PIPE,
        text=True,
        timeout=60,
    )
    os.close(writing)
    assert "cannot write" not in result.stderr
    assert len(list(tmp_path.iterdir())) == len(json_schemas())


@pytest.mark.parametrize(
    ("command", "flag"),
    [
        (["digest", "--world", "w", "--url", "127.0.0.1:18778"], "--url='127.0.0.1:18778'"),
        (["npc", "npc-mara", "--world", "w", "--url", "127.0.0.1:18778"], "--url="),
        (["rebuild", "--url", "127.0.0.1:18778"], "--url="),
        (["rebuild", "--into", "bad id"], "--into='bad id'"),
        (["rebuild", "--into", "bad/x"], "--into='bad/x'"),  # a traceback naming its data dir
        (["rebuild", "--into", ""], "--into=''"),  # the default app id, silently
        (["rebuild", "--into-data-dir", "x", "--partitions", "0"], "--partitions='0'"),
    ],
)
def test_a_bad_flag_is_named_as_the_person_typed_it(command: list[str], flag: str) -> None:
    output = refused(*command)
    assert output.startswith(f"Error: bad setting:\n{flag}")
    assert "--web-url" not in output and "--app-id" not in output


def test_a_rebuilds_app_id_made_too_long_from_the_live_one_names_where_it_came_from(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """`--into` was blamed for an app id the operator never typed: the live one, 180 characters
    long, with the 23 of `-rebuild-TIME` added."""
    monkeypatch.setenv("RUMOURMILL_APP_ID", "a" * 180)
    output = refused("rebuild", "--workers-stopped")
    assert output.startswith(
        "Error: bad setting:\n--into (not given: RUMOURMILL_APP_ID-rebuild-TIME)='aaa"
    )


@pytest.mark.parametrize("timeout", ["nan", "inf", "1e400"])
def test_a_health_check_timeout_that_is_no_finite_number_is_refused_as_usage(timeout: str) -> None:
    """`nan` and `inf` passed the range and ended in a traceback (a health check still failed)."""
    result = CliRunner().invoke(main, ["ready", "--timeout", timeout])
    assert result.exit_code == 2
    assert "Invalid value for '--timeout'" in result.output


def test_a_replay_policy_that_is_not_json_is_named_by_its_path(tmp_path: Path) -> None:
    policy = tmp_path / "bad.json"
    policy.write_text("{not json")
    output = refused("replay", str(TAVERN), "--policy", str(policy))
    assert output.startswith(f"Error: {policy}: not valid JSON: ")


def test_a_policy_for_an_empty_world_name_is_refused_not_taken_for_every_world(
    tmp_path: Path,
) -> None:
    policy = tmp_path / "policy.json"
    policy.write_text("{}")
    output = refused("policy", "set", str(policy), "--world", "", "--broker", NOWHERE)
    assert output == (
        "Error: --world names no world (omit it for the tenant default); nothing published\n"
    )


@pytest.mark.parametrize(
    ("flag", "value", "problem"),
    [
        ("--tenant", "", "String should have at least 1 character"),
        ("--world", "w" * 129, "String should have at most 128 characters"),
        ("--world", ".", "'.' and '..' are no ids: a URL cannot name them"),
        ("--tenant", "..", "'.' and '..' are no ids: a URL cannot name them"),
    ],
)
def test_a_policy_for_an_id_no_event_can_have_is_refused_before_kafka(
    tmp_path: Path, flag: str, value: str, problem: str
) -> None:
    policy = tmp_path / "policy.json"
    policy.write_text("{}")
    output = refused("policy", "set", str(policy), flag, value, "--broker", NOWHERE)
    assert output == (
        f"Error: {flag} names no id an event can carry ({problem}): no event could be governed"
        " by it; nothing published\n"
    )


def test_a_policy_keeping_the_memories_of_a_character_no_event_can_name_is_refused(
    tmp_path: Path,
) -> None:
    """A worker takes such a document (published before the check, it must still read), and
    the setting keeps nobody's memories: `policy set` refuses it, before Kafka."""
    policy = tmp_path / "policy.json"
    policy.write_text('{"memory": {"persistent": {"characters": ["npc-mara", ".."]}}}')
    output = refused("policy", "set", str(policy), "--world", "w", "--broker", NOWHERE)
    assert output == (
        f"Error: {policy}: memory.persistent.characters.1: '.' and '..' are no ids: a URL cannot"
        " name them: no event can name that character, whose memories it would keep; nothing"
        " published\n"
    )


def test_a_broker_that_cannot_be_fetched_or_started_is_said_in_one_line(tmp_path: Path) -> None:
    """A cache path that is a file: neither can make the directory the jars go in."""
    cache = tmp_path / "cache"
    cache.write_text("")
    env = {"RUMOURMILL_KAFKA_CACHE": str(cache)}
    for command, start in (
        (["broker", "fetch"], "Error: cannot fetch Apache Kafka "),
        (["broker", "start", "kafka"], "Error: cannot start a kafka broker: "),
        (["broker", "start"], "Error: cannot start a kafka broker: "),  # the default
    ):
        result = CliRunner().invoke(main, command, env=env)
        assert (result.exit_code, isinstance(result.exception, SystemExit)) == (1, True)
        assert result.output.startswith(start), result.output
        assert "Traceback" not in result.output


@pytest.mark.parametrize(
    ("command", "named"),
    [
        (["npc", "npc-mara", "--world", "w\udcf6rld"], "'--world': 'w\\udcf6rld'"),
        (["npc", "n\udcff", "--world", "w"], "'NPC_ID': 'n\\udcff'"),
        (["reply-check", "n", "r\udce9", "--world", "w", "--after-seq", "1"], "'REPLY': "),
        (["rebuild", "--workers-stopped", "--world", "w\udcf6rld"], "'--world': "),
        (["npc", "n", "--world", "w", "--api-key", "sk-kept\udcff"], "'--api-key': it is"),
    ],
)
def test_an_id_that_is_no_utf8_text_is_refused_naming_it(command: list[str], named: str) -> None:
    """A terminal in Latin-1 passes `w\xf6rld` as bytes UTF-8 has no use for, which Python
    keeps as lone surrogates: the read commands and `rebuild --world` failed sending them, in a
    traceback."""
    env = {"RUMOURMILL_WEB_URL": "http://127.0.0.1:9", "RUMOURMILL_BROKER": NOWHERE}
    result = CliRunner().invoke(main, command, env=env)
    assert result.exit_code == 2, result.output
    assert f"Error: Invalid value for {named}" in result.output
    assert "is not UTF-8 text" in result.output
    assert "sk-kept" not in result.output  # a key is never shown
    assert "Traceback" not in result.output


def test_a_worker_refused_at_start_leaves_no_data_dir_it_made(tmp_path: Path) -> None:
    """Kafka out of reach: the directories made for its state stayed behind (a rebuild
    refused so took away what it made); one that holds something now is left."""
    result = stopped_worker(tmp_path, RUMOURMILL_DATA_DIR=str(tmp_path / "made" / "for" / "it"))
    assert result.stderr.splitlines()[-1].startswith(UNREACHABLE)
    assert list(tmp_path.iterdir()) == []
    kept = tmp_path / "kept"
    (kept / "other").mkdir(parents=True)
    stopped_worker(tmp_path, RUMOURMILL_DATA_DIR=str(kept / "new"))
    assert [path.name for path in kept.iterdir()] == ["other"]


def test_a_file_of_no_event_is_refused_before_any_topic_is_made(tmp_path: Path) -> None:
    """It made the topics (a rebuild then got past its check for them) and said it published
    0 events; the broker here is nowhere, so reaching for it would say so instead."""
    empty = tmp_path / "empty.ndjson"
    empty.write_text("\n\n")
    output = refused("publish", str(empty), "--broker", NOWHERE)
    assert output.splitlines()[-1] == f"Error: no events in {empty}; nothing published"


def test_a_rebuild_of_one_world_with_the_workers_stopped_warns_it_sends_nothing_owed() -> None:
    result = CliRunner().invoke(
        main, ["rebuild", "--workers-stopped", "--world", "w", "--broker", NOWHERE]
    )
    assert result.exit_code == 1
    assert result.stderr.startswith(
        "warning: --workers-stopped with --world: what the stopped workers owed (acks, dead"
        " letters, change records) is not sent"
    )


@pytest.mark.parametrize(
    "command",
    [
        ["publish", "/dev/zero"],
        ["replay", "/dev/zero"],
        ["replay", str(TAVERN), "--judgements", "/dev/zero"],
        ["policy", "set", "/dev/zero"],
    ],
)
def test_a_device_is_refused_as_no_file_to_read(command: list[str]) -> None:
    """`/dev/zero` was read until the process ran out of memory, in a MemoryError traceback."""
    result = CliRunner().invoke(main, command)
    assert result.exit_code == 2
    assert "'/dev/zero' is not a file nor a pipe" in result.output


def test_a_java_that_is_no_program_is_named_before_anything_is_fetched(tmp_path: Path) -> None:
    env = {"RUMOURMILL_JAVA": str(tmp_path / "java"), "RUMOURMILL_KAFKA_CACHE": str(tmp_path)}
    result = CliRunner().invoke(main, ["broker", "start"], env=env)
    assert result.exit_code == 1
    assert result.output == (
        f"Error: cannot start a kafka broker: RUMOURMILL_JAVA='{tmp_path}/java' is no program"
        " to run\n"
    )
    assert list(tmp_path.iterdir()) == [], "nothing fetched"


def test_a_variable_that_names_no_setting_is_warned_of_with_the_one_it_may_mean() -> None:
    """Misspelt, a setting stays at its default: the command says so, and goes on."""
    result = CliRunner().invoke(
        main, ["replay", str(TAVERN)], env={"RUMOURMILL_PARTITION": "8", "RUMOURMILL_SOAK": "1"}
    )
    assert result.exit_code == 0
    assert result.stderr == (
        "warning: RUMOURMILL_PARTITION is not a setting (did you mean RUMOURMILL_PARTITIONS?);"
        " ignored\n"
    )
    assert "processed: 6" in result.stdout


@pytest.mark.parametrize("flag", ["--partitions", "--web-port"])
def test_a_worker_logging_json_refuses_a_flag_that_is_no_number_in_json(
    flag: str, tmp_path: Path
) -> None:
    """Typed wrong, a number flag was refused by click in three lines of usage text: the
    one line saying why the worker did not start was no JSON, as its variable's is."""
    result = stopped_worker(tmp_path, ("worker", flag, "abc"), RUMOURMILL_LOG_FORMAT="json")
    [line] = [orjson.loads(line) for line in result.stderr.splitlines()]
    assert line["level"] == "critical"
    assert line["message"].startswith(f"bad setting:\n{flag}='abc': Input should be a valid")


def test_a_worker_warns_of_model_and_reranker_settings_its_empty_urls_leave_unused(
    tmp_path: Path,
) -> None:
    """An empty URL switches the model (or reranker) off, its other settings kept: a key or a
    timeout set without it did nothing, and nothing said so."""
    result = stopped_worker(
        tmp_path,
        RUMOURMILL_MODEL_KEY="sk-kept",
        RUMOURMILL_MODEL_CONCURRENCY="2",
        RUMOURMILL_RERANK_TIMEOUT_SECONDS="1",
        RUMOURMILL_MODEL_URL="",
    )
    warnings = [line for line in result.stderr.splitlines() if line.startswith("warning: ")]
    assert warnings == [
        "warning: RUMOURMILL_MODEL_CONCURRENCY, RUMOURMILL_MODEL_KEY set, RUMOURMILL_MODEL_URL"
        " empty (the rules make every judgement): not used",
        "warning: RUMOURMILL_RERANK_TIMEOUT_SECONDS set, RUMOURMILL_RERANK_URL empty (no"
        " reranker): not used",
    ]
    assert "sk-kept" not in result.stderr


def test_settings_at_their_defaults_are_not_warned_of_unused(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A worker `make run` starts is given every setting (`Settings.environment`): each model
    and reranker setting at its default was warned of, with no model asked for."""
    for variable, value in Settings.from_env().environment().items():
        monkeypatch.setenv(variable, value)
    assert unused_settings(Settings.from_env()) == []


def test_a_misspelt_variable_is_warned_of_also_when_a_setting_it_meant_is_refused() -> None:
    """Found in review: the warning came only once every setting was good, so a setting left
    empty by a misspelt variable was refused with no word of the variable."""
    result = CliRunner().invoke(
        main,
        ["replay", str(TAVERN)],
        env={
            "RUMOURMILL_KAFKA_SECURITY_PROTOCOL": "SASL_SSL",
            "RUMOURMILL_KAFKA_SASL_MECHANISM": "PLAIN",
            "RUMOURMILL_KAFKA_SASL_USERNAM": "game",
            "RUMOURMILL_KAFKA_SASL_PASSWORD": "secret",
        },
    )
    assert result.exit_code == 1
    warning, error = result.stderr.split("\n", 1)
    assert warning == (
        "warning: RUMOURMILL_KAFKA_SASL_USERNAM is not a setting (did you mean"
        " RUMOURMILL_KAFKA_SASL_USERNAME?); ignored"
    )
    assert error.startswith("Error: bad setting:\nRUMOURMILL_KAFKA_SASL_USERNAME=''")


def test_a_rebuild_into_a_data_dir_that_is_a_file_is_refused_before_kafka(tmp_path: Path) -> None:
    taken = tmp_path / "data-rebuilt"
    taken.write_text("")
    live = Settings(broker=(NOWHERE,), data_dir=tmp_path / "data")
    target = live.model_copy(update={"app_id": "rebuilt", "data_dir": taken})
    with pytest.raises(RebuildFailed, match=f"^the data dir {taken} is a file; name a fresh"):
        asyncio.run(check_fresh(target, live))


def test_a_rebuild_refused_leaves_no_data_dir_behind(tmp_path: Path) -> None:
    """The data dir is made to see that it can hold the state: a rebuild refused after (here,
    Kafka unreachable) left an empty one, a new one beside the live dir at each try."""
    live = Settings(broker=(NOWHERE,), data_dir=tmp_path / "data")
    target = live.model_copy(update={"app_id": "rebuilt", "data_dir": tmp_path / "new" / "dir"})
    with pytest.raises(KafkaConnectionError):
        asyncio.run(check_fresh(target, live))
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    ("data_dir", "why"), [("{file}/state", "Not a directory"), ("/proc/no", "No such file")]
)
def test_a_rebuild_into_a_data_dir_that_cannot_be_made_is_refused_before_kafka(
    tmp_path: Path, data_dir: str, why: str
) -> None:
    """RocksDB said it, in a traceback, once the fresh app id's changelog topic was made."""
    file = tmp_path / "taken"
    file.write_text("")
    unmade = Path(data_dir.format(file=file))
    live = Settings(broker=(NOWHERE,), data_dir=tmp_path / "data")
    target = live.model_copy(update={"app_id": "rebuilt", "data_dir": unmade})
    with pytest.raises(RebuildFailed, match=f"^the data dir {unmade} cannot hold the state: {why}"):
        asyncio.run(check_fresh(target, live))


@pytest.mark.parametrize(
    ("data_dir", "why"),
    [("{file}", "it is a file"), ("{file}/state", "Not a directory"), ("/proc/no", "No such file")],
)
@pytest.mark.parametrize("typed", ["RUMOURMILL_DATA_DIR", "--data-dir"])
def test_a_worker_whose_data_dir_cannot_hold_state_says_so_in_one_line_before_kafka(
    tmp_path: Path, data_dir: str, why: str, typed: str
) -> None:
    """A data dir that is a file, or on a volume not mounted or read-only, ended the worker in a
    traceback (not JSON with `RUMOURMILL_LOG_FORMAT=json`), after it had made Kafka's topics.
    It is named as it was given (a reviewer's find: `--data-dir` typed was named the variable)."""
    file = tmp_path / "taken"
    file.write_text("")
    named = data_dir.format(file=file)
    if typed == "--data-dir":
        result = stopped_worker(tmp_path, ["worker", typed, named])
    else:
        result = stopped_worker(tmp_path, RUMOURMILL_DATA_DIR=named)
    [line] = result.stderr.splitlines()
    assert line.startswith(f"Error: {typed}={named!r} cannot hold the state: {why}")


def test_a_rebuild_interrupted_before_it_wrote_anything_says_so(tmp_path: Path) -> None:
    """Ctrl-C while the live worker was still being asked (it answers nothing here) told the
    operator to delete the `--into` app id's changelog topic, which nothing had checked was
    not the live one's; it said so with a traceback."""
    silent = socket.create_server(("127.0.0.1", 0))  # takes connections, answers nothing
    url = f"http://127.0.0.1:{silent.getsockname()[1]}"
    try:
        rebuild = subprocess.Popen(
            [sys.executable, "-m", "streams", "rebuild", "--into", "rumourmill", "--url", url],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, "RUMOURMILL_DATA_DIR": str(tmp_path / "data")},
        )
        silent.settimeout(60)
        asked, _ = silent.accept()  # the rebuild is asking the live worker: interrupt it
        rebuild.send_signal(signal.SIGINT)
        _, err = rebuild.communicate(timeout=60)
        asked.close()
    finally:
        silent.close()
    assert rebuild.returncode == 130
    assert err.splitlines()[-1] == "rebuild: interrupted; nothing was written"
    assert "Traceback" not in err


def test_a_worker_on_ipv6_beside_a_server_on_the_ports_ipv4_side_is_not_refused() -> None:
    """Found by a reviewer: the port check bound `::` dual-stack, and refused a port aiohttp
    binds on IPv6 alone (as asyncio does) beside a server listening on its IPv4 side."""
    try:
        socket.create_server(("::1", 0), family=socket.AF_INET6).close()
    except OSError:
        pytest.skip("no IPv6 on this machine")
    with socket.create_server(("0.0.0.0", 0)) as ipv4:
        port = ipv4.getsockname()[1]
        named = "RUMOURMILL_WEB_PORT"
        _check_web_address(Settings(web_host="::", web_port=port), named)  # not refused
        with pytest.raises(click.ClickException, match=f"{named}={port}: in use"):
            _check_web_address(Settings(web_host="0.0.0.0", web_port=port), named)


@pytest.mark.parametrize(
    ("command", "flag"),
    [
        (["worker", "--data-dir", " "], "--data-dir"),
        (["rebuild", "--data-dir", ""], "--data-dir"),
        (["rebuild", "--into-data-dir", ""], "--into-data-dir"),
        (["schemas", "export", "--out", ""], "--out"),
        (["rumour-map", "b1", "--world", "w", "--out", ""], "--out"),
    ],
)
def test_a_blank_path_to_write_to_is_refused(command: list[str], flag: str) -> None:
    """Found by a reviewer: click took `--data-dir ''` for the current directory (a
    `--data-dir "$DATA_DIR"` with the variable unset): the worker kept its state wherever it
    was started, where `RUMOURMILL_DATA_DIR=''` is refused."""
    result = CliRunner().invoke(main, command)
    assert result.exit_code == 2, result.output
    assert f"Invalid value for '{flag}': must name a path, not be blank" in result.output


def test_a_data_dir_on_a_disk_too_full_is_refused_saying_how_much_is_free(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A worker started on a full disk stopped with RocksDB's "No space left on device (os
    error 28)" among Faust's tracebacks, naming no directory."""
    full = shutil.disk_usage(tmp_path)._replace(free=10 * 2**20)
    monkeypatch.setattr(shutil, "disk_usage", lambda path: full)
    assert unwritable_because(tmp_path) == "its disk has 10 MB free, under the 64 MB a worker needs"


@pytest.mark.parametrize(
    "error",
    [
        OSError(errno.ENOSPC, "No space left on device"),
        Exception("IO error: No space left on device: While appending to file: state-0.db/10.sst"),
    ],
)
def test_a_disk_that_fails_the_state_is_named_with_what_to_do(
    tmp_path: Path, error: Exception
) -> None:
    """Full mid-run, a checkpoint's flush failed and Faust logged its crash alone."""
    said = disk_trouble(error, tmp_path)
    assert said is not None
    assert said.startswith(f"the local state in RUMOURMILL_DATA_DIR={str(tmp_path)!r} could not")
    assert "MB free there): free some space there, or start the worker on another" in said
    assert disk_trouble(ValueError("a bug"), tmp_path) is None


@pytest.mark.parametrize(
    ("command", "argument"),
    [
        (["npc", "", "--world", "w1"], "NPC_ID"),
        (["provenance", "npc-mara", "", "--world", "w1"], "BELIEF_ID"),
        (["rumour-map", "", "--world", "w1", "--out", "map.svg"], "BELIEF_ID"),
        (["rumour-map", "belief", "--world", "", "--out", "map.svg"], "--world"),
        (["recall", "", "the ring", "--world", "w1"], "NPC_ID"),
    ],
)
def test_an_empty_id_is_a_usage_error_before_any_read(command: list[str], argument: str) -> None:
    """An unset shell variable: the worker's "404: no route '/v2/memory/runtime/npcs/'" read
    as a broken worker or URL (no worker listens here: the command never asks one)."""
    result = CliRunner().invoke(main, [*command, "--url", "http://127.0.0.1:1"])
    assert result.exit_code == 2, result.output
    assert f"Invalid value for '{argument}': is empty: give the id" in result.output


def test_a_commands_warnings_show_a_model_servers_escapes_not_act_on_them() -> None:
    """Every command but the worker sets no log up: a rebuild asks the model what was never
    recorded, and the model client's warning, quoting the server's answer, reached stderr
    through Python's last resort raw (an OSC sequence set the operator's window title)."""
    script = (
        "import contextlib, logging\n"
        "from streams.cli import main\n"
        "with contextlib.suppress(SystemExit):\n"
        "    main(['digest', '--world', 'w1', '--url', 'http://127.0.0.1:1'])\n"
        "logging.getLogger('rumourmill.model').warning('not a chat completion: \\x1b]0;X\\x07')\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=True
    )
    assert "\x1b" not in done.stderr and "\x07" not in done.stderr
    assert done.stderr.endswith("not a chat completion: \\x1b]0;X\\x07\n"), done.stderr
