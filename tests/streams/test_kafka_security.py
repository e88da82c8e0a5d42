"""A Kafka that wants TLS or a SASL login, as managed services do: the worker and the commands
reach it with the security settings, on a real Apache Kafka with SASL_PLAINTEXT, SSL, SASL_SSL
and mutual TLS listeners (PLAIN and SCRAM logins, self-signed certificates); wrong credentials
or a certificate not trusted end a command with one line saying why, nothing sent."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest

from localbroker import ApacheKafkaBroker
from localbroker.security import MUTUAL_TLS
from streams.dev import apache_kafka
from streams.settings import Settings
from tests.support import (
    WorkerProcess,
    event,
    read_topic,
    run_command,
    topics_on,
    unique_settings,
)

pytestmark = pytest.mark.integration

USER, PASSWORD = "game-studio", 'pa55 "word"'
"""A login of the broker; the password has a space and quotes, as generated secrets may."""


@pytest.fixture(scope="module")
def broker() -> Iterator[ApacheKafkaBroker]:
    """An Apache Kafka of this module's own, with secured listeners besides its PLAINTEXT one."""
    local = apache_kafka(Settings.from_env())
    with ApacheKafkaBroker(
        version=local.version,
        cache=local.cache,
        java=local.java,
        sasl_users={USER: PASSWORD},
        tls=True,
    ) as started:
        yield started


def secured(
    broker: ApacheKafkaBroker,
    listener: str,
    data_dir: Path,
    mechanism: str = "PLAIN",
    **overrides: Any,
) -> Settings:
    """Settings of a deployment of its own reaching `broker`'s `listener` with the right login
    (of `mechanism`), trusting its certificate and showing the client certificate the
    MUTUAL_TLS listener wants, unless `overrides` say otherwise."""
    protocol = "SSL" if listener == MUTUAL_TLS else listener
    login = (
        {
            "kafka_sasl_mechanism": mechanism,
            "kafka_sasl_username": USER,
            "kafka_sasl_password": PASSWORD,
        }
        if protocol.startswith("SASL_")
        else {}
    )
    trust = {"kafka_ssl_cafile": str(broker.certificate)} if protocol.endswith("SSL") else {}
    client = broker.client_certificate
    shown = (
        {"kafka_ssl_certfile": str(client.path), "kafka_ssl_keyfile": str(client.key)}
        if listener == MUTUAL_TLS
        else {}
    )
    return unique_settings(
        broker.bootstrap_of(listener),
        data_dir,
        kafka_security_protocol=protocol,
        **(login | trust | shown | overrides),
    )


def story(path: Path) -> Path:
    path.write_bytes(orjson.dumps(event("w", 1)) + b"\n")
    return path


@pytest.mark.parametrize(
    ("listener", "mechanism"),
    [
        ("SASL_PLAINTEXT", "PLAIN"),
        ("SASL_SSL", "PLAIN"),  # Confluent Cloud's, Event Hubs'
        ("SASL_SSL", "SCRAM-SHA-512"),  # MSK's, Aiven's
        ("SSL", ""),
        (MUTUAL_TLS, ""),
    ],
)
def test_publish_a_worker_and_rebuild_reach_a_secured_kafka(
    broker: ApacheKafkaBroker, listener: str, mechanism: str, tmp_path: Path
) -> None:
    """Every client of the commands and of the worker (Faust's consumer and producer, the
    durability and policy readers; the rebuild's admin, readers and producer) talks the
    listener's protocol: an event published is processed and acked, and rebuilt the same."""
    settings = secured(broker, listener, tmp_path / "data", mechanism)
    published = run_command(settings, "publish", str(story(tmp_path / "story.ndjson")))
    assert published.returncode == 0, published.stderr
    assert published.stdout.startswith("published 1 event(s)")
    worker = WorkerProcess(settings, tmp_path / "worker.log").start()
    try:
        [ack] = read_topic(settings, settings.topics.acks, lambda got: len(got) >= 1)
        rebuilt = run_command(settings, "rebuild", "--into-data-dir", str(tmp_path / "rebuilt"))
    finally:
        worker.stop()
    assert (ack["seq"], ack["outcome"], ack["processed_seq"]) == (1, "processed", 1)
    assert rebuilt.returncode == 0, rebuilt.stderr
    assert rebuilt.stdout.splitlines()[-1].endswith("same as live")
    assert PASSWORD not in worker.log_path.read_text()


