"""The `rumourmill` command line: worker, publish, replay, schemas, brokers and the demo."""

from __future__ import annotations

import asyncio
import errno
import functools
import logging.config
import math
import os
import socket
import stat
from collections.abc import Callable, Coroutine, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import click

from streams.settings import (
    Settings,
    SettingsError,
    unknown_variables,
    unused_settings,
    worker_url_problem,
)

if TYPE_CHECKING:
    from streams.publish import Line
    from streams.rebuild import Named, Rebuilt, World

SCHEMA_DIR = Path("schemas", "json")
"""Where `schemas export` writes by default, from where it runs: a checkout's root holds the
ones committed (an install's package dir was written to, wherever the command ran)."""
READ_FLAGS = {"web_url": "--url"}
SECRET_FLAGS = {"api_key"}
"""The flags whose values no message shows."""
"""The settings the read commands (and `rebuild`) take by a flag named otherwise."""
Done = TypeVar("Done")


class NamedPath(click.Path):
    """A path given to be written, never blank: click takes `''` for the current directory (a
    `--data-dir "$DATA_DIR"` with the variable unset kept the state wherever the worker ran)."""

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if isinstance(value, str) and not value.strip():
            self.fail("must name a path, not be blank", param, ctx)
        return super().convert(value, param, ctx)


class ReadableFile(click.Path):
    """A file to read, which exists and is a file or a pipe: a device (`/dev/zero`) was read
    until the process ran out of memory, in a traceback."""

    def __init__(self) -> None:
        super().__init__(exists=True, dir_okay=False, path_type=Path)

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        path = super().convert(value, param, ctx)
        mode = os.stat(path).st_mode
        if not (stat.S_ISREG(mode) or stat.S_ISFIFO(mode)):
            self.fail(f"{os.fsdecode(path)!r} is not a file nor a pipe", param, ctx)
        return path


READABLE_FILE = ReadableFile()


def _overriding_flags(*flags: tuple[str, Any]) -> Callable[[Any], Any]:
    """A decorator adding each `--NAME` flag (name, click type), overriding RUMOURMILL_NAME. An
    `int` flag is taken as typed and checked with the settings, so a bad one is refused as a
    bad setting, as its variable is (click's usage text was no JSON under a JSON log)."""

    def add_flags(function: Any) -> Any:
        for name, kind in reversed(flags):
            env = "RUMOURMILL_" + name.replace("-", "_").upper()
            typed = {"type": str, "metavar": "INTEGER"} if kind is int else {"type": kind}
            function = click.option(f"--{name}", **typed, default=None, help=f"overrides {env}")(
                function
            )
        return function

    return add_flags


_settings_options = _overriding_flags(
    ("broker", str),
    ("data-dir", NamedPath(path_type=Path)),
    ("web-port", int),
    ("app-id", str),
    ("partitions", int),
    ("topic-prefix", str),
)
"""The flags of the worker and `rebuild`."""
_topic_options = _overriding_flags(("broker", str), ("topic-prefix", str), ("partitions", int))
"""The flags of the commands that publish to rumourmill's topics: they create those missing,
and refuse those of another partition count than the settings' (`streams.topics`)."""


def _settings(
    flag_names: Mapping[str, str] | None = None,
    warn: Callable[[str], None] | None = None,
    **flags: Any,
) -> Settings:
    """The settings, flags over variables; a bad value stops the command, named as the person
    typed it (`flag_names`: the flag of a field, where it is not `--field-name`). A variable
    that names no setting is warned of, on stderr or by `warn`, first: a misspelt one is most
    often why a setting is missing (`RUMOURMILL_KAFKA_SASL_USERNAM`)."""
    for note in unknown_variables(os.environ):
        (warn or _warning)(note)
    try:
        return Settings.from_env(flag_names, **flags)
    except SettingsError as error:
        raise click.ClickException(f"bad setting:\n{error}") from None


def _finite(option: click.Parameter, value: float) -> float:
    """`value`, unless it is not a number (`nan`, which a range lets through)."""
    if math.isnan(value):
        raise click.BadParameter("must be a number of seconds", param=option)
    return value


def _read_settings(url: str | None, api_key: str | None) -> Settings:
    """The settings of a command that reads from a worker: `--url` and `--api-key` over the
    variables."""
    return _settings(READ_FLAGS, web_url=url, api_key=api_key)


def _on_kafka(
    settings: Settings, work: Coroutine[Any, Any, Done], *, before_publishing: bool = False
) -> Done:
    """Run a command's Kafka work; a Kafka that cannot be reached or fails it, or topics with
    another partition count than the settings' or that the broker would not create (any
    `TopicsUnfit`), end the command with one line, as `rebuild` says it, not a traceback.
    `before_publishing`: nothing was sent yet, and the line says so."""
    from aiokafka.errors import KafkaError

    from streams.kafka_clients import refusals_noted, refused_security
    from streams.topics import TopicsUnfit, kafka_trouble

    unsent = "; nothing published" if before_publishing else ""
    try:
        with refusals_noted() as refusals:
            return asyncio.run(work)
    except KafkaError as error:  # a login or a certificate refused is said as such
        why = refused_security(settings, refusals.last) or kafka_trouble(settings.bootstrap, error)
        raise click.ClickException(f"{why}{unsent}") from None
    except TopicsUnfit as unfit:
        raise click.ClickException(f"{unfit}{unsent}") from None


@click.group()
@click.pass_context
def main(context: click.Context) -> None:
    """rumourmill: game characters with a memory, from a stream of game events."""
    _kafka_client_records_to_the_log_only()
    if context.invoked_subcommand != "worker":  # whose log has them
        _warnings_shown_escaped()


def _warnings_shown_escaped() -> None:
    """rumourmill's warnings on stderr, each control character shown escaped, where Python
    printed them raw with no log set up: a rebuild asks the model what was never recorded, and
    a model server's answer, quoted in a warning, set the operator's window title."""
    from streams.logs import LOGGER_NAME, TextFormatter

    ours = logging.getLogger(LOGGER_NAME)
    if not ours.handlers:
        shown = logging.StreamHandler()  # stderr, as Python's own last resort
        shown.setLevel(logging.WARNING)
        shown.setFormatter(TextFormatter("%(message)s"))
        ours.addHandler(shown)


