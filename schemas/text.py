"""What counts as words: text that shows something.

A game or a model may send a line of zero-width spaces, a Hangul filler or control characters
where it meant nothing: every check that text is not empty asks `visible`, so that such a line
is no words anywhere (a memory, a dialogue turn, a summary, a model's answer, a query).
"""

from __future__ import annotations

import unicodedata

BLANKS = frozenset("\u034f\u115f\u1160\u2800\u3164\uffa0")
"""Characters that show nothing though no whitespace nor format character: the combining
grapheme joiner, the Hangul fillers (a game's usual "blank name") and the braille blank."""
SHOWN_FORMATS = frozenset("\u0600\u0601\u0602\u0603\u0604\u0605\u06dd\u070f\u0890\u0891\u08e2")
"""Format characters that are written (the prepended marks of Arabic and Syriac numbers)."""


def visible(text: str) -> bool:
    """Whether `text` shows anything: a line of zero-width spaces and joiners, byte-order marks,
    variation selectors, blank fillers or control characters says nothing, as one of spaces
    says nothing."""
    return any(_shows(char) for char in text)


def _shows(char: str) -> bool:
    if char.isspace() or char in BLANKS or "\ufe00" <= char <= "\ufe0f":
        return False
    if "\U000e0100" <= char <= "\U000e01ef":  # variation selectors too
        return False
    category = unicodedata.category(char)
    return category != "Cc" and (category != "Cf" or char in SHOWN_FORMATS)
