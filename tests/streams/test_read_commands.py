"""The read commands against the worker's real web views on loopback (no Kafka): an id of any
characters the event contract allows reaches the worker as itself, and an answer that is not
the worker's JSON stops a command with a clear message, not a traceback."""

from __future__ import annotations

import asyncio
import contextlib
import http.server
import io
import socketserver
import subprocess
import sys
import threading
import urllib.request
from collections.abc import Iterator, Sequence
from http.client import HTTPMessage
from pathlib import Path
from typing import Any, cast
from xml.etree import ElementTree

import faust
import orjson
import pytest
from aiohttp.test_utils import TestServer
from click.testing import CliRunner, Result
from faust.web.drivers.aiohttp import Web as AiohttpWeb

from projections.runtime_read import runtime_read
from projections.state import MemoryState
from streams import show
from streams.cli import main
from streams.rebuild import RebuildFailed, live_digest
from streams.replay import replay_lines
from streams.settings import Settings
from streams.show import table
from streams.web import register_views
from tests.streams.test_web import MemoryReads
from tests.tavern import TAVERN

SAID = "I will find your son. Where was he last seen?"

# (character, world): the tavern's Mara and save-1 renamed to ids a URL path cannot hold as
# they are; the contract allows any 1 to 128 characters
ODD_IDS = [
    pytest.param("npc mara", "save 1", id="space"),
    pytest.param("npc-maïa", "sauvegarde-été", id="non-ascii"),
    pytest.param("npc/mara", "saves/1", id="slash"),
]


def tavern_as(npc_id: str, world_id: str) -> MemoryState:
    """The tavern story with Mara and its world under other ids."""
    renamed = TAVERN.replace(b'"npc-mara"', orjson.dumps(npc_id))
    renamed = renamed.replace(b'"save-1"', orjson.dumps(world_id))
    return replay_lines(renamed.splitlines()).state


def rumourmill(state: MemoryState, *commands: Sequence[str], url_path: str = "") -> list[Result]:
    """Each `rumourmill COMMAND` run against the worker's web views serving `state` on
    loopback (`url_path` appended to the server's URL)."""

    async def run() -> list[Result]:
        app = faust.App("read-commands-test", autodiscover=False)
        register_views(app, MemoryReads(state))
        server = TestServer(cast(AiohttpWeb, app.web).web_app)
        await server.start_server()
        try:
            url = str(server.make_url("")).rstrip("/") + url_path
            return [
                await asyncio.to_thread(CliRunner().invoke, main, [*command, "--url", url])
                for command in commands
            ]
        finally:
            await server.close()

    return asyncio.run(run())


def printed(result: Result) -> str:
    """A command's output, once it has succeeded."""
    assert result.exit_code == 0, result.output
    return result.output


@pytest.mark.parametrize(("npc_id", "world_id"), ODD_IDS)
def test_every_read_command_reaches_the_worker_with_the_id_as_it_is(
    npc_id: str, world_id: str, tmp_path: Path
) -> None:
    state = tavern_as(npc_id, world_id)
    [own_belief] = runtime_read(state, "default", world_id, "main", npc_id).beliefs
    [told_belief] = runtime_read(state, "default", world_id, "main", "npc-tomas").beliefs
    picture = tmp_path / "rumour.svg"
    world = ["--world", world_id]
    npc, chronicle, diff, provenance, recall, decision, reply_check, dialogue, rumour_map = (
        rumourmill(
            state,
            ["npc", npc_id, *world],
            ["chronicle", npc_id, *world],
            ["diff", npc_id, *world, "--timeline", "main", "--other", "reload"],
            ["provenance", npc_id, own_belief.belief_id, *world],
            ["recall", npc_id, "son", *world],
            ["decision", npc_id, *world, "--after-seq", "2"],
            ["reply-check", npc_id, "Ask Bertram. Ilse knows.", *world, "--after-seq", "2"],
            ["dialogue", npc_id, *world, "--player", "player-1"],
            ["rumour-map", told_belief.belief_id, *world, "--out", str(picture)],
        )
    )
    assert printed(npc).startswith(f"{npc_id} on {world_id}/main: at loc-tavern")
    assert own_belief.belief_id in printed(npc)  # what provenance takes (it was not shown)
    assert printed(chronicle).startswith(f"{npc_id} on {world_id}/main: 2 records told in")
    assert printed(diff).startswith(f"{npc_id} in {world_id}: main against reload")
    assert printed(provenance).startswith(f"{npc_id} believes: {SAID}")
    assert SAID in printed(recall)  # only this character heard it
    assert f"- player-1 said: {SAID}" in printed(decision)  # no name declared: the id
    assert printed(reply_check).splitlines()[3:] == ["Bertram  name", "", "action: flag"]
    assert SAID in printed(dialogue)
    printed(rumour_map)
    drawn = list(ElementTree.fromstring(picture.read_bytes()).itertext())
    assert npc_id in drawn  # the teller, on the picture of the world named in the path
    assert f"{world_id} · timeline main · belief {told_belief.belief_id}" in drawn


