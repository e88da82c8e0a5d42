"""The chronicle (seed 000, "Conversation compaction"): digests roll into chapters, chapters
condense, by value; summaries never stand in for records; branches and replays.

Token counts here are words (`len(text.split())`), so that every threshold can be reached by
value: each line below is exactly 100 words. The worker counts with a real tokenizer
(`streams.tokens`, tested with the HTTP view).
"""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from projections.chronicle import chronicle_read
from projections.chronicle_summaries import Passage, RulesSummariser
from projections.decision import decision
from projections.dialogue import dialogue_read
from projections.digest import world_digest
from projections.provenance import provenance
from projections.recall import RecallQuery, recall
from projections.runtime_read import NotFound, runtime_read
from projections.state import MemoryState
from schemas.policy import ChroniclePolicy, Policy
from streams.recall_index import SqliteRecallIndex
from streams.replay import replay_lines

WORDS_PER_LINE = 100


def words(text: str) -> int:
    return len(text.split())


def line_text(number: int) -> str:
    """Line `number`: 100 words, the first two naming it."""
    return " ".join([f"line{number}", f"word{number}", *(["and"] * (WORDS_PER_LINE - 2))])


def said(seq: int, text: str, *, timeline: str = "main", **fields: Any) -> bytes:
    """A player's line to Mara: she keeps it as a `knowledge` memory, word for word."""
    return orjson.dumps(
        {
            "world_instance_id": "w",
            "timeline_id": timeline,
            "seq": seq,
            "key": "loreweaver.conversation.player-said",
            "actor": "p1",
            "target": "npc-mara",
            "players": ["p1"],
            "location": "loc-inn",
            "payload": {"text": text},
        }
        | fields
    )


def lines(count: int) -> list[bytes]:
    return [said(number, line_text(number)) for number in range(1, count + 1)]


def chronicle(
    state: MemoryState, *, timeline: str = "main", as_of_seq: int | None = None
) -> dict[str, Any]:
    read = chronicle_read(
        state, "default", "w", timeline, "npc-mara", ChroniclePolicy(), words, as_of_seq=as_of_seq
    )
    decoded: dict[str, Any] = orjson.loads(orjson.dumps(read))
    return decoded


def first_words(text: str) -> list[str]:
    """The first word of each line of a summary: which lines it kept."""
    return [statement.split()[0] for statement in text.splitlines()]


def test_the_digests_roll_into_a_chapter_once_their_text_passes_short_term_tokens() -> None:
    fifteen = chronicle(replay_lines(lines(15)).state)
    assert (fifteen["tokens"], fifteen["chapters"], fifteen["condensed"]) == (1500, [], None)
    assert [digest["seq"] for digest in fifteen["digests"]] == list(range(1, 16))
    assert fifteen["digests"][0]["text"] == line_text(1)
    assert fifteen["digests"][0]["summary"] is False

    sixteen = chronicle(replay_lines(lines(16)).state)
    [chapter] = sixteen["chapters"]
    assert sixteen["digests"] == []
    assert (chapter["summary"], chapter["from_seq"], chapter["to_seq"]) == (True, 1, 16)
    assert chapter["records"] == len(chapter["belief_ids"]) == 16
    assert [digest["belief_id"] for digest in fifteen["digests"]] == chapter["belief_ids"][:15]
    # 300 tokens hold three lines; all matter alike (0.5), so the newest three, in story order
    assert first_words(chapter["text"]) == ["line14", "line15", "line16"]
    assert chapter["tokens"] == sixteen["tokens"] == 300


def test_the_chapters_condense_once_their_text_passes_long_term_tokens() -> None:
    state = replay_lines(lines(143)).state
    before = chronicle(state)
    assert before["condensed"] is None
    assert len(before["chapters"]) == 8  # 8 x 300 = 2400 tokens: not past 2500
    assert len(before["digests"]) == 15

    state = replay_lines(lines(144)).state
    after = chronicle(state)
    condensed = after["condensed"]
    assert after["chapters"] == [] and after["digests"] == []  # 9 x 300 = 2700: condensed
    assert (condensed["summary"], condensed["from_seq"], condensed["to_seq"]) == (True, 1, 144)
    assert (condensed["records"], condensed["chapters"], condensed["tokens"]) == (144, 9, 600)
    # what the chapters kept, the newest six (600 tokens), in story order
    assert first_words(condensed["text"]) == [
        "line126",
        "line127",
        "line128",
        "line142",
        "line143",
        "line144",
    ]


def test_the_condensed_chapter_folds_in_the_previous_one_and_every_record_is_told_once() -> None:
    found = chronicle(replay_lines(lines(16 * 9 * 2 + 20)).state)
    condensed = found["condensed"]
    assert (condensed["records"], condensed["chapters"], condensed["tokens"]) == (288, 18, 600)
    assert [len(found["chapters"]), len(found["digests"])] == [1, 4]
    told = condensed["records"] + sum(c["records"] for c in found["chapters"])
    assert told + len(found["digests"]) == found["records"] == 308


