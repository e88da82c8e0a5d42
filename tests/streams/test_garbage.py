"""The ingest agent keeps the garbage collector to each batch's young objects, yet a cycle left
behind by a batch is still freed: memory does not grow with the worker's uptime."""

from __future__ import annotations

import gc
import weakref

import pytest

from streams import app
from streams.app import YoungGarbageOnly


class Node:
    """Half of a reference cycle, which only the collector can free."""

    other: Node


def _dead_cycle() -> weakref.ref[Node]:
    first, second = Node(), Node()
    first.other, second.other = second, first
    return weakref.ref(first)


def test_a_cycle_a_batch_left_is_freed_by_the_next_full_collection(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    now = [1000.0]
    monkeypatch.setattr(app.time, "monotonic", lambda: now[0])
    gc.disable()  # no collection but the ones the test makes
    try:
        garbage = YoungGarbageOnly()
        cycle = _dead_cycle()
        garbage.batch_done()
        gc.collect()
        assert cycle() is not None, "an ordinary collection walked what a batch left"
        now[0] += app.FULL_COLLECTION_SECONDS
        garbage.batch_done()
        assert cycle() is None, "the full collection left a dead cycle behind"
    finally:
        gc.unfreeze()
        gc.enable()