@pytest.mark.parametrize(
    ("command", "parameter"),
    [
        (["npc", "npc-mara", "--tenant", ""], "tenant_id"),
        (["digest", "--tenant", ""], "tenant_id"),
        (["decision", "npc-mara", "--after-seq", "2", "--player", ""], "player_id"),
        (["dialogue", "npc-mara", "--player", "player-1", "--location", ""], "location"),
    ],
)
def test_a_flag_given_empty_is_refused_not_left_out(command: list[str], parameter: str) -> None:
    """`--tenant "$TENANT"` with the variable unset read the tenant `default` and printed its
    character, `--player ""` the event's only player's decision, `--location ""` the dialogue
    without a place scope: the worker refuses each empty, as `world delete` does."""
    [result] = rumourmill(tavern_as("npc-mara", "save-1"), [*command, "--world", "save-1"])
    assert result.exit_code == 1
    assert f"Error: 400: '{parameter}' must be 1 to 128 characters" in result.output


def test_the_reads_of_a_past_position_take_it_as_their_views_do(tmp_path: Path) -> None:
    """`--as-of-seq` reaches the worker (its 400 for a position never processed, which a read
    left at now would not give), and the mind printed is as it stood then."""
    state = tavern_as("npc-mara", "save-1")
    belief = runtime_read(state, "default", "save-1", "main", "npc-tomas").beliefs[0].belief_id
    past = ["--world", "save-1", "--as-of-seq", "999"]
    refused = rumourmill(
        state,
        ["npc", "npc-mara", *past],
        ["chronicle", "npc-mara", *past],
        ["diff", "npc-mara", *past, "--timeline", "main", "--other", "reload"],
        ["provenance", "npc-tomas", belief, *past],
        ["recall", "npc-mara", "son", *past],
        ["dialogue", "npc-mara", *past, "--player", "player-1"],
        ["rumour-map", belief, *past, "--out", str(tmp_path / "map.svg")],
    )
    for result in refused:
        assert result.exit_code == 1, result.output
        assert "Error: 400: " in result.output and "as_of_seq" in result.output, result.output
    now, then = rumourmill(
        state,
        ["npc", "npc-mara", "--world", "save-1"],
        ["npc", "npc-mara", "--world", "save-1", "--as-of-seq", "1"],
    )
    assert SAID in printed(now) and SAID not in printed(then)


def test_an_unknown_odd_id_gets_the_workers_404_naming_exactly_that_id() -> None:
    [missing] = rumourmill(
        tavern_as("npc-mara", "save-1"), ["chronicle", "npc ghost/ï", "--world", "save-1"]
    )
    assert missing.exit_code == 1
    assert "Error: 404: 'npc ghost/ï' holds no memory on timeline 'main'" in missing.output


def test_a_url_under_the_workers_gets_its_404_naming_the_path_not_a_traceback() -> None:
    [missing] = rumourmill(
        tavern_as("npc-mara", "save-1"),
        ["npc", "npc-mara", "--world", "save-1"],
        url_path="/not-the-worker",
    )
    assert missing.exit_code == 1
    assert isinstance(missing.exception, SystemExit)
    path = "/not-the-worker/v2/memory/runtime/npcs/npc-mara"
    assert missing.output == f"Error: 404: no route {path!r}\n"


