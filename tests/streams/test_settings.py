"""Settings: every `RUMOURMILL_*` variable in one checked object, and the README that lists them."""

from __future__ import annotations

import ipaddress
import re
import socket
from pathlib import Path
from socket import AF_INET6

import click
import pytest
from click.testing import CliRunner
from pydantic import ValidationError
from yarl import URL

from streams.app import create_app
from streams.cli import main
from streams.kafka_consumer import SCHEME
from streams.settings import ENV_PREFIX, MOST_BATCH_EVENTS, Settings, SettingsError
from streams.topics import PartitionsDisagree, check_partitions

README = Path(__file__).resolve().parents[2] / "README.md"
ROW = re.compile(r"^\| `(RUMOURMILL_\w+)` \| (?:`(--[\w-]+)`)? *\| ([^|]*) \|", re.MULTILINE)


pytestmark = pytest.mark.usefixtures("clean_environment")
"""No `RUMOURMILL_*` variable of the machine running the tests leaks in."""


def readme_rows() -> list[tuple[str, str | None, str]]:
    """(variable, flag, default as written) of each row of the README's configuration table."""
    text = README.read_text()
    table = text[text.index("## Configuration") :]
    table = table[: table.index("\n\n", table.index("| variable"))]
    return [(name, flag or None, default.strip()) for name, flag, default in ROW.findall(table)]


def test_the_readme_table_lists_every_setting_and_only_settings() -> None:
    listed = [name for name, _, _ in readme_rows()]
    assert len(listed) == len(set(listed))
    assert set(listed) == {f"{ENV_PREFIX}{name.upper()}" for name in Settings.model_fields}


@pytest.mark.parametrize(("variable", "flag", "default"), readme_rows())
def test_the_readme_default_is_the_default(
    monkeypatch: pytest.MonkeyPatch, variable: str, flag: str | None, default: str
) -> None:
    """The default as the README writes it, given as the variable, changes nothing."""
    field = variable.removeprefix(ENV_PREFIX).lower()
    built_in = getattr(Settings(), field)
    monkeypatch.setenv(variable, "" if default == "empty" else default.strip("`"))
    assert getattr(Settings(), field) == built_in


def test_each_flag_in_the_readme_is_an_option_of_some_command() -> None:
    options: set[str] = set()

    def collect(command: click.Command) -> None:
        options.update(o for p in command.params for o in p.opts if o.startswith("--"))
        for sub in getattr(command, "commands", {}).values():
            collect(sub)

    collect(main)
    assert {flag for _, flag, _ in readme_rows() if flag} <= options


@pytest.mark.parametrize(
    ("given", "brokers"),
    [
        ("kafka://kafka-1.internal:9093", ("kafka-1.internal:9093",)),
        ("kafka://a:1;kafka://b:2", ("a:1", "b:2")),
        ("a:1, b:2,kafka://c", ("a:1", "b:2", "c:9092")),
        ("KAFKA://[::1]:9092", ("[::1]:9092",)),
    ],
)
def test_a_broker_is_taken_as_faust_writes_it_and_as_a_list(
    monkeypatch: pytest.MonkeyPatch, given: str, brokers: tuple[str, ...]
) -> None:
    monkeypatch.setenv("RUMOURMILL_BROKER", given)
    settings = Settings.from_env()
    assert settings.broker == brokers
    assert settings.bootstrap == ",".join(brokers)


