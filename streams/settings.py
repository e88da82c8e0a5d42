"""Every setting of rumourmill: `RUMOURMILL_*` environment variables, overridden by CLI flags.

One frozen object, validated as a whole when a command starts, so a bad value stops it at
once with the variable's name and what is wrong (`Settings.from_env`), never later in the
middle of a stream. The README's configuration table lists the same variables; a test holds
the two together.
"""

from __future__ import annotations

import difflib
import ipaddress
import re
import socket
import ssl
from collections.abc import Mapping
from functools import cache
from pathlib import Path
from typing import Annotated, Any, Literal, NamedTuple
from urllib.parse import urlsplit

from pydantic import (
    AfterValidator,
    BeforeValidator,
    Field,
    PrivateAttr,
    ValidationError,
    ValidationInfo,
    field_validator,
)
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict
from yarl import URL

from localbroker import DEFAULT_KAFKA_CACHE, DEFAULT_KAFKA_VERSION
from projections.intake import id_problem

ENV_PREFIX = "RUMOURMILL_"
KAFKA_PORT = 9092
DEFAULT_BATCH_EVENTS = 500
"""The most events the ingest agent takes at once, unless `RUMOURMILL_BATCH_EVENTS` says."""
EVENT_SHARE_OF_BATCH = 0.7
"""The most `max_event_bytes` may be of `changelog_batch_bytes` (which also bounds every other
message the worker sends to the broker's limit): base64 makes a message's bytes a third larger,
and its dead letter, with its reason and where it was, must fit one message of the dead-letter
topic."""
MOST_BATCH_EVENTS = 4096
"""What the worker's stream buffer holds (Faust's `stream_buffer_maxsize`, `streams.app`): no
batch can take more."""


class Topics(NamedTuple):
    """Rumourmill's topics, named by kind (`rumourmill.events`, `rumourmill.acks`...)."""

    events: str
    acks: str
    deadletter: str
    policies: str
    judgements: str
    changes: str
    """Empty when the change feed is off (`RUMOURMILL_CHANGES=false`)."""


class SettingsError(ValueError):
    """A setting with a bad value; the message names the variable (or flag) and the problem."""


def broker_addresses(value: object) -> object:
    """`host:port`, `kafka://host:port` or a list of them (`,` or `;`) -> ("host:port", ...)."""
    if not isinstance(value, str):
        return value
    return tuple(_broker_address(item.strip()) for item in re.split(r"[,;]", value) if item.strip())


def _broker_address(item: str) -> str:
    if "@" in item:  # a user and password, not quoted back: SASL settings carry them
        raise ValueError(
            "a broker address holds no user or password: "
            "RUMOURMILL_KAFKA_SASL_USERNAME and RUMOURMILL_KAFKA_SASL_PASSWORD carry them"
        )
    scheme, separator, rest = item.rpartition("://")
    if separator and scheme.lower() != "kafka":
        raise ValueError(f"{item!r} is not host:port or kafka://host:port")
    parts = urlsplit(f"//{rest}")
    try:
        port = KAFKA_PORT if parts.port is None else parts.port
    except ValueError as error:
        raise ValueError(f"{item!r}: {error}") from None
    if not port:
        raise ValueError(f"{item!r}: port 0 is no broker's")
    if (
        not parts.hostname
        or not is_host(parts.hostname)
        or parts.path
        or parts.query
        or parts.fragment
    ):
        raise ValueError(f"{item!r} is not host:port or kafka://host:port")
    return f"{url_host(parts.hostname)}:{port}"


HOST_LABEL = re.compile(r"[A-Za-z0-9_]([A-Za-z0-9_-]{0,61}[A-Za-z0-9_])?")
"""One dot-separated label of a host name (an underscore as container networks name them)."""


def is_host(value: str) -> bool:
    """Whether `value` is a host name, an IPv4 address or an IPv6 one (unbracketed): an
    address with a port (`127.0.0.1:6066`) or an IPv4 address out of range (`999.1.1.1`) was
    taken for an IPv6 one or a name, and the worker failed binding it, naming no setting."""
    labels = value.removesuffix(".").split(".")  # a trailing dot: a fully qualified name
    if ":" in value or all(label.isdigit() for label in labels):
        try:
            ipaddress.ip_address(value)
        except ValueError:
            return False
        return True
    return len(value) <= 253 and all(HOST_LABEL.fullmatch(label) for label in labels)


