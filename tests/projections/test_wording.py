"""Wording of retellings: the statement stays, the detail goes."""

from __future__ import annotations

import time

import pytest
from hypothesis import given
from hypothesis import strategies as st

from projections.wording import passed_on, retell, speaker
from schemas.text import visible
from tests.oracle import retelling, shows, without_quotation_marks
from tests.projections.test_rumours import memory


@pytest.mark.parametrize(
    ("content", "retold"),
    [
        ('Ilse said "give me the key" at the inn (gold: 5)', "Ilse said something at the inn"),
        ("npc-a happened (note: x (y))", "npc-a happened"),
        ("npc-a happened (note: (3))", "npc-a happened"),
        ("a (b (c (d))) e (f)", "a e"),
        ("(all of it is detail)", "(all of it is detail)"),
        ("Ilse (the smith)'s hammer", "Ilse's hammer"),
        ("a ) b (c (d) e", "a ) b (c e"),
    ],
)
def test_a_retelling_drops_every_bracket_nested_or_not(content: str, retold: str) -> None:
    assert retell(content) == retold


@pytest.mark.parametrize(
    ("content", "retold"),
    [
        (
            "Ilse said \N{LEFT SINGLE QUOTATION MARK}give me the key\N{RIGHT SINGLE QUOTATION MARK}"
            " at the inn",
            "Ilse said something at the inn",
        ),
        ("Ilse a dit «donne-moi la clé» à l'auberge", "Ilse a dit something à l'auberge"),
        ("Ilse sagte „gib mir den Schlüssel“ im Gasthaus", "Ilse sagte something im Gasthaus"),
        ("Ilse sagte »gib mir den Schlüssel« im Gasthaus", "Ilse sagte something im Gasthaus"),
        # corner brackets quote, full-width brackets hold detail (Japanese, Chinese)
        ("船長は「鍵をくれ」と言った\uff08金貨5枚\uff09", "船長はsomethingと言った"),
        ("船長は『鍵』を盗んだ", "船長はsomethingを盗んだ"),
        ("船长说“把钥匙给我”\uff08五枚金币\uff09", "船长说something"),
        # a straight single quote is as often an apostrophe: no quotation mark
        ("Tell 'em the soldiers' pay is late", "Tell 'em the soldiers' pay is late"),
        ("Rock 'n' roll at Mara's", "Rock 'n' roll at Mara's"),
        ("Mara\N{RIGHT SINGLE QUOTATION MARK}s cart", "Mara\N{RIGHT SINGLE QUOTATION MARK}s cart"),
    ],
)
def test_a_retelling_takes_quoted_words_in_every_languages_quotation_marks(
    content: str, retold: str
) -> None:
    """Seed 001: quoted words go. In single quotes, guillemets or German quotes they reached
    every listener word for word (only double quotes counted)."""
    assert retell(content) == retold


@pytest.mark.parametrize(
    ("content", "retold"),
    [
        ('"The sailor is dead"', "The sailor is dead"),
        (" «Le moulin brûle» ", "Le moulin brûle"),
        ("“He (the mayor) lied”", "He lied"),
        ('"Run," she said, "now"', "something she said, something"),  # two, not one whole
        (  # the single quotation closes before the space: one ending the line is an apostrophe
            "\N{LEFT SINGLE QUOTATION MARK}Run,\N{RIGHT SINGLE QUOTATION MARK} she said,"
            " walkin\N{RIGHT SINGLE QUOTATION MARK}",
            "something she said, walkin\N{RIGHT SINGLE QUOTATION MARK}",
        ),
        ('""', "something"),  # nothing quoted: no statement to keep
        ('"Run" and "hide"', "something and something"),
    ],
)
def test_a_content_quoted_whole_is_retold_as_its_words(content: str, retold: str) -> None:
    """Seed 001 keeps the statement: a line sent with its quotation marks reached every listener
    as "something" (and a player's as "Ilse said: something")."""
    assert retell(content) == retold


@pytest.mark.parametrize("opening", ["“", "„", "«", "»", "\N{LEFT SINGLE QUOTATION MARK}"])
def test_quotations_never_closed_take_their_length_not_length_times_their_number(
    opening: str,
) -> None:
    """Each opening was looked past to the end of the text for its closing: 40,000 `„` in a
    player's line took 9 s to retell, at every meeting."""
    started = time.perf_counter()
    assert retell(opening * 40_000) == opening * 40_000
    assert time.perf_counter() - started < 1


def test_a_retelling_of_deeply_nested_detail_takes_its_length_not_length_times_depth() -> None:
    depth = 50_000
    started = time.perf_counter()
    assert retell("Oskar is wanted " + "(" * depth + "x" + ")" * depth) == "Oskar is wanted"
    assert time.perf_counter() - started < 1


