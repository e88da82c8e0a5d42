"""Reads for a person: a worker's HTTP answers printed as plain tables."""

from __future__ import annotations

import http.client
import re
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Sequence
from typing import IO, Any

import orjson

from projections.wording import one_line
from streams.settings import Settings

CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")
"""The control characters a terminal acts on (C0 but tab and newline, DEL, C1): a player's
words or ids holding ESC sequences set the operator's window title, or wrote their clipboard
(OSC 52), through the read commands' tables; and the bidirectional marks, overrides and
isolates, which drew the rest of a row reversed in a terminal that lays text out both ways (an
id ending in U+202E showed a relation's feeling and counts backwards)."""


def for_terminal(text: str) -> str:
    """`text` as printed for a person: each control character shown escaped (`\\x1b`,
    `\\u202e`)."""
    return CONTROL.sub(_escaped, text)


def world_label(tenant_id: str, world_id: str) -> str:
    """A tenant's world as printed: `tenant/world`, or, where an id holds `/`, a quote, a
    backslash or a control character, both ids JSON-quoted (tenant `a/b`'s world `c` and
    tenant `a`'s world `b/c` were both printed `a/b/c`, each with its own digest)."""
    ids = (tenant_id, world_id)
    if not any(QUOTED.search(id_) for id_ in ids):
        return f"{tenant_id}/{world_id}"
    return for_terminal("/".join(orjson.dumps(id_).decode() for id_ in ids))


QUOTED = re.compile(r'[/"\\\t\n]|' + CONTROL.pattern)
"""What makes an id printed quoted (`world_label`)."""


