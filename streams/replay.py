"""The in-process shell: fold an NDJSON file through the same projector, no Kafka."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from projections.delivery import Intake, SourceMessage, world_key
from projections.digest import world_digest
from projections.projector import Projector
from projections.state import MemoryState
from schemas import Ack
from streams.judging import Judge


@dataclass
class Replay:
    """What a replay produced: its state, its acks, outcome counts and each world's digest."""

    state: MemoryState = field(default_factory=MemoryState)
    outcomes: Counter[str] = field(default_factory=Counter)
    digests: dict[tuple[str, str], str] = field(default_factory=dict)

    refusals: list[Ack] = field(default_factory=list)
    """The acks listing judgements the model did not make."""
    worlds: set[tuple[str, str]] = field(default_factory=set)

    def took(self, intake: Intake) -> None:
        """Count what one message produced."""
        for ack in intake.acks:
            self.outcomes[ack.outcome.value] += 1
            if ack.refused_judgements:
                self.refusals.append(ack)
            if ack.tenant_id is not None and ack.world_instance_id is not None:
                self.worlds.add((ack.tenant_id, ack.world_instance_id))

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
        result.took(projector.receive(result.state, message))
    return result.finish()


async def replay_judged(lines: list[bytes], projector: Projector, judge: Judge) -> Replay:
    """`replay_lines` with model judgements: each message's questions answered by `judge` (the
    model, within each world's deadline), as the worker does."""
    result = Replay()
    for message in messages(lines):
        answers = await judge.message(projector, result.state, message)
        result.took(projector.receive(result.state, message, answers))
    return result.finish()


def messages(lines: list[bytes]) -> Iterator[SourceMessage]:
    """Raw event lines as partition 0 of the events topic, keyed by world."""
    for offset, raw in enumerate(lines):
        yield SourceMessage("replay", 0, offset, world_key(raw), raw)


def replay_file(path: Path, projector: Projector | None = None) -> Replay:
    """`replay_lines` over the non-blank lines of an NDJSON file."""
    lines = [line for line in path.read_bytes().splitlines() if line.strip()]
    return replay_lines(lines, projector)
