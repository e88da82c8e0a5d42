"""Distortion without a model: how a rumour shifts as it passes from mouth to mouth.

With `memory.spreading.distortion` on, every retelling may change one detail. The choice is
read off a seed made from the news, the listener and the stream position (`distortion_seed`),
never from chance, so the same stream always tells the same rumours.

- One retelling in four passes the news on unchanged.
- Otherwise one detail the retelling holds shifts, picked among those it has:
  - a number grows: by half again, rounded up ("10 gold" -> "15 gold"), or by 1 to 3 more.
    A fact holding that number grows the same way, so the rumour now contradicts the world
    record and reads as `diverging`;
  - someone named becomes "a stranger" ("Oskar robbed Mara" -> "A stranger robbed Mara"):
    a character or a player, never an item or a place;
  - a place the words name after "at" or "in" blurs: "at The Crooked Lantern" -> "somewhere
    near The Crooked Lantern", or just "somewhere" (in "Oskar confided in Ada", Ada is someone,
    not a place).
  What an id names is what the world's catalogue says as the retelling's event sees it (its
  declared kind, else the id patterns), not what the wording suggests. Only an id of no known
  kind (a player never declared one, say) is taken for what the words make it: a place after
  "at" or "in", else someone.
- A name is found as whole words, and a longer name first: in "Mara Vell robbed Mara", where
  the news is about both, Mara is only the last word.
- A blurred name or place changes the telling only: the facts still name them, since "somebody
  did it" is no claim the record could contradict.
- Only numbers of zero or more grow; a number inside an id or a time ("npc-2", "21:05"), or
  inside the name of what the news is about ("Agent 47", "The 3 Bells"), is no number of the
  story. Commas between groups of three digits make one number ("1,000" grows to "1,500",
  written with its commas again); digits a comma runs on otherwise ("3,4", "1,0000") are no
  number, nor is grouping by other marks read ("1.000" is one, "1 000" one and nought).
"""

from __future__ import annotations

import hashlib
import math
import re
from collections.abc import Callable, Iterable, Sequence
from typing import Literal, NamedTuple, Protocol

from projections.catalogue import CHARACTER, PLACE, PLAYER, UNKNOWN
from projections.keys import pack
from projections.numbers import decimal, hundredths
from schemas import Fact


class Catalogued(Protocol):
    """What the world's catalogue tells of an id, as the retelling's event sees it
    (`projections.catalogue.Catalogue`)."""

    def name_of(self, entity_id: str, /) -> str:
        """What a character calls the id."""

    def kind_of(self, entity_id: str, /) -> str:
        """What kind of thing the id names."""


Number = int | float
Span = tuple[int, int]
"""Where something stands in the words: its start and end."""
Rule = Literal["number", "stranger", "place"]

UNCHANGED_ONE_IN = 4
"""One retelling in this many passes the news on word for word."""
GROWTH_FACTOR = 1.5
"""A number growing "by half again" is multiplied by this (rounded up)."""
MOST_ADDED = 3
"""A number growing "by a little" gains 1 to this many."""
STRANGER = "a stranger"
PEOPLE = (CHARACTER, PLAYER)
"""The kinds of what can become "a stranger"."""
PLACE_WORDS = ("at", "in")
"""The words before a place in an event's wording ("... at The Crooked Lantern")."""
PLACE_BEFORE = re.compile(rf"(?<!\w)(?:{'|'.join(PLACE_WORDS)}) \Z")
"""A place word, ending where a place's name starts (searched up to the name)."""

MOST_DIGITS = 15
"""The longest number a rumour inflates, on either side of its point: within a float's exact
digits, so growing it stays exact. A longer run of digits (an account number, a 400-digit
joke) is left as words; as a float it overflowed, and stopped the worker."""
THOUSANDS = "(?:,\\d{3})"
"""A group of three digits after a comma: "1,000" is one number, a thousand."""
NUMBER = re.compile(
    rf"(?<![\w.,:-])(?:\d{{1,3}}{THOUSANDS}{{1,{(MOST_DIGITS - 1) // 3}}}|\d{{1,{MOST_DIGITS}}})"
    rf"(?:\.\d{{1,{MOST_DIGITS}}})?(?![\w:-]|[.,]\d)"
)
"""A number of the story: digits, with commas between groups of three or none, and a decimal
point; never digits run on by a comma that is no grouping ("3,4", "1,0000")."""
LARGEST_GROWN = 10**MOST_DIGITS
"""A number in a fact grows only below this, as in the words."""


