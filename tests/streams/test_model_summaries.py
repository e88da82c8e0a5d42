"""The chronicle's chapters summarised by a model (sections 12 and 14) against a real
chat-completions server on 127.0.0.1 answering from a script (`tests.model_server`), through the
production client and judge, in process (no Kafka); token counts by the worker's tokenizer."""

from __future__ import annotations

import asyncio
from collections import Counter
from typing import Any

import orjson
import pytest

from projections.chronicle import chronicle_read
from projections.chronicle_summaries import TokenCounter
from projections.digest import world_digest
from projections.judgements import RecordedAnswers
from projections.memory_store import held_in_order
from projections.policy import resolve
from projections.projector import Projector
from projections.runtime_read import runtime_read, timeline_view
from projections.wording import one_line, retell
from schemas.judgements import EventJudgements
from schemas.policy import Policy
from streams.judging import Judge, JudgementLog, MemoryTopic
from streams.model_client import ModelClient
from streams.replay import Replay, replay_judged, replay_lines
from streams.show import chronicle_tables
from streams.tokens import wordllama_tokens
from tests.model_server import RETOLD_PREFIX, SUMMARY_PREFIX, Behaviour, scripted_model
from tests.projections.test_chronicle import line_text, lines, said, words
from tests.tavern import TAVERN_LINES

SHORT_CHAPTERS: dict[str, Any] = {
    "memory": {
        "chronicle": {
            "short_term_tokens": 400,
            "long_term_tokens": 60,
            "chapter_tokens": 250,
            "condensed_tokens": 60,
        }
    }
}
POLICY = resolve(None, SHORT_CHAPTERS)
"""Chapters of a few lines each, condensed every few chapters (rules weighing: only the
summaries are the model's)."""
TALK = lines(40)


def projector(answers: RecordedAnswers | None = None) -> Projector:
    count = wordllama_tokens()
    if answers is None:
        return Projector(lambda tenant, world: POLICY, count=count)
    return Projector(lambda tenant, world: POLICY, answers=answers, count=count)


def judged(url: str | None, topic: MemoryTopic, timeout: float = 5.0) -> Replay:
    """The talk replayed with each message's questions put to the model at `url`."""

    async def run() -> Replay:
        client = None if url is None else ModelClient(url, "scripted", timeout_seconds=timeout)
        try:
            return await replay_judged(
                TALK, projector(), Judge(client, JudgementLog(topic.read, topic.send))
            )
        finally:
            if client is not None:
                await client.close()

    return asyncio.run(run())


def replayed_with(url: str, story: list[bytes], policy: Policy, count: TokenCounter) -> Replay:
    """`story` replayed under `policy` (tokens counted by `count`), each message's questions
    put to the model at `url`."""

    async def run() -> Replay:
        client = ModelClient(url, "scripted", timeout_seconds=5)
        topic = MemoryTopic()
        try:
            return await replay_judged(
                story,
                Projector(lambda tenant, world: policy, count=count),
                Judge(client, JudgementLog(topic.read, topic.send)),
            )
        finally:
            await client.close()

    return asyncio.run(run())


def chronicle(replay: Replay, policy: Policy = POLICY) -> dict[str, Any]:
    read = chronicle_read(
        replay.state,
        "default",
        "w",
        "main",
        "npc-mara",
        policy.memory.chronicle,
        wordllama_tokens(),
    )
    decoded: dict[str, Any] = orjson.loads(orjson.dumps(read))
    return decoded


def parts(told: dict[str, Any]) -> list[dict[str, Any]]:
    """The summarised parts of a chronicle: the condensed chapter, then the chapters."""
    return ([told["condensed"]] if told["condensed"] else []) + told["chapters"]


def bounds(told: dict[str, Any]) -> list[tuple[int, int, int]]:
    return [(part["from_seq"], part["to_seq"], part["records"]) for part in parts(told)]


def records(topic: MemoryTopic) -> list[EventJudgements]:
    return [record for kept in topic.partitions.values() for record in kept]


def rules_chronicle() -> dict[str, Any]:
    return chronicle(replay_lines(TALK, Projector(lambda tenant, world: POLICY)))