@pytest.mark.parametrize(
    ("protocol", "mechanism"), [("SASL_PLAINTEXT", "PLAIN"), ("SASL_SSL", "SCRAM-SHA-512")]
)
def test_a_wrong_password_stops_a_command_and_a_worker_naming_authentication(
    broker: ApacheKafkaBroker, protocol: str, mechanism: str, tmp_path: Path
) -> None:
    """One line, naming authentication and the settings, never the password; nothing sent
    (the publish made no topic)."""
    wrong = secured(
        broker, protocol, tmp_path / "data", mechanism, kafka_sasl_password="wrong-s3cret"
    )
    published = run_command(wrong, "publish", str(story(tmp_path / "story.ndjson")))
    worker = run_command(wrong, "worker")
    live = WorkerProcess(secured(broker, protocol, tmp_path / "live"), tmp_path / "live.log")
    live.start()  # rebuild asks the live worker first
    try:
        rebuilt = run_command(wrong, "rebuild", "--url", live.settings.canonical_url)
    finally:
        live.stop()
    assert rebuilt.stderr.splitlines()[-1].startswith("Error: rebuild: authentication failed")
    for refused in (published, worker):
        assert refused.returncode == 1
        assert "Traceback" not in refused.stderr and "wrong-s3cret" not in refused.stderr
        assert refused.stderr.splitlines()[-1].startswith(
            f"Error: authentication failed: Kafka at {wrong.bootstrap} refused the SASL login"
            f" (RUMOURMILL_KAFKA_SASL_MECHANISM={wrong.kafka_sasl_mechanism},"
            f" RUMOURMILL_KAFKA_SASL_USERNAME='{USER}'"
            " and RUMOURMILL_KAFKA_SASL_PASSWORD): [Error 58] SaslAuthenticationFailed"
        ), refused.stderr
    assert published.stderr.splitlines()[-1].endswith("; nothing published")
    right = wrong.model_copy(update={"kafka_sasl_password": PASSWORD})
    assert not {topic for topic in topics_on(right) if topic.startswith(wrong.topic_prefix)}


def test_a_certificate_not_trusted_stops_a_command_naming_the_tls_handshake(
    broker: ApacheKafkaBroker, tmp_path: Path
) -> None:
    """Without the CA file, the system's CAs do not trust the broker's self-signed
    certificate: the command says the TLS handshake failed, and why."""
    untrusting = secured(broker, "SSL", tmp_path / "data", kafka_ssl_cafile="")
    published = run_command(untrusting, "publish", str(story(tmp_path / "story.ndjson")))
    assert published.returncode == 1
    line = published.stderr.splitlines()[-1]
    assert line.startswith(
        f"Error: cannot reach Kafka at {untrusting.bootstrap}: the TLS handshake failed"
        " ([SSL: CERTIFICATE_VERIFY_FAILED] certificate verify failed: self-signed certificate"
    ), published.stderr
    assert line.endswith(
        "; see RUMOURMILL_KAFKA_SECURITY_PROTOCOL=SSL and RUMOURMILL_KAFKA_SSL_CAFILE"
        "; nothing published"
    )


def test_a_listener_wanting_a_client_certificate_refuses_a_client_without(
    broker: ApacheKafkaBroker, tmp_path: Path
) -> None:
    """What makes the MUTUAL_TLS case above show that the client certificate is sent: without
    it, the broker closes every connection after the handshake, and the command names the
    client certificate setting (aiokafka tells no more than the connection closed)."""
    anonymous = secured(
        broker, MUTUAL_TLS, tmp_path / "data", kafka_ssl_certfile="", kafka_ssl_keyfile=""
    )
    published = run_command(anonymous, "publish", str(story(tmp_path / "story.ndjson")))
    assert published.returncode == 1
    assert published.stderr.splitlines()[-1] == (
        f"Error: cannot reach Kafka at {anonymous.bootstrap}: the broker closed the connection"
        " after the TLS handshake (KafkaConnectionError: Connection at"
        f" 127.0.0.1:{broker.secured_ports[MUTUAL_TLS]} closed); a listener wanting a client"
        " certificate (ssl.client.auth=required) does, and RUMOURMILL_KAFKA_SSL_CERTFILE is not"
        " set; nothing published"
    )
