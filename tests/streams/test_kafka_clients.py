"""The Kafka security settings: checked together when a command starts, and given alike to
every Kafka client (each aiokafka client's options, the Faust app's credentials)."""

from __future__ import annotations

import ast
import contextlib
import socket
import ssl
import subprocess
import threading
from pathlib import Path
from typing import Any

import pytest
from faust.transport.drivers.aiokafka import credentials_to_aiokafka_auth

from localbroker.security import Certificate
from streams.kafka_clients import faust_credentials, kafka_options, tls_context
from streams.settings import ENV_PREFIX, KAFKA_SECURITY, Settings, SettingsError

STREAMS = Path(__file__).resolve().parents[2] / "streams"
KAFKA_CLIENTS = {"AIOKafkaConsumer", "AIOKafkaProducer", "AIOKafkaAdminClient"}
LOGIN = {
    "KAFKA_SASL_MECHANISM": "plain",
    "KAFKA_SASL_USERNAME": "studio",
    "KAFKA_SASL_PASSWORD": "hunter2",
}


pytestmark = pytest.mark.usefixtures("clean_environment")
"""No `RUMOURMILL_*` variable of the machine running the tests leaks in."""


@pytest.fixture(scope="module")
def made(tmp_path_factory: pytest.TempPathFactory) -> Certificate:
    """A self-signed certificate and its key."""
    return Certificate(tmp_path_factory.mktemp("tls"), "test").make()


@pytest.fixture
def certificate(made: Certificate) -> Path:
    return made.path


def settings_of(monkeypatch: pytest.MonkeyPatch, **variables: str) -> Settings:
    """The settings read from these `RUMOURMILL_*` variables, as a command reads them."""
    for name, value in variables.items():
        monkeypatch.setenv(ENV_PREFIX + name, value)
    return Settings.from_env()


def refusal(monkeypatch: pytest.MonkeyPatch, **variables: str) -> list[str]:
    with pytest.raises(SettingsError) as refused:
        settings_of(monkeypatch, **variables)
    return str(refused.value).splitlines()