def test_with_a_model_the_chapters_are_its_summaries_and_a_replay_without_it_is_identical() -> None:
    topic = MemoryTopic()
    with scripted_model() as model:
        live = judged(model.url, topic)
    told = chronicle(live)
    rules = rules_chronicle()
    assert told["condensed"] is not None and told["chapters"]  # rolled and condensed
    # the parts tell every record before the digests, in order, each once
    told_bounds = bounds(told)
    assert [start for start, _, _ in told_bounds] == [
        1,
        *(end + 1 for _, end, _ in told_bounds[:-1]),
    ]
    assert sum(count for _, _, count in told_bounds) + len(told["digests"]) == len(TALK)
    for part in parts(told):
        assert (part["summary"], part["summarised_by"]) == (True, "model")
        assert part["text"].startswith(SUMMARY_PREFIX)
        assert part["tokens"] <= POLICY.memory.chronicle.chapter_tokens
    first = told["chapters"][0]
    covered = range(first["from_seq"], first["to_seq"] + 1)
    assert first["text"] == " ".join([SUMMARY_PREFIX, *(f"line{seq}" for seq in covered)])
    assert len(first["belief_ids"]) == first["records"]  # the records behind it, named
    assert told["digests"] == rules["digests"]  # the newest records, word for word
    assert all(part["summarised_by"] == "rules" for part in parts(rules))
    assert live.refusals == []
    printed = chronicle_tables(told)  # what `rumourmill chronicle` prints: who made each
    assert "condensed: summary by the model of" in printed
    assert "chapter 1: summary by the model of" in printed
    # a summary never replaces a record: what she holds reads the same as without the model
    held = runtime_read(live.state, "default", "w", "main", "npc-mara")
    assert held == runtime_read(replay_lines(TALK).state, "default", "w", "main", "npc-mara")
    # the model gone: the recorded summaries make the identical chronicle and digest
    calls = model.calls
    again = replay_lines(TALK, projector(RecordedAnswers(records(topic))))
    assert again.digests == live.digests and again.refusals == []
    assert chronicle(again) == told
    assert model.calls == calls
    assert world_digest(again.state, "default", "w") == world_digest(live.state, "default", "w")


@pytest.mark.parametrize(
    ("behaviour", "delay", "timeout", "padding", "reason"),
    [
        ("malformed", 0.0, 5.0, 0, "malformed answer: not valid JSON"),
        ("slow", 1.0, 0.2, 0, "timeout: no answer within 0.2 s"),
        ("answer", 0.0, 5.0, 300, "over budget: "),  # over the chapters' budget too
    ],
)
def test_a_summary_the_model_fails_is_the_rules_and_is_listed_on_the_ack(
    behaviour: Behaviour, delay: float, timeout: float, padding: int, reason: str
) -> None:
    with scripted_model(behaviour, delay) as failing:
        failing.summary_padding = padding
        replay = judged(failing.url, MemoryTopic(), timeout=timeout)
    rules = rules_chronicle()
    assert replay.outcomes == {"processed": len(TALK)}
    assert chronicle(replay) == rules
    refused = [item for ack in replay.refusals for item in ack.refused_judgements]
    asked = [f"{part['to_seq']}" for part in parts(rules)]
    assert {item.judgement for item in refused} == {"summary"}
    assert {item.npc_id for item in refused} == {"npc-mara"}
    assert refused[0].reason.startswith(reason)
    # each chapter, and each condensation, was asked for once, at the event that closed it
    closed = [item.belief_id.split()[1].split("-")[1] for item in refused]
    assert set(asked) <= set(closed)
    assert [ack.seq for ack in replay.refusals] == sorted({int(seq) for seq in closed})


def test_without_a_model_no_summary_is_asked_and_none_is_refused() -> None:
    replay = judged(None, MemoryTopic())
    assert replay.refusals == []  # the rules summariser is the norm, not a fallback
    assert chronicle(replay) == rules_chronicle()


def test_a_chapter_closed_by_another_timelines_persistent_memory_is_not_its_summary() -> None:
    """Branched after seq 14, `b` hears a secret at 15 where `main` hears a greeting; a line
    Mara keeps as persistent knowledge at `b`'s 16 closes a chapter 1-16 on both timelines.
    The model summarised `b`'s chapter, and `main`'s chapter (its own seq 15 in it) showed
    that summary, naming the secret only `b` heard; the rules summarise `main`'s now."""
    policy = resolve(None, {"memory": {"persistent": {"kinds": ["knowledge"]}}})

    def heard(seq: int, timeline: str, actor: str, key: str, **fields: Any) -> bytes:
        event = {"world_instance_id": "w", "timeline_id": timeline, "seq": seq, "key": key}
        return orjson.dumps(
            event | {"actor": actor, "target": "npc-mara", "location": "loc-inn"} | fields
        )

    story = [said(seq, line_text(seq)) for seq in range(1, 15)]
    story.append(heard(15, "main", "npc-ilse", "npc.greeted"))
    branch = {"parent_timeline_id": "main", "after_seq": 14}
    story.append(heard(15, "b", "npc-bruno", "npc.whispered-secretplan", branch=branch))
    story.append(said(16, line_text(16), timeline="b"))

    with scripted_model() as model:
        replay = replayed_with(model.url, story, policy, words)

    def chapters(timeline: str) -> list[dict[str, Any]]:
        read = chronicle_read(
            replay.state, "default", "w", timeline, "npc-mara", policy.memory.chronicle, words
        )
        found: list[dict[str, Any]] = orjson.loads(orjson.dumps(read))["chapters"]
        return found

    [on_b] = chapters("b")
    [on_main] = chapters("main")
    assert (on_b["from_seq"], on_b["to_seq"]) == (on_main["from_seq"], on_main["to_seq"]) == (1, 16)
    assert on_b["summarised_by"] == "model" and "npc-bruno" in on_b["text"]
    assert on_main["summarised_by"] == "rules" and "npc-bruno" not in on_main["text"]


