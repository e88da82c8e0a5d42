"""Writing systems: which are written without spaces between words, and which lean a particle
on the word before it, for the rules that find words in what people type.

Thai, Lao, Myanmar, Khmer, kana (hentaigana too) and the CJK ideographs write a sentence as one
run of letters: no space tells where a word ends, so each of their characters, with the marks
that sit on it (a Thai vowel or tone mark), stands for a word of its own, and a name is said
when its characters come in a row. Korean writes spaces, but a particle joins the word it
follows ("민수는": Minsu, as the topic).
"""

from __future__ import annotations

import re
import unicodedata
from functools import cache

UNSPACED_RANGES = (
    "\u0e00-\u0eff\u1000-\u109f\u1780-\u17ff\u3040-\u30ff\u31f0-\u31ff\u3400-\u4dbf"
    "\u4e00-\u9fff\ua9e0-\ua9ff\uaa60-\uaa7f\uf900-\ufaff\uff66-\uff9f\U0001aff0-\U0001b16f"
    "\U00020000-\U0003134f"
)
"""The scripts written without spaces between words, as a regular expression's ranges."""
UNSPACED = re.compile(f"[{UNSPACED_RANGES}]")


@cache
def word_pattern() -> re.Pattern[str]:
    """A word as the rules find one: a character of a script without spaces and the marks on it,
    or a run of the others' word characters and their marks (a Devanagari vowel sign is one:
    "राम" is one word, not "र" and "म"). Made at the first use: finding every combining mark
    (categories Mn, Mc, Me: none lie past those planes) takes some 30 ms, which every command
    paid as it started (the image's health check among them)."""
    marks = "".join(
        re.escape(chr(point))
        for point in (*range(0x20000), *range(0xE0100, 0xE01F0))
        if unicodedata.category(chr(point)).startswith("M")
    )
    spaced = f"[^\\W{UNSPACED_RANGES}]"
    return re.compile(f"(?=\\w)[{UNSPACED_RANGES}][{marks}]*|(?={spaced})(?:{spaced}|[{marks}])+")


HANGUL_SYLLABLES = re.compile("[\uac00-\ud7a3]")
KOREAN_PARTICLES = frozenset(
    (
        *("은", "는", "이", "가", "을", "를", "의", "에", "엔", "에게", "에겐", "에서", "에게서"),
        *("께", "께서", "한테", "한텐", "한테서", "와", "과", "랑", "이랑", "하고", "도", "만"),
        *("로", "으로", "론", "부터", "까지", "보다", "처럼", "밖에", "야", "아", "이야", "여"),
        *("이여", "씨", "님", "네", "라고", "이라고", "요", "이요"),
    )
)
"""The particles and suffixes Korean joins to a name ("민수는", "민수씨가", "민수님께서"): a
word a name begins is the name only with some of these after it, up to `MOST_PARTICLES`
("미나리", parsley, names no Mina; the plural 들 and 나, or, are left out: "나라들이",
countries, named no Nara)."""
MOST_PARTICLES = 3


def particles(joined: str, most: int = MOST_PARTICLES) -> bool:
    """Whether `joined` is up to `most` of `KOREAN_PARTICLES` one after another."""
    return any(
        joined.startswith(particle)
        and (joined == particle or (most > 1 and particles(joined[len(particle) :], most - 1)))
        for particle in KOREAN_PARTICLES
    )


def words(text: str) -> list[str]:
    """The words (`word_pattern`) of `text`, compatibility-composed (NFKC: "Zoe" and a
    combining diaeresis are "Zoë", full-width letters are Latin ones, half-width "ｽｽﾞｷ" is
    "スズキ") and case folded."""
    found = word_pattern().findall(unicodedata.normalize("NFKC", text))
    return [word.casefold() for word in found]


def says(spoken: str, name: list[str]) -> bool:
    """Whether `spoken` (a text's `words`, each between spaces: " a b ") says the `name`'s
    words in a row, the last of a Korean one with a particle joined on if it is two syllables
    or more (one is as often a word: "나", I, is "나는" too)."""
    said = f" {' '.join(name)}"
    if HANGUL_SYLLABLES.fullmatch(said[-1]) is None or len(name[-1]) < 2:
        return f"{said} " in spoken
    start = spoken.find(said)
    while start != -1:
        after = start + len(said)
        joined = spoken[after : spoken.index(" ", after)]
        if not joined or particles(joined):
            return True
        start = spoken.find(said, start + 1)
    return False
