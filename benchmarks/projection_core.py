"""(b) The projection core in-process: `Projector(changes=True).receive` over `MemoryState`,
events/s, the change feed's records made as a worker makes them by default.

A generated tavern-like stream (24 places, 50 characters wandering, ~3 perceivers per event,
`told`, `player-said`, declarations) is folded from an empty state, `repeats` times, each time
once more with the change feed off (its rate by CPU time printed beside). The
baseline is the fixed cost every event pays anyway: `Event.model_validate_json` on the same
bytes. The key writes per event (the figure issue 9 names beside the rate) are counted in one more
pass, and one extra pass runs under cProfile; its top entries are printed. The machine is
shared: the rate by this process's CPU time is the steadier figure.
"""

from __future__ import annotations

import cProfile
import io
import pstats
import time
from collections import Counter

from benchmarks.story import encoded, tavern_story
from benchmarks.support import Options, median, rate, report, run_main
from projections.delivery import SourceMessage
from projections.projector import Projector
from projections.state import MemoryState
from schemas import Event

FULL_EVENTS = 20_000
QUICK_EVENTS = 5_000
PROFILE_EVENTS = 5_000
GOAL = 25_000
"""Issue 9's goal for this figure; the earlier 50,000 stays printed beside it."""
FIRST_GOAL = 50_000
TOPIC = "bench"
WORLD = "tavern-0"


def stream(count: int) -> list[bytes]:
    """The first `count` events of the stream (b) folds, encoded."""
    return encoded(tavern_story(count, seed=3, worlds=(WORLD,)))


def fold(lines: list[bytes], key: bytes, changes: bool = True) -> tuple[float, float, Counter[str]]:
    """Seconds (wall clock, then this process's CPU) to fold `lines` into a fresh state, and
    the ack outcomes. CPU time is the steadier figure on a machine shared with other work.
    With `changes`, the change feed's records are made too, as a worker makes them by default
    (`RUMOURMILL_CHANGES_TOPIC`); without, the fold was some 11% lighter than a worker's."""
    projector, state = Projector(changes=changes), MemoryState()
    outcomes: Counter[str] = Counter()
    began, began_cpu = time.perf_counter(), time.process_time()
    for offset, raw in enumerate(lines):
        for ack in projector.receive(state, SourceMessage(TOPIC, 0, offset, key, raw)).acks:
            outcomes[ack.outcome.value] += 1
    return time.perf_counter() - began, time.process_time() - began_cpu, outcomes


class _CountedWrites:
    """A fresh state that counts the writes made through it; the rest passes straight on."""

    def __init__(self) -> None:
        state = MemoryState()
        self.get, self.scan, self.delete, self._put = state.get, state.scan, state.delete, state.put
        self.writes = 0

    def put(self, key: bytes, value: bytes) -> None:
        self.writes += 1
        self._put(key, value)


def writes_per_event(lines: list[bytes], key: bytes) -> float:
    """The state writes (`put`s) one fold makes, per event."""
    projector, state = Projector(changes=True), _CountedWrites()
    for offset, raw in enumerate(lines):
        projector.receive(state, SourceMessage(TOPIC, 0, offset, key, raw))
    return state.writes / len(lines)


def parse_only(lines: list[bytes]) -> float:
    """Seconds to validate every line into an `Event`, and nothing else."""
    began = time.perf_counter()
    for raw in lines:
        Event.model_validate_json(raw)
    return time.perf_counter() - began


def profile(lines: list[bytes], key: bytes, top: int = 15) -> str:
    """cProfile of one fold: the top entries by cumulative time, then by own time."""
    profiler = cProfile.Profile()
    profiler.enable()
    fold(lines, key)
    profiler.disable()
    out = io.StringIO()
    stats = pstats.Stats(profiler, stream=out).strip_dirs()
    stats.sort_stats("cumulative").print_stats(top)
    stats.sort_stats("tottime").print_stats(10)
    return "\n".join(line for line in out.getvalue().splitlines() if line.strip())


def run(options: Options) -> None:
    count = QUICK_EVENTS if options.quick else FULL_EVENTS
    lines = stream(count)
    key = WORLD.encode()
    fold(lines[: count // 10], key)  # warm up imports and caches
    core: list[float] = []
    cpu: list[float] = []
    feed_off_cpu: list[float] = []
    parse: list[float] = []
    outcomes: Counter[str] = Counter()
    for _ in range(options.repeats):
        seconds, cpu_seconds, outcomes = fold(lines, key)
        core.append(rate(count, seconds))
        cpu.append(cpu_seconds)
        feed_off_cpu.append(fold(lines, key, changes=False)[1])
        parse.append(rate(count, parse_only(lines)))
    if outcomes["processed"] != count:
        raise RuntimeError(f"expected {count} processed, got {dict(outcomes)}")
    core_rate, parse_rate = median(core), median(parse)
    cpu_rate = rate(count, median(cpu))
    report(
        f"(b) projection core in-process: {count} events, median of {options.repeats}",
        [
            (
                f"Projector.receive on MemoryState, change feed on (goal >= {GOAL:,}, then"
                f" {FIRST_GOAL:,})",
                f"{core_rate:,.0f} events/s",
            ),
            ("per event", f"{1e6 / core_rate:,.1f} us"),
            ("per event, CPU time of this process", f"{1e6 * median(cpu) / count:,.1f} us"),
            (f"by CPU time (goal >= {GOAL:,})", f"{cpu_rate:,.0f} events/s"),
            ("ratio core by CPU time/goal", f"{cpu_rate / GOAL:.3f}"),
            (
                "by CPU time with the change feed off",
                f"{rate(count, median(feed_off_cpu)):,.0f} events/s",
            ),
            ("state writes per event", f"{writes_per_event(lines, key):.1f}"),
            ("baseline: Event.model_validate_json only", f"{parse_rate:,.0f} events/s"),
            ("ratio core/parse-only", f"{core_rate / parse_rate:.3f}"),
            ("ratio core/goal", f"{core_rate / GOAL:.3f}"),
            (f"ratio core/{FIRST_GOAL:,}", f"{core_rate / FIRST_GOAL:.3f}"),
            ("runs, events/s", " ".join(f"{r:,.0f}" for r in core)),
        ],
    )
    profiled = min(PROFILE_EVENTS, count)
    print(f"\n-- cProfile of one fold of {profiled} events (top 15 cumulative, top 10 own time)")
    print(profile(lines[:profiled], key))


if __name__ == "__main__":
    run_main(__doc__ or "", in_process=run)
