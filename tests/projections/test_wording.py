"""Wording of retellings: the statement stays, the detail goes."""

from __future__ import annotations

import time

import pytest

from projections.wording import passed_on, retell
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
    first = passed_on(heard, {"player-1": name}.__getitem__)
    assert first == f"{spoken} said: I beat him something"
    further = heard.model_copy(update={"source": "rumour", "content": first})
    assert passed_on(further, {"player-1": name}.__getitem__) == first
