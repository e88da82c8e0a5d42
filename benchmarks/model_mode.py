"""(issue 11) Model mode: events/s against a scripted model answering in 50 ms, and with a
hanging model, each against rules mode on the same stream in the same run.

One generated tavern stream is folded in-process with the production judge and chat-completions
client (the judgements topic kept in memory), as the worker folds a partition: each message's
questions found by a scratch pass, asked at once, the event applied with the answers (the
chronicle's chapters summarised by the model as they close, token counts by the worker's
tokenizer). Runs:
rules mode (the baseline); model mode with no model configured (the cost of the scratch pass and
of recording, every judgement refused at once); model mode against the scripted model answering
every call after 50 ms (at most 8 calls in flight, the default, and a deadline long enough for
all); and against a model that never answers (`memory.model.deadline_ms` 200: the first event
waits out the deadline, then the model rests and the rules answer at once). Rates are medians
over equal slices of the stream.
"""

from __future__ import annotations

import asyncio
import logging
import time

from benchmarks.story import encoded, tavern_story
from benchmarks.support import Options, median, rate, report, run_main
from projections.policy import DEFAULT_POLICY, resolve
from projections.projector import Projector
from projections.state import MemoryState
from schemas.policy import Policy
from streams.judging import Judge, JudgementLog, MemoryTopic
from streams.model_client import ModelClient
from streams.replay import messages
from streams.tokens import wordllama_tokens
from tests.model_server import Behaviour, scripted_model

FULL_EVENTS = 1000
QUICK_EVENTS = 300
SLICES = 5
ANSWER_SECONDS = 0.05
DEADLINE_MS = 200
"""The hanging model's deadline."""
ANSWERING_DEADLINE_MS = 60_000
"""The answering model's: long enough that every call is answered (none refused)."""


class Fold:
    """One in-process fold of the stream: slice rates, the longest wait on the model, calls."""

    def __init__(self) -> None:
        self.rates: list[float] = []
        self.longest_wait = 0.0
        self.refused = 0


async def fold(lines: list[bytes], policy: Policy, url: str | None) -> Fold:
    client = None if url is None else ModelClient(url, "scripted", timeout_seconds=60)  # 8 at once
    topic = MemoryTopic()
    judge = Judge(client, JudgementLog(topic.read, topic.send))
    projector = Projector(policies=lambda tenant, world: policy, count=wordllama_tokens())
    state, result = MemoryState(), Fold()
    all_messages = list(messages(lines))
    size = max(1, len(all_messages) // SLICES)
    for start in range(0, len(all_messages), size):
        chunk = all_messages[start : start + size]
        began = time.perf_counter()
        for message in chunk:
            asked = time.perf_counter()
            answers = await judge.message(projector, state, message)
            result.longest_wait = max(result.longest_wait, time.perf_counter() - asked)
            intake = projector.receive(state, message, answers)
            result.refused += sum(len(ack.refused_judgements) for ack in intake.acks)
        result.rates.append(rate(len(chunk), time.perf_counter() - began))
    if client is not None:
        await client.close()
    return result


def against(lines: list[bytes], policy: Policy, behaviour: Behaviour) -> tuple[Fold, int]:
    """A fold against the scripted model behaving so; with the calls it got."""
    with scripted_model(behaviour, ANSWER_SECONDS) as model:
        result = asyncio.run(fold(lines, policy, model.url))
        return result, model.calls


def run(options: Options) -> None:
    count = QUICK_EVENTS if options.quick else FULL_EVENTS
    lines = encoded(tavern_story(count, seed=13, characters=30, places=8))
    logging.getLogger("rumourmill.judging").setLevel(logging.ERROR)  # "resting it" is expected
    patient, hurried = (
        resolve(None, {"memory": {"weighing": "model", "model": {"deadline_ms": deadline}}})
        for deadline in (ANSWERING_DEADLINE_MS, DEADLINE_MS)
    )
    rules = asyncio.run(fold(lines, DEFAULT_POLICY, None))
    unconfigured = asyncio.run(fold(lines, patient, None))
    answering, calls = against(lines, patient, "slow")
    hanging, hanging_calls = against(lines, hurried, "hang")
    baseline = median(rules.rates)

    def row(result: Fold) -> str:
        events = median(result.rates)
        return f"{events:,.1f} events/s (ratio to rules {events / baseline:.4f})"

    report(
        f"(model mode) a tavern of 30 characters, {count:,} events, median of {SLICES} slices",
        [
            ("rules mode (baseline)", f"{baseline:,.0f} events/s"),
            ("model mode, no model (scratch pass + records)", row(unconfigured)),
            (f"model answering in {ANSWER_SECONDS * 1000:.0f} ms", row(answering)),
            ("  calls to the model per event", f"{calls / count:.2f}"),
            ("  judgements refused", f"{answering.refused:,}"),
            (f"hanging model, deadline {DEADLINE_MS} ms", row(hanging)),
            ("  longest wait on the model", f"{hanging.longest_wait * 1000:,.0f} ms"),
            ("  calls to the model (then it rests)", f"{hanging_calls:,}"),
        ],
    )


if __name__ == "__main__":
    run_main(__doc__ or "", in_process=run)
