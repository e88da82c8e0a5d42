"""An event perceived by thousands of characters in model mode raises a judgement each. Every
record it makes must be one the worker's producer sends: an ack listing them all, or one record
of the event's judgements (on the judgements topic, and in the state, whose changelog sends each
value), was megabytes, refused, and the worker stopped on it at every restart. In process (no
Kafka): the ack lists a bounded few, the judgements are kept in parts, and the parts on the topic
answer a replay or a rebuild as the whole record did, and leave it with a deleted world."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import orjson
from aiokafka.record.default_records import DefaultRecordBatchBuilder

from projections.delivery import (
    MOST_RECORD_BYTES,
    MOST_REFUSALS_LISTED,
    Intake,
    SourceMessage,
    bounded_reason,
)
from projections.judgements import (
    MOST_PART_BYTES,
    NO_MODEL,
    RecordedAnswers,
    Unanswered,
    record_key,
    stored_parts,
)
from projections.key_prefixes import JUDGEMENTS, OUTBOX
from projections.keys import pack
from projections.policy import policy_key
from projections.projector import Projector
from projections.runtime_read import runtime_read
from projections.state import MemoryState
from schemas import Ack, Outcome
from schemas.judgements import EventJudgements
from schemas.records import OutboxRecord
from streams.app import create_app
from streams.changelog import BATCH_BYTES, RECORD_HEADER
from streams.judging import Judge, JudgementLog, MemoryTopic, by_position
from streams.model_client import ModelClient
from streams.replay import Replay, replay_judged, replay_lines
from streams.settings import Settings
from tests.model_server import MODEL_FEELING, scripted_model
from tests.projections.test_deletion import deletion
from tests.streams import test_model_summaries as summaries
from tests.streams.test_model_judgements import judged, model_policy, records

CROWD = 10_000
"""Witnesses of one event (an event of 109 KB): listed, their refused feelings made an ack of
1.25 MB, and their judgements a record of 1.39 MB."""
SMALLEST_BATCH_BYTES = 16 * 1024
"""The least `RUMOURMILL_CHANGELOG_BATCH_BYTES` may be."""
POLICY = model_policy()
MODEL_MODE = {"memory": {"weighing": "model"}}


def crowd(witnesses: int, world: str = "save-1", seq: int = 1) -> bytes:
    """A fight in `world` (at `seq` of its main timeline) seen by `witnesses` characters, named."""
    event: dict[str, Any] = {
        "world_instance_id": world,
        "timeline_id": "main",
        "seq": seq,
        "key": "combat.enemy-defeated",
        "actor": "player-1",
        "players": ["player-1"],
        "witnesses": [f"npc-{number}" for number in range(witnesses)],
    }
    return orjson.dumps(event)


def record_bytes(key: bytes, value: bytes) -> int:
    """What one record takes of a producer's request, as aiokafka measures it."""
    return DefaultRecordBatchBuilder.estimate_size_in_bytes(key, value, [RECORD_HEADER])


def test_an_event_ten_thousand_characters_perceive_makes_no_record_the_worker_cannot_send() -> None:
    topic = MemoryTopic()
    live = judged(POLICY, None, topic, lines=[crowd(CROWD)])
    [ack] = live.refusals
    assert record_bytes(b"save-1", Ack.__pydantic_serializer__.to_json(ack)) <= MOST_RECORD_BYTES
    assert len(ack.refused_judgements) == MOST_REFUSALS_LISTED
    assert ack.more_refused_judgements == CROWD - MOST_REFUSALS_LISTED  # a feeling a witness
    assert {refused.reason for refused in ack.refused_judgements} == {NO_MODEL}
    on_topic = records(topic)
    assert max(record_bytes(record_key(r), r.to_bytes()) for r in on_topic) <= MOST_RECORD_BYTES
    # every state value goes to the changelog in a record batch (1 MB unless lowered), and the
    # parts of the judgements fit even the smallest
    assert max(record_bytes(key, value) for key, value in live.state.items()) <= BATCH_BYTES
    parts = list(live.state.scan(pack(JUDGEMENTS)))
    assert max(record_bytes(key, value) for key, value in parts) <= SMALLEST_BATCH_BYTES
    assert len(parts) == len(on_topic) > 1
    # nothing is lost: the parts on the topic answer a replay, every judgement as recorded
    replayed = replay_lines(
        [crowd(CROWD)],
        Projector(lambda t, w: POLICY, answers=RecordedAnswers(on_topic, model_configured=False)),
    )
    assert replayed.digests == live.digests
    assert replayed.refusals == live.refusals