def _escaped(found: re.Match[str]) -> str:
    code = ord(found.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


class ReadFailed(Exception):
    """The worker answered with an error (the message is its `detail`), could not be reached,
    or what answered was not a worker."""

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status
        """The HTTP status of the error answered; None when none was."""


def fetch(
    settings: Settings, path: str, query: dict[str, str], posted: Any = None
) -> dict[str, Any]:
    """GET a worker's JSON answer, or POST `posted` as JSON when given (any worker: it forwards
    to the world's owner). A body that is not a JSON object raises `ReadFailed` with its start:
    a mistyped URL may reach another web server, which answers 200 too."""
    body = fetch_body(settings, path, query, posted)
    try:
        answer = orjson.loads(body)
    except orjson.JSONDecodeError:
        answer = None
    if not isinstance(answer, dict):
        raise ReadFailed(
            f"200 from {settings.canonical_url} (not a worker's JSON answer): "
            + (start_of(body) or "an empty body")
        )
    return answer


DEFAULT_PORTS = {"http": 80, "https": 443}


class _RedirectRefused(Exception):
    """A redirect `_SameHostRedirects` does not follow: its status, and where it points."""

    def __init__(self, status: int, location: str) -> None:
        super().__init__(status, location)
        self.status, self.location = status, location


class _SameHostRedirects(urllib.request.HTTPRedirectHandler):
    """A read's redirect is followed on the same host and port, or to https on the same host (a
    proxy's move to TLS), only: urllib sends the request's headers on to wherever it points, the
    API key's `Authorization` to another host too. A POST's is not followed: urllib turns it
    into a GET."""

    def redirect_request(
        self,
        req: urllib.request.Request,
        fp: IO[bytes],
        code: int,
        msg: str,
        headers: http.client.HTTPMessage,
        newurl: str,
    ) -> urllib.request.Request | None:
        was, now = urllib.parse.urlsplit(req.full_url), urllib.parse.urlsplit(newurl)
        upgraded = (was.scheme, now.scheme) == ("http", "https")
        try:
            same_port = now.scheme == was.scheme and (
                now.port or DEFAULT_PORTS.get(now.scheme)
            ) == (was.port or DEFAULT_PORTS.get(was.scheme))
        except ValueError:  # a port out of range, or no number
            same_port = upgraded = False
        if req.get_method() != "GET" or now.hostname != was.hostname or not (same_port or upgraded):
            raise _RedirectRefused(code, newurl)  # never to plain http from https: the key in clear
        return super().redirect_request(req, fp, code, msg, headers, newurl)

    def http_error_302(
        self,
        req: urllib.request.Request,
        fp: IO[bytes],
        code: int,
        msg: str,
        headers: http.client.HTTPMessage,
    ) -> IO[bytes] | None:
        """A Location that is no URL ("http://[::1/x") is refused too: urllib's parse of it
        raised out of the command as a traceback."""
        try:
            return super().http_error_302(req, fp, code, msg, headers)
        except ValueError:
            raise _RedirectRefused(code, headers.get("Location", "")) from None

    http_error_301 = http_error_303 = http_error_307 = http_error_308 = http_error_302


_OPENER = urllib.request.build_opener(_SameHostRedirects)


def fetch_body(settings: Settings, path: str, query: dict[str, str], posted: Any = None) -> bytes:
    """GET (or POST `posted` as JSON) a worker's answer as it is sent (JSON or a picture); an
    error raises `ReadFailed` with the worker's `detail`, or what else answered."""
    url = f"{settings.canonical_url}{path}?{urllib.parse.urlencode(query)}"
    sent = None if posted is None else orjson.dumps(posted)
    request = urllib.request.Request(url, data=sent)
    if sent is not None:
        request.add_header("Content-Type", "application/json")
    if settings.api_key:
        request.add_header("Authorization", f"Bearer {settings.api_key}")
    try:
        with _OPENER.open(request, timeout=30) as reply:
            body: bytes = reply.read()
            return body
    except _RedirectRefused as refused:
        why = "elsewhere: the key would go with it" if settings.api_key else "elsewhere"
        raise ReadFailed(
            f"{refused.status}: {settings.canonical_url} redirects to {refused.location}, which"
            f" is not followed ({'a posted reply' if posted is not None else why}): give that"
            " URL as --url if it is the worker's",
            refused.status,
        ) from None
    except urllib.error.HTTPError as error:
        if 300 <= error.code < 400:
            looping = str(error.msg).startswith(urllib.request.HTTPRedirectHandler.inf_msg)
            where = error.headers.get("Location") or "nowhere said"
            said = (  # urllib says either in the same words
                "redirects in a loop, or too many times"
                if looping
                else f"redirects to {where}, not followed"
            )
            raise ReadFailed(f"{error.code}: {settings.canonical_url} {said}", error.code) from None
        detail = _error_detail(error) + (_key_hint(settings) if error.code == 401 else "")
        raise ReadFailed(f"{error.code}: {detail}", error.code) from None
    except (urllib.error.URLError, OSError) as error:
        reason = getattr(error, "reason", error)
        raise ReadFailed(f"cannot reach {settings.canonical_url}: {reason}") from None
    except http.client.HTTPException as error:  # something answered, but not in HTTP
        raise ReadFailed(
            f"no HTTP answer from {settings.canonical_url} ({type(error).__name__}: {error})"
        ) from None


def _key_hint(settings: Settings) -> str:
    """What a read command refused with 401 lacks: the worker's 401 cannot say where a command
    takes its key from."""
    if settings.api_key:
        return (
            " (the key sent, --api-key or RUMOURMILL_API_KEY, is not one of its "
            "RUMOURMILL_API_KEYS)"
        )
    return " (give a key of its RUMOURMILL_API_KEYS with --api-key or RUMOURMILL_API_KEY)"


def read_path(route: str, **segments: str) -> str:
    """`route` (a worker's route template, as `streams.web.ROUTES` names it) with each
    `{segment}` filled in percent-encoded, `/` included: ids may hold any character, and the
    worker decodes each segment back to the id it was."""
    return route.format_map(
        {name: urllib.parse.quote(value, safe="") for name, value in segments.items()}
    )


ERROR_BODY_SHOWN = 200
"""How much of an error body that is not the worker's JSON is shown (a proxy's page, say)."""


def _error_detail(error: urllib.error.HTTPError) -> str:
    """The worker's `detail`; for a body that is not the worker's JSON (a wrong URL's plain
    404, a proxy's 500 page) the reason and the start of the body, so a person sees who
    answered."""
    body = error.read()
    try:
        answer = orjson.loads(body)
    except orjson.JSONDecodeError:
        answer = None
    detail = answer.get("detail") if isinstance(answer, dict) else None
    if isinstance(detail, str):
        return detail
    shown = start_of(body)
    if not shown:
        return str(error.reason)
    return f"{error.reason} (not a worker's JSON answer): {shown}"


def start_of(body: bytes) -> str:
    """The start of a body that is not the worker's JSON, on one line (empty for none)."""
    text = " ".join(body.decode("utf-8", errors="replace").split())
    return text if len(text) <= ERROR_BODY_SHOWN else text[: ERROR_BODY_SHOWN - 3] + "..."


def table(title: str, columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """A titled, aligned text table; `(none)` when there are no rows. The last column (the
    words: a memory's content, a record, a turn) is shown whole, nothing after it to align."""
    last = len(columns) - 1
    cells = [[_cell(value, whole=i == last) for i, value in enumerate(row)] for row in rows]
    widths = [max([len(c), *(len(row[i]) for row in cells)]) for i, c in enumerate(columns)]
    widths[last] = min(widths[last], max(len(columns[last]), CELL_CHARS))  # its rule: no ruler

    def line(values: Sequence[str]) -> str:
        return "  ".join(v.ljust(w) for v, w in zip(values, widths, strict=True)).rstrip()

    lines = [title, line(columns), line(["-" * w for w in widths]), *map(line, cells)]
    return "\n".join(lines if cells else [*lines, "(none)"])


def mind_tables(mind: dict[str, Any]) -> str:
    """The runtime read as a person reads it: header, beliefs, recollections, relations."""
    memory_columns = [
        "seq",
        "belief_id",  # what `provenance` and `rumour-map` take
        "kind",
        "source",
        "from",
        "hops",
        "conf",
        "imp",
        "feel",
        "content",
    ]

    def memory_rows(memories: list[dict[str, Any]]) -> list[list[Any]]:
        return [
            [
                m["seq"],
                m["belief_id"],
                m["kind"] + ("*" if m["persistent"] else ""),
                m["source"],
                m["source_entity"] or "",
                m["hops"],
                m["confidence"],
                m["importance"],
                m["feeling"],
                ("(diverging) " if m["diverging"] else "") + m["content"],
            ]
            for m in memories
        ]

    header = (
        f"{mind['npc_id']} on {mind['world_instance_id']}/{mind['timeline_id']}: "
        f"at {mind['location'] or 'an unknown place'}; "
        f"processed {mind['processed_seq']} of {mind['acknowledged_seq']} received"
    )
    return "\n\n".join(
        [
            header,
            table("beliefs (* persistent)", memory_columns, memory_rows(mind["beliefs"])),
            table("recollections", memory_columns, memory_rows(mind["recollections"])),
            table(
                "relations",
                ["entity", "feeling", "memories", "last seq"],
                [
                    [r["entity_id"], r["feeling"], r["memories"], r["last_seq"]]
                    for r in mind["relations"]
                ],
            ),
        ]
    )


CELL_CHARS = 70
"""The most a table cell shows, but the last column's."""


def _cell(value: Any, whole: bool = False) -> str:
    """A table cell: on one line (a name or words holding a line break drew a row of their
    own), cut to `CELL_CHARS` unless `whole` (the records and lines said to be shown word for
    word were cut too)."""
    text = "" if value is None else for_terminal(one_line(str(value)))  # before the widths
    return text if whole or len(text) <= CELL_CHARS else text[: CELL_CHARS - 3] + "..."


def provenance_chain(found: dict[str, Any]) -> str:
    """A memory's provenance as a chain, from the original event to the character."""
    origin = found["origin"]
    lines = [f"{found['npc_id']} believes: {found['memory']['content']}"]
    if origin is None:
        lines.append("origin: unknown")
    else:
        where = f" at {origin['location']}" if origin.get("location") else ""
        when = f" ({origin['game_time']})" if origin.get("game_time") else ""
        lines.append(
            f"origin: {origin['timeline_id']}#{origin['seq']} {origin['key']}"
            f" by {origin['actor'] or 'nobody named'}{where}{when}"
        )
    for link in found["chain"]:
        if "told_by" in link:
            lines.append(
                f"  -> {link['entity_id']}, told by {link['told_by']}"
                f" (hops {link['hops']}, confidence {link['confidence']})"
            )
        elif link["hops"] == 0:  # who saw it, or told it holding none of it (a lie, forgotten)
            lines.append(f"  {link['entity_id']} started this chain (hops 0)")
        else:  # the first holder's confidence is the next link's to tell, when there is one
            sure = f", confidence {link['confidence']}" if "confidence" in link else ""
            lines.append(f"  {link['entity_id']}, told by nobody named (hops {link['hops']}{sure})")
    return "\n".join(lines)


def recall_table(found: dict[str, Any]) -> str:
    """A recall answer: what each search found, then the memories in story order."""
    searched = found["searched"]
    header = (
        f"searched: {searched['cues']} by cues, {searched['words']} by words, "
        f"{searched['vectors']} by vectors"
    )
    if reranked := searched.get("reranked"):  # a worker of an earlier release says nothing
        header += f"; {reranked} reranked"
    rows = [
        [m["seq"], m["game_time"] or "", m["kind"], m["retention"], m["score"], m["content"]]
        for m in found["memories"]
    ]
    columns = ["seq", "story time", "kind", "retention", "score", "content"]
    return "\n\n".join([header, table("recalled", columns, rows)])


def decision_tables(found: dict[str, Any]) -> str:
    """A decision context: the knowledge, the recent turns, the verdict and the prompt text."""
    rows = [[m["seq"], m["kind"], m["importance"], m["content"]] for m in found["knowledge"]]
    turns = [[t["seq"], t["speaker_id"], t["text"]] for t in found["recent_turns"]]
    return "\n\n".join(
        [
            table("knowledge", ["seq", "kind", "imp", "content"], rows),
            table("recent turns", ["seq", "speaker", "text"], turns),
            f"verdict: {found['verdict'] or 'none'}",
            "prompt:\n" + found["prompt"],
        ]
    )


def inventions_table(found: dict[str, Any]) -> str:
    """An invention check: each name the reply invented, and what the policy does."""
    rows = [[one["name"], one["kind"]] for one in found["inventions"]]
    return "\n\n".join([table("inventions", ["name", "kind"], rows), f"action: {found['action']}"])


def dialogue_tables(found: dict[str, Any]) -> str:
    """A dialogue answer: each scope's turns, oldest first, with its summary and expiry."""
    parts = []
    for scope in (found["player"], found["place"]):
        if scope is None:
            parts.append("place scope: none (the character's location is unknown)")
            continue
        who = scope.get("player_id") or scope.get("location")
        state = "expired" if scope["expired"] else f"until {scope['expires_at'] or 'no expiry'}"
        rows = [
            [t["seq"], t["occurred_at"] or "", t["speaker_id"], t["text"]] for t in scope["turns"]
        ]
        title = f"{scope['scope']} scope {who} ({state})"
        if scope["summary"] is not None:
            since = scope["turns_since_summary"]
            title += f"\nsummary: {scope['summary']} ({since} of the character's lines since)"
        parts.append(table(title, ["seq", "time", "speaker", "text"], rows))
    return "\n\n".join(parts)


def diff_tables(found: dict[str, Any]) -> str:
    """A branch diff as a person reads it: what each timeline holds that the other does not."""
    columns = ["seq", "timeline", "kind", "source", "belief_id", "content"]
    one, other = found["timeline_id"], found["other_timeline_id"]

    def rows(memories: list[dict[str, Any]]) -> list[list[Any]]:
        return [
            [
                m["seq"],
                m["timeline_id"],
                m["kind"] + ("*" if m["persistent"] else ""),
                m["source"],
                m["belief_id"],
                m["content"],
            ]
            for m in memories
        ]

    return "\n\n".join(
        [
            f"{found['npc_id']} in {found['world_instance_id']}: {one} against {other}"
            f" ({found['held_on_both']} memories held on both)",
            table(f"on {one}, not on {other}", columns, rows(found["only_on_timeline"])),
            table(f"on {other}, not on {one}", columns, rows(found["only_on_other"])),
            table(
                f"words on {one}, not on {other}",
                ["content"],
                [[c] for c in found["content_only_on_timeline"]],
            ),
            table(
                f"words on {other}, not on {one}",
                ["content"],
                [[c] for c in found["content_only_on_other"]],
            ),
        ]
    )


def chronicle_tables(found: dict[str, Any]) -> str:
    """A chronicle: each summary, saying who made it, with the records behind it, then the
    newest records word for word (each digest's text begins with its story time), as a table."""
    header = (
        f"{found['npc_id']} on {found['world_instance_id']}/{found['timeline_id']}: "
        f"{found['records']} records told in {found['tokens']} tokens "
        "(the records are the authority)"
    )
    rolled = [] if found["condensed"] is None else [("condensed", found["condensed"])]
    rolled += [(f"chapter {number}", c) for number, c in enumerate(found["chapters"], 1)]
    summaries = [
        f"{title}: summary by the {part['summarised_by']} of {part['records']} records, "
        f"seq {part['from_seq']} to {part['to_seq']}, {part['tokens']} tokens\n"
        + "\n".join(f"  {line}" for line in part["text"].splitlines())
        for title, part in rolled
    ]
    rows = [[d["seq"], d["belief_id"], d["text"]] for d in found["digests"]]
    columns = ["seq", "belief_id", "text"]
    return "\n\n".join([header, *summaries, table("records, word for word", columns, rows)])