def test_the_rules_summariser_keeps_the_most_important_statements_once_within_the_budget() -> None:
    passages = [
        Passage("Oskar stole the ring", 0.9, 1, 4),
        Passage("It rained", 0.2, 2, 2),
        Passage("Oskar stole the ring", 0.9, 3, 4),
        Passage("Mara sang", 0.5, 4, 2),
        Passage("Ilse won the fight", 0.7, 5, 4),
    ]
    kept = RulesSummariser().summarise(passages, 10, lambda text: len(text.split()))
    assert [(p.text, p.seq) for p in kept] == [
        ("Oskar stole the ring", 3),
        ("Mara sang", 4),
        ("Ilse won the fight", 5),
    ]


def test_a_summary_fits_its_budget_as_its_text_is_counted_whole() -> None:
    """The statements' counts added up were held to the budget, and the text joined them with
    line breaks a tokenizer counts too: a chapter's summary ran some 5% over its budget."""

    def words_and_line_breaks(text: str) -> int:
        return len(text.split()) + text.count("\n")

    passages = [
        Passage("Oskar stole the ring", 0.9, 1, 4),
        Passage("Ilse won it", 0.7, 2, 3),
        Passage("Mara sang loud", 0.5, 3, 3),
    ]
    kept = RulesSummariser().summarise(passages, 10, words_and_line_breaks)
    assert [p.text for p in kept] == ["Oskar stole the ring", "Ilse won it"]
    assert words_and_line_breaks("\n".join(p.text for p in kept)) == 8


def test_a_summary_fits_its_budget_in_the_order_it_is_told() -> None:
    """Its text was counted with the statements by importance, and is told in story order: a
    tokenizer splits the words after a line break otherwise (here a line of "y" costs two more
    after one), and chapters of 301 and 302 tokens came out of a budget of 300."""

    def tokens(text: str) -> int:
        return len(text.split()) + 2 * text.count("\ny")

    passages = [Passage("x x", 0.5, 1, 2), Passage("y y y", 0.9, 2, 3)]
    kept = RulesSummariser().summarise(passages, 6, tokens)
    assert [p.text for p in kept] == ["y y y"]
    assert [p.text for p in RulesSummariser().summarise(passages, 7, tokens)] == ["x x", "y y y"]


def test_the_most_important_statement_over_the_budget_leads_cut_not_dropped() -> None:
    """Smaller statements that fit once took its place: a chapter of an accusation and the rain
    was summarised as the rain."""
    accusation = Passage(" ".join(["Tomas", "accused", *(["the", "mayor"] * 20)]), 0.9, 1, 42)
    rain = [Passage("It rained", 0.2, seq, 2) for seq in range(2, 6)]
    kept = RulesSummariser().summarise([accusation, *rain], 10, words)
    assert [(p.text, p.seq) for p in kept] == [
        ("Tomas accused the mayor the mayor the mayor the …", 1)
    ]


def test_a_statement_in_a_language_without_spaces_is_cut_by_characters() -> None:
    line = "港の役人が救援の金を盗んで古い水車小屋の下に隠したとトマスは誓った" * 20
    [cut] = RulesSummariser().summarise([Passage(line, 0.5, 7, len(line))], 10, len)
    assert cut.text == line[:8] + " …"
    assert (cut.tokens, cut.seq) == (10, 7)


def test_a_chapter_keeps_each_line_as_a_statement_the_detail_goes() -> None:
    padding = " ".join(["and"] * 94)
    detailed = f'line16 said "the cellar key" (quietly) {padding}'
    state = replay_lines([*lines(15), said(16, detailed)]).state
    [chapter] = chronicle(state)["chapters"]
    assert chapter["text"].splitlines()[-1] == f"line16 said something {padding}"
    assert runtime_read(state, "default", "w", "main", "npc-mara").beliefs[0].content == detailed


def test_a_summary_never_replaces_a_record_in_any_read() -> None:
    stream = [
        *lines(144),
        orjson.dumps(
            {
                "world_instance_id": "w",
                "timeline_id": "main",
                "seq": 145,
                "key": "loreweaver.memory.dialogue-summarised",
                "actor": "npc-mara",
                "target": "p1",
                "payload": {"scope": "player", "summary": "They talked of nothing"},
            }
        ),
        said(146, line_text(146)),
    ]
    state = replay_lines(stream).state
    found = chronicle(state)
    assert found["condensed"]["records"] == 144 and found["records"] == 145
    [spoken] = found["digests"]  # the summarising is bookkeeping: no record of it
    assert (spoken["seq"], spoken["text"], spoken["summary"]) == (146, line_text(146), False)

    mind = runtime_read(state, "default", "w", "main", "npc-mara")
    assert len(mind.beliefs) == 50
    assert all(belief.content == line_text(belief.seq) for belief in mind.beliefs)
    assert mind.recollections == []

    recalled = recall(
        state, SqliteRecallIndex(), "default", "w", "main", "npc-mara",
        RecallQuery("line3 word3", (), 1), Policy(),
    ).read()  # fmt: skip
    assert [m.content for m in recalled.memories] == [line_text(3)]
    told = provenance(state, "default", "w", "main", "npc-mara", recalled.memories[0].belief_id)
    assert told.memory.content == line_text(3)

    context = decision(
        state, SqliteRecallIndex(), "default", "w", "main", "npc-mara", 146, None, Policy(), 0
    )
    assert all(memory.content == line_text(memory.seq) for memory in context.knowledge)

    talk = dialogue_read(
        state, "default", "w", "main", "npc-mara", "p1", None, 0, Policy().memory.dialogue
    )["player"]
    assert talk["summary"] == "They talked of nothing"
    assert [turn["text"] for turn in talk["turns"]] == [
        line_text(seq) for seq in [*range(136, 145), 146]
    ]