@pytest.mark.parametrize(
    ("variable", "value", "problem"),
    [
        ("RUMOURMILL_WEB_PORT", "abc", "should be a valid integer"),
        ("RUMOURMILL_WEB_PORT", "70000", "less than or equal to 65535"),
        ("RUMOURMILL_PARTITIONS", "0", "greater than or equal to 1"),
        # past what Kafka's protocol carries: the first topic's creation raised the client's
        # struct error, in a traceback
        ("RUMOURMILL_PARTITIONS", "3000000000", "less than or equal to 2147483647"),
        ("RUMOURMILL_REPLICATION", "40000", "less than or equal to 32767"),
        ("RUMOURMILL_BROKER", "", "at least 1 item"),
        ("RUMOURMILL_BROKER", "http://kafka:9092", "is not host:port or kafka://host:port"),
        ("RUMOURMILL_BROKER", "kafka:port", "Port could not be cast"),
        ("RUMOURMILL_BROKER", "not a host", "is not host:port or kafka://host:port"),
        ("RUMOURMILL_BROKER", "kafka:0", "port 0 is no broker's"),
        ("RUMOURMILL_API_KEYS", "k1:acme,k2", "entry 2 must read KEY:TENANT"),
        ("RUMOURMILL_API_KEYS", "k1:acme,k1:globex", "a key is given twice"),
        ("RUMOURMILL_API_KEYS", "k1: ", "entry 1 must read KEY:TENANT"),
        ("RUMOURMILL_API_KEYS", "clé:acme", "must be visible ASCII without spaces"),
        ("RUMOURMILL_API_KEYS", "k1:acme,k2:..", "entry 2: its tenant is no id an event can"),
        ("RUMOURMILL_API_KEYS", "k1:" + "t" * 129, "String should have at most 128 characters"),
        ("RUMOURMILL_API_KEYS", "k1:k2:acme", "entry 1 holds more than one ':'"),
        ("RUMOURMILL_API_KEY", "k1\n", "must be visible ASCII without spaces"),
        ("RUMOURMILL_MODEL_KEY", "k1 k2", "must be visible ASCII without spaces"),
        ("RUMOURMILL_WEB_HOST", "", "is not a host name or an IP address"),
        ("RUMOURMILL_DATA_DIR", "", "must name a directory"),
        ("RUMOURMILL_KAFKA_CACHE", " ", "must name a directory"),
        ("RUMOURMILL_JAVA", "  ", "must name a program, or be empty"),
        ("RUMOURMILL_MODEL_TIMEOUT_SECONDS", "nan", "should be a finite number"),
        ("RUMOURMILL_WEB_HOST", "my host", "is not a host name or an IP address"),
        # an address with its port was an IPv6 one, an IPv4 out of range a name: both accepted,
        # and the worker failed binding them with a traceback naming no setting
        ("RUMOURMILL_WEB_HOST", "127.0.0.1:6066", "is not a host name or an IP address"),
        ("RUMOURMILL_WEB_HOST", "999.999.999.999", "is not a host name or an IP address"),
        ("RUMOURMILL_WEB_HOST", ":", "is not a host name or an IP address"),
        ("RUMOURMILL_WEB_HOST", "-", "is not a host name or an IP address"),
        ("RUMOURMILL_WEB_HOST", "...", "is not a host name or an IP address"),
        ("RUMOURMILL_BROKER", "999.1.1.1:9092", "is not host:port or kafka://host:port"),
        # a cache of 2**44 MB was taken, and the worker failed opening a partition
        ("RUMOURMILL_BLOCK_CACHE_MB", str(1 << 44), "less than or equal to 1048576"),
        ("RUMOURMILL_LOG_FORMAT", "xml", "'text' or 'json'"),
        ("RUMOURMILL_LOG_LEVEL", "loud", "'debug', 'info'"),
        ("RUMOURMILL_WEB_URL", "127.0.0.1:6066", "an http:// or https:// URL"),
        ("RUMOURMILL_WEB_URL", "http://worker:port", "its port is not 1 to 65535"),
        ("RUMOURMILL_WEB_URL", "http://worker-2:0", "its port is not 1 to 65535"),
        ("RUMOURMILL_MODEL_URL", "http://model:0/v1", "its port is not 1 to 65535"),
        # a generated password's `/` read as a bad port, and nothing said to encode it; one
        # starting with digits, or a token's, was taken, the rest of the secret sent as a path
        ("RUMOURMILL_MODEL_URL", "http://bot:ab/cd@model:8080/v1", "is not percent-encoded"),
        ("RUMOURMILL_RERANK_URL", "http://bot:ab?cd@model:8080/v1", "is not percent-encoded"),
        ("RUMOURMILL_MODEL_URL", "http://admin:12/Zsecret@model:8080/v1", "percent-encoded"),
        ("RUMOURMILL_MODEL_URL", "http://sk-abc/def@model:8080/v1", "is not percent-encoded"),
        ("RUMOURMILL_MODEL_URL", "http://u:p@model:8080/v1?api-version=1", "path only"),
        ("RUMOURMILL_WEB_URL", "http://a worker", "an http:// or https:// URL"),
        ("RUMOURMILL_WEB_URL", "http://worker:6066/?x=1", "host, port and path only"),
        # urlsplit drops a newline, and the read commands failed in a traceback sending it
        ("RUMOURMILL_WEB_URL", "http://worker:6066\n", "a space or a control character"),
        ("RUMOURMILL_MODEL_URL", " http://model:8080/v1", "a space or a control character"),
        ("RUMOURMILL_WEB_URL", "http://worker:6066?", "host, port and path only"),
        ("RUMOURMILL_WEB_URL", "http://worker:6066/#", "host, port and path only"),
        ("RUMOURMILL_WEB_URL", "http://user:pw@worker:6066", "send a user and password"),
        ("RUMOURMILL_TOPIC_PREFIX", "my topics", "should match pattern"),
        ("RUMOURMILL_KAFKA_VERSION", "latest", "should match pattern"),
    ],
)
def test_a_bad_value_is_refused_with_the_variable_and_what_is_wrong(
    monkeypatch: pytest.MonkeyPatch, variable: str, value: str, problem: str
) -> None:
    monkeypatch.setenv(variable, value)
    with pytest.raises(SettingsError) as refused:
        Settings.from_env()
    assert str(refused.value).startswith(f"{variable}=")
    assert problem in str(refused.value)
    if "_KEY" in variable:  # a secret is not shown, in a terminal or a log
        assert str(refused.value).startswith(f"{variable}=(secret, not shown): ")
        assert all(key not in str(refused.value) for key in ("k1", "k2", "clé"))


