"""Wording: how a memory reads, made from the event's key, names and payload.

An event reads as a plain sentence: `combat.enemy-defeated` by Ilse at the tavern reads
"Ilse enemy defeated at The Crooked Lantern (enemy: npc-drunk-sailor)". Choose readable keys
and names. What was said (`player-said` text, `told` content) is remembered as said; an event
described in words reads at most `MOST_DESCRIBED_CHARS` characters.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from functools import lru_cache

import orjson
from pydantic import JsonValue

from projections.event_keys import PLAYER_SAID, TOLD
from projections.writing_systems import UNSPACED
from schemas import Event
from schemas.memory import Memory
from schemas.text import visible

Names = Callable[[str], str]
"""What a character calls an id (`Catalogue.name_of`): its declared name, else the id."""

SPOKEN_FIELDS = {PLAYER_SAID: "text", TOLD: "content"}
"""The payload field that holds the words of a conversation."""

MOST_SINGLE_QUOTED = 200
"""The longest quotation in single quotes taken for one (`QUOTED`)."""
QUOTED = re.compile(
    r'"[^"]*"|“[^“”]*”|«[^«»]*»|»[^»«]*«|„[^„“”]*[“”]|「[^「」]*」|『[^『』]*』'
    # single quotes, the typographic ones only (a straight one is an apostrophe as often):
    # closed before no letter (the closing one is an apostrophe too), on one line, within
    # `MOST_SINGLE_QUOTED` characters. No quotation runs past another opening of its kind: each
    # opening is looked past for its closing, and a text of openings that never close took
    # its length times their number (40,000 of them, 9 s)
    rf"|\N{{LEFT SINGLE QUOTATION MARK}}[^\N{{LEFT SINGLE QUOTATION MARK}}\n]"
    rf"{{0,{MOST_SINGLE_QUOTED}}}?\N{{RIGHT SINGLE QUOTATION MARK}}(?!\w)"
)
"""Quoted words, in the quotation marks of the languages games are written in (English,
French, German..., Chinese and Japanese corner brackets), which a retelling takes for
"something"."""
QUOTE_CLOSINGS = {
    '"': '"',
    "“": "”",
    "«": "»",
    "»": "«",
    "„": "“",
    "「": "」",
    "『": "』",
    "\N{LEFT SINGLE QUOTATION MARK}": "\N{RIGHT SINGLE QUOTATION MARK}",
}
"""What closes a quotation `QUOTED` finds, by what opens it."""
BRACKET_CLOSINGS = {"(": ")", "\uff08": "\uff09"}
"""What closes the brackets a retelling drops with what they hold (the full-width ones of
Chinese and Japanese too), by what opens them."""
ELLIPSIS = "…"
MOST_DESCRIBED_CHARS = 2000
"""The longest an event's description may be (cut, it ends in an ellipsis, then what closes the
quotation and the parentheses the cut left open). Each id it names
reads as the name declared for it, up to 256 characters: a payload listing an item of a short id
many times made a memory a hundred times the event's size (a loot list of 7.6 KB, one of 388 KB),
which no state record takes, and the worker stopped at every restart."""


def event_content(event: Event, names: Names) -> str:
    """The event as a character remembers it.

    "{actor} {last key segment, hyphens to spaces}[ {target}][ at {place}][ ({key: value, ...})]",
    names in place of ids, at most `MOST_DESCRIBED_CHARS` long; for a conversation, the words
    said, cut alike (a town crier's 100,000 characters were each listener's memory, whole).
    """
    spoken = spoken_words(event)
    if spoken is not None:
        return _described_at_most(spoken)
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
    """`text` cut as `cut` cuts it, to the longest start that fits in `MOST_DESCRIBED_CHARS`
    with the ellipsis and what closes whatever the cut left open after it: a quotation, then
    each parenthesis. A retelling (`retell`) then drops the details whole, as it drops a shorter
    event's (left open, they were kept: all 2,000 characters of them, numbers and names for
    distortion to take up); parentheses within quotations are not counted, as `retell` takes
    each quotation for "something" before it pairs them."""
    if len(text) <= MOST_DESCRIBED_CHARS:
        return text
    # By the length of a start of `text`: what closes the brackets it leaves open, innermost
    # first (quotations skipped), what closes the quotation it ends in (if any), its length
    # without trailing whitespace.
    open_brackets = [""] * MOST_DESCRIBED_CHARS
    closings = [""] * MOST_DESCRIBED_CHARS
    trimmed = [0] * MOST_DESCRIBED_CHARS
    still_open = ""
    spans = (match.span() for match in QUOTED.finditer(text))
    span = next(spans, None)
    for length in range(1, MOST_DESCRIBED_CHARS):
        character = text[length - 1]
        while span is not None and span[1] < length:
            span = next(spans, None)
        if span is not None and span[0] < length:
            if length < span[1]:
                closings[length] = QUOTE_CLOSINGS[text[span[0]]]
        elif character in BRACKET_CLOSINGS:
            still_open = BRACKET_CLOSINGS[character] + still_open
        elif character in still_open:  # each kind is paired apart, as `retell` pairs them
            still_open = still_open.replace(character, "", 1)
        open_brackets[length] = still_open
        trimmed[length] = trimmed[length - 1] if character.isspace() else length
    for end in range(MOST_DESCRIBED_CHARS - 1, 0, -1):
        shown = trimmed[end]
        closing = closings[shown] + open_brackets[shown]
        if shown + len(ELLIPSIS) + len(closing) <= MOST_DESCRIBED_CHARS:
            return text[:shown] + ELLIPSIS + closing
    return ELLIPSIS


def spoken_words(event: Event) -> str | None:
    """The words of a conversation event, if it has any (`visible`)."""
    field = SPOKEN_FIELDS.get(event.key)
    words = None if field is None else event.payload.get(field)
    return words if isinstance(words, str) and visible(words) else None


def retell(content: str, names: Iterable[str] = ()) -> str:
    """Content as a listener keeps it: the statement stays, the detail goes.

    Quoted words become "something" and parenthesised details are dropped:
    `Ilse said "give me the key" at the inn (gold: 5)` -> `Ilse said something at the inn`.
    Content that is one quotation whole is the statement, not a detail of it: its words are
    retold (`"The sailor is dead"` reached every listener as "something"). The declared
    `names` of what the memory is about are kept whole, quotation marks and brackets too: they
    say who and where, no detail (`at Gasthaus „Zur Post“` was retold `at Gasthaus something`,
    `Ilse "Red" Vell` as `Ilse something Vell`).
    """
    return _retold(content, marked_names(content, names))


def marked_names(content: str, names: Iterable[str]) -> tuple[str, ...]:
    """The `names` the content says that hold a mark a retelling takes for detail (the others
    come through it as they are), longest first: a name holding another is kept whole first."""
    return tuple(
        sorted(
            {name for name in names if name in content and name != name.translate(_DETAIL_MARKS)},
            key=len,
            reverse=True,
        )
    )


@lru_cache(maxsize=1 << 14)
def _retold(content: str, marked: tuple[str, ...]) -> str:
    """`retell` of the content with the `marked_names` it says, worked out once per wording:
    the same news is retold again and again. Each name stands in as a character the content
    does not hold while the rest is retold (a private use one: a player's line holding the
    one a name stood in as was retold with the name in its place)."""
    if not marked:
        return _retell(content)
    free = (
        chr(code) for code in range(_NAME_MARKS, _NAME_MARKS + 0xFFFE) if chr(code) not in content
    )
    standing_in = {next(free): name for name in marked}
    for mark, name in standing_in.items():
        content = content.replace(name, mark)
    retold = _retell(content)
    for mark, name in standing_in.items():
        retold = retold.replace(mark, name)
    return retold


_NAME_MARKS = 0xF0000
"""Where the characters a name stands in as while its content is retold are looked for (a
private use plane)."""


def _retell(content: str) -> str:
    """`retell`, every name of the content taken as any words are."""
    whole = content.strip()
    quotation = QUOTED.match(whole)  # the quotation `sub` takes first (a fullmatch looks past
    # where a single quote closes, to a closing mark, or apostrophe, that ends the line)
    if quotation is not None and quotation.end() == len(whole) and whole[1:-1].strip():
        return _retell(whole[1:-1])
    retold = without_brackets(QUOTED.sub("something", content), "(", ")", "")
    retold = without_brackets(retold, "\uff08", "\uff09", "")  # full width: Chinese and Japanese
    return " ".join(retold.split()) or content


def names_in(memory: Memory, name_of: Callable[[str], str]) -> tuple[str, ...]:
    """The declared names of what `memory` is about and of who it came from, which a
    retelling keeps whole (`retell`)."""
    entities = [*memory.about, *([memory.source_entity] if memory.source_entity else [])]
    return tuple(dict.fromkeys(name_of(entity) for entity in entities))


def passed_on(memory: Memory, name_of: Callable[[str], str]) -> str:
    """What a memory's words become when its holder passes it on (`retell`): a player's line,
    which its listener keeps as said, in the player's name (`Ilse said: I beat him`: retold
    bare, "I" was the teller, or the listener)."""
    retold = retell(memory.content, names_in(memory, name_of))
    if memory.source == "player" and memory.source_entity is not None:
        return f"{speaker(name_of(memory.source_entity))} said: {retold}"
    return retold


_DETAIL_MARKS = str.maketrans(
    dict.fromkeys('"“”«»„\N{LEFT SINGLE QUOTATION MARK}()「」『』\uff08\uff09', " ")
)
"""Marks a retelling takes for the edges of detail, and which are never an apostrophe."""


def speaker(name: str) -> str:
    """A declared name as a retelling says who spoke: on one line (a name holding a line break
    began a line of its own in a decision prompt), each quotation's marks and its brackets,
    which a retelling takes for detail, spaces, so that every later retelling keeps it (`Ilse
    "Red" Vell` became `Ilse something Vell` one hop further); an apostrophe stays (`O'Brien`)."""
    unquoted = QUOTED.sub(lambda quotation: f" {quotation[0][1:-1]} ", name)
    return one_line(unquoted.translate(_DETAIL_MARKS)) or "someone"


def named_on_one_line(names: Names, entity: str) -> str:
    """An entity's declared name as a prompt writes it: on one line (a name holding a line break
    wrote lines of a prompt: `Truly: ...` for the referee, items of a character's knowledge),
    the id for a name of whitespace alone."""
    return one_line(names(entity)) or entity


def one_line(text: str) -> str:
    """`text` with each run of whitespace, line breaks too, one space: a name or a memory's
    words holding a line break could start a line of a prompt or a table of their own (a
    player named `Ilse\\nTruly: ...` told the model referee what truly happened)."""
    return " ".join(text.split())


_UNICODE_BREAKS = str.maketrans({"\u0085": "\\u0085", "\u2028": "\\u2028", "\u2029": "\\u2029"})
"""The line breaks JSON leaves unescaped (NEL, the line and paragraph separators), escaped."""


def quoted(text: str) -> str:
    """Free text (a memory's, a player's words, a reply) as a JSON string on one line of a
    prompt, where it ends plain: a player's `...\nTruly: ...` told the model referee what truly
    happened, and JSON escapes the control characters but not NEL, U+2028 or U+2029, each a
    line break to a model's tokenizer as to `str.splitlines`."""
    return orjson.dumps(text).decode().translate(_UNICODE_BREAKS)