@cache
def this_machine(every_interface: str) -> str:
    """This machine's address, of the family `every_interface` is (`0.0.0.0` or `::`: a server
    bound to `::` takes IPv6 alone), as its host name resolves (a container's or a pod's own,
    as `hostname -i` says); `every_interface` itself where it resolves to none, as before."""
    family = socket.AF_INET6 if ":" in every_interface else socket.AF_INET
    try:
        found = socket.getaddrinfo(socket.gethostname(), None, family, socket.SOCK_STREAM)
    except OSError:
        return every_interface
    return str(found[0][4][0]) if found else every_interface


def unspecified(host: str) -> bool:
    """Whether `host` is the address of every interface (`0.0.0.0`, `::`), which names none."""
    try:
        return ipaddress.ip_address(host).is_unspecified
    except ValueError:
        return False  # a host name


def url_host(host: str) -> str:
    """`host` as a URL or an address with a port writes it: an IPv6 address in brackets."""
    return f"[{host}]" if ":" in host else host


def bind_address(value: object) -> object:
    """The address the web server binds: a host name or an IP address, nothing else."""
    if isinstance(value, str) and not is_host(value.strip("[]")):
        raise ValueError(f"{value!r} is not a host name or an IP address")
    return value.strip("[]") if isinstance(value, str) else value


def named_directory(value: object) -> object:
    """A directory's path, never empty (which `Path` would take for the current directory)."""
    if isinstance(value, str) and not value.strip():
        raise ValueError("must name a directory")
    return value


Directory = Annotated[Path, BeforeValidator(named_directory)]
"""A directory's path, never empty."""


def named_program(value: str) -> str:
    """A program's path, or empty (the default); never blank, which no program is."""
    if value and not value.strip():
        raise ValueError("must name a program, or be empty for the default")
    return value


def bearer_key(key: str) -> str:
    """An API key a client can send as `Authorization: Bearer KEY`: visible ASCII only."""
    if not key.isascii() or not key.isprintable() or " " in key:
        raise ValueError("a key sent as a bearer key must be visible ASCII without spaces")
    return key


BearerKey = Annotated[str, AfterValidator(lambda key: key and bearer_key(key))]
"""A key sent as `Authorization: Bearer KEY`, or none (empty)."""
SECRETS = frozenset({"api_keys", "api_key", "model_key", "rerank_key", "kafka_sasl_password"})
"""The settings a bad value of is not shown: it would be a secret in a terminal or a log."""
URLS = frozenset({"web_url", "model_url", "rerank_url", "broker", "test_broker"})
"""The settings a bad value of is shown without its user and password (`without_credentials`):
a broker address holds none, but one written so is refused without its password shown."""
HIDDEN_URL = "(not shown: it may hold a password)"
ENDPOINTS = {"model_url": "chat/completions", "rerank_url": "rerank"}
"""The endpoint each service's URL is the API of: rumourmill posts to URL/ENDPOINT."""


def without_credentials(url: str) -> str:
    """`url` as a message or a log may show it: without the user and password a client sends
    from it (`http://USER:PASSWORD@HOST/v1`, basic auth); not at all when it cannot be read
    so, or still holds an `@` (a `/` in a password, not written `%2F`, ends the host early)."""
    if "@" not in url:
        return url
    try:
        shown = str(URL(url).with_user(None))
    except ValueError:
        return HIDDEN_URL
    return HIDDEN_URL if "@" in shown else shown