class NotHTTP(socketserver.StreamRequestHandler):
    """Answers whatever it is sent with a line that is not HTTP (an SSH server's greeting)."""

    def handle(self) -> None:
        self.rfile.readline()
        self.wfile.write(b"SSH-2.0-OpenSSH_9.2\r\n")


def test_a_url_where_something_answers_other_than_http_is_said_in_one_line() -> None:
    server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), NotHTTP)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}"
        result = CliRunner().invoke(main, ["npc", "npc-mara", "--world", "save-1", "--url", url])
    finally:
        server.shutdown()
        thread.join()
        server.server_close()
    assert (result.exit_code, isinstance(result.exception, SystemExit)) == (1, True)
    assert result.output.startswith(f"Error: no HTTP answer from {url} (BadStatusLine: ")


PROXY_PAGE = b"<html><head><title>500 Internal Server Error</title></head>\n<body>" + b"x" * 500


class ProxyErrors(http.server.BaseHTTPRequestHandler):
    """Answers each path with the error a proxy in front of a worker might: `/500` an HTML
    page, `/502` nothing at all."""

    def do_GET(self) -> None:
        status = int(self.path.split("/")[1])
        body = PROXY_PAGE if status == 500 else b""
        self.send_response(status)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet: the test reads what the command prints."""


@contextlib.contextmanager
def serving(handler: type[http.server.BaseHTTPRequestHandler]) -> Iterator[str]:
    """A real HTTP server on loopback answering with `handler`; its URL."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        thread.join()
        server.server_close()


@pytest.fixture
def proxy_url() -> Iterator[str]:
    """A real HTTP server on loopback that answers only errors that are not JSON."""
    with serving(ProxyErrors) as url:
        yield url


@pytest.mark.parametrize(
    ("status", "message"),
    [
        (
            500,
            "Error: 500: Internal Server Error (not a worker's JSON answer): "
            "<html><head><title>500 Internal Server Error</title></head> <body>xxx",
        ),
        (502, "Error: 502: Bad Gateway\n"),
    ],
)
def test_an_error_that_is_not_json_stops_the_command_with_its_status_and_start(
    proxy_url: str, status: int, message: str
) -> None:
    result = CliRunner().invoke(
        main, ["npc", "npc-mara", "--world", "save-1", "--url", f"{proxy_url}/{status}"]
    )
    assert result.exit_code == 1
    assert isinstance(result.exception, SystemExit)
    assert "Traceback" not in result.output and "JSONDecodeError" not in result.output
    assert result.output.startswith(message)
    assert len(result.output) < 300  # the start of the page, not all of it


class KeyedWorker(http.server.BaseHTTPRequestHandler):
    """A worker with `RUMOURMILL_API_KEYS` set, to a command that sends no key or a wrong one:
    its 401, as `streams.web` answers it, to all but its health check."""

    def do_GET(self) -> None:
        if self.path.startswith("/health"):
            body = b'{"status":"ok"}'
            self.send_response(200)
        else:
            body = b'{"detail":"a valid bearer API key is required"}'
            self.send_response(401)
            self.send_header("WWW-Authenticate", 'Bearer realm="rumourmill"')
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet: the test reads what the command prints."""


@pytest.mark.parametrize(
    ("key", "hint"),
    [
        ([], "(give a key of its RUMOURMILL_API_KEYS with --api-key or RUMOURMILL_API_KEY)"),
        (
            ["--api-key", "not-a-key"],
            "(the key sent, --api-key or RUMOURMILL_API_KEY, is not one of its "
            "RUMOURMILL_API_KEYS)",
        ),
    ],
)
def test_a_read_refused_for_its_key_says_where_a_command_takes_one(
    key: list[str], hint: str
) -> None:
    with serving(KeyedWorker) as url:
        command = ["npc", "npc-mara", "--world", "save-1", "--url", url, *key]
        result = CliRunner().invoke(main, command)
    assert result.exit_code == 1
    assert result.output == f"Error: 401: a valid bearer API key is required {hint}\n"


class Elsewhere(http.server.BaseHTTPRequestHandler):
    """Another host: notes the `Authorization` of each request it gets."""

    authorizations: list[str | None] = []

    def do_GET(self) -> None:
        self.authorizations.append(self.headers.get("Authorization"))
        self.send_response(200)
        self.end_headers()

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet: the test reads what the command prints."""


