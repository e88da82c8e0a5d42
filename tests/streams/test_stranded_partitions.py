"""What keeps a partition from being left behind after a rebalance, checked without a broker:
a recovery step that times out starts the recovery over; a pause cancels a pending resume; a
drained buffer does not resume a paused partition; fetched standby records survive a resume;
a partition that stands still is reported."""

from __future__ import annotations

import asyncio
import logging
import time
from pathlib import Path

import faust
import pytest
from faust import Event
from faust.tables.recovery import RebalanceAgain
from faust.types import TP, Message

from streams import progress_watch
from streams.app import create_app
from streams.kafka_consumer import RewindingConsumer
from streams.progress_watch import ProgressWatch, Stalls, only_markers_left
from streams.settings import Settings

EVENTS = TP("events", 0)
CHANGELOG = TP("stranded-state-changelog", 1)


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    return Settings(broker="127.0.0.1:1", data_dir=tmp_path, app_id="stranded")


def test_a_recovery_step_that_times_out_starts_the_recovery_over(settings: Settings) -> None:
    """Faust reports a timed-out step as a stop, which ends its recovery loop for good."""

    consumer = consumer_of(settings)
    consumer.assignment = lambda: {EVENTS}  # type: ignore[method-assign]

    async def wait_for_a_step_that_never_answers() -> bool:
        recovery = consumer.app.tables.recovery  # type: ignore[attr-defined]
        with pytest.raises(RebalanceAgain):
            await recovery._wait(asyncio.sleep(60), timeout=0.01)
        return bool(recovery.signal_recovery_start.is_set())

    assert asyncio.run(wait_for_a_step_that_never_answers())
    assert EVENTS not in consumer._get_active_partitions()  # paused until the recovery places it


def consumer_of(settings: Settings) -> RewindingConsumer:
    consumer = create_app(settings).app.consumer
    assert isinstance(consumer, RewindingConsumer)
    consumer._set_active_tps({EVENTS})
    return consumer


def test_a_pause_cancels_a_resume_held_for_a_seek(settings: Settings) -> None:
    consumer = consumer_of(settings)
    consumer.resume_partitions({EVENTS})
    assert EVENTS in consumer.held
    consumer.pause_partitions({EVENTS})
    assert EVENTS not in consumer.held
    assert EVENTS not in consumer._get_active_partitions()


