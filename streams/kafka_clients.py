"""How every Kafka client of rumourmill reaches the brokers: their addresses and security.

Each aiokafka client the worker and the commands make takes `kafka_options(settings)`, and
the worker's Faust app the same as `faust_credentials(settings)` (Faust hands them to its own
aiokafka clients): so a TLS or SASL setting reaches them all, and no client is left talking
plain to a broker that wants a login. When a client cannot bootstrap, aiokafka says only
"Unable to bootstrap"; `refusals_noted` keeps why each broker refused it (bad credentials, a
certificate not trusted), for the one line a command stops with.
"""

from __future__ import annotations

import contextlib
import logging
import ssl
from collections.abc import Iterator
from typing import Any

import faust
from aiokafka.errors import (
    AuthenticationFailedError,
    IllegalSaslStateError,
    KafkaConnectionError,
    SaslAuthenticationFailed,
    UnsupportedSaslMechanismError,
)
from aiokafka.helpers import create_ssl_context
from faust.types.auth import CredentialsT

from streams.settings import ENV_PREFIX, SASL_PROTOCOLS, TLS_PROTOCOLS, Settings, encrypted_key

LOGIN_REFUSED = (
    AuthenticationFailedError,
    SaslAuthenticationFailed,
    UnsupportedSaslMechanismError,
    IllegalSaslStateError,
)
"""What aiokafka raises when a broker does not take the SASL login it was given."""


def tls_context(settings: Settings) -> ssl.SSLContext | None:
    """The TLS context of a TLS protocol: the brokers' certificates checked against the CA file
    (else the system's CAs) and their host names; the client certificate, if any, shown."""
    if settings.kafka_security_protocol not in TLS_PROTOCOLS:
        return None
    context: ssl.SSLContext = create_ssl_context(
        cafile=settings.kafka_ssl_cafile or None,
        certfile=settings.kafka_ssl_certfile or None,
        keyfile=settings.kafka_ssl_keyfile or None,
        password=encrypted_key,
    )
    return context


def kafka_options(settings: Settings) -> dict[str, Any]:
    """The keyword arguments every aiokafka client takes from the settings: the bootstrap
    brokers and how to talk to them."""
    options: dict[str, Any] = {
        "bootstrap_servers": settings.bootstrap,
        "security_protocol": settings.kafka_security_protocol,
        "ssl_context": tls_context(settings),
    }
    if settings.kafka_security_protocol in SASL_PROTOCOLS:
        options |= {
            "sasl_mechanism": settings.kafka_sasl_mechanism,
            "sasl_plain_username": settings.kafka_sasl_username,
            "sasl_plain_password": settings.kafka_sasl_password,
        }
    return options


def faust_credentials(settings: Settings) -> CredentialsT | None:
    """The same security as Faust's `broker_credentials`, which its aiokafka driver turns into
    these clients' options (`credentials_to_aiokafka_auth`): SASL over TLS when given a
    context, TLS alone as `SSLCredentials`."""
    context = tls_context(settings)
    if settings.kafka_security_protocol in SASL_PROTOCOLS:
        return faust.SASLCredentials(
            username=settings.kafka_sasl_username,
            password=settings.kafka_sasl_password,
            mechanism=settings.kafka_sasl_mechanism,
            ssl_context=context,
        )
    return None if context is None else faust.SSLCredentials(context)


class RefusalNotes(logging.Handler):
    """The last reason a broker refused a client's connection, from aiokafka's log record of
    it (`Unable connect to "HOST:PORT": ERROR`)."""

    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self.last: BaseException | None = None

    def emit(self, record: logging.LogRecord) -> None:
        arguments = record.args if isinstance(record.args, tuple) else ()
        for argument in arguments:
            if isinstance(argument, BaseException):
                self.last = argument


@contextlib.contextmanager
def refusals_noted() -> Iterator[RefusalNotes]:
    """Note why brokers refused connections while the block runs."""
    notes = RefusalNotes()
    client = logging.getLogger("aiokafka")
    client.addHandler(notes)
    try:
        yield notes
    finally:
        client.removeHandler(notes)


def refused_security(settings: Settings, refusal: BaseException | None) -> str | None:
    """What a broker's `refusal` (from `refusals_noted`) says of the security settings, if it
    is theirs: a login refused names authentication and the SASL settings, a failed TLS
    handshake the TLS ones, and a connection closed over TLS by a client without a
    certificate the client certificate (a listener wanting one closes the connection after the
    handshake, and aiokafka is told no more)."""
    if isinstance(refusal, LOGIN_REFUSED):
        return (
            f"authentication failed: Kafka at {settings.bootstrap} refused the SASL login"
            f" ({ENV_PREFIX}KAFKA_SASL_MECHANISM={settings.kafka_sasl_mechanism},"
            f" {ENV_PREFIX}KAFKA_SASL_USERNAME={settings.kafka_sasl_username!r} and"
            f" {ENV_PREFIX}KAFKA_SASL_PASSWORD): {refusal}"
        )
    if isinstance(refusal, ssl.SSLError):
        return (
            f"cannot reach Kafka at {settings.bootstrap}: the TLS handshake failed ({refusal});"
            f" see {ENV_PREFIX}KAFKA_SECURITY_PROTOCOL={settings.kafka_security_protocol} and"
            f" {ENV_PREFIX}KAFKA_SSL_CAFILE"
        )
    if (
        isinstance(refusal, KafkaConnectionError)
        and settings.kafka_security_protocol in TLS_PROTOCOLS
        and not settings.kafka_ssl_certfile
    ):
        return (
            f"cannot reach Kafka at {settings.bootstrap}: the broker closed the connection"
            f" after the TLS handshake ({refusal}); a listener wanting a client certificate"
            f" (ssl.client.auth=required) does, and {ENV_PREFIX}KAFKA_SSL_CERTFILE is not set"
        )
    return None