def tenants_by_api_key(value: object) -> object:
    """`key1:tenant1,key2:tenant2` -> {key: tenant}; spaces around a key or a tenant are not
    part of it (a client's `Bearer key` is read stripped too), and a key given twice is refused
    rather than silently reading the last tenant named. So is a tenant no event can carry (its
    key would read nothing, for ever), and an entry with a second `:`, which would split a key
    holding one in two. A value of separators alone (`,`) is refused, not taken for no keys."""
    if not isinstance(value, str):
        return value
    keys: dict[str, str] = {}
    entries = filter(None, (part.strip() for part in value.split(",")))
    for number, item in enumerate(entries, start=1):
        key, separator, tenant = (part.strip() for part in item.partition(":"))
        if not separator or not key or not tenant:
            raise ValueError(f"entry {number} must read KEY:TENANT")
        if ":" in tenant:
            raise ValueError(
                f"entry {number} holds more than one ':': it must read KEY:TENANT, and neither"
                " may contain ':'"
            )
        problem = id_problem(tenant)
        if problem is not None:
            raise ValueError(f"entry {number}: its tenant is no id an event can carry ({problem})")
        if key in keys:
            raise ValueError(f"a key is given twice (for {keys[key]!r} and {tenant!r})")
        keys[bearer_key(key)] = tenant
    if value.strip() and not keys:  # `${A},${B}` with both unset: reads would need no key
        raise ValueError(
            "names no KEY:TENANT entry, which would let every read in without a key: give"
            " entries, or leave it empty for a worker that serves every tenant unkeyed"
        )
    return keys


Brokers = Annotated[tuple[str, ...], NoDecode, BeforeValidator(broker_addresses)]
"""Kafka bootstrap addresses, normalised to `host:port`."""
TopicName = Annotated[str, Field(pattern=r"^[A-Za-z0-9._-]{1,200}$")]
Port = Annotated[int, Field(ge=1, le=65535)]
Positive = Annotated[int, Field(ge=1)]
SecurityProtocol = Literal["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"]
SASL_PROTOCOLS = frozenset({"SASL_PLAINTEXT", "SASL_SSL"})
TLS_PROTOCOLS = frozenset({"SSL", "SASL_SSL"})
KAFKA_SECURITY = (
    "kafka_security_protocol",
    "kafka_sasl_mechanism",
    "kafka_sasl_username",
    "kafka_sasl_password",
    "kafka_ssl_keyfile",
    "kafka_ssl_certfile",
    "kafka_ssl_cafile",
)
"""The settings of how the Kafka clients talk to the brokers (`streams.kafka_clients`)."""
SaslSetting = Annotated[str, Field(validate_default=True)]
"""A SASL setting, checked against the protocol even when not given (`_sasl_as_the_protocol`)."""
TlsFile = Annotated[str, Field(validate_default=True)]
"""A file of the TLS settings: empty (none) or a file that exists."""


def upper_case(value: object) -> object:
    """Kafka's names of protocols and mechanisms, however they were typed."""
    return value.upper() if isinstance(value, str) else value


def encrypted_key(*_: object) -> str:
    """Called by OpenSSL for the password of an encrypted private key: refused, never asked
    for on the terminal."""
    raise ValueError("the key is encrypted: give an unencrypted (PKCS#8 or PEM) key file")