@pytest.mark.parametrize(
    ("variable", "value"),
    [
        ("RUMOURMILL_WEB_HOST", "localhost."),  # fully qualified, as Kubernetes names them
        ("RUMOURMILL_BROKER", "kafka.internal.:9092"),
        ("RUMOURMILL_WEB_URL", "http://worker-1.rumourmill.svc.cluster.local.:6066"),
        ("RUMOURMILL_WEB_HOST", "fe80::1%eth0"),
        ("RUMOURMILL_WEB_HOST", "my_service"),
    ],
)
def test_host_names_as_deployments_write_them_are_taken(
    monkeypatch: pytest.MonkeyPatch, variable: str, value: str
) -> None:
    monkeypatch.setenv(variable, value)
    Settings.from_env()


SERVICES = pytest.mark.parametrize(
    ("service", "endpoint", "named"),
    [("MODEL", "chat/completions", "NAME"), ("RERANK", "rerank", "MODEL")],
)
"""The services asked over HTTP: the endpoint each one's URL is the API of, and the variable
after the service's name that names the model asked."""


@SERVICES
def test_a_service_url_without_a_model_name_is_refused(
    monkeypatch: pytest.MonkeyPatch, service: str, endpoint: str, named: str
) -> None:
    """Ollama, vLLM and hosted APIs refuse a call naming no model: every judgement fell back to
    the rules, the log saying only that the model gave no answer."""
    monkeypatch.setenv(f"RUMOURMILL_{service}_URL", "http://127.0.0.1:11434/v1")
    with pytest.raises(
        SettingsError, match=rf"^RUMOURMILL_{service}_{named}='': is empty, and RUMOURMILL"
    ):
        Settings.from_env()
    monkeypatch.setenv(f"RUMOURMILL_{service}_{named}", " llama3.2 ")  # sent as given
    with pytest.raises(SettingsError, match=r"' llama3\.2 ': begins or ends with a space"):
        Settings.from_env()
    monkeypatch.setenv(f"RUMOURMILL_{service}_{named}", "llama3.2")
    assert getattr(Settings.from_env(), f"{service}_{named}".lower()) == "llama3.2"