@pytest.mark.parametrize(
    ("name", "spoken"),
    [
        ('Ilse "Red" Vell', "Ilse Red Vell"),
        ("Ilse “Red” Vell", "Ilse Red Vell"),
        ("Ilse (the smith)", "Ilse the smith"),
        ("Ilse\n- forged", "Ilse - forged"),
        ('"()"', "someone"),
        (
            "Ilse \N{LEFT SINGLE QUOTATION MARK}Red\N{RIGHT SINGLE QUOTATION MARK} Vell",
            "Ilse Red Vell",
        ),
        ("Ilse «Red» Vell", "Ilse Red Vell"),
        ("Tam O'Brien", "Tam O'Brien"),
    ],
)
def test_a_players_line_is_passed_on_in_the_players_name_every_hop_alike(
    name: str, spoken: str
) -> None:
    """The line's words are retold, the name kept whole: a quoted nickname became "something"
    one hop further (each retelling retells the words it was passed)."""
    heard = memory("npc-mara", "o", 2, kind="knowledge", source="player")
    heard = heard.model_copy(
        update={"source_entity": "player-1", "content": 'I beat him "senseless" (twice)'}
    )
    names = {"player-1": name, "npc-oskar": "Oskar"}.__getitem__
    first = passed_on(heard, names)
    assert first == f"{spoken} said: I beat him something"
    further = heard.model_copy(update={"source": "rumour", "content": first})
    assert passed_on(further, names) == first


@pytest.mark.parametrize(
    "place",
    ["Gasthaus „Zur Post“", "The Inn (North Gate)", "«Le Chat Noir»", 'The "Drunken" Goat'],
)
def test_a_retelling_keeps_the_declared_names_of_what_it_is_about_whole(place: str) -> None:
    """Quotation marks and brackets in a name say who or where, no detail: "at Gasthaus „Zur
    Post“" was passed on as "at Gasthaus something", every hop after it too."""
    seen = memory("npc-ada", "o", 2, about=["npc-ilse", "loc-inn"])
    seen = seen.model_copy(
        update={"content": f'Ilse "Red" Vell robbed Bo at {place} (said: "mine") (gold: 5)'}
    )
    names = {"npc-ilse": 'Ilse "Red" Vell', "loc-inn": place}.__getitem__
    first = passed_on(seen, names)
    assert first == f'Ilse "Red" Vell robbed Bo at {place}'
    assert passed_on(seen.model_copy(update={"content": first}), names) == first
    assert retell(seen.content) != first  # not a name of what it is about: detail
    standing = "\U000f0000 robbed Bo (twice)"  # the character a name once stood in as
    assert retell(f"{standing} at {place}", [place]) == f"\U000f0000 robbed Bo at {place}"


QUOTING = st.text(
    alphabet=st.sampled_from(
        [
            *("a", "b", "1", "_", " ", "\n", "(", ")", "'", '"', "“", "”", "«", "»", "„"),
            *("\N{LEFT SINGLE QUOTATION MARK}", "\N{RIGHT SINGLE QUOTATION MARK}"),
            *("「", "」", "『", "』", "\uff08", "\uff09"),
        ]
    ),
    max_size=16,
)


@given(QUOTING)
def test_retellings_and_speakers_are_as_the_oracle_works_them_out(text: str) -> None:
    """The oracle (`tests.oracle`) finds quotations mark by mark, with no regular expression."""
    assert retell(text) == retelling(text)
    assert speaker(text) == (" ".join(without_quotation_marks(text).split()) or "someone")


def test_a_retelling_keeps_what_follows_a_parenthesis_as_it_was() -> None:
    """The dialogue's annotations leave no space after an opening quote; a retelling drops its
    parenthesised detail alone (rumours a store holds are retold as they always were)."""
    assert retell("a \u201c(x) b") == "a \u201c b"
    assert retell("Ilse (angrily) said, (aside) 'no'") == "Ilse said, 'no'"


@pytest.mark.parametrize(
    ("said", "shown"),
    [
        ("\u200b\u200b", False),  # zero-width spaces
        ("\ufeff \u2060", False),  # a byte-order mark, a word joiner
        ("\u3164", False),  # the Hangul filler: a game's "blank name"
        ("\u2800\u034f\ufe0f", False),  # braille blank, grapheme joiner, variation selector
        ("\x00\x07\x1b\x7f\x85\x9b", False),  # control characters
        ("\u0600", True),  # the Arabic number sign: a format character that is written
        ("\U0001f468\u200d\U0001f469\u200d\U0001f467", True),  # a family, joined
        ("\U0001f1eb\U0001f1f7", True),  # a flag
        ("ok", True),
    ],
)
def test_words_of_nothing_visible_say_nothing(said: str, shown: bool) -> None:
    """A line of zero-width characters or blank fillers was a memory of invisible content,
    and a decision quoted it word for word to the reply model; the oracle agrees."""
    assert visible(said) == shows(said) == shown
