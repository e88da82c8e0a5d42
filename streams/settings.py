"""Worker settings: from `RUMOURMILL_*` environment variables, overridden by CLI flags."""

from __future__ import annotations

import os
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any


def _api_keys(text: str) -> dict[str, str]:
    """`key1:tenant1,key2:tenant2` -> {key: tenant}."""
    keys: dict[str, str] = {}
    for item in filter(None, (part.strip() for part in text.split(","))):
        key, sep, tenant = item.partition(":")
        if not sep or not key or not tenant:
            raise ValueError(f"RUMOURMILL_API_KEYS entry {item!r} must read KEY:TENANT")
        keys[key] = tenant
    return keys


@dataclass(frozen=True)
class Settings:
    """Everything a worker needs to know; each field has an env var `RUMOURMILL_<NAME>`."""

    broker: str = field(default="127.0.0.1:9092", metadata={"help": "Kafka bootstrap host:port"})
    data_dir: Path = field(default=Path("data"), metadata={"help": "RocksDB tables and state"})
    web_host: str = field(default="127.0.0.1", metadata={"help": "address the web server binds"})
    web_port: int = field(default=6066, metadata={"help": "port of the runtime read"})
    web_url: str = field(default="", metadata={"help": "how other workers reach this one"})
    app_id: str = field(default="rumourmill", metadata={"help": "consumer group and table prefix"})
    partitions: int = field(default=4, metadata={"help": "partitions of every topic"})
    replication: int = field(default=1, metadata={"help": "replication factor of every topic"})
    max_event_bytes: int = field(default=256 * 1024, metadata={"help": "larger are dead-lettered"})
    block_cache_mb: int = field(default=16, metadata={"help": "RocksDB block cache per partition"})
    log_level: str = field(default="info", metadata={"help": "worker log level"})
    api_keys: str = field(default="", metadata={"help": "KEY:TENANT,... ; empty: no auth"})
    topic_prefix: str = field(default="rumourmill", metadata={"help": "PREFIX.events..."})

    @classmethod
    def from_env(cls, environ: dict[str, str] | None = None, **overrides: Any) -> Settings:
        """Read `RUMOURMILL_*` variables, then apply non-None `overrides` (CLI flags)."""
        environ = dict(os.environ if environ is None else environ)
        values: dict[str, Any] = {}
        for item in fields(cls):
            raw = environ.get(f"RUMOURMILL_{item.name.upper()}")
            if raw is not None:
                values[item.name] = _convert(item.type, raw)
        settings = cls(**values)
        return replace(settings, **{k: v for k, v in overrides.items() if v is not None})

    @property
    def canonical_url(self) -> str:
        """The URL other workers forward reads to (default: http://WEB_HOST:WEB_PORT)."""
        return self.web_url or f"http://{self.web_host}:{self.web_port}"

    @property
    def events_topic(self) -> str:
        return f"{self.topic_prefix}.events"

    @property
    def acks_topic(self) -> str:
        return f"{self.topic_prefix}.acks"

    @property
    def deadletter_topic(self) -> str:
        return f"{self.topic_prefix}.deadletter"

    @property
    def policies_topic(self) -> str:
        return f"{self.topic_prefix}.policies"

    @property
    def tenants_by_api_key(self) -> dict[str, str]:
        return _api_keys(self.api_keys)


def _convert(kind: Any, raw: str) -> Any:
    kind = str(kind)
    if kind == "int":
        return int(raw)
    if kind == "Path":
        return Path(raw)
    return raw