@pytest.mark.parametrize(
    ("variable", "value", "shown"),
    [
        ("MODEL_URL", "http://mill:hunter2@model:8080/v1?x=1", "'http://model:8080/v1?x=1'"),
        ("MODEL_URL", "https://mill:hunter2@model:port/v1", "(not shown: it may hold a password)"),
        ("MODEL_URL", "http://mill:hunter/2@model/v1", "(not shown: it may hold a password)"),
        ("WEB_URL", "http://mill:hunter2@worker:6066", "'http://worker:6066'"),
        ("BROKER", "kafka://mill:hunter2@kafka:9092", "'kafka://kafka:9092'"),
        ("BROKER", "mill:hunter2@kafka:9092", "(not shown: it may hold a password)"),
        ("BROKER", "k1:9092,kafka://mill:hunter2@k2:9092", "(not shown: it may hold a password)"),
    ],
)
def test_a_refused_url_is_shown_without_its_user_and_password(
    monkeypatch: pytest.MonkeyPatch, variable: str, value: str, shown: str
) -> None:
    """A model behind basic auth is given as `http://USER:PASSWORD@HOST/v1`: a mistake in it
    printed the password on the terminal, or in the log of a worker started by a supervisor.
    (A `/` in a password, not written `%2F`, ends the host: its start reads as a port.) A broker
    address holds no password, but `kafka://USER:PASSWORD@HOST` is a natural mistake."""
    monkeypatch.setenv(f"{ENV_PREFIX}{variable}", value)
    with pytest.raises(SettingsError) as refused:
        Settings.from_env()
    assert str(refused.value).startswith(f"{ENV_PREFIX}{variable}={shown}: ")
    assert "hunter" not in str(refused.value) and "mill" not in str(refused.value)