def distortion_seed(origin: str, listener: str, timeline_id: str, seq: int) -> bytes:
    """The seed of one retelling: the news, who hears it, and where in the stream."""
    key = pack("distortion", origin, listener, timeline_id, seq)
    return hashlib.blake2b(key, digest_size=16).digest()


def distort(
    content: str, facts: list[Fact], about: Sequence[str], seed: bytes, catalogue: Catalogued
) -> tuple[str, list[Fact]]:
    """The content and facts as the listener takes them in, perhaps with one detail shifted."""
    draws = _Draws(seed)
    if draws.below(UNCHANGED_ONE_IN) == 0:
        return content, facts
    mentioned = _mentioned(content, about, catalogue)
    people = [name for name, mention in mentioned.items() if mention.kind in PEOPLE]
    places = [
        name for name, mention in mentioned.items() if mention.kind == PLACE and mention.as_place
    ]
    in_names = [span for mention in mentioned.values() for span in mention.spans]
    in_words = _story_numbers(content, in_names)
    numbers = _numbers(in_words, facts)
    rules: list[Rule] = []
    if numbers:
        rules.append("number")
    if people:
        rules.append("stranger")
    if places:
        rules.append("place")
    if not rules:
        return content, facts
    rule = rules[draws.below(len(rules))]
    if rule == "number":
        number = numbers[draws.below(len(numbers))]
        bigger = grown(number, by_half=draws.below(2) == 0, more=1 + draws.below(MOST_ADDED))
        return _with_number(content, in_words, number, bigger), _facts_with(facts, number, bigger)
    if rule == "stranger":
        person = people[draws.below(len(people))]
        return _as_stranger(content, mentioned[person].spans), facts
    near = draws.below(2) == 0
    place = places[draws.below(len(places))]
    return _blurred(content, place, mentioned[place].as_place, near), facts


def grown(number: Number, *, by_half: bool, more: int) -> Number:
    """`number` as a rumour tells it: half again (rounded up), or `more` on top; always more.

    A whole number stays whole; any other keeps two decimals.
    """
    whole = float(number).is_integer()
    exact = decimal(number) * decimal(GROWTH_FACTOR) if by_half else decimal(number) + more
    result: Number = math.ceil(exact) if whole else hundredths(exact)
    if result <= number:
        result = int(number) + 1 if whole else hundredths(decimal(number) + 1)
    return result


class _Draws:
    """Successive choices read off the seed: each is fixed by the seed and its turn alone."""

    def __init__(self, seed: bytes) -> None:
        self._stream = hashlib.blake2b(seed, digest_size=64).digest()
        self._turn = 0

    def below(self, count: int) -> int:
        """A choice among `count` (0 to count - 1)."""
        start = (2 * self._turn) % len(self._stream)
        self._turn += 1
        return int.from_bytes(self._stream[start : start + 2], "big") % count


def _story_numbers(content: str, in_names: Sequence[Span]) -> list[re.Match[str]]:
    """The numbers the words tell, left to right: none inside a name (`in_names`), since
    "Agent 47" or "The 3 Bells" grown is someone or somewhere else, not a bigger story."""
    return [
        match
        for match in NUMBER.finditer(content)
        if not any(_overlap(match.span(), name) for name in in_names)
    ]


def _numbers(in_words: Sequence[re.Match[str]], facts: Sequence[Fact]) -> list[Number]:
    """The numbers a rumour could inflate: in the words first, then in the facts; once each."""
    found: list[Number] = [_parsed(match.group()) for match in in_words]
    found += [number for number in map(_number_in, facts) if number is not None and number >= 0]
    unique: list[Number] = []
    for number in found:
        if number not in unique:
            unique.append(number)
    return unique


def _number_in(fact: Fact) -> Number | None:
    """The fact's value if it is a number small enough to grow (true and false are not)."""
    value = fact.value
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return value if abs(value) < LARGEST_GROWN else None


def _parsed(text: str) -> Number:
    digits = text.replace(",", "")
    return float(digits) if "." in digits else int(digits)


def _written(number: Number, like: str) -> str:
    """`number` in words, with commas between thousands if the number it replaces had them."""
    return f"{number:,}" if "," in like else str(number)