def _kafka_client_records_to_the_log_only() -> None:
    """aiokafka logs each broker it cannot connect to as an error; with no logging set up (every
    command but the worker, whose log has them), Python would print those records on stderr
    before the one line the command stops with. They now go to a handler that drops them,
    still passed on to any log set up."""
    client = logging.getLogger("aiokafka")
    if not any(isinstance(handler, logging.NullHandler) for handler in client.handlers):
        client.addHandler(logging.NullHandler())


@main.command()
@_settings_options
@click.option("--log-level", default=None, help="overrides RUMOURMILL_LOG_LEVEL")
def worker(**flags: Any) -> None:
    """Run a worker: consume events, keep projections, serve the runtime read."""
    named = {name.upper(): value for name, value in os.environ.items()}  # as settings read them
    if named.get("RUMOURMILL_LOG_FORMAT", "").lower() != "json":
        _work(**flags)
        return
    # read before the settings, which may be what is wrong: every line of a JSON log is JSON,
    # the one saying why the worker did not start too
    from streams.logs import json_line

    try:
        _work(warn=lambda note: click.echo(json_line("warning", note), err=True), **flags)
    except click.ClickException as error:
        click.echo(json_line("critical", error.format_message()), err=True)
        raise SystemExit(error.exit_code) from None


def _remove_empty_directories(path: Path, upto: Path) -> None:
    """Remove `path` and its parents up to `upto`, each if empty: what a worker refused at start
    made (a directory another worker wrote into meanwhile stays)."""
    for directory in (path, *path.parents):
        try:
            directory.rmdir()
        except OSError:
            return
        if directory == upto:
            return


def _check_data_dir(data_dir: Path, named: str) -> None:
    """Stop the worker at once, saying why (the setting `named` as given), when `data_dir`
    cannot hold its state (`streams.state.unwritable_because`)."""
    from streams.state import unwritable_because

    why = unwritable_because(data_dir)
    if why is not None:
        raise click.ClickException(f"{named}={str(data_dir)!r} cannot hold the state: {why}")


def _check_web_address(settings: Settings, port_named: str) -> None:
    """Stop at once, saying why, when the web server cannot listen on its host and port (the
    port `port_named` as given): a
    name no resolver knows, an address not this machine's, or a port something else listens on
    (each failed the bind after Kafka's topics, a traceback naming no setting; `make run` said
    its worker was ready as another answered there, and served nothing). Bound as aiohttp binds
    (`SO_REUSEADDR`, and `IPV6_V6ONLY` as asyncio sets it): only a port in use is refused, not
    one a stopped server left waiting, nor `::` beside a server on the port's IPv4 side."""
    host, port = settings.web_host, settings.web_port
    try:
        addresses = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (OSError, UnicodeError) as error:
        raise click.ClickException(
            f"RUMOURMILL_WEB_HOST={host!r}: no address to listen on: {error}"
        ) from None
    for family, kind, proto, _, address in addresses:
        with socket.socket(family, kind, proto) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if family == socket.AF_INET6:  # as asyncio binds it: IPv6 alone, beside IPv4
                probe.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            try:
                probe.bind(address)
            except OSError as error:
                if error.errno == errno.EADDRINUSE:
                    raise click.ClickException(
                        f"{port_named}={port}: in use on {host} (another worker, `make "
                        "run` or docker compose may listen there): stop it, or choose another"
                    ) from None
                raise click.ClickException(
                    f"RUMOURMILL_WEB_HOST={host!r}: no address to listen on: {error}"
                ) from None


def _work(warn: Callable[[str], None] | None = None, **flags: Any) -> None:
    """The worker, started as the settings say (`warn`: told of a variable naming no setting)."""
    from streams.app import create_app
    from streams.durability import TableDirInUse
    from streams.logs import logging_config
    from streams.state import first_missing
    from streams.stopping import BoundedStopWorker
    from streams.topics import ensure_topics

    settings = _settings(warn=warn, **flags)
    for note in unused_settings(settings):
        (warn or _warning)(note)
    problem = worker_url_problem(settings)
    if problem is not None:
        raise click.ClickException(f"bad setting:\n{problem}")
    _check_web_address(settings, settings.named("web_port"))
    made = first_missing(settings.data_dir)
    try:
        _check_data_dir(settings.data_dir, settings.named("data_dir"))
        logging.config.dictConfig(logging_config(settings))  # Faust's worker sets it up again
        _on_kafka(settings, ensure_topics(settings, changelog=True))
        mill = create_app(settings)
        _on_kafka(settings, mill.durability.prepare(range(settings.partitions)))
    except TableDirInUse as in_use:
        raise click.ClickException(str(in_use)) from None
    except click.ClickException:
        if made is not None:
            _remove_empty_directories(settings.data_dir, upto=made)
        raise
    BoundedStopWorker(
        mill.app,
        drain_seconds=settings.stop_drain_seconds,
        draining=mill.draining.set,
        stopping=mill.judge.stop,
        loglevel=settings.log_level,
        logging_config=logging_config(settings),
        quiet=settings.log_format == "json",  # no banner: every line of the log is JSON
    ).execute_from_commandline()


@main.command()
@click.argument("file", type=READABLE_FILE)
@click.option("--raw", is_flag=True, help="send lines as they are, valid or not")
@_topic_options
def publish(file: Path, raw: bool, **flags: Any) -> None:
    """Publish an NDJSON file of events, keyed by world; an invalid line is reported by
    number, and then nothing is sent."""
    from streams.publish import publish as send
    from streams.topics import ensure_topics

    settings = _settings(**flags)
    lines = _checked_lines(file, settings.max_event_bytes, raw=raw)
    if not lines:  # it made the topics, and said it published 0 events
        raise click.ClickException(f"no events in {file}; nothing published")
    _on_kafka(settings, ensure_topics(settings), before_publishing=True)
    sent = _on_kafka(settings, send(settings, settings.topics.events, lines))
    copies = f" ({sent} messages: a tenant's deletion goes to every partition)"
    click.echo(
        f"published {len(lines)} event(s) from {file} to {settings.bootstrap}"
        + (copies if sent > len(lines) else "")
    )


