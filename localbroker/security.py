"""Secured listeners for a local Apache Kafka: SASL/PLAIN logins and TLS, as managed Kafka
services ask for, so the clients' security settings are tested against a real broker.

The broker keeps its PLAINTEXT listener (readiness probe, inter-broker traffic) and adds
secured listeners, each on a port of its own: SASL_PLAINTEXT, SSL, SASL_SSL, and MUTUAL_TLS
(TLS taking only clients that show the client certificate). TLS uses self-signed certificates
for 127.0.0.1 made with the `openssl` command: the broker's, given to Kafka as a PEM keystore
and to clients as their CA file; the client's, which the MUTUAL_TLS listener trusts.
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Mapping
from pathlib import Path

from localbroker.network import HOST, free_port
from localbroker.process import BrokerStartError

PLAIN_LOGIN = "org.apache.kafka.common.security.plain.PlainLoginModule"
SCRAM_LOGIN = "org.apache.kafka.common.security.scram.ScramLoginModule"
SCRAM_MECHANISMS = ("SCRAM-SHA-256", "SCRAM-SHA-512")
MUTUAL_TLS = "MUTUAL_TLS"
"""The listener of protocol SSL that requires a client certificate."""


class Certificate:
    """A self-signed certificate for 127.0.0.1 and localhost and its key, as PEM files named
    after `name` in `directory` (made by `make`)."""

    def __init__(self, directory: Path, name: str) -> None:
        self.path = directory / f"{name}-cert.pem"
        self.key = directory / f"{name}-key.pem"
        self.keystore = directory / f"{name}-keystore.pem"
        """The key and the certificate in one file: a PEM keystore of Kafka."""

    def make(self) -> Certificate:
        openssl = shutil.which("openssl")
        if openssl is None:
            raise BrokerStartError("a TLS listener needs the openssl command for its certificates")
        command = [
            openssl, "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
            "-subj", f"/CN={HOST}", "-addext", f"subjectAltName=IP:{HOST},DNS:localhost",
            "-keyout", str(self.key), "-out", str(self.path),
        ]  # fmt: skip
        result = subprocess.run(command, capture_output=True, text=True, stdin=subprocess.DEVNULL)
        if result.returncode != 0:
            raise BrokerStartError(
                f"openssl could not make a certificate:\n{result.stderr[-2000:]}"
            )
        self.keystore.write_text(self.key.read_text() + self.path.read_text())
        return self


def secured_ports(sasl_users: Mapping[str, str], tls: bool) -> dict[str, int]:
    """A free port for each listener the broker can secure with these: `SASL_PLAINTEXT` with
    users; `SSL` and `MUTUAL_TLS` with TLS; `SASL_SSL` with both."""
    listeners = [
        *(["SASL_PLAINTEXT"] if sasl_users else []),
        *(["SSL", MUTUAL_TLS] if tls else []),
        *(["SASL_SSL"] if sasl_users and tls else []),
    ]
    return {listener: free_port() for listener in listeners}


def scram_credentials(sasl_users: Mapping[str, str]) -> list[str]:
    """The `kafka-storage format` arguments that store each user's SCRAM credentials of both
    mechanisms (KRaft keeps them in its metadata, written at format)."""
    return [
        argument
        for user, password in sasl_users.items()
        for mechanism in SCRAM_MECHANISMS
        for argument in ("--add-scram", f"{mechanism}=[name={user},password={password}]")
    ]


def jaas_text(text: str) -> str:
    """`text` as a quoted JAAS option value."""
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def secured_properties(
    port: int,
    controller_port: int,
    secured: Mapping[str, int],
    sasl_users: Mapping[str, str],
    certificates: tuple[Certificate, Certificate] | None,
) -> dict[str, str]:
    """The broker properties of the `secured` listeners (name: port) beside the PLAINTEXT one
    on `port` and the controller's, to merge over `kraft.server_properties`; `certificates`:
    the broker's and the client's, for the TLS listeners."""
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
            [
                *(f"{name}:{'SSL' if name == MUTUAL_TLS else name}" for name in listeners),
                "CONTROLLER:PLAINTEXT",
            ]
        ),
    }
    logins = " ".join(f"user_{user}={jaas_text(password)}" for user, password in sasl_users.items())
    for name in secured:
        if name.startswith("SASL_"):
            listener = f"listener.name.{name.lower()}"
            properties["sasl.enabled.mechanisms"] = ",".join(["PLAIN", *SCRAM_MECHANISMS])
            properties[f"{listener}.plain.sasl.jaas.config"] = f"{PLAIN_LOGIN} required {logins};"
            for mechanism in SCRAM_MECHANISMS:
                properties[f"{listener}.{mechanism.lower()}.sasl.jaas.config"] = (
                    f"{SCRAM_LOGIN} required;"
                )
    if certificates is not None:
        broker, client = certificates
        mutual = f"listener.name.{MUTUAL_TLS.lower()}"
        properties |= {
            "ssl.keystore.type": "PEM",
            "ssl.keystore.location": str(broker.keystore),
            f"{mutual}.ssl.client.auth": "required",
            f"{mutual}.ssl.truststore.type": "PEM",
            f"{mutual}.ssl.truststore.location": str(client.path),
        }
    return properties