def test_a_read_redirected_elsewhere_stops_without_sending_its_key_on() -> None:
    """urllib followed a redirect with every header it was given: a proxy's 302 to another
    host, or another port, took the studio's API key there. (To https on the same host, a
    proxy's move to TLS, it is followed.)"""
    with serving(Elsewhere) as elsewhere:

        class Redirecting(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                self.send_response(302)
                self.send_header("Location", elsewhere + self.path)
                self.end_headers()

            def log_message(self, format: str, *args: Any) -> None:
                """Quiet: the test reads what the command prints."""

        with serving(Redirecting) as url:
            command = ["npc", "npc-mara", "--world", "save-1", "--url", url, "--api-key", "k-1"]
            result = CliRunner().invoke(main, command)
    assert result.exit_code == 1
    assert result.output.startswith(f"Error: 302: {url} redirects to {elsewhere}/v2/")
    assert "which is not followed (elsewhere: the key would go with it)" in result.output
    assert Elsewhere.authorizations == []


@pytest.mark.parametrize(
    ("was", "now", "followed"),
    [
        ("http://proxy.example/v2/x", "https://proxy.example/v2/x", True),  # a move to TLS
        ("http://proxy.example:6066/v2/x", "http://proxy.example:6066/v2/y", True),
        ("http://proxy.example/v2/x", "http://proxy.example:80/v2/y", True),
        ("https://proxy.example/v2/x", "http://proxy.example/v2/x", False),  # the key in clear
        ("https://proxy.example:8443/v2/x", "http://proxy.example:8443/v2/x", False),
        ("http://proxy.example:6066/v2/x", "http://proxy.example:6067/v2/x", False),
        ("http://proxy.example/v2/x", "http://elsewhere.example/v2/x", False),
        ("http://proxy.example/v2/x", "http://proxy.example:99999/v2/x", False),  # a traceback
    ],
)
def test_a_reads_redirect_is_followed_on_its_own_origin_or_to_tls_only(
    was: str, now: str, followed: bool
) -> None:
    """A downgrade from https to http on the same host was followed, the key sent in clear."""
    request = urllib.request.Request(was, headers={"Authorization": "Bearer k-1"})
    redirects = show._SameHostRedirects()
    try:
        redirects.redirect_request(request, io.BytesIO(), 302, "Found", HTTPMessage(), now)
    except show._RedirectRefused:
        assert not followed
    else:
        assert followed


class NoUrlRedirect(http.server.BaseHTTPRequestHandler):
    """A proxy redirecting to a Location that is no URL."""

    def do_GET(self) -> None:
        self.send_response(302)
        self.send_header("Location", "http://[::1/x")
        self.end_headers()

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet: the test reads what the command prints."""


def test_a_redirect_to_no_url_is_refused_in_one_line() -> None:
    """urllib's parse of the Location raised out of the command as a traceback."""
    with serving(NoUrlRedirect) as url:
        result = CliRunner().invoke(main, ["npc", "npc-mara", "--world", "save-1", "--url", url])
    assert result.exit_code == 1 and isinstance(result.exception, SystemExit)
    assert result.output.startswith(f"Error: 302: {url} redirects to http://[::1/x, which is not")


class Looping(http.server.BaseHTTPRequestHandler):
    """A proxy redirecting a read to itself, for ever."""

    def do_GET(self) -> None:
        self.send_response(302)
        self.send_header("Location", self.path)
        self.end_headers()

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet: the test reads what the command prints."""


def test_a_read_redirected_round_in_a_loop_says_so() -> None:
    """Followed on its own host, a loop was told as a redirect elsewhere, not followed."""
    with serving(Looping) as url:
        result = CliRunner().invoke(main, ["npc", "npc-mara", "--world", "save-1", "--url", url])
    assert result.exit_code == 1
    assert result.output == f"Error: 302: {url} redirects in a loop, or too many times\n"


OTHER_ANSWERS = {
    "page": b"<!doctype html><html><title>Welcome to nginx!</title></html>",
    "empty": b"",
    "list": b"[1, 2]",
    "object": b'{"status": "ok"}',
    "svg": b'<svg xmlns="http://www.w3.org/2000/svg"/>',
}
"""What a web server that is not a worker answers with 200, by the first segment of the path."""


class AnotherServer(http.server.BaseHTTPRequestHandler):
    """A web server at a mistyped `--url`: 200 to every GET and POST, never a worker's answer."""

    def do_GET(self) -> None:
        body = OTHER_ANSWERS[self.path.split("/")[1]]
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers["Content-Length"]))
        self.do_GET()

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet: the test reads what the command prints."""


@pytest.fixture
def other_url() -> Iterator[str]:
    """A real HTTP server on loopback that is not a worker."""
    with serving(AnotherServer) as url:
        yield url


READS = [
    ["npc", "npc-mara", "--world", "save-1"],
    ["digest", "--world", "save-1"],
    ["recall", "npc-mara", "son", "--world", "save-1"],
    ["diff", "npc-mara", "--world", "save-1", "--timeline", "main", "--other", "reload"],
    ["provenance", "npc-mara", "b-1", "--world", "save-1"],
    ["decision", "npc-mara", "--world", "save-1", "--after-seq", "2"],
    ["reply-check", "npc-mara", "Ask Bertram.", "--world", "save-1", "--after-seq", "2"],
    ["dialogue", "npc-mara", "--world", "save-1", "--player", "player-1"],
    ["chronicle", "npc-mara", "--world", "save-1"],
]
"""Every command that prints a worker's JSON answer."""