def _with_number(
    content: str, in_words: Sequence[re.Match[str]], number: Number, bigger: Number
) -> str:
    """Every mention of `number` among the story's numbers (`in_words`), grown, each written
    as it was ("1,000" grows to "1,500", "1000" to "1500")."""
    grows = {match.start(): match for match in in_words if _parsed(match.group()) == number}
    spans = [match.span() for match in grows.values()]
    return _replaced(content, spans, lambda start: _written(bigger, grows[start].group()))


def _facts_with(facts: Sequence[Fact], number: Number, bigger: Number) -> list[Fact]:
    """The facts, with every value equal to `number` grown alike (an int stays an int)."""
    changed = []
    for fact in facts:
        if _number_in(fact) == number:
            value: Number = float(bigger) if isinstance(fact.value, float) else int(bigger)
            fact = Fact(subject=fact.subject, attribute=fact.attribute, value=value)
        changed.append(fact)
    return changed


class _Mention(NamedTuple):
    """A name the words mention."""

    kind: str
    """What the first entity of `about` so called is (`_kind_as_told`)."""
    spans: list[Span]
    """Where the name stands, as whole words, left to right."""
    as_place: list[Span]
    """The mentions the words use as a place, each with the word before it ("at X", "in X")."""


def _mentioned(content: str, about: Sequence[str], catalogue: Catalogued) -> dict[str, _Mention]:
    """The names of what the news is about that the words mention, in `about` order, once each.

    A longer name claims its words first (of two as long, the first in `about`): in "Mara Vell
    robbed Mara", Mara is mentioned once, since "Mara Vell" is someone else.
    """
    first: dict[str, str] = {}
    for entity in about:
        first.setdefault(catalogue.name_of(entity), entity)
    claimed: list[Span] = []
    spans: dict[str, list[Span]] = {}
    for name in sorted(first, key=len, reverse=True):  # a stable sort: ties in `about` order
        spans[name] = [
            match.span()
            for match in _mention(name).finditer(content)
            if not any(_overlap(match.span(), taken) for taken in claimed)
        ]
        claimed += spans[name]
    mentioned: dict[str, _Mention] = {}
    for name, entity in first.items():
        if spans[name]:
            as_place = _as_place(content, spans[name])
            kind = _kind_as_told(catalogue.kind_of(entity), bool(as_place))
            mentioned[name] = _Mention(kind, spans[name], as_place)
    return mentioned


def _kind_as_told(kind: str, told_as_place: bool) -> str:
    """The catalogue's kind; for an id of no known kind, what the words make it: a place after
    "at" or "in", else someone (as a character is). A player is one to the catalogue only at
    the events listing it, so news of a player's deed names an id of no kind, unless declared."""
    if kind != UNKNOWN:
        return kind
    return PLACE if told_as_place else CHARACTER


def _overlap(one: Span, other: Span) -> bool:
    return one[0] < other[1] and other[0] < one[1]


def _replaced(content: str, spans: Iterable[Span], by: Callable[[int], str]) -> str:
    """`content` with each span (left to right, none overlapping) replaced by `by(its start)`."""
    told: list[str] = []
    kept_from = 0
    for start, end in spans:
        told += [content[kept_from:start], by(start)]
        kept_from = end
    return "".join([*told, content[kept_from:]])


def _mention(name: str) -> re.Pattern[str]:
    return re.compile(rf"(?<!\w){re.escape(name)}(?!\w)")


def _as_place(content: str, spans: Iterable[Span]) -> list[Span]:
    """The mentions the words use as a place, each with the word before it."""
    found: list[Span] = []
    for start, end in spans:
        before = PLACE_BEFORE.search(content, 0, start)
        if before is not None:
            found.append((before.start(), end))
    return found


def _as_stranger(content: str, spans: Iterable[Span]) -> str:
    """Each mention becomes "a stranger" (capitalised to open the sentence)."""
    return _replaced(
        content, spans, lambda start: STRANGER.capitalize() if start == 0 else STRANGER
    )


def _blurred(content: str, place: str, told_as_place: Iterable[Span], near: bool) -> str:
    """The place blurs: "at X" becomes "somewhere near X", or just "somewhere"."""
    vaguer = f"somewhere near {place}" if near else "somewhere"
    return _replaced(content, told_as_place, lambda _: vaguer)