def _checked_lines(file: Path, max_event_bytes: int, raw: bool = False) -> list[Line]:
    """Every line of an event file, checked before anything starts: invalid lines (or those
    over `max_event_bytes`, which the worker dead-letters; of `raw` lines, only those over
    what Kafka's producer takes) are reported by number, and stop the command with nothing
    sent."""
    from streams.publish import read_lines
    from streams.show import for_terminal

    size = file.stat().st_size if file.is_file() else 0  # a pipe's is unknown: no bar then
    lines = []
    with (
        file.open("rb") as handle,
        click.progressbar(
            length=size, label="validating", file=click.get_text_stream("stderr")
        ) as progress,
    ):
        for line in read_lines(handle, raw=raw, max_event_bytes=max_event_bytes):
            lines.append(line)
            if size:
                progress.update(handle.tell() - progress.pos)
    invalid = [line for line in lines if line.problem is not None]
    for line in invalid:
        click.echo(for_terminal(f"{file}:{line.number}: {line.problem}"), err=True)
    if invalid:
        raise click.ClickException(f"{len(invalid)} invalid line(s); nothing sent")
    return lines


@main.group()
def schemas() -> None:
    """The JSON Schema files of every message type."""


@schemas.command("export")
@click.option(
    "--out", type=NamedPath(file_okay=False, path_type=Path), default=SCHEMA_DIR, show_default=True
)
def schemas_export(out: Path) -> None:
    """Write one JSON Schema file per message type."""
    from schemas.export import json_schemas

    written = []
    try:
        out.mkdir(parents=True, exist_ok=True)
        for name, document in json_schemas().items():
            (out / name).write_bytes(document)
            written.append(out / name)
    except OSError as error:
        raise _unwritable(out, error) from None
    for path in written:  # once all are: a reader of the names that goes (`| head`) stops none
        click.echo(path)


def _unwritable(path: Path, error: OSError) -> click.ClickException:
    """A file or directory a command cannot write, named with why."""
    return click.ClickException(f"cannot write {path}: {error.strerror or error}")


@main.command()
@click.argument("file", type=READABLE_FILE)
@click.option(
    "--policy",
    type=READABLE_FILE,
    help="a policy document for every world (default: the built-in policy)",
)
@click.option(
    "--judgements",
    type=READABLE_FILE,
    help="the judgements topic's records as NDJSON: model mode answered as recorded",
)
def replay(file: Path, policy: Path | None, judgements: Path | None) -> None:
    """Fold an NDJSON file in-process (no Kafka, no model) and print outcomes and world
    digests."""
    from streams.policies import InvalidPolicy
    from streams.replay import ReplayInputError, replay_file, replay_projector
    from streams.show import for_terminal, world_label

    try:
        settings = _settings()
        projector = replay_projector(
            policy, judgements, settings.max_event_bytes, settings.changelog_batch_bytes
        )
    except InvalidPolicy as refusal:
        raise click.ClickException(f"{policy}: {refusal}") from None
    except ReplayInputError as error:
        raise click.ClickException(str(error)) from None
    result, line_numbers = replay_file(file, projector)
    for offset, ack in result.rejected:
        named = ack.seq is not None and ack.timeline_id is not None  # else the line says it
        position = f" ({ack.timeline_id}#{ack.seq})" if named else ""
        rejected = f"{file}:{line_numbers[offset]}: rejected{position}: {ack.reason}"
        click.echo(for_terminal(rejected), err=True)
    for outcome, count in sorted(result.outcomes.items()):
        click.echo(f"{outcome}: {count}")
    for (tenant, world), digest in sorted(result.digests.items()):
        click.echo(f"digest {world_label(tenant, world)}: {digest}")


@main.group()
def broker() -> None:
    """Local brokers on 127.0.0.1 for development and tests."""


@broker.command("fetch")
def broker_fetch() -> None:
    """Download the Apache Kafka jars into the cache (once; reused after)."""
    from localbroker import fetch_apache_kafka

    settings = _settings()
    try:
        jars = fetch_apache_kafka(settings.kafka_version, settings.kafka_cache)
    except (OSError, RuntimeError) as error:
        raise click.ClickException(
            f"cannot fetch Apache Kafka {settings.kafka_version}: {error}"
        ) from None
    click.echo(f"Apache Kafka jars in {jars}")


@broker.command("start")
@click.argument("kind", type=click.Choice(["kafka", "tansu"]), default="kafka")
def broker_start(kind: str) -> None:
    """Start a broker on a free port, print its address, stop it on Ctrl-C: Apache Kafka, or
    Tansu (memory only, starts at once; a worker restarted on it loses its state)."""
    import signal

    from localbroker import TansuBroker
    from streams.dev import apache_kafka, block_stop_signals

    settings = _settings()
    try:
        with apache_kafka(settings) if kind == "kafka" else TansuBroker() as running:
            stop_signals = block_stop_signals()
            click.echo(f"{kind} broker on {running.bootstrap} (Ctrl-C stops it)")
            signal.sigwait(stop_signals)
    except (OSError, RuntimeError) as error:  # BrokerStartError is a RuntimeError
        raise click.ClickException(f"cannot start a {kind} broker: {error}") from None


@main.command()
@click.option(
    "--story",
    type=READABLE_FILE,
    default=None,
    help="NDJSON events to publish (default: the bundled tavern story)",
)
@click.option("--web-port", type=int, default=None, help="overrides RUMOURMILL_WEB_PORT")
def dev(story: Path | None, web_port: int | None) -> None:
    """Tansu broker + worker + web server + the demo story, until Ctrl-C (`make run`)."""
    from streams.dev import DEMO_STORY, run_demo

    settings = _settings(web_port=web_port)
    story = story or DEMO_STORY
    lines = _checked_lines(story, settings.max_event_bytes)
    _check_web_address(settings, settings.named("web_port"))
    run_demo(story, lines, settings)


