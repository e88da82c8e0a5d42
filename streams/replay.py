"""The in-process shell: fold an NDJSON file through the same projector, no Kafka."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from pydantic import ValidationError

from projections.deletion import world_acked
from projections.delivery import MOST_RECORD_BYTES, Intake, SourceMessage, explain, world_key
from projections.digest import world_digest
from projections.intake import DEFAULT_MAX_EVENT_BYTES
from projections.judgements import RecordedAnswers
from projections.policy import resolve
from projections.projector import Projector
from projections.state import MemoryState
from schemas import Ack, Outcome
from schemas.judgements import EventJudgements
from streams.judging import Judge
from streams.policies import check_policy_document
from streams.tokens import wordllama_tokens


@dataclass
class Replay:
    """What a replay produced: its state, its acks, outcome counts and each world's digest."""

    state: MemoryState = field(default_factory=MemoryState)
    outcomes: Counter[str] = field(default_factory=Counter)
    digests: dict[tuple[str, str], str] = field(default_factory=dict)

    refusals: list[Ack] = field(default_factory=list)
    """The acks telling of judgements the model did not make (listed, or counted only)."""
    rejected: list[tuple[int, Ack]] = field(default_factory=list)
    """Each `rejected` ack, with the offset (the line's index) of the message that gave it."""
    worlds: set[tuple[str, str]] = field(default_factory=set)

    def took(self, message: SourceMessage, intake: Intake) -> None:
        """Count what one message produced."""
        for ack in intake.acks:
            self.outcomes[ack.outcome.value] += 1
            if ack.outcome is Outcome.REJECTED:
                self.rejected.append((message.offset, ack))
            if ack.refused_judgements or ack.more_refused_judgements:
                self.refusals.append(ack)
            if (acked := world_acked(ack, message.value)) is not None:
                self.worlds.add(acked)

    def finish(self) -> Replay:
        """Digest every world an ack named."""
        for tenant, world in self.worlds:
            self.digests[(tenant, world)] = world_digest(self.state, tenant, world)
        return self


def replay_lines(lines: list[bytes], projector: Projector | None = None) -> Replay:
    """Feed raw event lines, in order, as partition 0 of the events topic, each keyed by its
    world as `rumourmill publish` keys it."""
    projector = projector or Projector()
    result = Replay()
    for message in messages(lines):
        result.took(message, projector.receive(result.state, message))
    return result.finish()


async def replay_judged(lines: list[bytes], projector: Projector, judge: Judge) -> Replay:
    """`replay_lines` with model judgements: each message's questions answered by `judge` (the
    model, within each world's deadline), and a deletion's judgements tombstoned on its topic,
    as the worker does."""
    result = Replay()
    for message in messages(lines):
        answers = await judge.message(projector, result.state, message)
        intake = projector.receive(result.state, message, answers)
        await judge.log.forget(message.partition, intake.forgotten_judgements)
        result.took(message, intake)
    return result.finish()


def messages(lines: list[bytes]) -> Iterator[SourceMessage]:
    """Raw event lines as partition 0 of the events topic, keyed by world."""
    for offset, raw in enumerate(lines):
        yield SourceMessage("replay", 0, offset, world_key(raw), raw)


def ndjson_lines(path: Path) -> list[bytes]:
    """The lines of an NDJSON file as `publish` reads them: ended by a newline, a carriage
    return before it dropped (a bare one is JSON's whitespace, within a line: split there too,
    a line `publish` sent whole was replayed as two, both refused)."""
    return [line.removesuffix(b"\r") for line in path.read_bytes().split(b"\n")]


def replay_file(path: Path, projector: Projector | None = None) -> tuple[Replay, list[int]]:
    """`replay_lines` over the non-blank lines of an NDJSON file; with the file's line number
    of each message (its offset's), by which a rejected one is reported."""
    numbered = [
        (number, line) for number, line in enumerate(ndjson_lines(path), start=1) if line.strip()
    ]
    replayed = replay_lines([line for _, line in numbered], projector)
    return replayed, [number for number, _ in numbered]


TOMBSTONE = b"null"
"""A tombstone of the judgements topic (a deleted world's), as `kafka-console-consumer` prints
its value, without its key: skipped (the records before it answer the deleted world's events;
a world begun anew at the same positions has records of its own, keyed by its life, except
those a release before state format 4 stored, under the deleted world's keys)."""


class ReplayInputError(ValueError):
    """A replay's input that cannot be used; the message says which line and why."""


def replay_projector(
    policy: Path | None,
    judgements: Path | None,
    max_event_bytes: int = DEFAULT_MAX_EVENT_BYTES,
    record_bytes: int = MOST_RECORD_BYTES,
) -> Projector:
    """The projector of a replay: `policy` for every world (else the built-in one), model
    judgements answered from `judgements` (the judgements topic's records, one per line, its
    tombstones skipped; else none, and the rules make each), never by a model; messages over
    `max_event_bytes`, and events that would write a state record too large for the changelog
    of `record_bytes` batches (`projections.record_bounds`), rejected as the worker given those
    settings rejects them."""
    document = {} if policy is None else check_policy_document(policy.read_bytes())
    resolved = resolve(None, document)
    if judgements is None:
        return Projector(
            policies=lambda tenant, world: resolved,
            max_event_bytes=max_event_bytes,
            record_bytes=record_bytes,
        )
    records = []
    for number, line in enumerate(ndjson_lines(judgements), start=1):
        if line.strip() in (b"", TOMBSTONE):
            continue
        try:
            records.append(EventJudgements.model_validate_json(line))
        except ValidationError as error:
            raise ReplayInputError(
                f"{judgements}:{number}: {explain(error, 'not a judgements record')}"
            ) from None
    return Projector(
        policies=lambda tenant, world: resolved,
        max_event_bytes=max_event_bytes,
        record_bytes=record_bytes,
        answers=RecordedAnswers(records),
        count=wordllama_tokens(),
    )
