"""Wording: how a memory reads, made from the event's key, names and payload.

An event reads as a plain sentence: `combat.enemy-defeated` by Ilse at the tavern reads
"Ilse enemy defeated at The Crooked Lantern (enemy: npc-drunk-sailor)". Choose readable keys
and names. What was said (`player-said` text, `told` content) is remembered as said; an event
described in words reads at most `MOST_DESCRIBED_CHARS` characters.
"""

from __future__ import annotations

import re
from collections.abc import Callable

import orjson
from pydantic import JsonValue

from projections.event_keys import PLAYER_SAID, TOLD
from schemas import Event

Names = Callable[[str], str]
"""What a character calls an id (`Catalogue.name_of`): its declared name, else the id."""

SPOKEN_FIELDS = {PLAYER_SAID: "text", TOLD: "content"}
"""The payload field that holds the words of a conversation."""

QUOTED = re.compile(r'"[^"]*"|“[^”]*”')
ELLIPSIS = "…"
MOST_DESCRIBED_CHARS = 2000
"""The longest an event's description may be (the last character an ellipsis). Each id it names
reads as the name declared for it, up to 256 characters: a payload listing an item of a short id
many times made a memory a hundred times the event's size (a loot list of 7.6 KB, one of 388 KB),
which no state record takes, and the worker stopped at every restart."""


def event_content(event: Event, names: Names) -> str:
    """The event as a character remembers it.

    "{actor} {last key segment, hyphens to spaces}[ {target}][ at {place}][ ({key: value, ...})]",
    names in place of ids, at most `MOST_DESCRIBED_CHARS` long; for a conversation, the words
    said.
    """
    spoken = spoken_words(event)
    if spoken is not None:
        return spoken
    words = [names(event.actor)] if event.actor is not None else []
    words.append(event.key.rsplit(".", 1)[-1].replace("-", " "))
    if event.target is not None:
        words.append(names(event.target))
    if event.location is not None:
        words += ["at", names(event.location)]
    if event.payload:
        details = ", ".join(
            f"{key}: {_detail(value, names)}" for key, value in event.payload.items()
        )
        words.append(f"({details})")
    return _described_at_most(" ".join(words))


def cut(text: str, max_chars: int) -> str:
    """`text`, or when it is longer than `max_chars`, its start ending in an ellipsis."""
    if len(text) > max_chars:
        return text[: max_chars - 1].rstrip() + ELLIPSIS
    return text


def _described_at_most(text: str) -> str:
    """`text` cut as `cut` cuts it to `MOST_DESCRIBED_CHARS`, each parenthesis the cut left open
    closed after the ellipsis: a retelling (`retell`) drops the details whole, as it drops a
    shorter event's (left open, they were kept: all 2,000 characters of them, numbers and
    names for distortion to take up)."""
    if len(text) <= MOST_DESCRIBED_CHARS:
        return text
    end = MOST_DESCRIBED_CHARS - 1
    while True:
        shown = text[:end].rstrip()
        unclosed = _unclosed(shown)
        over = len(shown) + len(ELLIPSIS) + unclosed - MOST_DESCRIBED_CHARS
        if over <= 0:
            return shown + ELLIPSIS + ")" * unclosed
        end = len(shown) - over


def _unclosed(text: str) -> int:
    """How many of the parentheses in `text` no later one closes (as `without_brackets` pairs
    them)."""
    depth = 0
    for character in text:
        if character == "(":
            depth += 1
        elif character == ")" and depth:
            depth -= 1
    return depth


def spoken_words(event: Event) -> str | None:
    """The words of a conversation event, if it has any."""
    field = SPOKEN_FIELDS.get(event.key)
    words = None if field is None else event.payload.get(field)
    return words if isinstance(words, str) and words.strip() else None


def retell(content: str) -> str:
    """Content as a listener keeps it: the statement stays, the detail goes.

    Quoted words become "something" and parenthesised details are dropped:
    `Ilse said "give me the key" at the inn (gold: 5)` -> `Ilse said something at the inn`.
    """
    retold = without_brackets(QUOTED.sub("something", content), "(", ")", "")
    return " ".join(retold.split()) or content


def without_brackets(text: str, opening: str, closing: str, gap: str) -> str:
    """`text` without each matched `opening` ... `closing` pair, what it encloses (nested pairs
    too) and the whitespace before it, each leaving `gap`; an unmatched bracket stays.

    A closing matches the nearest opening left before it, as dropping innermost pairs until
    none is left would, but in one pass: a line nested 10,000 deep costs its length, not its
    length times its depth (seconds, for a line any event may carry)."""
    kept: list[str] = []
    opened: list[int] = []  # where in `kept` each opening not yet matched stands
    for piece in re.split(f"({re.escape(opening)}|{re.escape(closing)})", text):
        if piece == opening:
            opened.append(len(kept))
        elif piece == closing and opened:
            del kept[opened.pop() :]
            while kept and not (trimmed := kept[-1].rstrip()):
                kept.pop()  # whitespace (or a gap) alone: the space before the pair
            if kept:
                kept[-1] = trimmed
            kept.append(gap)
            continue
        kept.append(piece)
    return "".join(kept)


def _detail(value: JsonValue, names: Names) -> str:
    """A payload value in words: ids by name, lists as "a, b and c", the rest as JSON."""
    if isinstance(value, str):
        return names(value)
    if isinstance(value, list) and value:
        items = [_detail(item, names) for item in value]
        return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]
    return orjson.dumps(value).decode()