def test_two_chapters_one_event_closes_alike_are_each_summarised_from_its_own_records() -> None:
    """Chapters of 10 tokens: the meeting that passes Mara's news to Tomas closes two chapters
    of his of one record each, alike in bounds and size. Their questions shared one name, and
    one answer (the last) was shown for both: a chapter summarised another's records."""
    policy = resolve(
        None,
        {
            "memory": {
                "spreading": {"enabled": True},
                "chronicle": {
                    "short_term_tokens": 10,
                    "chapter_tokens": 10,
                    "long_term_tokens": 10_000,
                    "condensed_tokens": 10,
                },
            }
        },
    )
    count = wordllama_tokens()

    def summary(body: dict[str, Any]) -> str | None:
        """The first words of the first statement the question lists (within a chapter's 10
        tokens): whose records a summary is shows."""
        instructions, question = (message["content"] for message in body["messages"])
        if '"summary"' not in instructions:
            return None
        first = next(line[2:] for line in question.splitlines() if line.startswith("- "))
        return orjson.dumps({"summary": " ".join(first.split()[:3])}).decode()

    with scripted_model() as model:
        scripted = model.answer
        model.answer = lambda body: summary(body) or scripted(body)  # type: ignore[method-assign]
        replay = replayed_with(model.url, TAVERN_LINES, policy, count)
    read = chronicle_read(
        replay.state, "default", "save-1", "main", "npc-tomas", policy.memory.chronicle, count
    )
    _, keys, ancestry = timeline_view(replay.state, "default", "save-1", "main", None)
    content = {
        memory.belief_id: memory.content
        for memory in held_in_order(replay.state, keys, ancestry, "npc-tomas")
    }
    alike = Counter(
        (chapter.from_seq, chapter.to_seq, chapter.records) for chapter in read.chapters
    )
    assert max(alike.values()) >= 2  # the case itself: two chapters alike
    for chapter in read.chapters:
        assert chapter.summarised_by == "model"
        first = one_line(retell(content[chapter.belief_ids[0]]))
        assert chapter.text == " ".join(first.split()[:3])


def test_the_condensed_chapter_is_asked_of_the_chapters_as_the_model_summarised_them() -> None:
    """The event that closes a chapter and grows the condensed chapter asks for the chapter
    first, then for the condensed chapter from the model's summary of it. Asked at once, the
    condensed chapter was summarised from the rules' text of that chapter (never shown), and
    condensed chapters that never come to be were asked for (the rules' text is longer)."""
    policy = resolve(
        None,
        {
            "memory": {
                "chronicle": {
                    "short_term_tokens": 400,
                    "long_term_tokens": 30,
                    "chapter_tokens": 250,
                    "condensed_tokens": 30,
                }
            }
        },
    )
    with scripted_model() as model:
        live = replayed_with(model.url, lines(12), policy, wordllama_tokens())
        asked = [
            question
            for body in model.requests
            if "positions" in (question := body["messages"][1]["content"])
        ]
    told = chronicle(live, policy)
    [(first, last, count)] = bounds(told)  # the condensed chapter alone: three chapters
    assert (first, last, count, told["digests"]) == (1, 12, 12, [])
    chapters = [question for question in asked if "(4 records" in question]
    [condensed] = [question for question in asked if "(12 records" in question]
    assert len(asked) == len(chapters) + 1 == 4  # one call a part, none of parts never made
    stated = [line for line in condensed.splitlines() if line.startswith("- ")]
    assert stated[-1] == f"- {SUMMARY_PREFIX} line9 line10 line11 line12"  # the model's


def test_a_summary_over_a_budget_made_smaller_since_is_the_rules() -> None:
    """The model's chapters were within `chapter_tokens` when asked; read once the budget was
    made smaller (the bounds are the same), each is longer than the part may be now, and the
    rules summarise it within the new budget."""
    sizes = {"short_term_tokens": 400, "long_term_tokens": 5000, "condensed_tokens": 600}
    wide = resolve(None, {"memory": {"chronicle": sizes | {"chapter_tokens": 250}}})
    narrow = resolve(None, {"memory": {"chronicle": sizes | {"chapter_tokens": 20}}})
    with scripted_model() as model:
        model.summary_padding = 30
        live = replayed_with(model.url, lines(12), wide, wordllama_tokens())
    before, after = chronicle(live, wide), chronicle(live, narrow)
    assert bounds(before) == bounds(after)
    assert {chapter["summarised_by"] for chapter in before["chapters"]} == {"model"}
    assert max(chapter["tokens"] for chapter in before["chapters"]) > 20
    assert {chapter["summarised_by"] for chapter in after["chapters"]} == {"rules"}
    assert max(chapter["tokens"] for chapter in after["chapters"]) <= 20