def test_a_placed_partition_is_fetched_only_once_the_flow_resumes(
    settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Faust's recovery seeks, then resumes the flow control (emptying every stream's buffer),
    then the flow: what a partition resumed at its seek fetched in between was lost."""
    consumer = consumer_of(settings)

    async def committed() -> dict[TP, int]:
        return {EVENTS: 42}  # the broker's answer

    monkeypatch.setattr(consumer, "seek_to_committed", committed)
    monkeypatch.setattr(consumer, "assignment", lambda: {EVENTS})
    consumer.pause_partitions({EVENTS})  # the rebalance
    consumer.stop_flow()
    consumer.resume_partitions({EVENTS})  # Faust's `on_recovery_completed`, in its order
    asyncio.run(consumer.perform_seek())
    assert EVENTS not in consumer._get_active_partitions()
    consumer.app.flow_control.resume()
    consumer.resume_flow()
    assert EVENTS in consumer._get_active_partitions()
    assert consumer._read_offset[EVENTS] == 42


def test_a_drained_buffer_does_not_resume_a_paused_partition(settings: Settings) -> None:
    consumer = consumer_of(settings)
    consumer.on_buffer_full(EVENTS)
    consumer.pause_partitions({EVENTS})  # a rebalance
    consumer.on_buffer_drop(EVENTS)
    assert EVENTS not in consumer._get_active_partitions()
    assert EVENTS not in consumer._buffered_partitions


def test_a_drained_buffer_resumes_a_partition_that_is_not_paused(settings: Settings) -> None:
    consumer = consumer_of(settings)
    consumer.on_buffer_full(EVENTS)
    assert EVENTS not in consumer._get_active_partitions()
    consumer.on_buffer_drop(EVENTS)
    assert EVENTS in consumer._get_active_partitions()


def changelog_record(app: faust.App, tp: TP, offset: int, generation: int) -> Event:
    message = Message(
        tp.topic, tp.partition, offset, 0.0, 0, {}, b"key", b"value", None, generation_id=generation
    )
    return Event(app, b"key", b"value", {}, message)


def test_standby_records_fetched_before_a_resume_are_kept(settings: Settings) -> None:
    """Faust resumes the flow while standby partitions are read, and emptied the queue then."""
    app = create_app(settings).app
    app.consumer_generation_id = 3
    app.tables.recovery.standby_tps.add(CHANGELOG)  # type: ignore[attr-defined]
    queue = app.tables.changelog_queue  # type: ignore[attr-defined]
    app.flow_control.resume()
    for offset in (10, 11):
        queue.put_nowait(changelog_record(app, CHANGELOG, offset, generation=3))
    queue.put_nowait(changelog_record(app, CHANGELOG, 5, generation=2))  # an earlier rebalance's
    queue.put_nowait(changelog_record(app, TP(CHANGELOG.topic, 0), 7, generation=3))  # not read
    app.flow_control.resume()
    assert [event.message.offset for event in queue._queue] == [10, 11]


def test_a_rebalance_empties_the_changelog_queue(settings: Settings) -> None:
    app = create_app(settings).app
    app.tables.recovery.standby_tps.add(CHANGELOG)  # type: ignore[attr-defined]
    queue = app.tables.changelog_queue  # type: ignore[attr-defined]
    app.flow_control.resume()
    queue.put_nowait(changelog_record(app, CHANGELOG, 10, generation=app.consumer_generation_id))
    app.flow_control.suspend()
    app.flow_control.clear()
    assert queue.empty()


def test_a_partition_with_events_waiting_and_no_commit_is_reported_then_every_period() -> None:
    stalls = Stalls(stall_seconds=30)
    seen = [stalls.observe(now, EVENTS, 100, 0, 150) for now in (0, 10, 29, 31, 40, 62)]
    assert seen == [0.0, 0.0, 0.0, 31, 0.0, 62]


def test_a_partition_that_commits_or_has_nothing_waiting_is_not_reported() -> None:
    stalls = Stalls(stall_seconds=30)
    assert stalls.observe(0, EVENTS, 100, 0, 100) == 0.0
    assert stalls.observe(40, EVENTS, 100, 0, 100) == 0.0  # caught up
    assert stalls.observe(50, EVENTS, 100, 0, 120) == 0.0  # events arrive: the clock starts
    assert stalls.observe(70, EVENTS, 110, 0, 120) == 0.0  # a commit: it starts again
    assert stalls.observe(95, EVENTS, 110, 0, 120) == 0.0
    assert stalls.observe(101, EVENTS, 110, 0, 120) == 31


def test_a_never_committed_partition_counts_from_its_log_start() -> None:
    stalls = Stalls(stall_seconds=30)
    assert stalls.observe(0, EVENTS, None, 40, 40) == 0.0
    assert stalls.observe(31, EVENTS, None, 40, 40) == 0.0  # nothing past its start
    assert stalls.observe(32, EVENTS, None, 40, 41) == 0.0
    assert stalls.observe(62, EVENTS, None, 40, 41) == 31  # since it last had nothing waiting


@pytest.mark.parametrize(
    ("read", "position", "left"),
    [
        (99, 101, True),  # handed the event at 99, committed it, and the marker at 100 passed
        (None, 101, True),  # since a restart at 100, handed nothing, and the fetch passed 100
        (99, 100, False),  # not fetched to the end: what lies at 100 is not known
        (100, 101, False),  # handed the event at 100, not committed yet
    ],
)
def test_a_transactions_commit_marker_is_not_an_event_waiting(
    settings: Settings,
    monkeypatch: pytest.MonkeyPatch,
    read: int | None,
    position: int,
    left: bool,
) -> None:
    """Committed at 100 with the log's end at 101: the offset left is a transactional
    producer's commit marker, which no consumer is given, once the consumer has been handed
    everything to the end and committed all of it."""
    consumer = consumer_of(settings)

    async def fetched_to(tp: TP) -> int:
        return position

    monkeypatch.setattr(consumer, "position", fetched_to)
    consumer._read_offset[EVENTS] = read
    assert asyncio.run(only_markers_left(consumer, EVENTS, 100, 101)) is left
    assert asyncio.run(only_markers_left(consumer, EVENTS, 101, 101)) is False


def test_a_stalled_partition_is_described_with_the_consumer_and_recovery_state(
    settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    consumer = consumer_of(settings)
    monkeypatch.setattr(consumer, "highwater", lambda tp: 150)
    consumer.resume_partitions({EVENTS})
    said = ProgressWatch(consumer.app, EVENTS.topic).describe(consumer, EVENTS)
    assert "held for a seek: True" in said
    assert "highwater seen: 150" in said
    assert "first recovery done: False" in said


def test_a_rebalance_that_does_not_end_is_reported_then_every_period(
    settings: Settings, caplog: pytest.LogCaptureFixture
) -> None:
    """Stuck in revoking or recovering, the worker keeps its old assignment with nothing
    waiting on it: the length of the rebalance is all that shows."""
    consumer = consumer_of(settings)
    watch = ProgressWatch(consumer.app, EVENTS.topic)
    consumer.app.rebalancing = True
    with caplog.at_level(logging.WARNING, logger="rumourmill.progress"):
        for now in (0.0, 20.0, 31.0, 45.0, 62.0):
            watch._check_rebalance(consumer, now)
        consumer.app.rebalancing = False
        watch._check_rebalance(consumer, 63.0)
        consumer.app.rebalancing = True
        watch._check_rebalance(consumer, 90.0)  # a new rebalance: its own clock
    reports = [record.getMessage() for record in caplog.records]
    assert len(reports) == 2, reports
    assert reports[0].startswith("a rebalance has been under way for 31 s; flow active: ")
    assert "first recovery done: False" in reports[0]
    assert reports[1].startswith("a rebalance has been under way for 62 s")


def test_a_kafka_that_does_not_answer_leaves_the_watch_reporting_by_the_ends_last_fetched(
    settings: Settings, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """A broker gone: the watch's look waited on it for as long as it was gone (90 s in a
    reviewer's run), saying nothing of the events left waiting."""
    consumer = consumer_of(settings)
    watch = ProgressWatch(consumer.app, EVENTS.topic)
    watch.stalls.stall_seconds = 0.3

    async def unanswered(*tps: TP) -> dict[TP, int]:
        await asyncio.Event().wait()
        raise AssertionError("never answers")

    monkeypatch.setattr(progress_watch, "LOOKUP_SECONDS", 0.05)
    monkeypatch.setattr(consumer, "highwaters", unanswered)
    monkeypatch.setattr(consumer, "earliest_offsets", unanswered)
    monkeypatch.setattr(consumer, "position", unanswered)
    monkeypatch.setattr(consumer, "highwater", lambda tp: 150)
    assigned = {EVENTS, *(TP(EVENTS.topic, partition) for partition in (1, 2, 3))}
    monkeypatch.setattr(consumer, "assignment", lambda: assigned)
    for tp in assigned:
        consumer._committed_offset[tp] = 100
    took: list[float] = []

    async def looks() -> None:
        for _ in range(8):
            began = time.monotonic()
            await asyncio.wait_for(watch.check(), 1)
            took.append(time.monotonic() - began)
            await asyncio.sleep(0.1)

    with caplog.at_level(logging.WARNING, logger="rumourmill.progress"):
        asyncio.run(looks())
    said = [record.getMessage() for record in caplog.records]
    assert any(line.startswith("Kafka has not told the offsets of events for") for line in said)
    assert any("50 event(s) waiting, nothing committed for" in line for line in said), said
    assert max(took) < 0.05 * 3, took  # the look's lookups share its 0.05 s (each had its own)