def stopped(command: Sequence[str]) -> str:
    """What a command prints when it stops with a message, not a traceback."""
    result = CliRunner().invoke(main, list(command))
    assert result.exit_code == 1, result.output
    assert isinstance(result.exception, SystemExit), result.exception
    return result.output


@pytest.mark.parametrize(
    ("answer", "shown"),
    [
        ("page", OTHER_ANSWERS["page"].decode()),
        ("empty", "an empty body"),
        ("list", "[1, 2]"),
    ],
)
@pytest.mark.parametrize("command", READS, ids=lambda command: command[0])
def test_a_200_that_is_not_a_json_object_stops_a_read_with_its_start(
    other_url: str, answer: str, shown: str, command: list[str]
) -> None:
    output = stopped([*command, "--url", f"{other_url}/{answer}"])
    assert output == f"Error: 200 from {other_url}/{answer} (not a worker's JSON answer): {shown}\n"


@pytest.mark.parametrize("command", READS, ids=lambda command: command[0])
def test_json_of_another_shape_stops_a_read_naming_the_url_that_answered(
    other_url: str, command: list[str]
) -> None:
    output = stopped([*command, "--url", f"{other_url}/object"])
    assert output.startswith(f"Error: {other_url}/object/v2/")
    assert "answered JSON that is not a worker's answer to this read (KeyError: " in output


def test_a_rebuild_whose_live_worker_answers_another_pages_health_stops_before_kafka(
    other_url: str,
) -> None:
    output = stopped(["rebuild", "--url", f"{other_url}/page", "--broker", "127.0.0.1:1"])
    assert output.startswith(
        f"Error: rebuild: the live worker at {other_url}/page: 200 from {other_url}/page "
        "(not a worker's JSON answer): <!doctype html>"
    )