@main.command()
@click.option(
    "--timeout",
    type=click.FloatRange(min=0.1, max=3600),
    callback=lambda context, option, seconds: _finite(option, seconds),
    default=4.0,
    show_default=True,
    help="seconds to wait for the worker's answer",
)
def ready(timeout: float) -> None:
    """Exit 0 if this machine's worker is ready (`GET /ready` answers 200), else 1 saying why:
    a container's health check. Asked where the worker listens (RUMOURMILL_WEB_HOST, the
    loopback address when it binds every interface, and RUMOURMILL_WEB_PORT), never at
    RUMOURMILL_WEB_URL, which may be a load balancer's."""
    import http.client
    import urllib.parse

    import orjson

    from streams.show import start_of

    url = f"{_settings().own_url}/ready"
    address = urllib.parse.urlsplit(url)
    connection = http.client.HTTPConnection(str(address.hostname), address.port, timeout=timeout)
    try:
        connection.request("GET", address.path)
        reply = connection.getresponse()
        body = reply.read()
    except http.client.HTTPException as error:  # something answered, not in HTTP
        raise click.ClickException(
            f"no HTTP answer at {url} ({type(error).__name__}: {start_of(str(error).encode())})"
        ) from None
    except OSError as error:
        raise click.ClickException(f"no worker answers at {url}: {error}") from None
    finally:
        connection.close()
    try:
        status = orjson.loads(body).get("status")
    except (orjson.JSONDecodeError, AttributeError):
        status = None
    if reply.status == 200 and status == "ready":
        click.echo(body.decode())
        return
    if reply.status == 503 and status in ("starting", "stopping"):
        raise click.ClickException(f"not ready: 503 {start_of(body)}")
    # another server on the port: a 404 of its own, a redirect, or a 200 to anything
    said = f"{reply.status} {start_of(body)}".rstrip()
    raise click.ClickException(f"not a worker's answer at {url}: {said}")


@main.group()
def policy() -> None:
    """Policy documents: how rumourmill treats a world (or every world of a tenant)."""


@policy.command("set")
@click.argument("file", type=READABLE_FILE)
@click.option("--world", default=None, help="the world it governs; omit for the tenant default")
@click.option("--tenant", default="default", show_default=True)
@_topic_options
def policy_set(file: Path, world: str | None, tenant: str, **flags: Any) -> None:
    """Validate a (partial) policy document and publish it to the policies topic.

    Refused, with nothing published, when it is invalid, or when it and a document in force
    would break a rule between fields together (a world's and its tenant's default)."""
    import orjson

    from projections.intake import id_problem
    from projections.policy import policy_key
    from streams.policies import (
        InvalidPolicy,
        PoliciesUnread,
        caught_up,
        check_policy_document,
        conflicts,
    )
    from streams.publish import send_one
    from streams.topics import ensure_topics

    if world == "":
        raise click.ClickException(
            "--world names no world (omit it for the tenant default); nothing published"
        )
    for flag, named in (("--tenant", tenant), ("--world", world)):
        problem = None if named is None else id_problem(named)
        if problem is not None:
            raise click.ClickException(
                f"{flag} names no id an event can carry ({problem}): no event could be governed"
                " by it; nothing published"
            )
    try:
        document = check_policy_document(file.read_bytes())
    except InvalidPolicy as refusal:
        raise click.ClickException(f"{file}: {refusal}; nothing published") from None
    kept = document.get("memory", {}).get("persistent", {}).get("characters", [])
    for index, character in enumerate(kept):  # a worker takes them (a store's documents may)
        if (problem := id_problem(character)) is not None:
            raise click.ClickException(
                f"{file}: memory.persistent.characters.{index}: {problem}: no event can name"
                " that character, whose memories it would keep; nothing published"
            )
    settings = _settings(**flags)
    _on_kafka(settings, ensure_topics(settings), before_publishing=True)

    async def conflicting() -> list[str]:
        async with caught_up(settings, settings.topics.policies, 60) as in_force:
            return conflicts(in_force, tenant, world, document)

    try:
        found = _on_kafka(settings, conflicting(), before_publishing=True)
    except PoliciesUnread as unread:
        raise click.ClickException(f"{unread}; nothing published") from None
    if found:
        raise click.ClickException(
            f"{file} conflicts with the policies in force: {'; '.join(found)}; nothing published"
        )
    key = policy_key(tenant, world)
    _on_kafka(
        settings,
        send_one(settings, settings.topics.policies, key, orjson.dumps(document)),
    )
    click.echo(
        f"policy for tenant {tenant!r}, "
        + (f"world {world!r}" if world else "every world")
        + f" published to {settings.topics.policies}"
    )


@main.group()
def world() -> None:
    """Worlds: delete one."""


@world.command("delete")
@click.argument("world_id")
@click.option("--tenant", default="default", show_default=True)
@_topic_options
def world_delete(world_id: str, tenant: str, **flags: Any) -> None:
    """Publish `world.deleted`: everything of the world goes, persistent memories included (a
    world called `*` too: its key tells a tenant's deletion apart)."""
    _publish_deletion(tenant, world_id, flags)


@main.group()
def tenant() -> None:
    """Tenants: delete one."""


@tenant.command("delete")
@click.argument("tenant_id")
@_topic_options
def tenant_delete(tenant_id: str, **flags: Any) -> None:
    """Publish `tenant.deleted` to every partition: every world of the tenant goes."""
    _publish_deletion(tenant_id, None, flags)


def _publish_deletion(tenant_id: str, world_id: str | None, flags: dict[str, Any]) -> None:
    from pydantic import ValidationError

    from projections.deletion import deletion_event
    from projections.delivery import explain
    from streams.publish import send_one
    from streams.topics import ensure_topics

    try:
        event = deletion_event(tenant_id, world_id)
    except ValidationError as error:
        raise click.ClickException(explain(error, "bad deletion") + "; nothing published") from None
    settings = _settings(**flags)
    _on_kafka(settings, ensure_topics(settings), before_publishing=True)
    copies = _on_kafka(
        settings,
        send_one(
            settings,
            settings.topics.events,
            event.world_instance_id.encode(),
            event.model_dump_json(exclude_defaults=True).encode(),
            every_partition=world_id is None,
        ),
    )
    what = f"tenant {tenant_id!r}"
    what = what if world_id is None else f"world {world_id!r} of {what}"
    click.echo(f"{event.key} for {what} published to {settings.topics.events} ({copies}x)")