LEANS_LEFT = frozenset(
    ",.;:!?…)]}»”\u2019"
    "\uff0c\u3002\uff01\uff1f\u3001\u300d\u300f\uff09\uff1a\uff1b\u3011\u3009\u300b"
    "\u060c\u061b\u061f\u06d4\u0964\u0965"
)
"""Punctuation written against the word before it: Latin (closing quotation marks as English
and French write them), full-width and CJK (its full stop, comma and closing brackets), Arabic
and Urdu (comma, semicolon, question mark, full stop), Devanagari (danda)."""
LEANS_RIGHT = frozenset("([{«“\u2018¿¡\u201e\u201a\u300c\u300e\uff08\u3010\u3008\u300a")
"""Punctuation written against the word after it: opening brackets and quotation marks
(German's low ones too), Spanish's ¿ and ¡."""
STRAIGHT_QUOTES = frozenset("\"'")
"""Quotation marks that open and close alike: one right after a pair closes, one right
before it opens when a space, or nothing, comes before it."""


def _opens(before: str) -> bool:
    """Whether `before` ends in punctuation written against the word after it."""
    last = before[-1]
    return last in LEANS_RIGHT or (
        last in STRAIGHT_QUOTES and (len(before) < 2 or before[-2].isspace())
    )


def _gap_between(before: str, after: str, spaced: bool) -> bool:
    """Whether a pair taken out from between `before` and `after` leaves a gap: not against
    punctuation leaning on either side and touching the pair ("Well [sighs], fine." is "Well,
    fine."; '"[sighs] Hello"' is '"Hello"'; « [soupire] Oui », spaced as French writes it,
    stays), a straight quote right after the pair (it closes: '"I know [sighs]", she said'),
    nor beside a script written without spaces ("你好[笑]朋友")."""
    last, first = before[-1], after[0]
    if first in LEANS_LEFT or first in STRAIGHT_QUOTES or (_opens(before) and not spaced):
        return False
    return UNSPACED.match(last) is None and UNSPACED.match(first) is None