def test_the_models_answers_kept_in_parts_answer_a_rebuild_and_leave_with_a_deleted_world() -> None:
    topic = MemoryTopic()
    lines = [crowd(300)]
    with scripted_model() as model:
        live = judged(POLICY, model.url, topic, lines=lines)
        assert live.refusals == [] and model.calls == 300
        [(position, parts)] = by_position(records(topic)).items()
        assert len(parts) >= 3 and len(list(stored_parts(live.state, position))) == len(parts)
        # a rebuild reads every part back, and asks nothing
        rebuilt = judged(POLICY, model.url, MemoryTopic(dict(topic.partitions)), lines=lines)
        assert rebuilt.digests == live.digests and model.calls == 300
        last = runtime_read(rebuilt.state, "default", "save-1", "main", "npc-299")
        assert [memory.feeling for memory in last.recollections] == [MODEL_FEELING]
        judged(POLICY, model.url, topic, lines=[*lines, deletion("world.deleted")])
    assert records(topic) == []  # every part tombstoned


def test_a_deleted_world_leaves_every_part_though_its_answers_took_more_than_its_state() -> None:
    """A summary over its budget is kept on the topic as the model gave it (15,000 characters:
    a part of its own), in the state as why it was not used: the state holds as many parts as
    the topic all the same, and a deletion tombstones on the topic the keys the state holds."""
    topic = MemoryTopic()
    with scripted_model() as model:
        model.summary_padding = 3_000
        live = talk_judged(model.url, topic, summaries.TALK)
        answered = by_position(records(topic))
        assert answered and all(len(parts) == 2 for parts in answered.values())
        assert all(len(part.to_bytes()) > MOST_PART_BYTES for part in records(topic))
        # the state keeps why each was not used, a few bytes: all of a position's fit one part
        assert all(len(value) < 1_000 for _, value in live.state.scan(pack(JUDGEMENTS)))
        talk_judged(model.url, topic, [*summaries.TALK, deletion("world.deleted", world="w")])
    assert records(topic) == []


def talk_judged(url: str, topic: MemoryTopic, lines: list[bytes]) -> Replay:
    """`lines` taken in as the worker takes them, the chronicle's chapters summarised by the
    model at `url` (`tests.streams.test_model_summaries`)."""

    async def run() -> Replay:
        client = ModelClient(url, "scripted", timeout_seconds=5.0)
        try:
            judge = Judge(client, JudgementLog(topic.read, topic.send))
            return await replay_judged(lines, summaries.projector(), judge)
        finally:
            await client.close()

    return asyncio.run(run())


def test_a_redelivery_sends_an_ack_an_earlier_release_stored_listing_every_refusal_bounded() -> (
    None
):
    """A release that listed every refused judgement kept the ack in the outbox, and could not
    send it: a redelivery to this one, read from that row, lists the first few and the count."""
    message = SourceMessage("rumourmill.events", 0, 7, b"save-1", crowd(1))
    state = MemoryState()
    projector = Projector(lambda t, w: POLICY)
    [ack] = projector.receive(state, message).acks
    [refused] = ack.model_dump(mode="json")["refused_judgements"]
    row_key = pack(OUTBOX, message.topic, message.partition, message.offset)
    row = OutboxRecord.from_bytes(state.get(row_key) or b"")
    every = [stored | {"refused_judgements": [refused] * CROWD} for stored in row.acks]
    state.put(row_key, OutboxRecord.encode(row.message_digest, every, []))
    again = projector.receive(state, message)
    assert again.redelivered
    [bounded] = again.acks
    assert record_bytes(b"save-1", Ack.__pydantic_serializer__.to_json(bounded)) < 20_000
    assert len(bounded.refused_judgements) == MOST_REFUSALS_LISTED
    assert bounded.more_refused_judgements == CROWD - MOST_REFUSALS_LISTED


LONG_REASON = "http_error: HTTP 502 " + "<p>the model's server is down for maintenance</p>" * 30
"""Why the model made no judgement, as a failing server says it (a page of HTML): an ack keeps
the first 1,000 characters of it, and 100 refusals so listed made an ack of 110 KB."""
GAP_FILLED = [crowd(100, seq=2), crowd(100, seq=3), crowd(100, seq=1)]
"""Two fights waiting for seq 1, then seq 1: the last message's acks are three, each for 100
refused judgements."""


def gap_filled(projector: Projector, state: MemoryState) -> Intake:
    """What the message filling the gap produced (`GAP_FILLED`, at offsets 0 to 2), the model
    down."""
    for offset, line in enumerate(GAP_FILLED):
        message = SourceMessage("rumourmill.events", 0, offset, b"save-1", line)
        intake = projector.receive(state, message, Unanswered(LONG_REASON))
    return intake