def test_a_chapter_a_rumour_closes_is_asked_of_the_rumour_as_the_model_retold_it() -> None:
    """Model weighing, rumours spreading, chapters of a few records: each chapter is asked of
    once, and of the statements the chronicle holds, the model's retellings and the impressions
    its feelings worded among them (asked at once, a chapter was asked of the rules' words, and
    one that the model's words closed elsewhere was never asked: the rules summarised it)."""
    policy = resolve(
        None,
        {
            "memory": {
                "weighing": "model",
                "spreading": {"enabled": True},
                "chronicle": {
                    "short_term_tokens": 40,
                    "long_term_tokens": 10_000,
                    "chapter_tokens": 40,
                    "condensed_tokens": 600,
                },
            }
        },
    )
    count = wordllama_tokens()
    with scripted_model() as model:
        replay = replayed_with(model.url, TAVERN_LINES, policy, count)
        asked = Counter(
            question
            for body in model.requests
            if "positions" in (question := body["messages"][1]["content"])
        )
    _, keys, ancestry = timeline_view(replay.state, "default", "save-1", "main", None)
    retold = 0
    for character, name in (("npc-mara", "Mara"), ("npc-tomas", "Tomas")):
        content = {
            memory.belief_id: memory.content
            for memory in held_in_order(replay.state, keys, ancestry, character)
        }
        read = chronicle_read(
            replay.state, "default", "save-1", "main", character, policy.memory.chronicle, count
        )
        for chapter in read.chapters:
            statements = [one_line(retell(content[belief])) for belief in chapter.belief_ids]
            [(question, times)] = [
                (question, times)
                for question, times in asked.items()
                if question.startswith(f"Character: {name}\n")
                and f"({chapter.records} records, positions {chapter.from_seq} to {chapter.to_seq})"
                in question
            ]
            assert times == 1
            assert [line[2:] for line in question.splitlines() if line.startswith("- ")] == (
                statements
            )
            retold += sum(RETOLD_PREFIX in statement for statement in statements)
    assert retold  # the case itself: chapters holding the model's retellings


@pytest.mark.parametrize("weighing", ["rules", "model"])
def test_a_message_filling_a_gap_has_each_chapter_its_events_close_summarised(
    weighing: str,
) -> None:
    """Seq 2 comes last: it applies 2 to 6, each closing a chapter of Mara's. Each chapter is
    the model's: one waiting for the answers its words are made of waited for another
    chapter's summary too, one round each, and past the rounds the rules summarised them."""
    sizes = {"short_term_tokens": 20, "chapter_tokens": 20, "condensed_tokens": 20}
    policy = resolve(
        None,
        {"memory": {"weighing": weighing, "chronicle": sizes | {"long_term_tokens": 10_000}}},
    )
    story = [said(seq, " ".join([f"line{seq}", *["and"] * 30])) for seq in range(1, 7)]
    with scripted_model() as model:
        live = replayed_with(
            model.url, [story[0], *story[2:], story[1]], policy, wordllama_tokens()
        )
    told = chronicle(live, policy)
    assert len(told["chapters"]) >= 5
    assert {chapter["summarised_by"] for chapter in told["chapters"]} == {"model"}


def test_a_chapter_is_asked_of_with_the_names_its_closing_event_declares_kept_whole() -> None:
    """The event that closes a chapter and first declares the inn's name: its own declarations
    are written after the chapter is asked of, and the model read "at Gasthaus something"."""
    inn = {"loc-inn": {"name": "Gasthaus „Zur Post“", "kind": "place"}}
    hidden = {"key": "crime.item-hidden", "actor": "npc-mara", "location": "loc-inn"}
    spot = {"spot": "under the stairs " * 40}
    story = [said(seq, line_text(seq)) for seq in range(1, 4)]
    story.append(
        orjson.dumps(
            {"world_instance_id": "w", "timeline_id": "main", "seq": 4}
            | hidden
            | {"payload": spot, "entities": inn}
        )
    )
    policy = resolve(
        None,
        {"memory": {"chronicle": {"short_term_tokens": 400, "chapter_tokens": 250}}},
    )
    with scripted_model() as model:
        replayed_with(model.url, story, policy, wordllama_tokens())
        asked = [body["messages"][1]["content"] for body in model.requests]
    told = [line for question in asked for line in question.splitlines() if "hidden" in line]
    assert told == ["- npc-mara item hidden at Gasthaus „Zur Post“"]