class Settings(BaseSettings):
    """Everything rumourmill is told from outside; field `name` is `RUMOURMILL_NAME`."""

    model_config = SettingsConfigDict(env_prefix=ENV_PREFIX, frozen=True, extra="forbid")
    _flags: dict[str, str] = PrivateAttr(default_factory=dict)
    """The fields given by a command's flags, and each flag's name (`named`)."""

    broker: Annotated[Brokers, Field(min_length=1)] = ("127.0.0.1:9092",)
    """Kafka bootstrap brokers: `host:port` or `kafka://host:port`, several separated by `,`."""
    data_dir: Directory = Path("data")
    """RocksDB tables of this worker."""
    web_host: Annotated[str, BeforeValidator(bind_address)] = "127.0.0.1"
    """The address the web server binds."""
    web_port: Port = 6066
    """The port of the HTTP reads."""
    web_url: str = ""
    """How other workers (and the read commands) reach this one; empty: http://WEB_HOST:WEB_PORT.
    A worker's own is http://HOST:PORT (`worker_url_problem`)."""
    app_id: TopicName = "rumourmill"
    """Consumer group, table and changelog names."""
    partitions: Annotated[int, Field(ge=1, le=2**31 - 1)] = 4  # Kafka's count is 32 bits
    """Partitions of the events, acks, dead-letter, changes and judgements topics: the count they
    are made with, and the one they (and the worker's state changelog) must have
    (`streams.topics.ensure_topics`)."""
    replication: Annotated[int, Field(ge=1, le=2**15 - 1)] = 1
    """Replication factor of created topics (16 bits in Kafka's protocol: a larger one stopped
    the first topic's creation with the client's traceback)."""
    stop_drain_seconds: Annotated[float, Field(ge=0, le=60, allow_inf_nan=False)] = 0.0
    """How long a worker told to stop (SIGTERM, Ctrl-C) goes on serving, `/ready` answering
    503 `stopping` meanwhile, before its stop begins: for a load balancer polling `/ready` to
    take it out first (its web server went some 20 ms after the signal)."""
    standbys: Annotated[int, Field(ge=0)] = 0
    """Standby replicas of the state: other workers keep each partition's copy up to date, so a
    failover takes over in seconds instead of replaying the whole changelog."""
    topic_prefix: TopicName = "rumourmill"
    """Topics are PREFIX.events, PREFIX.acks..."""
    changelog_batch_bytes: Annotated[int, Field(ge=16 * 1024, le=1_000_000)] = 1_000_000
    """The most one record batch of the state changelog holds (`streams.changelog`); lower it
    for a broker whose message limit is under 1 MB. A deletion or batch larger than this is sent
    as several batches, one after the other."""
    max_event_bytes: Positive = 256 * 1024
    """Larger messages are dead-lettered, with their first MAX_EVENT_BYTES bytes. At most
    `EVENT_SHARE_OF_BATCH` of `changelog_batch_bytes`: a dead letter carries its bytes in
    base64 (a third more) to the dead-letter topic (the outbox keeps none of them:
    `projections.delivery.without_bytes`)."""
    batch_events: Annotated[int, Field(ge=1, le=MOST_BATCH_EVENTS)] = DEFAULT_BATCH_EVENTS
    """The most events the ingest agent takes at once while a backlog waits: their state
    changes go to the changelog as one record batch per partition, and their acks, change-feed
    records and changelog batches in one round of sends. Larger batches cost less per event
    (fewer sends, and fewer requests for the broker to serve), but a batch holds the worker's
    event loop while it is projected, so reads wait up to one batch's projecting (some 0.3 s
    at 500 on 2 cores). With no backlog, a batch is what came within 5 ms."""
    changes: bool = True
    """Publish the change feed (PREFIX.changes): beliefs formed and weakened, relations changed,
    rumours passed, worlds deleted. `false`: no topic, no change worked out or sent."""
    block_cache_mb: Annotated[int, Field(ge=1, le=1 << 20)] = 16
    """RocksDB block cache (and write buffer) per partition."""
    log_level: Literal["debug", "info", "warning", "error", "critical"] = "info"
    """The worker's log level."""
    log_format: Literal["text", "json"] = "text"
    """`json`: one JSON object per log line, for machines."""
    api_keys: Annotated[dict[str, str], NoDecode, BeforeValidator(tenants_by_api_key)] = Field(
        default_factory=dict
    )
    """`KEY:TENANT,...`; when set, reads need `Authorization: Bearer KEY` (empty: no auth)."""
    api_key: BearerKey = ""
    """The key the read commands (`npc`, `provenance`, `digest`) send."""
    kafka_security_protocol: Annotated[SecurityProtocol, BeforeValidator(upper_case)] = "PLAINTEXT"
    """How every Kafka client of rumourmill (the worker's and the commands') talks to the
    brokers: in the clear, over TLS, with a SASL login, or both (`streams.kafka_clients`)."""
    kafka_sasl_mechanism: Annotated[
        Literal["", "PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"],
        BeforeValidator(upper_case),
        Field(validate_default=True),
    ] = ""
    """The SASL mechanism of a SASL protocol (required with one, refused without)."""
    kafka_sasl_username: SaslSetting = ""
    """The SASL user (Confluent Cloud: the API key)."""
    kafka_sasl_password: SaslSetting = ""
    """The SASL password (Confluent Cloud: the API secret); a secret, never shown."""
    kafka_ssl_keyfile: TlsFile = ""
    """The private key of `kafka_ssl_certfile`, when that file does not hold it (mutual TLS)."""
    kafka_ssl_certfile: TlsFile = ""
    """A client certificate (PEM) rumourmill shows the brokers (mutual TLS); empty: none."""
    kafka_ssl_cafile: TlsFile = ""
    """The CA certificates (PEM) the brokers' certificates are checked against; empty: the
    system's."""
    kafka_version: Annotated[str, Field(pattern=r"^\d+\.\d+\.\d+$")] = DEFAULT_KAFKA_VERSION
    """The Apache Kafka version `rumourmill broker` and the tests fetch from Maven Central."""
    kafka_cache: Directory = DEFAULT_KAFKA_CACHE
    """Where the Kafka jars are kept (in CACHE/kafka-VERSION)."""
    java: Annotated[str, AfterValidator(named_program)] = ""
    """The java that runs Apache Kafka; empty: $JAVA_HOME/bin/java, else java on the PATH."""
    test_broker: Brokers = ()
    """Tests and benchmarks: use this broker instead of starting Apache Kafka."""
    model_url: str = ""
    """An OpenAI-compatible chat-completions API (`http://127.0.0.1:11434/v1`: rumourmill posts
    to `MODEL_URL/chat/completions`); empty: no model, the rules make every judgement."""
    model_name: str = ""
    """The model asked (the request's `model`)."""
    model_key: BearerKey = ""
    """Sent as `Authorization: Bearer KEY` when set."""
    model_timeout_seconds: Annotated[float, Field(gt=0, le=600, allow_inf_nan=False)] = 10.0
    """One call's limit; each world's `memory.model.deadline_ms` also bounds an event's calls."""
    model_concurrency: Positive = 8
    """Calls to the model in flight at once, per worker."""
    rerank_url: str = ""
    """A reranking API of the Cohere and Jina protocol (`http://127.0.0.1:8000/v1`: rumourmill
    posts to `RERANK_URL/rerank`, as vLLM, llama.cpp's server, Infinity, Jina and Cohere serve
    it); empty: no reranker, recall chooses by its searches' fused ranking (section 9, step 4)."""
    rerank_model: str = ""
    """The reranking model asked (the request's `model`)."""
    rerank_key: BearerKey = ""
    """Sent as `Authorization: Bearer KEY` when set."""
    rerank_timeout_seconds: Annotated[float, Field(gt=0, le=60, allow_inf_nan=False)] = 2.0
    """One reranking's limit: a recall waits for it that long at most, then answers without it."""
    rerank_concurrency: Positive = 4
    """Rerankings in flight at once, per worker: a recall finding every one taken answers
    without one rather than wait."""

    @field_validator("log_level", "log_format", mode="before")
    @classmethod
    def _lower_case(cls, value: object) -> object:
        return value.lower() if isinstance(value, str) else value

    @field_validator("kafka_sasl_mechanism", "kafka_sasl_username", "kafka_sasl_password")
    @classmethod
    def _sasl_as_the_protocol(cls, value: str, info: ValidationInfo) -> str:
        protocol = info.data.get("kafka_security_protocol")
        if protocol is None:  # itself refused
            return value
        if protocol in SASL_PROTOCOLS and not value:
            raise ValueError(f"required with {ENV_PREFIX}KAFKA_SECURITY_PROTOCOL={protocol}")
        if protocol not in SASL_PROTOCOLS and value:
            raise ValueError(
                f"only used with {ENV_PREFIX}KAFKA_SECURITY_PROTOCOL=SASL_PLAINTEXT or SASL_SSL"
                f" (it is {protocol})"
            )
        return value

    @field_validator("kafka_ssl_keyfile", "kafka_ssl_certfile", "kafka_ssl_cafile")
    @classmethod
    def _tls_file(cls, value: str, info: ValidationInfo) -> str:
        protocol = info.data.get("kafka_security_protocol")
        if not value or protocol is None:
            return value
        if protocol not in TLS_PROTOCOLS:
            raise ValueError(
                f"only used with {ENV_PREFIX}KAFKA_SECURITY_PROTOCOL=SSL or SASL_SSL"
                f" (it is {protocol})"
            )
        if not Path(value).is_file():
            raise ValueError("no such file")
        return value

    @field_validator("kafka_ssl_certfile")
    @classmethod
    def _certificate_with_its_key(cls, value: str, info: ValidationInfo) -> str:
        keyfile = info.data.get("kafka_ssl_keyfile")
        if keyfile and not value:
            raise ValueError(f"required with {ENV_PREFIX}KAFKA_SSL_KEYFILE (the key's certificate)")
        if value and keyfile is not None:
            try:
                ssl.create_default_context().load_cert_chain(
                    value, keyfile or None, password=encrypted_key
                )
            except (ssl.SSLError, OSError, ValueError) as error:
                raise ValueError(f"not a certificate with its private key: {error}") from None
        return value

    @field_validator("kafka_ssl_cafile")
    @classmethod
    def _certificates(cls, value: str) -> str:
        if value:
            try:
                ssl.create_default_context(cafile=value)
            except (ssl.SSLError, OSError) as error:
                raise ValueError(f"no CA certificates (PEM) in it: {error}") from None
        return value

    @field_validator("max_event_bytes")
    @classmethod
    def _dead_letters_fit_a_message(cls, value: int, info: ValidationInfo) -> int:
        batch_bytes = info.data.get("changelog_batch_bytes")
        if batch_bytes is not None and value > batch_bytes * EVENT_SHARE_OF_BATCH:
            raise ValueError(
                f"must be at most {int(batch_bytes * EVENT_SHARE_OF_BATCH)}"
                f" ({EVENT_SHARE_OF_BATCH:.0%} of RUMOURMILL_CHANGELOG_BATCH_BYTES, {batch_bytes}):"
                " a dead letter carries the message's bytes in base64 to the dead-letter topic"
            )
        return value

    @field_validator("web_url", "model_url", "rerank_url")
    @classmethod
    def _http_url(cls, value: str, info: ValidationInfo) -> str:
        if not value:
            return value
        if any(character.isspace() or not character.isprintable() for character in value):
            raise ValueError(  # urlsplit drops tabs and newlines; a request line refuses them
                "must be an http:// or https:// URL: it holds a space or a control character"
                " (a newline a mounted file or a YAML block ends with?)"
            )
        user, at, _ = value.partition("://")[2].rpartition("@")
        if at and info.field_name != "web_url" and any(mark in user for mark in "/?#"):
            raise ValueError(  # a generated password's `/`: read as a path, a host, a port
                "must be an http:// or https:// URL: a `/`, `?` or `#` in its user or password"
                " is not percent-encoded (`%2F`, `%3F`, `%23`)"
            )
        parts = urlsplit(value)
        try:
            port = parts.port
        except ValueError:
            port = 0
        if port == 0:
            raise ValueError("must be an http:// or https:// URL: its port is not 1 to 65535")
        if (
            parts.scheme not in ("http", "https")
            or not parts.hostname
            or not is_host(parts.hostname)
            or "?" in value  # an empty query or fragment too: the reads' paths went after it
            or "#" in value
        ):
            raise ValueError("must be an http:// or https:// URL (host, port and path only)")
        return value.rstrip("/")

    @field_validator("model_url", "rerank_url")
    @classmethod
    def _the_api_not_its_endpoint(cls, value: str, info: ValidationInfo) -> str:
        endpoint = ENDPOINTS[str(info.field_name)]
        if urlsplit(value).path.rstrip("/").endswith(f"/{endpoint}"):
            raise ValueError(
                "names the endpoint: give the API's URL it is under (`http://HOST:PORT/v1`):"
                f" rumourmill posts to URL/{endpoint} (this one had every call a 404)"
            )
        return value

    @field_validator("web_url")
    @classmethod
    def _no_user_or_password(cls, value: str) -> str:
        parts = urlsplit(value)
        if parts.username is not None or parts.password is not None:
            raise ValueError(
                "must be an http:// or https:// URL (host, port and path only): neither the"
                " workers nor the read commands send a user and password"
            )
        return value

    @field_validator("model_name", "rerank_model")
    @classmethod
    def _a_model_named(cls, value: str, info: ValidationInfo) -> str:
        url = f"{str(info.field_name).split('_')[0]}_url"
        if info.data.get(url) and not value.strip():
            raise ValueError(
                f"is empty, and {ENV_PREFIX}{url.upper()} is set: name the model it serves (the"
                " request's `model`; any name for a server of one model, as llama.cpp's):"
                " Ollama, vLLM and hosted APIs refused every call"
            )
        if info.data.get(url) and value != value.strip():
            raise ValueError(
                "begins or ends with a space: the request's `model` is sent as given, and no"
                " server knows a model named so"
            )
        return value

    @field_validator("model_key", "rerank_key")
    @classmethod
    def _one_credential(cls, value: str, info: ValidationInfo) -> str:
        url = f"{str(info.field_name).split('_')[0]}_url"
        parts = urlsplit(info.data.get(url) or "")
        if value and (parts.username is not None or parts.password is not None):
            raise ValueError(
                f"is set, and {ENV_PREFIX}{url.upper()} has a user and password: a call sends"
                " one Authorization header, and with both every call failed before it was sent:"
                " keep one of the two"
            )
        return value

    @classmethod
    def from_env(cls, flag_names: Mapping[str, str] | None = None, **flags: Any) -> Settings:
        """Read every `RUMOURMILL_*` variable, with the non-None `flags` (CLI flags) over them.

        Raises `SettingsError` naming each bad variable or flag and what is wrong with it; a
        flag is named as `flag_names` gives it (a command's `--url` for `web_url`), else
        `--field-name`.
        """
        given = {name: value for name, value in flags.items() if value is not None}
        named = {
            name: (flag_names or {}).get(name, f"--{name.replace('_', '-')}") for name in given
        }
        try:
            settings = cls(**given)
        except ValidationError as error:
            raise SettingsError(explain_settings(error, named)) from None
        settings._flags = named
        return settings

    def named(self, field: str) -> str:
        """How the setting `field` was given, for a message about its value: the flag typed
        (`from_env`'s), else its variable (an error naming the variable sent an operator who
        typed `--partitions 8` looking for a variable nobody set)."""
        return self._flags.get(field, f"{ENV_PREFIX}{field.upper()}")

    def environment(self) -> dict[str, str]:
        """These settings as the `RUMOURMILL_*` variables a child process reads them from."""
        values: dict[str, str] = {}
        for name in type(self).model_fields:
            value = getattr(self, name)
            if isinstance(value, tuple):
                text = ",".join(value)
            elif isinstance(value, dict):
                text = ",".join(f"{key}:{tenant}" for key, tenant in value.items())
            else:
                text = str(value)
            values[f"{ENV_PREFIX}{name.upper()}"] = text
        return values

    def on_local_broker(self, bootstrap: str) -> Settings:
        """These settings for a broker of our own on 127.0.0.1 (`rumourmill dev`'s Tansu):
        its address, talked to in the clear; the security settings are those of the
        deployment's Kafka, which that broker is not."""
        fields = type(self).model_fields
        plain = {name: fields[name].default for name in KAFKA_SECURITY}
        return self.model_copy(update={**plain, "broker": (bootstrap,)})

    @property
    def bootstrap(self) -> str:
        """The brokers as Kafka clients take them: `host:port,host:port`."""
        return ",".join(self.broker)

    @property
    def canonical_url(self) -> str:
        """The URL other workers forward reads to (default: http://WEB_HOST:WEB_PORT, this
        machine's address for a WEB_HOST of every interface: `0.0.0.0` names no machine, and
        every worker of an image saying it sent the others' reads to itself)."""
        if self.web_url:
            return self.web_url
        host = self.web_host
        return (
            f"http://{url_host(this_machine(host) if unspecified(host) else host)}:{self.web_port}"
        )

    @property
    def own_url(self) -> str:
        """Where this machine reaches its own worker (`rumourmill ready`, a container's health
        check): at WEB_HOST, the loopback address of its family for every interface; never
        WEB_URL, which may be a load balancer's."""
        host = self.web_host
        if unspecified(host):
            host = "::1" if ":" in host else "127.0.0.1"
        return f"http://{url_host(host)}:{self.web_port}"

    @property
    def topics(self) -> Topics:
        """The topics of this deployment, all named `PREFIX.KIND` (changes: empty when off)."""
        topics = Topics(*(f"{self.topic_prefix}.{kind}" for kind in Topics._fields))
        return topics if self.changes else topics._replace(changes="")