def test_a_commit_marker_seen_before_kafka_went_quiet_is_still_no_event_waiting(
    settings: Settings, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Committed at 100, the log's end 101 a transaction's commit marker: with Kafka gone, the
    marker check had no time left in the look, and the marker was reported as an event
    waiting every period."""
    consumer = consumer_of(settings)
    watch = ProgressWatch(consumer.app, EVENTS.topic)
    watch.stalls.stall_seconds = 0.3
    answering = True

    async def highwaters(*tps: TP) -> dict[TP, int]:
        if not answering:
            await asyncio.Event().wait()
        return dict.fromkeys(tps, 101)

    async def earliest(*tps: TP) -> dict[TP, int]:
        return dict.fromkeys(tps, 0)

    async def fetched_to(tp: TP) -> int:
        await asyncio.sleep(0)  # the consumer's position may ask Kafka too
        return 101

    monkeypatch.setattr(progress_watch, "LOOKUP_SECONDS", 0.05)
    monkeypatch.setattr(consumer, "highwaters", highwaters)
    monkeypatch.setattr(consumer, "earliest_offsets", earliest)
    monkeypatch.setattr(consumer, "position", fetched_to)
    monkeypatch.setattr(consumer, "highwater", lambda tp: 101)
    monkeypatch.setattr(consumer, "assignment", lambda: {EVENTS})
    consumer._committed_offset[EVENTS] = 100
    consumer._read_offset[EVENTS] = None

    async def looks() -> None:
        nonlocal answering
        await watch.check()  # Kafka answers: only the marker is left
        answering = False
        for _ in range(8):
            await asyncio.wait_for(watch.check(), 1)
            await asyncio.sleep(0.1)

    with caplog.at_level(logging.WARNING, logger="rumourmill.progress"):
        asyncio.run(looks())
    said = [record.getMessage() for record in caplog.records]
    assert not any("waiting, nothing committed" in line for line in said), said
