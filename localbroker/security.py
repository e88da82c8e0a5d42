"""Secured listeners for a local Apache Kafka: SASL/PLAIN logins and TLS, as managed Kafka
services ask for, so the clients' security settings are tested against a real broker.

The broker keeps its PLAINTEXT listener (readiness probe, inter-broker traffic) and adds one
listener per secured protocol, each on a port of its own. TLS uses a self-signed certificate
for 127.0.0.1 made with the `openssl` command, given to Kafka as a PEM keystore; clients
trust it as their CA file.
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Mapping
from pathlib import Path

from localbroker.network import HOST, free_port
from localbroker.process import BrokerStartError

PLAIN_LOGIN = "org.apache.kafka.common.security.plain.PlainLoginModule"
CERTIFICATE_FILE = "broker-cert.pem"
"""The self-signed certificate, in the broker's directory: the CA file its clients trust."""
KEYSTORE_FILE = "broker-keystore.pem"
"""Its key and itself in one PEM file: Kafka's keystore."""


def secured_ports(sasl_users: Mapping[str, str], tls: bool) -> dict[str, int]:
    """A free port for each protocol the broker can secure with these: `SASL_PLAINTEXT` with
    users, `SSL` with TLS, `SASL_SSL` with both."""
    protocols = [
        *(["SASL_PLAINTEXT"] if sasl_users else []),
        *(["SSL"] if tls else []),
        *(["SASL_SSL"] if sasl_users and tls else []),
    ]
    return {protocol: free_port() for protocol in protocols}


def jaas_text(text: str) -> str:
    """`text` as a quoted JAAS option value."""
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def secured_properties(
    port: int,
    controller_port: int,
    secured: Mapping[str, int],
    sasl_users: Mapping[str, str],
    keystore: Path | None,
) -> dict[str, str]:
    """The broker properties of the `secured` listeners (protocol: port) beside the PLAINTEXT
    one on `port` and the controller's, to merge over `kraft.server_properties`."""
    listeners = {"PLAINTEXT": port, **secured}
    properties = {
        "listeners": ",".join(
            f"{name}://{HOST}:{number}"
            for name, number in {**listeners, "CONTROLLER": controller_port}.items()
        ),
        "advertised.listeners": ",".join(
            f"{name}://{HOST}:{number}" for name, number in listeners.items()
        ),
        "listener.security.protocol.map": ",".join(
            [*(f"{name}:{name}" for name in listeners), "CONTROLLER:PLAINTEXT"]
        ),
    }
    logins = " ".join(f"user_{user}={jaas_text(password)}" for user, password in sasl_users.items())
    for name in secured:
        if name.startswith("SASL_"):
            properties["sasl.enabled.mechanisms"] = "PLAIN"
            properties[f"listener.name.{name.lower()}.plain.sasl.jaas.config"] = (
                f"{PLAIN_LOGIN} required {logins};"
            )
    if keystore is not None:
        properties |= {"ssl.keystore.type": "PEM", "ssl.keystore.location": str(keystore)}
    return properties


def self_signed_certificate(directory: Path) -> None:
    """Write a certificate for 127.0.0.1 and localhost signed by its own key, and the keystore
    holding both, into `directory` (`CERTIFICATE_FILE`, `KEYSTORE_FILE`)."""
    openssl = shutil.which("openssl")
    if openssl is None:
        raise BrokerStartError("a TLS listener needs the openssl command to make its certificate")
    certificate, key = directory / CERTIFICATE_FILE, directory / "broker-key.pem"
    command = [
        openssl, "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
        "-subj", f"/CN={HOST}", "-addext", f"subjectAltName=IP:{HOST},DNS:localhost",
        "-keyout", str(key), "-out", str(certificate),
    ]  # fmt: skip
    result = subprocess.run(command, capture_output=True, text=True, stdin=subprocess.DEVNULL)
    if result.returncode != 0:
        raise BrokerStartError(f"openssl could not make a certificate:\n{result.stderr[-2000:]}")
    (directory / KEYSTORE_FILE).write_text(key.read_text() + certificate.read_text())