class Id(click.ParamType):
    """An id a read's path holds (a character's, a belief's): an empty one (an unset shell
    variable) is a usage error, not the worker's "404: no route" that read as a broken URL."""

    name = "id"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if value == "":
            self.fail("is empty: give the id", param, ctx)
        return value


AN_ID = Id()


def _utf8_only(function: Any) -> Any:
    """The command, refusing an argument or flag that is no UTF-8 text: a terminal in another
    encoding passes bytes UTF-8 has no use for (`w\xf6rld` in Latin-1), which Python keeps as
    lone surrogates, and the command failed sending them, in a traceback."""

    @functools.wraps(function)
    def checked(**given: Any) -> Any:
        for name, value in given.items():
            if isinstance(value, str):
                try:
                    value.encode()
                except UnicodeEncodeError:
                    context = click.get_current_context()
                    shown = "it" if name in SECRET_FLAGS else repr(value)
                    raise click.BadParameter(
                        f"{shown} is not UTF-8 text (is the terminal's encoding UTF-8?)",
                        ctx=context,
                        param=next(p for p in context.command.params if p.name == name),
                    ) from None
        return function(**given)

    return checked


def _read_options(function: Any) -> Any:
    """Flags of the commands that read from a running worker."""
    function = _utf8_only(function)
    function = click.option("--tenant", default=None, help="tenant (without API keys)")(function)
    function = click.option(
        "--api-key", default=None, help="bearer key (overrides RUMOURMILL_API_KEY)"
    )(function)
    return click.option(
        "--url", default=None, help="a worker's web URL (overrides RUMOURMILL_WEB_URL)"
    )(function)


def _flag_query(**parameters: str | int | None) -> dict[str, str]:
    """The query parameters of the flags given: an empty one too, which the worker refuses
    (dropped, an empty `--tenant` read the tenant `default`, an empty `--player` the event's
    only player's decision)."""
    return {name: str(value) for name, value in parameters.items() if value is not None}


def _as_of_option(function: Any) -> Any:
    """`--as-of-seq`, of the reads that answer as of a past position of the timeline."""
    return click.option(
        "--as-of-seq",
        type=int,
        default=None,
        help="the state once this position of the timeline was processed (default: now)",
    )(function)


def _decision_options(function: Any) -> Any:
    """Flags of the commands about a character's decision at one event (`decision`,
    `reply-check`), with the read flags."""
    function = _read_options(function)
    function = click.option(
        "--player", default=None, help="player_id, for an event of several players"
    )(function)
    function = click.option(
        "--after-seq", required=True, type=int, help="the position the character answers"
    )(function)
    function = click.option("--timeline", default="main", show_default=True)(function)
    return click.option("--world", required=True, help="world_instance_id")(function)


@main.command()
@click.argument("npc_id", type=AN_ID)
@click.option("--world", required=True, help="world_instance_id")
@click.option("--timeline", default="main", show_default=True)
@_as_of_option
@_read_options
def npc(
    npc_id: str,
    world: str,
    timeline: str,
    as_of_seq: int | None,
    url: str | None,
    api_key: str | None,
    tenant: str | None,
) -> None:
    """Print one character's mind on one timeline, as tables."""
    from streams.show import mind_tables, read_path

    query = {"world_instance_id": world, "timeline_id": timeline}
    query |= _flag_query(as_of_seq=as_of_seq, tenant_id=tenant)
    path = read_path("/v2/memory/runtime/npcs/{npc_id}", npc_id=npc_id)
    click.echo(_read_for_command(url, api_key, path, query, mind_tables))


@main.command()
@click.option("--world", required=True, help="world_instance_id")
@_read_options
def digest(world: str, url: str | None, api_key: str | None, tenant: str | None) -> None:
    """Print the state digest of a world (equal digests: equal projections)."""
    query = {"world_instance_id": world} | _flag_query(tenant_id=tenant)
    click.echo(
        _read_for_command(url, api_key, "/v2/admin/digest", query, lambda found: found["digest"])
    )


@main.command("diff")
@click.argument("npc_id", type=AN_ID)
@click.option("--world", required=True, help="world_instance_id")
@click.option("--timeline", required=True, help="the timeline compared")
@click.option("--other", required=True, help="the timeline it is compared with")
@_as_of_option
@_read_options
def diff_command(
    npc_id: str,
    world: str,
    timeline: str,
    other: str,
    as_of_seq: int | None,
    url: str | None,
    api_key: str | None,
    tenant: str | None,
) -> None:
    """What a character holds on one timeline and not the other, both ways, as tables."""
    from streams.show import diff_tables, read_path

    query = {"world_instance_id": world, "timeline_id": timeline, "other_timeline_id": other}
    query |= _flag_query(as_of_seq=as_of_seq, tenant_id=tenant)
    path = read_path("/v2/memory/runtime/npcs/{npc_id}/diff", npc_id=npc_id)
    click.echo(_read_for_command(url, api_key, path, query, diff_tables))


@main.command("provenance")
@click.argument("npc_id", type=AN_ID)
@click.argument("belief_id", type=AN_ID)
@click.option("--world", required=True, help="world_instance_id")
@click.option("--timeline", default="main", show_default=True)
@_as_of_option
@_read_options
def provenance_command(
    npc_id: str,
    belief_id: str,
    world: str,
    timeline: str,
    as_of_seq: int | None,
    url: str | None,
    api_key: str | None,
    tenant: str | None,
) -> None:
    """Print where a memory came from, as a chain of tellers back to the original event."""
    from streams.show import provenance_chain, read_path

    query = {"world_instance_id": world, "timeline_id": timeline}
    query |= _flag_query(as_of_seq=as_of_seq, tenant_id=tenant)
    path = read_path(
        "/v2/memory/runtime/npcs/{npc_id}/beliefs/{belief_id}/provenance",
        npc_id=npc_id,
        belief_id=belief_id,
    )
    click.echo(_read_for_command(url, api_key, path, query, provenance_chain))


