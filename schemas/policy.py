"""The policy: one validated document per world that sets how rumourmill treats it."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from schemas.events import Contract


class SequencingPolicy(Contract):
    """How far ahead of a gap a timeline may receive before events are refused."""

    max_deferred: Annotated[int, Field(ge=0, le=100_000)] = 1000


class Policy(Contract):
    """Every setting of a world; the built-in defaults apply where nothing is set."""

    sequencing: SequencingPolicy = SequencingPolicy()