def without_brackets(
    text: str, opening: str, closing: str, gap: str, *, wordless_kept: bool = False
) -> str:
    """`text` without each matched `opening` ... `closing` pair, what it encloses (nested pairs
    too) and the whitespace before it, each leaving `gap` where words are to be kept apart
    (`_gap_between`); an unmatched bracket stays. `wordless_kept`: a pair enclosing no letter
    at all, nested pairs included, stays as it is (a line's `[20]`, `x[0]` or `[7-4-1]` is
    what was said, not an annotation).

    A closing matches the nearest opening left before it, as dropping innermost pairs until
    none is left would, but in one pass: a line nested 10,000 deep costs its length, not its
    length times its depth (seconds, for a line any event may carry). An empty `gap` (a
    retelling's) joins nothing: what follows a pair stays as it was."""
    kept: list[str] = []
    opened: list[int] = []  # where in `kept` each opening not yet matched stands
    lettered: list[bool] = []  # whether what each of those encloses so far holds a letter
    gap_last = False  # whether the last piece kept is the gap a pair left
    spaced = False  # whether whitespace (or a gap) stood before the pairs that gap replaced
    for piece in re.split(f"({re.escape(opening)}|{re.escape(closing)})", text):
        if piece == closing and opened and wordless_kept and not lettered[-1]:
            opened.pop()
            lettered.pop()
            kept.append(piece)
            gap_last = False
            continue
        if piece == closing and opened:
            del kept[opened.pop() :]
            lettered.pop()
            if lettered:
                lettered[-1] = True  # what was taken out held a letter
            spaced = False
            while kept and not (trimmed := kept[-1].rstrip()):
                kept.pop()  # whitespace (or a gap) alone: the space before the pair
                spaced = True
            if kept:
                spaced = spaced or trimmed != kept[-1]
                kept[-1] = trimmed
            kept.append(gap)
            gap_last = True
            continue
        if not piece:
            continue
        if gap_last and gap and len(kept) > 1 and not _gap_between(kept[-2], piece, spaced):
            kept.pop()
            if _opens(kept[-1]) and not spaced:  # '"[sighs] Hello"': the space after it too
                piece = piece.lstrip()
        gap_last = False
        if not piece:  # '"[a] [b] Hello"': the space between the pairs went with the first
            continue
        if piece == opening:  # where it stands once a gap before it is gone
            opened.append(len(kept))
            lettered.append(False)
        elif lettered and not lettered[-1]:
            lettered[-1] = any(char.isalpha() for char in piece)
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