def _read_for_command(
    url: str | None,
    api_key: str | None,
    path: str,
    query: dict[str, str],
    render: Callable[[dict[str, Any]], str],
    posted: Any = None,
) -> str:
    """A worker's answer (to `posted`, when given) rendered for a person, or the command stops
    with its detail; so does JSON of another shape, which a URL that is not a worker's (or a
    worker of another version) may answer."""
    from streams.show import ReadFailed, fetch, for_terminal

    settings = _read_settings(url, api_key)
    try:
        found = fetch(settings, path, query, posted)
    except ReadFailed as error:
        raise click.ClickException(for_terminal(str(error))) from None
    try:
        return for_terminal(render(found))
    except (KeyError, TypeError, AttributeError) as error:
        raise click.ClickException(
            for_terminal(
                f"{settings.canonical_url}{path} answered JSON that is not a worker's answer to"
                f" this read ({type(error).__name__}: {error})"
            )
        ) from None


@main.command("recall")
@click.argument("npc_id", type=AN_ID)
@click.argument("query")
@click.option("--world", required=True, help="world_instance_id")
@click.option("--timeline", default="main", show_default=True)
@click.option("--cues", default=None, help="entity ids to cue on, separated by ','")
@click.option("--limit", default=10, show_default=True, type=int)
@_as_of_option
@_read_options
def recall_command(
    npc_id: str,
    query: str,
    world: str,
    timeline: str,
    cues: str | None,
    limit: int,
    as_of_seq: int | None,
    url: str | None,
    api_key: str | None,
    tenant: str | None,
) -> None:
    """Print what a character recalls for QUERY, as a table."""
    from streams.show import read_path, recall_table

    asked = {"world_instance_id": world, "timeline_id": timeline, "q": query, "limit": str(limit)}
    asked |= _flag_query(cues=cues, as_of_seq=as_of_seq, tenant_id=tenant)
    path = read_path("/v2/memory/runtime/npcs/{npc_id}/recall", npc_id=npc_id)
    click.echo(_read_for_command(url, api_key, path, asked, recall_table))


@main.command("decision")
@click.argument("npc_id", type=AN_ID)
@_decision_options
def decision_command(
    npc_id: str,
    world: str,
    timeline: str,
    after_seq: int,
    player: str | None,
    url: str | None,
    api_key: str | None,
    tenant: str | None,
) -> None:
    """Print what a decision model may be given when a character answers an event."""
    from streams.show import decision_tables, read_path

    asked = _decision_query(world, timeline, after_seq, player, tenant)
    path = read_path("/v2/memory/runtime/npcs/{npc_id}/decision", npc_id=npc_id)
    click.echo(_read_for_command(url, api_key, path, asked, decision_tables))


def _decision_query(
    world: str, timeline: str, after_seq: int, player: str | None, tenant: str | None
) -> dict[str, str]:
    """The query of a decision, or of a check of the reply to one."""
    asked = {"world_instance_id": world, "timeline_id": timeline, "after_seq": str(after_seq)}
    return asked | _flag_query(player_id=player, tenant_id=tenant)


@main.command("reply-check")
@click.argument("npc_id", type=AN_ID)
@click.argument("reply")
@_decision_options
def reply_check_command(
    npc_id: str,
    reply: str,
    world: str,
    timeline: str,
    after_seq: int,
    player: str | None,
    url: str | None,
    api_key: str | None,
    tenant: str | None,
) -> None:
    """Print the names REPLY invents: what the character's decision at --after-seq was not
    given, and what the policy does about it."""
    from streams.show import inventions_table, read_path

    asked = _decision_query(world, timeline, after_seq, player, tenant)
    path = read_path("/v2/memory/runtime/npcs/{npc_id}/reply-check", npc_id=npc_id)
    click.echo(_read_for_command(url, api_key, path, asked, inventions_table, {"text": reply}))


@main.command("dialogue")
@click.argument("npc_id", type=AN_ID)
@click.option("--world", required=True, help="world_instance_id")
@click.option("--player", required=True, help="player_id: whose conversation with the character")
@click.option("--timeline", default="main", show_default=True)
@click.option("--location", default=None, help="the place scope (default: where the character is)")
@_as_of_option
@_read_options
def dialogue_command(
    npc_id: str,
    world: str,
    player: str,
    timeline: str,
    location: str | None,
    as_of_seq: int | None,
    url: str | None,
    api_key: str | None,
    tenant: str | None,
) -> None:
    """Print what was just said between a character and a player, and at the character's place."""
    from streams.show import dialogue_tables, read_path

    asked = {"world_instance_id": world, "timeline_id": timeline, "player_id": player}
    asked |= _flag_query(location=location, as_of_seq=as_of_seq, tenant_id=tenant)
    path = read_path("/v2/memory/runtime/npcs/{npc_id}/dialogue", npc_id=npc_id)
    click.echo(_read_for_command(url, api_key, path, asked, dialogue_tables))


@main.command("rumour-map")
@click.argument("belief_id", type=AN_ID)
@click.option("--world", required=True, type=AN_ID, help="world_instance_id (in the path)")
@click.option("--timeline", default=None, help="timeline_id (default: the belief's own)")
@click.option("--out", required=True, type=NamedPath(dir_okay=False, path_type=Path))
@_as_of_option
@_read_options
def rumour_map_command(
    belief_id: str,
    world: str,
    timeline: str | None,
    out: Path,
    as_of_seq: int | None,
    url: str | None,
    api_key: str | None,
    tenant: str | None,
) -> None:
    """Draw who told whom the rumour BELIEF_ID belongs to, in story time, into an SVG file."""
    from streams.show import ReadFailed, fetch_body, for_terminal, read_path, start_of

    asked = _flag_query(timeline_id=timeline, as_of_seq=as_of_seq, tenant_id=tenant)
    path = read_path(
        "/v2/memory/worlds/{world}/rumours/{belief_id}.svg", world=world, belief_id=belief_id
    )
    settings = _read_settings(url, api_key)
    try:
        svg = fetch_body(settings, path, asked)
    except ReadFailed as error:
        raise click.ClickException(for_terminal(str(error))) from None
    if not svg.lstrip().startswith((b"<svg", b"<?xml")):
        raise click.ClickException(
            for_terminal(
                f"200 from {settings.canonical_url} (not a worker's SVG picture): "
                + (start_of(svg) or "an empty body")
            )
        )
    try:
        out.write_bytes(svg)
    except OSError as error:
        raise _unwritable(out, error) from None
    click.echo(f"the rumour of {belief_id} drawn into {out}")