def worker_url_problem(settings: Settings) -> str | None:
    """What is wrong with a worker's own `RUMOURMILL_WEB_URL`, if anything. The other workers
    forward reads to its host and port (`streams.app`), over plain HTTP and at the path asked:
    a path or https there would be taken and never used, and without a port they would forward
    to port 80. (The read commands' URL may have all three: a proxy's.)"""
    if not settings.web_url:
        return None
    parts = urlsplit(settings.web_url)
    if parts.scheme == "https" or parts.path or parts.port is None:
        return (
            f"{ENV_PREFIX}WEB_URL={settings.web_url!r}: a worker's is http://HOST:PORT, with its"
            " port and without a path: the other workers forward reads to its host and port over"
            " plain HTTP"
        )
    return None


TEST_VARIABLES = frozenset({"RUMOURMILL_SOAK", "RUMOURMILL_FAULT_SEED"})
"""Read by the test suite alone (README), never by rumourmill itself."""


def unknown_variables(environ: Mapping[str, str]) -> list[str]:
    """A note for each `RUMOURMILL_*` variable that names no setting, with the one it may
    have meant: misspelt, it would leave its setting at the default without a word."""
    known = sorted({ENV_PREFIX + name.upper() for name in Settings.model_fields} | TEST_VARIABLES)
    notes = []
    for name in sorted(environ):
        if name.upper().startswith(ENV_PREFIX) and name.upper() not in known:
            close = difflib.get_close_matches(name.upper(), known, n=1)
            meant = f" (did you mean {close[0]}?)" if close else ""
            notes.append(f"{name} is not a setting{meant}; ignored")
    return notes