def test_a_rebuild_that_cannot_reach_kafka_says_so_in_its_one_line_without_the_clients_log(
    other_url: str, tmp_path: Path
) -> None:
    """In a process of its own, as an operator runs it: the rebuild loads WordLlama, whose
    import set up a log of every library's INFO records on stderr (here the Kafka client's
    complaint, before the command's own line; on a rebuild that runs, a line per consumer
    subscription and coordinator found)."""
    result = subprocess.run(
        [
            *(sys.executable, "-m", "streams", "rebuild", "--url", f"{other_url}/object"),
            *("--broker", "127.0.0.1:1", "--data-dir", str(tmp_path / "data")),
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 1
    *before, line = result.stderr.splitlines()
    assert before == []
    assert line.startswith("Error: rebuild: cannot reach Kafka at 127.0.0.1:1: ")


def test_a_rebuild_compared_with_a_live_answer_holding_no_digest_says_so(other_url: str) -> None:
    live = Settings.from_env(web_url=f"{other_url}/object")
    with pytest.raises(RebuildFailed, match="answered no digest of 'save-1'"):
        live_digest(live, "default", "save-1")


def test_a_rumour_map_into_a_missing_directory_is_refused_by_its_path(
    other_url: str, tmp_path: Path
) -> None:
    out = tmp_path / "no" / "such" / "map.svg"
    output = stopped(
        ["rumour-map", "b-1", "--world", "save-1", "--out", str(out), "--url", f"{other_url}/svg"]
    )
    assert output == f"Error: cannot write {out}: No such file or directory\n"


@pytest.mark.parametrize(
    ("answer", "shown"), [("page", "<!doctype html>"), ("empty", "an empty body")]
)
def test_a_rumour_map_from_a_server_that_draws_none_writes_nothing(
    other_url: str, answer: str, shown: str, tmp_path: Path
) -> None:
    out = tmp_path / "rumour.svg"
    output = stopped(
        [
            "rumour-map",
            "b-1",
            "--world",
            "save-1",
            "--out",
            str(out),
            "--url",
            f"{other_url}/{answer}",
        ]
    )
    assert output.startswith(
        f"Error: 200 from {other_url}/{answer} (not a worker's SVG picture): {shown}"
    )
    assert not out.exists()


class NotAWorker(http.server.BaseHTTPRequestHandler):
    """Another web server at the URL given for the worker: a 404 page for every path."""

    def do_GET(self) -> None:
        body = b"<html>Not Found</html>"
        self.send_response(404)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet: the test reads what the command prints."""


@pytest.mark.parametrize(
    ("worker", "status"),
    [(KeyedWorker, 401), (NotAWorker, 404)],
    ids=["key-missing", "no-worker"],
)
def test_a_rebuild_the_live_worker_cannot_compare_with_stops_before_folding(
    worker: type[http.server.BaseHTTPRequestHandler], status: int, tmp_path: Path
) -> None:
    """The live worker's key was asked for only once every event was folded (hours, on a
    production topic), to compare the digests: a 401 then threw the whole fold away. A URL
    where another web server answers (a mistyped port, a proxy with no worker behind it) is
    refused as early."""
    with serving(worker) as url:
        result = CliRunner().invoke(
            main,
            ["rebuild", "--url", url, "--broker", "127.0.0.1:1", "--data-dir", str(tmp_path)],
        )
    assert (result.exit_code, isinstance(result.exception, SystemExit)) == (1, True)
    assert result.output.startswith(f"Error: rebuild: the live worker at {url}: {status}: ")
    assert "Kafka" not in result.output  # nothing folded: Kafka was not even asked


def test_a_players_terminal_escapes_are_shown_not_acted_on() -> None:
    """Found by a reviewer: a player's line holding an OSC sequence (set the window title;
    OSC 52 writes some terminals' clipboard) reached the operator's terminal raw through the
    read commands' tables and the decision's prompt."""
    escaped = TAVERN.replace(
        b"I will find your son.", b"I will find your son.\\u001b]0;PWNED\\u0007"
    )
    state = replay_lines(escaped.splitlines()).state
    world = ["--world", "save-1"]
    results = rumourmill(
        state,
        ["npc", "npc-mara", *world],
        ["decision", "npc-mara", *world, "--after-seq", "2"],
        ["recall", "npc-mara", "son", *world],
    )
    for result in results:
        output = printed(result)
        assert "\x1b" not in output and "\x07" not in output
        assert "\\x1b]0;PWNED\\x07" in output
    assert show.for_terminal("npc-rook\u202e 0.8") == "npc-rook\\u202e 0.8"  # drawn reversed
    columns = table("t", ["said", "seq"], [["a\x1bb", 1], ["abcde", 2]]).splitlines()
    assert [line.rindex(str(seq)) for line, seq in zip(columns[-2:], (1, 2), strict=True)] == [8, 8]


class SendsOn(http.server.BaseHTTPRequestHandler):
    """Another web server on the worker's port, sending every path on elsewhere."""

    def do_GET(self) -> None:
        self.send_response(302)
        self.send_header("Location", "http://127.0.0.1:1/ready")
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet: the test reads what the command prints."""


@pytest.mark.parametrize(
    ("server", "answer"), [(NotAWorker, "404 <html>Not Found</html>"), (SendsOn, "302")]
)
def test_ready_says_another_server_on_the_workers_port_is_not_a_worker(
    monkeypatch: pytest.MonkeyPatch, server: type[http.server.BaseHTTPRequestHandler], answer: str
) -> None:
    """The image's health check told another server's 404 as the worker "not ready", and
    followed a redirect (to a ready worker elsewhere: healthy)."""
    with serving(server) as url:
        monkeypatch.setenv("RUMOURMILL_WEB_PORT", url.rsplit(":", 1)[1])
        result = CliRunner().invoke(main, ["ready"])
    assert result.exit_code == 1
    assert result.output == f"Error: not a worker's answer at {url}/ready: {answer}\n"


def test_recall_cues_on_an_id_holding_a_comma_beside_another() -> None:
    """`--cues` is separated by commas, and an id may hold one: the command sent both escaped
    (`%2C`), and the worker split the id in two and refused the cue."""
    sailor = "npc-drunk,sailor"
    state = replay_lines(TAVERN.replace(b'"npc-drunk-sailor"', orjson.dumps(sailor)).splitlines())
    recall = ["recall", "npc-mara", "fight", "--world", "save-1", "--cues"]
    alone, beside = rumourmill(state.state, [*recall, sailor], [*recall, f"player-1, {sailor}"])
    assert printed(alone).startswith("searched: 1 by cues,")
    assert "Ilse enemy defeated" in printed(alone)  # the fight Mara saw, the sailor in it
    assert printed(beside).startswith("searched: 2 by cues,")


def test_a_tables_last_column_is_shown_whole_under_a_rule_no_longer_than_a_cell() -> None:
    """Shown whole, a memory of 2,000 characters drew a rule of 2,000 dashes."""
    _, _, rule, row = table("t", ["seq", "content"], [[1, "word " * 400]]).splitlines()
    assert row == "1    " + ("word " * 400).strip()
    assert rule == "---  " + "-" * 70


def test_the_records_and_lines_said_to_be_word_for_word_are_printed_whole() -> None:
    """`chronicle` and `dialogue` print the records and turns word for word: each was cut to
    67 characters and `...`, as every table cell was."""
    long_line = "I will find your son. He was last seen boarding the Grey Heron at the north pier."
    state = replay_lines(TAVERN.replace(SAID.encode(), long_line.encode()).splitlines()).state
    world = ["--world", "save-1"]
    chronicle, dialogue = rumourmill(
        state,
        ["chronicle", "npc-mara", *world],
        ["dialogue", "npc-mara", *world, "--player", "player-1"],
    )
    assert long_line in printed(chronicle)
    assert long_line in printed(dialogue)


def test_a_dialogue_summary_is_shown_with_how_many_of_the_characters_lines_followed() -> None:
    """`turns_since_summary` counts the character's lines, not every turn: the table said
    "turns since"."""
    scope = {
        "scope": "player",
        "player_id": "player-1",
        "expired": False,
        "expires_at": None,
        "summary": "They spoke of the son",
        "turns_since_summary": 2,
        "turns": [],
    }
    shown = show.dialogue_tables({"player": scope, "place": None})
    assert "summary: They spoke of the son (2 of the character's lines since)" in shown