@main.command("chronicle")
@click.argument("npc_id", type=AN_ID)
@click.option("--world", required=True, help="world_instance_id")
@click.option("--timeline", default="main", show_default=True)
@_as_of_option
@_read_options
def chronicle_command(
    npc_id: str,
    world: str,
    timeline: str,
    as_of_seq: int | None,
    url: str | None,
    api_key: str | None,
    tenant: str | None,
) -> None:
    """Print a character's story so far: the condensed chapter, chapters, then newest records."""
    from streams.show import chronicle_tables, read_path

    asked = {"world_instance_id": world, "timeline_id": timeline}
    asked |= _flag_query(as_of_seq=as_of_seq, tenant_id=tenant)
    path = read_path("/v2/memory/runtime/npcs/{npc_id}/chronicle", npc_id=npc_id)
    click.echo(_read_for_command(url, api_key, path, asked, chronicle_tables))


@main.command("rebuild")
@_utf8_only
@_settings_options
@click.option(
    "--into", "into", default=None, help="the fresh app id (default: APP_ID-rebuild-TIME)"
)
@click.option(
    "--into-data-dir",
    type=NamedPath(file_okay=False, path_type=Path),
    default=None,
    help="the fresh app id's data dir (default: DATA_DIR-<fresh app id>)",
)
@click.option("--world", default=None, help="rebuild (and compare) this world only")
@click.option(
    "--url", default=None, help="the live worker's web URL (overrides RUMOURMILL_WEB_URL)"
)
@click.option("--api-key", default=None, help="bearer key (overrides RUMOURMILL_API_KEY)")
@click.option(
    "--workers-stopped",
    is_flag=True,
    help="the live workers are stopped: ask them nothing, and send the acks, dead letters and"
    " change records (with the change feed on) of the events they had not committed",
)
def rebuild_command(
    into: str | None,
    into_data_dir: Path | None,
    world: str | None,
    url: str | None,
    api_key: str | None,
    workers_stopped: bool,
    **flags: Any,
) -> None:
    """Rebuild every projection from the events topic into a fresh app id, then compare each
    world's digest with the live worker's; exits 1 when some differ, 3 when none of those
    compared differs but some were not compared (the API key reads not their tenant, or the
    live workers hold other events of them than the rebuild folded)."""
    from rich.console import Console

    from streams.kafka_clients import refusals_noted, refused_security
    from streams.outputs import outputs_named
    from streams.rebuild import RebuildFailed, check_live, fresh_app_id, progress_bar, rebuild
    from streams.topics import changelog_topic

    live = _settings(READ_FLAGS, web_url=url, api_key=api_key, **flags)
    app_id = fresh_app_id(live) if into is None else into
    named = "--into" if into is not None else "--into (not given: RUMOURMILL_APP_ID-rebuild-TIME)"
    _settings({"app_id": named}, **(flags | {"app_id": app_id}))  # before a dir is named so
    data_dir = into_data_dir or _data_dir_beside(live.data_dir, app_id)
    target = _settings(
        {"app_id": "--into", "data_dir": "--into-data-dir"},
        **(flags | {"app_id": app_id, "data_dir": data_dir}),
    )
    writing = False  # once the fresh app id's changelog topic is made, before the fold
    owed_sent = 0  # the events whose outputs were sent for stopped workers

    def sent_for_stopped(sent: int) -> None:
        nonlocal owed_sent
        owed_sent = sent

    if workers_stopped and world is not None:
        _warning(
            "--workers-stopped with --world: what the stopped workers owed (acks, dead letters,"
            " change records) is not sent, as it is by a rebuild of every world"
        )
    with refusals_noted() as refusals:
        try:
            if not workers_stopped:
                check_live(live)
            bar = progress_bar(Console(stderr=True))
            task = bar.add_task("rebuild", total=None)

            def start(total: int) -> None:
                nonlocal writing
                writing = True
                bar.reset(task, total=total)  # its clock starts with the fold
                bar.start()

            try:
                rebuilt = asyncio.run(
                    rebuild(
                        live,
                        target,
                        world,
                        on_total=start,
                        advance=lambda n: bar.advance(task, n),
                        warn=_warning,
                        workers_stopped=workers_stopped,
                        owed_sent=sent_for_stopped,
                    )
                )
            finally:
                if bar.live.is_started:  # one never started prints an empty line when stopped
                    bar.stop()
        except RebuildFailed as error:  # a login or a certificate refused made it fail
            why = refused_security(live, refusals.last)
            raise click.ClickException(
                f"rebuild: {why or error}{_owed_sent(live, owed_sent)}"
            ) from None
        except KeyboardInterrupt:
            left = "nothing was written"  # nor is `--into` known to be fresh: it may be live
            if writing:
                topic = changelog_topic(target)
                left = (
                    f"app id {app_id!r} holds part of a rebuild: rebuild into a fresh app id,"
                    f" and delete this one's changelog topic {topic!r} and data dir {data_dir}"
                )
            click.echo(f"rebuild: interrupted; {left}{_owed_sent(live, owed_sent)}", err=True)
            raise SystemExit(130) from None
    rate = rebuilt.events / rebuilt.seconds if rebuilt.seconds else 0.0
    click.echo(
        f"rebuilt {rebuilt.events} event(s) in {rebuilt.seconds:.1f} s ({rate:,.0f} events/s) "
        f"into app id {app_id!r}: changelog {rebuilt.changelog_topic}, data dir {data_dir}"
    )
    if owed_sent:
        click.echo(
            f"sent the {outputs_named(live)} of {owed_sent} event(s) the stopped workers had"
            " not committed (a worker of the fresh app id goes on after them)"
        )
    if rebuilt.expired:
        click.echo(
            f"note: the events topic no longer holds its first {rebuilt.expired} event(s) "
            "(retention); the worlds they touched cannot be rebuilt the same"
        )
    if world is None:
        click.echo(
            f"to switch: stop every worker, then start them with RUMOURMILL_APP_ID={app_id}: "
            f"on this machine with RUMOURMILL_DATA_DIR={data_dir} (the rebuilt state), "
            "elsewhere with an empty data dir (recovered from the changelog); they go on "
            "after the events rebuilt"
        )
    else:
        click.echo(
            f"app id {app_id!r} holds world {world!r} only: a check, not one to switch to"
            f" (once done with it, delete its changelog topic {rebuilt.changelog_topic} and"
            f" data dir {data_dir})"
        )
    if workers_stopped:
        from streams.show import world_label

        for (tenant, world_id), digest in sorted(rebuilt.digests.items()):
            click.echo(f"world {world_label(tenant, world_id)}: {digest} not compared")
        return
    try:
        _compare_with_live(live, rebuilt)
    except KeyboardInterrupt:
        click.echo(
            f"rebuild: interrupted as the worlds were compared; app id {app_id!r} holds"
            " the whole rebuild",
            err=True,
        )
        raise SystemExit(130) from None