def test_loading_a_save_forgets_the_chapters_after_it() -> None:
    branch = {"parent_timeline_id": "main", "after_seq": 10}
    stream = [
        *lines(20),
        said(11, "on the reload", timeline="reload", branch=branch),
    ]
    state = replay_lines(stream).state
    assert len(chronicle(state)["chapters"]) == 1
    reload = chronicle(state, timeline="reload")
    assert reload["chapters"] == []
    assert [digest["seq"] for digest in reload["digests"]] == list(range(1, 12))
    assert reload["digests"][-1]["text"] == "on the reload"
    assert chronicle(state, as_of_seq=10)["digests"] == reload["digests"][:10]


def test_a_replay_gives_the_identical_chronicle_and_a_read_writes_nothing() -> None:
    stream = lines(200)
    once = replay_lines(stream).state
    digest = world_digest(once, "default", "w")
    first = chronicle(once)
    assert world_digest(once, "default", "w") == digest
    redelivered = replay_lines([*stream[:120], *stream[100:], *stream[150:]]).state
    assert world_digest(redelivered, "default", "w") == digest
    assert chronicle(redelivered) == first


def test_a_character_with_no_record_has_no_chronicle() -> None:
    state = replay_lines(lines(3)).state
    with pytest.raises(NotFound, match="'npc-tomas' holds no memory on timeline 'main'"):
        chronicle_read(state, "default", "w", "main", "npc-tomas", ChroniclePolicy(), words)


def test_a_chapter_whose_one_statement_is_over_the_budget_keeps_its_opening() -> None:
    """It kept nothing: the chapter's text was empty and its record gone from the chronicle."""
    passage = Passage(" ".join(f"w{n}" for n in range(40)), 0.9, 1, 40)
    [cut] = RulesSummariser().summarise([passage], 10, words)
    assert cut.text == "w0 w1 w2 w3 w4 w5 w6 w7 w8 …"
    assert (cut.tokens, cut.seq, cut.importance) == (10, 1, 0.9)
    long_line = " ".join(["the", "silver", *(["and"] * 400)])  # a chapter of its own
    state = replay_lines([said(1, long_line), said(2, "The baker is ill")]).state
    small = ChroniclePolicy(
        short_term_tokens=150, chapter_tokens=100, condensed_tokens=100, long_term_tokens=2500
    )
    read = chronicle_read(state, "default", "w", "main", "npc-mara", small, words)
    [first] = orjson.loads(orjson.dumps(read))["chapters"]
    assert (first["from_seq"], first["to_seq"], first["records"]) == (1, 1, 1)
    assert first["text"].startswith("the silver and") and first["text"].endswith(" …")
    assert first["tokens"] == small.chapter_tokens  # the most words that fit


def small_chronicle(count: int, long_term_tokens: int) -> dict[str, Any]:
    """Mara's chronicle of `count` lines with budgets of one line's length: a chapter holds one
    line, and rolls from two lines on."""
    policy = ChroniclePolicy(
        short_term_tokens=150,
        chapter_tokens=100,
        condensed_tokens=100,
        long_term_tokens=long_term_tokens,
    )
    read = chronicle_read(
        replay_lines(lines(count)).state, "default", "w", "main", "npc-mara", policy, words
    )
    decoded: dict[str, Any] = orjson.loads(orjson.dumps(read))
    return decoded


def test_chapters_as_long_as_long_term_tokens_stay_chapters() -> None:
    """They condense once their text passes `long_term_tokens`, not when it reaches it."""
    at_the_budget = small_chronicle(3, long_term_tokens=100)
    assert at_the_budget["condensed"] is None
    assert [(c["from_seq"], c["to_seq"], c["tokens"]) for c in at_the_budget["chapters"]] == [
        (1, 2, 100)
    ]


def test_a_chronicles_length_counts_the_condensed_chapter_too() -> None:
    found = small_chronicle(5, long_term_tokens=100)
    assert found["condensed"] is not None and found["condensed"]["tokens"] == 100
    parts = [found["condensed"], *found["chapters"], *found["digests"]]
    assert found["tokens"] == sum(part["tokens"] for part in parts) == 200


def test_a_statement_exactly_as_long_as_the_budget_is_kept_whole() -> None:
    statement = " ".join(["word"] * 100)
    kept = RulesSummariser().summarise(
        [Passage(statement, 0.9, 1, 100), Passage("short one", 0.1, 2, 2)], 100, words
    )
    assert [(p.text, p.tokens) for p in kept] == [(statement, 100)]
