"""The worker's log: stdlib logging, as text for people or one JSON object per line.

`RUMOURMILL_LOG_FORMAT=json` formats every record of the process this way (Faust's and
aiokafka's too); the fields given with `extra=` (a dead letter's topic and offset, a refused
policy's key...) become keys of the object, so a machine can select on them. The Kafka client's
complaints, and a worker's about reads it could not forward, are logged once per kind and
`QUIET_SECONDS` (`QuietRepeats`).
"""

from __future__ import annotations

import contextlib
import logging
import math
import re
import threading
from collections import OrderedDict
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import orjson
from aiohttp.http_exceptions import HttpProcessingError
from aiohttp.web import RequestPayloadError

from streams.settings import Settings
from streams.show import for_terminal

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


class TextFormatter(logging.Formatter):
    """`TEXT_FORMAT`, each control character shown escaped (`show.for_terminal`): a dead
    letter's reason names an event's field as sent, and a model server's answer is quoted,
    so an ESC sequence in either set the operator's window title, or wrote their clipboard,
    through the log (the JSON format escapes them already)."""

    def __init__(self, fmt: str = TEXT_FORMAT) -> None:
        super().__init__(fmt)

    def format(self, record: logging.LogRecord) -> str:
        return for_terminal(super().format(record))


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


def json_line(level: str, message: str) -> str:
    """One line of the JSON log said by the worker command itself, before its log is set up
    (a bad setting, a Kafka it cannot reach): as `JsonFormatter` writes a record."""
    levelno = logging.getLevelNamesMapping()[level.upper()]
    record = logging.LogRecord(f"{LOGGER_NAME}.worker", levelno, __file__, 0, message, None, None)
    return JsonFormatter().format(record)


QUIET_SECONDS = 30.0
"""How long the same complaint of a `QUIETED` logger is logged once. With its broker gone, the
Kafka client logs every failed connection, fetch, metadata and coordinator request (some 125
lines a second), a worker whose peer died logs every read it could not forward to it (one
a read, thousands a second at a game's read rate, until the group rebalances), and a game
server sending a broken event at its every turn made a dead letter each (2,163 lines in 3 s):
they bury the worker's own (and fill a disk)."""
DEAD_LETTERS = f"{LOGGER_NAME}.deadletters"
"""The logger of dead letters: each kind of reason (`reason_kind`) is quieted on its own."""
QUIETED = ("aiokafka", f"{LOGGER_NAME}.forwarding", DEAD_LETTERS)
"""The Kafka client's loggers, the one of reads forwarded to a world's owner, and the one of
dead letters (every one of which is on the dead-letter topic, and counted in the metrics)."""


INVALID = "invalid event"
"""How the reason of an event the contract refuses begins: the field it names follows."""
QUOTED = re.compile(r"(?<!\w)'[^']*'(?!\w)|\"[^\"]*\"")
"""A quoted id in a reason (not an apostrophe: "the event's")."""
DECLARED = re.compile(r"\b(entities|payload)\.[^.:\s]+")
"""Where an invalid event's field is under an id of the game's own (a declared entity, a payload
key): one cause whatever the id."""
MOST_KINDS = 1024
"""The kinds of record `QuietRepeats` remembers; past them, the one met longest ago is forgotten
(what it held back unsaid: every dead letter is on its topic and in the metrics)."""


def reason_kind(reason: str) -> str:
    """What a dead letter's reason says of its cause: its first clause (for an invalid event,
    with the field it names), quoted ids, the game's own keys and numbers left out. The letters
    of one cause are quieted together, another cause is logged at once; a reason naming the
    message's own ids (a key, a timeline, an entity) is one kind whatever ids it names."""
    clauses = QUOTED.sub("…", reason).split(": ", 2)
    cause = DECLARED.sub(r"\1.…", ": ".join(clauses[:2])) if clauses[0] == INVALID else clauses[0]
    return re.sub(r"\d+", "#", cause)[:100]


