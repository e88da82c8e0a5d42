"""`make run` as a new user meets it: `rumourmill dev` on the embedded Tansu broker."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import time
import tomllib
from collections.abc import Callable, Mapping
from pathlib import Path

import orjson
import pytest

import streams as streams_package
from localbroker import free_port
from projections.deletion import deletion_event
from streams.dev import DEMO_STORY
from tests.tavern import TAVERN


@pytest.fixture(autouse=True)
def temporary_files_in(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`rumourmill dev` keeps its worker's log in a temporary directory: the test's own."""
    monkeypatch.setenv("TMPDIR", str(tmp_path))


def dev(
    *flags: str,
    environment: Mapping[str, str] | None = None,
    while_serving: Callable[[str], None] = lambda printed: None,
) -> tuple[str, str, int]:
    """Run `rumourmill dev` until it serves, then Ctrl-C: what it printed until then, what
    after, and its exit code (`environment`: variables set for it; `while_serving` is given
    what it printed before the Ctrl-C)."""
    process = subprocess.Popen(
        [sys.executable, "-m", "streams", "dev", "--web-port", str(free_port()), *flags],
        env={**os.environ, **(environment or {})},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    assert process.stdout is not None
    seen: list[str] = []
    deadline = time.monotonic() + 180
    try:
        while time.monotonic() < deadline:
            line = process.stdout.readline()
            if not line:
                break
            seen.append(line.rstrip())
            if line.startswith("serving until Ctrl-C"):
                while_serving("\n".join(seen))
                break
        process.send_signal(signal.SIGINT)
        rest, _ = process.communicate(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
    return "\n".join(seen), rest, process.returncode


@pytest.mark.integration  # starts the embedded Tansu broker
def test_make_run_publishes_the_demo_story_serves_and_stops_on_ctrl_c() -> None:
    output, rest, code = dev()
    assert "published 6 events" in output, output
    assert "ack main#5: processed (processed_seq 5)" in output, output
    assert "ack reload#3: processed (processed_seq 3)" in output, output
    assert "npc-mara on save-1/main: at loc-tavern; processed 5 of 5 received" in output, output
    assert "Ilse enemy defeated at The Crooked Lantern (enemy: npc-drunk-sailor)" in output, output
    reload = output[output.index("npc-mara on save-1/reload") :]
    assert "defeated" not in reload.split("relations")[0], output
    assert "gift given" in reload, output
    [log] = re.findall(r"stopped \(worker log kept: (\S+)\)", rest)
    # the broker kept the story in memory: the worker's state goes with it, its log stays
    assert [path.name for path in Path(log).parent.iterdir()] == ["worker.log"]
    assert code == 0


@pytest.mark.integration  # starts the embedded Tansu broker
@pytest.mark.parametrize(
    ("removed", "said"),
    [
        ("directory", r"stopped \(\S+ was removed meanwhile, the worker log with it\)"),
        ("log", r"stopped \(its worker log \S+ was removed meanwhile\)"),
    ],
)
def test_make_run_stops_plainly_when_its_temporary_files_were_removed_meanwhile(
    removed: str, said: str
) -> None:
    """A cleaner of /tmp removing the demo's directory while it served: its Ctrl-C ended in a
    traceback (FileNotFoundError) instead of the stop message; one removing the log alone
    left it saying the log was kept."""

    def remove(printed: str) -> None:
        [log] = re.findall(r"^worker log: (.+)$", printed, re.MULTILINE)
        if removed == "directory":
            shutil.rmtree(Path(log).parent)
        else:
            Path(log).unlink()

    _, rest, code = dev(while_serving=remove)
    assert "Traceback" not in rest, rest
    assert re.search(said, rest), rest
    assert code in (0, 1), rest  # 1: the worker, its files gone, stopped before the Ctrl-C


@pytest.mark.integration  # starts the embedded Tansu broker
def test_make_run_talks_plainly_to_its_own_broker_whatever_kafka_security_is_set() -> None:
    """The security settings are the deployment Kafka's (exported in the shell, say): the demo's
    Tansu on 127.0.0.1 takes no login and no TLS, and its worker and publish talk to it plainly.
    The publish runs as printed in a shell that does not search the install's `bin` (a new
    user's after `make run`: the printed `rumourmill` was not found)."""
    installed = Path(sys.executable).parent
    searched = [part for part in os.environ["PATH"].split(os.pathsep) if Path(part) != installed]
    managed = {
        "RUMOURMILL_KAFKA_SECURITY_PROTOCOL": "SASL_SSL",
        "RUMOURMILL_KAFKA_SASL_MECHANISM": "PLAIN",
        "RUMOURMILL_KAFKA_SASL_USERNAME": "API_KEY",
        "RUMOURMILL_KAFKA_SASL_PASSWORD": "API_SECRET",
        "PATH": os.pathsep.join(searched),
    }
    published: list[subprocess.CompletedProcess[str]] = []

    def publish_more(printed: str) -> None:
        """Run the publish it says to run for more events, in the shell that exported them."""
        [said] = [line for line in printed.splitlines() if line.startswith("more events: ")]
        command = said.removeprefix("more events: ").replace(
            "publish FILE.ndjson", f"publish {shlex.quote(str(DEMO_STORY))}"
        )
        environment = {**os.environ, **managed}
        run = subprocess.run(command, shell=True, env=environment, capture_output=True, text=True)
        published.append(run)

    output, _, code = dev(environment=managed, while_serving=publish_more)
    assert "published 6 events" in output, output
    assert "ack main#5: processed (processed_seq 5)" in output, output
    assert code == 0
    [more] = published  # it set the exported login back: the demo's broker takes none
    assert more.returncode == 0 and more.stdout.startswith("published 6 event(s)"), more.stderr


@pytest.mark.integration  # starts the embedded Tansu broker
def test_make_run_reaches_its_worker_where_it_listens_whatever_web_url_is_exported() -> None:
    """A read commands' URL exported (a proxy's) was taken as the demo worker's own, which
    refused it and exited; a worker on `::1` was polled on 127.0.0.1, never seen ready."""
    exported = {
        "RUMOURMILL_WEB_URL": "https://rumourmill.studio.example/api",
        "RUMOURMILL_WEB_HOST": "::1",
    }
    output, _, code = dev(environment=exported)
    assert "npc-mara on save-1/main: at loc-tavern; processed 5 of 5 received" in output, output
    assert re.search(r"try: curl 'http://\[::1\]:\d+/v2/memory/runtime/npcs/npc-mara", output)
    assert code == 0


def test_the_demo_story_is_installed_with_the_package() -> None:
    """An install (a wheel, the image) holds the packages alone: the story beside them was
    missing, and `rumourmill dev` ended in a traceback."""
    streams = Path(streams_package.__file__).parent
    setuptools = tomllib.loads((streams.parent / "pyproject.toml").read_text())["tool"][
        "setuptools"
    ]
    assert "streams.demo" in setuptools["packages"]  # else setuptools warns, thirty lines of it
    assert DEMO_STORY.read_bytes() == TAVERN
    demo = setuptools["package-data"]["streams.demo"]
    assert any(DEMO_STORY in set((streams / "demo").glob(pattern)) for pattern in demo)


@pytest.mark.integration  # starts the embedded Tansu broker
def test_make_run_with_api_keys_reads_its_minds_with_the_tenants_key_and_says_how_to_publish() -> (
    None
):
    """A studio that exported its `RUMOURMILL_API_KEYS`: the demo's reads send a key of the
    story's tenant (they were refused, 401), and it says where more events go (its Tansu is on a
    port of its own, not the default 127.0.0.1:9092 `rumourmill publish` would try)."""
    output, _, code = dev(environment={"RUMOURMILL_API_KEYS": "other-key:acme,studio-key:default"})
    assert "npc-mara on save-1/main: at loc-tavern; processed 5 of 5 received" in output, output
    refused = re.compile(r"^\S+ on \S+/\S+: 401: ", re.MULTILINE)  # a port may hold "401"
    assert not refused.search(output), output
    assert "try: curl -H 'Authorization: Bearer KEY' 'http://127.0.0.1:" in output, output
    assert "studio-key" not in output, "a key is a secret: never printed"
    [hint] = [line for line in output.splitlines() if line.startswith("more events: ")]
    assert re.fullmatch(
        r"more events: RUMOURMILL_BROKER=127\.0\.0\.1:\d+ \S*rumourmill publish FILE\.ndjson", hint
    )
    assert code == 0


@pytest.mark.integration  # starts the embedded Tansu broker
def test_a_story_of_its_own_shows_its_characters_and_a_read_that_fails_is_printed(
    tmp_path: Path,
) -> None:
    """The tavern with Mara as Ann, in a world and tenant of their own, and a locket looked at:
    the locket, acted on, has no mind (404), and the demo serves on."""
    renamed = TAVERN.replace(b'"npc-mara"', b'"npc-ann"').replace(b'"save-1"', b'"save-9"')
    lines = [orjson.loads(line) | {"tenant_id": "acme"} for line in renamed.splitlines()]
    looked = {"actor": "npc-ann", "target": "item-locket", "key": "trade.item-inspected"}
    lines.append(lines[0] | {"seq": 6, "entities": {}, "location": None} | looked)
    misbranched = {"timeline_id": "lost", "seq": 1, "entities": {}}
    lines.append(
        lines[0] | misbranched | {"branch": {"parent_timeline_id": "mian", "after_seq": 1}}
    )
    story = tmp_path / "story.ndjson"
    story.write_bytes(b"\n".join(map(orjson.dumps, lines)))
    output, rest, code = dev("--story", str(story))
    assert "published 8 events" in output, output
    [refused] = [line for line in output.splitlines() if line.startswith("  ack lost#1: ")]
    assert refused.startswith("  ack lost#1: rejected (processed_seq None): "), output
    assert "mian" in refused  # why: it was only in the worker's log
    for timeline, npc in [("main", "npc-ann"), ("main", "npc-tomas"), ("reload", "npc-ann")]:
        assert f"{npc} on save-9/{timeline}: at " in output, output
    assert "item-locket on save-9/main: 404: nothing is known of 'item-locket'" in output, output
    assert "world_instance_id=save-9&timeline_id=main&tenant_id=acme" in output, output
    assert "stopped" in rest
    assert code == 0


def test_a_story_with_invalid_lines_is_refused_as_publish_refuses_it_before_anything_starts(
    tmp_path: Path,
) -> None:
    story = tmp_path / "story.ndjson"
    story.write_bytes(TAVERN.splitlines()[0] + b"\nnot json\n")
    result = subprocess.run(
        [sys.executable, "-m", "streams", "dev", "--story", str(story)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 1
    assert f"{story}:2: not valid JSON" in result.stderr
    assert "1 invalid line(s); nothing sent" in result.stderr
    assert "broker:" not in result.stdout  # no broker started


def test_a_story_ending_in_a_tenants_deletion_prints_the_ack_of_every_partitions_copy(
    tmp_path: Path,
) -> None:
    """The deletion goes to each of the 4 partitions, and each acks its copy: `dev` waits for
    every message it sent, not one ack per line of the story."""
    gone = deletion_event("default", None).model_dump(mode="json", exclude_defaults=True)
    story = tmp_path / "story.ndjson"
    story.write_bytes(TAVERN.rstrip(b"\n") + b"\n" + orjson.dumps(gone) + b"\n")
    output, rest, code = dev("--story", str(story))
    events = len(TAVERN.splitlines())
    assert f"published {events + 1} events" in output, output
    deletion_acks = [line for line in output.splitlines() if line.startswith("  ack *#")]
    assert len(deletion_acks) == 4, output
    assert len([line for line in output.splitlines() if line.startswith("  ack ")]) == events + 4
    assert code == 0, rest


def test_a_story_told_out_of_order_prints_every_events_last_ack(tmp_path: Path) -> None:
    """Seq 3 sent before seq 2 waits for it (`deferred`), and is acked again when 2 fills the
    gap: `dev` stopped at one ack a message, leaving the last unprinted."""
    lines = TAVERN.splitlines()
    lines[1], lines[2] = lines[2], lines[1]
    story = tmp_path / "story.ndjson"
    story.write_bytes(b"\n".join(lines) + b"\n")
    output, _, code = dev("--story", str(story))
    acks = [line for line in output.splitlines() if line.startswith("  ack ")]
    assert any(": deferred " in line for line in acks), output
    assert sum(": processed " in line for line in acks) == len(lines), output
    assert code == 0


def test_a_deployments_stop_drain_is_not_the_demos() -> None:
    """A drain exported for production (60 s) held the demo's Ctrl-C for 30 s, then its worker
    was killed in the middle of it."""
    began = time.monotonic()
    output, rest, code = dev(environment={"RUMOURMILL_STOP_DRAIN_SECONDS": "60"})
    took = time.monotonic() - began
    [log] = re.findall(r"^worker log: (.+)$", output, re.MULTILINE)
    assert "stopped (worker log kept" in rest and code == 0, rest
    assert "RUMOURMILL_STOP_DRAIN_SECONDS" not in Path(log).read_text()
    assert took < 60, took
