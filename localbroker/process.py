"""The lifecycle every local broker shares: one process, its temp dir, readiness, clean-up."""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from abc import ABC, abstractmethod
from pathlib import Path
from types import TracebackType

from localbroker.network import HOST, free_port, metadata_broker_count

LOG_TAIL_LINES = 60
_PR_SET_PDEATHSIG = 1


class BrokerStartError(RuntimeError):
    """The broker did not come up; the message carries the tail of its log."""


def die_with_parent() -> None:
    """In the child: get SIGKILL if the parent dies, so no broker outlives a crashed test run.

    Linux delivers it when the *thread* that forked exits, hence only used from the
    main thread (see `LocalBroker._spawn`).
    """
    parent = os.getppid()
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    except Exception:  # best effort, never block the spawn
        return
    if os.getppid() != parent:  # parent already gone before prctl took effect
        os._exit(1)


def log_tail(path: Path, lines: int = LOG_TAIL_LINES) -> str:
    """The last `lines` of a log, or a note saying why there is none."""
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return f"(no log at {path})"
    return "\n".join(text.splitlines()[-lines:]) or f"({path} is empty)"


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
        """``"127.0.0.1:PORT"``: what Kafka clients (and `RUMOURMILL_BROKER`) are given."""
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
        """Once per `start()`, after the temp dir exists: write configs, format storage."""

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
        """Stop the process (SIGTERM, SIGKILL after `stop_timeout`) and delete its temp dir."""
        self._terminate(kill=False)
        if self.workdir is not None:
            shutil.rmtree(self.workdir, ignore_errors=True)
            self.workdir = None
        if self._atexit_registered:
            atexit.unregister(self.stop)
            self._atexit_registered = False

    def halt(self, *, kill: bool = False) -> None:
        """Stop the process but keep its data dir: a broker outage, until `restart()` brings
        the same broker back (``kill=True`` SIGKILLs it, a crash)."""
        self._terminate(kill=kill)

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
                if metadata_broker_count(self.port) > 0:
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
            parts.append(f"--- tail of {path} ---\n{log_tail(path)}")
        return "\n".join(parts)
