"""The worker's log: stdlib logging, as text for people or one JSON object per line.

`RUMOURMILL_LOG_FORMAT=json` formats every record of the process this way (Faust's and
aiokafka's too); the fields given with `extra=` (a dead letter's topic and offset, a refused
policy's key...) become keys of the object, so a machine can select on them.
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime
from typing import Any

import orjson

from streams.settings import Settings

LOGGER_NAME = "rumourmill"
TEXT_FORMAT = "[%(asctime)s] [%(process)d] [%(levelname)s] %(name)s: %(message)s"
_RECORD_FIELDS = frozenset(vars(logging.LogRecord("", 0, "", 0, "", None, None))) | {
    "message",
    "asctime",
    "taskName",
}


def logger(name: str) -> logging.Logger:
    """The product logger of one module, `rumourmill.NAME`."""
    return logging.getLogger(f"{LOGGER_NAME}.{name}")


class JsonFormatter(logging.Formatter):
    """One JSON object per record: time, level, logger, message, the `extra` fields, exception."""

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        entry |= {k: v for k, v in vars(record).items() if k not in _RECORD_FIELDS}
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        return orjson.dumps(entry, default=str).decode()


def logging_config(settings: Settings) -> dict[str, Any]:
    """The `logging.config.dictConfig` of a worker: one handler on stderr, in the chosen format."""
    formatter: dict[str, Any] = (
        {"()": JsonFormatter} if settings.log_format == "json" else {"format": TEXT_FORMAT}
    )
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "formatters": {"default": formatter},
        "handlers": {
            "default": {
                "class": "logging.StreamHandler",
                "formatter": "default",
                "stream": "ext://sys.stderr",
            }
        },
        "root": {"level": settings.log_level.upper(), "handlers": ["default"]},
    }