def outbox_row_bytes(state: MemoryState, offset: int) -> list[int]:
    """What each record of the outbox row of the message at `offset` takes of a changelog
    record batch (a row too large for one is kept in parts)."""
    row = pack(OUTBOX, "rumourmill.events", 0, offset)
    return [record_bytes(key, value) for key, value in state.scan(row)]


def assert_fit(intake: Intake, state: MemoryState, offset: int, limit: int) -> None:
    """Each of the message's acks, and its outbox row, fit a record of `limit` bytes; every
    refusal is listed or counted, the first listed, and each is recorded with the state."""
    assert max(outbox_row_bytes(state, offset)) <= limit
    assert [record_bytes(b"save-1", dumps(ack)) <= limit for ack in intake.acks] == [True] * 3
    assert [len(ack.refused_judgements) + ack.more_refused_judgements for ack in intake.acks] == [
        100
    ] * 3
    [first, *_] = intake.acks[0].refused_judgements
    assert first.reason == bounded_reason(LONG_REASON)
    for ack in intake.acks:
        assert ack.seq is not None
        parts = stored_parts(state, ("default", "save-1", "main", ack.seq, ""))
        recorded = [
            made for part in parts for made in EventJudgements.model_validate_json(part).judgements
        ]
        assert [(made.answer, made.reason) for made in recorded] == [(None, LONG_REASON)] * 100


def dumps(ack: Ack) -> bytes:
    """An ack as the worker sends it."""
    return Ack.__pydantic_serializer__.to_json(ack)


def test_the_refusals_a_messages_acks_list_fit_the_smallest_changelog_batch_setting() -> None:
    """Each ack listed its first 100 refusals whatever `RUMOURMILL_CHANGELOG_BATCH_BYTES` said
    (110 KB here; the outbox row, holding the three, 331 KB), which a broker whose messages the
    setting was lowered for refused: the worker stopped on it, at every restart. The acks list
    what fits in half the setting, and count the rest."""
    state = MemoryState()
    projector = Projector(lambda t, w: POLICY, record_bytes=SMALLEST_BATCH_BYTES)
    intake = gap_filled(projector, state)
    assert [ack.outcome for ack in intake.acks] == [Outcome.PROCESSED] * 3
    assert_fit(intake, state, 2, SMALLEST_BATCH_BYTES)
    # the listing stops at the first left out: the acks after it count theirs only
    assert [len(ack.refused_judgements) for ack in intake.acks] == [7, 0, 0]


def test_a_row_stored_under_a_larger_setting_is_sent_again_within_the_smaller_one() -> None:
    """An outbox row an earlier release (or a larger setting) stored, every ack listing 100
    refusals: redelivered to a worker of the smallest setting, its acks are sent bounded, and
    each counts what it no longer lists."""
    state = MemoryState()
    stored = gap_filled(Projector(lambda t, w: POLICY), state)
    assert [len(ack.refused_judgements) for ack in stored.acks] == [100] * 3
    assert sum(outbox_row_bytes(state, 2)) > 300_000
    message = SourceMessage("rumourmill.events", 0, 2, b"save-1", GAP_FILLED[-1])
    smaller = Projector(lambda t, w: POLICY, record_bytes=SMALLEST_BATCH_BYTES)
    again = smaller.receive(state, message)
    assert again.redelivered
    assert [len(ack.refused_judgements) for ack in again.acks] == [7, 0, 0]
    assert [ack.more_refused_judgements for ack in again.acks] == [93, 100, 100]
    assert max(record_bytes(b"save-1", dumps(ack)) for ack in again.acks) <= SMALLEST_BATCH_BYTES


def test_the_worker_bounds_the_refusals_its_acks_list_by_its_changelog_batch_setting(
    tmp_path: Path,
) -> None:
    """The worker's projector is given `RUMOURMILL_CHANGELOG_BATCH_BYTES` (its policies as it
    takes them from the policies topic)."""
    settings = Settings(
        data_dir=tmp_path, changelog_batch_bytes=SMALLEST_BATCH_BYTES, max_event_bytes=8192
    )
    mill = create_app(settings)
    mill.policies.take(policy_key("default", "save-1"), orjson.dumps(MODEL_MODE))
    state = MemoryState()
    intake = gap_filled(mill.projector, state)
    assert_fit(intake, state, 2, SMALLEST_BATCH_BYTES)
