"""An event described in words reads at most `MOST_DESCRIBED_CHARS` characters.

Each id a description names reads as the name declared for it (up to 256 characters): a loot
list naming a coin of a short id 1,500 times, in an event of 7.6 KB, made a memory of 388 KB,
larger than one record of the state changelog takes (81,819 bytes at the least
`RUMOURMILL_CHANGELOG_BATCH_BYTES`, 999,899 at the default, which an event of 700 KB passed
thirty times over); the broker refused it and the worker stopped on it at every restart.
"""

from __future__ import annotations

import random
from typing import Any

import orjson

from projections.projector import Projector
from projections.record_bounds import most_record_bytes
from projections.runtime_read import runtime_read
from projections.wording import MOST_DESCRIBED_CHARS, event_content, retell
from schemas import Event
from streams.replay import replay_lines
from tests.oracle import sentence
from tests.streams.test_judgement_parts import SMALLEST_BATCH_BYTES

COIN = "A gleaming gold coin of the old kingdom".ljust(256, ".")


def event(seq: int, key: str, **fields: Any) -> bytes:
    return orjson.dumps(
        {"world_instance_id": "save-1", "timeline_id": "main", "seq": seq, "key": key} | fields
    )


def test_a_loot_list_of_declared_items_makes_a_memory_a_record_holds() -> None:
    lines = [
        event(1, "world.entity-declared", entities={"gc": {"name": COIN, "kind": "item"}}),
        event(2, "trade.loot-taken", actor="npc-mara", payload={"items": ["gc"] * 1500}),
    ]
    projector = Projector(record_bytes=SMALLEST_BATCH_BYTES, max_event_bytes=8192)
    replayed = replay_lines(lines, projector)
    assert replayed.outcomes == {"processed": 2}

    largest = max(len(key) + len(value) for key, value in replayed.state.items())
    assert largest < most_record_bytes(SMALLEST_BATCH_BYTES) // 8
    read = runtime_read(replayed.state, "default", "save-1", "main", "npc-mara")
    [recollection] = read.model_dump(mode="json")["recollections"]
    described = recollection["content"]
    assert described.startswith(f"npc-mara loot taken (items: {COIN}, {COIN}, ")
    assert len(described) == MOST_DESCRIBED_CHARS and described.endswith(".…)")
    # the parenthesis the cut left open is closed: a retelling drops the details whole, as it
    # does a shorter event's (left open, all 2,000 characters were retold)
    assert retell(described) == "npc-mara loot taken"


def memory_of(payload: dict[str, Any]) -> str:
    """What npc-mara remembers of her taking the loot of `payload`."""
    replayed = replay_lines(
        [event(1, "trade.loot-taken", actor="npc-mara", payload=payload)], Projector()
    )
    read = runtime_read(replayed.state, "default", "save-1", "main", "npc-mara")
    [recollection] = read.model_dump(mode="json")["recollections"]
    content: str = recollection["content"]
    return content


def test_a_parenthesis_within_quoted_words_leaves_the_cut_details_to_be_closed() -> None:
    # the mood is written as JSON, quoted: its ")" closes nothing a retelling sees
    described = memory_of({"mood": {"face": ":)"}, "items": [f"coin-{i}" for i in range(400)]})
    assert len(described) <= MOST_DESCRIBED_CHARS and described.endswith("…)")
    assert retell(described) == "npc-mara loot taken"


def test_a_cut_inside_quoted_words_closes_the_quotation_then_the_details() -> None:
    described = memory_of({"note": {"text": "(" * 10 + "x" * 3000}})
    assert len(described) == MOST_DESCRIBED_CHARS and described.endswith('…")')
    assert retell(described) == "npc-mara loot taken"


def test_a_cut_keeps_the_longest_start_that_fits_with_what_it_closes() -> None:
    # each item reads with a parenthesis of its own, left open: the cut keeps as much as fits
    # with a closing parenthesis for each one, no less
    items = [f"sword (rusty{index}" for index in range(400)]
    described = memory_of({"items": items})
    shown = described[: described.index("…")]
    assert len(described) == MOST_DESCRIBED_CHARS
    assert described == shown + "…" + ")" * (shown.count("(") - shown.count(")"))


def test_a_cut_closes_the_full_width_brackets_it_leaves_open() -> None:
    """A retelling drops what full-width brackets hold: left open by the cut, all 2,000
    characters of their detail were passed on at every hop."""
    described = memory_of({"note": "\uff08" + "金" * 3000})
    assert len(described) == MOST_DESCRIBED_CHARS and described.endswith("…\uff09)")
    assert retell(described) == "npc-mara loot taken"


def test_every_cut_is_the_oracles() -> None:
    """Long payloads of words, quotations (straight and curly, some never closed) and
    parentheses, cut by the worker and by the oracle alike."""
    choose = random.Random(30)
    for _ in range(300):
        marks = 'ab  ()"“”\uff08\uff09「」'
        words = "".join(choose.choice(marks) for _ in range(choose.randint(1900, 2400)))
        note = choose.choice([{"text": words}, words.replace('"', "'")])
        happened = Event.model_validate(
            {
                "world_instance_id": "save-1",
                "timeline_id": "main",
                "seq": 1,
                "key": "trade.loot-taken",
                "actor": "npc-mara",
                "payload": {"note": note},
            }
        )
        described = event_content(happened, str)
        assert described == sentence(happened, str)
        assert len(described) <= MOST_DESCRIBED_CHARS