def unused_settings(settings: Settings) -> list[str]:
    """A note for each model or reranker setting given while its URL is empty: that client is
    off, so the setting does nothing (an empty URL is how a deployment switches the model off,
    its other settings kept)."""
    notes = []
    for client, what in (("model", "the rules make every judgement"), ("rerank", "no reranker")):
        url = f"{client}_url"
        if getattr(settings, url):
            continue
        given = sorted(  # a default given (`environment()` gives every setting) is no matter
            name
            for name in settings.model_fields_set
            if name.startswith(f"{client}_")
            and name != url
            and getattr(settings, name) != type(settings).model_fields[name].default
        )
        if given:
            named = ", ".join(settings.named(name) for name in given)
            notes.append(f"{named} set, {settings.named(url)} empty ({what}): not used")
    return notes


def explain_settings(error: ValidationError, flags: Mapping[str, str]) -> str:
    """Each problem on a line of its own: the variable (or the flag given, as `flags` names
    each field's), its value, what is wrong."""
    lines = []
    for item in error.errors(include_url=False):
        name = str(item["loc"][0]) if item["loc"] else "settings"
        source = flags.get(name, f"{ENV_PREFIX}{name.upper()}")
        message = item["msg"].removeprefix("Value error, ")
        if name in SECRETS:
            value = "(secret, not shown)"
        elif name in URLS and isinstance(item["input"], str):
            shown = without_credentials(item["input"])
            value = shown if shown == HIDDEN_URL else repr(shown)
        else:
            value = repr(item["input"])
        lines.append(f"{source}={value}: {message}")
    return "\n".join(lines)