def test_a_sasl_protocol_needs_a_mechanism_a_user_and_a_password(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert refusal(monkeypatch, KAFKA_SECURITY_PROTOCOL="sasl_ssl") == [
        "RUMOURMILL_KAFKA_SASL_MECHANISM='': required with"
        " RUMOURMILL_KAFKA_SECURITY_PROTOCOL=SASL_SSL",
        "RUMOURMILL_KAFKA_SASL_USERNAME='': required with"
        " RUMOURMILL_KAFKA_SECURITY_PROTOCOL=SASL_SSL",
        "RUMOURMILL_KAFKA_SASL_PASSWORD=(secret, not shown): required with"
        " RUMOURMILL_KAFKA_SECURITY_PROTOCOL=SASL_SSL",
    ]


def test_a_login_without_a_sasl_protocol_is_refused_not_ignored(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """It would be sent nowhere: the brokers would be talked to in the clear."""
    assert refusal(monkeypatch, **LOGIN) == [
        f"RUMOURMILL_{name}={shown}: only used with RUMOURMILL_KAFKA_SECURITY_PROTOCOL="
        "SASL_PLAINTEXT or SASL_SSL (it is PLAINTEXT)"
        for name, shown in [
            ("KAFKA_SASL_MECHANISM", "'plain'"),
            ("KAFKA_SASL_USERNAME", "'studio'"),
            ("KAFKA_SASL_PASSWORD", "(secret, not shown)"),
        ]
    ]


@pytest.mark.parametrize("protocol", ["PLAINTEXT", "SASL_PLAINTEXT"])
def test_a_tls_file_without_a_tls_protocol_is_refused(
    monkeypatch: pytest.MonkeyPatch, protocol: str, certificate: Path
) -> None:
    login = LOGIN if protocol.startswith("SASL_") else {}
    assert refusal(
        monkeypatch, KAFKA_SECURITY_PROTOCOL=protocol, KAFKA_SSL_CAFILE=str(certificate), **login
    ) == [
        f"RUMOURMILL_KAFKA_SSL_CAFILE='{certificate}': only used with"
        f" RUMOURMILL_KAFKA_SECURITY_PROTOCOL=SSL or SASL_SSL (it is {protocol})"
    ]


def test_tls_files_must_exist_and_hold_what_they_are_for(
    monkeypatch: pytest.MonkeyPatch, certificate: Path, tmp_path: Path
) -> None:
    missing, empty = tmp_path / "missing.pem", tmp_path / "empty.pem"
    empty.write_text("")
    assert refusal(monkeypatch, KAFKA_SECURITY_PROTOCOL="SSL", KAFKA_SSL_CAFILE=str(missing)) == [
        f"RUMOURMILL_KAFKA_SSL_CAFILE='{missing}': no such file"
    ]
    [not_a_ca] = refusal(monkeypatch, KAFKA_SECURITY_PROTOCOL="SSL", KAFKA_SSL_CAFILE=str(empty))
    assert not_a_ca.startswith(f"RUMOURMILL_KAFKA_SSL_CAFILE='{empty}': no CA certificates (PEM)")
    monkeypatch.delenv(f"{ENV_PREFIX}KAFKA_SSL_CAFILE")
    assert refusal(
        monkeypatch, KAFKA_SECURITY_PROTOCOL="SSL", KAFKA_SSL_KEYFILE=str(certificate)
    ) == [
        "RUMOURMILL_KAFKA_SSL_CERTFILE='': required with RUMOURMILL_KAFKA_SSL_KEYFILE"
        " (the key's certificate)"
    ]
    [without_its_key] = refusal(
        monkeypatch, KAFKA_SECURITY_PROTOCOL="SSL", KAFKA_SSL_KEYFILE=str(empty),
        KAFKA_SSL_CERTFILE=str(certificate),
    )  # fmt: skip
    assert without_its_key.startswith(
        f"RUMOURMILL_KAFKA_SSL_CERTFILE='{certificate}': not a certificate with its private key"
    )


def test_an_encrypted_key_is_refused_never_asked_for(
    monkeypatch: pytest.MonkeyPatch, made: Certificate, tmp_path: Path
) -> None:
    """OpenSSL would ask for its password on the terminal, and a worker would wait for ever."""
    encrypted = tmp_path / "encrypted-key.pem"
    subprocess.run(
        ["openssl", "pkey", "-in", str(made.key), "-aes256",
         "-passout", "pass:secret", "-out", str(encrypted)],
        check=True, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    [refused] = refusal(
        monkeypatch, KAFKA_SECURITY_PROTOCOL="SSL", KAFKA_SSL_KEYFILE=str(encrypted),
        KAFKA_SSL_CERTFILE=str(made.path),
    )  # fmt: skip
    assert refused.endswith("the key is encrypted: give an unencrypted (PKCS#8 or PEM) key file")


def test_the_tls_context_trusts_the_ca_file_and_checks_host_names(
    monkeypatch: pytest.MonkeyPatch, certificate: Path
) -> None:
    context = tls_context(
        settings_of(monkeypatch, KAFKA_SECURITY_PROTOCOL="SSL", KAFKA_SSL_CAFILE=str(certificate))
    )
    assert context is not None
    assert context.verify_mode == ssl.CERT_REQUIRED and context.check_hostname
    [trusted] = context.get_ca_certs()
    assert trusted["subject"] == ((("commonName", "127.0.0.1"),),)


@pytest.mark.parametrize("protocol", ["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"])
def test_the_faust_app_talks_to_kafka_as_every_other_client(
    monkeypatch: pytest.MonkeyPatch, protocol: str, certificate: Path
) -> None:
    """Faust turns its credentials into its aiokafka clients' options: the same as those of
    the clients rumourmill makes itself (each TLS context trusting the same CA)."""
    login = LOGIN if protocol.startswith("SASL_") else {}
    trust = {"KAFKA_SSL_CAFILE": str(certificate)} if protocol.endswith("SSL") else {}
    settings = settings_of(monkeypatch, KAFKA_SECURITY_PROTOCOL=protocol, **login, **trust)
    options = kafka_options(settings)
    assert options.pop("bootstrap_servers") == "127.0.0.1:9092"
    fausts = dict(credentials_to_aiokafka_auth(faust_credentials(settings)))
    assert comparable(fausts) == comparable(options)
    assert options["security_protocol"] == protocol


def test_every_kafka_client_of_rumourmill_takes_the_security_options() -> None:
    """A client made without them would talk plain to a broker that wants a login."""
    calls = [
        (path.name, node)
        for path in sorted(STREAMS.glob("*.py"))
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.Call)
    ]
    clients = [(name, call) for name, call in calls if called(call) in KAFKA_CLIENTS]
    assert len(clients) >= 10
    without = [
        f"{name}:{call.lineno}"
        for name, call in clients
        if not any(
            keyword.arg is None and called(keyword.value) == "kafka_options"
            for keyword in call.keywords
        )
    ]
    assert not without
    [app] = [call for _, call in calls if ast.unparse(call.func) == "faust.App"]
    credentials = {keyword.arg: keyword.value for keyword in app.keywords}["broker_credentials"]
    assert called(credentials) == "faust_credentials"


def called(node: ast.expr) -> str:
    """The name a call calls (`AIOKafkaConsumer`, `kafka_options`), or ''."""
    if not isinstance(node, ast.Call):
        return ""
    return node.func.id if isinstance(node.func, ast.Name) else ""


def comparable(options: dict[str, Any]) -> dict[str, Any]:
    """The options without those left unset, a TLS context as the CA certificates it trusts."""
    return {
        name: value.get_ca_certs() if isinstance(value, ssl.SSLContext) else value
        for name, value in options.items()
        if value is not None
    }


def test_a_client_certificate_is_taken_with_its_key_apart_or_in_the_same_file(
    monkeypatch: pytest.MonkeyPatch, made: Certificate
) -> None:
    apart = settings_of(
        monkeypatch, KAFKA_SECURITY_PROTOCOL="SSL", KAFKA_SSL_CAFILE=str(made.path),
        KAFKA_SSL_CERTFILE=str(made.path), KAFKA_SSL_KEYFILE=str(made.key),
    )  # fmt: skip
    monkeypatch.delenv(f"{ENV_PREFIX}KAFKA_SSL_KEYFILE")
    together = settings_of(monkeypatch, KAFKA_SSL_CERTFILE=str(made.keystore))
    assert (apart.kafka_ssl_keyfile, together.kafka_ssl_keyfile) == (str(made.key), "")
    subject = ((("commonName", "127.0.0.1"),),)
    assert certificate_shown(tls_context(apart), made) == subject
    assert certificate_shown(tls_context(together), made) == subject


def certificate_shown(context: ssl.SSLContext | None, made: Certificate) -> object:
    """The subject of the certificate a client with `context` shows a server on 127.0.0.1
    that requires one signed as `made` is (a broker with `ssl.client.auth=required`)."""
    assert context is not None
    server = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server.load_cert_chain(made.path, made.key)
    server.verify_mode = ssl.CERT_REQUIRED
    server.load_verify_locations(made.path)
    seen: dict[str, object] = {}
    with socket.create_server(("127.0.0.1", 0)) as listener:

        def serve() -> None:
            connection, _ = listener.accept()
            try:
                with server.wrap_socket(connection, server_side=True) as tls:
                    seen["subject"] = (tls.getpeercert() or {}).get("subject")
                    tls.sendall(b"!")
            except ssl.SSLError as refused:
                seen["refused"] = refused.reason

        serving = threading.Thread(target=serve)
        serving.start()
        with (
            socket.create_connection(listener.getsockname(), timeout=10) as raw,
            context.wrap_socket(raw, server_hostname="127.0.0.1") as tls,
            contextlib.suppress(OSError),  # a refused certificate closes the connection
        ):
            tls.recv(1)
        serving.join(10)
    return seen.get("subject", seen)


def test_a_local_broker_of_ours_is_talked_to_plainly_with_every_security_setting_dropped(
    monkeypatch: pytest.MonkeyPatch, made: Certificate
) -> None:
    """`rumourmill dev`'s worker reads the settings back from its environment: one security
    setting left would be refused there (a login without a SASL protocol), or tried on Tansu."""
    managed = settings_of(
        monkeypatch, KAFKA_SECURITY_PROTOCOL="SASL_SSL", KAFKA_SSL_CAFILE=str(made.path),
        KAFKA_SSL_CERTFILE=str(made.keystore), **LOGIN,
    )  # fmt: skip
    local = managed.on_local_broker("127.0.0.1:1")
    security = ("kafka_security_", "kafka_sasl_", "kafka_ssl_")
    assert set(KAFKA_SECURITY) == {
        name for name in Settings.model_fields if name.startswith(security)
    }
    for name, value in local.environment().items():
        monkeypatch.setenv(name, value)
    assert kafka_options(Settings.from_env()) == {
        "bootstrap_servers": "127.0.0.1:1",
        "security_protocol": "PLAINTEXT",
        "ssl_context": None,
    }