def test_an_ipv6_web_host_makes_a_url_other_workers_can_reach(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("RUMOURMILL_WEB_HOST", "::1")
    assert Settings.from_env().canonical_url == "http://[::1]:6066"


def test_a_worker_bound_to_every_interface_gives_the_others_its_own_address(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """As the image binds it: every replica said `http://0.0.0.0:6066`, so each sent the reads
    of the worlds it does not hold to itself, and answered them 503."""
    monkeypatch.setenv("RUMOURMILL_WEB_HOST", "0.0.0.0")
    address = URL(Settings.from_env().canonical_url)
    assert (address.host, address.port) == (socket.gethostbyname(socket.gethostname()), 6066)
    monkeypatch.setenv("RUMOURMILL_WEB_URL", "http://worker-3:6066")
    assert Settings.from_env().canonical_url == "http://worker-3:6066"  # given, it stands


def test_a_worker_bound_to_every_ipv6_interface_gives_an_ipv6_address(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Bound to `::`, a worker takes IPv6 alone: the IPv4 address of its host name refused
    every connection. Its host name's IPv6 address, or `::` as before where it has none."""
    monkeypatch.setenv("RUMOURMILL_WEB_HOST", "::")
    host = str(URL(Settings.from_env().canonical_url).host)
    assert ipaddress.ip_address(host).version == 6
    try:
        own = {found[4][0] for found in socket.getaddrinfo(socket.gethostname(), None, AF_INET6)}
    except OSError:
        own = set()
    assert host in own if own else host == "::"


@pytest.mark.parametrize(
    ("bound", "asked"),
    [
        ("0.0.0.0", "http://127.0.0.1:7001"),
        ("::", "http://[::1]:7001"),
        ("10.1.2.3", "http://10.1.2.3:7001"),
        ("::1", "http://[::1]:7001"),
    ],
)
def test_a_health_check_asks_the_worker_where_it_listens_not_a_load_balancer(
    monkeypatch: pytest.MonkeyPatch, bound: str, asked: str
) -> None:
    """The image's health check asked 127.0.0.1 whatever the worker bound, so a worker on one
    address of its own was never healthy; `rumourmill ready` asks its bind address (loopback
    for every interface), never `RUMOURMILL_WEB_URL`, which may be a load balancer's."""
    monkeypatch.setenv("RUMOURMILL_WEB_HOST", bound)
    monkeypatch.setenv("RUMOURMILL_WEB_PORT", "7001")
    monkeypatch.setenv("RUMOURMILL_WEB_URL", "http://balancer:80")
    assert Settings.from_env().own_url == asked


def test_an_event_limit_whose_dead_letters_would_not_fit_a_message_is_refused(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A dead letter carries its message's bytes in base64 to the dead-letter topic: lowering
    the changelog's batches (for a broker that takes smaller messages) asks for a lower event
    limit too, and says how low."""
    monkeypatch.setenv("RUMOURMILL_CHANGELOG_BATCH_BYTES", "16384")
    with pytest.raises(SettingsError) as refused:
        Settings.from_env()
    assert str(refused.value).startswith("RUMOURMILL_MAX_EVENT_BYTES=262144: must be at most 11468")
    monkeypatch.setenv("RUMOURMILL_MAX_EVENT_BYTES", "11468")
    assert Settings.from_env().max_event_bytes == 11468


@SERVICES
def test_a_key_beside_a_user_and_password_in_the_service_url_is_refused(
    monkeypatch: pytest.MonkeyPatch, service: str, endpoint: str, named: str
) -> None:
    """Both were taken, and every call to the model failed before it was sent (a request has
    one Authorization header), each judgement left to the rules with 'could not be reached'."""
    monkeypatch.setenv(f"RUMOURMILL_{service}_URL", "http://user:pass@127.0.0.1:8000/v1")
    monkeypatch.setenv(f"RUMOURMILL_{service}_{named}", "m")
    monkeypatch.setenv(f"RUMOURMILL_{service}_KEY", "sk-0123")
    with pytest.raises(SettingsError) as refused:
        Settings.from_env()
    assert str(refused.value).startswith(
        f"RUMOURMILL_{service}_KEY=(secret, not shown): is set, and RUMOURMILL_{service}_URL has"
    )
    monkeypatch.delenv(f"RUMOURMILL_{service}_KEY")
    settings = Settings.from_env()
    assert getattr(settings, f"{service.lower()}_url") == "http://user:pass@127.0.0.1:8000/v1"


@SERVICES
def test_a_service_url_naming_the_endpoint_itself_is_refused(
    monkeypatch: pytest.MonkeyPatch, service: str, endpoint: str, named: str
) -> None:
    """rumourmill posts to MODEL_URL/chat/completions (RERANK_URL/rerank): a URL copied with the
    endpoint on it was posted to .../chat/completions/chat/completions, a 404 at every call."""
    monkeypatch.setenv(f"RUMOURMILL_{service}_{named}", "m")
    monkeypatch.setenv(f"RUMOURMILL_{service}_URL", f"http://127.0.0.1:11434/v1/{endpoint}/")
    with pytest.raises(SettingsError) as refused:
        Settings.from_env()
    assert "names the endpoint: give the API's URL it is under" in str(refused.value)
    assert f"rumourmill posts to URL/{endpoint} " in str(refused.value)
    monkeypatch.setenv(f"RUMOURMILL_{service}_URL", "http://127.0.0.1:11434/v1")
    assert getattr(Settings.from_env(), f"{service.lower()}_url") == "http://127.0.0.1:11434/v1"


@pytest.mark.parametrize("value", [",", " , , ", ",,"])
def test_api_keys_of_separators_alone_are_refused_not_taken_for_none(
    value: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`RUMOURMILL_API_KEYS="${A},${B}"` with both unset read as no keys at all: every read in,
    any tenant named by `tenant_id`, and nothing said."""
    monkeypatch.setenv("RUMOURMILL_API_KEYS", value)
    with pytest.raises(SettingsError, match="names no KEY:TENANT entry"):
        Settings.from_env()
    monkeypatch.setenv("RUMOURMILL_API_KEYS", "")
    assert Settings.from_env().api_keys == {}


def test_flags_override_variables_and_are_named_when_wrong(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("RUMOURMILL_PARTITIONS", "8")
    assert Settings.from_env(partitions=None).partitions == 8
    assert Settings.from_env(partitions=2).partitions == 2
    with pytest.raises(SettingsError, match=r"^--partitions=0: "):
        Settings.from_env(partitions=0)


def test_api_keys_and_tenants_are_read_without_the_spaces_around_them() -> None:
    """A key configured as 'k2 ' never matched the stripped key a client presents (401 for
    ever), and a tenant ' acme' was no tenant's (404 on every read)."""
    settings = Settings(api_keys=" k1 : acme , k2 :globex", data_dir=Path("/tmp/x"))
    assert settings.api_keys == {"k1": "acme", "k2": "globex"}


def test_settings_are_frozen_and_travel_to_a_child_process_unchanged(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    settings = Settings(broker="a:1,b:2", api_keys="k1:acme,k2:other", data_dir=Path("/tmp/x"))
    with pytest.raises(ValidationError):
        settings.partitions = 3  # type: ignore[misc]
    for variable, value in settings.environment().items():
        monkeypatch.setenv(variable, value)
    assert Settings() == settings


def test_a_command_stops_at_start_on_a_bad_variable() -> None:
    result = CliRunner().invoke(main, ["worker"], env={"RUMOURMILL_WEB_PORT": "abc"})
    assert result.exit_code == 1
    assert "RUMOURMILL_WEB_PORT='abc': Input should be a valid integer" in result.output


@pytest.mark.parametrize(
    ("flags", "variable", "named"),
    [({"partitions": 2}, None, "--partitions"), ({}, "2", "RUMOURMILL_PARTITIONS")],
)
def test_a_partition_count_the_topics_disagree_with_is_named_as_it_was_given(
    monkeypatch: pytest.MonkeyPatch, flags: dict[str, int], variable: str | None, named: str
) -> None:
    """`--partitions 8` typed and no variable set: the refusal named RUMOURMILL_PARTITIONS."""
    monkeypatch.delenv("RUMOURMILL_PARTITIONS", raising=False)
    if variable is not None:
        monkeypatch.setenv("RUMOURMILL_PARTITIONS", variable)
    settings = Settings.from_env(**flags)
    with pytest.raises(PartitionsDisagree) as refused:
        check_partitions({"rumourmill.events": 1}, settings)
    assert f"the settings say 2 ({named});" in str(refused.value)


def test_what_a_rebuild_says_it_sends_for_stopped_workers_follows_the_change_feed() -> None:
    """With `RUMOURMILL_CHANGES=false` a rebuild beside stopped workers sends no change record,
    and said it had sent some."""
    from streams.outputs import outputs_named

    assert outputs_named(Settings()) == "acks, dead letters and change records"
    assert outputs_named(Settings(changes=False)) == "acks and dead letters"


FAUST_OWN_VARIABLES = {
    "WEB_PORT": "tcp://10.96.0.5:80",  # what Kubernetes gives every pod for a Service `web`
    "WEB_HOST": "10.9.9.9",
    "TOPIC_PARTITIONS": "8",
    "TABLE_STANDBY_REPLICAS": "2",
    "PROCESSING_GUARANTEE": "exactly_once",
    "BROKER_URL": "kafka://other:9092",
    "APP_DATADIR": "/elsewhere",
    "STREAM_BUFFER_MAXSIZE": "10",
}


def test_faust_own_variables_change_none_of_the_workers_settings(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    for variable, value in FAUST_OWN_VARIABLES.items():
        monkeypatch.setenv(variable, value)
    monkeypatch.setenv("RUMOURMILL_DATA_DIR", str(tmp_path))
    monkeypatch.setenv("RUMOURMILL_STANDBYS", "1")
    settings = Settings.from_env()
    conf = create_app(settings).app.conf
    assert (conf.web_port, conf.web_host) == (settings.web_port, settings.web_host)
    assert (conf.topic_partitions, conf.table_standby_replicas) == (settings.partitions, 1)
    assert conf.processing_guarantee.value == "at_least_once"
    assert [str(url) for url in conf.broker] == [
        f"{SCHEME}://{address}" for address in settings.broker
    ]
    assert Path(conf.datadir) == tmp_path
    assert conf.stream_buffer_maxsize == MOST_BATCH_EVENTS
