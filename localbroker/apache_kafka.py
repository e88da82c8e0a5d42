"""Apache Kafka 4.x on 127.0.0.1, run from the cached jars with the machine's Java."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path

from localbroker.kafka_jars import DEFAULT_KAFKA_CACHE, DEFAULT_KAFKA_VERSION, fetch_apache_kafka
from localbroker.kraft import LOG4J2, cluster_id, server_properties
from localbroker.network import HOST, free_port
from localbroker.process import BrokerStartError, LocalBroker
from localbroker.security import (
    Certificate,
    scram_credentials,
    secured_ports,
    secured_properties,
)


def find_java() -> str:
    """`$JAVA_HOME/bin/java` when there is one, else `java` from the PATH."""
    home = os.environ.get("JAVA_HOME")
    if home and (Path(home) / "bin" / "java").is_file():
        return str(Path(home) / "bin" / "java")
    return shutil.which("java") or "java"


KAFKA_HEAP = "1g"
"""The heap Kafka's own `kafka-server-start.sh` gives a broker, as its least and its most."""
KAFKA_JVM_PERFORMANCE_OPTS = (
    "-XX:+UseG1GC",
    "-XX:MaxGCPauseMillis=20",
    "-XX:InitiatingHeapOccupancyPercent=35",
    "-XX:+ExplicitGCInvokesConcurrent",
    "-Djava.awt.headless=true",
)
"""Kafka's own `kafka-run-class.sh` defaults (`KAFKA_JVM_PERFORMANCE_OPTS`).

With a heap of 128 MB growing to 512 MB instead, each produce request near the producer's 1 MB
limit (a worker's changelog batches) was a humongous allocation that started a concurrent
collection: under the worker benchmark's load the broker ran some 95 concurrent cycles and 47
young collections in 12 s, 0.8 s of collecting, and took half of one of the machine's two
cores; with these, 2 young collections and none concurrent, and a quarter of a core."""


def property_line(item: tuple[str, str]) -> str:
    """A line of a Java properties file: a backslash of the value kept as written (the file
    reads one as an escape)."""
    key, value = item
    escaped = value.replace("\\", "\\\\")
    return f"{key}={escaped}\n"


class ApacheKafkaBroker(LocalBroker):
    """Apache Kafka 4.x, broker and KRaft controller in one JVM, single node."""

    name = "kafka"

    def __init__(
        self,
        *,
        version: str = DEFAULT_KAFKA_VERSION,
        cache: Path = DEFAULT_KAFKA_CACHE,
        java: str | None = None,
        port: int | None = None,
        controller_port: int | None = None,
        config: Mapping[str, str] | None = None,
        heap: str = KAFKA_HEAP,
        jvm_args: Sequence[str] = (),
        startup_timeout: float = 120.0,
        stop_timeout: float = 30.0,
        sasl_users: Mapping[str, str] | None = None,
        tls: bool = False,
    ) -> None:
        """`sasl_users` (user: password) adds a SASL_PLAINTEXT listener taking their PLAIN,
        SCRAM-SHA-256 and SCRAM-SHA-512 logins; `tls`, an SSL listener with a self-signed
        certificate (`certificate`) and a MUTUAL_TLS one taking only clients showing
        `client_certificate`; both, a SASL_SSL one too. Each has a port of its own
        (`bootstrap_of`)."""
        super().__init__(port=port, startup_timeout=startup_timeout, stop_timeout=stop_timeout)
        self.version = version
        self.cache = cache
        self.java = java or find_java()
        self.controller_port = controller_port if controller_port is not None else free_port()
        self.extra_config = dict(config or {})
        self.heap = heap
        self.jvm_args = list(jvm_args)
        self._libs: Path | None = None
        self.sasl_users = dict(sasl_users or {})
        self.tls = tls
        self.secured_ports = secured_ports(self.sasl_users, tls)
        """The port of each secured listener, by name (`SASL_PLAINTEXT`, `SSL`, `MUTUAL_TLS`...)."""

    def bootstrap_of(self, listener: str) -> str:
        """The address of `listener` (`PLAINTEXT` is `bootstrap`)."""
        port = self.port if listener == "PLAINTEXT" else self.secured_ports[listener]
        return f"{HOST}:{port}"

    @property
    def certificates(self) -> tuple[Certificate, Certificate] | None:
        """The broker's self-signed certificate (the CA file its clients trust) and the client
        certificate its MUTUAL_TLS listener takes; none without TLS."""
        if not self.tls or self.workdir is None:
            return None
        return Certificate(self.workdir, "broker"), Certificate(self.workdir, "client")

    @property
    def certificate(self) -> Path:
        """The broker's certificate: the CA file its TLS clients trust."""
        assert self.certificates is not None, "no TLS broker started"
        return self.certificates[0].path

    @property
    def client_certificate(self) -> Certificate:
        """The certificate (and key) a client shows the MUTUAL_TLS listener."""
        assert self.certificates is not None, "no TLS broker started"
        return self.certificates[1]

    def server_properties(self) -> dict[str, str]:
        """The KRaft single-node config with this broker's ports, data dir and extra config."""
        assert self.workdir is not None
        properties = server_properties(self.port, self.controller_port, self.workdir / "data")
        if self.secured_ports:
            properties |= secured_properties(
                self.port, self.controller_port, self.secured_ports, self.sasl_users,
                self.certificates,
            )  # fmt: skip
        return properties | self.extra_config

    def _prepare(self) -> None:
        assert self.workdir is not None
        self._libs = fetch_apache_kafka(self.version, self.cache)
        for certificate in self.certificates or ():
            certificate.make()
        lines = "".join(map(property_line, self.server_properties().items()))
        (self.workdir / "server.properties").write_text(lines)
        (self.workdir / "log4j2.properties").write_text(LOG4J2.format(log=self.log_path))
        fmt = [
            *self._java_prefix(), "kafka.tools.StorageTool", "format",
            "-t", cluster_id(), "-c", str(self.workdir / "server.properties"),
            *scram_credentials(self.sasl_users),
        ]  # fmt: skip
        result = subprocess.run(
            fmt, capture_output=True, text=True, cwd=self.workdir, stdin=subprocess.DEVNULL
        )
        if result.returncode != 0:
            output = result.stdout[-4000:] + result.stderr[-4000:]
            raise BrokerStartError(f"kafka storage format failed ({result.returncode}):\n{output}")

    def _java_prefix(self) -> list[str]:
        assert self.workdir is not None and self._libs is not None
        return [
            self.java,
            f"-Xmx{self.heap}",
            f"-Xms{self.heap}",
            *KAFKA_JVM_PERFORMANCE_OPTS,
            f"-Dlog4j2.configurationFile={self.workdir / 'log4j2.properties'}",
            f"-Dkafka.logs.dir={self.workdir}",
            *self.jvm_args,
            "-cp",
            f"{self._libs}/*",
        ]

    def _command(self) -> list[str]:
        assert self.workdir is not None
        return [*self._java_prefix(), "kafka.Kafka", str(self.workdir / "server.properties")]

    def _log_files(self) -> list[Path]:
        return [*super()._log_files(), self.log_path]
