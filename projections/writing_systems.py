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

UNSPACED_RANGES = (
    "\u0e00-\u0eff\u1000-\u109f\u1780-\u17ff\u3040-\u30ff\u31f0-\u31ff\u3400-\u4dbf"
    "\u4e00-\u9fff\ua9e0-\ua9ff\uaa60-\uaa7f\uf900-\ufaff\uff66-\uff9f\U0001aff0-\U0001b16f"
    "\U00020000-\U0003134f"
)
"""The scripts written without spaces between words, as a regular expression's ranges."""
UNSPACED = re.compile(f"[{UNSPACED_RANGES}]")
MARKS = "".join(
    re.escape(chr(point))
    for point in (*range(0x20000), *range(0xE0100, 0xE01F0))
    if unicodedata.category(chr(point)).startswith("M")
)
"""Every combining mark (categories Mn, Mc, Me: none lie elsewhere), as a regular expression's
class: what sits on the character before it."""
WORD = re.compile(f"(?=\\w)[{UNSPACED_RANGES}][{MARKS}]*|[^\\W{UNSPACED_RANGES}]+")
"""A word as the rules find one: a character of a script without spaces and its marks, or a run
of word characters of the others."""
HANGUL_SYLLABLES = re.compile("[\uac00-\ud7a3]")


def words(text: str) -> list[str]:
    """The `WORD`s of `text`, compatibility-composed (NFKC: "Zoe" and a combining diaeresis
    are "Zoë", full-width letters are Latin ones, half-width "ｽｽﾞｷ" is "スズキ") and case folded."""
    return [word.casefold() for word in WORD.findall(unicodedata.normalize("NFKC", text))]


def takes_particles(word: str) -> bool:
    """Whether a particle may follow `word` in the same run of letters (it ends in Hangul)."""
    return HANGUL_SYLLABLES.fullmatch(word[-1:]) is not None