def _owed_sent(live: Settings, sent: int) -> str:
    """What a rebuild that stopped had sent for stopped workers, to end its line with."""
    from streams.outputs import outputs_named

    if not sent:
        return ""
    return (
        f"; the {outputs_named(live)} of {sent} event(s) the stopped workers owed were sent"
        " (a rebuild again sends them again)"
    )


NOT_ALL_COMPARED = 3
"""`rebuild`'s exit code when no world compared differs, but some could not be compared."""


def _warning(line: str) -> None:
    """A command's warning, on stderr (beside `rebuild`'s progress bar too)."""
    click.echo(f"warning: {line}", err=True)


def _compare_with_live(live: Settings, rebuilt: Rebuilt) -> None:
    """Print each rebuilt world's digest and whether the live worker's is the same, as it is
    asked; end the command (exit 1, or `NOT_ALL_COMPARED`) when some differ, or were not
    compared: an API key reads one tenant, and the live workers may hold other events of a
    world than the rebuild folded (`Outside`)."""
    from streams.rebuild import (
        Named,
        NotCompared,
        RebuildFailed,
        events_not_processed_live,
        events_since,
        live_committed,
        live_digest,
    )

    def on_kafka(work: Coroutine[Any, Any, Done]) -> Done:
        try:
            return _on_kafka(live, work)  # Kafka's failures (a refused login too) said as ever
        except RebuildFailed as error:
            raise click.ClickException(
                f"rebuild: {error}; the worlds were not compared with the live worker"
            ) from None

    committed = on_kafka(live_committed(live, rebuilt.folded))  # before the digests
    answers: dict[World, str | NotCompared] = {}
    for world in sorted(rebuilt.digests):
        try:
            answers[world] = live_digest(live, *world)
        except NotCompared as refusal:
            answers[world] = refusal
        except RebuildFailed as error:
            raise click.ClickException(
                f"rebuild: {error}; the worlds from {world[0]}/{world[1]} on were not compared "
                "(`rumourmill digest --world W` prints a world's live digest)"
            ) from None
    outside = Outside(Named(), Named())
    if any(
        isinstance(live_one, str) and live_one != rebuilt.digests[world]
        for world, live_one in answers.items()
    ):
        outside = Outside(  # read only when needed: published since, after the digests
            on_kafka(events_since(live, rebuilt.folded)),
            on_kafka(events_not_processed_live(live, rebuilt.folded, committed, _warning)),
        )
    _print_comparison(rebuilt.digests, answers, outside)


@dataclass(frozen=True)
class Outside:
    """The events of the events topic the rebuild did not fold and the live workers may have
    (published since it took the topic's ends), and those it folded they may not have yet
    (past their committed offsets): a world either names holds another state live."""

    since: Named
    not_processed: Named

    def why_not(self, world: World) -> str | None:
        """Why `world` is not compared; None when it is."""
        since, waiting = self.since.events_of(world), self.not_processed.events_of(world)
        reasons = [
            *([f"{since} event(s) of it published since the rebuild began"] if since else []),
            *([f"{waiting} event(s) of it not processed live yet"] if waiting else []),
        ]
        return "; ".join(reasons) or None


def _print_comparison(
    digests: Mapping[World, str], answers: Mapping[World, str | Exception], outside: Outside
) -> None:
    """Print each world's verdict (`_compare_with_live`), and end as it says."""
    from streams.show import for_terminal, world_label

    differing = refused = moved = 0
    for world, digest in sorted(digests.items()):
        answer = answers[world]
        if isinstance(answer, Exception):
            refused += 1
            verdict = f"not compared ({answer})"
        elif answer == digest:
            verdict = "same as live"
        elif (why := outside.why_not(world)) is not None:
            moved += 1
            verdict = f"not compared ({why}: live {answer})"
        else:
            differing += 1
            verdict = f"DIFFERS from live {answer}"
        click.echo(for_terminal(f"world {world_label(*world)}: {digest} {verdict}"))
    problems = []
    if differing:
        problems.append(f"{differing} of {len(digests)} world(s) differ from the live worker")
    if refused:
        problems.append(
            f"{refused} of {len(digests)} world(s) not compared: the API key does not read "
            "their tenants; compare each with the digest `rumourmill digest --world W --api-key "
            "KEY` prints, KEY one of its tenant"
        )
    if moved:
        problems.append(
            f"{moved} of {len(digests)} world(s) not compared: the live workers hold other "
            "events of them than the rebuild folded; rebuild such a world again with --world W "
            "while no game plays it"
        )
    if problems:
        failure = click.ClickException("; ".join(problems))
        failure.exit_code = 1 if differing else NOT_ALL_COMPARED
        raise failure


def _data_dir_beside(live: Path, app_id: str) -> Path:
    """The fresh app id's data dir: beside the live one, named after both (`.` is resolved to
    the directory it stands for; `/` has nothing beside it)."""
    resolved = live.resolve()
    if not resolved.name:
        raise click.ClickException(
            f"rebuild: the data dir {live} has no directory beside it; name one with "
            "--into-data-dir"
        )
    return resolved.with_name(f"{resolved.name}-{app_id}")