class QuietRepeats(logging.Filter):
    """Lets one record of each kind of the `QUIETED` loggers' (its logger, level and message
    template) through per `QUIET_SECONDS`; the next one let through says how many it held
    back. Every other record passes."""

    def __init__(self) -> None:
        super().__init__()
        self._shown: OrderedDict[tuple[str, int, object, object], tuple[float, int]]
        self._shown = OrderedDict()
        """Each kind, the one met last at the end: when one was last let through, and how many
        were held back since."""
        self._lock = threading.Lock()  # the client logs from the loop and the consumer thread

    def filter(self, record: logging.LogRecord) -> bool:
        if not record.name.startswith(QUIETED):
            return True
        kind = (record.name, record.levelno, record.msg, getattr(record, "reason_kind", None))
        with self._lock:
            shown_at, held = self._shown.pop(kind, (-math.inf, 0))
            if len(self._shown) >= MOST_KINDS:
                self._shown.popitem(last=False)
            if record.created - shown_at < QUIET_SECONDS:
                self._shown[kind] = (shown_at, held + 1)
                return False
            self._shown[kind] = (record.created, 0)
        if held and isinstance(record.msg, str):
            record.msg += f" (and {held} more like it since the last one logged)"
        return True


AIOHTTP_SERVER = "aiohttp.server"


class UnparsedRequests(logging.Filter):
    """aiohttp's record of a request it could not parse (a header over 8 KB, a control
    character in one, a path that is not UTF-8), or of a body its `Content-Encoding` did not
    decode, as one INFO line naming what was wrong, not an ERROR with a traceback and the line
    itself: that line could be a careless client's `Authorization` header, its API key in the
    log. Every other record passes as it is."""

    def filter(self, record: logging.LogRecord) -> bool:
        unparsed = record.exc_info[1] if record.exc_info else None
        if record.name != AIOHTTP_SERVER:
            return True
        if isinstance(unparsed, HttpProcessingError):
            remote = record.args[0] if isinstance(record.args, tuple) and record.args else None
            record.msg = "refused a request it could not parse from %s: %s"
            record.args = (remote or "an unknown address", type(unparsed).__name__)
        elif isinstance(unparsed, RequestPayloadError):  # read after the answer (`streams.web`)
            record.msg = "closed a connection whose request body did not decode: %s"
            record.args = (type(unparsed.__cause__ or unparsed).__name__,)
        else:
            return True
        record.exc_info = record.exc_text = None
        if record.levelno > logging.INFO:
            record.levelno, record.levelname = logging.INFO, "INFO"
        return logging.getLogger(record.name).isEnabledFor(record.levelno)


@contextlib.contextmanager
def root_logger_kept() -> Iterator[None]:
    """Imports made inside leave the root logger as it was. WordLlama calls
    `logging.basicConfig(level=INFO)` when imported: a command, which sets no log up so that
    it prints its own lines and warnings only, then printed every library's INFO records on
    stderr (a rebuild, the Kafka client's). `basicConfig` does nothing where the root logger
    has a handler: it has one meanwhile. (The worker sets its own log up, `logging_config`.)"""
    root = logging.getLogger()
    placeholder = logging.NullHandler()
    root.addHandler(placeholder)
    try:
        yield
    finally:
        root.removeHandler(placeholder)


def logging_config(settings: Settings) -> dict[str, Any]:
    """The `logging.config.dictConfig` of a worker: one handler on stderr, in the chosen format."""
    formatter: dict[str, Any] = {
        "()": JsonFormatter if settings.log_format == "json" else TextFormatter
    }
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "formatters": {"default": formatter},
        "filters": {
            "quiet_repeats": {"()": QuietRepeats},
            "unparsed_requests": {"()": UnparsedRequests},
        },
        "handlers": {
            "default": {
                "class": "logging.StreamHandler",
                "formatter": "default",
                "filters": ["quiet_repeats", "unparsed_requests"],
                "stream": "ext://sys.stderr",
            }
        },
        "root": {"level": settings.log_level.upper(), "handlers": ["default"]},
    }
