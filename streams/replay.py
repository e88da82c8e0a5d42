"""The in-process shell: fold an NDJSON file through the same projector, no Kafka."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from projections.delivery import SourceMessage, world_key
from projections.digest import world_digest
from projections.projector import Projector
from projections.state import MemoryState


@dataclass
class Replay:
    """What a replay produced: its state, outcome counts and each world's digest."""

    state: MemoryState = field(default_factory=MemoryState)
    outcomes: Counter[str] = field(default_factory=Counter)
    digests: dict[tuple[str, str], str] = field(default_factory=dict)


def replay_lines(lines: list[bytes], projector: Projector | None = None) -> Replay:
    """Feed raw event lines, in order, as partition 0 of the events topic, each keyed by its
    world as `rumourmill publish` keys it."""
    projector = projector or Projector()
    result = Replay()
    worlds: set[tuple[str, str]] = set()
    for offset, raw in enumerate(lines):
        message = SourceMessage("replay", 0, offset, world_key(raw), raw)
        intake = projector.receive(result.state, message)
        for ack in intake.acks:
            result.outcomes[ack.outcome.value] += 1
            if ack.tenant_id is not None and ack.world_instance_id is not None:
                worlds.add((ack.tenant_id, ack.world_instance_id))
    for tenant, world in worlds:
        result.digests[(tenant, world)] = world_digest(result.state, tenant, world)
    return result


def replay_file(path: Path, projector: Projector | None = None) -> Replay:
    """`replay_lines` over the non-blank lines of an NDJSON file."""
    lines = [line for line in path.read_bytes().splitlines() if line.strip()]
    return replay_lines(lines, projector)
